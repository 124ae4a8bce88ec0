import { createHash } from 'node:crypto';
import type { IRuntimeNetworkAddressPlan } from '../interfaces/data/runtimenetworkaddressplan.js';
import type { IRuntimeNetworkWorkloadLease } from '../interfaces/data/runtimenetwork.js';
import { ipv4ToNumber, parseIpv4Prefix } from '../interfaces/private/ipv4.js';

/**
 * The pure half of workload lease allocation: which workloads a cluster wants (service × node ×
 * replica), which addresses of the plan's pools are free, and what one address block document
 * should hold after an allocation pass. The manager (leases.ts) reads the facts and commits each
 * block by compare-and-swap; nothing here reads a database.
 *
 * Addresses are kept in blocks of at most 256 addresses, aligned on a /24 boundary inside a pool
 * (a smaller pool is one block). One block is one document, so two allocators that want the same
 * address both write the one document that holds it and the database's conditional write lets
 * exactly one of them commit; an allocation of 10,000 workloads writes about 40 documents.
 */

export const addressBlockSize = 256;

/** One workload of a cluster: a replica of a service, placed on one node. */
export interface IWantedWorkload {
  /** `service/node/replica`: the identity a lease is held for. */
  key: string;
  serviceId: string;
  nodeId: string;
  replica: number;
}

/** One address of a block as held (or being withdrawn) by a workload lease. */
export interface IAddressBlockEntry {
  address: string;
  lease: { id: string; generation: number };
  clusterId: string;
  serviceId: string;
  nodeId: string;
  replica: number;
  allocatedAt: number;
  /** Set when the workload left the desired state: the address stays taken for the withdrawal window. */
  releasedAt?: number;
}

/** What a block document holds, beside the store's id and generation. */
export interface IAddressBlockContent {
  poolId: string;
  /** The pool's prefix when the block was written; a block of a prefix the plan no longer has is ignored. */
  poolPrefix: string;
  /** First address of the block as a number (for ordering). */
  start: number;
  /** Sorted by address. */
  entries: IAddressBlockEntry[];
}

export const workloadKeyOf = (serviceIdArg: string, nodeIdArg: string, replicaArg: number): string =>
  `${serviceIdArg}/${nodeIdArg}/${replicaArg}`;

export const entryWorkloadKey = (entryArg: IAddressBlockEntry): string =>
  workloadKeyOf(entryArg.serviceId, entryArg.nodeId, entryArg.replica);

export const numberToIpv4 = (valueArg: number): string =>
  [valueArg >>> 24, (valueArg >>> 16) & 255, (valueArg >>> 8) & 255, valueArg & 255].join('.');

/** The block document id of a block of a pool: `<poolId>@<first address>`. */
export const addressBlockIdFor = (poolIdArg: string, startArg: number): string => `${poolIdArg}@${numberToIpv4(startArg)}`;

/**
 * Where each replica of a service runs, stable across node changes. A replica that holds a lease
 * on a node that is still eligible stays there (`heldArg`: replica → that node); every other
 * replica, in replica order, goes to the eligible node that runs the fewest of the service's
 * replicas so far, ties broken round robin (the first such node at or after the r-th eligible
 * node, cyclically). With nothing held this is exactly round robin: replica r on the r-th eligible
 * node. Adding a node moves no replica (new replicas fill it first); removing one moves only the
 * replicas it ran. The eligible nodes are the placement's nodes the cluster has (every node of
 * the cluster when the placement names none), sorted. Pure and deterministic.
 */
export const placeServiceReplicas = (
  replicasArg: number,
  eligibleArg: readonly string[],
  heldArg: ReadonlyMap<number, string> = new Map(),
): string[] => {
  const count = eligibleArg.length;
  if (count === 0 || replicasArg <= 0) {
    return [];
  }
  const index = new Map(eligibleArg.map((nodeId, position) => [nodeId, position]));
  const load = new Array<number>(count).fill(0);
  const assigned = new Array<string | undefined>(replicasArg);
  for (const [replica, nodeId] of heldArg) {
    const position = index.get(nodeId);
    if (replica >= 0 && replica < replicasArg && position !== undefined && assigned[replica] === undefined) {
      assigned[replica] = nodeId;
      load[position]++;
    }
  }
  for (let replica = 0; replica < replicasArg; replica++) {
    if (assigned[replica] !== undefined) {
      continue;
    }
    let best = replica % count;
    for (let step = 1; step < count; step++) {
      const candidate = (replica + step) % count;
      if (load[candidate] < load[best]) {
        best = candidate;
      }
    }
    assigned[replica] = eligibleArg[best];
    load[best]++;
  }
  return assigned as string[];
};

/** The eligible nodes of a service, sorted: the placement's nodes the cluster has, or every node of the cluster. */
export const eligibleNodesOf = (placementNodeIdsArg: readonly string[], clusterNodeIdsArg: readonly string[]): string[] => {
  const cluster = new Set(clusterNodeIdsArg);
  return (placementNodeIdsArg.length > 0 ? placementNodeIdsArg.filter((nodeId) => cluster.has(nodeId)) : [...clusterNodeIdsArg])
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
};

