import { randomUUID } from 'node:crypto';
import type { Cloudly } from '../classes.cloudly.js';
import type { IRelaySession } from '../core/relaysessions.js';
import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import { refuse } from '../core/errors.js';
import { WorkQueue } from '../core/workqueue.js';
import { decideLeaseElection, decideLeaseRelease } from './decide.js';

/**
 * Elects exactly one relay connection per cluster. The election is a lease document per cluster
 * that names the holding socket and the Cloudly instance that holds it; it changes only by
 * compare-and-swap on its generation, so any number of Cloudly instances sharing one database
 * agree on a single holder. The holder renews the lease on a heartbeat; a lease whose instance
 * died simply runs out and the next live socket of the cluster takes it. When the elected socket
 * closes, its instance releases the lease at once and elects another live socket if it holds one.
 */

export interface IClusterRelayLeaseDocument extends IStoredDocument {
  /** Equal to `id`: one lease per cluster. */
  clusterId: string;
  /** The elected socket, or null when the lease was released. */
  sessionId: string | null;
  /** The Cloudly instance that holds the socket. */
  instanceId: string | null;
  /** Epoch milliseconds; after this the lease is free for anyone to take. */
  expiresAt: number;
  acquiredAt: number;
}

// A lease names sockets of a running process: the heartbeat renews it every few seconds, and the
// embedded database clears leases at start-up anyway, so its writes need not rewrite the snapshot.
export const clusterRelayLeaseKind = defineDocumentKind<IClusterRelayLeaseDocument>('CloudlyClusterRelayLease', { audited: false });

export interface IRelayElectionTiming {
  /** How long a lease stays valid without renewal. */
  leaseTtlMs: number;
  /** How often the holder renews its leases and idle sockets retry for free ones. */
  heartbeatMs: number;
}

export const defaultRelayElectionTiming: IRelayElectionTiming = Object.freeze({
  leaseTtlMs: 15_000,
  heartbeatMs: 5_000,
});

/** The reason a relay handler answers (with `unavailable`) on a socket that is not its cluster's elected one. */
export const relayNotElectedReason = 'relay-not-elected';

interface IHeldLease {
  sessionId: string;
  generation: number;
  expiresAt: number;
}

