import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { IReq_Relay_Cloudly_ReportClusterNode } from '../ts/interfaces/requests/cluster.js';
import type { ITypedContract } from '../ts/interfaces/requests/admin.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import { clusterRelayLeaseKind } from '../ts/manager.cluster/relayelection.js';
import type { TUntypedContract } from '../ts/client/admin.js';
import { problemsOf } from './helpers/refusals.js';

type IReq_WhoAmI = ITypedContract<'testWhoAmI', Record<string, never>, { relay: string }>;

const announcement = (originArg: string) => ({ origin: originArg, version: '1.0.0', protocol: 'cluster-relay/1' });

describe('relay registrations and the election of one relay socket per cluster', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly(); });
  after(async () => { await t.stop(); });

  const registrations = async (clusterIdsArg?: string[]) =>
    (await t.caller.call(
      'getClusterRelayRegistrations',
      clusterIdsArg ? { clusterIds: clusterIdsArg } : {},
    )).registrations;
  const connectNamed = async (tokenArg: string, nameArg: string): Promise<CloudlyRelayClient> => {
    const relay = await t.connectRelay(tokenArg);
    relay.addHandler<IReq_WhoAmI>('testWhoAmI', async () => ({ relay: nameArg }));
    return relay;
  };
  const sessionCount = (clusterIdArg: string) => t.cloudly.relays.sessionsOf(clusterIdArg).length;
  const electedCount = (clusterIdArg: string) =>
    t.cloudly.relays.sessionsOf(clusterIdArg).filter((session) => t.cloudly.clusterManager.isElected(session)).length;
  const register = (relayArg: CloudlyRelayClient, originArg: string) =>
    relayArg.fire('registerClusterRelay', { registration: announcement(originArg) });

  test('two relays of one cluster at once: exactly one is elected and carries the calls', async () => {
    const { cluster, relayToken } = await t.createCluster('pair');
    const [first, second] = await Promise.all([connectNamed(relayToken, 'first'), connectNamed(relayToken, 'second')]);
    await waitFor(() => sessionCount(cluster.id) === 2 && electedCount(cluster.id) === 1, 'one of two sockets elected');
    const answers = new Set<string>();
    for (let index = 0; index < 10; index++) {
      answers.add((await t.cloudly.relays.call<{ relay: string }>(cluster.id, 'testWhoAmI', {})).relay);
    }
    assert.equal(answers.size, 1, 'every call goes to the one elected socket');
    const [electedName] = [...answers];
    const [elected, other] = electedName === 'first' ? [first, second] : [second, first];

    const refused = await refusalOf(() => register(other, 'http://192.0.2.20:8080'));
    assert.equal(refused.code, 'unavailable');
    assert.deepEqual(refused.reasons, ['relay-not-elected']);
    const accepted = await register(elected, 'http://192.0.2.10:8080');
    assert.equal(accepted.registration.connected, true);
    assert.equal(accepted.registration.clusterId, cluster.id);
    assert.equal(accepted.registration.generation, 1);

    // When the elected socket drops, the lease is released and the other live socket is elected.
    elected.terminate();
    await waitFor(() => sessionCount(cluster.id) === 1 && electedCount(cluster.id) === 1, 'the remaining socket elected');
    assert.equal((await t.cloudly.relays.call<{ relay: string }>(cluster.id, 'testWhoAmI', {})).relay, electedName === 'first' ? 'second' : 'first');
    const again = await register(other, 'http://192.0.2.20:8080');
    assert.equal(again.registration.origin, 'http://192.0.2.20:8080');
    assert.equal(again.registration.generation, 2);
    other.close();
  });

  test('a dropped relay reads connected false at once; a re-connecting relay is elected again', async () => {
    const { cluster, relayToken } = await t.createCluster('drop');
    const relay = await connectNamed(relayToken, 'only');
    await register(relay, 'https://relay.drop.example');
    assert.deepEqual((await registrations([cluster.id])).map((r) => r.connected), [true]);

    relay.terminate();
    await waitFor(() => sessionCount(cluster.id) === 0, 'server saw the socket close');
    const [afterDrop] = await registrations([cluster.id]);
    assert.equal(afterDrop.connected, false);
    assert.equal(afterDrop.origin, 'https://relay.drop.example', 'what was accepted stays');
    const callRefusal = await refusalOf(() => t.cloudly.relays.call(cluster.id, 'testWhoAmI', {}));
    assert.deepEqual(callRefusal.reasons, ['relay-not-connected']);
    await waitFor(async () => (await t.cloudly.store.get(clusterRelayLeaseKind, cluster.id))?.sessionId === null, 'lease released');

    const back = await connectNamed(relayToken, 'back');
    await waitFor(() => sessionCount(cluster.id) === 1, 'server saw the socket open');
    const session = await t.cloudly.clusterManager.electedSession(cluster.id);
    assert.equal(session?.clusterId, cluster.id);
    assert.equal(t.cloudly.clusterManager.isElected(session!), true);
    assert.equal((await t.cloudly.relays.call<{ relay: string }>(cluster.id, 'testWhoAmI', {})).relay, 'back');
    assert.equal(electedCount(cluster.id), 1);
    assert.equal((await registrations([cluster.id]))[0].connected, true);
    back.close();
    await waitFor(() => sessionCount(cluster.id) === 0, 'closed');
    assert.equal((await registrations([cluster.id]))[0].connected, false);
  });

  test('a lease held by another (dead) Cloudly instance blocks the election until it runs out', async () => {
    const { cluster, relayToken } = await t.createCluster('orphan');
    const now = Date.now();
    await t.cloudly.store.insert(clusterRelayLeaseKind, {
      id: cluster.id,
      clusterId: cluster.id,
      sessionId: 'socket-of-a-dead-instance',
      instanceId: 'dead-instance',
      expiresAt: now + 60_000,
      acquiredAt: now,
    });
    const relay = await connectNamed(relayToken, 'waiting');
    await waitFor(() => sessionCount(cluster.id) === 1, 'socket open');
    const blocked = await refusalOf(() => t.cloudly.relays.call(cluster.id, 'testWhoAmI', {}));
    assert.deepEqual(blocked.reasons, ['relay-not-connected']);
    assert.equal(electedCount(cluster.id), 0);

    const lease = (await t.cloudly.store.get(clusterRelayLeaseKind, cluster.id))!;
    await t.cloudly.store.swap(clusterRelayLeaseKind, cluster.id, lease.generation, { set: { expiresAt: Date.now() - 1 } });
    await t.cloudly.clusterManager.relayElection.heartbeat();
    assert.equal(electedCount(cluster.id), 1);
    assert.equal((await t.cloudly.relays.call<{ relay: string }>(cluster.id, 'testWhoAmI', {})).relay, 'waiting');
    const taken = (await t.cloudly.store.get(clusterRelayLeaseKind, cluster.id))!;
    assert.equal(taken.instanceId, t.cloudly.clusterManager.relayElection.instanceId);
    assert.ok(taken.expiresAt > Date.now());
    relay.close();
  });

  test('getClusterRelayRegistrations: filter, every registered cluster, and refused ids', async () => {
    const a = await t.createCluster('filter-a');
    const b = await t.createCluster('filter-b');
    const silent = await t.createCluster('filter-silent');
    const relayA = await connectNamed(a.relayToken, 'a');
    const relayB = await connectNamed(b.relayToken, 'b');
    await connectNamed(silent.relayToken, 'silent');
    await register(relayA, 'http://192.0.2.31:8080');
    await register(relayB, 'http://192.0.2.32:8080');
    relayB.terminate();
    await waitFor(() => sessionCount(b.cluster.id) === 0, 'b dropped');

    const all = await registrations();
    const ids = all.map((registration) => registration.clusterId);
    assert.ok(ids.includes(a.cluster.id) && ids.includes(b.cluster.id));
    assert.ok(!ids.includes(silent.cluster.id), 'a relay that never registered is not listed');
    const narrowed = await registrations([b.cluster.id, a.cluster.id, 'cluster-unknown']);
    assert.deepEqual(
      narrowed.map((r) => [r.clusterId, r.origin, r.connected]).sort(),
      [[a.cluster.id, 'http://192.0.2.31:8080', true], [b.cluster.id, 'http://192.0.2.32:8080', false]].sort(),
    );
    assert.deepEqual(await registrations([]), []);
    for (const registration of narrowed) {
      assert.deepEqual(Object.keys(registration).sort(), ['acceptedAt', 'clusterId', 'connected', 'generation', 'origin', 'protocol', 'version']);
    }

    const invalid = await refusalOf(() => t.caller.call<TUntypedContract>('getClusterRelayRegistrations', { clusterIds: [a.cluster.id, '', a.cluster.id, 7] }));
    assert.equal(invalid.code, 'invalid-request');
    assert.deepEqual(problemsOf(invalid).map(([path, reason]) => [path, reason]), [
      ['request.clusterIds[1]', 'field-invalid'], ['request.clusterIds[2]', 'field-duplicate'], ['request.clusterIds[3]', 'field-invalid'],
    ]);
    const notArray = await refusalOf(() => t.caller.call<TUntypedContract>('getClusterRelayRegistrations', { clusterIds: a.cluster.id }));
    assert.equal(notArray.code, 'invalid-request');
    const badRegistration = await refusalOf(() => relayA.fire<TUntypedContract>('registerClusterRelay', {
      registration: { origin: 'http://u@relay.example/', version: '', protocol: 'p', extra: 1 },
    }));
    assert.equal(badRegistration.code, 'invalid-request');
    assert.deepEqual(problemsOf(badRegistration).map(([path, reason]) => [path, reason]), [
      ['request.registration.extra', 'field-unknown'], ['request.registration.origin', 'field-invalid'],
      ['request.registration.origin', 'field-invalid'], ['request.registration.version', 'field-invalid'],
    ]);
    assert.equal((await registrations([a.cluster.id]))[0].origin, 'http://192.0.2.31:8080', 'a refused registration changes nothing');
  });
});

