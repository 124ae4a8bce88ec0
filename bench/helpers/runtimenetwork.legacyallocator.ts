/**
 * The workload lease allocator as it was before the incremental pass (issue 17, measured in
 * bench/results/runtimenetwork.md at 342 ms p50 per later allocation): kept here only so the
 * benchmark can measure it beside the current one in the same run. Not used by Cloudly.
 */
import type { Cloudly } from '../../ts/classes.cloudly.js';
import { currentOperation } from '../../ts/core/operationcontext.js';
import { WorkQueue } from '../../ts/core/workqueue.js';
import type { IRuntimeNetworkAddressPlan } from '../../ts/interfaces/data/runtimenetworkaddressplan.js';
import { ipv4ToNumber } from '../../ts/interfaces/private/ipv4.js';
import { clusterNodeKind } from '../../ts/manager.cluster/clusternodes.js';
import { clusterRelayRegistrationKind } from '../../ts/manager.cluster/relayregistrations.js';
import { serviceKind } from '../../ts/manager.service/service.manager.js';
import {
  decideBlock,
  deriveServiceWorkloads,
  entryOccupies,
  entryWorkloadKey,
  freeInBlock,
  planPoolBlocks,
  poolReservedNumbers,
  toWorkloadLease,
  type IAddressBlockEntry,
  type IWantedWorkload,
} from '../../ts/manager.runtimenetwork/allocation.js';

/**
 * Cloudly's allocation of workload leases from the address plan's pools. The address block
 * documents are the one record of which address is held by which lease: every allocation and
 * every release is one compare-and-swap on the block that holds the address, so the database
 * decides any race for an address, within this process and across processes sharing the store.
 * Passes of one cluster run one at a time (a work queue keyed by cluster, coalescing triggers);
 * passes of different clusters run side by side and meet only on the blocks.
 */

import { addressBlockKind, type IAddressBlockDocument, type IAddressBlock, type IAllocatedWorkloadLease, type IClusterAllocation } from '../../ts/manager.runtimenetwork/leases.js';

const parseBlock = (docArg: IAddressBlockDocument): IAddressBlock => ({
  id: docArg.id,
  generation: docArg.generation,
  poolId: docArg.poolId,
  poolPrefix: docArg.poolPrefix,
  start: docArg.start,
  entries: JSON.parse(docArg.entriesJson) as IAddressBlockEntry[],
});

/** How long the allocator trusts its copy of the blocks before reading them again (writes of other processes). */
const cacheTtlMs = 5_000;

const compareLeases = (a: IAllocatedWorkloadLease, b: IAllocatedWorkloadLease): number =>
  (a.serviceId < b.serviceId ? -1 : a.serviceId > b.serviceId ? 1 : 0)
  || (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0)
  || a.replica - b.replica;

export class LegacyWorkloadLeaseAllocator {
  private readonly passes: WorkQueue;
  private readonly results = new Map<string, { allocation?: IClusterAllocation; error?: unknown }>();
  private cache: { blocks: Map<string, IAddressBlock>; readAt: number } | null = null;
  private readonly retryTimers = new Map<string, NodeJS.Timeout>();
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
          this.retryAfterWithdrawal(clusterIdArg, allocation);
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

  public resume(): void {
    this.passes.resume();
    this.stopped = false;
  }

  public async drain(): Promise<void> {
    this.stopped = true;
    for (const timer of this.retryTimers.values()) {
      clearTimeout(timer);
    }
    this.retryTimers.clear();
    await this.passes.drain();
  }

