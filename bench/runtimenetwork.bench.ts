/**
 * How long validating and digesting a runtime network projection takes, and how that grows with
 * the number of workload ingress grants (64 → 1,024), plus one maximal projection (1,024 grants,
 * 4,096 carried withdrawals, 64 host platform endpoints). Then, on a real Cloudly with the
 * embedded database: Cloudly's allocation of 10,000 workload leases in one cluster (the first pass,
 * later passes that allocate one more lease, a pass with nothing to do, against one journaled
 * compare-and-swap of a small document as the baseline), and the route table of 1,000 routes that
 * resolve to lease addresses (pure resolution, the full desired-state computation, and the relay's
 * `getClusterRouteTable` against a plain relay round trip). Prints figures; asserts nothing but the
 * counts it measures. Results: bench/results/runtimenetwork.md.
 *
 *   node --import tsx bench/runtimenetwork.bench.ts
 */
import { performance } from 'node:perf_hooks';
import { startBenchCloudly, timeEach } from './helpers/benchcloudly.js';
import { LegacyWorkloadLeaseAllocator } from './helpers/runtimenetwork.legacyallocator.js';
import type { IClusterAllocation } from '../ts/manager.runtimenetwork/leases.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { resolveClusterRoutes } from '../ts/manager.desiredstate/routes.js';
import { decideBlock } from '../ts/manager.runtimenetwork/allocation.js';
import { deriveClusterRoutes } from '../ts/manager.desiredstate/routes.js';
import { serviceKind } from '../ts/manager.service/service.manager.js';
import { runtimeNetworkProjectionKind, runtimeNetworkLeasesKind } from '../ts/manager.runtimenetwork/runtimenetwork.manager.js';
import { defineDocumentKind, type IStoredDocument } from '../ts/core/store.js';
import type { IRuntimeNetworkAddressPlan } from '../ts/interfaces/data/runtimenetworkaddressplan.js';
import {
  computeRuntimeNetworkProjectionDigest,
  getRuntimeNetworkProjectionWorkloadIngressPacketGrants,
  sealRuntimeNetworkProjection,
  validateRuntimeNetworkProjection,
  type IRuntimeNetworkProjection,
  type IRuntimeNetworkWorkloadIngressWithdrawal,
} from '../ts/interfaces/data/index.js';
import { sized } from './helpers/smoke.js';

const pad = (valueArg: number): string => String(valueArg).padStart(5, '0');

const buildProjection = (grantCountArg: number, withdrawalCountArg: number, hostIdCountArg: number): IRuntimeNetworkProjection => {
  const targets = Array.from({ length: grantCountArg }, (_, index) => `target-${pad(index)}`);
  const withdrawals: IRuntimeNetworkWorkloadIngressWithdrawal[] = Array.from({ length: withdrawalCountArg }, (_, index) => ({
    source: { id: 'ingress', generation: 1 },
    destination: { id: `gone-${pad(index)}`, generation: 1 },
    protocol: 'tcp',
    port: 8080,
    generation: 2,
  }));
  return sealRuntimeNetworkProjection({
    id: 'cluster-1.node-a',
    generation: 2,
    previous: { generation: 1, digest: '0'.repeat(64) },
    controller: { kind: 'cloudly' },
    nodeId: 'node-a',
    endpoints: [
      { lease: { id: 'ingress', generation: 1 }, nodeId: 'node-a', address: '10.63.255.254' },
      ...targets.map((id, index) => ({
        lease: { id, generation: 1 },
        nodeId: index % 2 === 0 ? 'node-a' : 'node-b',
        address: `10.64.${Math.floor(index / 250)}.${(index % 250) + 1}`,
      })),
    ],
    grants: [],
    workloadIngress: {
      grants: targets.map((id) => ({
        source: { id: 'ingress', generation: 1 },
        destination: { id, generation: 1 },
        protocol: 'tcp' as const,
        port: 8080,
        authorization: { kind: 'cluster-ingress-route' as const, routeId: `route-${id}` },
      })),
      ...(withdrawals.length > 0 ? { withdrawals } : {}),
    },
    ...(hostIdCountArg > 0
      ? { hostPlatformEndpointIds: Array.from({ length: hostIdCountArg }, (_, index) => `endpoint-${pad(index)}`) }
      : {}),
  });
};

/** The allocation scenario's size: 100 services × 100 replicas (smoke: 5 × 5). */
const seededServices = sized(100, 5);
const seededReplicas = sized(100, 5);
const seededLeases = seededServices * seededReplicas;

