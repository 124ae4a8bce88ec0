import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';

import type { IReq_Admin_DeletePlatformBinding } from '../ts/interfaces/requests/corestore.js';
import { clusterKind } from '../ts/manager.cluster/cluster.manager.js';
import { clusterNameReservationId, clusterNameReservationKind } from '../ts/manager.cluster/clusternames.js';
import { runInOperation } from '../ts/core/operationcontext.js';

let t: ITestCloudly;

before(async () => {
  t = await startTestCloudly();
});

after(async () => {
  await t.stop();
});

const clustersNamed = async (nameArg: string) =>
  (await t.caller.call('getClusters', {})).clusters.filter((cluster) => cluster.name === nameArg);

test('50 concurrent createCluster of one name make exactly one cluster; the others are refused conflict', async () => {
  const outcomes = await Promise.allSettled(Array.from({ length: 50 }, () =>
    t.caller.call('createCluster', { name: 'contended' })));
  const created = outcomes.filter((outcome) => outcome.status === 'fulfilled');
  assert.equal(created.length, 1);
  for (const outcome of outcomes) {
    if (outcome.status === 'rejected') {
      assert.equal((outcome.reason as { errorData: { code: string } }).errorData.code, 'conflict');
    }
  }
  assert.equal((await clustersNamed('contended')).length, 1);
  const again = await refusalOf(() => t.createCluster('contended'));
  assert.deepEqual(again, { code: 'conflict', retryable: true, reasons: ['cluster-name-taken'], causes: [{ path: 'request.name', message: 'a cluster named contended already exists' }] });
});

test('a creation that died after its reservation is rolled forward at start-up; a deleted cluster is not', async () => {
  // What a process that died between the two inserts leaves: a pending reservation, no cluster.
  const cluster = { id: 'cluster-half', name: 'half-made', createdAt: Date.now(), relayTokenHash: 'x'.repeat(64), relayTokenGeneration: 1 };
  await runInOperation({ actor: { kind: 'cloudly', id: 'cloudly' }, method: 'test', dryRun: false }, () =>
    t.cloudly.store.insert(clusterNameReservationKind, { id: clusterNameReservationId('half-made'), name: 'half-made', clusterId: cluster.id, state: 'pending', cluster }));
  // And a deletion that died after the cluster's removal: a bound reservation, no cluster.
  await runInOperation({ actor: { kind: 'cloudly', id: 'cloudly' }, method: 'test', dryRun: false }, () =>
    t.cloudly.store.insert(clusterNameReservationKind, {
      id: clusterNameReservationId('half-gone'), name: 'half-gone', clusterId: 'cluster-gone', state: 'bound', cluster: { ...cluster, id: 'cluster-gone', name: 'half-gone' },
    }));
  await t.restart();
  assert.equal((await clustersNamed('half-made')).length, 1);
  assert.equal((await t.cloudly.store.get(clusterNameReservationKind, clusterNameReservationId('half-made')))?.state, 'bound');
  assert.equal(await t.cloudly.store.get(clusterNameReservationKind, clusterNameReservationId('half-gone')), null);
  assert.equal(await t.cloudly.store.get(clusterKind, 'cluster-gone'), null);
  assert.equal((await t.createCluster('half-gone')).cluster.name, 'half-gone');
});

