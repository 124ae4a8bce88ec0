import * as promClient from 'prom-client';
import type { ChangeFeed, ICommittedChange } from '../core/changefeed.js';
import type { IController, IReconcileCause, IReconcileResult, TReconcileOutcome } from '../core/controller.js';
import { cloudlyActor, runInOperation } from '../core/operationcontext.js';
import { WorkQueue } from '../core/workqueue.js';
import type { DocumentStore } from '../core/store.js';
import { readInputDigests } from './digests.js';
import type { ReconcilerLeadership } from './leadership.js';

/**
 * The reconciler: Cloudly decides continuously, not when asked. It runs every controller of one
 * list (ts/core/controller.ts; which ones: docs/reconciler.md), each shaped like a Kubernetes
 * controller (informer → work queue → reconcile → write):
 *
 * - one change feed (ts/core/changefeed.ts) brings every committed change, this instance's and
 *   (while it leads) other instances'; each controller's `inputs` turn a change into keys of the
 *   controller's own keyed queue (coalescing, one run per key at a time, retries with backoff);
 * - a run stores what it derives only when it changed, as Cloudly's own write (actor `cloudly`,
 *   method `reconcile`, the input change as the audit event's `cause`);
 * - a full pass at start-up and for a new leader, and a resync every period that runs what a
 *   change whose trigger was lost may have left behind: every key of a controller without digests,
 *   and only the clusters whose input digest moved of one with them (./digests.ts), with a full
 *   pass of those once an hour;
 * - with several instances one of them reconciles (a lease in the database, ./leadership.ts).
 *
 * Reads never write: they read what the controllers stored. A read of one service waits (bounded)
 * for the runs this instance already owes it, so a caller reads its own writes.
 */

/** How long a read waits for the runs this instance owes it before it answers what is stored. */
const readWaitBoundMs = 3_000;

/**
 * How often the resync of the controllers with digests is a full pass all the same: for a write
 * made around Cloudly that left a document's generation as it was, which no digest sees.
 */
export const fullResyncEveryMs = 3_600_000;

/** The cause of a pass nobody's change asked for: the start-up pass, a resync, a new leader's pass. */
export const resyncCauseKind = 'CloudlyReconcilerResync';

export type { IReconcileCause };

export interface IReconcilerOptions {
  feed: ChangeFeed;
  /** Where the resync reads its input digests. */
  store: DocumentStore;
  leadership: ReconcilerLeadership;
  logger: { info: (objectArg: object, messageArg: string) => void; warn: (objectArg: object | string, messageArg?: string) => void; error: (objectArg: object, messageArg: string) => void };
  registry: promClient.Registry;
  instanceId: string;
  resyncMs: number;
  heartbeatMs: number;
  concurrency: number;
}

interface IRunningController {
  controller: IController;
  queue: WorkQueue;
  /** The latest input change behind each owed key (what its run is audited as caused by). */
  causes: Map<string, IReconcileCause>;
  /** The oldest input commit each owed key has not stored yet (the verdict-latency histogram). */
  pendingSince: Map<string, number>;
  requeueTimers: Map<string, NodeJS.Timeout>;
  /**
   * Of a controller with `inputViews`: per document (`<kind> <id>`), the generation of the last
   * change seen here and its view as JSON. Emptied whenever it may have missed a change (a start,
   * a new leader) or a run failed.
   */
  views?: Map<string, { generation: number; view: string }>;
  /** Of a controller that resyncs from digests: what each key's inputs were when it last ran. */
  digests?: {
    /** The digest a key's last successful run saw (read before the run began). */
    recorded: Map<string, string>;
    /** Digests read for keys owed a run, with the tick of the read: a run that began later records it ('' records the key's removal). */
    pending: Map<string, { digest: string; readAt: number }>;
    /** A run failed: the next resync is a full pass (a failed run's children cannot be told from its key). */
    fullPassOwed: boolean;
  };
}

export class Reconciler {
  private readonly running = new Map<string, IRunningController>();
  private unsubscribe: (() => void) | null = null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private resyncTimer: NodeJS.Timeout | null = null;
  private readonly pollTimers: NodeJS.Timeout[] = [];
  private stopped = true;
  /** When this instance last became the leader (0: it does not lead). */
  private leaderSinceMs = 0;
  /** Set by the first heartbeat of a start: before it, nobody has looked at everything yet. */
  private started = false;
  /** Orders digest reads and run starts: a run records a digest only when it began after the read. */
  private tick = 0;
  private resyncs = 0;
  private readonly durations: promClient.Histogram<'scope'>;
  private readonly outcomes: promClient.Counter<'scope' | 'outcome'>;
  private readonly latency: promClient.Histogram<'controller'>;
  private readonly unchangedInputs: promClient.Counter<'controller'>;

