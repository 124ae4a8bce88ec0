import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { connectHintedRelay } from './helpers/desiredstate.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IService, IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import type { IClusterPlatformObservedService } from '../ts/interfaces/data/desiredstate.js';
import { computeClusterPlatformDesiredStateDigest } from '../ts/interfaces/data/desiredstate.js';
import { assertFieldProblems } from './helpers/refusals.js';

/**
 * The control loop end to end with a real relay client: create a service, the relay reads the
 * desired state, reports it running, the status says converged; change it, converging, then
 * converged again; delete it, gone once the relay reports it stopped.
 */

interface ILoop {
  clusterId: string;
  relayToken: string;
  relay: CloudlyRelayClient;
  hints: Array<{ revision: number; digest: string }>;
}

const spec = (clusterIdArg: string, overridesArg: Partial<IServiceWritableSpec['runtime']> = {}): IServiceWritableSpec => ({
  name: 'web',
  organizationId: 'org-1',
  clusterId: clusterIdArg,
  runtime: {
    image: 'registry.example/web:1',
    replicas: 1,
    profile: { runAs: null },
    placement: { nodeIds: ['n1'] },
    ...overridesArg,
  },
  ports: [{ name: 'http', port: 8080, protocol: 'tcp' }],
  routes: [{ hostname: 'web.example.com', targetPort: 'http' }],
  readiness: { kind: 'http', port: 'http', path: '/healthz' },
  volumes: [],
});