/** Median milliseconds of `runsArg` calls after a warm-up. */
const measure = (fnArg: () => unknown, runsArg: number): number => {
  for (let index = 0; index < Math.min(5, runsArg); index++) {
    fnArg();
  }
  const samples: number[] = [];
  for (let index = 0; index < runsArg; index++) {
    const started = performance.now();
    fnArg();
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
};

const format = (msArg: number): string => `${msArg.toFixed(3)} ms`.padStart(11);

console.log('runtime network projection: validate (incl. digest check) and digest, median of 30 runs');
console.log('grants  endpoints   validate     digest   packet-grants  validate×  digest×');
const baseline: { validate: number; digest: number } = { validate: 0, digest: 0 };
for (const grants of [64, 128, 256, 512, 1_024]) {
  const projection = buildProjection(grants, 0, 0);
  if (validateRuntimeNetworkProjection(projection).length > 0) {
    throw new Error(`bench projection with ${grants} grants is invalid`);
  }
  const validate = measure(() => validateRuntimeNetworkProjection(projection), 30);
  const digest = measure(() => computeRuntimeNetworkProjectionDigest(projection), 30);
  const packets = measure(() => getRuntimeNetworkProjectionWorkloadIngressPacketGrants(projection), 30);
  if (grants === 64) {
    baseline.validate = validate;
    baseline.digest = digest;
  }
  console.log(`${String(grants).padStart(6)} ${String(projection.endpoints.length).padStart(10)} ${format(validate)} ${format(digest)} `
    + `${format(packets)}     ${(validate / baseline.validate).toFixed(1).padStart(5)}    ${(digest / baseline.digest).toFixed(1).padStart(5)}`);
}

const maximal = buildProjection(1_024, 4_096, 64);
const maximalReasons = validateRuntimeNetworkProjection(maximal);
if (maximalReasons.length > 0) {
  throw new Error(`maximal bench projection is invalid: ${maximalReasons[0]}`);
}
const bytes = Buffer.byteLength(JSON.stringify(maximal));
console.log(`maximal projection (1,024 grants, 4,096 withdrawals, 64 host endpoint ids, ${(bytes / 1024).toFixed(0)} KiB JSON):`);
console.log(`  validate ${format(measure(() => validateRuntimeNetworkProjection(maximal), 20))}`
  + `  digest ${format(measure(() => computeRuntimeNetworkProjectionDigest(maximal), 20))}`
  + `  packet grants ${format(measure(() => getRuntimeNetworkProjectionWorkloadIngressPacketGrants(maximal), 20))}`);

// ---- allocation and route table on a real Cloudly ----------------------------------------------

const plan: IRuntimeNetworkAddressPlan = {
  authorityId: 'bench-authority',
  revision: 1,
  prefixes: ['10.0.0.0/8'],
  pools: [{ id: 'workloads', prefix: '10.64.0.0/17' }],
  vpn: { hubPrefix: '10.0.0.0/28', peerPrefix: '10.1.0.0/16' },
  hubs: [],
  platformEndpoints: [{ id: 'relay', address: '10.2.0.1', protocol: 'tcp', port: 443 }],
};

const bench = await startBenchCloudly('runtimenetwork');
// The allocator as it was before the incremental pass, on a Cloudly of its own (own embedded
// database), measured beside the current one in the same run.
const legacyBench = await startBenchCloudly('runtimenetwork-legacy');
const { cloudly, admin } = bench;
try {
  const nodeIds = Array.from({ length: sized(64, 8) }, (_, index) => `node-${String(index).padStart(3, '0')}`);
  /** One Cloudly seeded with 100 services × 100 replicas on 64 nodes, its desired-state manager stopped. */
  const seed = async (benchArg: typeof bench) => {
    // The desired-state manager would run an allocation pass after every commit while seeding; it is
    // stopped so the passes below are the only ones, and each is timed by itself.
    await benchArg.cloudly.desiredStateManager.stop();
    await benchArg.admin.call('setRuntimeNetworkAddressPlan', { plan });
    const { cluster } = await benchArg.admin.call('createCluster', { name: 'bench-allocation' });
    for (const nodeId of nodeIds) {
      await benchArg.admin.call('addClusterNode', { clusterId: cluster.id, name: nodeId, nodeId });
    }
    const serviceIds: string[] = [];
    for (let index = 0; index < seededServices; index++) {
      const { service } = await benchArg.admin.call('createService', {
        service: {
          name: `bulk-${index}`, organizationId: 'org-1', clusterId: cluster.id,
          runtime: { image: 'registry.example/app:1', replicas: seededReplicas, profile: { runAs: null }, placement: { nodeIds: [] } },
          volumes: [],
        },
      });
      serviceIds.push(service.id);
    }
    return { clusterId: cluster.id as string, serviceIds };
  };
  interface ISide {
    name: string;
    clusterId: string;
    serviceIds: string[];
    cloudly: typeof cloudly;
    allocator: { allocate(clusterIdArg: string): Promise<IClusterAllocation>; onChanged: (clusterIdArg: string) => void };
    replicas: number;
  }
  const current: ISide = { name: 'current', ...(await seed(bench)), cloudly, allocator: cloudly.runtimeNetworkManager.leases, replicas: seededReplicas };
  const legacyAllocator = new LegacyWorkloadLeaseAllocator(legacyBench.cloudly, () => legacyBench.cloudly.runtimeNetworkManager.getAddressPlan());
  // Swapped in whole: the projections and the desired state of that Cloudly use it as they used the old one.
  legacyAllocator.onChanged = legacyBench.cloudly.runtimeNetworkManager.leases.onChanged;
  (legacyBench.cloudly.runtimeNetworkManager as unknown as { leases: unknown }).leases = legacyAllocator;
  const legacy: ISide = { name: 'before', ...(await seed(legacyBench)), cloudly: legacyBench.cloudly, allocator: legacyAllocator, replicas: seededReplicas };
  const sides = [legacy, current];
  const { store, runtimeNetworkManager } = cloudly;
  // Each pass is timed by itself: what a change triggers afterwards (every node's projection is
  // refreshed, each refresh running a pass) is switched off, and measured separately below.
  const background = new Map(sides.map((side) => [side, side.allocator.onChanged]));
  const quiet = (onArg: boolean) => {
    for (const side of sides) {
      side.allocator.onChanged = onArg ? background.get(side)! : () => undefined;
    }
  };
  quiet(false);

  // Baseline: one journaled compare-and-swap of a small document (the cost every committed write pays).
  interface IBenchCounter extends IStoredDocument { count: number }
  const counterKind = defineDocumentKind<IBenchCounter>('BenchRuntimeNetworkCounter', { audited: false });
  await store.mutate(counterKind, 'counter', () => ({ kind: 'create', doc: { id: 'counter', count: 0 } }));
  const cas = await timeEach(sized(50, 5), () => store.mutate(counterKind, 'counter', (currentArg) => ({ kind: 'write', change: { set: { count: currentArg!.count + 1 } } })));

  const firstMs = new Map<ISide, number>();
  let blocks = 0;
  for (const side of sides) {
    const started = performance.now();
    const first = await side.allocator.allocate(side.clusterId);
    firstMs.set(side, performance.now() - started);
    if (first.leases.length !== seededLeases || first.shortfall.size !== 0) {
      throw new Error(`the ${side.name} first pass allocated ${first.leases.length} leases`);
    }
    blocks = new Set(first.leases.map((lease) => lease.address.split('.').slice(0, 3).join('.'))).size;
  }

  /** Alternating between the two sides, `countArg` samples each of `fnArg`; p50 and p90 per side. */
  const alternate = async (countArg: number, fnArg: (sideArg: ISide) => Promise<number>) => {
    const samples = new Map(sides.map((side) => [side, [] as number[]]));
    for (let index = 0; index < countArg; index++) {
      for (const side of index % 2 === 0 ? sides : [...sides].reverse()) {
        samples.get(side)!.push(await fnArg(side));
      }
    }
    return new Map([...samples].map(([side, list]) => {
      list.sort((a, b) => a - b);
      return [side, { p50: list[Math.floor(list.length / 2)], p90: list[Math.floor(list.length * 0.9)] }];
    }));
  };
  const timed = async (fnArg: () => Promise<unknown>): Promise<number> => {
    const started = performance.now();
    await fnArg();
    return performance.now() - started;
  };
  const noop = await alternate(sized(30, 2), (side) => timed(() => side.allocator.allocate(side.clusterId)));
  // Later allocations: one more replica of one service, then the pass that allocates its lease.
  const laterPass = async (side: ISide): Promise<number> => {
    side.replicas++;
    await side.cloudly.store.mutate(serviceKind, side.serviceIds[0], (currentArg) => ({
      kind: 'write', change: { set: { runtime: { ...currentArg!.runtime, replicas: side.replicas } } },
    }));
    const started = performance.now();
    const allocation = await side.allocator.allocate(side.clusterId);
    const ms = performance.now() - started;
    if (allocation.leases.length !== seededLeases + (side.replicas - seededReplicas) || allocation.shortfall.size !== 0) {
      throw new Error(`a later ${side.name} pass did not allocate exactly one lease`);
    }
    return ms;
  };
  const later = await alternate(sized(30, 2), laterPass);
  // The same with every node's projection refreshed after each change, as a running Cloudly does:
  // one side at a time (both Cloudlys share this process), the refreshes of one change still running
  // while the next change is allocated, as when changes come back to back; settled before the other side.
  quiet(true);
  const laterBusy = new Map<ISide, { p50: number; p90: number }>();
  for (const side of sides) {
    const samples: number[] = [];
    for (let index = 0; index < sized(15, 2); index++) {
      samples.push(await laterPass(side));
    }
    await side.cloudly.runtimeNetworkManager.refreshCluster(side.clusterId);
    samples.sort((a, b) => a - b);
    // Indices 7 and 13 of the full run's 15 samples; the smoke run's 2 samples have no index 13.
    laterBusy.set(side, { p50: samples[Math.floor(samples.length / 2)], p90: samples[Math.min(samples.length - 1, Math.floor(samples.length * 0.9))] });
  }
  quiet(false);

  // The decision alone: one more workload into a block that holds 255 entries (pure, in memory).
  const fullBlock = { poolId: 'workloads', poolPrefix: plan.pools[0].prefix, start: 0x0a400000, entries: Array.from({ length: 255 }, (_, index) => ({
    address: `10.64.0.${index}`, lease: { id: `wl-${index}`, generation: 1 }, clusterId: current.clusterId, serviceId: 's', nodeId: 'n', replica: index, allocatedAt: 1,
  })) };
  const decideOne = measure(() => decideBlock(fullBlock, { poolId: 'workloads', poolPrefix: plan.pools[0].prefix, start: 0x0a400000, end: 0x0a4000ff },
    { release: new Set(), place: [{ key: 's/n/999', serviceId: 's', nodeId: 'n', replica: 999 }] },
    { clusterId: current.clusterId, now: 2, windowMs: 120_000, excluded: new Set(), reserved: new Set([0x0a400000]) }), 200);

  const ratio = (beforeArg: number, afterArg: number): string => `${(beforeArg / afterArg).toFixed(1)}× faster`;
  const row = (labelArg: string, figuresArg: Map<ISide, { p50: number; p90: number }>) => {
    const before = figuresArg.get(legacy)!;
    const after = figuresArg.get(current)!;
    console.log(`  ${labelArg}: before p50 ${before.p50.toFixed(2)} ms p90 ${before.p90.toFixed(2)} ms; now p50 ${after.p50.toFixed(2)} ms `
      + `p90 ${after.p90.toFixed(2)} ms (${ratio(before.p50, after.p50)}; now ${(after.p50 / cas.p50).toFixed(1)}× one CAS)`);
  };
  console.log('\nworkload lease allocation, one cluster, 100 services × 100 replicas on 64 nodes, pool /17; before = the previous allocator, same run');
  console.log(`  the decision alone (one lease into a block of 255, in memory): median ${(decideOne * 1000).toFixed(1)} µs`);
  console.log(`  baseline: one journaled compare-and-swap of a small document  p50 ${cas.p50.toFixed(2)} ms`);
  console.log(`  first pass, 10,000 leases into ${blocks} blocks: before ${firstMs.get(legacy)!.toFixed(0)} ms, now ${firstMs.get(current)!.toFixed(0)} ms total `
    + `(${(firstMs.get(current)! * 1000 / seededLeases).toFixed(1)} µs per lease, ${(firstMs.get(current)! / cas.p50).toFixed(0)}× one CAS; ${ratio(firstMs.get(legacy)!, firstMs.get(current)!)})`);
  row('pass with nothing to allocate', noop);
  row('later pass allocating one lease', later);
  row('later pass while the previous change\'s 64 projection refreshes run', laterBusy);

  // ---- route table of 1,000 routes -----------------------------------------------------------
  const routed = await admin.call('createCluster', { name: 'bench-routes' });
  const routedId = routed.cluster.id;
  for (const nodeId of nodeIds.slice(0, 8)) {
    await admin.call('addClusterNode', { clusterId: routedId, name: nodeId, nodeId });
  }
  const relay = await CloudlyRelayClient.connect(cloudly.baseUrl, routed.relayToken, { reconnect: false });
  for (let wait = 0; wait < 200 && !cloudly.relays.sessionsOf(routedId).some((session) => cloudly.clusterManager.isElected(session)); wait++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await relay.fire('registerClusterRelay', { registration: { origin: 'https://relay.bench.example.com', version: '1', protocol: 'cluster-relay/1' } });
  const { service: ingressService } = await admin.call('createService', {
    service: {
      name: 'ingress', organizationId: 'org-1', clusterId: routedId,
      runtime: { image: 'registry.example/ingress:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-000'] } },
      volumes: [],
    },
  });
  const { runtime } = await admin.call('getClusterRuntime', { clusterId: routedId });
  await admin.call('designateClusterIngress', {
    designation: {
      mutationId: 'bench-designation', clusterId: routedId, ingressServiceId: ingressService.id,
      currentRuntime: runtime as { id: string; phase: 'pallet'; generation: number },
      expectedSpecRevision: ingressService.specRevision, expectedDesignation: null,
    },
  });
  for (let index = 0; index < sized(100, 5); index++) {
    await admin.call('createService', {
      service: {
        name: `web-${index}`, organizationId: 'org-1', clusterId: routedId,
        runtime: {
          image: 'registry.example/web:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [nodeIds[1 + (index % 7)]] },
        },
        ports: Array.from({ length: 10 }, (_, port) => ({ name: `p${port}`, port: 8000 + port, protocol: 'tcp' as const })),
        routes: Array.from({ length: 10 }, (_, port) => ({ hostname: `h${port}.web-${index}.bench.example.com`, targetPort: `p${port}` })),
        volumes: [],
      },
    });
  }
  const routedLeases = (await runtimeNetworkManager.allocateCluster(routedId)).leases;
  for (const nodeId of nodeIds.slice(0, 8)) {
    await relay.fire('reportRuntimeNetworkLeases', {
      nodeId,
      leases: routedLeases.filter((lease) => lease.nodeId === nodeId).map((lease) => ({ lease: lease.lease, serviceId: lease.serviceId, address: lease.address })),
    });
  }
  await runtimeNetworkManager.refreshProjection(routedId, 'node-000');
  const state = await cloudly.desiredStateManager.currentDesiredState(routedId);
  if (state.routes.length !== sized(100, 5) * 10) {
    throw new Error(`only ${state.routes.length} of 1,000 routes resolved`);
  }
  const services = (await store.find(serviceKind, { clusterId: routedId }));
  const confirmations = await store.find(runtimeNetworkLeasesKind, { clusterId: routedId });
  const projections = (await store.find(runtimeNetworkProjectionKind, { clusterId: routedId })).map((doc) => doc.projection);
  const facts = {
    routes: deriveClusterRoutes(services),
    ingressServiceId: ingressService.id,
    leases: routedLeases,
    confirmed: new Set(confirmations.flatMap((doc) => doc.leases.map((lease) => lease.lease.id))),
    projections,
  };
  const pure = measure(() => resolveClusterRoutes(facts), 50);
  const derive = measure(() => deriveClusterRoutes(services), 50);
  const compute = await timeEach(sized(20, 2), () => cloudly.desiredStateManager.currentDesiredState(routedId));
  const roundTrip = await timeEach(sized(100, 5), () => relay.fire('getClusterNodeCorestores', { nodeIds: ['node-000'] }));
  const served = await timeEach(sized(100, 5), () => relay.fire('getClusterRouteTable', {}));
  console.log('\nroute table, 1,000 routes (100 services × 10 hostnames/ports) resolved to lease addresses');
  console.log(`  pure resolution (grant index + 1,000 routes): median ${pure.toFixed(3)} ms; deriving the routes from 101 services ${derive.toFixed(3)} ms`);
  console.log(`  full desired-state computation (allocation pass, reads, resolution, digest, publish check): p50 ${compute.p50.toFixed(1)} ms`);
  console.log(`  relay getClusterRouteTable (served from the last computed state): p50 ${served.p50.toFixed(2)} ms p90 ${served.p90.toFixed(2)} ms; `
    + `plain relay round trip p50 ${roundTrip.p50.toFixed(2)} ms (${(served.p50 / roundTrip.p50).toFixed(1)}×)`);
  relay.close();
} finally {
  await bench.stop();
  await legacyBench.stop();
}