test('deleteCluster: compare-and-swap, refused while services exist, removes nodes and the name, closes relay sockets', async () => {
  const { cluster, relayToken } = await t.createCluster('doomed');
  await t.addNodes(cluster.id, 'd1', 'd2');
  const relay = await t.connectRelay(relayToken);
  const { service } = await t.caller.call('createService', {
    service: {
      name: 'web', organizationId: 'org1', clusterId: cluster.id,
      runtime: { image: 'nginx:1', replicas: 1, profile: { runAs: { user: 101, group: 101 } }, placement: { nodeIds: ['d1'] } },
      volumes: [],
    },
  });
  const withServices = await refusalOf(() => t.caller.call('deleteCluster', { clusterId: cluster.id, expectedGeneration: cluster.generation }));
  assert.equal(withServices.code, 'conflict');
  assert.deepEqual(withServices.reasons, ['cluster-has-services']);
  const [hasServices] = withServices.causes as Array<{ path?: string; message: string }>;
  assert.equal(hasServices.path, 'request.clusterId');
  assert.match(hasServices.message, /^still has 1 service\(s\) \(/);
  await t.caller.call('deleteService', { serviceId: service.id, expectedGeneration: service.generation, force: true });
  const stale = await refusalOf(() => t.caller.call('deleteCluster', { clusterId: cluster.id, expectedGeneration: cluster.generation + 5 }));
  assert.deepEqual(stale.reasons, ['generation-mismatch']);
  assert.deepEqual(stale.causes, [{ path: 'request.expectedGeneration', message: "is not the cluster's current generation" }]);
  const current = (await t.caller.call('getClusters', {})).clusters.find((entry) => entry.id === cluster.id)!;

  const dry = await t.caller.call('deleteCluster', { clusterId: cluster.id, expectedGeneration: current.generation, dryRun: true } as never) as Record<string, unknown>;
  assert.equal(dry.dryRun, true);
  assert.equal(dry.removedNodes, 2);
  assert.equal(relay.isOpen, true, 'a dry run closes no socket');
  assert.equal((await t.caller.call('getClusterNodes', { clusterId: cluster.id })).nodes.length, 2);

  const real = await t.caller.call('deleteCluster', { clusterId: cluster.id, expectedGeneration: current.generation });
  const { dryRun: _dryRun, ...dryAnswer } = dry;
  assert.deepEqual(real, dryAnswer, 'the dry answer is the real answer');
  assert.equal(real.closedSockets, 1);
  for (let wait = 0; wait < 100 && relay.isOpen; wait++) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(relay.isOpen, false, 'the relay socket is closed');
  assert.equal((await refusalOf(() => t.caller.call('getClusterById', { clusterId: cluster.id }))).code, 'not-found');
  assert.equal((await t.cloudly.store.find(clusterKind, { id: cluster.id })).length, 0);
  assert.equal((await t.cloudly.clusterManager.nodes.listNodes(cluster.id)).length, 0);
  assert.equal(await t.cloudly.store.get(clusterNameReservationKind, clusterNameReservationId('doomed')), null);
  // The name is free again.
  assert.equal((await t.createCluster('doomed')).cluster.name, 'doomed');
});

test('deletePlatformBinding: compare-and-swap; a dry run removes nothing; the binding is gone after', async () => {
  const { cluster } = await t.createCluster('bound');
  await t.addNodes(cluster.id, 'b1');
  const { service } = await t.caller.call('createService', {
    service: {
      name: 'bound-svc', organizationId: 'org1', clusterId: cluster.id,
      runtime: { image: 'app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['b1'] } },
      volumes: [],
    },
  });
  const { platformBinding } = await t.caller.call('upsertPlatformBinding', {
    platformBinding: { serviceId: service.id, capability: 'objectstorage', enabled: true, nodeId: 'b1' } as never,
    expectedGeneration: null,
  });
  const listed = async () => (await t.caller.call('getPlatformBindings', { serviceId: service.id })).platformBindings;
  assert.equal((await listed()).length, 1);
  const stale = await refusalOf(() => t.caller.call('deletePlatformBinding', { platformBindingId: platformBinding.id, expectedGeneration: platformBinding.generation + 1 }));
  assert.equal(stale.code, 'conflict');
  const dry = await t.caller.call('deletePlatformBinding', { platformBindingId: platformBinding.id, expectedGeneration: platformBinding.generation, dryRun: true } as never);
  assert.equal((await listed()).length, 1);
  const real = await t.caller.call('deletePlatformBinding', { platformBindingId: platformBinding.id, expectedGeneration: platformBinding.generation });
  assert.deepEqual(real.platformBinding, (dry as unknown as IReq_Admin_DeletePlatformBinding['response']).platformBinding);
  assert.equal((await listed()).length, 0);
  const missing = await refusalOf(() => t.caller.call('deletePlatformBinding', { platformBindingId: platformBinding.id, expectedGeneration: platformBinding.generation }));
  assert.equal(missing.code, 'not-found');
});
