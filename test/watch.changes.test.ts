import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { openWatcher as openWatcherAt } from './helpers/watch.js';

/**
 * Updates and removals reach a watcher, also with a cluster filter for documents created before
 * the watch began (a removal carries no document, so the watch must know their cluster another
 * way: the `clusters delete` that did not reach `watch --cluster` in a manual run).
 */

let t: ITestCloudly;

before(async () => {
  t = await startTestCloudly();
});

after(async () => {
  await t.stop();
});

const openWatcher = async (requestArg: Record<string, unknown>) => {
  const { client, events } = await openWatcherAt(t.baseUrl, requestArg);
  const lines = () => events.map((eventArg) => `${eventArg.kind} ${eventArg.id} ${eventArg.change} ${eventArg.generation}`);
  return { client, events, lines };
};

test('a cluster created before the watch: its update, its nodes\' removal and its deletion reach watchers with and without a cluster filter', async () => {
  const { cluster } = await t.createCluster('watched-before');
  await t.addNodes(cluster.id, 'n1', 'n2');
  const other = await t.createCluster('not-watched');
  await t.addNodes(other.cluster.id, 'x1');
  // The cluster's and its nodes' own changes (what Cloudly derives for the cluster, its desired
  // state and liveness, are watchable kinds of their own).
  const kinds = ['CloudlyCluster', 'CloudlyClusterNode'];
  const filtered = await openWatcher({ clusterId: cluster.id, kinds });
  const unfiltered = await openWatcher({ kinds });
  const rotated = await t.caller.call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: cluster.generation });
  await t.caller.call('removeClusterNode', { clusterId: cluster.id, nodeId: 'n1' });
  await t.caller.call('removeClusterNode', { clusterId: other.cluster.id, nodeId: 'x1' });
  await t.caller.call('deleteCluster', { clusterId: cluster.id, expectedGeneration: rotated.cluster.generation });
  // The deletion removes the cluster, then its remaining nodes (the cascade).
  const expected = [
    `CloudlyCluster ${cluster.id} updated 2`,
    `CloudlyClusterNode ${cluster.id}/n1 removed 2`,
    `CloudlyCluster ${cluster.id} removed 3`,
    `CloudlyClusterNode ${cluster.id}/n2 removed 2`,
  ];
  await waitFor(() => filtered.lines().length >= expected.length, `filtered watcher saw ${filtered.lines().join(', ')}`);
  assert.deepEqual(filtered.lines(), expected);
  await waitFor(() => unfiltered.lines().includes(`CloudlyCluster ${cluster.id} removed 3`), 'unfiltered watcher saw the deletion');
  assert.ok(unfiltered.lines().includes(`CloudlyClusterNode ${other.cluster.id}/x1 removed 2`), 'the unfiltered watcher sees the other cluster');
  assert.ok(!filtered.lines().some((line) => line.includes(other.cluster.id)), 'the filtered watcher does not');
  const updated = filtered.events.find((eventArg) => eventArg.change === 'updated');
  assert.equal((updated?.document as { relayTokenGeneration?: number } | undefined)?.relayTokenGeneration, 2, 'an update carries the document as it is now');
  assert.equal(filtered.events.find((eventArg) => eventArg.change === 'removed')?.document, undefined, 'a removal carries no document');
  filtered.client.close();
  unfiltered.client.close();
});

test('a service created before the watch: its removal matches the cluster filter', async () => {
  const { cluster } = await t.createCluster('watched-services');
  await t.addNodes(cluster.id, 'n1');
  const { service } = await t.caller.call('createService', {
    service: {
      name: 'web',
      organizationId: 'org1',
      clusterId: cluster.id,
      runtime: { image: 'nginx:1', replicas: 1, profile: { runAs: { user: 101, group: 101 } }, placement: { nodeIds: ['n1'] } },
      volumes: [],
    },
  } as never) as { service: { id: string; generation: number } };
  const watcher = await openWatcher({ clusterId: cluster.id, kinds: ['CloudlyService'] });
  const answer = await t.caller.call('deleteService', { serviceId: service.id, expectedGeneration: service.generation, force: true } as never) as { deleted: boolean };
  assert.equal(answer.deleted, true);
  await waitFor(() => watcher.lines().some((line) => line.startsWith(`CloudlyService ${service.id} removed`)), `service removal: ${watcher.lines().join(', ')}`);
  watcher.client.close();
});

test('a watch of a kind no change can carry is refused, naming the kind and its path; document kinds are accepted', async () => {
  const refused = await refusalOf(() => openWatcherAt(t.baseUrl, { kinds: ['CloudlyCluster', 'cluster'] }));
  assert.deepEqual(refused, {
    code: 'invalid-request',
    retryable: false,
    reasons: ['field-not-supported'],
    causes: [{
      path: 'request.kinds[1]',
      reason: 'field-not-supported',
      message: 'names no watchable kind: "cluster" (kinds are document kinds such as CloudlyCluster)',
    }],
  });
  const { client, answer } = await openWatcherAt(t.baseUrl, { kinds: ['CloudlyCluster', 'CloudlyService'] });
  try {
    assert.equal(typeof answer.watchId, 'string');
  } finally {
    client.close();
  }
});