  constructor(private readonly options: IReconcilerOptions) {
    const registers = [options.registry];
    const running = this.running;
    const leadership = options.leadership;
    new promClient.Gauge({
      name: 'cloudly_reconcile_queue_depth',
      help: 'Keys of every controller owed a run that has not started yet.',
      registers,
      collect() { this.set([...running.values()].reduce((sum, one) => sum + one.queue.depth, 0)); },
    });
    new promClient.Gauge({
      name: 'cloudly_reconcile_oldest_pending_seconds',
      help: 'How long the longest-waiting owed key of any controller has waited (0 when none waits).',
      registers,
      collect() {
        const oldest = Math.min(...[...running.values()].map((one) => one.queue.oldestPendingAt() ?? Infinity));
        this.set(Number.isFinite(oldest) ? (Date.now() - oldest) / 1000 : 0);
      },
    });
    new promClient.Gauge({
      name: 'cloudly_reconcile_leader',
      help: '1 while this instance holds the reconciler lease and reconciles, else 0.',
      registers,
      collect() { this.set(leadership.isLeader ? 1 : 0); },
    });
    this.durations = new promClient.Histogram({
      name: 'cloudly_reconcile_duration_seconds',
      help: 'Time one reconcile run took, by scope (the verdict\'s service, cluster and all; every other controller by its name).',
      labelNames: ['scope'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.outcomes = new promClient.Counter({
      name: 'cloudly_reconciles_total',
      help: 'Reconcile runs by scope and outcome (written, created, removed, kept, expanded, refreshed, failed).',
      labelNames: ['scope', 'outcome'],
      registers,
    });
    this.unchangedInputs = new promClient.Counter({
      name: 'cloudly_reconcile_unchanged_inputs_total',
      help: 'Input changes that queued nothing for a controller because they left what it reads of the document as it was.',
      labelNames: ['controller'],
      registers,
    });
    this.latency = new promClient.Histogram({
      name: 'cloudly_verdict_latency_seconds',
      help: 'From an input change\'s commit to the derived document stored for it, by controller (the convergence SLO: docs/reconciler.md).',
      labelNames: ['controller'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30],
      registers,
    });
  }

  /** The controllers, in the order their full passes run (the composition root's one list). */
  public setControllers(controllersArg: readonly IController[]): void {
    for (const controller of controllersArg) {
      if (this.running.has(controller.name)) {
        throw new Error(`controller ${controller.name} is listed twice`);
      }
      const entry: IRunningController = {
        controller,
        causes: new Map(),
        pendingSince: new Map(),
        requeueTimers: new Map(),
        ...(controller.inputViews ? { views: new Map() } : {}),
        ...(controller.digestResync ? { digests: { recorded: new Map(), pending: new Map(), fullPassOwed: false } } : {}),
        queue: new WorkQueue({
          name: `reconcile ${controller.name}`,
          logger: this.options.logger,
          process: (keyArg) => this.process(entry, keyArg),
          concurrency: controller.concurrency ?? this.options.concurrency,
          // A failing key is retried with backoff; after the budget the next resync looks again.
          retry: controller.retry ?? { maximumRetries: 12, baseDelayMs: 200, maximumDelayMs: 30_000 },
        }),
      };
      this.running.set(controller.name, entry);
    }
  }

  public get controllers(): IController[] {
    return [...this.running.values()].map((entry) => entry.controller);
  }

  public get isLeader(): boolean {
    return this.options.leadership.isLeader;
  }

  public async start(): Promise<void> {
    this.stopped = false;
    this.started = false;
    const kinds = new Set<string>();
    for (const { controller, queue } of this.running.values()) {
      queue.resume();
      for (const kind of Object.keys(controller.inputs)) {
        kinds.add(kind);
      }
    }
    this.unsubscribe = this.options.feed.subscribe({
      kinds,
      onChange: (changeArg) => this.onChange(changeArg),
      wantsElsewhere: () => !this.stopped && this.options.leadership.isLeader,
    });
    await this.heartbeat();
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.options.heartbeatMs);
    this.heartbeatTimer.unref();
    this.resyncTimer = setInterval(() => this.periodicResync(), this.options.resyncMs);
    this.resyncTimer.unref();
    for (const entry of this.running.values()) {
      const { poll } = entry.controller;
      if (poll) {
        const timer = setInterval(() => void this.poll(entry), poll.everyMs);
        timer.unref();
        this.pollTimers.push(timer);
      }
    }
  }

  /** Since when this instance leads (epoch ms), or 0: what the liveness controller counts a fresh start's grace from. */
  public get leaderSince(): number {
    return this.options.leadership.isLeader ? this.leaderSinceMs : 0;
  }

  private async poll(entryArg: IRunningController): Promise<void> {
    if (!this.options.leadership.isLeader || this.stopped || !entryArg.controller.poll) {
      return;
    }
    try {
      for (const key of await entryArg.controller.poll.keys()) {
        this.add(entryArg, key, { kind: resyncCauseKind, id: 'poll' });
      }
    } catch (error) {
      this.options.logger.warn({ err: error, controller: entryArg.controller.name }, 'a controller\'s poll failed; the next one tries again');
    }
  }

  public async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.unsubscribe = null;
    for (const timer of [this.heartbeatTimer, this.resyncTimer]) {
      if (timer) {
        clearInterval(timer);
      }
    }
    this.heartbeatTimer = this.resyncTimer = null;
    for (const timer of this.pollTimers.splice(0)) {
      clearInterval(timer);
    }
    for (const entry of this.running.values()) {
      for (const timer of entry.requeueTimers.values()) {
        clearTimeout(timer);
      }
      entry.requeueTimers.clear();
    }
    await Promise.all([...this.running.values()].map((entry) => entry.queue.drain()));
    for (const entry of this.running.values()) {
      entry.causes.clear();
      entry.pendingSince.clear();
      entry.views?.clear();
      // A new start or a new leader begins with a full pass: what was recorded may be stale by then.
      entry.digests?.recorded.clear();
      entry.digests?.pending.clear();
    }
    await this.options.leadership.release().catch((error: unknown) => this.options.logger.warn({ err: error }, 'reconciler lease could not be released'));
  }

  /**
   * Waits (at most `readWaitBoundMs`) until this instance owes these keys of this controller no
   * run, in order (a broader key adds the narrower one when it runs). On an instance that does not
   * reconcile, answers at once.
   */
  public async settled(controllerArg: string, keysArg: readonly string[]): Promise<void> {
    const entry = this.running.get(controllerArg);
    if (!entry || !this.options.leadership.isLeader) {
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => { timer = setTimeout(resolve, readWaitBoundMs); });
    const owed = (async () => {
      for (const key of keysArg) {
        await entry.queue.idle(key);
      }
    })();
    await Promise.race([owed, bound]);
    clearTimeout(timer);
  }

  /** Other instances' changes the feed delivered, and the owner queries it sent for them (tests and benchmarks). */
  public get sharedInputEvents(): number {
    return this.options.feed.elsewhereChanges;
  }

  public get sharedOwnerQueries(): number {
    return this.options.feed.ownerQueries;
  }

  /** Whether this controller owes the key a run (queued or running) on this instance. */
  public isBusy(controllerArg: string, keyArg: string): boolean {
    return this.running.get(controllerArg)?.queue.isBusy(keyArg) ?? false;
  }

  /** Keys of every controller that are running or owed a run right now (tests and benchmarks wait for 0). */
  public get busyKeys(): number {
    return [...this.running.values()].reduce((sum, entry) => sum + entry.queue.busyKeys, 0);
  }

  /**
   * Resyncs now, as the periodic resync does (on the leader only): a full pass of each controller
   * without digests, and of each one with digests the keys whose digest moved (`full`: every key).
   * Settles once every key it owes is queued (not run).
   */
  public async resync(idArg = 'resync', optionsArg: { full?: boolean } = {}): Promise<void> {
    if (!this.options.leadership.isLeader || this.stopped) {
      return;
    }
    const entries = [...this.running.values()].filter((entryArg) => entryArg.controller.resync !== false);
    await this.pass(entries, { kind: resyncCauseKind, id: idArg }, optionsArg.full ?? false);
  }

  private periodicResync(): void {
    this.resyncs++;
    const fullEvery = Math.max(1, Math.round(fullResyncEveryMs / this.options.resyncMs));
    void this.resync('resync', { full: this.resyncs % fullEvery === 0 });
  }

  /**
   * One pass over these controllers, in order: the digests of those that have them are read first
   * (one read per kind); each of those runs the keys whose digest differs from the one its last run
   * recorded (`fullArg`: every key of its full pass, each recording the digest read here).
   */
  private async pass(entriesArg: readonly IRunningController[], causeArg: IReconcileCause, fullArg: boolean): Promise<void> {
    const withDigests = entriesArg.filter((entryArg) => entryArg.digests !== undefined);
    let digests: Map<string, Map<string, string>> | null = null;
    if (withDigests.length > 0) {
      try {
        digests = await readInputDigests(this.options.store, withDigests.map(({ controller }) => ({
          name: controller.name,
          kinds: [...Object.keys(controller.inputs), ...controller.writes],
          digestResync: controller.digestResync!,
        })));
      } catch (error) {
        this.options.logger.warn({ err: error }, 'the resync could not read its input digests; every controller makes a full pass');
      }
    }
    const readAt = ++this.tick;
    for (const entry of entriesArg) {
      const current = digests?.get(entry.controller.name);
      if (!entry.digests || !current) {
        await this.fullPass(entry, causeArg);
        continue;
      }
      const full = fullArg || entry.digests.fullPassOwed;
      entry.digests.fullPassOwed = false;
      const { recorded, pending } = entry.digests;
      for (const key of new Set([...current.keys(), ...recorded.keys()])) {
        const digest = current.get(key) ?? '';
        if (!full && recorded.get(key) === digest) {
          continue;
        }
        pending.set(key, { digest, readAt });
        if (!full) {
          this.add(entry, key, causeArg);
        }
      }
      if (full) {
        await this.fullPass(entry, causeArg);
      }
    }
  }

  /** Something outside the documents changed a controller's input (a cluster's lease allocation): the key runs. */
  public enqueue(controllerArg: string, keyArg: string, causeArg: IReconcileCause): void {
    const entry = this.running.get(controllerArg);
    if (entry && this.options.leadership.isLeader) {
      this.add(entry, keyArg, causeArg);
    }
  }

  private async fullPass(entryArg: IRunningController, causeArg: IReconcileCause): Promise<void> {
    try {
      for (const key of await entryArg.controller.all()) {
        this.add(entryArg, key, causeArg);
      }
    } catch (error) {
      this.outcomes.inc({ scope: entryArg.controller.name, outcome: 'failed' });
      this.options.logger.warn({ err: error, controller: entryArg.controller.name }, 'a controller\'s full pass could not list its keys; the next resync tries again');
    }
  }

  private onChange(changeArg: ICommittedChange): void {
    if (!this.options.leadership.isLeader || this.stopped) {
      return;
    }
    const cause = { kind: changeArg.kind, id: changeArg.id, at: changeArg.at };
    for (const entry of this.running.values()) {
      const keysOf = entry.controller.inputs[changeArg.kind];
      if (!keysOf || this.movedNothingRead(entry, changeArg)) {
        continue;
      }
      for (const key of keysOf(changeArg)) {
        this.add(entry, key, cause);
      }
    }
  }

  /**
   * Whether this change leaves the controller's view of its document as the previous change left
   * it, so the runs owed or done for that change already read what this one would. Only a change
   * made here carries its document; a removal, another instance's change, or a change older than
   * the last one seen counts as moving everything.
   */
  private movedNothingRead(entryArg: IRunningController, changeArg: ICommittedChange): boolean {
    const viewOf = entryArg.controller.inputViews?.[changeArg.kind];
    if (!viewOf || !entryArg.views) {
      return false;
    }
    const memoKey = `${changeArg.kind} ${changeArg.id}`;
    const generation = changeArg.owners.generation;
    if (!changeArg.doc || generation === undefined) {
      entryArg.views.delete(memoKey);
      return false;
    }
    const view = JSON.stringify(viewOf(changeArg.doc)) ?? '';
    const seen = entryArg.views.get(memoKey);
    if (seen && generation <= seen.generation) {
      // Delivered out of order: run it, and keep the newer view.
      return false;
    }
    entryArg.views.set(memoKey, { generation, view });
    if (seen?.view === view) {
      this.unchangedInputs.inc({ controller: entryArg.controller.name });
      return true;
    }
    return false;
  }

  private add(entryArg: IRunningController, keyArg: string, causeArg: IReconcileCause): void {
    if (this.stopped) {
      return;
    }
    entryArg.causes.set(keyArg, causeArg);
    if (causeArg.at !== undefined) {
      const since = entryArg.pendingSince.get(keyArg);
      if (since === undefined || causeArg.at < since) {
        entryArg.pendingSince.set(keyArg, causeArg.at);
      }
    }
    const timer = entryArg.requeueTimers.get(keyArg);
    if (timer) {
      clearTimeout(timer);
      entryArg.requeueTimers.delete(keyArg);
    }
    void entryArg.queue.add(keyArg);
  }

  /** Takes or renews the lease; a new leader looks at everything once (it may have missed anything). */
  private async heartbeat(): Promise<void> {
    const wasLeader = this.started && this.options.leadership.isLeader;
    let leader = wasLeader;
    try {
      leader = await this.options.leadership.renew();
    } catch (error) {
      this.options.logger.warn({ err: error }, 'reconciler lease could not be renewed');
      return;
    }
    this.started = true;
    if (leader && !wasLeader && !this.stopped) {
      this.leaderSinceMs = Date.now();
      this.options.logger.info({ instanceId: this.options.instanceId }, 'this instance reconciles');
      // Views seen while another instance reconciled say nothing of what its runs read.
      for (const entry of this.running.values()) {
        entry.views?.clear();
      }
      // Whatever changed while nobody (or another instance) reconciled is looked at now.
      this.options.feed.wantElsewhere();
      await this.pass([...this.running.values()], { kind: resyncCauseKind, id: 'start-up' }, true);
    } else if (!leader && wasLeader) {
      this.options.logger.warn({}, 'this instance no longer reconciles (the reconciler lease is held elsewhere)');
    }
  }

  private async process(entryArg: IRunningController, keyArg: string): Promise<void> {
    const { controller, causes, pendingSince } = entryArg;
    const cause = causes.get(keyArg) ?? { kind: resyncCauseKind, id: 'resync' };
    causes.delete(keyArg);
    const since = pendingSince.get(keyArg);
    pendingSince.delete(keyArg);
    if (!this.options.leadership.isLeader) {
      return;
    }
    const scope = controller.scopeOf?.(keyArg) ?? controller.name;
    const startedAt = ++this.tick;
    const started = process.hrtime.bigint();
    try {
      const answer = await runInOperation({ actor: cloudlyActor, method: 'reconcile', dryRun: false, cause: { kind: cause.kind, id: cause.id } }, () =>
        controller.reconcile(keyArg, {
          cause,
          enqueue: (otherKeyArg) => this.add(entryArg, otherKeyArg, cause),
        }));
      const result: IReconcileResult = typeof answer === 'string' ? { outcome: answer } : answer;
      this.recordDigest(entryArg, keyArg, startedAt);
      this.outcomes.inc({ scope, outcome: result.outcome });
      if (since !== undefined && storedSomething(result.outcome)) {
        this.latency.observe({ controller: controller.name }, Math.max(0, Date.now() - since) / 1000);
      }
      if (result.requeueAfterMs !== undefined && !this.stopped) {
        this.requeueAfter(entryArg, keyArg, result.requeueAfterMs);
      }
    } catch (error) {
      this.outcomes.inc({ scope, outcome: 'failed' });
      // A change skipped as moving nothing read relied on this run: every change runs again.
      entryArg.views?.clear();
      if (entryArg.digests) {
        entryArg.digests.fullPassOwed = true;
      }
      // The retry is audited as caused by the same change, unless a newer one arrived meanwhile.
      if (!causes.has(keyArg)) {
        causes.set(keyArg, cause);
      }
      if (since !== undefined && !pendingSince.has(keyArg)) {
        pendingSince.set(keyArg, since);
      }
      throw error;
    } finally {
      this.durations.observe({ scope }, Number(process.hrtime.bigint() - started) / 1e9);
    }
  }

  /** A run that began after its key's digest was read saw at least those inputs: the digest is its. */
  private recordDigest(entryArg: IRunningController, keyArg: string, startedAtArg: number): void {
    const owed = entryArg.digests?.pending.get(keyArg);
    if (!entryArg.digests || !owed || owed.readAt >= startedAtArg) {
      return;
    }
    entryArg.digests.pending.delete(keyArg);
    if (owed.digest === '') {
      entryArg.digests.recorded.delete(keyArg);
    } else {
      entryArg.digests.recorded.set(keyArg, owed.digest);
    }
  }

  private requeueAfter(entryArg: IRunningController, keyArg: string, delayMsArg: number): void {
    const existing = entryArg.requeueTimers.get(keyArg);
    if (existing) {
      clearTimeout(existing);
    }
    const timer = setTimeout(() => {
      entryArg.requeueTimers.delete(keyArg);
      if (this.options.leadership.isLeader && !this.stopped) {
        this.add(entryArg, keyArg, { kind: resyncCauseKind, id: 'deadline' });
      }
    }, Math.max(0, delayMsArg));
    timer.unref();
    entryArg.requeueTimers.set(keyArg, timer);
  }
}

const storedSomething = (outcomeArg: TReconcileOutcome): boolean => outcomeArg === 'written' || outcomeArg === 'created' || outcomeArg === 'removed';
