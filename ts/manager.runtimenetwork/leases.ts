import type { Cloudly } from '../classes.cloudly.js';
import { currentOperation } from '../core/operationcontext.js';
import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import { WorkQueue } from '../core/workqueue.js';
import type { IRuntimeNetworkAddressPlan } from '../interfaces/data/runtimenetworkaddressplan.js';
import { ipv4ToNumber } from '../interfaces/private/ipv4.js';
import { clusterNodeKind } from '../manager.cluster/clusternodes.js';
import { clusterRelayRegistrationKind } from '../manager.cluster/relayregistrations.js';
import { serviceKind } from '../manager.service/service.manager.js';
import {
  addressBlockSize,
  decideBlock,
  eligibleNodesOf,
  entryOccupies,
  entryWorkloadKey,
  placeServiceReplicas,
  planPoolBlocks,
  poolReservedNumbers,
  toWorkloadLease,
  workloadKeyOf,
  type IAddressBlockContent,
  type IAddressBlockEntry,
  type IPoolBlocks,
  type IWantedWorkload,
} from './allocation.js';

/**
 * Cloudly's allocation of workload leases from the address plan's pools. The address block
 * documents are the one record of which address is held by which lease: every allocation and
 * every release is one compare-and-swap on the block that holds the address, so the database
 * decides any race for an address, within this process and across processes sharing the store.
 * Passes of one cluster run one at a time (a work queue keyed by cluster, coalescing triggers);
 * passes of different clusters run side by side and meet only on the blocks.
 *
 * A pass is incremental. The allocator keeps its copy of the blocks (with an index of the held
 * entries by cluster and service) and of each cluster's services and nodes, and every pass makes
 * that copy exact by generation first: one read of the blocks' `{ id, generation }`, one of the
 * cluster's services' and one of its nodes' (the full documents are read only for what changed).
 * Only the services whose facts or held entries changed are derived again; the answer is
 * assembled again only when one of them did. A pass that changes something writes only the blocks
 * that change, each by one compare-and-swap on the generation it knows (read and decided again
 * when another writer got there first), and then checks the blocks' generations once more: what
 * another allocator wrote meanwhile (two Cloudly instances placing the same workload) is seen in
 * the same pass, and a workload holding two leases keeps its lowest address and releases the
 * other, which every instance decides alike.
 */

/**
 * A block as stored: its entries as one JSON text, not an array of objects. The embedded database
 * copies every nested object on every read and write, so a block of 256 entry objects cost ~36 ms
 * to read and ~87 ms to swap on this machine; one string of the same content costs a fraction.
 */
export interface IAddressBlockDocument extends IStoredDocument {
  poolId: string;
  poolPrefix: string;
  start: number;
  /** JSON of `IAddressBlockEntry[]`, sorted by address. */
  entriesJson: string;
}

/** A block as the allocator works with it: its document's identity and its parsed entries. */
export interface IAddressBlock extends IAddressBlockContent {
  id: string;
  generation: number;
}

const parseBlock = (docArg: IAddressBlockDocument): IAddressBlock => ({
  id: docArg.id,
  generation: docArg.generation,
  poolId: docArg.poolId,
  poolPrefix: docArg.poolPrefix,
  start: docArg.start,
  entries: JSON.parse(docArg.entriesJson) as IAddressBlockEntry[],
});

/** Derived by Cloudly itself on every pass, so its writes append no audit event (the desired state shows every lease). */
export const addressBlockKind = defineDocumentKind<IAddressBlockDocument>('CloudlyRuntimeNetworkAddressBlock', { audited: false });

/** One held lease of a cluster as the desired state and the projections name it. */
export interface IAllocatedWorkloadLease {
  lease: { id: string; generation: number };
  serviceId: string;
  nodeId: string;
  replica: number;
  address: string;
}

/** What a pass leaves a cluster with. */
export interface IClusterAllocation {
  /** False while no address plan exists: Cloudly allocates nothing and refuses nothing. */
  managed: boolean;
  /** True when the plan holds no workload pool. */
  poolMissing: boolean;
  /** Held leases of the cluster, sorted by service, node and replica. */
  leases: IAllocatedWorkloadLease[];
  /** Workloads that wanted a lease and found no free address, by service. */
  shortfall: Map<string, number>;
  /** Whether this pass changed any block (a lease was allocated or released). */
  changed: boolean;
  /** When the earliest withdrawal window of any address ends (null when none is withdrawing). */
  nextWithdrawalEndsAt: number | null;
}

