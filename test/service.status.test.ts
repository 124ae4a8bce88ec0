import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { IService, IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import type { TServiceVolumeInitialization } from '../ts/interfaces/data/servicevolume.js';
import { getRuntimeLocalStorageClaimReference } from '../ts/interfaces/data/runtimelocalstorageclaim.js';
import { judgeServiceRuntime, type IServiceRuntimeFacts } from '../ts/manager.service/runtimestatus.js';
import { assertFieldProblems } from './helpers/refusals.js';

let t: ITestCloudly;
let clusterId: string;

before(async () => {
  t = await startTestCloudly();
  clusterId = (await t.createCluster('status')).cluster.id;
  await t.addNodes(clusterId, 'n1', 'n2');
});

after(async () => {
  await t.stop();
});

const spec = (overrides: Partial<IServiceWritableSpec> = {}): IServiceWritableSpec => ({
  name: 'app',
  organizationId: 'org1',
  clusterId,
  runtime: { image: 'app:1', replicas: 1, profile: { runAs: { user: 1000, group: 1000 } }, placement: { nodeIds: ['n1'] } },
  volumes: [{ mountPath: '/data', readOnly: false, driver: 'local' }],
  ...overrides,
});

const create = async (overrides: Partial<IServiceWritableSpec> = {}) =>
  (await t.caller.call('createService', { service: spec(overrides) })).service;

const statusOf = async (serviceIdArg: string) =>
  (await t.caller.call('getServiceRuntimeStatus', { serviceId: serviceIdArg })).status;

const initialize = (serviceIdArg: string, initializationArg: TServiceVolumeInitialization) =>
  t.caller.call('setServiceVolumeInitialization', {
    serviceId: serviceIdArg, mountPath: '/data', expected: null, initialization: initializationArg,
  });

const runAsEmpty: TServiceVolumeInitialization = { kind: 'empty', ownership: { kind: 'run-as', mode: 0o700 } };

test('each volume refusal is named for the spec revision', async () => {
  const cases: Array<[Partial<IServiceWritableSpec>, TServiceVolumeInitialization | null, string]> = [
    [{ volumes: [{ mountPath: '/data', readOnly: false, driver: 'nfs' }] }, runAsEmpty, 'volume-driver-unsupported'],
    [{ volumes: [{ mountPath: '/data', readOnly: false, driver: 'local', driverOptions: { o: 'bind' } }] }, runAsEmpty, 'volume-options-unsupported'],
    [{ volumes: [{ mountPath: '/data', readOnly: false, driver: 'local', mountOptions: ['noexec'] }] }, runAsEmpty, 'volume-options-unsupported'],
    [{ runtime: { image: 'a', replicas: 3, profile: { runAs: null }, placement: { nodeIds: ['n1'] } } }, runAsEmpty, 'volume-shared-unsupported'],
    [{ runtime: { image: 'a', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['n1', 'n2'] } } }, runAsEmpty, 'volume-placement-unsupported'],
    [{ runtime: { image: 'a', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } } }, runAsEmpty, 'volume-placement-unsupported'],
    [{}, null, 'volume-initialization-unknown'],
    [{ runtime: { image: 'a', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['n1'] } } }, runAsEmpty, 'volume-ownership-unknown'],
  ];
  for (const [overrides, initialization, reason] of cases) {
    const service = await create(overrides);
    if (initialization) {
      await initialize(service.id, initialization);
    }
    const status = await statusOf(service.id);
    assert.deepEqual({ state: status.state, reason: status.reason, id: status.id, specRevision: status.specRevision },
      { state: 'refused', reason, id: service.id, specRevision: 1 }, reason);
  }
});

test('a service on an unknown cluster is refused not-found, and one placed on nodes its cluster lacks names each node', async () => {
  const unknownCluster = await refusalOf(() => create({ clusterId: 'cluster-unknown' }));
  assert.deepEqual(unknownCluster, {
    code: 'not-found', retryable: false, reasons: ['cluster-not-found'], causes: [{ path: 'request.service.clusterId', message: 'names no cluster: cluster-unknown' }],
  });
  const unknownNodes = await refusalOf(() => create({
    runtime: { image: 'a', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['n1', 'n9', 'n8'] } },
  }));
  assertFieldProblems(unknownNodes, [
    ['request.service.runtime.placement.nodeIds[1]', 'field-not-found', `names no node of cluster ${clusterId}: n9`],
    ['request.service.runtime.placement.nodeIds[2]', 'field-not-found', `names no node of cluster ${clusterId}: n8`],
  ]);
  const before = await t.caller.call('getServices', {});
  const service = await create({ volumes: [] });
  const moved = await refusalOf(() => t.caller.call('updateService', {
    serviceId: service.id, expectedGeneration: service.generation,
    service: spec({ volumes: [], runtime: { image: 'a', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['gone'] } } }),
  }));
  assert.equal(moved.code, 'invalid-request');
  assert.equal((await t.caller.call('getServices', {})).services.length, before.services.length + 1);
});

test('a service with nothing in its way is converging; changedAt moves only with the verdict', async () => {
  const service = await create({ volumes: [] });
  const first = await statusOf(service.id);
  assert.deepEqual({ state: first.state, reason: first.reason }, { state: 'converging', reason: null });
  const again = await statusOf(service.id);
  assert.equal(again.changedAt, first.changedAt);
  const updated = (await t.caller.call('updateService', {
    serviceId: service.id, expectedGeneration: service.generation,
    service: spec({ volumes: [{ mountPath: '/data', readOnly: false, driver: 'nfs' }] }),
  })).service;
  const refused = await statusOf(service.id);
  assert.equal(updated.specRevision, 1);
  assert.deepEqual({ state: refused.state, reason: refused.reason }, { state: 'refused', reason: 'volume-driver-unsupported' });
  assert.ok(refused.changedAt >= first.changedAt);
});

