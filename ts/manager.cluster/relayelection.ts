import { randomUUID } from 'node:crypto';
import type { Cloudly } from '../classes.cloudly.js';
import type { IRelaySession, IRelaySessionPorts } from '../core/relaysessions.js';
import { defineDocumentKind, type IStoredDocument, ownedByClusterOfId } from '../core/store.js';
import { refuse, refuseNamed } from '../core/errors.js';
import { WorkQueue } from '../core/workqueue.js';
import { defaultRelayWorkConcurrency } from '../config.js';
import { decideLeaseElection, decideLeaseRelease } from './decide.js';
import { InstanceRegistry, instanceFailureReasons, readForwardedRelayCall, type TForwardedRelayAnswer } from '../core/instances.js';
import { isRefusal } from '../core/errors.js';
import { runAsCloudly } from '../core/operationcontext.js';

/**
 * Elects exactly one relay connection per cluster. The election is a lease document per cluster
 * that names the holding socket and the Cloudly instance that holds it; it changes only by
 * compare-and-swap on its generation, so any number of Cloudly instances sharing one database
 * agree on a single holder. The holder renews the lease on a heartbeat; a lease whose instance
 * died simply runs out and the next live socket of the cluster takes it. When the elected socket
 * closes, its instance releases the lease at once and elects another live socket if it holds one.
 *
 * With several instances over one database (docs/multi-instance.md), a call for a cluster whose
 * lease another live instance holds is forwarded to it (the instance registry, ts/core/instances.ts);
 * an instance whose socket lost the race to another instance's tries again the moment that lease
 * would run out, so a dead holder is replaced within the lease time.
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
  /** Epoch milliseconds of the last release (the liveness controller counts the grace from it). */
  releasedAt?: number;
}

// A lease names sockets of a running process: the heartbeat renews it every few seconds, and the
// embedded database clears leases at start-up anyway, so its writes need not rewrite the snapshot.
export const clusterRelayLeaseKind = defineDocumentKind<IClusterRelayLeaseDocument>('CloudlyClusterRelayLease', { audited: false, owners: ownedByClusterOfId });

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

/** How soon a socket whose cluster's lease another instance holds looks again (the holder may release it early). */
const elsewhereRecheckMs = 1_000;

/** How long a call reuses the lease it read to forward to its holder (a moved lease is read again). */
const forwardingLeaseCacheMs = 1_000;

/** The reason a relay handler answers (with `unavailable`) on a socket that is not its cluster's elected one. */
export const relayNotElectedReason = 'relay-not-elected';

/** A forwarded call's refusal as the holder answers it, with its HTTP status. */
const forwardedRefusal = (statusArg: number, errorArg: { errorText: string; errorData: unknown }): { status: number; answer: TForwardedRelayAnswer } =>
  ({ status: statusArg, answer: { error: { text: errorArg.errorText, data: errorArg.errorData } } });

interface IHeldLease {
  sessionId: string;
  generation: number;
  expiresAt: number;
}

/**
 * The relay sessions' port (ts/core/relaysessions.ts) as this Cloudly's election provides it; the
 * composition root passes it when it builds the sessions. Each member reads the election when it
 * is called, so the sessions can be built before the cluster manager that owns the election.
 */
export const cloudlyRelaySessionPorts = (cloudlyArg: Cloudly): IRelaySessionPorts => ({
  selectSession: (sessionsArg, clusterIdArg) => cloudlyArg.clusterManager.relayElection.selectSession(sessionsArg, clusterIdArg),
  awaitElection: (clusterIdArg) => cloudlyArg.clusterManager.relayElection.awaitElection(clusterIdArg),
  routeElsewhere: (clusterIdArg, methodArg, requestArg, timeoutMsArg) =>
    cloudlyArg.clusterManager.relayElection.routeElsewhere(clusterIdArg, methodArg, requestArg, timeoutMsArg),
});

