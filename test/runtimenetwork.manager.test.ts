import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { designationRequest, prepareIngressCluster } from './ingress.fixture.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { clusterNodeDocumentId } from '../ts/manager.cluster/clusternodes.js';
import { runtimeNetworkProjectionKind } from '../ts/manager.runtimenetwork/runtimenetwork.manager.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import {
  describeRuntimeNetworkProjectionApplication,
  getRuntimeNetworkProjectionWorkloadIngressPacketGrants,
  validateRuntimeNetworkProjection,
  type IRuntimeNetworkAddressPlan,
  type IRuntimeNetworkProjection,
  type IRuntimeNetworkWorkloadLease,
} from '../ts/interfaces/data/index.js';
import { assertFieldProblems } from './helpers/refusals.js';

/** The upstream example: hub 192.0.2.1 in 192.0.2.0/28, relay and Corestore on 192.0.2.17. */
const planAt = (revisionArg: number, editArg: (plan: IRuntimeNetworkAddressPlan) => void = () => {}): IRuntimeNetworkAddressPlan => {
  const plan: IRuntimeNetworkAddressPlan = {
    authorityId: 'authority-1',
    revision: revisionArg,
    prefixes: ['192.0.2.0/24'],
    pools: [{ id: 'workloads', prefix: '192.0.2.128/25' }],
    vpn: { hubPrefix: '192.0.2.0/28', peerPrefix: '192.0.2.64/26' },
    hubs: [],
    platformEndpoints: [
      { id: 'corestore', address: '192.0.2.17', protocol: 'tcp', port: 3000 },
      { id: 'metrics', address: '192.0.2.18', protocol: 'tcp', port: 9100 },
      { id: 'relay', address: '192.0.2.17', protocol: 'tcp', port: 443 },
    ],
  };
  editArg(plan);
  return plan;
};

