import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { connectElectedRelay, designationRequest, prepareIngressCluster } from './ingress.fixture.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IRuntimeNetworkAddressPlan } from '../ts/interfaces/data/runtimenetworkaddressplan.js';
import type { IClusterDesiredLease } from '../ts/interfaces/data/desiredstate.js';
import type { IService, IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import { verifyRuntimeNetworkProjectionSignature } from '../ts/interfaces/data/runtimenetworksignature.js';
import type { IReq_Relay_Cloudly_ReportRuntimeNetworkLeases } from '../ts/interfaces/requests/runtimenetwork.js';
import type { IReq_Cloudly_Relay_PushClusterPlatformDesiredStateChanged } from '../ts/interfaces/requests/desiredstate.js';
import { assertFieldProblems, assertHasFieldProblem, problemsOf } from './helpers/refusals.js';

/**
 * Cloudly allocates every workload lease from the address plan's pools: exhaustion and release,
 * the race for the last address, lease statements that disagree with the allocation, routes that
 * resolve to lease addresses, the relay registration's node, and plan changes that would strand.
 */

/** Pool 192.0.2.128/29: .129-.134 can be handed out (network .128 and broadcast .135 never). */
const planAt = (revisionArg: number, poolsArg: IRuntimeNetworkAddressPlan['pools']): IRuntimeNetworkAddressPlan => ({
  authorityId: 'authority-1',
  revision: revisionArg,
  prefixes: ['192.0.2.0/24'],
  pools: poolsArg,
  vpn: { hubPrefix: '192.0.2.0/28', peerPrefix: '192.0.2.64/26' },
  hubs: [],
  platformEndpoints: [
    { id: 'corestore', address: '192.0.2.17', protocol: 'tcp', port: 3000 },
    { id: 'relay', address: '192.0.2.17', protocol: 'tcp', port: 443 },
  ],
});
const smallPool = { id: 'small', prefix: '192.0.2.128/29' };
const widePool = { id: 'wide', prefix: '192.0.2.192/26' };

const withdrawalMs = 1_500;

const serviceSpec = (
  clusterIdArg: string,
  nameArg: string,
  runtimeArg: Partial<IServiceWritableSpec['runtime']> = {},
  networkArg: Pick<IServiceWritableSpec, 'ports' | 'routes'> = {},
): IServiceWritableSpec => ({
  name: nameArg,
  organizationId: 'org-1',
  clusterId: clusterIdArg,
  runtime: { image: 'registry.example/app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] }, ...runtimeArg },
  ...networkArg,
  volumes: [],
});

describe('workload leases from the address plan', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly({ runtimeNetworkWithdrawalWindowMs: withdrawalMs }); });
  after(async () => { await t.stop(); });

  const setPlan = (planArg: IRuntimeNetworkAddressPlan) =>
    t.caller.call('setRuntimeNetworkAddressPlan', { plan: planArg });
  const create = async (clusterIdArg: string, nameArg: string, runtimeArg: Partial<IServiceWritableSpec['runtime']> = {}): Promise<IService> =>
    (await t.caller.call('createService', { service: serviceSpec(clusterIdArg, nameArg, runtimeArg) })).service;
  const statusOf = async (serviceIdArg: string) => {
    const { status } = await t.caller.call('getServiceRuntimeStatus', { serviceId: serviceIdArg });
    return [status.state, status.reason];
  };
  const desired = async (relayArg: CloudlyRelayClient) => {
    const answer = await relayArg.fire('getClusterPlatformDesiredState', {});
    assert.equal(answer.unchanged, false);
    return (answer as Extract<typeof answer, { unchanged: false }>).desiredState;
  };
  const leasesOf = async (relayArg: CloudlyRelayClient, serviceIdArg?: string): Promise<IClusterDesiredLease[]> =>
    (await desired(relayArg)).leases.filter((lease) => serviceIdArg === undefined || lease.serviceId === serviceIdArg);
  /** Every held lease of every block, authority-wide: no address may appear twice. */
  const allHeldAddresses = async () => (await t.cloudly.runtimeNetworkManager.leases.readEntries())
    .filter((entry) => entry.releasedAt === undefined).map((entry) => entry.address);
  /** Addresses held or still inside their withdrawal window. */
  const occupiedAddresses = async () => {
    const now = Date.now();
    return (await t.cloudly.runtimeNetworkManager.leases.readEntries())
      .filter((entry) => entry.releasedAt === undefined || entry.releasedAt + withdrawalMs > now).map((entry) => entry.address);
  };
  /** Removes services at once, so the next test finds their addresses free after the window. */
  const removeAll = async (servicesArg: IService[]) => {
    for (const service of servicesArg) {
      const current = (await t.cloudly.serviceManager.getService(service.id))!;
      await t.caller.call('deleteService', { serviceId: service.id, expectedGeneration: current.generation, force: true });
      await t.cloudly.runtimeNetworkManager.allocateCluster(service.clusterId);
    }
  };
  const assertNoAddressTwice = async () => {
    const addresses = await allHeldAddresses();
    assert.equal(new Set(addresses).size, addresses.length, `an address is held twice: ${addresses.join(', ')}`);
  };

  test('no pool refuses network-workload-pool-missing; a pool added by the next revision lets the workload have its lease', async () => {
    const { cluster, relayToken } = await t.createCluster('no-pool');
    const relay = await connectElectedRelay(t, cluster.id, relayToken);
    await t.addNodes(cluster.id, 'n1');
    const service = await create(cluster.id, 'web');
    // Without any plan Cloudly manages no workload address and refuses nothing.
    assert.deepEqual(await statusOf(service.id), ['converging', null]);
    assert.deepEqual(await leasesOf(relay), []);
    await setPlan(planAt(1, []));
    assert.deepEqual(await statusOf(service.id), ['refused', 'network-workload-pool-missing']);
    await setPlan(planAt(2, [smallPool]));
    assert.deepEqual(await statusOf(service.id), ['converging', null]);
    const leases = await leasesOf(relay, service.id);
    assert.deepEqual(leases.map((lease) => [lease.nodeId, lease.replica, lease.address, lease.lease.generation]), [['n1', 0, '192.0.2.129', 1]]);
    assert.match(leases[0].lease.id, /^wl-[0-9a-f]{32}$/);
    // Deleting it at once (force) releases the lease: the address is withdrawing, not held.
    await t.caller.call('deleteService', { serviceId: service.id, expectedGeneration: service.generation, force: true });
    await t.cloudly.runtimeNetworkManager.allocateCluster(cluster.id);
    const entry = (await t.cloudly.runtimeNetworkManager.leases.readEntries()).find((candidate) => candidate.lease.id === leases[0].lease.id);
    assert.equal(typeof entry?.releasedAt, 'number', 'the deleted service\'s lease is released');
  });

  test('pool exhaustion and release: a lowered replica count frees addresses after the withdrawal window, never before; host addresses are never handed out', async () => {
    // Let the previous test's withdrawal end, so the small pool starts empty.
    await new Promise((resolve) => setTimeout(resolve, withdrawalMs));
    const { cluster, relayToken } = await t.createCluster('exhaust');
    const relay = await connectElectedRelay(t, cluster.id, relayToken);
    await relay.fire('reportClusterNode', { report: { nodeId: 'n1', name: 'n1', hostAddresses: ['192.0.2.130'] } });
    await relay.fire('reportClusterNode', { report: { nodeId: 'n2', name: 'n2' } });

    // Five addresses can be handed out (.129 .131 .132 .133 .134; .130 is n1's host).
    const first = await create(cluster.id, 'first', { replicas: 3 });
    const second = await create(cluster.id, 'second', { replicas: 3 });
    assert.deepEqual(await statusOf(first.id), ['converging', null]);
    assert.deepEqual(await statusOf(second.id), ['refused', 'network-workload-pool-exhausted']);
    const firstLeases = await leasesOf(relay, first.id);
    assert.deepEqual(firstLeases.map((lease) => [lease.nodeId, lease.replica, lease.address]), [
      ['n1', 0, '192.0.2.129'], ['n1', 2, '192.0.2.132'], ['n2', 1, '192.0.2.131'],
    ]);
    assert.deepEqual((await leasesOf(relay, second.id)).map((lease) => lease.address).sort(), ['192.0.2.133', '192.0.2.134']);
    assert.equal((await allHeldAddresses()).includes('192.0.2.130'), false, 'a node\'s host address is never a lease');
    await assertNoAddressTwice();

    // Lower the first service to one replica: two leases are released into their withdrawal window.
    const lowered = (await t.caller.call('updateService', {
      serviceId: first.id, expectedGeneration: first.generation, service: serviceSpec(cluster.id, 'first', { replicas: 1 }),
    })).service;
    assert.equal(lowered.runtime.replicas, 1);
    const releasedAt = Date.now();
    assert.deepEqual((await leasesOf(relay, first.id)).map((lease) => lease.address), ['192.0.2.129']);
    // Inside the window the freed addresses are not handed out again.
    // Both reads first, then the clock: only reads that both ended inside the window are judged.
    const early = await statusOf(second.id);
    const earlyLeases = await leasesOf(relay, second.id);
    if (Date.now() - releasedAt < withdrawalMs - 200) {
      assert.deepEqual(early, ['refused', 'network-workload-pool-exhausted']);
      assert.equal(earlyLeases.length, 2);
    }
    // After it, the second service gets one of them without anyone asking again (a pass is queued
    // for the end of the window): only the stored blocks are read while waiting, which runs no pass.
    await waitFor(async () => (await t.cloudly.runtimeNetworkManager.leases.readEntries())
      .filter((entry) => entry.serviceId === second.id && entry.releasedAt === undefined).length === 3,
    'the second service was allocated its third lease once the window ended', withdrawalMs + 5_000);
    // The allocation is Cloudly's own write, not the caller's: its verdict follows it, and is waited for.
    await waitFor(async () => (await statusOf(second.id))[0] === 'converging', 'the verdict followed the allocation');
    assert.deepEqual(await statusOf(second.id), ['converging', null]);
    assert.ok(Date.now() - releasedAt >= withdrawalMs, 'a released address was handed out only after the withdrawal window');
    const secondLeases = await leasesOf(relay, second.id);
    assert.equal(secondLeases.length, 3);
    assert.ok(secondLeases.some((lease) => lease.address === '192.0.2.131' || lease.address === '192.0.2.132'));
    await assertNoAddressTwice();
    await removeAll([first, second]);
  });

  test('placement change releases the lease on the old node and allocates one on the new node', async () => {
    await new Promise((resolve) => setTimeout(resolve, withdrawalMs));
    await setPlan(planAt(3, [smallPool, widePool]));
    const { cluster, relayToken } = await t.createCluster('move');
    const relay = await connectElectedRelay(t, cluster.id, relayToken);
    await t.addNodes(cluster.id, 'a', 'b');
    const service = await create(cluster.id, 'mover', { placement: { nodeIds: ['a'] } });
    const [before] = await leasesOf(relay, service.id);
    assert.equal(before.nodeId, 'a');
    await t.caller.call('updateService', {
      serviceId: service.id, expectedGeneration: service.generation, service: serviceSpec(cluster.id, 'mover', { placement: { nodeIds: ['b'] } }),
    });
    const after = await leasesOf(relay, service.id);
    assert.deepEqual(after.map((lease) => lease.nodeId), ['b']);
    assert.notEqual(after[0].address, before.address, 'the old address is withdrawing, not reused at once');
    assert.notEqual(after[0].lease.id, before.lease.id);
    await assertNoAddressTwice();
    await removeAll([service]);
  });

  test('the race for the last address: of many services created at once exactly one wins, the others report pool-exhausted', async () => {
    const { cluster, relayToken } = await t.createCluster('race-one-cluster');
    const relay = await connectElectedRelay(t, cluster.id, relayToken);
    await t.addNodes(cluster.id, 'n1');
    // Fill the pools but for exactly one address.
    const free = async () => {
      const held = new Set(await occupiedAddresses());
      let count = 0;
      for (let host = 129; host <= 134; host++) {
        count += held.has(`192.0.2.${host}`) || host === 130 ? 0 : 1;
      }
      for (let host = 193; host <= 254; host++) {
        count += held.has(`192.0.2.${host}`) ? 0 : 1;
      }
      return count;
    };
    await new Promise((resolve) => setTimeout(resolve, withdrawalMs));
    const filler = await create(cluster.id, 'filler', { replicas: (await free()) - 1 });
    assert.deepEqual(await statusOf(filler.id), ['converging', null]);
    assert.equal(await free(), 1);

    const racers = await Promise.all(Array.from({ length: 12 }, (_, index) => create(cluster.id, `racer-${index}`)));
    const verdicts = await Promise.all(racers.map((racer) => statusOf(racer.id)));
    assert.equal(verdicts.filter(([state]) => state === 'converging').length, 1, 'exactly one racer holds the last address');
    assert.equal(verdicts.filter(([state, reason]) => state === 'refused' && reason === 'network-workload-pool-exhausted').length, racers.length - 1);
    const leases = await leasesOf(relay);
    assert.equal(leases.filter((lease) => racers.some((racer) => racer.id === lease.serviceId)).length, 1);
    await assertNoAddressTwice();
    // Removing the filler frees its addresses (after the window) for the others.
    await t.caller.call('deleteService', { serviceId: filler.id, expectedGeneration: filler.generation, force: true });
    await waitFor(async () => (await Promise.all(racers.map((racer) => statusOf(racer.id)))).every(([state]) => state === 'converging'),
      'every racer has a lease once the filler\'s addresses left their window', withdrawalMs + 8_000);
    await assertNoAddressTwice();
    await removeAll(racers);
  });

  test('the race across clusters is decided by the database: concurrent passes of eight clusters for one address, one winner', async () => {
    await new Promise((resolve) => setTimeout(resolve, withdrawalMs));
    const { runtimeNetworkManager } = t.cloudly;
    const clusters = await Promise.all(Array.from({ length: 8 }, (_, index) => t.createCluster(`race-cluster-${index}`)));
    for (const { cluster } of clusters) {
      await t.addNodes(cluster.id, 'n1');
    }
    // Hold every free address but one with a filler cluster's service.
    const fillerCluster = await t.createCluster('race-filler');
    await t.addNodes(fillerCluster.cluster.id, 'n1');
    const held = new Set(await occupiedAddresses());
    let free = 0;
    for (let host = 129; host <= 134; host++) {
      free += held.has(`192.0.2.${host}`) || host === 130 ? 0 : 1;
    }
    for (let host = 193; host <= 254; host++) {
      free += held.has(`192.0.2.${host}`) ? 0 : 1;
    }
    const filler = await create(fillerCluster.cluster.id, 'filler', { replicas: free - 1 });
    await runtimeNetworkManager.allocateCluster(fillerCluster.cluster.id);
    // Each cluster's service is stored; then every cluster's pass runs at the same instant.
    const services = await Promise.all(clusters.map(({ cluster }) => create(cluster.id, 'contender')));
    const allocations = await Promise.all(clusters.map(({ cluster }) => runtimeNetworkManager.allocateCluster(cluster.id)));
    const winners = allocations.filter((allocation) => allocation.leases.length === 1);
    assert.equal(winners.length, 1, 'exactly one cluster holds the last address');
    const verdicts = await Promise.all(services.map((service) => statusOf(service.id)));
    assert.equal(verdicts.filter(([state]) => state === 'converging').length, 1);
    assert.equal(verdicts.filter(([, reason]) => reason === 'network-workload-pool-exhausted').length, services.length - 1);
    await assertNoAddressTwice();
    await removeAll([...services, filler]);
  });

  test('a lease statement is a confirmation: foreign addresses, another node\'s lease, another cluster\'s or an unknown service are refused by path and never become endpoints', async () => {
    await new Promise((resolve) => setTimeout(resolve, withdrawalMs));
    const { cluster, relayToken } = await t.createCluster('confirm');
    const other = await t.createCluster('confirm-other');
    const relay = await connectElectedRelay(t, cluster.id, relayToken);
    await t.addNodes(cluster.id, 'n1', 'n2');
    await t.addNodes(other.cluster.id, 'x1');
    const mine = await create(cluster.id, 'mine', { replicas: 2 });
    const foreign = await create(other.cluster.id, 'foreign');
    const [onN1, onN2] = await leasesOf(relay, mine.id);
    assert.deepEqual([onN1.nodeId, onN2.nodeId], ['n1', 'n2']);
    const foreignLease = (await t.cloudly.runtimeNetworkManager.allocateCluster(other.cluster.id)).leases[0];
    const report = (nodeIdArg: string, leasesArg: IReq_Relay_Cloudly_ReportRuntimeNetworkLeases['request']['leases']) =>
      relay.fire('reportRuntimeNetworkLeases', { nodeId: nodeIdArg, leases: leasesArg });
    const refused = await refusalOf(() => report('n1', [
      { lease: onN1.lease, serviceId: mine.id, address: '8.8.8.8' },
      { lease: onN2.lease, serviceId: mine.id, address: onN2.address },
      { lease: foreignLease.lease, serviceId: foreign.id, address: foreignLease.address },
      { lease: { id: 'made-up', generation: 1 }, serviceId: 'no-such-service', address: '192.0.2.200' },
    ]));
    assert.equal(refused.code, 'invalid-request');
    assertFieldProblems(refused, [
      ['request.leases[0].address', 'field-invalid', `must be ${onN1.address}, the allocated address`],
      ['request.leases[1]', 'field-invalid', 'names a lease Cloudly allocated on node n2, not n1'],
      ['request.leases[2].serviceId', 'field-not-found', 'names no service of this cluster'],
      ['request.leases[2].lease.id', 'field-not-found', `is no lease Cloudly allocated; ${foreignLease.address} is held by a lease of another cluster`],
      ['request.leases[3].serviceId', 'field-not-found', 'names no service of this cluster'],
      ['request.leases[3].lease.id', 'field-not-found', 'is no lease Cloudly allocated'],
    ]);
    const otherGeneration = await refusalOf(() => report('n1', [{ lease: { id: onN1.lease.id, generation: 2 }, serviceId: mine.id, address: onN1.address }]));
    assertFieldProblems(otherGeneration, [
      ['request.leases[0].lease.generation', 'field-invalid', 'must be 1, the allocated generation'],
    ]);
    const projection = async (nodeIdArg: string) =>
      (await t.caller.call('getRuntimeNetworkProjection', { clusterId: cluster.id, nodeId: nodeIdArg }));
    assert.deepEqual((await projection('n1')).projection.endpoints, [], 'no refused statement became an endpoint');

    // The statement that agrees is recorded, and the confirmed lease is an endpoint at Cloudly's address.
    await report('n1', [{ lease: onN1.lease, serviceId: mine.id, address: onN1.address }]);
    const { projection: confirmed, signature } = await projection('n1');
    assert.deepEqual(confirmed.endpoints, [{ lease: onN1.lease, nodeId: 'n1', address: onN1.address }]);

    // A node verifies the projection; one whose endpoint address was changed on the way fails.
    const jwks = await (await fetch(`${t.baseUrl}/.well-known/jwks.json`)).json() as { keys: [] };
    assert.equal((await verifyRuntimeNetworkProjectionSignature(confirmed, signature, jwks)).ok, true);
    const tampered = { ...confirmed, endpoints: [{ ...confirmed.endpoints[0], address: '192.0.2.250' }] };
    assert.deepEqual(await verifyRuntimeNetworkProjectionSignature(tampered, signature, jwks), { ok: false, reason: 'signature does not verify' });

    // Once the lease is released (the service leaves), the confirmation no longer makes it an endpoint.
    await t.caller.call('deleteService', { serviceId: mine.id, expectedGeneration: mine.generation, force: true });
    await t.cloudly.runtimeNetworkManager.allocateCluster(cluster.id);
    assert.deepEqual((await projection('n1')).projection.endpoints, []);
    const stale = await refusalOf(() => report('n1', [{ lease: onN1.lease, serviceId: mine.id, address: onN1.address }]));
    assert.equal(stale.code, 'invalid-request');
    await removeAll([foreign]);
  });

  test('a plan revision that would strand allocated leases is refused, naming them; nothing is written', async () => {
    const { cluster, relayToken } = await t.createCluster('strand');
    const relay = await connectElectedRelay(t, cluster.id, relayToken);
    await t.addNodes(cluster.id, 'n1');
    const service = await create(cluster.id, 'stranded');
    const [lease] = await leasesOf(relay, service.id);
    const current = (await t.cloudly.runtimeNetworkManager.getAddressPlan())!;
    const pool = (await t.cloudly.runtimeNetworkManager.leases.readEntries()).find((entry) => entry.lease.id === lease.lease.id)!;
    const poolId = pool.poolId;
    const refused = await refusalOf(() => setPlan({ ...current, revision: current.revision + 1, pools: current.pools.filter((candidate) => candidate.id !== poolId) }));
    assert.equal(refused.code, 'invalid-request');
    assert.deepEqual(problemsOf(refused)[0], ['request.plan.pools', 'field-invalid', `must keep pool ${poolId}: leases drawn from it outlive a plan revision`]);
    assertHasFieldProblem(refused,
      ['request.plan', 'field-invalid', `would strand lease ${lease.lease.id} (${lease.address} in pool ${poolId}, service ${service.id}, node n1, cluster ${cluster.id})`]);
    assert.equal((await t.cloudly.runtimeNetworkManager.getAddressPlan())?.revision, current.revision);
    await removeAll([service]);
  });

  test('the relay registration names its node: that node\'s projection names the platform endpoints at its host, and no workload gets those addresses', async () => {
    const { cluster, relayToken } = await t.createCluster('relay-host');
    const relay = await connectElectedRelay(t, cluster.id, relayToken);
    await t.addNodes(cluster.id, 'hub-node', 'other');
    const invalid = await refusalOf(() => relay.fire('registerClusterRelay', {
      registration: { origin: 'https://relay.example.com', version: '1', protocol: 'cluster-relay/1', hostAddresses: ['192.0.2.17'] },
    }));
    assertFieldProblems(invalid, [
      ['request.registration.hostAddresses', 'field-invalid', 'needs request.registration.nodeId: addresses are stated for the node whose host carries them'],
    ]);
    // The relay's host carries the lowest address of the wide pool nothing occupies: the next lease would get it.
    const occupied = new Set(await occupiedAddresses());
    let host = 193;
    while (occupied.has(`192.0.2.${host}`)) {
      host++;
    }
    const relayHostAddress = `192.0.2.${host}`;
    const { registration } = await relay.fire('registerClusterRelay', {
      registration: { origin: 'https://relay.example.com', version: '1', protocol: 'cluster-relay/1', nodeId: 'hub-node', hostAddresses: ['192.0.2.17', relayHostAddress].sort() },
    });
    assert.equal(registration.nodeId, 'hub-node');
    const read = (nodeIdArg: string) => relay.fire('getClusterNodeRuntimeNetworkProjection', { nodeId: nodeIdArg });
    await waitFor(async () => (await read('hub-node')).projection.hostPlatformEndpointIds?.join() === 'corestore,relay', 'the hub node names the relay\'s endpoints');
    assert.equal('hostPlatformEndpointIds' in (await read('other')).projection, false);
    const beside = await create(cluster.id, 'beside-the-relay', { replicas: 2 });
    const besideLeases = await leasesOf(relay, beside.id);
    assert.equal(besideLeases.length, 2);
    assert.equal(besideLeases.some((lease) => lease.address === relayHostAddress), false, 'an address the relay host carries is never a lease');
    // A registration that no longer names the node forgets it.
    await relay.fire('registerClusterRelay', {
      registration: { origin: 'https://relay.example.com', version: '1', protocol: 'cluster-relay/1' },
    });
    await waitFor(async () => !('hostPlatformEndpointIds' in (await read('hub-node')).projection), 'the hub node no longer names them');
  });
});