/**
 * The service's workloads when it holds no lease yet: replica r runs on the r-th eligible node,
 * round robin (`placeServiceReplicas` with nothing held). A service with no eligible node or no
 * replicas wants nothing.
 */
export const deriveServiceWorkloads = (
  serviceArg: { id: string; runtime: { replicas: number; placement: { nodeIds: string[] } } },
  clusterNodeIdsArg: readonly string[],
  heldArg: ReadonlyMap<number, string> = new Map(),
): IWantedWorkload[] =>
  placeServiceReplicas(serviceArg.runtime.replicas, eligibleNodesOf(serviceArg.runtime.placement.nodeIds, clusterNodeIdsArg), heldArg)
    .map((nodeId, replica) => ({ key: workloadKeyOf(serviceArg.id, nodeId, replica), serviceId: serviceArg.id, nodeId, replica }));

/** A pool as the allocator walks it: its blocks in address order. */
export interface IPoolBlocks {
  poolId: string;
  prefix: string;
  blocks: Array<{ id: string; start: number; end: number }>;
}

/** The pools of a plan, in plan order, each cut into blocks. Invalid prefixes (never stored) are skipped. */
export const planPoolBlocks = (planArg: IRuntimeNetworkAddressPlan | null): IPoolBlocks[] =>
  (planArg?.pools ?? []).flatMap((pool) => {
    const prefix = parseIpv4Prefix(pool.prefix);
    if (prefix === null) {
      return [];
    }
    const size = 2 ** (32 - prefix.length);
    const blocks: IPoolBlocks['blocks'] = [];
    for (let start = prefix.network; start < prefix.network + size; start += addressBlockSize) {
      blocks.push({ id: addressBlockIdFor(pool.id, start), start, end: Math.min(start + addressBlockSize, prefix.network + size) - 1 });
    }
    return [{ poolId: pool.id, prefix: pool.prefix, blocks }];
  });

/** The addresses of a pool never handed to a workload: its network and broadcast address (pools of /30 and wider). */
export const poolReservedNumbers = (prefixArg: string): Set<number> => {
  const prefix = parseIpv4Prefix(prefixArg);
  if (prefix === null || prefix.length > 30) {
    return new Set();
  }
  return new Set([prefix.network, prefix.network + 2 ** (32 - prefix.length) - 1]);
};

/** Whether an entry still holds its address at `nowArg`: held, or released less than the window ago. */
export const entryOccupies = (entryArg: IAddressBlockEntry, nowArg: number, windowMsArg: number): boolean =>
  entryArg.releasedAt === undefined || entryArg.releasedAt + windowMsArg > nowArg;

/** A lease id: unique per workload, address and instant of allocation. */
export const leaseIdFor = (clusterIdArg: string, workloadArg: IWantedWorkload, addressArg: string, atArg: number): string =>
  `wl-${createHash('sha256').update(`${clusterIdArg}\u0000${workloadArg.key}\u0000${addressArg}\u0000${atArg}`).digest('hex').slice(0, 32)}`;

/** What one pass wants done to one block: entries to release and workloads to place in it. */
export interface IBlockIntent {
  release: ReadonlySet<string>;
  place: IWantedWorkload[];
}

/**
 * The next content of one block for one cluster's pass, decided on the block as it is stored now:
 * entries of `releaseArg` lease ids are marked released, entries past their withdrawal window are
 * dropped, and each workload of `placeArg` takes the lowest address of the block that is free
 * (not held, not withdrawing, not reserved, not excluded). A workload that already holds an
 * address of this block (another allocator placed it since this one last read the block) is not
 * placed again: it is answered in `present`. Workloads that find no free address are answered in
 * `unplaced`, for the next block. Pure and deterministic for equal inputs.
 */
