import { ofOwningCluster, ofOwningClusterInputs, type IController, type IReconcileContext, type IReconcileResult } from '../core/controller.js';
import type { DocumentStore } from '../core/store.js';
import type { ICommittedChange } from '../core/changefeed.js';
import { serviceObservedStateKind } from '../manager.desiredstate/documents.js';
import { allClusterIds, clusterKind } from './documents.js';
import { clusterLivenessKind, decideClusterLiveness, judgeClusterLiveness, type ILivenessSettings } from './liveness.js';
import { clusterRelayLeaseKind } from './relayelection.js';

/** How often the leader looks for relay leases that were released or ran out on any instance. */
export const livenessPollMs = 1_000;

export interface ILivenessPorts {
  store: DocumentStore;
  settings: ILivenessSettings;
  /** Since when this instance leads the reconciler (a fresh start gives every cluster the grace). */
  watchingSince: () => number;
}

/**
 * The liveness controller: whether each cluster is current (./liveness.ts), the only writer of
 * `CloudlyClusterLiveness`. Keys are cluster ids.
 *
 * A relay's lease is written by whichever instance holds its socket and is not audited, so other
 * instances' lease changes reach no feed: every `livenessPollMs` the leader reads the leases no
 * relay holds now (released or run out) together with those of the clusters it is tracking (not
 * current, or within their grace), one query whatever the fleet's size, and queues those. A
 * cluster within its grace is looked at again when the grace ends (`requeueAfterMs`), so it turns
 * `unknown` within a poll of the grace running out. A connected cluster is looked at again when
 * its newest report turns stale (`observed-state-stale`), so the periodic resync need only look at
 * clusters whose inputs changed (`digestResync`).
 */
export class LivenessController implements IController {
  public readonly name = 'liveness';
  public readonly writes = [clusterLivenessKind.collectionName] as const;
  public readonly inputs = {
    // A write of only the cluster's bookkeeping (a relay token rotation) changes nothing read here.
    CloudlyCluster: ofOwningClusterInputs,
    // Released or taken on this instance (another instance's lease changes reach the poll).
    CloudlyClusterRelayLease: ofOwningCluster,
    // A stored report renews the observations' age.
    CloudlyServiceObservedState: ofOwningCluster,
  };
  public readonly poll = { everyMs: livenessPollMs, keys: () => this.pollKeys() };
  /**
   * A lease's renewals move its generation and change nothing judged here: it stands in the
   * resync's digest by its holder and the times it was taken and given up. One that runs out
   * unrenewed is found by the poll.
   */
  public readonly digestResync = {
    keyOf: (clusterIdArg: string) => clusterIdArg,
    fields: { [clusterRelayLeaseKind.collectionName]: ['sessionId', 'acquiredAt', 'releasedAt'] },
  };
  /** Clusters last judged not current or waiting out their grace: the poll reads their leases too. */
  private readonly tracked = new Set<string>();
  /** Of clusters last judged connected and current: when their newest report turns stale. */
  private readonly staleAt = new Map<string, number>();

  constructor(private readonly ports: ILivenessPorts) {}

  public async all(): Promise<readonly string[]> {
    return allClusterIds(this.ports.store);
  }

  private async pollKeys(): Promise<readonly string[]> {
    const now = Date.now();
    // Two reads, not one `$or` holding the tracked ids: an `$in` inside `$or` is tested against
    // the whole list for every lease (10,000 tracked clusters over 10,000 leases every second took
    // the whole process in a cold storm of 10,000 relays); a top-level `$in` is tested with one set.
    const fields = ['id', 'sessionId', 'expiresAt'] as const;
    const [notHeld, trackedLeases] = await Promise.all([
      this.ports.store.findFields(clusterRelayLeaseKind, { $or: [{ sessionId: null }, { expiresAt: { $lte: now } }] } as never, fields),
      this.tracked.size === 0 ? [] : this.ports.store.findFields(clusterRelayLeaseKind, { id: { $in: [...this.tracked] } }, fields),
    ]);
    const leases = new Map([...notHeld, ...trackedLeases].map((leaseArg) => [leaseArg.id, leaseArg])).values();
    const keys = new Set<string>();
    for (const lease of leases) {
      const id = String(lease.id);
      const connected = lease.sessionId !== null && Number(lease.expiresAt) > now;
      // A connected cluster is queued only when it was tracked (it came back); one not connected
      // only when it is not tracked yet (it just went away): the rest is waiting out a deadline.
      if (connected === this.tracked.has(id)) {
        keys.add(id);
      }
    }
    return [...keys];
  }

  public async reconcile(clusterIdArg: string, contextArg: IReconcileContext): Promise<IReconcileResult> {
    const { store, settings } = this.ports;
    const now = Date.now();
    const lease = await store.get(clusterRelayLeaseKind, clusterIdArg);
    const staleAt = this.staleAt.get(clusterIdArg);
    if (contextArg.cause.kind === clusterRelayLeaseKind.collectionName && lease && lease.sessionId !== null && lease.expiresAt > now
      && !this.tracked.has(clusterIdArg) && staleAt !== undefined) {
      // Connected and current when last judged: a relay taking its lease again (a reconnect) changes
      // nothing but its report window, which starts again at the lease's acquisition.
      const nextStaleAt = Math.max(staleAt, lease.acquiredAt + settings.observedStaleMs + 1);
      this.staleAt.set(clusterIdArg, nextStaleAt);
      return { outcome: 'kept', requeueAfterMs: nextStaleAt - now };
    }
    const cluster = await store.get(clusterKind, clusterIdArg);
    if (!cluster) {
      this.tracked.delete(clusterIdArg);
      this.staleAt.delete(clusterIdArg);
      const { outcome } = await store.mutate(clusterLivenessKind, clusterIdArg, (currentArg) => (currentArg ? { kind: 'remove' } : { kind: 'keep' }));
      return { outcome: outcome === 'removed' ? 'removed' : 'kept' };
    }
    const observed = await store.findFields(serviceObservedStateKind, { clusterId: clusterIdArg }, ['placements']);
    let lastReportAt: number | null = null;
    for (const doc of observed) {
      for (const placement of (doc.placements ?? []) as Array<{ reportedAt?: unknown }>) {
        if (typeof placement.reportedAt === 'number' && (lastReportAt === null || placement.reportedAt > lastReportAt)) {
          lastReportAt = placement.reportedAt;
        }
      }
    }
    const judged = judgeClusterLiveness({ lease, lastReportAt, watchingSince: this.ports.watchingSince() || now, now }, settings);
    if (judged.unknown || judged.recheckAt !== null) {
      this.tracked.add(clusterIdArg);
    } else {
      this.tracked.delete(clusterIdArg);
    }
    if (judged.staleAt === undefined) {
      this.staleAt.delete(clusterIdArg);
    } else {
      this.staleAt.set(clusterIdArg, judged.staleAt);
    }
    const { outcome } = await store.mutate(clusterLivenessKind, clusterIdArg, (currentArg) => decideClusterLiveness(currentArg, clusterIdArg, judged.unknown));
    const deadline = judged.recheckAt ?? judged.staleAt ?? null;
    return deadline === null ? { outcome } : { outcome, requeueAfterMs: deadline - now + 1 };
  }
}