const leaseIndexes = new WeakMap<readonly IAllocatedWorkloadLease[], ReadonlyMap<string, IAllocatedWorkloadLease>>();

/**
 * The allocation's held leases by lease id, built once per distinct answer: a pass that changed
 * nothing answers the same `leases` array, so callers that look leases up on every pass (a node's
 * projection facts) share one index instead of building one of 10,000 entries each time.
 */
export const leaseIndexOf = (allocationArg: Pick<IClusterAllocation, 'leases'>): ReadonlyMap<string, IAllocatedWorkloadLease> => {
  let index = leaseIndexes.get(allocationArg.leases);
  if (!index) {
    index = new Map(allocationArg.leases.map((lease) => [lease.lease.id, lease]));
    leaseIndexes.set(allocationArg.leases, index);
  }
  return index;
};

/** Allocation rounds of one pass at most (a round after a write checks for concurrent writers). */
const maximumRounds = 4;

/** While a cluster is short of addresses and none is withdrawing, how often it looks again (another instance may free one). */
const shortPollMs = 5_000;

const compareStrings = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** A block of the copy, with what the allocator derives from it. */
interface ICachedBlock {
  block: IAddressBlock;
  /** Ends of the withdrawal windows of its released entries, ascending. */
  withdrawalEnds: number[];
  /** Addresses its entries occupy, exact until `takenUntil` (the next withdrawal end); null until asked. */
  taken: Set<number> | null;
  takenUntil: number;
}

/** One held entry of the index, with the block that holds it. */
interface IHeldEntry {
  entry: IAddressBlockEntry;
  blockId: string;
}

/** A service as the allocator needs it. */
interface IServiceFacts {
  generation: number;
  createdAt: number;
  replicas: number;
  placementNodeIds: string[];
  live: boolean;
}

/** What one service holds and wants, derived from its facts, the cluster's nodes and its held entries. */
interface IServiceDerived {
  /** Held leases kept, sorted by node and replica. */
  leases: IAllocatedWorkloadLease[];
  /** Wanted workloads without a lease, in replica order. */
  missing: IWantedWorkload[];
  /** Held entries to release (no longer wanted, or a second lease of one replica). */
  release: string[];
}

/** The allocator's copy of one cluster. */
interface IClusterFacts {
  services: Map<string, IServiceFacts>;
  nodeIds: string[];
  /** Live services in placement order (created first, then by id); null when to be sorted again. */
  order: string[] | null;
  derived: Map<string, IServiceDerived>;
  assembled: { leases: IAllocatedWorkloadLease[]; shortfall: Map<string, number> } | null;
}

/**
 * What a service holds and wants: each replica below the wanted count keeps the lowest-addressed
 * lease it holds on an eligible node (stable placement: `placeServiceReplicas`); every other
 * entry is released; replicas without a lease are missing, on the node placement gives them.
 * Pure.
 */
export const deriveServiceAllocation = (
  serviceArg: { id: string; replicas: number; placementNodeIds: readonly string[]; live: boolean } | null,
  clusterNodeIdsArg: readonly string[],
  heldArg: Iterable<IAddressBlockEntry>,
): IServiceDerived => {
  const release: string[] = [];
  if (serviceArg === null || !serviceArg.live) {
    for (const entry of heldArg) {
      release.push(entry.lease.id);
    }
    return { leases: [], missing: [], release };
  }
  const eligible = eligibleNodesOf(serviceArg.placementNodeIds, clusterNodeIdsArg);
  const eligibleSet = new Set(eligible);
  const replicas = eligible.length > 0 ? serviceArg.replicas : 0;
  const kept = new Map<number, IAddressBlockEntry>();
  for (const entry of heldArg) {
    if (entry.replica >= replicas || !eligibleSet.has(entry.nodeId)) {
      release.push(entry.lease.id);
      continue;
    }
    const other = kept.get(entry.replica);
    if (other === undefined) {
      kept.set(entry.replica, entry);
    } else if (ipv4ToNumber(entry.address) < ipv4ToNumber(other.address)) {
      release.push(other.lease.id);
      kept.set(entry.replica, entry);
    } else {
      release.push(entry.lease.id);
    }
  }
  const nodes = placeServiceReplicas(replicas, eligible, new Map([...kept].map(([replica, entry]) => [replica, entry.nodeId])));
  const leases: IAllocatedWorkloadLease[] = [];
  const missing: IWantedWorkload[] = [];
  for (let replica = 0; replica < replicas; replica++) {
    const entry = kept.get(replica);
    if (entry !== undefined) {
      leases.push(toWorkloadLease(entry));
    } else {
      missing.push({ key: workloadKeyOf(serviceArg.id, nodes[replica], replica), serviceId: serviceArg.id, nodeId: nodes[replica], replica });
    }
  }
  leases.sort((a, b) => compareStrings(a.nodeId, b.nodeId) || a.replica - b.replica);
  return { leases, missing, release };
};