  /**
   * A cluster short of addresses while some address is withdrawing gets another pass (through its
   * desired state) once the earliest withdrawal window ends, so a released address reaches a
   * refused workload without anyone asking again.
   */
  private retryAfterWithdrawal(clusterIdArg: string, allocationArg: IClusterAllocation): void {
    if (this.stopped || allocationArg.shortfall.size === 0 || allocationArg.nextWithdrawalEndsAt === null
      || this.retryTimers.has(clusterIdArg)) {
      return;
    }
    const timer = setTimeout(() => {
      this.retryTimers.delete(clusterIdArg);
      if (!this.stopped) {
        this.onChanged(clusterIdArg);
      }
    }, Math.max(0, allocationArg.nextWithdrawalEndsAt - Date.now()) + 10);
    timer.unref();
    this.retryTimers.set(clusterIdArg, timer);
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
   * `cached` is asked for (a lease statement's judgement may use the allocator's own copy).
   */
  public async readEntries(optionsArg: { cached?: boolean } = {}): Promise<Array<IAddressBlockEntry & { poolId: string }>> {
    const blocks = optionsArg.cached
      ? [...(await this.loadBlocks()).values()]
      : (await this.cloudly.store.find(addressBlockKind, {})).map(parseBlock);
    return blocks.flatMap((block) => block.entries.map((entry) => ({ ...entry, poolId: block.poolId })));
  }

  /**
   * The blocks as this allocator last read or wrote them. Every write of this process goes through
   * the allocator and updates the copy, so in one process it is exact; it is read again from the
   * database after `cacheTtlMs` (writes of other processes sharing the store) and whenever a pass
   * found a block changed under it. A stale copy never decides anything on its own: every write is
   * a compare-and-swap decided on the block as the database holds it.
   */
  private async loadBlocks(): Promise<Map<string, IAddressBlock>> {
    const now = Date.now();
    if (this.cache && now - this.cache.readAt < cacheTtlMs) {
      return this.cache.blocks;
    }
    const blocks = new Map((await this.cloudly.store.find(addressBlockKind, {})).map((doc) => [doc.id, parseBlock(doc)]));
    this.cache = { blocks, readAt: now };
    return blocks;
  }

  /** Addresses no workload may get: platform endpoints, hubs, and every address a node's host or a relay's host carries. */
  private async excludedNumbers(planArg: IRuntimeNetworkAddressPlan): Promise<Set<number>> {
    const { store } = this.cloudly;
    const [nodes, registrations] = await Promise.all([
      store.find(clusterNodeKind, {}),
      store.find(clusterRelayRegistrationKind, {}),
    ]);
    const addresses = [
      ...planArg.platformEndpoints.map((endpoint) => endpoint.address),
      ...planArg.hubs.map((hub) => hub.address),
      ...nodes.flatMap((node) => node.hostAddresses ?? []),
      ...registrations.flatMap((registration) => registration.hostAddresses ?? []),
    ];
    return new Set(addresses.map(ipv4ToNumber));
  }

  /**
   * One pass: the cluster's wanted workloads against the held leases of the blocks; releases what
   * is no longer wanted (kept out of use for the withdrawal window), allocates what is missing at
   * the lowest free address in plan order, one conditional write per touched block. A block that
   * changed under the pass is decided again on what is stored (the store's mutate); workloads that
   * no longer fit there move on to the next block.
   */
  private async pass(clusterIdArg: string, optionsArg: { write: boolean } = { write: true }): Promise<IClusterAllocation> {
    const { store } = this.cloudly;
    const plan = await this.readPlan();
    const [services, nodes] = await Promise.all([
      store.find(serviceKind, { clusterId: clusterIdArg }),
      store.find(clusterNodeKind, { clusterId: clusterIdArg }),
    ]);
    const nodeIds = nodes.map((node) => node.nodeId).sort();
    const wanted: IWantedWorkload[] = services
      .filter((service) => service.deletionRequestedAt === undefined)
      .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))
      .flatMap((service) => deriveServiceWorkloads(service, nodeIds));
    if (plan === null) {
      return { managed: false, poolMissing: true, leases: [], shortfall: new Map(), changed: false, nextWithdrawalEndsAt: null };
    }
    const pools = planPoolBlocks(plan);
    const now = Date.now();
    const windowMs = this.windowMs;
    const shared = await this.loadBlocks();
    // This pass's view: the shared copy while writing (kept exact), a private one for a dry run.
    const blocks: Map<string, IAddressBlock> = optionsArg.write ? shared : new Map(shared);
    let stale = false;