describe('runtime network manager over the real server', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly(); });
  after(async () => { await t.stop(); });

  const setPlan = (planArg: unknown) =>
    t.caller.call('setRuntimeNetworkAddressPlan', { plan: planArg as IRuntimeNetworkAddressPlan });
  const getPlan = async () => (await t.caller.call('getRuntimeNetworkAddressPlan', {})).plan;
  const getProjection = async (clusterIdArg: string, nodeIdArg: string): Promise<IRuntimeNetworkProjection> =>
    (await t.caller.call('getRuntimeNetworkProjection', { clusterId: clusterIdArg, nodeId: nodeIdArg })).projection;

  const electedRelay = async (clusterIdArg: string, tokenArg: string): Promise<CloudlyRelayClient> => {
    const relay = await t.connectRelay(tokenArg);
    await waitFor(() => t.cloudly.relays.sessionsOf(clusterIdArg).some((session) => t.cloudly.clusterManager.isElected(session)), 'relay elected');
    return relay;
  };
  const reportNode = (relayArg: CloudlyRelayClient, nodeIdArg: string, hostAddressesArg?: string[]) =>
    relayArg.fire('reportClusterNode', {
      report: { nodeId: nodeIdArg, name: nodeIdArg, ...(hostAddressesArg ? { hostAddresses: hostAddressesArg } : {}) },
    });

  test('the address plan is written only at the next revision, and every refusal is named', async () => {
    assert.equal(await getPlan(), null);

    const early = await refusalOf(() => setPlan(planAt(2)));
    assert.equal(early.code, 'conflict');
    assert.deepEqual(early.reasons, ['plan-revision-mismatch']);
    assert.deepEqual(early.causes, [{ path: 'request.plan.revision', message: 'must be 1, the revision after the stored plan (none is stored yet)' }]);

    const broken = await refusalOf(() => setPlan(planAt(1, (p) => {
      p.platformEndpoints[1].address = '192.0.2.200';
      p.platformEndpoints[2].port = 3000;
    })));
    assert.equal(broken.code, 'invalid-request');
    assertFieldProblems(broken, [
      ['request.plan.platformEndpoints[1].address', 'field-invalid', 'must lie outside every pool'],
      ['request.plan.platformEndpoints[2]', 'field-duplicate', 'repeats 192.0.2.17:3000:tcp: each address:port:protocol must be unique'],
    ]);

    const first = await setPlan(planAt(1));
    assert.deepEqual(first, { plan: planAt(1), replayed: false });
    assert.deepEqual(await getPlan(), planAt(1));
    assert.deepEqual(await setPlan(planAt(1)), { plan: planAt(1), replayed: true });

    const stale = await refusalOf(() => setPlan(planAt(1, (p) => { p.platformEndpoints.pop(); })));
    assert.equal(stale.code, 'conflict');
    assert.deepEqual(stale.reasons, ['plan-revision-mismatch']);
    assert.deepEqual(stale.causes, [{ path: 'request.plan.revision', message: 'must be 2, the revision after the stored plan (1)' }]);

    const vpnMoved = await refusalOf(() => setPlan(planAt(2, (p) => { p.vpn.peerPrefix = '192.0.2.32/28'; })));
    assert.equal(vpnMoved.code, 'invalid-request');
    assertFieldProblems(vpnMoved, [
      ['request.plan.vpn.peerPrefix', 'field-invalid', 'must not change: the managed VPN outlives a plan revision'],
    ]);

    const withHub = planAt(2, (p) => { p.hubs = [{ clusterId: 'cluster-x', address: '192.0.2.1' }]; });
    assert.deepEqual(await setPlan(withHub), { plan: withHub, replayed: false });
    const movedHub = await refusalOf(() => setPlan(planAt(3, (p) => { p.hubs = [{ clusterId: 'cluster-x', address: '192.0.2.2' }]; })));
    assertFieldProblems(movedHub, [
      ['request.plan.hubs', 'field-invalid', 'hub of cluster cluster-x must keep address 192.0.2.1'],
    ]);
    assert.equal((await getPlan())?.revision, 2, 'refused writes left the stored plan alone');
  });

  test('of concurrent writers of the same next revision exactly one wins', async () => {
    const current = (await getPlan())!;
    const candidates = Array.from({ length: 8 }, (_, index) => planAt(current.revision + 1, (p) => {
      p.hubs = current.hubs;
      p.platformEndpoints[1].port = 9100 + index;
    }));
    const outcomes = await Promise.allSettled(candidates.map((plan) => setPlan(plan)));
    const won = outcomes.filter((outcome) => outcome.status === 'fulfilled');
    assert.equal(won.length, 1);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') {
        assert.equal((outcome.reason as { errorData: { code: string } }).errorData.code, 'conflict');
      }
    }
    const stored = (await getPlan())!;
    assert.equal(stored.revision, current.revision + 1);
    assert.deepEqual(stored, (won[0] as PromiseFulfilledResult<{ plan: IRuntimeNetworkAddressPlan }>).value.plan);
  });

  test('only administrators read and write the runtime network', async () => {
    const anonymous = new CloudlyAdminClient(t.baseUrl);
    const refused = await refusalOf(() => anonymous.fire('getRuntimeNetworkAddressPlan', {
      identity: { ...t.identity, jwt: `${t.identity.jwt}x` },
    }));
    assert.equal(refused.code, 'unauthenticated');
    anonymous.close();
  });

  test('a node report with hostAddresses makes the projection name the platform endpoints its host carries', async () => {
    const { cluster, relayToken } = await t.createCluster('host-endpoints');
    const relay = await electedRelay(cluster.id, relayToken);
    await reportNode(relay, 'node-1', ['192.0.2.17', '203.0.113.9']);
    await reportNode(relay, 'node-2');

    const first = await getProjection(cluster.id, 'node-1');
    assert.equal(first.generation, 1);
    assert.equal(first.previous, null);
    assert.equal(first.controller.kind, 'cloudly');
    assert.deepEqual(first.hostPlatformEndpointIds, ['corestore', 'relay']);
    const plan = (await getPlan())!;
    assert.deepEqual(validateRuntimeNetworkProjection(first, { platformEndpointIds: plan.platformEndpoints.map((e) => e.id) }), []);

    // A node that stated no host addresses names nothing, and its projection keeps the base bytes.
    const other = await getProjection(cluster.id, 'node-2');
    assert.equal('hostPlatformEndpointIds' in other, false);
    assert.equal('workloadIngress' in other, false);

    // Reading again computes nothing new.
    assert.deepEqual(await getProjection(cluster.id, 'node-1'), first);

    // The host moves the address: the next generation names its exact predecessor and drops the ids.
    await reportNode(relay, 'node-1', ['192.0.2.18']);
    const second = await getProjection(cluster.id, 'node-1');
    assert.equal(second.generation, 2);
    assert.deepEqual(second.previous, { generation: 1, digest: first.digest });
    assert.deepEqual(second.hostPlatformEndpointIds, ['metrics']);

    // The relay reads the same projection for its node.
    const viaRelay = await relay.fire('getClusterNodeRuntimeNetworkProjection', { nodeId: 'node-1' });
    assert.deepEqual(viaRelay.projection, second);

    const unknown = await refusalOf(() => getProjection(cluster.id, 'node-9'));
    assert.equal(unknown.code, 'not-found');
    const bad = await refusalOf(() => t.caller.call('getRuntimeNetworkProjection', { clusterId: cluster.id, nodeId: 'no spaces' }));
    assert.equal(bad.code, 'invalid-request');
  });

  test('a plan change reaches the stored projections', async () => {
    const { cluster, relayToken } = await t.createCluster('plan-change');
    const relay = await electedRelay(cluster.id, relayToken);
    await reportNode(relay, 'node-1', ['192.0.2.19']);
    const before = await getProjection(cluster.id, 'node-1');
    assert.equal('hostPlatformEndpointIds' in before, false);
    const current = (await getPlan())!;
    await setPlan({ ...current, revision: current.revision + 1, platformEndpoints: [
      ...current.platformEndpoints, { id: 'zeta', address: '192.0.2.19', protocol: 'udp', port: 53 },
    ] });
    // The plan write itself recomputes the stored projection, before anyone reads it again.
    await waitFor(async () => (await t.cloudly.store.get(runtimeNetworkProjectionKind, clusterNodeDocumentId(cluster.id, 'node-1')))
      ?.projection.generation === before.generation + 1, 'the stored projection was recomputed after the plan change');
    const stored = (await t.cloudly.store.get(runtimeNetworkProjectionKind, clusterNodeDocumentId(cluster.id, 'node-1')))!;
    assert.deepEqual(stored.projection.hostPlatformEndpointIds, ['zeta']);
    const afterChange = await getProjection(cluster.id, 'node-1');
    assert.deepEqual(afterChange, stored.projection, 'reading it computes nothing new');
    assert.equal(afterChange.generation, before.generation + 1);
    assert.deepEqual(afterChange.hostPlatformEndpointIds, ['zeta']);
  });

  test('workload ingress grants are derived from the designated ingress, the route table and confirmed leases', async () => {
    const ingress = await prepareIngressCluster(t, 'rn-ingress');
    const { clusterId, relay } = ingress;
    await t.caller.call('designateClusterIngress', { designation: designationRequest(ingress) });
    const { service: web } = await t.caller.call('createService', {
      service: {
        name: 'rn-web', organizationId: 'org-1', clusterId,
        runtime: { image: 'registry.example.com/web:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-2'] } },
        // The one source of routes: what the service declares.
        ports: [{ name: 'http', port: 8080, protocol: 'tcp' }],
        routes: [{ hostname: 'app.example.com', targetPort: 'http' }],
        volumes: [],
      },
    });
    await reportNode(relay, 'node-1');
    await reportNode(relay, 'node-2');
    await reportNode(relay, 'node-3');
    const { service: unrouted } = await t.caller.call('createService', {
      service: {
        name: 'rn-unrouted', organizationId: 'org-1', clusterId,
        runtime: { image: 'registry.example.com/other:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-3'] } },
        volumes: [],
      },
    });
    // Cloudly allocated every lease; the relay confirms per node what it applied.
    const allocated = (await t.cloudly.runtimeNetworkManager.allocateCluster(clusterId)).leases;
    const leaseOf = (serviceIdArg: string, nodeIdArg: string) =>
      allocated.find((lease) => lease.serviceId === serviceIdArg && lease.nodeId === nodeIdArg)!;
    const ingress1 = leaseOf(ingress.service.id, 'node-1');
    const ingress2 = leaseOf(ingress.service.id, 'node-2');
    const web1 = leaseOf(web.id, 'node-2');
    const other = leaseOf(unrouted.id, 'node-3');
    const asStatement = (leaseArg: typeof ingress1): IRuntimeNetworkWorkloadLease => ({ lease: leaseArg.lease, serviceId: leaseArg.serviceId, address: leaseArg.address });
    const reportLeases = (nodeIdArg: string, leasesArg: Array<typeof ingress1>) =>
      relay.fire('reportRuntimeNetworkLeases', { nodeId: nodeIdArg, leases: leasesArg.map(asStatement) });
    await reportLeases('node-1', [ingress1]);
    await reportLeases('node-2', [web1, ingress2]);
    await reportLeases('node-3', [other]);

    const node1 = await getProjection(clusterId, 'node-1');
    assert.deepEqual(node1.workloadIngress, {
      grants: [{
        source: ingress1.lease,
        destination: web1.lease,
        protocol: 'tcp', port: 8080,
        authorization: { kind: 'cluster-ingress-route', routeId: 'app.example.com' },
      }],
    });
    assert.deepEqual(node1.endpoints.map((endpoint) => [endpoint.lease.id, endpoint.nodeId, endpoint.address]),
      [[ingress1.lease.id, 'node-1', ingress1.address], [web1.lease.id, 'node-2', web1.address]]
        .sort((a, b) => (a[0] < b[0] ? -1 : 1)));
    const node2 = await getProjection(clusterId, 'node-2');
    assert.deepEqual(node2.workloadIngress?.grants.map((grant) => `${grant.source.id}->${grant.destination.id}`).sort(), [
      `${ingress1.lease.id}->${web1.lease.id}`, `${ingress2.lease.id}->${web1.lease.id}`,
    ].sort());
    const node3 = await getProjection(clusterId, 'node-3');
    assert.equal('workloadIngress' in node3, false, 'a node no grant touches carries no workloadIngress member');

    // The node decodes its packet grants from the stored projection.
    const packets = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(node1);
    assert.deepEqual(packets.valid ? packets.grants : null, [{
      source: ingress1.lease,
      destination: { lease: web1.lease, protocol: 'tcp', port: 8080 },
    }]);

    // node-2 no longer confirms the web lease: the grant is withdrawn explicitly, and the
    // withdrawal is carried forward until node-1 states it applied that projection.
    await reportLeases('node-2', [ingress2]);
    const withdrawn = await getProjection(clusterId, 'node-1');
    assert.equal(withdrawn.generation, node1.generation + 1);
    assert.deepEqual(withdrawn.workloadIngress, {
      grants: [],
      withdrawals: [{
        source: ingress1.lease,
        destination: web1.lease,
        protocol: 'tcp', port: 8080, generation: withdrawn.generation,
      }],
    });
    const judged = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(withdrawn, { previous: node1 });
    assert.equal(judged.valid, true);

    await reportLeases('node-3', [other]);
    const carried = await getProjection(clusterId, 'node-1');
    assert.equal(carried.generation, withdrawn.generation, 'nothing new for node-1: the withdrawal stays as it is');

    const staleApplication = await refusalOf(() => relay.fire(
      'reportRuntimeNetworkProjectionApplication', { application: describeRuntimeNetworkProjectionApplication(node1) }));
    assert.equal(staleApplication.code, 'conflict');
    await relay.fire(
      'reportRuntimeNetworkProjectionApplication', { application: describeRuntimeNetworkProjectionApplication(withdrawn) });
    const applied = await getProjection(clusterId, 'node-1');
    assert.equal(applied.generation, withdrawn.generation + 1);
    assert.equal('workloadIngress' in applied, false, 'once applied, the withdrawal is no longer carried');
  });

  test('full-mesh grants: workloads of one organization reach each other on the declared ports, through the relay\'s projection; a port no longer declared, or a source whose policy closes its egress, is withdrawn', async () => {
    const { cluster, relayToken } = await t.createCluster('rn-mesh');
    const relay = await electedRelay(cluster.id, relayToken);
    await reportNode(relay, 'node-1');
    await reportNode(relay, 'node-2');
    const serviceSpec = (nameArg: string, organizationArg: string, nodeArg: string, portsArg: Array<{ name: string; port: number; protocol: 'tcp' | 'udp' }>) => ({
      name: nameArg, organizationId: organizationArg, clusterId: cluster.id,
      runtime: { image: 'registry.example.com/app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [nodeArg] } },
      ports: portsArg,
      volumes: [],
    });
    const create = async (...argsArg: Parameters<typeof serviceSpec>) =>
      (await t.caller.call('createService', { service: serviceSpec(...argsArg) })).service;
    const api = await create('mesh-api', 'org-a', 'node-1', [{ name: 'http', port: 8080, protocol: 'tcp' }, { name: 'dns', port: 53, protocol: 'udp' }]);
    const db = await create('mesh-db', 'org-a', 'node-2', [{ name: 'pg', port: 5432, protocol: 'tcp' }]);
    const stranger = await create('mesh-other', 'org-b', 'node-2', [{ name: 'http', port: 8080, protocol: 'tcp' }]);
    const allocated = (await t.cloudly.runtimeNetworkManager.allocateCluster(cluster.id)).leases;
    const leaseOf = (serviceIdArg: string) => allocated.find((lease) => lease.serviceId === serviceIdArg)!;
    const [apiLease, dbLease, strangerLease] = [leaseOf(api.id), leaseOf(db.id), leaseOf(stranger.id)];
    const statement = (leaseArg: typeof apiLease): IRuntimeNetworkWorkloadLease => ({ lease: leaseArg.lease, serviceId: leaseArg.serviceId, address: leaseArg.address });
    await relay.fire('reportRuntimeNetworkLeases', { nodeId: 'node-1', leases: [statement(apiLease)] });
    await relay.fire('reportRuntimeNetworkLeases', { nodeId: 'node-2', leases: [statement(dbLease), statement(strangerLease)] });

    const readByRelay = async (nodeIdArg: string) =>
      (await relay.fire('getClusterNodeRuntimeNetworkProjection', { nodeId: nodeIdArg })).projection;
    const grantsOf = (projectionArg: IRuntimeNetworkProjection) =>
      projectionArg.grants.map((grant) => `${grant.source.id}->${grant.destination.id} ${grant.protocol}/${grant.port}`);
    const node1 = await readByRelay('node-1');
    // api and db (org-a) reach each other on what each declares; the org-b workload is reached by nobody and reaches nobody.
    assert.deepEqual(grantsOf(node1).sort(), [
      `${apiLease.lease.id}->${dbLease.lease.id} tcp/5432`,
      `${dbLease.lease.id}->${apiLease.lease.id} tcp/8080`,
      `${dbLease.lease.id}->${apiLease.lease.id} udp/53`,
    ].sort());
    // Valid as the node judges it, contract order included.
    assert.deepEqual(validateRuntimeNetworkProjection(node1), []);
    assert.ok(!node1.endpoints.some((endpoint) => endpoint.lease.id === strangerLease.lease.id), 'no grant names the other organization\'s lease');
    const node2 = await readByRelay('node-2');
    assert.ok(!grantsOf(node2).some((grant) => grant.includes(strangerLease.lease.id)));
    assert.equal(grantsOf(node2).length, 3);

    // db stops declaring its port: node-1's next projection withdraws that grant explicitly.
    const current = (await t.caller.call('getServiceById', { serviceId: db.id })) as { service: { generation: number } };
    await t.caller.call('updateService', { serviceId: db.id, expectedGeneration: current.service.generation, service: serviceSpec('mesh-db', 'org-a', 'node-2', []) });
    await waitFor(async () => (await readByRelay('node-1')).generation > node1.generation, 'node-1 projection recomputed after the port was dropped', 10_000);
    const withdrawn = await readByRelay('node-1');
    assert.deepEqual(grantsOf(withdrawn).sort(), [`${dbLease.lease.id}->${apiLease.lease.id} tcp/8080`, `${dbLease.lease.id}->${apiLease.lease.id} udp/53`].sort());
    assert.deepEqual(withdrawn.withdrawals, [{ source: apiLease.lease, destination: dbLease.lease, protocol: 'tcp', port: 5432, generation: withdrawn.generation }]);
    assert.deepEqual(validateRuntimeNetworkProjection(withdrawn), []);

    // db's network policy now requests no egress: it opens no mesh connection, so its grants to api are withdrawn too.
    const again = (await t.caller.call('getServiceById', { serviceId: db.id })) as { service: { generation: number } };
    await t.caller.call('updateService', {
      serviceId: db.id, expectedGeneration: again.service.generation,
      service: { ...serviceSpec('mesh-db', 'org-a', 'node-2', []), networkPolicy: { egress: { kind: 'none' } } },
    });
    await waitFor(async () => (await readByRelay('node-1')).generation > withdrawn.generation, 'node-1 projection recomputed after the egress was closed', 10_000);
    const closed = await readByRelay('node-1');
    assert.deepEqual(grantsOf(closed), []);
    assert.deepEqual((closed.withdrawals ?? []).filter((withdrawal) => withdrawal.generation === closed.generation).map((withdrawal) => `${withdrawal.source.id}->${withdrawal.destination.id} ${withdrawal.protocol}/${withdrawal.port}`).sort(),
      [`${dbLease.lease.id}->${apiLease.lease.id} tcp/8080`, `${dbLease.lease.id}->${apiLease.lease.id} udp/53`].sort());
    assert.deepEqual(validateRuntimeNetworkProjection(closed), []);
    await relay.close();
  });

  test('lease statements are validated and confined to the relay\'s own cluster', async () => {
    const { cluster, relayToken } = await t.createCluster('lease-checks');
    const relay = await electedRelay(cluster.id, relayToken);
    await reportNode(relay, 'node-1');
    const refused = await refusalOf(() => relay.fire('reportRuntimeNetworkLeases', {
      nodeId: 'node-1',
      leases: [
        { lease: { id: 'a', generation: 1 }, serviceId: 's', address: '10.0.0.1' },
        { lease: { id: 'a', generation: 1 }, serviceId: 's', address: '10.0.0.1' },
      ],
    }));
    assert.equal(refused.code, 'invalid-request');
    assertFieldProblems(refused, [
      ['request.leases[1].lease.id', 'field-invalid', 'must name each lease once'],
      ['request.leases[1].address', 'field-invalid', "must differ from every other lease's address"],
    ]);
    const foreign = await refusalOf(() => relay.fire('reportRuntimeNetworkLeases', {
      nodeId: 'node-of-another-cluster', leases: [],
    }));
    assert.equal(foreign.code, 'not-found');
    const notRelay = await refusalOf(() => t.caller.call('reportRuntimeNetworkLeases', {
      nodeId: 'node-1', leases: [],
    }));
    assert.equal(notRelay.code, 'forbidden');
  });

  test('projections and the plan survive a restart', async () => {
    const plan = await getPlan();
    const { cluster, relayToken } = await t.createCluster('restart');
    const relay = await electedRelay(cluster.id, relayToken);
    await reportNode(relay, 'node-1', ['192.0.2.17']);
    const before = await getProjection(cluster.id, 'node-1');
    await t.restart();
    assert.deepEqual(await getPlan(), plan);
    assert.deepEqual(await getProjection(cluster.id, 'node-1'), before);
  });
});