describe('desired state to the relay, observed state back, converged', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly(); });
  after(async () => { await t.stop(); });

  const connectElected = (clusterIdArg: string, tokenArg: string, hintsArg: ILoop['hints']): Promise<CloudlyRelayClient> =>
    connectHintedRelay(t, clusterIdArg, tokenArg, hintsArg);

  const prepareLoop = async (nameArg: string): Promise<ILoop> => {
    const { cluster, relayToken } = await t.createCluster(nameArg);
    await t.addNodes(cluster.id, 'n1', 'n2');
    const hints: ILoop['hints'] = [];
    const relay = await connectElected(cluster.id, relayToken, hints);
    return { clusterId: cluster.id, relayToken, relay, hints };
  };

  const read = (relayArg: CloudlyRelayClient, knownRevisionArg?: number) =>
    relayArg.fire('getClusterPlatformDesiredState',
      knownRevisionArg === undefined ? {} : { knownRevision: knownRevisionArg });
  const desired = async (relayArg: CloudlyRelayClient) => {
    const answer = await read(relayArg);
    assert.equal(answer.unchanged, false);
    return (answer as Extract<typeof answer, { unchanged: false }>).desiredState;
  };
  const report = (relayArg: CloudlyRelayClient, desiredRevisionArg: number, servicesArg: IClusterPlatformObservedService[]) =>
    relayArg.fire('reportClusterPlatformObservedState', {
      desiredRevision: desiredRevisionArg, services: servicesArg,
    });
  const statusOf = (serviceIdArg: string) =>
    t.caller.call('getServiceRuntimeStatus', { serviceId: serviceIdArg });
  const create = async (clusterIdArg: string, overridesArg: Partial<IServiceWritableSpec['runtime']> = {}): Promise<IService> =>
    (await t.caller.call('createService', { service: spec(clusterIdArg, overridesArg) })).service;

  test('create → read → report ready → converged; update → converging → converged; delete → gone once stopped', async () => {
    const loop = await prepareLoop('loop');
    const service = await create(loop.clusterId);
    // The publication the commit starts runs first: a relay that read the new revision itself
    // before the publisher looked would need (and get) no hint for it.
    await t.cloudly.desiredStateManager.settled(loop.clusterId);
    const first = await desired(loop.relay);
    // The relay is told of the revision that holds the service (hints may also name earlier ones).
    await waitFor(() => loop.hints.some((hint) => hint.revision === first.revision && hint.digest === first.digest), 'a hint of the revision with the service');
    const { revision: _revision, digest: _digest, ...content } = first;
    assert.equal(first.digest, computeClusterPlatformDesiredStateDigest(content));
    assert.deepEqual(first.services.map((entry) => [entry.serviceId, entry.specRevision, entry.runtime.image]), [[service.id, 1, 'registry.example/web:1']]);
    assert.deepEqual(first.services[0].routes, [{ hostname: 'web.example.com', targetPort: 'http' }]);
    // The runtime spec carries execution policy only: its exact upstream members and nothing else.
    assert.deepEqual(Object.keys(first.services[0].runtime).sort(), ['image', 'placement', 'profile', 'replicas']);
    // Each node's Corestore control credential travels by reference and version only.
    assert.deepEqual(first.nodes.map((node) => [node.nodeId, node.corestoreCredential.nodeId, node.corestoreCredential.version]), [['n1', 'n1', 1], ['n2', 'n2', 1]]);
    assert.deepEqual(Object.keys(first.nodes[0].corestoreCredential).sort(), ['clusterId', 'createdAt', 'nodeId', 'previous', 'secretVersion', 'version']);
    assert.deepEqual(await read(loop.relay, first.revision), { unchanged: true, revision: first.revision, digest: first.digest });

    assert.equal((await statusOf(service.id)).status.state, 'converging');
    await report(loop.relay, first.revision, [{ serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'starting' }]);
    assert.equal((await statusOf(service.id)).status.state, 'converging');
    await report(loop.relay, first.revision, [{ serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'ready' }]);
    const converged = await statusOf(service.id);
    assert.equal(converged.status.state, 'converged');
    assert.equal(converged.status.specRevision, 1);
    assert.deepEqual(converged.observed.placements.map((placement) => [placement.nodeId, placement.specRevision, placement.state]), [['n1', 1, 'ready']]);
    assert.equal(typeof converged.observed.lastReportedAt, 'number');

    const updated = (await t.caller.call('updateService', {
      serviceId: service.id, expectedGeneration: service.generation, service: spec(loop.clusterId, { image: 'registry.example/web:2' }),
    })).service;
    assert.equal(updated.specRevision, 2);
    assert.equal((await statusOf(service.id)).status.state, 'converging');
    await waitFor(() => loop.hints.at(-1)!.revision > first.revision, 'a hint for the update');
    const second = await desired(loop.relay);
    assert.equal(second.revision, first.revision + 1);
    assert.equal(second.services[0].runtime.image, 'registry.example/web:2');
    await report(loop.relay, second.revision, [{ serviceId: service.id, nodeId: 'n1', specRevision: 2, replicas: 1, state: 'ready' }]);
    assert.equal((await statusOf(service.id)).status.state, 'converged');

    // Without an ingress the route resolves to no lease address: left out, and the reason is visible to administrators.
    const { table } = await loop.relay.fire('getClusterRouteTable', {});
    assert.deepEqual(table.routes, []);
    const resolution = await t.caller.call('getClusterRouteTableResolution', { clusterId: loop.clusterId });
    assert.deepEqual(resolution.unresolved, [{ hostname: 'web.example.com', serviceId: service.id, port: 8080, cause: 'no-ingress-designation', reason: 'the cluster has no ingress designation' }]);
    assert.equal(resolution.table.revision, table.revision);

    const deletion = await t.caller.call('deleteService', { serviceId: service.id, expectedGeneration: updated.generation });
    assert.deepEqual(deletion, { serviceId: service.id, deleted: false, pendingRemoval: true });
    const third = await desired(loop.relay);
    assert.deepEqual(third.services, []);
    assert.deepEqual(third.removals.map((removal) => removal.serviceId), [service.id]);
    assert.deepEqual((await loop.relay.fire('getClusterRouteTable', {})).table.routes, []);
    const gone = await report(loop.relay, third.revision, [{ serviceId: service.id, nodeId: 'n1', specRevision: 2, replicas: 0, state: 'stopped' }]);
    assert.deepEqual(gone.removed, [service.id]);
    assert.equal((await refusalOf(() => statusOf(service.id))).code, 'not-found');
    const fourth = await desired(loop.relay);
    assert.deepEqual(fourth.removals, []);
    assert.equal(fourth.revision, third.revision + 1);
  });

  test('bad reports are refused whole with every reason, and store nothing', async () => {
    const loop = await prepareLoop('bad-reports');
    const other = await prepareLoop('bad-reports-other');
    const service = await create(loop.clusterId);
    const foreign = await create(other.clusterId);
    const state = await desired(loop.relay);
    const future = await refusalOf(() => report(loop.relay, state.revision + 5, []));
    assertFieldProblems(future, [
      ['request.desiredRevision', 'field-invalid', `is ahead of the cluster's desired-state revision ${state.revision}`],
    ]);
    const bad = await refusalOf(() => report(loop.relay, state.revision, [
      { serviceId: foreign.id, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'ready' },
      { serviceId: service.id, nodeId: 'n9', specRevision: 1, replicas: 1, state: 'ready' },
      { serviceId: service.id, nodeId: 'n2', specRevision: 1, replicas: 3, state: 'ready' },
      { serviceId: service.id, nodeId: 'n1', specRevision: 7, replicas: 1, state: 'ready' },
    ]));
    assert.equal(bad.code, 'invalid-request');
    assertFieldProblems(bad, [
      ['request.services[0].serviceId', 'field-not-found', 'names no service of this cluster'],
      ['request.services[1].nodeId', 'field-not-found', 'names no node of this cluster'],
      ['request.services[2].replicas', 'field-invalid', 'contradicts the spec: more than the 1 wanted'],
      ['request.services[3].specRevision', 'field-invalid', "is ahead of the service's spec revision 1"],
    ]);
    const shape = await refusalOf(() => report(loop.relay, state.revision, [{ serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'dancing' } as never]));
    assertFieldProblems(shape, [
      ['request.services[0].state', 'field-not-supported', 'must be one of starting, ready, failed, stopped'],
    ]);
    assert.deepEqual((await statusOf(service.id)).observed.placements, []);

    // A newer report is accepted; one made against an older revision afterwards is stale.
    await t.caller.call('updateService', {
      serviceId: service.id, expectedGeneration: service.generation, service: spec(loop.clusterId, { replicas: 2 }),
    });
    const newer = await desired(loop.relay);
    await report(loop.relay, newer.revision, [{ serviceId: service.id, nodeId: 'n1', specRevision: 2, replicas: 1, state: 'ready' }]);
    const stale = await refusalOf(() => report(loop.relay, state.revision, [{ serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'failed' }]));
    assert.deepEqual(stale, { code: 'conflict', retryable: true, reasons: ['desired-revision-stale'] });
    assert.equal((await statusOf(service.id)).observed.placements[0].state, 'ready');
  });

  test('only the elected relay reads and reports; another socket of the cluster is not-elected', async () => {
    const loop = await prepareLoop('elected-only');
    const second = await t.connectRelay(loop.relayToken);
    const refused = await refusalOf(() => read(second));
    assert.equal(refused.code, 'unavailable');
    assert.deepEqual(refused.reasons, ['relay-not-elected']);
    assert.equal((await refusalOf(() => report(second, 0, []))).code, 'unavailable');
  });

  test('two administrators updating one service: exactly one wins and the revision moves once', async () => {
    const loop = await prepareLoop('racing-admins');
    const service = await create(loop.clusterId);
    const before = await desired(loop.relay);
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, index) =>
      t.caller.call('updateService', {
        serviceId: service.id, expectedGeneration: service.generation, service: spec(loop.clusterId, { image: `registry.example/web:${index + 10}` }),
      })));
    assert.equal(results.filter((result) => result.status === 'fulfilled').length, 1);
    const after = await desired(loop.relay);
    assert.equal(after.revision, before.revision + 1);
    assert.equal(after.services[0].specRevision, 2);
  });

  test('a forced delete removes at once; a service cannot be updated while its removal is pending', async () => {
    const loop = await prepareLoop('forced');
    const pending = await create(loop.clusterId);
    await t.caller.call('deleteService', { serviceId: pending.id, expectedGeneration: pending.generation });
    const blocked = await refusalOf(() => t.caller.call('updateService', {
      serviceId: pending.id, expectedGeneration: pending.generation + 1, service: spec(loop.clusterId),
    }));
    assert.deepEqual(blocked.reasons, ['service-pending-removal']);
    const forced = await t.caller.call('deleteService', { serviceId: pending.id, expectedGeneration: pending.generation + 1, force: true });
    assert.deepEqual(forced, { serviceId: pending.id, deleted: true, pendingRemoval: false });
    assert.deepEqual((await desired(loop.relay)).removals, []);
  });

  test('a relay that connects after a restart is hinted the current revision and converges by reading', async () => {
    const loop = await prepareLoop('restart');
    const service = await create(loop.clusterId);
    const before = await desired(loop.relay);
    await t.restart();
    const hints: ILoop['hints'] = [];
    const relay = await connectElected(loop.clusterId, loop.relayToken, hints);
    await waitFor(() => hints.length > 0, 'a hint to the relay elected after the restart');
    assert.equal(hints[0].revision, before.revision);
    const after = await desired(relay);
    assert.equal(after.revision, before.revision);
    assert.equal(after.digest, before.digest);
    await report(relay, after.revision, [{ serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'ready' }]);
    assert.equal((await statusOf(service.id)).status.state, 'converged');
  });
});

describe('runtime status from the facts Cloudly now has', () => {
  test('a service whose placement nodes have all left the cluster is refused no-eligible-node, and converging again once one is back', async () => {
    const t = await startTestCloudly();
    try {
      const { cluster } = await t.createCluster('nodes-gone');
      await t.addNodes(cluster.id, 'n1');
      const { service } = await t.caller.call('createService', { service: spec(cluster.id) });
      const status = async () => (await t.caller.call('getServiceRuntimeStatus', { serviceId: service.id })).status;
      assert.equal((await status()).state, 'converging');
      await t.caller.call('removeClusterNode', { clusterId: cluster.id, nodeId: 'n1' });
      assert.deepEqual([(await status()).state, (await status()).reason], ['refused', 'no-eligible-node']);
      await t.addNodes(cluster.id, 'n1');
      assert.equal((await status()).state, 'converging');
    } finally {
      await t.stop();
    }
  });
});