describe('the election across a restart of Cloudly', () => {
  test('a lease left in the embedded database names no live socket after a restart', async () => {
    const t = await startTestCloudly();
    try {
      const { cluster, relayToken } = await t.createCluster('restart');
      const relay = await t.connectRelay(relayToken);
      await relay.fire('registerClusterRelay', { registration: announcement('http://192.0.2.40:8080') });
      // Simulate a crash: the lease stays held in the database although its socket is gone.
      const lease = (await t.cloudly.store.get(clusterRelayLeaseKind, cluster.id))!;
      assert.notEqual(lease.sessionId, null);
      await t.cloudly.store.swap(clusterRelayLeaseKind, cluster.id, lease.generation, {
        set: { instanceId: 'crashed-instance', sessionId: 'gone', expiresAt: Date.now() + 600_000 },
      });
      await t.restart();
      const [registration] = (await t.caller.call('getClusterRelayRegistrations', { clusterIds: [cluster.id] })).registrations;
      assert.equal(registration.connected, false);
      assert.equal(registration.origin, 'http://192.0.2.40:8080');
      const back = await t.connectRelay(relayToken);
      back.addHandler<IReq_WhoAmI>('testWhoAmI', async () => ({ relay: 'back' }));
      assert.equal((await t.cloudly.relays.call<{ relay: string }>(cluster.id, 'testWhoAmI', {})).relay, 'back');
    } finally {
      await t.stop();
    }
  });
});