export class WorkloadLeaseAllocator {
  private readonly passes: WorkQueue;
  private readonly results = new Map<string, { allocation?: IClusterAllocation; error?: unknown }>();
  /** The copy of the blocks, by id; exact after `syncBlocks`. */
  private readonly blocks = new Map<string, ICachedBlock>();
  /** Held (not released) entries of the copy: cluster → service → lease id → entry. */
  private readonly held = new Map<string, Map<string, Map<string, IHeldEntry>>>();
  /** Services whose held entries changed since their cluster's last derivation: cluster → service ids. */
  private readonly dirty = new Map<string, Set<string>>();
  private readonly clusters = new Map<string, IClusterFacts>();
  private readonly poolsByPlan = new WeakMap<IRuntimeNetworkAddressPlan, Array<IPoolBlocks & { reserved: Set<number> }>>();
  /** Clusters whose last pass left workloads without a lease: looked at again when an address may have become free. */
  private readonly shortClusters = new Set<string>();
  private retryTimer: { timer: NodeJS.Timeout; at: number } | null = null;
  private sweep: Promise<void> | null = null;
  private stopped = false;
  /** Called after a pass that changed the cluster's leases (the manager refreshes projections). */
  public onChanged: (clusterIdArg: string) => void = () => undefined;

  constructor(private readonly cloudly: Cloudly, private readonly readPlan: () => Promise<IRuntimeNetworkAddressPlan | null>) {
    this.passes = new WorkQueue({
      name: 'workload lease allocation',
      logger: cloudly.logger,
      process: async (clusterIdArg) => {
        try {
          const allocation = await this.pass(clusterIdArg);
          this.results.set(clusterIdArg, { allocation });
          if (allocation.changed) {
            this.onChanged(clusterIdArg);
          }
        } catch (error) {
          this.results.set(clusterIdArg, { error });
          throw error;
        }
      },
    });
  }

  public get windowMs(): number {
    return this.cloudly.config.runtimeNetworkWithdrawalWindowMs ?? 120_000;
  }

  /**
   * Takes work, and looks once at what the stored blocks and services say: a cluster whose
   * workloads lack leases, or hold leases they no longer want, gets a pass now. So a workload
   * refused while Cloudly was down (or before a restart) gets an address that became free in the
   * meantime, and the withdrawal timer is armed again from the stored windows.
   */
  public resume(): void {
    this.passes.resume();
    this.stopped = false;
    this.sweep = this.startupSweep().catch((error: unknown) => {
      this.cloudly.logger.warn({ err: error }, 'workload lease start-up sweep failed');
    });
  }

  public async drain(): Promise<void> {
    this.stopped = true;
    this.clearRetry();
    await this.sweep;
    await this.passes.drain();
  }

  private clearRetry(): void {
    if (this.retryTimer) {
      clearTimeout(this.retryTimer.timer);
      this.retryTimer = null;
    }
  }

  /**
   * While some cluster is short of addresses, one timer wakes its passes when the earliest
   * withdrawal window of the copy ends (an address of any cluster becomes free), or after
   * `shortPollMs` when none is withdrawing here (another instance may release one). The passes
   * run through the queue and tell `onChanged` when they allocated.
   */
  private armRetry(): void {
    if (this.stopped || this.shortClusters.size === 0) {
      this.clearRetry();
      return;
    }
    const now = Date.now();
    let next: number | null = null;
    for (const cached of this.blocks.values()) {
      const end = cached.withdrawalEnds.find((candidate) => candidate > now);
      if (end !== undefined && (next === null || end < next)) {
        next = end;
      }
    }
    const at = (next ?? now + shortPollMs) + 10;
    if (this.retryTimer && this.retryTimer.at <= at && this.retryTimer.at > now) {
      return;
    }
    this.clearRetry();
    const timer = setTimeout(() => {
      this.retryTimer = null;
      if (!this.stopped) {
        for (const clusterId of [...this.shortClusters]) {
          void this.passes.add(clusterId);
        }
      }
    }, Math.max(0, at - now));
    timer.unref();
    this.retryTimer = { timer, at };
  }