export class ClusterRelayElection {
  /** This process; leases name it so a restarted or second instance never mistakes them for its own. */
  public readonly instanceId = randomUUID();
  public readonly timing: IRelayElectionTiming;
  /** The leases this instance holds, by cluster, as last confirmed by the database. */
  private readonly held = new Map<string, IHeldLease>();
  /**
   * Election rounds by cluster: one at a time per cluster, and a trigger during a round gets one
   * more round after it (a socket that opened meanwhile is seen). Drained on stop.
   */
  private readonly elections: WorkQueue;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly cloudly: Cloudly, optionsArg: { timing?: IRelayElectionTiming } = {}) {
    this.timing = { ...(optionsArg.timing ?? defaultRelayElectionTiming) };
    this.elections = new WorkQueue({ name: 'relay election', logger: cloudly.logger, process: (clusterIdArg) => this.runElection(clusterIdArg) });
    cloudly.relays.setSelector((sessionsArg, clusterIdArg) => {
      const elected = this.electedSessionId(clusterIdArg);
      return elected === null ? null : sessionsArg.find((session) => session.id === elected) ?? null;
    });
    cloudly.relays.setElectionGate(async (clusterIdArg) => {
      if (this.electedSessionId(clusterIdArg) === null && cloudly.relays.sessionsOf(clusterIdArg).length > 0) {
        await this.elect(clusterIdArg);
      } else {
        await this.elections.idle(clusterIdArg);
      }
    });
    cloudly.relays.onSessionOpened((sessionArg) => this.elect(sessionArg.clusterId));
    cloudly.relays.onSessionClosed((sessionArg) => this.onSessionClosed(sessionArg));
  }

  public async start(): Promise<void> {
    this.stopped = false;
    this.elections.resume();
    if (this.cloudly.database.embedded) {
      // The embedded database lives inside this process, so no other instance can hold a lease in
      // it: whatever a previous run left behind names sockets that no longer exist.
      await this.releaseAllStale();
    }
    this.scheduleHeartbeat();
  }

  public async stop(): Promise<void> {
    this.stopped = true;
    if (this.heartbeatTimer) {
      clearTimeout(this.heartbeatTimer);
      this.heartbeatTimer = null;
    }
    await this.elections.drain();
    for (const [clusterId, lease] of [...this.held]) {
      await this.release(clusterId, lease.sessionId).catch((error: unknown) =>
        this.cloudly.logger.warn({ err: error, clusterId }, 'relay lease release on stop failed'));
    }
  }

  /** The socket id this instance holds the unexpired lease for, or null. */
  public electedSessionId(clusterIdArg: string): string | null {
    const lease = this.held.get(clusterIdArg);
    return lease && lease.expiresAt > Date.now() ? lease.sessionId : null;
  }

  /** Whether this socket is the connection elected for its cluster, right now. */
  public isElected(sessionArg: IRelaySession): boolean {
    return sessionArg.peer.isOpen && this.electedSessionId(sessionArg.clusterId) === sessionArg.id;
  }

  /** Like `isElected`, but first waits for an election of the socket's cluster still in flight. */
  public async confirmElected(sessionArg: IRelaySession): Promise<boolean> {
    if (!this.isElected(sessionArg) && sessionArg.peer.isOpen) {
      await this.elect(sessionArg.clusterId);
    }
    return this.isElected(sessionArg);
  }

  /** `confirmElected`, or the `unavailable` refusal every relay handler answers a socket that is not elected. */
  public async requireElected(sessionArg: IRelaySession): Promise<void> {
    if (!(await this.confirmElected(sessionArg))) {
      throw refuse('unavailable', [relayNotElectedReason]);
    }
  }

  /**
   * Whether a verified socket carries the cluster's relay right now, on any instance: the lease
   * is held and unexpired, and when this instance holds it, the socket is still open here.
   */
  public async isClusterConnected(clusterIdArg: string, leaseArg?: IClusterRelayLeaseDocument | null): Promise<boolean> {
    const lease = leaseArg === undefined ? await this.cloudly.store.get(clusterRelayLeaseKind, clusterIdArg) : leaseArg;
    if (!lease || lease.sessionId === null || lease.expiresAt <= Date.now()) {
      return false;
    }
    if (lease.instanceId !== this.instanceId) {
      return true;
    }
    return this.cloudly.relays.sessionsOf(clusterIdArg).some((session) => session.id === lease.sessionId)
      && this.electedSessionId(clusterIdArg) === lease.sessionId;
  }

  public async readLeases(clusterIdsArg?: string[]): Promise<IClusterRelayLeaseDocument[]> {
    return this.cloudly.store.find(clusterRelayLeaseKind, clusterIdsArg ? { id: { $in: clusterIdsArg } } : {});
  }

  /**
   * Asks for an election round of the cluster and waits for one that started after this call.
   * A failed round is logged by the queue ('relay election failed'); it never rejects.
   */
  public elect(clusterIdArg: string): Promise<void> {
    return this.elections.add(clusterIdArg);
  }

  /** The oldest open socket of the cluster on this instance is the candidate. */
  private candidate(clusterIdArg: string): IRelaySession | null {
    return [...this.cloudly.relays.sessionsOf(clusterIdArg)].sort((a, b) => a.connectedAt - b.connectedAt)[0] ?? null;
  }

  private async runElection(clusterIdArg: string): Promise<void> {
    // What the last decision concluded; the decider runs again on every lost race.
    let outcome: { winner: IRelaySession | null; heldElsewhere: boolean } = { winner: null, heldElsewhere: false };
    const result = await this.cloudly.store.mutate(clusterRelayLeaseKind, clusterIdArg, (leaseArg) => {
      outcome = { winner: null, heldElsewhere: false };
      const live = this.cloudly.relays.sessionsOf(clusterIdArg);
      const heldSessionId = this.electedSessionId(clusterIdArg);
      const candidate = this.candidate(clusterIdArg);
      if (this.stopped || (heldSessionId !== null && live.some((session) => session.id === heldSessionId)) || !candidate) {
        return { kind: 'keep' };
      }
      const election = decideLeaseElection(leaseArg, {
        clusterId: clusterIdArg,
        instanceId: this.instanceId,
        candidateSessionId: candidate.id,
        liveSessionIds: live.map((session) => session.id),
        now: Date.now(),
        leaseTtlMs: this.timing.leaseTtlMs,
      });
      outcome = {
        winner: live.find((session) => session.id === election.winnerSessionId) ?? null,
        heldElsewhere: election.heldElsewhere,
      };
      return election.decision;
    });
    if (outcome.heldElsewhere) {
      // A live socket on another instance holds it.
      this.held.delete(clusterIdArg);
    } else if (result.outcome !== 'kept' && result.doc && outcome.winner) {
      this.adopt(clusterIdArg, result.doc, outcome.winner);
    }
  }

  private adopt(clusterIdArg: string, leaseArg: IClusterRelayLeaseDocument, sessionArg: IRelaySession): void {
    this.held.set(clusterIdArg, { sessionId: sessionArg.id, generation: leaseArg.generation, expiresAt: leaseArg.expiresAt });
    this.cloudly.logger.info({ clusterId: clusterIdArg, sessionId: sessionArg.id }, 'relay socket elected');
    if (!sessionArg.peer.isOpen) {
      // The socket closed while the lease was being written: give the lease straight back.
      void this.onSessionClosed(sessionArg);
    }
  }

  private async onSessionClosed(sessionArg: IRelaySession): Promise<void> {
    const clusterId = sessionArg.clusterId;
    await this.elections.idle(clusterId);
    if (this.held.get(clusterId)?.sessionId !== sessionArg.id) {
      return;
    }
    await this.release(clusterId, sessionArg.id);
    if (!this.stopped) {
      await this.elect(clusterId);
    }
  }

  /** Frees the lease if it still names this socket of this instance. */
  private async release(clusterIdArg: string, sessionIdArg: string): Promise<void> {
    this.held.delete(clusterIdArg);
    const { outcome } = await this.cloudly.store.mutate(clusterRelayLeaseKind, clusterIdArg, (leaseArg) =>
      decideLeaseRelease(leaseArg, this.instanceId, sessionIdArg));
    if (outcome === 'written') {
      this.cloudly.logger.info({ clusterId: clusterIdArg, sessionId: sessionIdArg }, 'relay lease released');
    }
  }

  private async releaseAllStale(): Promise<void> {
    for (const stale of await this.cloudly.store.find(clusterRelayLeaseKind, {})) {
      await this.cloudly.store.mutate(clusterRelayLeaseKind, stale.id, (leaseArg) => (leaseArg && leaseArg.sessionId !== null
        ? { kind: 'write', change: { set: { sessionId: null, instanceId: null, expiresAt: 0 } } }
        : { kind: 'keep' }));
    }
  }

  private scheduleHeartbeat(): void {
    if (this.stopped) {
      return;
    }
    this.heartbeatTimer = setTimeout(() => {
      this.heartbeat()
        .catch((error: unknown) => this.cloudly.logger.error({ err: error }, 'relay lease heartbeat failed'))
        .finally(() => this.scheduleHeartbeat());
    }, this.timing.heartbeatMs);
    this.heartbeatTimer.unref();
  }

  /** Renews every lease this instance holds and lets unelected sockets try for free leases. */
  public async heartbeat(): Promise<void> {
    for (const [clusterId, held] of [...this.held]) {
      const renewed = await this.cloudly.store.mutate(clusterRelayLeaseKind, clusterId, (leaseArg) =>
        (leaseArg && leaseArg.sessionId === held.sessionId && leaseArg.instanceId === this.instanceId
          ? { kind: 'write', change: { set: { expiresAt: Date.now() + this.timing.leaseTtlMs } } }
          : { kind: 'keep' }));
      if (renewed.outcome !== 'written') {
        // Lost it (it ran out while this instance stalled and someone else took it).
        this.held.delete(clusterId);
      } else if (renewed.doc && this.held.get(clusterId)?.sessionId === held.sessionId) {
        this.held.set(clusterId, { sessionId: held.sessionId, generation: renewed.doc.generation, expiresAt: renewed.doc.expiresAt });
      }
    }
    const clusters = new Set(this.cloudly.relays.allSessions().map((session) => session.clusterId));
    for (const clusterId of clusters) {
      if (this.electedSessionId(clusterId) === null) {
        await this.elect(clusterId);
      }
    }
  }
}
