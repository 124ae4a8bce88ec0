import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import type { TUntypedContract } from '../ts/client/admin.js';
import { assertFieldProblems } from './helpers/refusals.js';

const postRaw = async (baseUrlArg: string, bodyArg: string) => {
  const response = await fetch(`${baseUrlArg}/typedrequest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: bodyArg,
  });
  return { status: response.status, body: await response.json() as { error?: { data: { code: string; reasons?: string[]; causes?: Array<{ path?: string; message: string }> } }; response?: unknown } };
};

const envelope = (methodArg: string, requestArg: unknown) => JSON.stringify({
  method: methodArg,
  request: requestArg,
  response: null,
  correlation: { id: 'c-1', phase: 'request' },
});

describe('HTTP transport: bad input gets named refusals and changes nothing', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly({ bodyLimitBytes: 64 * 1024 }); });
  after(async () => { await t.stop(); });

  const clusterCount = async () => (await t.admin.call('getClusters', {})).clusters.length;

  test('malformed JSON is refused as invalid-request with a reason', async () => {
    const answer = await postRaw(t.baseUrl, '{"method": "createCluster", ');
    assert.equal(answer.status, 400);
    assert.equal(answer.body.error?.data.code, 'invalid-request');
    assert.deepEqual(answer.body.error?.data.reasons, ['not-json']);
    assert.deepEqual(answer.body.error?.data.causes, [{ path: 'body', reason: 'not-json', message: 'is not valid JSON' }]);
  });

  test('an envelope without correlation is refused, naming what is missing', async () => {
    const answer = await postRaw(t.baseUrl, JSON.stringify({ method: 'getClusters', request: {} }));
    assert.equal(answer.status, 400);
    assert.equal(answer.body.error?.data.code, 'invalid-request');
    assert.deepEqual(answer.body.error!.data.reasons, ['envelope-invalid']);
    assert.deepEqual(answer.body.error!.data.causes?.map((causeArg) => causeArg.path), ['correlation']);
  });

  test('an unknown method is refused by name', async () => {
    const answer = await postRaw(t.baseUrl, envelope('noSuchMethod', {}));
    assert.equal(answer.body.error?.data.code, 'invalid-request');
    assert.deepEqual(answer.body.error?.data.reasons, ['method-not-served']);
    assert.deepEqual(answer.body.error?.data.causes, [{ path: 'method', message: 'method noSuchMethod is not served' }]);
  });

  test('missing, extra and mistyped fields are all named in one refusal, nothing stored', async () => {
    const before = await clusterCount();
    const data = await refusalOf(() => t.admin.fire<TUntypedContract>('createCluster', { identity: t.identity, name: 42, colour: 'red' }));
    assert.equal(data.code, 'invalid-request');
    assertFieldProblems(data, [
      ['request.name', 'field-invalid', 'must be a string of 1 to 64 characters'],
      ['request.colour', 'field-unknown', 'is not a field of this request'],
    ]);
    const missing = await refusalOf(() => t.admin.fire<TUntypedContract>('createCluster', { identity: t.identity }));
    assertFieldProblems(missing, [['request.name', 'field-required', 'is required']]);
    assert.equal(await clusterCount(), before);
  });

  test('a request that is not an object is refused, not crashed on', async () => {
    const answer = await postRaw(t.baseUrl, envelope('getClusters', null));
    assert.equal(answer.body.error?.data.code, 'invalid-request');
  });

  test('a body over the limit is refused with 413 and the server keeps serving', async () => {
    const huge = envelope('createCluster', { identity: t.identity, name: 'x'.repeat(200_000) });
    const answer = await postRaw(t.baseUrl, huge);
    assert.equal(answer.status, 413);
    assert.equal(answer.body.error?.data.code, 'invalid-request');
    assert.deepEqual(answer.body.error!.data.reasons, ['frame-too-large']);
    assert.deepEqual(answer.body.error!.data.causes, [{ path: 'body', message: 'exceeds 65536 bytes' }]);
    assert.equal(typeof await clusterCount(), 'number');
  });

  test('an unexpected handler failure leaves as internal with an error id, no stack, and is logged', async () => {
    t.cloudly.addAdminHandler('testExplodes', async () => {
      throw new Error('secret internal detail');
    }, { access: 'write' });
    const data = await refusalOf(() => t.admin.call<TUntypedContract>('testExplodes', {}));
    assert.equal(data.code, 'internal');
    assert.equal(typeof data.errorId, 'string');
    assert.equal(JSON.stringify(data).includes('secret internal detail'), false);
    assert.ok(t.logs.some((line) => line.includes(data.errorId as string) && line.includes('secret internal detail')));
  });

  test('a handler that answers nothing is reported as internal, never as null', async () => {
    t.cloudly.addAdminHandler('testAnswersNothing', async () => null as unknown as object, { access: 'write' });
    const data = await refusalOf(() => t.admin.call<TUntypedContract>('testAnswersNothing', {}));
    assert.equal(data.code, 'internal');
  });

  test('health, readiness, metrics and JWKS are served', async () => {
    assert.equal((await fetch(`${t.baseUrl}/livez`)).status, 200);
    const ready = await fetch(`${t.baseUrl}/readyz`);
    assert.equal(ready.status, 200);
    assert.equal(((await ready.json()) as { database: string }).database, 'reachable');
    const metrics = await (await fetch(`${t.baseUrl}/metrics`)).text();
    assert.match(metrics, /cloudly_calls_total\{method="getClusters",outcome="ok",transport="http"\} \d+/);
    assert.match(metrics, /cloudly_calls_total\{method="createCluster",outcome="invalid-request",transport="http"\} \d+/);
    assert.match(metrics, /cloudly_call_duration_seconds_bucket/);
    assert.match(metrics, /cloudly_relay_sockets_open 0/);
    const jwks = await (await fetch(`${t.baseUrl}/.well-known/jwks.json`)).json() as { keys: Array<{ kid: string; kty: string; d?: string }> };
    assert.equal(jwks.keys.length, 1);
    assert.equal(jwks.keys[0].kty, 'RSA');
    assert.equal(jwks.keys[0].d, undefined);
  });
});

describe('readiness follows the database', () => {
  test('/readyz fails once the database is gone, /livez still answers', async () => {
    const t = await startTestCloudly();
    try {
      await t.cloudly.database.smartdataDb.mongoDbClient.close();
      const ready = await fetch(`${t.baseUrl}/readyz`);
      assert.equal(ready.status, 503);
      assert.equal((await fetch(`${t.baseUrl}/livez`)).status, 200);
    } finally {
      await t.stop().catch(() => undefined);
    }
  });
});