  private async startupSweep(): Promise<void> {
    const plan = await this.readPlan();
    if (plan === null || this.stopped) {
      return;
    }
    const { store } = this.cloudly;
    await this.syncBlocks();
    const [services, nodes] = await Promise.all([
      store.find(serviceKind, {}),
      store.findFields(clusterNodeKind, {}, ['clusterId', 'nodeId']),
    ]);
    const nodesByCluster = new Map<string, string[]>();
    for (const node of nodes) {
      const list = nodesByCluster.get(node.clusterId as string) ?? [];
      list.push(node.nodeId as string);
      nodesByCluster.set(node.clusterId as string, list);
    }
    const owed = new Set<string>();
    const known = new Set<string>();
    for (const service of services) {
      known.add(`${service.clusterId}\u0000${service.id}`);
      const held = this.held.get(service.clusterId)?.get(service.id)?.values() ?? [];
      const derived = deriveServiceAllocation(
        { id: service.id, replicas: service.runtime.replicas, placementNodeIds: service.runtime.placement.nodeIds, live: service.deletionRequestedAt === undefined },
        (nodesByCluster.get(service.clusterId) ?? []).sort(compareStrings),
        [...held].map((item) => item.entry),
      );
      if (derived.missing.length > 0 || derived.release.length > 0) {
        owed.add(service.clusterId);
      }
    }
    for (const [clusterId, byService] of this.held) {
      for (const serviceId of byService.keys()) {
        if (!known.has(`${clusterId}\u0000${serviceId}`)) {
          owed.add(clusterId);
        }
      }
    }
    for (const clusterId of [...owed].sort()) {
      if (this.stopped) {
        return;
      }
      await this.passes.add(clusterId);
    }
  }

  /**
   * Runs one allocation pass of the cluster that starts after this call (or joins the one that is
   * owed) and answers its result. A dry run writes nothing: it answers what is held now.
   */
  public async allocate(clusterIdArg: string): Promise<IClusterAllocation> {
    if (currentOperation().dryRun) {
      return this.pass(clusterIdArg, { write: false });
    }
    await this.passes.add(clusterIdArg);
    const result = this.results.get(clusterIdArg);
    if (!result) {
      // The queue is draining (Cloudly stops): answer what is held, write nothing.
      return this.pass(clusterIdArg, { write: false });
    }
    if (result.error !== undefined) {
      throw result.error;
    }
    return result.allocation!;
  }

  /**
   * Every held or withdrawing entry of every block (authority-wide). Read from the database unless
   * `cached` is asked for (the allocator's copy, made exact by generation first).
   */
  public async readEntries(optionsArg: { cached?: boolean } = {}): Promise<Array<IAddressBlockEntry & { poolId: string }>> {
    let blocks: IAddressBlock[];
    if (optionsArg.cached) {
      await this.syncBlocks();
      blocks = [...this.blocks.values()].map((cached) => cached.block);
    } else {
      blocks = (await this.cloudly.store.find(addressBlockKind, {})).map(parseBlock);
    }
    return blocks.flatMap((block) => block.entries.map((entry) => ({ ...entry, poolId: block.poolId })));
  }

  // ---- the copy of the blocks ---------------------------------------------------------------------

  private markDirty(clusterIdArg: string, serviceIdArg: string): void {
    let set = this.dirty.get(clusterIdArg);
    if (!set) {
      set = new Set();
      this.dirty.set(clusterIdArg, set);
    }
    set.add(serviceIdArg);
  }

  private indexBlock(blockArg: IAddressBlock, addArg: boolean): void {
    for (const entry of blockArg.entries) {
      if (entry.releasedAt !== undefined) {
        continue;
      }
      let byService = this.held.get(entry.clusterId);
      if (!byService) {
        if (!addArg) {
          continue;
        }
        byService = new Map();
        this.held.set(entry.clusterId, byService);
      }
      let byLease = byService.get(entry.serviceId);
      if (addArg) {
        if (!byLease) {
          byLease = new Map();
          byService.set(entry.serviceId, byLease);
        }
        byLease.set(entry.lease.id, { entry, blockId: blockArg.id });
      } else if (byLease?.get(entry.lease.id)?.blockId === blockArg.id) {
        byLease.delete(entry.lease.id);
        if (byLease.size === 0) {
          byService.delete(entry.serviceId);
        }
      }
      this.markDirty(entry.clusterId, entry.serviceId);
    }
  }