describe('node reports with hostAddresses, and cluster isolation', () => {
  let t: ITestCloudly;
  let relayA: CloudlyRelayClient;
  let relayB: CloudlyRelayClient;
  let clusterA: string;
  let clusterB: string;
  before(async () => {
    t = await startTestCloudly();
    const a = await t.createCluster('iso-a');
    const b = await t.createCluster('iso-b');
    clusterA = a.cluster.id;
    clusterB = b.cluster.id;
    relayA = await t.connectRelay(a.relayToken);
    relayB = await t.connectRelay(b.relayToken);
  });
  after(async () => { await t.stop(); });

  const report = (relayArg: CloudlyRelayClient, reportArg: unknown) =>
    relayArg.fire('reportClusterNode', { report: reportArg as IReq_Relay_Cloudly_ReportClusterNode['request']['report'] });
  const nodesOf = async (clusterIdArg: string) =>
    (await t.caller.call('getClusterNodes', { clusterId: clusterIdArg })).nodes;

  test('a report introduces a node, stores hostAddresses, and an absent list states nothing', async () => {
    const first = await report(relayA, { nodeId: 'reported-1', name: 'reported one' });
    assert.equal(first.node.source, 'relay-report');
    assert.equal('hostAddresses' in first.node, false, 'absent is never defaulted');
    const withAddresses = await report(relayA, { nodeId: 'reported-1', hostAddresses: ['10.0.0.10', '10.0.0.9', '192.0.2.17'] });
    assert.deepEqual(withAddresses.node.hostAddresses, ['10.0.0.10', '10.0.0.9', '192.0.2.17']);
    assert.equal(withAddresses.node.name, 'reported one');
    const silent = await report(relayA, { nodeId: 'reported-1' });
    assert.deepEqual(silent.node.hostAddresses, ['10.0.0.10', '10.0.0.9', '192.0.2.17'], 'an absent list leaves the stored one');
    assert.deepEqual(await t.cloudly.clusterManager.nodes.getNodeHostAddresses(clusterA, 'reported-1'), ['10.0.0.10', '10.0.0.9', '192.0.2.17']);
    assert.equal(await t.cloudly.clusterManager.nodes.getNodeHostAddresses(clusterA, 'nobody'), null);
    const replaced = await report(relayA, { nodeId: 'reported-1', hostAddresses: ['198.51.100.1'] });
    assert.deepEqual(replaced.node.hostAddresses, ['198.51.100.1']);

    const nameless = await refusalOf(() => report(relayA, { nodeId: 'unknown-node', hostAddresses: ['10.0.0.1'] }));
    assert.equal(nameless.code, 'invalid-request');
    assert.equal((await nodesOf(clusterA)).some((node) => node.id === 'unknown-node'), false);
  });

  test('hostAddresses table through relay reports: every refusal named, nothing stored', async () => {
    await report(relayA, { nodeId: 'table-node', name: 'table', hostAddresses: ['10.1.0.1'] });
    const many = Array.from({ length: 33 }, (_, index) => `10.2.${index}.1`).sort();
    const table: Array<[unknown, string[]]> = [
      [[], ['empty']],
      ['10.0.0.1', ['array']],
      [many, ['limit']],
      [['127.0.0.1'], ['address']],
      [['169.254.0.1', '224.0.0.1'], ['address', 'address']],
      [['10.0.0.2', '10.0.0.1'], ['order']],
      [['10.0.0.1', '10.0.0.1'], ['duplicate']],
      [['0.0.0.0', '10.0.0.1', '10.0.0.1', '1.1.1.1'], ['address', 'duplicate', 'order']],
    ];
    const tag = (reasonArg: string) =>
      reasonArg.includes('not be empty') ? 'empty'
        : reasonArg.includes('must be an array') ? 'array'
          : reasonArg.includes('at most 32') ? 'limit'
            : reasonArg.includes('uplink') ? 'address'
              : reasonArg.includes('unique') ? 'duplicate'
                : reasonArg.includes('sort after') ? 'order' : reasonArg;
    for (const [hostAddresses, expected] of table) {
      const data = await refusalOf(() => report(relayA, { nodeId: 'table-node', hostAddresses }));
      assert.equal(data.code, 'invalid-request');
      assert.deepEqual(problemsOf(data).map(([, , message]) => tag(message)), expected, JSON.stringify(hostAddresses));
      assert.ok(problemsOf(data).every(([path]) => path?.startsWith('request.report.hostAddresses')), JSON.stringify(data));
      assert.ok((data.reasons as string[]).every((reason) => reason.startsWith('field-')), JSON.stringify(data));
    }
    assert.deepEqual((await nodesOf(clusterA)).find((node) => node.id === 'table-node')!.hostAddresses, ['10.1.0.1'], 'refusals stored nothing');
    const exactly32 = Array.from({ length: 32 }, (_, index) => `10.3.${index}.1`).sort();
    assert.equal((await report(relayA, { nodeId: 'table-node', hostAddresses: exactly32 })).node.hostAddresses?.length, 32);
    const combined = await refusalOf(() => report(relayA, { nodeId: 'bad id', name: '', hostAddresses: [] }));
    assert.deepEqual(problemsOf(combined).map(([path]) => path), ['request.report.nodeId', 'request.report.name', 'request.report.hostAddresses']);
  });

  test('a relay of cluster A never reads or writes the nodes of cluster B', async () => {
    await t.caller.call('addClusterNode', { clusterId: clusterB, name: 'b node', nodeId: 'b-node' });
    await t.caller.call('setClusterNodeCorestore', {
      clusterId: clusterB, nodeId: 'b-node', expected: null, corestore: { endpoint: 'http://10.50.0.1:3000' },
    });
    const before = (await nodesOf(clusterB)).find((node) => node.id === 'b-node')!;

    const read = await refusalOf(() => relayA.fire('getClusterNodeCorestores', { nodeIds: ['b-node'] }));
    assert.equal(read.code, 'not-found');
    assert.deepEqual(read.reasons, ['node-not-found']);
    assert.deepEqual(read.causes, [{ path: 'request.nodeIds[0]', message: 'names no node of this relay\'s cluster' }]);
    const listA = await relayA.fire('getClusterNodeCorestores', {});
    assert.equal(listA.nodes.some((node) => node.nodeId === 'b-node'), false);

    // The same node id reported by A's relay is a node of A, never B's.
    const written = await report(relayA, { nodeId: 'b-node', name: 'impostor', hostAddresses: ['10.9.9.9'] });
    assert.equal(written.node.clusterId, clusterA);
    assert.deepEqual((await nodesOf(clusterB)).find((node) => node.id === 'b-node'), before);
    assert.equal(written.node.corestore, undefined);

    const listB = await relayB.fire('getClusterNodeCorestores', {});
    assert.deepEqual(listB.nodes, [{ nodeId: 'b-node', corestore: { endpoint: 'http://10.50.0.1:3000' } }]);
    assert.deepEqual(await t.cloudly.clusterManager.nodes.getNodeCorestore(clusterB, 'b-node'), { endpoint: 'http://10.50.0.1:3000' });
    assert.equal(await t.cloudly.clusterManager.nodes.getNodeCorestore(clusterA, 'b-node'), null);
  });

  test('a report from a relay socket that is not elected is refused and stores nothing', async () => {
    const { cluster, relayToken } = await t.createCluster('iso-second');
    const firstRelay = await t.connectRelay(relayToken);
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).some((session) => t.cloudly.clusterManager.isElected(session)), 'first elected');
    const secondRelay = await t.connectRelay(relayToken);
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).length === 2, 'second open');
    const refused = await refusalOf(() => report(secondRelay, { nodeId: 'n', name: 'n' }));
    assert.deepEqual(refused.reasons, ['relay-not-elected']);
    assert.deepEqual(await nodesOf(cluster.id), []);
    assert.equal((await report(firstRelay, { nodeId: 'n', name: 'n' })).node.id, 'n');
  });
});