test('a service on a cluster still on Swarm or in its cutover is refused cluster-runtime-missing, until the cluster reaches Pallet', async () => {
  const { cluster } = await t.createCluster('status-phase');
  await t.addNodes(cluster.id, 'n1');
  const service = await create({ clusterId: cluster.id, volumes: [] });
  const verdict = async () => statusOf(service.id).then((status) => [status.state, status.reason]);
  assert.deepEqual(await verdict(), ['converging', null]);
  const ingress = t.cloudly.ingressManager;
  let runtime = await ingress.readClusterRuntime(cluster.id);
  for (const phase of ['swarm', 'cutover'] as const) {
    runtime = (await ingress.changeClusterRuntimePhase(cluster.id, runtime.generation, phase))!;
    assert.equal(runtime.phase, phase);
    assert.deepEqual(await verdict(), ['refused', 'cluster-runtime-missing'], `phase ${phase}`);
  }
  runtime = (await ingress.changeClusterRuntimePhase(cluster.id, runtime.generation, 'pallet'))!;
  assert.deepEqual(await verdict(), ['converging', null]);
});

test('an import claim whose bytes have not arrived waits storage-import-pending, until the node holds it ready', async () => {
  const { cluster, relayToken } = await t.createCluster('status-import');
  await t.addNodes(cluster.id, 'n1');
  let bytesArrived = false;
  const relay = await t.connectRelay(relayToken);
  relay.addHandler('applyRuntimeLocalStorageClaim', async (request) => ({
    status: 'accepted',
    state: bytesArrived ? 'ready' : 'import-required',
    claim: getRuntimeLocalStorageClaimReference(request.claim),
  }));
  await relay.fire('reportRuntimeNodeSession', {
    nodeId: 'n1', session: { id: 's1', generation: 1 },
  });
  const service = await create({ clusterId: cluster.id });
  await initialize(service.id, { kind: 'import', source: { kind: 'docker-volume', volumeName: 'app_data' } });
  const claims = async () =>
    (await t.caller.call('getRuntimeLocalStorageClaims', { serviceId: service.id })).claims;
  await waitFor(async () => (await claims()).at(-1)?.nodeState === 'import-required', 'import required');
  assert.deepEqual(
    await statusOf(service.id).then((status) => [status.state, status.reason]),
    ['waiting', 'storage-import-pending'],
  );
  bytesArrived = true;
  await t.cloudly.serviceManager.pushPendingClaims(cluster.id);
  await waitFor(async () => (await claims()).at(-1)?.nodeState === 'ready', 'import finished');
  assert.deepEqual(await statusOf(service.id).then((status) => [status.state, status.reason]), ['converging', null]);
});

test('an enabled platform binding that is not ready yet waits bindings-pending', async () => {
  const service = await create({ volumes: [] });
  await t.caller.call('upsertPlatformBinding', {
    platformBinding: { serviceId: service.id, capability: 'database', enabled: true, nodeId: null },
    expectedGeneration: null,
  });
  const status = await statusOf(service.id);
  assert.deepEqual([status.state, status.reason], ['waiting', 'bindings-pending']);
});

test('legacy-adoption-pending names the wait before bindings-pending (the pure judge)', async () => {
  const service = await create({ volumes: [] });
  const facts = (bindings: IServiceRuntimeFacts['bindings']): IServiceRuntimeFacts => ({
    service: service as IService, claimMarkers: [], clusterExists: true, claims: [], bindings,
  });
  assert.deepEqual(judgeServiceRuntime(facts({ bindingsPending: true, legacyAdoptionPending: true })), { state: 'waiting', reason: 'legacy-adoption-pending' });
  assert.deepEqual(judgeServiceRuntime(facts({ bindingsPending: true, legacyAdoptionPending: false })), { state: 'waiting', reason: 'bindings-pending' });
  assert.deepEqual(judgeServiceRuntime(facts({ bindingsPending: false, legacyAdoptionPending: false })), { state: 'converging', reason: null });
  assert.deepEqual(judgeServiceRuntime({ ...facts({ bindingsPending: true, legacyAdoptionPending: true }), clusterExists: false }),
    { state: 'refused', reason: 'cluster-runtime-missing' });
  // The manager's side of the seam, a relay reporting the adoption wait for real, is in
  // test/corestore.bindings.test.ts ('the relay reports a status with its paired reason').
});

test('a read-only user reads the runtime status, an identity of no account is refused; an unknown service is not-found', async () => {
  const service = await create({ volumes: [] });
  const ghost = await t.cloudly.auth.issueIdentity({ id: 'u2', username: 'viewer', role: 'user' });
  const refusal = await refusalOf(() => t.admin.fire('getServiceRuntimeStatus', {
    identity: ghost, serviceId: service.id,
  }));
  assert.deepEqual(refusal, { code: 'unauthenticated', retryable: false, reasons: ['account-deleted'], causes: [{ path: 'identity', message: 'names no account (deleted)' }] });
  // Accounts (docs/api-dashboard.md): a `user` may call every read.
  await t.caller.call('createUser', { username: 'status-viewer', password: 'status-viewer-password', role: 'user' });
  const { identity: viewer } = await t.admin.fire('adminLoginWithUsernameAndPassword', { username: 'status-viewer', password: 'status-viewer-password' }) as { identity: typeof ghost };
  const read = await t.admin.fire('getServiceRuntimeStatus', { identity: viewer, serviceId: service.id });
  assert.equal(read.status.id, service.id);
  const missing = await refusalOf(() => statusOf('svc-none'));
  assert.equal(missing.code, 'not-found');
});