  /** Puts a block into the copy unless the copy already has it at this generation or a later one. */
  private setBlock(blockArg: IAddressBlock): void {
    const previous = this.blocks.get(blockArg.id);
    if (previous && previous.block.generation >= blockArg.generation) {
      return;
    }
    if (previous) {
      this.indexBlock(previous.block, false);
    }
    const withdrawalEnds = blockArg.entries.filter((entry) => entry.releasedAt !== undefined)
      .map((entry) => entry.releasedAt! + this.windowMs).sort((a, b) => a - b);
    this.blocks.set(blockArg.id, { block: blockArg, withdrawalEnds, taken: null, takenUntil: 0 });
    this.indexBlock(blockArg, true);
  }

  /** Makes the copy of the blocks exact: reads every block's generation, and the documents of those that changed. */
  private async syncBlocks(): Promise<void> {
    const { store } = this.cloudly;
    const rows = await store.findFields(addressBlockKind, {}, ['id', 'generation']);
    const changed: string[] = [];
    const present = new Set<string>();
    for (const row of rows) {
      const id = row.id as string;
      present.add(id);
      if (this.blocks.get(id)?.block.generation !== row.generation) {
        changed.push(id);
      }
    }
    for (const [id, cached] of [...this.blocks]) {
      if (!present.has(id)) {
        this.indexBlock(cached.block, false);
        this.blocks.delete(id);
      }
    }
    if (changed.length > 0) {
      for (const doc of await store.find(addressBlockKind, { id: { $in: changed } })) {
        this.setBlock(parseBlock(doc));
      }
    }
  }

  /** How many addresses of a block could be handed out at `nowArg`. */
  private freeIn(
    blockArg: { id: string; start: number; end: number },
    excludedArg: readonly number[],
    reservedArg: ReadonlySet<number>,
    nowArg: number,
  ): number {
    const cached = this.blocks.get(blockArg.id);
    let taken: ReadonlySet<number> = new Set();
    if (cached) {
      if (cached.taken === null || nowArg >= cached.takenUntil) {
        cached.taken = new Set(cached.block.entries.filter((entry) => entryOccupies(entry, nowArg, this.windowMs))
          .map((entry) => ipv4ToNumber(entry.address)));
        cached.takenUntil = cached.withdrawalEnds.find((end) => end > nowArg) ?? Number.POSITIVE_INFINITY;
      }
      taken = cached.taken;
    }
    let blocked = taken.size;
    for (const address of reservedArg) {
      if (address >= blockArg.start && address <= blockArg.end && !taken.has(address)) {
        blocked++;
      }
    }
    for (const address of excludedArg) {
      if (!taken.has(address) && !reservedArg.has(address)) {
        blocked++;
      }
    }
    return blockArg.end - blockArg.start + 1 - blocked;
  }

  // ---- the copy of a cluster's services and nodes -----------------------------------------------------

  /** Makes the cluster's facts exact: the services' and nodes' generations, the documents of the services that changed. */
  private async syncCluster(clusterIdArg: string): Promise<IClusterFacts> {
    const { store } = this.cloudly;
    let facts = this.clusters.get(clusterIdArg);
    if (!facts) {
      facts = { services: new Map(), nodeIds: [], order: null, derived: new Map(), assembled: null };
      this.clusters.set(clusterIdArg, facts);
    }
    const [serviceRows, nodeRows] = await Promise.all([
      store.findFields(serviceKind, { clusterId: clusterIdArg }, ['id', 'generation']),
      store.findFields(clusterNodeKind, { clusterId: clusterIdArg }, ['nodeId']),
    ]);
    const nodeIds = nodeRows.map((row) => row.nodeId as string).sort(compareStrings);
    const nodesChanged = nodeIds.length !== facts.nodeIds.length || nodeIds.some((nodeId, index) => nodeId !== facts!.nodeIds[index]);
    facts.nodeIds = nodeIds;
    const changed: string[] = [];
    const present = new Set<string>();
    for (const row of serviceRows) {
      const id = row.id as string;
      present.add(id);
      if (facts.services.get(id)?.generation !== row.generation) {
        changed.push(id);
      }
    }
    for (const id of [...facts.services.keys()]) {
      if (!present.has(id)) {
        facts.services.delete(id);
        facts.order = null;
        this.markDirty(clusterIdArg, id);
      }
    }
    if (changed.length > 0) {
      for (const doc of await store.find(serviceKind, { id: { $in: changed } })) {
        facts.services.set(doc.id, {
          generation: doc.generation,
          createdAt: doc.createdAt,
          replicas: doc.runtime.replicas,
          placementNodeIds: [...doc.runtime.placement.nodeIds],
          live: doc.deletionRequestedAt === undefined,
        });
        this.markDirty(clusterIdArg, doc.id);
      }
      facts.order = null;
    }
    if (nodesChanged) {
      for (const id of facts.services.keys()) {
        this.markDirty(clusterIdArg, id);
      }
    }
    return facts;
  }