describe('lease statements answer to Cloudly\'s allocation', () => {
  test('with no address plan Cloudly allocated nothing, so any stated lease is refused and nothing is recorded', async () => {
    const t = await startTestCloudly();
    try {
      const { cluster, relayToken } = await t.createCluster('authority');
      const relay = await t.connectRelay(relayToken);
      await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).some((session) => t.cloudly.clusterManager.isElected(session)), 'relay elected');
      await relay.fire('reportClusterNode', { report: { nodeId: 'node-1', name: 'node-1' } });
      const { service } = await t.caller.call('createService', {
        service: { clusterId: cluster.id, name: 'mine', organizationId: 'org-1', runtime: { image: 'a:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } }, volumes: [] },
      });
      const refused = await refusalOf(() => relay.fire('reportRuntimeNetworkLeases', {
        nodeId: 'node-1', leases: [{ lease: { id: 'a', generation: 1 }, serviceId: service.id, address: '192.0.2.150' }],
      }));
      assert.equal(refused.code, 'invalid-request');
      assertFieldProblems(refused, [
        ['request.leases', 'field-invalid', 'cannot be confirmed: no address plan exists, so Cloudly allocated no lease'],
        ['request.leases[0].lease.id', 'field-not-found', 'is no lease Cloudly allocated'],
      ]);
      const projection = (await t.caller.call('getRuntimeNetworkProjection', { clusterId: cluster.id, nodeId: 'node-1' })).projection;
      assert.deepEqual(projection.endpoints, [], 'no refused lease became an endpoint');
      // An empty statement (nothing applied) is accepted.
      assert.equal(typeof (await relay.fire('reportRuntimeNetworkLeases', { nodeId: 'node-1', leases: [] })).generation, 'number');
    } finally {
      await t.stop();
    }
  });
});
