import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TUntypedContract } from '../ts/client/admin.js';
import { fieldProblemReasons } from '../ts/core/validation.js';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { problemsOf } from './helpers/refusals.js';

/**
 * The input refusal of every administrator's method, through the real pipeline: a request with a
 * member no method has is refused `invalid-request` with field tokens only in `reasons`, and every
 * problem, the unknown member among them, is a cause with its path, its token and a sentence that
 * does not repeat the path.
 */

let t: ITestCloudly;

before(async () => {
  t = await startTestCloudly();
});

after(async () => {
  await t.stop();
});

const tokens = new Set<string>(Object.values(fieldProblemReasons));

const assertInputRefusal = (methodArg: string, refusalArg: Record<string, unknown>, expectedArg: [string, string]): void => {
  const context = `${methodArg}: ${JSON.stringify(refusalArg)}`;
  assert.equal(refusalArg.code, 'invalid-request', context);
  assert.equal(refusalArg.retryable, false, context);
  const problems = problemsOf(refusalArg);
  assert.ok(problems.length > 0, context);
  for (const [path, reason, message] of problems) {
    assert.ok(typeof path === 'string' && /^request(\.|\[|$)/.test(path), `path ${path} in ${context}`);
    assert.ok(typeof reason === 'string' && tokens.has(reason), `token ${reason} in ${context}`);
    assert.ok(message.length > 0 && !message.startsWith(path!), `message ${message} in ${context}`);
  }
  assert.deepEqual(refusalArg.reasons, [...new Set(problems.map(([, reason]) => reason))], context);
  assert.ok(problems.some(([path, reason]) => path === expectedArg[0] && reason === expectedArg[1]), `${expectedArg.join(' ')} in ${context}`);
};

test('every administrator method refuses an unknown member with field tokens in reasons and every problem a cause', async (tc) => {
  const methods = [...t.cloudly.servedMethods.values()].filter((servedArg) => servedArg.caller === 'admin').map((servedArg) => servedArg.method);
  // Every domain's methods are here, not a few.
  assert.ok(methods.length >= 60, `only ${methods.length} admin methods`);
  for (const method of methods) {
    const refusal = await refusalOf(() => t.caller.call<TUntypedContract>(method, { notAMemberOfAnyRequest: 1 }));
    assertInputRefusal(method, refusal, ['request.notAMemberOfAnyRequest', fieldProblemReasons.unknown]);
  }
  tc.diagnostic(`${methods.length} admin methods refused an unknown member with field problems`);
});

test('a dry-run flag that is not a boolean is a field problem of request.dryRun, before the method\'s own shape', async () => {
  const refusal = await refusalOf(() => t.caller.call<TUntypedContract>('createCluster', { name: 'x', dryRun: 'yes' }));
  assert.deepEqual(refusal, {
    code: 'invalid-request',
    retryable: false,
    reasons: [fieldProblemReasons.invalid],
    causes: [{ path: 'request.dryRun', reason: fieldProblemReasons.invalid, message: 'must be a boolean' }],
  });
});

test('a string past its limit is field-too-long, a list past its limit field-too-many, a missing member field-required', async () => {
  const long = await refusalOf(() => t.caller.call<TUntypedContract>('createCluster', { name: 'x'.repeat(500) }));
  assertInputRefusal('createCluster', long, ['request.name', fieldProblemReasons.tooLong]);
  const many = await refusalOf(() => t.caller.call<TUntypedContract>('watchChanges', { kinds: Array.from({ length: 1000 }, () => 'CloudlyCluster') }));
  assertInputRefusal('watchChanges', many, ['request.kinds', fieldProblemReasons.tooMany]);
  const missing = await refusalOf(() => t.caller.call<TUntypedContract>('getClusterById', {}));
  assertInputRefusal('getClusterById', missing, ['request.clusterId', fieldProblemReasons.required]);
});