  /** Derives again the services of the cluster whose facts or held entries changed. */
  private derive(clusterIdArg: string, factsArg: IClusterFacts): void {
    const dirty = this.dirty.get(clusterIdArg);
    if (!dirty || dirty.size === 0) {
      return;
    }
    this.dirty.delete(clusterIdArg);
    const byService = this.held.get(clusterIdArg);
    for (const serviceId of dirty) {
      const service = factsArg.services.get(serviceId);
      const held = byService?.get(serviceId);
      const derived = deriveServiceAllocation(service ? { id: serviceId, ...service } : null, factsArg.nodeIds,
        held ? [...held.values()].map((item) => item.entry) : []);
      if (derived.leases.length === 0 && derived.missing.length === 0 && derived.release.length === 0) {
        factsArg.derived.delete(serviceId);
      } else {
        factsArg.derived.set(serviceId, derived);
      }
    }
    factsArg.assembled = null;
  }

  private assemble(factsArg: IClusterFacts): NonNullable<IClusterFacts['assembled']> {
    if (factsArg.assembled === null) {
      const leases: IAllocatedWorkloadLease[] = [];
      const shortfall = new Map<string, number>();
      for (const serviceId of [...factsArg.derived.keys()].sort(compareStrings)) {
        const derived = factsArg.derived.get(serviceId)!;
        for (const lease of derived.leases) {
          leases.push(lease);
        }
        if (derived.missing.length > 0) {
          shortfall.set(serviceId, derived.missing.length);
        }
      }
      factsArg.assembled = { leases, shortfall };
    }
    return factsArg.assembled;
  }

  private poolsOf(planArg: IRuntimeNetworkAddressPlan): Array<IPoolBlocks & { reserved: Set<number> }> {
    let pools = this.poolsByPlan.get(planArg);
    if (!pools) {
      pools = planPoolBlocks(planArg).map((pool) => ({ ...pool, reserved: poolReservedNumbers(pool.prefix) }));
      this.poolsByPlan.set(planArg, pools);
    }
    return pools;
  }

  /** Addresses no workload may get: platform endpoints, hubs, and every address a node's host or a relay's host carries. */
  private async excludedNumbers(planArg: IRuntimeNetworkAddressPlan): Promise<Set<number>> {
    const { store } = this.cloudly;
    const [nodes, registrations] = await Promise.all([
      store.findFields(clusterNodeKind, { hostAddresses: { $exists: true } }, ['hostAddresses']),
      store.findFields(clusterRelayRegistrationKind, { hostAddresses: { $exists: true } }, ['hostAddresses']),
    ]);
    const addresses = [
      ...planArg.platformEndpoints.map((endpoint) => endpoint.address),
      ...planArg.hubs.map((hub) => hub.address),
      ...nodes.flatMap((node) => (node.hostAddresses as string[] | undefined) ?? []),
      ...registrations.flatMap((registration) => (registration.hostAddresses as string[] | undefined) ?? []),
    ];
    return new Set(addresses.map(ipv4ToNumber));
  }

  // ---- the pass --------------------------------------------------------------------------------------

