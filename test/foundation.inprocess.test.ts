import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createCaller, dispatchInProcess, refusalOf, startTestCloudly, testAdminPassword, testAdminUsername, type ITestCloudly } from './helpers/cloudly.js';
import type { TUntypedContract } from '../ts/client/admin.js';

/**
 * The in-process caller (test/helpers/cloudly.ts): a call through `cloudly.dispatch` answers
 * what the same call over HTTP answers, refusals included, so a domain test may use either.
 */

let t: ITestCloudly;

before(async () => {
  t = await startTestCloudly();
});

after(async () => {
  await t.stop();
});

test('in process and over HTTP: the same answers, the same writes', async () => {
  const created = await t.caller.call('createCluster', { name: 'in-process' });
  assert.deepEqual((await t.admin.call('getClusterById', { clusterId: created.cluster.id })).cluster, created.cluster);
  assert.deepEqual(await t.caller.call('getClusters', {}), await t.admin.call('getClusters', {}));
});

test('in process and over HTTP: the same refusal with every reason', async () => {
  const badName = { name: '' };
  const overHttp = await refusalOf(() => t.admin.call('createCluster', badName));
  const inProcess = await refusalOf(() => t.caller.call('createCluster', badName));
  assert.deepEqual(inProcess, overHttp);
  assert.equal(inProcess.code, 'invalid-request');
  const unknownMethod = await refusalOf(() => t.caller.call<TUntypedContract>('noSuchMethod', {}));
  assert.deepEqual(unknownMethod, await refusalOf(() => t.admin.call<TUntypedContract>('noSuchMethod', {})));
});

test('identity is checked in process too: none, or a forged one, is refused like over HTTP', async () => {
  const anonymous = createCaller(t.cloudly);
  const noIdentity = await refusalOf(() => anonymous.fire<TUntypedContract>('getClusters', {}));
  assert.deepEqual(noIdentity, await refusalOf(() => t.admin.fire<TUntypedContract>('getClusters', {})));
  const forged = createCaller(t.cloudly, { ...t.identity, jwt: `${t.identity.jwt.slice(0, -8)}AAAAAAAA` });
  assert.equal((await refusalOf(() => forged.call('getClusters', {}))).code, 'unauthenticated');
  // A login in process issues an identity that works over HTTP.
  const identity = await anonymous.login(testAdminUsername, testAdminPassword);
  assert.ok(identity.jwt);
  assert.deepEqual((await dispatchInProcess(t.cloudly)('getClusters', { identity })), await t.admin.call('getClusters', {}));
});
