import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { TypedRequest, TypedResponseError } from '@api.global/typedrequest';
import { startTestCloudly, testAdminPassword, testAdminUsername, type ITestCloudly } from './helpers/cloudly.js';
import { descriptorOf, chunked } from './backup.fixture.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IIdentity } from '../ts/interfaces/data/user.js';
import type { IReq_Cloudly_Relay_BackupClusterService } from '../ts/interfaces/requests/backup.js';

/**
 * The main admin flows through the ecosystem's published client, `TypedRequest` from
 * `@api.global/typedrequest`, over HTTP, as a dashboard author would use it: login, create a
 * cluster, list, create a service, a backup operation followed to completion, a refusal, a slow
 * call, and the server stopped. The client keeps a cache of earlier answers and falls back to it
 * on failures unless the server forbids caching; every call here must get its own answer (or
 * throw), never another call's.
 */

let t: ITestCloudly;
let relay: CloudlyRelayClient;
let endpoint: string;
let identity: IIdentity;
/** Every answer any call got, with the method that asked: no answer may belong to another method. */
const answers: Array<{ method: string; answer: Record<string, unknown> }> = [];

/** One call through the published client; the answer's members must be the method's own. */
const published = async <TAnswer extends Record<string, unknown>>(methodArg: string, requestArg: Record<string, unknown>, withIdentityArg = true): Promise<TAnswer> => {
  const request = new TypedRequest<{ method: string; request: Record<string, unknown>; response: TAnswer }>(endpoint, methodArg);
  const answer = await request.fire(withIdentityArg ? { ...requestArg, identity } : requestArg);
  answers.push({ method: methodArg, answer });
  return answer;
};

/** The members each method answers with; a member of another method's answer fails the test. */
const answerMembers: Record<string, string[]> = {
  adminLoginWithUsernameAndPassword: ['identity'],
  createCluster: ['cluster', 'relayToken'],
  getClusters: ['clusters'],
  addClusterNode: ['node'],
  createService: ['service'],
  createServiceBackup: ['backup', 'operation'],
  getOperation: ['operation'],
  getServiceBackups: ['backups'],
  getCorestoreLegacyResources: ['inventory'],
};

const closure = randomBytes(512 * 1024 + 3);

before(async () => {
  // Ordinary relay calls end after 1.5 s: the slow call below waits that long for its refusal.
  t = await startTestCloudly({ relayCallTimeoutMs: 1_500 });
  endpoint = `${t.baseUrl}/typedrequest`;
});
after(async () => {
  relay?.close();
  await t.stop().catch(() => undefined);
});

test('login, create a cluster, list, create a service: each answer is its own method\'s', async () => {
  ({ identity } = await published<{ identity: IIdentity }>('adminLoginWithUsernameAndPassword', { username: testAdminUsername, password: testAdminPassword }, false));
  assert.equal(identity.name, testAdminUsername);
  const created = await published<{ cluster: { id: string; name: string }; relayToken: string }>('createCluster', { name: 'published-client' });
  assert.equal(created.cluster.name, 'published-client');
  const listed = await published<{ clusters: Array<{ id: string }> }>('getClusters', {});
  assert.deepEqual(listed.clusters.map((clusterArg) => clusterArg.id), [created.cluster.id]);
  assert.ok(!JSON.stringify(listed).includes(created.relayToken), 'a list never carries the relay token');
  await published('addClusterNode', { clusterId: created.cluster.id, name: 'pc-node', nodeId: 'pc-node' });
  const { service } = await published<{ service: { id: string } }>('createService', {
    service: {
      name: 'pc-db', organizationId: 'org-1', clusterId: created.cluster.id,
      runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } }, volumes: [],
    },
  });
  relay = await t.connectRelay(created.relayToken);
  relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    await sendServiceDatabaseClosure(relay, { backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closure) }, chunked(closure, 64 * 1024));
    return { snapshots: [] };
  });
  // A relay call that never answers: the slow call.
  relay.addHandler('getClusterCorestoreLegacyResources', () => new Promise(() => undefined));
  Object.assign(shared, { clusterId: created.cluster.id, serviceId: service.id });
});