  /**
   * One pass: the cluster's wanted workloads against the held leases of the blocks; releases what
   * is no longer wanted (kept out of use for the withdrawal window), allocates what is missing at
   * the lowest free address in plan order, one conditional write per touched block. After a write
   * the blocks are checked again (another allocator may have written meanwhile) and what that
   * changed is decided in the same pass.
   */
  private async pass(clusterIdArg: string, optionsArg: { write: boolean } = { write: true }): Promise<IClusterAllocation> {
    const plan = await this.readPlan();
    if (plan === null) {
      return { managed: false, poolMissing: true, leases: [], shortfall: new Map(), changed: false, nextWithdrawalEndsAt: null };
    }
    const pools = this.poolsOf(plan);
    const [, facts] = await Promise.all([this.syncBlocks(), this.syncCluster(clusterIdArg)]);
    this.derive(clusterIdArg, facts);
    let changed = false;
    let excluded: { all: Set<number>; byBlock: Map<number, number[]> } | null = null;
    const placed: IAddressBlockEntry[] = [];
    for (let round = 0; optionsArg.write && round < maximumRounds; round++) {
      if (round > 0) {
        await this.syncBlocks();
        this.derive(clusterIdArg, facts);
      }
      const { missing, release } = this.owed(facts);
      if (missing.length === 0 && release.size === 0) {
        break;
      }
      if (missing.length > 0 && excluded === null) {
        const all = await this.excludedNumbers(plan);
        const byBlock = new Map<number, number[]>();
        for (const address of all) {
          const start = address - (address % addressBlockSize);
          byBlock.set(start, [...(byBlock.get(start) ?? []), address]);
        }
        excluded = { all, byBlock };
      }
      const outcome = await this.commit(clusterIdArg, pools, missing, release, excluded ?? { all: new Set(), byBlock: new Map() });
      placed.push(...outcome.placed);
      changed ||= outcome.changed;
      if (!outcome.changed && !outcome.stale) {
        break;
      }
    }
    this.derive(clusterIdArg, facts);
    const { leases, shortfall } = this.assemble(facts);
    if (changed) {
      // Committed before any desired state names them; the log line is what a crash test watches.
      this.cloudly.logger.info({
        clusterId: clusterIdArg,
        allocated: placed.length,
        unplaced: [...shortfall.values()].reduce((sum, count) => sum + count, 0),
        leases: placed.slice(0, 64).map((entry) => `${entryWorkloadKey(entry)}=${entry.address}`),
      }, 'workload leases allocated');
    }
    let nextWithdrawalEndsAt: number | null = null;
    if (shortfall.size > 0) {
      const now = Date.now();
      for (const cached of this.blocks.values()) {
        const end = cached.withdrawalEnds.find((candidate) => candidate > now);
        if (end !== undefined && (nextWithdrawalEndsAt === null || end < nextWithdrawalEndsAt)) {
          nextWithdrawalEndsAt = end;
        }
      }
    }
    if (optionsArg.write) {
      if (shortfall.size > 0) {
        this.shortClusters.add(clusterIdArg);
      } else {
        this.shortClusters.delete(clusterIdArg);
      }
      this.armRetry();
    }
    return { managed: true, poolMissing: pools.length === 0, leases, shortfall, changed, nextWithdrawalEndsAt };
  }

  /** The cluster's missing workloads in placement order (services created first, replicas in order) and the leases to release. */
  private owed(factsArg: IClusterFacts): { missing: IWantedWorkload[]; release: Set<string> } {
    const missing: IWantedWorkload[] = [];
    const release = new Set<string>();
    let anyMissing = false;
    for (const derived of factsArg.derived.values()) {
      for (const leaseId of derived.release) {
        release.add(leaseId);
      }
      anyMissing ||= derived.missing.length > 0;
    }
    if (anyMissing) {
      if (factsArg.order === null) {
        factsArg.order = [...factsArg.services].filter(([, service]) => service.live)
          .sort(([idA, a], [idB, b]) => a.createdAt - b.createdAt || compareStrings(idA, idB)).map(([id]) => id);
      }
      for (const serviceId of factsArg.order) {
        for (const workload of factsArg.derived.get(serviceId)?.missing ?? []) {
          missing.push(workload);
        }
      }
    }
    return { missing, release };
  }

