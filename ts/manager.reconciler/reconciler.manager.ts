import * as promClient from 'prom-client';
import type { Cloudly } from '../classes.cloudly.js';
import { cloudlyActor, runInOperation } from '../core/operationcontext.js';
import { auditEventKind, inChunks, type ICommittedOwners, type IDocumentKind, type IStoredDocument } from '../core/store.js';
import { WorkQueue } from '../core/workqueue.js';
import { clusterKind } from '../manager.cluster/documents.js';
import { ReconcilerLeadership } from './leadership.js';
import {
  allServicesKey,
  clusterKey,
  isReconcileInput,
  parseReconcileKey,
  projectionsKey,
  reconcileKeysOf,
  serviceKey,
} from './triggers.js';

/**
 * The reconciler: Cloudly decides continuously, not when asked. Shaped like a Kubernetes
 * controller (informer → work queue → reconcile → status write):
 *
 * - every committed change of a verdict's input (./triggers.ts says which) adds the keys it
 *   affects to one keyed work queue (coalescing, one run per key at a time, retries with backoff,
 *   at most `reconcileConcurrency` keys at once);
 * - a service key judges the service and stores its verdict only when it changed, as Cloudly's own
 *   write (actor `cloudly`, method `reconcile`, and the input change as the audit event's `cause`);
 * - a full pass at start-up and a resync every `reconcileResyncMs` catch any change whose trigger
 *   was lost (a crash between commit and run, a change made through another instance);
 * - with several instances one of them reconciles (a lease in the database, ./leadership.ts), and
 *   it learns of changes made elsewhere from the shared audit log.
 *
 * Reads never write: they read what the reconciler stored. A read of one service waits (bounded)
 * for the runs this instance already owes that service, so a caller reads its own writes.
 */

/** How long a read of one service waits for the runs this instance owes it before it answers what is stored. */
const readWaitBoundMs = 3_000;
/** How far back each read of the shared audit log looks (an event is appended just after its commit). */
const sharedLookbackMs = 5_000;

export interface IReconcileCause {
  kind: string;
  id: string;
}

/** The cause of a pass nobody's change asked for: the start-up pass, a resync, a new leader's pass. */
export const resyncCauseKind = 'CloudlyReconcilerResync';

export class Reconciler {
  private readonly queue: WorkQueue;
  private readonly leadership: ReconcilerLeadership;
  /** The latest input change behind each owed key (what its run is audited as caused by). */
  private readonly causes = new Map<string, IReconcileCause>();
  private unsubscribe: (() => void) | null = null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private resyncTimer: NodeJS.Timeout | null = null;
  private sharedTimer: NodeJS.Timeout | null = null;
  private sharedWatermark = 0;
  private readonly sharedSeen = new Map<string, number>();
  private stopped = true;
  /** Set by the first heartbeat of a start: before it, nobody has looked at everything yet. */
  private started = false;
  private readonly durations: promClient.Histogram<'scope'>;
  private readonly outcomes: promClient.Counter<'scope' | 'outcome'>;