const shared: { clusterId: string; serviceId: string } = { clusterId: '', serviceId: '' };

test('a backup answers its operation at once and is followed to completion through getOperation', async () => {
  const started = await published<{ backup: { backupId: string; state: string }; operation: { operationId: string; state: string } }>('createServiceBackup', {
    clusterId: shared.clusterId, nodeId: 'pc-node', serviceId: shared.serviceId,
  });
  assert.equal(started.operation.state, 'running');
  let operation: { state: string; progress: { bytesDone: number }; result?: { backup: { closure?: { descriptor: { byteLength: number } } } } };
  const deadline = Date.now() + 20_000;
  do {
    ({ operation } = await published<{ operation: typeof operation }>('getOperation', { operationId: started.operation.operationId }));
    await new Promise((resolve) => setTimeout(resolve, 30));
  } while (operation.state === 'running' && Date.now() < deadline);
  assert.equal(operation.state, 'completed');
  assert.equal(operation.progress.bytesDone, closure.byteLength);
  assert.equal(operation.result?.backup.closure?.descriptor.byteLength, closure.byteLength);
  const { backups } = await published<{ backups: Array<{ backupId: string; state: string }> }>('getServiceBackups', { serviceId: shared.serviceId });
  assert.deepEqual(backups.map((backupArg) => [backupArg.backupId, backupArg.state]), [[started.backup.backupId, 'completed']]);
});

test('a refusal arrives as a TypedResponseError with its error data, not as an earlier answer', async () => {
  await assert.rejects(published('createCluster', { name: '' }), (error: unknown) => {
    assert.ok(error instanceof TypedResponseError);
    assert.equal((error.errorData as { code: string }).code, 'invalid-request');
    return true;
  });
  await assert.rejects(published('getClusters', {}, false), (error: unknown) =>
    error instanceof TypedResponseError && (error.errorData as { code: string }).code === 'unauthenticated');
});

test('a slow call gets its own answer (its refusal) while quick calls beside it get theirs', async () => {
  const slow = published('getCorestoreLegacyResources', { clusterId: shared.clusterId, nodeId: 'pc-node' }).then(
    (answerArg) => ({ answer: answerArg }),
    (errorArg: unknown) => ({ error: errorArg }),
  );
  const quick = await Promise.all(Array.from({ length: 5 }, () => published<{ clusters: unknown[] }>('getClusters', {})));
  assert.ok(quick.every((answerArg) => answerArg.clusters.length === 1));
  const outcome = await slow;
  assert.ok('error' in outcome, `the slow call was answered with ${JSON.stringify((outcome as { answer?: unknown }).answer)}`);
  assert.ok(outcome.error instanceof TypedResponseError);
  assert.deepEqual((outcome.error.errorData as { reasons: string[] }).reasons, ['relay-timeout']);
});

test('with the server stopped a call throws; it never answers with an earlier call\'s answer', async () => {
  relay.close();
  await t.stop();
  for (const method of ['getClusters', 'createCluster', 'getOperation']) {
    const outcome = await published(method, method === 'createCluster' ? { name: 'after-stop' } : method === 'getOperation' ? { operationId: 'op-x' } : {}).then(
      (answerArg) => ({ answer: answerArg }),
      (errorArg: unknown) => ({ error: errorArg }),
    );
    assert.ok('error' in outcome, `${method} answered ${JSON.stringify((outcome as { answer?: unknown }).answer)} with the server stopped`);
  }
  // Every answer any call got was its own method's.
  for (const { method, answer } of answers) {
    assert.deepEqual(Object.keys(answer).sort(), [...answerMembers[method]].sort(), `${method} answered ${Object.keys(answer).join(', ')}`);
  }
});