export const decideBlock = (
  currentArg: IAddressBlockContent | null,
  blockArg: { poolId: string; poolPrefix: string; start: number; end: number },
  intentArg: IBlockIntent,
  factsArg: { clusterId: string; now: number; windowMs: number; excluded: ReadonlySet<number>; reserved: ReadonlySet<number> },
): { content: IAddressBlockContent; placed: IAddressBlockEntry[]; present: IAddressBlockEntry[]; unplaced: IWantedWorkload[]; changed: boolean } => {
  let changed = false;
  const entries: IAddressBlockEntry[] = [];
  for (const entry of currentArg?.entries ?? []) {
    if (!entryOccupies(entry, factsArg.now, factsArg.windowMs)) {
      changed = true;
      continue;
    }
    if (entry.releasedAt === undefined && entry.clusterId === factsArg.clusterId && intentArg.release.has(entry.lease.id)) {
      entries.push({ ...entry, releasedAt: factsArg.now });
      changed = true;
      continue;
    }
    entries.push(entry);
  }
  const taken = new Set(entries.map((entry) => ipv4ToNumber(entry.address)));
  const heldHere = new Map<string, IAddressBlockEntry>();
  for (const entry of entries) {
    if (entry.releasedAt === undefined && entry.clusterId === factsArg.clusterId) {
      heldHere.set(entryWorkloadKey(entry), entry);
    }
  }
  const placed: IAddressBlockEntry[] = [];
  const present: IAddressBlockEntry[] = [];
  const unplaced: IWantedWorkload[] = [];
  let cursor = blockArg.start;
  for (const workload of intentArg.place) {
    const already = heldHere.get(workload.key);
    if (already !== undefined) {
      present.push(already);
      continue;
    }
    while (cursor <= blockArg.end && (taken.has(cursor) || factsArg.excluded.has(cursor) || factsArg.reserved.has(cursor))) {
      cursor++;
    }
    if (cursor > blockArg.end) {
      unplaced.push(workload);
      continue;
    }
    const address = numberToIpv4(cursor);
    taken.add(cursor);
    const entry: IAddressBlockEntry = {
      address,
      lease: { id: leaseIdFor(factsArg.clusterId, workload, address, factsArg.now), generation: 1 },
      clusterId: factsArg.clusterId,
      serviceId: workload.serviceId,
      nodeId: workload.nodeId,
      replica: workload.replica,
      allocatedAt: factsArg.now,
    };
    placed.push(entry);
    entries.push(entry);
    changed = true;
  }
  if (placed.length > 0) {
    entries.sort((a, b) => ipv4ToNumber(a.address) - ipv4ToNumber(b.address));
  }
  return {
    content: { poolId: blockArg.poolId, poolPrefix: blockArg.poolPrefix, start: blockArg.start, entries },
    placed,
    present,
    unplaced,
    changed,
  };
};

/** How many addresses of a block could still be handed out now. */
export const freeInBlock = (
  currentArg: IAddressBlockContent | null,
  blockArg: { start: number; end: number },
  factsArg: { now: number; windowMs: number; excluded: ReadonlySet<number>; reserved: ReadonlySet<number> },
): number => {
  const taken = new Set((currentArg?.entries ?? []).filter((entry) => entryOccupies(entry, factsArg.now, factsArg.windowMs))
    .map((entry) => ipv4ToNumber(entry.address)));
  let free = 0;
  for (let address = blockArg.start; address <= blockArg.end; address++) {
    if (!taken.has(address) && !factsArg.excluded.has(address) && !factsArg.reserved.has(address)) {
      free++;
    }
  }
  return free;
};

/** A held entry as the lease a relay confirms and a projection names. */
export const toWorkloadLease = (entryArg: IAddressBlockEntry): IRuntimeNetworkWorkloadLease & { nodeId: string; replica: number } => ({
  lease: { id: entryArg.lease.id, generation: entryArg.lease.generation },
  serviceId: entryArg.serviceId,
  address: entryArg.address,
  nodeId: entryArg.nodeId,
  replica: entryArg.replica,
});

/**
 * Every reason a node's lease statement disagrees with Cloudly's allocation for that node: each
 * stated lease must be a lease Cloudly holds for a workload of that node, with the same generation,
 * service and address. Stating fewer leases than allocated is allowed (the node has not applied
 * them all yet). Pure.
 */
export const judgeLeaseConfirmation = (
  leasesArg: readonly IRuntimeNetworkWorkloadLease[],
  factsArg: {
    nodeId: string;
    /** Cloudly's held leases of the cluster, by lease id. */
    allocated: ReadonlyMap<string, IRuntimeNetworkWorkloadLease & { nodeId: string }>;
    /** Services of the relay's cluster (live or pending removal). */
    serviceIds: ReadonlySet<string>;
    /** address → holder description, for addresses Cloudly holds for other leases. */
    addressHolders: ReadonlyMap<string, string>;
  },
  pathArg = 'request.leases',
): string[] => {
  const reasons: string[] = [];
  leasesArg.forEach((lease, index) => {
    const path = `${pathArg}[${index}]`;
    if (!factsArg.serviceIds.has(lease.serviceId)) {
      reasons.push(`${path}.serviceId names no service of this cluster`);
    }
    const allocated = factsArg.allocated.get(lease.lease.id);
    if (!allocated) {
      const holder = factsArg.addressHolders.get(lease.address);
      reasons.push(holder
        ? `${path}.lease.id is no lease Cloudly allocated; ${lease.address} is held by ${holder}`
        : `${path}.lease.id is no lease Cloudly allocated`);
      return;
    }
    if (allocated.nodeId !== factsArg.nodeId) {
      reasons.push(`${path} names a lease Cloudly allocated on node ${allocated.nodeId}, not ${factsArg.nodeId}`);
    }
    if (allocated.lease.generation !== lease.lease.generation) {
      reasons.push(`${path}.lease.generation must be ${allocated.lease.generation}, the allocated generation`);
    }
    if (allocated.serviceId !== lease.serviceId) {
      reasons.push(`${path}.serviceId must be ${allocated.serviceId}, the service the lease was allocated to`);
    }
    if (allocated.address !== lease.address) {
      reasons.push(`${path}.address must be ${allocated.address}, the allocated address`);
    }
  });
  return reasons;
};