  /**
   * Writes what the cluster owes. The plan's blocks are walked in order on the copy: each block
   * that has a free address for the next missing workloads, or holds an entry to release, gets its
   * next content decided, and workloads that do not fit move on to the next block. The decided
   * blocks are then written together, each by one compare-and-swap on the generation the copy
   * knows (the journal syncs writes in flight together, so forty blocks cost about one sync). A
   * block that another writer changed meanwhile is read and decided again (the store's mutate);
   * workloads that no longer fit there are walked again from the start of the plan.
   */
  private async commit(
    clusterIdArg: string,
    poolsArg: Array<IPoolBlocks & { reserved: Set<number> }>,
    missingArg: IWantedWorkload[],
    releaseArg: Set<string>,
    excludedArg: { all: Set<number>; byBlock: Map<number, number[]> },
  ): Promise<{ changed: boolean; stale: boolean; placed: IAddressBlockEntry[] }> {
    const { store } = this.cloudly;
    const now = Date.now();
    const windowMs = this.windowMs;
    const releaseBlocks = new Set<string>();
    for (const byLease of this.held.get(clusterIdArg)?.values() ?? []) {
      for (const [leaseId, item] of byLease) {
        if (releaseArg.has(leaseId)) {
          releaseBlocks.add(item.blockId);
        }
      }
    }
    let missing = missingArg;
    let changed = false;
    let stale = false;
    const placed: IAddressBlockEntry[] = [];
    for (let walk = 0; walk < maximumRounds * 2 && (missing.length > 0 || releaseBlocks.size > 0); walk++) {
      // Decide on the copy.
      const planned: Array<{
        target: { id: string; poolId: string; poolPrefix: string; start: number; end: number };
        facts: Parameters<typeof decideBlock>[3];
        take: IWantedWorkload[];
        generation: number | null;
        decided: ReturnType<typeof decideBlock>;
      }> = [];
      let unplaced: IWantedWorkload[] = [];
      walking: for (const pool of poolsArg) {
        const facts = { clusterId: clusterIdArg, now, windowMs, excluded: excludedArg.all, reserved: pool.reserved };
        for (const block of pool.blocks) {
          if (missing.length === 0 && releaseBlocks.size === 0) {
            break walking;
          }
          const free = missing.length === 0 ? 0 : this.freeIn(block, (excludedArg.byBlock.get(block.start - (block.start % addressBlockSize)) ?? [])
            .filter((address) => address >= block.start && address <= block.end), pool.reserved, now);
          if (free <= 0 && !releaseBlocks.has(block.id)) {
            continue;
          }
          const take = missing.slice(0, Math.max(0, free));
          const target = { id: block.id, poolId: pool.poolId, poolPrefix: pool.prefix, start: block.start, end: block.end };
          const cached = this.blocks.get(block.id) ?? null;
          const decided = decideBlock(cached?.block ?? null, target, { release: releaseArg, place: take }, facts);
          missing = [...decided.unplaced, ...missing.slice(take.length)];
          releaseBlocks.delete(block.id);
          if (decided.changed) {
            planned.push({ target, facts, take, generation: cached?.block.generation ?? null, decided });
          }
        }
      }
      unplaced = missing;
      if (planned.length === 0) {
        break;
      }
      // Write the decided blocks together, each on the generation the copy knows.
      const written = await Promise.all(planned.map(async (item) => {
        const { target, decided } = item;
        const entriesJson = JSON.stringify(decided.content.entries);
        const doc = item.generation !== null
          ? await store.swap(addressBlockKind, target.id, item.generation, { set: { entriesJson } })
          : await store.insert(addressBlockKind, { id: target.id, poolId: target.poolId, poolPrefix: target.poolPrefix, start: target.start, entriesJson });
        return doc ? doc.generation : null;
      }));
      const retry: IWantedWorkload[] = [];
      for (let index = 0; index < planned.length; index++) {
        const item = planned[index];
        const generation = written[index];
        if (generation !== null) {
          this.setBlock({ id: item.target.id, generation, ...item.decided.content });
          changed = true;
          placed.push(...item.decided.placed);
          continue;
        }
        // Another writer got there first: decide again on what is stored.
        stale = true;
        let last: ReturnType<typeof decideBlock> | null = null;
        const { target } = item;
        const result = await store.mutate(addressBlockKind, target.id, (currentArg) => {
          last = decideBlock(currentArg ? parseBlock(currentArg) : null, target, { release: releaseArg, place: item.take }, item.facts);
          if (!last.changed) {
            return { kind: 'keep' };
          }
          const entriesJson = JSON.stringify(last.content.entries);
          return currentArg
            ? { kind: 'write', change: { set: { entriesJson } } }
            : { kind: 'create', doc: { id: target.id, poolId: target.poolId, poolPrefix: target.poolPrefix, start: target.start, entriesJson } };
        });
        const decided = last as ReturnType<typeof decideBlock> | null;
        if (result.doc) {
          this.setBlock(result.outcome === 'kept' || decided === null
            ? parseBlock(result.doc)
            : { id: target.id, generation: result.doc.generation, ...decided.content });
        }
        if (decided !== null && result.outcome !== 'kept') {
          changed = true;
          placed.push(...decided.placed);
        }
        retry.push(...(decided?.unplaced ?? item.take));
      }
      // What did not fit where it was meant to go is walked again, ahead of what found no room at all.
      missing = retry.length > 0 ? [...retry, ...unplaced] : [];
      if (retry.length === 0) {
        break;
      }
    }
    return { changed, stale, placed };
  }
}
