import { after, before, test } from 'node:test';
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { addClusterWorld } from './backup.fixture.js';

let t: ITestCloudly;

before(async () => {
  t = await startTestCloudly();
});

after(async () => {
  await t.stop();
});

const overviewOf = async (clusterIdArg: string) =>
  (await t.caller.call('getClusterOverview', { clusterId: clusterIdArg })).overview;

test('getClusterOverview: the cluster, its relay socket (elected, unregistered), nodes, services with status and latest backup, ingress designation', async () => {
  const world = await addClusterWorld(t, 'overview');
  world.relay.addHandler('backupClusterService', async () => ({ snapshots: [] }));
  await t.caller.call('getServiceRuntimeStatus', { serviceId: world.service.id });
  // Each backup answers its operation at once; it is followed to the end before the next.
  const backUp = async () => {
    const { operation } = await t.caller.call('createServiceBackup', { clusterId: world.clusterId, serviceId: world.service.id, nodeId: world.nodeId });
    return outcomeOf(await followOperation(t.admin, operation!.operationId, { timeoutMs: 20_000 }));
  };
  await backUp();
  const second = await backUp();

  let overview = await overviewOf(world.clusterId);
  for (let wait = 0; wait < 100 && !overview.relay.socketsOpenHere.some((socket) => socket.elected); wait++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    overview = await overviewOf(world.clusterId);
  }
  assert.equal(overview.cluster.id, world.clusterId);
  assert.equal(overview.relay.socketsOpenHere.length, 1);
  assert.equal(overview.relay.socketsOpenHere[0].elected, true);
  assert.equal(overview.relay.connected, true);
  assert.equal(overview.relay.registration, null, 'connected but never registered is visible as such');
  assert.deepEqual(overview.nodes.map((node) => node.id), [world.nodeId]);
  assert.equal(overview.services.length, 1);
  assert.equal(overview.services[0].service.id, world.service.id);
  assert.ok(overview.services[0].runtimeStatus, 'the stored runtime status');
  assert.equal(overview.services[0].latestBackup?.backupId, second.backup.backupId);
  assert.equal(overview.ingressDesignation, null);
  assert.ok(!JSON.stringify(overview).includes('relayTokenHash'));

  world.relay.close();
  for (let wait = 0; wait < 100 && (await overviewOf(world.clusterId)).relay.socketsOpenHere.length > 0; wait++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.equal((await overviewOf(world.clusterId)).relay.socketsOpenHere.length, 0);
  assert.equal((await refusalOf(() => overviewOf('cluster-none'))).code, 'not-found');
});