export class ClusterRelayElection implements IRelaySessionPorts {
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
  /** The lease a forwarded call last read, by cluster, reused for `forwardingLeaseCacheMs`. */
  private readonly forwardingLeases = new Map<string, { lease: IClusterRelayLeaseDocument; until: number }>();
  /** Until when another instance's socket holds the lease, as the last round read it, by cluster. */
  private readonly elsewhere = new Map<string, number>();
  /**
   * Clusters whose lease is held by an instance known to be down (`InstanceRegistry.isKnownDown`):
   * nobody releases it before it runs out, so the next round and the relay's next registration
   * wait for that instead of looking again every `elsewhereRecheckMs`.
   */
  private readonly heldByDownInstance = new Set<string>();
  /** Elections to try again when a lease held elsewhere runs out, by cluster. */
  private readonly retryTimers = new Map<string, NodeJS.Timeout>();
  /** The instances sharing the database (only used when the database is not embedded). */
  public readonly instances: InstanceRegistry;
  private registryStarted = false;

  constructor(private readonly cloudly: Cloudly, optionsArg: { timing?: IRelayElectionTiming } = {}) {
    this.timing = { ...(optionsArg.timing ?? {
      leaseTtlMs: cloudly.config.relayLeaseTtlMs ?? defaultRelayElectionTiming.leaseTtlMs,
      heartbeatMs: cloudly.config.relayLeaseHeartbeatMs ?? defaultRelayElectionTiming.heartbeatMs,
    }) };
    this.instances = new InstanceRegistry({
      instanceId: this.instanceId,
      store: cloudly.store,
      auth: cloudly.auth,
      logger: cloudly.logger,
      heartbeatMs: this.timing.heartbeatMs,
      ttlMs: this.timing.leaseTtlMs,
    });
    // Bounded like the storm's relay calls (CLOUDLY_RELAY_WORK_CONCURRENCY), so a storm of new
    // sockets elects a few at a time and an administrator's calls interleave with it.
    const concurrency = cloudly.config.relayWorkConcurrency ?? defaultRelayWorkConcurrency;
    this.elections = new WorkQueue({
      name: 'relay election',
      logger: cloudly.logger,
      process: (clusterIdArg) => this.runElection(clusterIdArg),
      ...(concurrency > 0 ? { concurrency } : {}),
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

  /**
   * Once the server listens: registers this instance where the others find it. Only with a shared
   * database; the embedded one has exactly one instance.
   */
  public async startRegistry(internalUrlArg: string): Promise<void> {
    if (this.cloudly.database.embedded || this.stopped) {
      return;
    }
    await this.instances.start(internalUrlArg);
    this.registryStarted = true;
  }

  public async stop(): Promise<void> {
    this.stopped = true;
    if (this.heartbeatTimer) {
      clearTimeout(this.heartbeatTimer);
      this.heartbeatTimer = null;
    }
    for (const timer of this.retryTimers.values()) {
      clearTimeout(timer);
    }
    this.retryTimers.clear();
    if (this.registryStarted) {
      this.registryStarted = false;
      await this.instances.stop();
    }
    await this.elections.drain();
    await this.releaseClosedOnStop();
    if (this.held.size > 0) {
      const released = [...this.held.keys()];
      this.held.clear();
      await this.releaseMany(released).catch((error: unknown) =>
        this.cloudly.logger.warn({ err: error, leases: released.length }, 'relay lease release on stop failed'));
    }
  }

  /**
   * Frees the leases of these clusters that still name this instance, in one conditional write
   * (generation bumped, so a concurrent election still loses its compare-and-swap).
   */
  private async releaseMany(clusterIdsArg: string[]): Promise<void> {
    await this.cloudly.store.collection(clusterRelayLeaseKind).updateMany(
      { id: { $in: clusterIdsArg }, instanceId: this.instanceId },
      { $set: { sessionId: null, instanceId: null, expiresAt: 0, releasedAt: Date.now() }, $inc: { generation: 1 } },
    );
    this.cloudly.logger.info({ leases: clusterIdsArg.length }, 'relay leases released');
  }

  /** Clusters whose elected socket closed while Cloudly stops: released together, promptly. */
  private readonly closingOnStop = new Set<string>();
  private closingFlush: Promise<void> | null = null;

  private releaseClosedOnStop(): Promise<void> {
    this.closingFlush ??= new Promise<void>((resolve) => setTimeout(resolve, 10)).then(async () => {
      const clusters = [...this.closingOnStop];
      this.closingOnStop.clear();
      this.closingFlush = null;
      for (const clusterId of clusters) {
        this.held.delete(clusterId);
      }
      if (clusters.length > 0) {
        await this.releaseMany(clusters).catch((error: unknown) =>
          this.cloudly.logger.warn({ err: error, leases: clusters.length }, 'relay lease release on stop failed'));
      }
    });
    return this.closingFlush;
  }

  /** The port's selection: only the socket this instance holds the cluster's lease for carries calls. */
  public selectSession(sessionsArg: IRelaySession[], clusterIdArg: string): IRelaySession | null {
    const elected = this.electedSessionId(clusterIdArg);
    return elected === null ? null : sessionsArg.find((session) => session.id === elected) ?? null;
  }

  /**
   * The cluster's election as this instance can settle it now (the sessions' gate before a call
   * selects, a registration's and a refresh's too): nothing to do while one of its open
   * sockets is elected here; otherwise the round in flight (the one a socket's opening asked for)
   * is awaited, and only when that left no socket elected here, a socket is open and the lease is
   * not known to be held elsewhere does a round of its own run. A storm's registrations, calls and
   * desired-state refreshes each asked for a round of their own before: a second and third read
   * (or compare-and-swap) of the lease per reconnecting relay, each waiting at the back of the
   * elections' line while it held a slot of the relay calls' or refreshes' line.
   */
  public async awaitElection(clusterIdArg: string): Promise<void> {
    if (this.electedOpenSession(clusterIdArg)) {
      return;
    }
    await this.elections.idle(clusterIdArg);
    if (this.electedSessionId(clusterIdArg) === null && this.cloudly.relays.sessionsOf(clusterIdArg).length > 0 && !this.heldElsewhere(clusterIdArg)) {
      await this.elect(clusterIdArg);
    }
  }

  /** Whether a socket of the cluster that is open here holds its unexpired lease. */
  private electedOpenSession(clusterIdArg: string): boolean {
    const elected = this.electedSessionId(clusterIdArg);
    return elected !== null && this.cloudly.relays.sessionsOf(clusterIdArg).some((session) => session.id === elected && session.peer.isOpen);
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
    if (!this.isElected(sessionArg) && sessionArg.peer.isOpen && !this.heldElsewhere(sessionArg.clusterId)) {
      await this.awaitElection(sessionArg.clusterId);
    }
    return this.isElected(sessionArg);
  }

  /**
   * `confirmElected`, or the `unavailable` refusal every relay handler answers a socket that is
   * not elected. When another instance's socket holds the lease, `retryAfterMs` says when this
   * instance looks again: when that lease runs out (should that instance be dead, this socket is
   * elected then), or within `elsewhereRecheckMs` (its holder may release it sooner, as a stopping
   * instance does). A relay told to wait for the whole lease would wait out a release that came a
   * moment later.
   */
  public async requireElected(sessionArg: IRelaySession): Promise<void> {
    if (!(await this.confirmElected(sessionArg))) {
      const until = this.elsewhere.get(sessionArg.clusterId) ?? 0;
      const now = Date.now();
      const waitMs = this.heldByDownInstance.has(sessionArg.clusterId) ? until - now : Math.min(until - now, elsewhereRecheckMs);
      throw refuse('unavailable', [relayNotElectedReason], until > now ? { retryAfterMs: waitMs + 100 } : {});
    }
  }

  /**
   * Whether the last round found the lease held by another instance's socket, and it has not run
   * out since: calls and registrations then skip a round of their own (the heartbeat still tries
   * once per beat, should that instance have let it go).
   */
  private heldElsewhere(clusterIdArg: string): boolean {
    return (this.elsewhere.get(clusterIdArg) ?? 0) > Date.now() && this.retryTimers.has(clusterIdArg);
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

  /**
   * A call for a cluster with no elected socket here: forwarded to the live instance whose socket
   * holds the lease. Null when no other instance holds it (the caller answers `relay-not-connected`);
   * `unavailable` with `retryAfterMs` (until the lease runs out) when the holder is gone or silent.
   */
  public async routeElsewhere(clusterIdArg: string, methodArg: string, requestArg: unknown, timeoutMsArg: number): Promise<{ answer: unknown } | null> {
    if (!this.registryStarted) {
      return null;
    }
    const cached = this.forwardingLeases.get(clusterIdArg);
    const fromCache = cached !== undefined && cached.until > Date.now();
    const lease = fromCache ? cached.lease : await this.cloudly.store.get(clusterRelayLeaseKind, clusterIdArg);
    const now = Date.now();
    if (!lease || lease.sessionId === null || lease.instanceId === null || lease.instanceId === this.instanceId || lease.expiresAt <= now) {
      this.forwardingLeases.delete(clusterIdArg);
      return null;
    }
    if (!fromCache) {
      this.forwardingLeases.set(clusterIdArg, { lease, until: Math.min(now + forwardingLeaseCacheMs, lease.expiresAt) });
      if (this.forwardingLeases.size > 10_000) {
        this.forwardingLeases.delete(this.forwardingLeases.keys().next().value!);
      }
    }
    const retryAfterMs = lease.expiresAt - now + 100;
    const holder = await this.instances.liveInstance(lease.instanceId);
    if (!holder) {
      this.forwardingLeases.delete(clusterIdArg);
      throw refuse('unavailable', [instanceFailureReasons.holderGone], { retryAfterMs });
    }
    if (this.instances.isKnownDown(lease.instanceId)) {
      // Its internal URL refused a connection a moment ago (killed): what the forward would answer,
      // without a link or an HTTP request to find it out again for every call (in a kill storm,
      // every moved relay's new socket made several: hints, claims).
      throw refuse('unavailable', [instanceFailureReasons.holderUnreachable], { retryAfterMs });
    }
    try {
      return { answer: await this.instances.forward(holder, { clusterId: clusterIdArg, method: methodArg, request: requestArg, timeoutMs: timeoutMsArg }, retryAfterMs) };
    } catch (error) {
      this.forwardingLeases.delete(clusterIdArg);
      const reasons = (error as { errorData?: { reasons?: unknown } }).errorData?.reasons;
      if (fromCache && Array.isArray(reasons) && reasons[0] === 'relay-not-connected') {
        // The lease moved since it was read: once more with the lease as it is now.
        return this.routeElsewhere(clusterIdArg, methodArg, requestArg, timeoutMsArg);
      }
      throw error;
    }
  }

  /**
   * `POST /internal/relaycall`: a call another instance forwarded for a socket this instance
   * holds. Only a valid internal token made for this instance is served; the call is made here
   * (never forwarded again) within the caller's remaining time, and its answer or refusal goes
   * back as it is.
   */
  /**
   * The refusal the bearer of a forwarded call or an instance link gets (404 where no forwarded
   * calls are served, 401 for a token that fails a check), or null when it may go on.
   */
  public async refuseInternalBearer(bearerArg: string | null): Promise<{ status: number; answer: TForwardedRelayAnswer } | null> {
    if (!this.registryStarted) {
      return forwardedRefusal(404, refuseNamed('forbidden', 'forwarding-not-served', 'forwarded relay calls are served only by instances sharing a database'));
    }
    try {
      await this.instances.verifyInternalToken(bearerArg);
      return null;
    } catch (error) {
      return forwardedRefusal(401, error as { errorText: string; errorData: unknown });
    }
  }

  public async serveForwarded(bearerArg: string | null, bodyArg: unknown): Promise<{ status: number; answer: TForwardedRelayAnswer }> {
    const refused = await this.refuseInternalBearer(bearerArg);
    if (refused) {
      return refused;
    }
    const call = readForwardedRelayCall(bodyArg);
    if (!call) {
      return forwardedRefusal(400, refuseNamed('invalid-request', 'forwarded-call-invalid', 'must be { clusterId, method, request, timeoutMs }', 'body'));
    }
    this.instances.servedForwardedCalls++;
    try {
      const response = await runAsCloudly(() => this.cloudly.relays.call(call.clusterId, call.method, call.request, { forwardedTimeoutMs: call.timeoutMs }));
      return { status: 200, answer: { response } };
    } catch (error) {
      if (isRefusal(error)) {
        return forwardedRefusal(200, error);
      }
      const errorId = this.cloudly.logInternalFailure(error, 'forwarded relay call');
      return { status: 200, answer: { error: { text: 'Cloudly failed to answer this request.', data: { code: 'internal', retryable: true, errorId } } } };
    }
  }

  public async readLeases(clusterIdsArg?: string[]): Promise<IClusterRelayLeaseDocument[]> {
    return clusterIdsArg ? this.cloudly.store.findIn(clusterRelayLeaseKind, 'id', clusterIdsArg) : this.cloudly.store.find(clusterRelayLeaseKind, {});
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

  /** Election rounds run so far (each reads the lease, and writes it when the decision changes it). */
  public rounds = 0;

  private async runElection(clusterIdArg: string): Promise<void> {
    this.rounds++;
    // What the last decision concluded; the decider runs again on every lost race.
    let outcome: { winner: IRelaySession | null; heldElsewhere: boolean; elsewhereUntil: number; holder: string | null } = { winner: null, heldElsewhere: false, elsewhereUntil: 0, holder: null };
    const result = await this.cloudly.store.mutate(clusterRelayLeaseKind, clusterIdArg, (leaseArg) => {
      outcome = { winner: null, heldElsewhere: false, elsewhereUntil: 0, holder: null };
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
        elsewhereUntil: election.heldElsewhere && leaseArg ? leaseArg.expiresAt : 0,
        holder: election.heldElsewhere && leaseArg ? leaseArg.instanceId : null,
      };
      return election.decision;
    });
    if (outcome.heldElsewhere) {
      // A live socket on another instance holds it; should that instance be dead, its lease runs
      // out at `elsewhereUntil`: this instance's socket tries again right then.
      this.held.delete(clusterIdArg);
      this.elsewhere.set(clusterIdArg, outcome.elsewhereUntil);
      // Looked at again when it runs out, or within a second should its holder let it go sooner:
      // a holder known to be down (killed) lets nothing go, and is waited out.
      const holderDown = this.registryStarted && outcome.holder !== null && this.instances.isKnownDown(outcome.holder);
      if (holderDown) {
        this.heldByDownInstance.add(clusterIdArg);
      } else {
        this.heldByDownInstance.delete(clusterIdArg);
      }
      this.retryWhenFree(clusterIdArg, holderDown ? outcome.elsewhereUntil : Math.min(outcome.elsewhereUntil, Date.now() + elsewhereRecheckMs));
      return;
    }
    this.elsewhere.delete(clusterIdArg);
    this.heldByDownInstance.delete(clusterIdArg);
    if (result.outcome !== 'kept' && result.doc && outcome.winner) {
      this.adopt(clusterIdArg, result.doc, outcome.winner);
    }
  }

  private retryWhenFree(clusterIdArg: string, expiresAtArg: number): void {
    if (this.stopped || this.retryTimers.has(clusterIdArg)) {
      return;
    }
    // A little after the expiry (clocks of instances on different hosts differ by a little).
    const timer = setTimeout(() => {
      this.retryTimers.delete(clusterIdArg);
      if (!this.stopped && this.cloudly.relays.sessionsOf(clusterIdArg).length > 0 && this.electedSessionId(clusterIdArg) === null) {
        void this.elect(clusterIdArg);
      }
    }, Math.max(10, expiresAtArg - Date.now() + 25 + Math.floor(Math.random() * 50)));
    timer.unref();
    this.retryTimers.set(clusterIdArg, timer);
  }

  private adopt(clusterIdArg: string, leaseArg: IClusterRelayLeaseDocument, sessionArg: IRelaySession): void {
    this.held.set(clusterIdArg, { sessionId: sessionArg.id, generation: leaseArg.generation, expiresAt: leaseArg.expiresAt });
    this.cloudly.relays.activity.line({ clusterId: clusterIdArg, sessionId: sessionArg.id }, 'relay socket elected');
    if (!sessionArg.peer.isOpen) {
      // The socket closed while the lease was being written: give the lease straight back.
      void this.onSessionClosed(sessionArg);
    }
  }

  private async onSessionClosed(sessionArg: IRelaySession): Promise<void> {
    const clusterId = sessionArg.clusterId;
    if (!this.cloudly.started && this.held.get(clusterId)?.sessionId === sessionArg.id) {
      // Cloudly is stopping and closes every socket: their leases go back in one write, at once,
      // so the relays' new sockets on other instances are elected as soon as they connect.
      this.closingOnStop.add(clusterId);
      await this.releaseClosedOnStop();
      return;
    }
    await this.elections.idle(clusterId);
    if (this.held.get(clusterId)?.sessionId !== sessionArg.id) {
      return;
    }
    await this.release(clusterId, sessionArg.id);
    // Another open socket of the cluster takes over; with none left a round would only read the
    // lease to keep it as it is.
    if (!this.stopped && this.cloudly.relays.sessionsOf(clusterId).length > 0) {
      await this.elect(clusterId);
    }
  }

  /** Frees the lease if it still names this socket of this instance. */
  private async release(clusterIdArg: string, sessionIdArg: string): Promise<void> {
    this.held.delete(clusterIdArg);
    const { outcome } = await this.cloudly.store.mutate(clusterRelayLeaseKind, clusterIdArg, (leaseArg) =>
      decideLeaseRelease(leaseArg, this.instanceId, sessionIdArg, Date.now()));
    if (outcome === 'written') {
      this.cloudly.relays.activity.line({ clusterId: clusterIdArg, sessionId: sessionIdArg }, 'relay lease released');
    }
  }

  /** One write for all of them (generation bumped, as a compare-and-swap would): a read and a compare-and-swap per lease took a second at 1,000 clusters. */
  private async releaseAllStale(): Promise<void> {
    await this.cloudly.store.collection(clusterRelayLeaseKind).updateMany(
      { sessionId: { $ne: null } },
      { $set: { sessionId: null, instanceId: null, expiresAt: 0 }, $inc: { generation: 1 } },
    );
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

  /**
   * Renews every lease this instance holds and lets unelected sockets try for free leases. The
   * renewals are one conditional write for all of them (each lease only while it still names this
   * instance, its generation bumped). When it renewed every one, that write is the whole beat;
   * only when some lease no longer matched does a read (chunked by `inChunkSize`) find which are
   * still held. A thousand leases cost one database command, not two thousand (nor the 32 reads
   * that confirmed them on every beat before).
   */
  public async heartbeat(): Promise<void> {
    const heldNow = [...this.held.entries()];
    if (heldNow.length > 0) {
      const ids = heldNow.map(([clusterId]) => clusterId);
      const expiresAt = Date.now() + this.timing.leaseTtlMs;
      const renewed = await this.cloudly.store.collection(clusterRelayLeaseKind).updateMany(
        { id: { $in: ids }, instanceId: this.instanceId, sessionId: { $ne: null } },
        { $set: { expiresAt }, $inc: { generation: 1 } },
      );
      if (renewed.matchedCount === ids.length) {
        // Every lease still names this instance (no one else writes a lease that names it, and an
        // election here records what it takes), so each is held until `expiresAt` now.
        for (const [clusterId, held] of heldNow) {
          if (this.held.get(clusterId)?.sessionId === held.sessionId) {
            this.held.set(clusterId, { sessionId: held.sessionId, generation: held.generation + 1, expiresAt });
          }
        }
      } else {
        this.heartbeatConfirmReads++;
        await this.confirmHeld(heldNow);
      }
    }
    const clusters = new Set(this.cloudly.relays.allSessions().map((session) => session.clusterId));
    for (const clusterId of clusters) {
      if (this.electedSessionId(clusterId) === null) {
        await this.elect(clusterId);
      }
    }
  }

  /** Heartbeats whose write did not renew every lease held, so that a read had to say which are still held. */
  public heartbeatConfirmReads = 0;

  /** Reads the leases this instance held at the beat's start and forgets the ones it lost. */
  private async confirmHeld(heldNowArg: [string, IHeldLease][]): Promise<void> {
    const confirmed = new Map((await this.readLeases(heldNowArg.map(([clusterId]) => clusterId))).map((lease) => [lease.clusterId, lease]));
    for (const [clusterId, held] of heldNowArg) {
      const lease = confirmed.get(clusterId);
      if (this.held.get(clusterId)?.sessionId !== held.sessionId) {
        // Re-elected meanwhile: that round recorded what it holds.
        continue;
      }
      if (!lease || lease.instanceId !== this.instanceId || lease.sessionId !== held.sessionId) {
        // Lost it (it ran out while this instance stalled and someone else took it).
        this.held.delete(clusterId);
      } else {
        this.held.set(clusterId, { sessionId: held.sessionId, generation: lease.generation, expiresAt: lease.expiresAt });
      }
    }
  }
}