    // What the cluster holds now; a workload holding more than one lease (two processes raced
    // for it) keeps its lowest address and releases the others.
    const wantedKeys = new Set(wanted.map((workload) => workload.key));
    const heldByKey = new Map<string, IAddressBlockEntry>();
    const release = new Set<string>();
    for (const block of blocks.values()) {
      for (const entry of block.entries) {
        if (entry.clusterId !== clusterIdArg || entry.releasedAt !== undefined) {
          continue;
        }
        const key = entryWorkloadKey(entry);
        if (!wantedKeys.has(key)) {
          release.add(entry.lease.id);
          continue;
        }
        const other = heldByKey.get(key);
        if (other === undefined) {
          heldByKey.set(key, entry);
        } else if (ipv4ToNumber(entry.address) < ipv4ToNumber(other.address)) {
          release.add(other.lease.id);
          heldByKey.set(key, entry);
        } else {
          release.add(entry.lease.id);
        }
      }
    }
    let remaining = wanted.filter((workload) => !heldByKey.has(workload.key));
    const placed: IAddressBlockEntry[] = [];
    let changed = false;
    if (optionsArg.write && (remaining.length > 0 || release.size > 0)) {
      const excluded = await this.excludedNumbers(plan);
      const releasedBlocks = new Set([...blocks.values()]
        .filter((block) => block.entries.some((entry) => release.has(entry.lease.id))).map((block) => block.id));
      for (const pool of pools) {
        const reserved = poolReservedNumbers(pool.prefix);
        const facts = { clusterId: clusterIdArg, now, windowMs, excluded, reserved };
        for (const block of pool.blocks) {
          if (remaining.length === 0 && release.size === 0) {
            break;
          }
          const cached = blocks.get(block.id) ?? null;
          const free = remaining.length === 0 ? 0 : freeInBlock(cached, block, facts);
          if (free === 0 && !releasedBlocks.has(block.id)) {
            continue;
          }
          const take = remaining.slice(0, free);
          let decided: ReturnType<typeof decideBlock> | null = null;
          const target = { poolId: pool.poolId, poolPrefix: pool.prefix, start: block.start, end: block.end };
          const result = await store.mutate(addressBlockKind, block.id, (currentArg) => {
            if ((currentArg?.generation ?? 0) !== (cached?.generation ?? 0)) {
              stale = true;
            }
            const current = currentArg ? parseBlock(currentArg) : null;
            decided = decideBlock(current, target, { release, place: take }, facts);
            if (!decided.changed) {
              return { kind: 'keep' };
            }
            const entriesJson = JSON.stringify(decided.content.entries);
            return currentArg
              ? { kind: 'write', change: { set: { entriesJson } } }
              : { kind: 'create', doc: { id: block.id, poolId: pool.poolId, poolPrefix: pool.prefix, start: block.start, entriesJson } };
          });
          const outcome = decided as ReturnType<typeof decideBlock> | null;
          if (result.doc) {
            blocks.set(block.id, parseBlock(result.doc));
          } else {
            blocks.delete(block.id);
          }
          if (outcome && result.outcome !== 'kept') {
            changed = true;
            placed.push(...outcome.placed);
            remaining = [...outcome.unplaced, ...remaining.slice(take.length)];
          }
          releasedBlocks.delete(block.id);
          if (releasedBlocks.size === 0) {
            release.clear();
          }
        }
      }
      if (stale) {
        // Another process wrote a block this copy did not know: read them all again next time.
        this.cache = null;
      }
      if (changed) {
        // Committed before any desired state names them; the log line is what a crash test watches.
        this.cloudly.logger.info({
          clusterId: clusterIdArg,
          allocated: placed.length,
          unplaced: remaining.length,
          leases: placed.slice(0, 64).map((entry) => `${entryWorkloadKey(entry)}=${entry.address}`),
        }, 'workload leases allocated');
      }
    }
    const leases = [...heldByKey.values(), ...placed]
      .filter((entry) => !release.has(entry.lease.id) && entryOccupies(entry, now, windowMs))
      .map((entry) => {
        const { serviceId, nodeId, replica, address, lease } = toWorkloadLease(entry);
        return { lease, serviceId, nodeId, replica, address };
      })
      .sort(compareLeases);
    const shortfall = new Map<string, number>();
    for (const workload of remaining) {
      shortfall.set(workload.serviceId, (shortfall.get(workload.serviceId) ?? 0) + 1);
    }
    let nextWithdrawalEndsAt: number | null = null;
    if (shortfall.size > 0) {
      for (const block of blocks.values()) {
        for (const entry of block.entries) {
          if (entry.releasedAt !== undefined && entry.releasedAt + windowMs > now
            && (nextWithdrawalEndsAt === null || entry.releasedAt + windowMs < nextWithdrawalEndsAt)) {
            nextWithdrawalEndsAt = entry.releasedAt + windowMs;
          }
        }
      }
    }
    return { managed: true, poolMissing: pools.length === 0, leases, shortfall, changed, nextWithdrawalEndsAt };
  }
}