describe('routes resolve to lease addresses once the ingress grant exists', () => {
  test('left out with its reason until then; each step pushes the desired-state hint; then the route carries the lease address and port', async () => {
    const t = await startTestCloudly();
    try {
      await t.caller.call('setRuntimeNetworkAddressPlan', { plan: planAt(1, [widePool]) });
      const ingress = await prepareIngressCluster(t, 'resolve');
      const { clusterId, relay } = ingress;
      const hints: number[] = [];
      relay.addHandler<IReq_Cloudly_Relay_PushClusterPlatformDesiredStateChanged>('pushClusterPlatformDesiredStateChanged', async (request) => {
        hints.push(request.revision);
        return { acknowledged: true };
      });
      const resolution = () => t.caller.call('getClusterRouteTableResolution', { clusterId });
      const web = (await t.caller.call('createService', {
        service: serviceSpec(clusterId, 'web', { placement: { nodeIds: ['node-2'] } }, {
          ports: [{ name: 'http', port: 8080, protocol: 'tcp' }],
          routes: [{ hostname: 'app.example.com', targetPort: 'http' }],
        }),
      })).service;
      const route = { hostname: 'app.example.com', serviceId: web.id, port: 8080 };
      assert.deepEqual((await resolution()).unresolved, [{ ...route, cause: 'no-ingress-designation', reason: 'the cluster has no ingress designation' }]);
      await t.caller.call('designateClusterIngress', { designation: designationRequest(ingress) });
      assert.deepEqual((await resolution()).unresolved, [{ ...route, cause: 'ingress-lease-unconfirmed', reason: 'no node has confirmed a lease of the ingress service yet' }]);

      const answer = await relay.fire('getClusterPlatformDesiredState', {});
      const leases = (answer as Extract<typeof answer, { unchanged: false }>).desiredState.leases;
      const ingressLeases = leases.filter((lease) => lease.serviceId === ingress.service.id);
      const [webLease] = leases.filter((lease) => lease.serviceId === web.id);
      assert.deepEqual(ingressLeases.map((lease) => lease.nodeId), ['node-1', 'node-2']);
      const confirm = (nodeIdArg: string) => relay.fire('reportRuntimeNetworkLeases', {
        nodeId: nodeIdArg,
        leases: leases.filter((lease) => lease.nodeId === nodeIdArg).map((lease) => ({ lease: lease.lease, serviceId: lease.serviceId, address: lease.address })),
      });
      await confirm('node-1');
      await waitFor(async () => (await resolution()).unresolved[0]?.reason === `no node has confirmed a lease of service ${web.id} yet`, 'the web lease is not confirmed yet');
      const hintsBefore = hints.length;
      await confirm('node-2');
      await waitFor(async () => (await resolution()).unresolved.length === 0, 'the route resolved');
      const resolved = await resolution();
      assert.deepEqual(resolved.table.routes, [{
        ...route,
        targets: [{ lease: webLease.lease, nodeId: 'node-2', address: webLease.address, port: 8080 }],
      }]);
      // The relay reads the same table, and was hinted of the revision that carries it.
      const { table } = await relay.fire('getClusterRouteTable', {});
      assert.deepEqual(table, resolved.table);
      await waitFor(() => hints.length > hintsBefore, 'a desired-state hint for the resolved table');
      // One table: the ingress pulls the same routes with the same targets at the same revision, and
      // was hinted of that revision.
      const ingressRead = await relay.fire('getClusterIngressRouteTable', { knownRevision: null });
      assert.deepEqual(ingressRead.table, table);
      await waitFor(() => ingress.hints.includes(table.revision), 'a route-table hint of the revision that carries the targets');
      // The grant the route rests on is in the ingress node's projection.
      const node1 = (await t.caller.call('getRuntimeNetworkProjection', { clusterId, nodeId: 'node-1' })).projection;
      assert.ok(node1.workloadIngress?.grants.some((grant) => grant.destination.id === webLease.lease.id && grant.port === 8080));
    } finally {
      await t.stop();
    }
  });
});