  constructor(private readonly cloudly: Cloudly) {
    this.queue = new WorkQueue({
      name: 'reconcile',
      logger: cloudly.logger,
      process: (keyArg) => this.process(keyArg),
      concurrency: cloudly.config.reconcileConcurrency ?? 8,
      // A failing key is retried with backoff; after the budget the next resync looks again.
      retry: { maximumRetries: 12, baseDelayMs: 200, maximumDelayMs: 30_000 },
    });
    this.leadership = new ReconcilerLeadership(
      cloudly.store,
      cloudly.clusterManager.relayElection.instanceId,
      cloudly.config.relayLeaseTtlMs ?? 15_000,
      cloudly.database.embedded,
    );
    const registers = [cloudly.metrics.registry];
    const queue = this.queue;
    const leadership = this.leadership;
    new promClient.Gauge({
      name: 'cloudly_reconcile_queue_depth',
      help: 'Reconcile keys owed a run that has not started yet.',
      registers,
      collect() { this.set(queue.depth); },
    });
    new promClient.Gauge({
      name: 'cloudly_reconcile_oldest_pending_seconds',
      help: 'How long the longest-waiting owed reconcile key has waited (0 when none waits).',
      registers,
      collect() {
        const oldest = queue.oldestPendingAt();
        this.set(oldest === null ? 0 : (Date.now() - oldest) / 1000);
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
      help: 'Time one reconcile run took, by scope (service, cluster, projections, all).',
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
  }

  public get isLeader(): boolean {
    return this.leadership.isLeader;
  }

  public async start(): Promise<void> {
    this.stopped = false;
    this.started = false;
    this.queue.resume();
    this.unsubscribe = this.cloudly.store.onCommitted((kindArg, idArg, ownersArg) => this.onCommitted(kindArg, idArg, ownersArg));
    await this.heartbeat();
    const heartbeatMs = this.cloudly.config.relayLeaseHeartbeatMs ?? 5_000;
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), heartbeatMs);
    this.heartbeatTimer.unref();
    this.resyncTimer = setInterval(() => this.resync(), this.cloudly.config.reconcileResyncMs ?? 60_000);
    this.resyncTimer.unref();
    if (!this.cloudly.database.embedded) {
      this.sharedWatermark = Date.now();
      this.scheduleSharedRead();
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
    if (this.sharedTimer) {
      clearTimeout(this.sharedTimer);
    }
    this.heartbeatTimer = this.resyncTimer = this.sharedTimer = null;
    await this.queue.drain();
    this.causes.clear();
    await this.leadership.release().catch((error: unknown) => this.cloudly.logger.warn({ err: error }, 'reconciler lease could not be released'));
  }

  /**
   * Waits (at most `readWaitBoundMs`) until this instance owes the service no run: every change it
   * committed before this call is judged. On an instance that does not reconcile, answers at once.
   */
  public async settled(serviceArg: { id: string; clusterId: string }): Promise<void> {
    // A pass over all clusters or a cluster adds the next key when it runs: wait in that order.
    await this.settledKeys([allServicesKey, clusterKey(serviceArg.clusterId), serviceKey(serviceArg.id)]);
  }

  /** Like `settled`, for what a cluster's own run makes (its nodes' credentials). */
  public async settledCluster(clusterIdArg: string): Promise<void> {
    await this.settledKeys([allServicesKey, clusterKey(clusterIdArg)]);
  }

  /** Like `settled`, for a cluster's node projections. */
  public async settledProjections(clusterIdArg: string): Promise<void> {
    await this.settledKeys([allServicesKey, clusterKey(clusterIdArg), projectionsKey(clusterIdArg)]);
  }

  /** Keys that are running or owed a run right now (tests and benchmarks wait for 0). */
  public get busyKeys(): number {
    return this.queue.busyKeys;
  }

  private async settledKeys(keysArg: string[]): Promise<void> {
    if (!this.leadership.isLeader) {
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => { timer = setTimeout(resolve, readWaitBoundMs); });
    const owed = (async () => {
      for (const key of keysArg) {
        await this.queue.idle(key);
      }
    })();
    await Promise.race([owed, bound]);
    clearTimeout(timer);
  }

  /** Asks for a pass over every cluster and service now, as the periodic resync does (on the leader only). */
  public resync(idArg = 'resync'): void {
    if (this.leadership.isLeader) {
      this.enqueue(allServicesKey, { kind: resyncCauseKind, id: idArg });
    }
  }

  /** Something outside the documents changed a cluster's inputs (its lease allocation changed). */
  public clusterChanged(clusterIdArg: string, causeArg: IReconcileCause): void {
    this.enqueue(clusterKey(clusterIdArg), causeArg);
  }

  private onCommitted(kindArg: IDocumentKind<IStoredDocument>, idArg: string, ownersArg: ICommittedOwners): void {
    if (!this.leadership.isLeader) {
      return;
    }
    for (const key of reconcileKeysOf(kindArg.collectionName, idArg, ownersArg)) {
      this.enqueue(key, { kind: kindArg.collectionName, id: idArg });
    }
  }

  private enqueue(keyArg: string, causeArg: IReconcileCause): void {
    if (this.stopped) {
      return;
    }
    this.causes.set(keyArg, causeArg);
    void this.queue.add(keyArg);
  }

  /** Takes or renews the lease; a new leader looks at every service once (it may have missed anything). */
  private async heartbeat(): Promise<void> {
    const wasLeader = this.started && this.leadership.isLeader;
    let leader = wasLeader;
    try {
      leader = await this.leadership.renew();
    } catch (error) {
      this.cloudly.logger.warn({ err: error }, 'reconciler lease could not be renewed');
      return;
    }
    this.started = true;
    if (leader && !wasLeader && !this.stopped) {
      this.cloudly.logger.info({ instanceId: this.cloudly.clusterManager.relayElection.instanceId }, 'this instance reconciles');
      // Whatever changed while nobody (or another instance) reconciled is judged now.
      this.sharedWatermark = Date.now() - sharedLookbackMs;
      this.enqueue(allServicesKey, { kind: resyncCauseKind, id: 'start-up' });
    } else if (!leader && wasLeader) {
      this.cloudly.logger.warn('this instance no longer reconciles (the reconciler lease is held elsewhere)');
    }
  }

  private async process(keyArg: string): Promise<void> {
    const cause = this.causes.get(keyArg) ?? { kind: resyncCauseKind, id: 'resync' };
    this.causes.delete(keyArg);
    const parsed = parseReconcileKey(keyArg);
    if (!parsed || !this.leadership.isLeader) {
      return;
    }
    const started = process.hrtime.bigint();
    try {
      const outcome = await runInOperation({ actor: cloudlyActor, method: 'reconcile', dryRun: false, cause }, async () => {
        if (parsed.scope === 'service') {
          return this.cloudly.serviceManager.reconcileServiceRuntimeStatus(parsed.id);
        }
        if (parsed.scope === 'projections') {
          // Each node's projection is written only when its content changed; a node that cannot have
          // one yet is logged by the refresh and looked at again with the next change.
          await this.cloudly.runtimeNetworkManager.refreshCluster(parsed.id);
          return 'refreshed';
        }
        if (parsed.scope === 'all') {
          const clusters = await this.cloudly.store.collection(clusterKind).find({}, { projection: { _id: 0, id: 1 } }).toArray();
          for (const cluster of clusters) {
            this.enqueue(clusterKey(String(cluster.id)), cause);
          }
          return 'expanded';
        }
        // What a cluster's nodes are owed before anyone asks: their Corestore control credential.
        await this.cloudly.secretManager.ensureCorestoreCredentials(parsed.id);
        // One read per kind for the whole cluster: verdicts never judged are created at once, and only
        // services whose stored verdict moved get a run of their own.
        const { created, owed } = await this.cloudly.serviceManager.judgeClusterRuntimeStatuses(parsed.id);
        for (const serviceId of owed) {
          this.enqueue(serviceKey(serviceId), cause);
        }
        this.enqueue(projectionsKey(parsed.id), cause);
        return created > 0 ? 'created' : 'expanded';
      });
      this.outcomes.inc({ scope: parsed.scope, outcome });
    } catch (error) {
      this.outcomes.inc({ scope: parsed.scope, outcome: 'failed' });
      // The retry is audited as caused by the same change, unless a newer one arrived meanwhile.
      if (!this.causes.has(keyArg)) {
        this.causes.set(keyArg, cause);
      }
      throw error;
    } finally {
      this.durations.observe({ scope: parsed.scope }, Number(process.hrtime.bigint() - started) / 1e9);
    }
  }

  // ---- changes made through other instances ------------------------------------------------------

  private scheduleSharedRead(): void {
    if (this.stopped) {
      return;
    }
    this.sharedTimer = setTimeout(() => {
      void this.readShared().finally(() => this.scheduleSharedRead());
    }, this.cloudly.config.sharedPollMs ?? 250);
    this.sharedTimer.unref();
  }

  /**
   * One read of the shared audit log while this instance reconciles: every input change appended
   * since the watermark (minus a lookback for late appends) is triggered once. Changes this
   * instance made are among them; their second trigger folds into the first or costs one kept run.
   * The owners of the changed documents (service, cluster, inputs generation) are read together,
   * one query per kind for every new event of the read (`sharedOwnerQueries` counts them): a
   * storm's registrations, each an event, used to cost a read each.
   */
  private async readShared(): Promise<void> {
    if (!this.leadership.isLeader) {
      return;
    }
    try {
      const from = this.sharedWatermark - sharedLookbackMs;
      const readStarted = Date.now();
      const events = await this.cloudly.store.collection(auditEventKind)
        .find({ at: { $gte: from } }, { projection: { _id: 0, id: 1, at: 1, target: 1, generationAfter: 1 } })
        .sort({ at: 1 })
        .toArray();
      const fresh: { id: string; at: number; target: { kind: string; id: string }; generationAfter: unknown }[] = [];
      for (const event of events) {
        const id = String(event.id);
        const at = Number(event.at);
        this.sharedWatermark = Math.max(this.sharedWatermark, at);
        if (!this.sharedSeen.has(id)) {
          fresh.push({ id, at, target: event.target as { kind: string; id: string }, generationAfter: event.generationAfter });
        }
      }
      // Seen only once their owners are read: a failed read leaves them to the next one.
      const owners = await this.readOwners(fresh.filter((event) => isReconcileInput(event.target.kind)).map((event) => event.target));
      for (const { id, at, target, generationAfter } of fresh) {
        this.sharedSeen.set(id, at);
        if (!isReconcileInput(target.kind)) {
          continue;
        }
        this.sharedInputEvents++;
        // Judged against the generation this event's write made, not the document's current one:
        // inputs changed at this write or at a later one trigger.
        const generation = typeof generationAfter === 'number' ? { generation: generationAfter } : {};
        for (const key of reconcileKeysOf(target.kind, target.id, { ...(owners.get(`${target.kind}\u0000${target.id}`) ?? {}), ...generation } as ICommittedOwners)) {
          this.enqueue(key, target);
        }
      }
      for (const [id, at] of this.sharedSeen) {
        if (at >= from - sharedLookbackMs) {
          break;
        }
        this.sharedSeen.delete(id);
      }
      // Everything appended before this read began has been seen, so the next read looks back from
      // then, not from the newest event: after a storm, a log gone quiet was read from its last
      // event on every poll (the storm's last seconds, thousands of events, four times a second).
      this.sharedWatermark = Math.max(this.sharedWatermark, readStarted);
    } catch (error) {
      this.cloudly.logger.warn({ err: error }, 'shared audit log could not be read for the reconciler');
    }
  }

  /** Owner queries the shared-log reader has sent (one per kind and chunk of new events per read). */
  public sharedOwnerQueries = 0;
  /** Input changes the shared-log reader has judged (each new event of a kind a verdict reads). */
  public sharedInputEvents = 0;

  /**
   * The owners of these documents as stored now (a removed one has none), by `kind\0id`: one
   * query per kind for each of the store's `inChunks` of ids (as `findIn`, which reads whole documents), the chunks of a kind sent side by side.
   */
  private async readOwners(targetsArg: { kind: string; id: string }[]): Promise<Map<string, ICommittedOwners>> {
    const idsByKind = new Map<string, Set<string>>();
    for (const target of targetsArg) {
      let ids = idsByKind.get(target.kind);
      if (!ids) {
        ids = new Set();
        idsByKind.set(target.kind, ids);
      }
      ids.add(target.id);
    }
    const owners = new Map<string, ICommittedOwners>();
    const queries: Promise<void>[] = [];
    for (const [kind, idSet] of idsByKind) {
      for (const chunk of inChunks(idSet)) {
        this.sharedOwnerQueries++;
        queries.push(this.cloudly.database.mongoDb.collection(kind)
          .find({ id: chunk.length === 1 ? chunk[0] : { $in: chunk } }, { projection: { _id: 0, id: 1, serviceId: 1, clusterId: 1, inputsGeneration: 1 } })
          .toArray()
          .then((docs) => {
            for (const doc of docs) {
              const { id, ...rest } = doc as unknown as { id: string } & ICommittedOwners;
              owners.set(`${kind}\u0000${id}`, rest);
            }
          }));
      }
    }
    await Promise.all(queries);
    return owners;
  }
}
