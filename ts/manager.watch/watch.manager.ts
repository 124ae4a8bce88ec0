import { randomUUID } from 'node:crypto';
import type { Cloudly } from '../classes.cloudly.js';
import { PeerUnavailableError, type EnvelopePeer } from '../core/envelopepeer.js';
import { registerOperations } from '../core/operations.js';
import { refuse, refuseNamed } from '../core/errors.js';
import { invalidField, refuseFields } from '../core/validation.js';
import { currentOperation } from '../core/operationcontext.js';
import { auditEventKind, auditedKindNames, type IDocumentKind, type IStoredDocument } from '../core/store.js';
import type { IChangeEvent, IReq_Cloudly_Admin_WatchExpired, TWatchedChange } from '../interfaces/requests/watch.js';
import { clusterKind, toPublicCluster } from '../manager.cluster/cluster.manager.js';
import { clusterNodeKind, toPublicClusterNode } from '../manager.cluster/clusternodes.js';
import { serviceKind, serviceRuntimeStatusKind, toPublicService } from '../manager.service/service.manager.js';
import { snapshotServiceRuntimeStatus } from '../interfaces/data/serviceruntimestatus.js';
import { serviceBackupKind, toRecord as toPublicServiceBackup } from '../manager.backup/backup.manager.js';
import { platformBindingKind } from '../manager.corestore/corestore.manager.js';
import { type TWatchRequest, watchOperations } from './operations.js';

/**
 * `watchChanges` on the admin socket. The source is the audit log as this instance appends it:
 * every committed change of an audited kind appends exactly one event, and the store tells its
 * commit listeners of that append (`store.onCommitted` with the audit event's kind). Each append
 * gets the next revision here, synchronously, so revisions follow the order of the appends; the
 * event and the document are read afterwards and delivered strictly in revision order.
 *
 * Revisions start at the start time in microseconds, so a revision handed out by an earlier run of
 * this instance is always older than every one of this run and is answered `revision-gone`. The
 * last `retainedChanges` changes are kept for resuming; older ones mean re-list.
 *
 * With several instances over one database (docs/multi-instance.md) the audit log is shared: while
 * anyone watches here, this instance also reads the events other instances appended (every
 * `sharedPollMs`, looking back `sharedLookbackMs` for appends that came late) and numbers each
 * new one like a local one. Revisions stay this instance's own. A change committed elsewhere
 * reaches a watcher here within `sharedPollMs` plus one read of the log. While nobody watches
 * here, the log is not read: a `sinceRevision` from before such a pause is answered `revision-gone`
 * (list again), since changes made elsewhere during it were not numbered.
 */

/** How many recent changes are kept for `sinceRevision`. */
export const retainedChanges = 10_000;
/** Changes a watcher may have queued or unanswered before it is told to re-list. */
export const maxWatcherBacklog = 5_000;
/** How long Cloudly lets a `changeEvent` go unanswered before it counts the watcher as gone. */
const changeEventTimeoutMs = 30_000;
/** How far back each read of the shared log looks (an event is appended just after its commit's stamp). */
export const sharedLookbackMs = 5_000;

export const revisionGoneReason = 'revision-gone';
/** The reason a watch beyond CLOUDLY_WATCHES_PER_ACCOUNT is refused with (`conflict`). */
export const watchLimitReason = 'watch-limit-reached';
/**
 * The close code of an admin socket whose watches fell behind: its events unanswered or unsent
 * stayed beyond CLOUDLY_WATCH_BUFFER_BYTES for CLOUDLY_WATCH_STALL_MS, or one went unanswered
 * for 30 s. The close reason is
 * `watch-behind revision=<n>`: every event of every watch on the socket up to revision n was
 * answered, so `watchChanges { sinceRevision: n }` resumes each without a gap.
 */
export const watchBehindCloseCode = 4002;
export const watchBehindCloseReason = (revisionArg: number): string => `watch-behind revision=${revisionArg}`;

interface IResolvedChange {
  kind: string;
  id: string;
  generation: number;
  change: TWatchedChange;
  clusterId: string | null;
  document?: unknown;
}

interface IChangeEntry {
  revision: number;
  auditEventId: string;
  /** The event and its document, read once on first need (at once while anyone watches). */
  resolved: Promise<IResolvedChange | null> | null;
}

interface IWatcher {
  id: string;
  peer: EnvelopePeer;
  /** The account that opened it (CLOUDLY_WATCHES_PER_ACCOUNT). */
  account: string;
  /** Revisions of the events sent and not yet answered, in the order sent. */
  inFlight: number[];
  /** The revision of the last change the pump is done with (sent or not matching). */
  lastTaken: number;
  /** Set while the pump waits at the socket's bound (CLOUDLY_WATCH_BUFFER_BYTES): closes the socket when it fires. */
  stallTimer: NodeJS.Timeout | null;
  kinds: Set<string> | null;
  clusterId: string | null;
  queue: IChangeEntry[];
  unanswered: number;
  pumping: boolean;
  stopped: boolean;
  stopListening: () => void;
}

/** Public shape of each kind that has one; other kinds are watched without a document. */
interface IPublisher {
  toPublic: (docArg: never) => unknown;
  clusterOf: (docArg: never) => string | null;
  /** The cluster a document id alone names (for removals, which have no document), when it does. */
  clusterOfId?: (idArg: string) => string | null;
}

export class WatchManager {
  private readonly revisionBase = Date.now() * 1000;
  private lastRevision = this.revisionBase;
  private readonly recent: IChangeEntry[] = [];
  private readonly watchers = new Map<string, IWatcher>();
  /** The cluster of documents seen, so a removal (which has no document) still matches `clusterId`. */
  private readonly clusterOfDocument = new Map<string, string>();
  private readonly publishers = new Map<string, { kind: IDocumentKind<IStoredDocument>; publisher: IPublisher }>();
  private stopListening: (() => void) | null = null;
  /** The most bytes of events one socket held unanswered or unsent, seen after each send (`cloudly_watch_socket_bytes_max`). */
  private socketBytesHighWater = 0;
  /** Audit events already numbered here, with their time: a local commit and a read of the shared log never number one twice. */
  private readonly seen = new Map<string, number>();
  /** Shared log: the newest event time read so far, the timer, and the revision from which changes made elsewhere are known. */
  private sharedWatermark = Date.now();
  private sharedTimer: NodeJS.Timeout | null = null;
  private sharedReading = false;
  private sharedKnownSince = this.lastRevision;
  private running = false;
  /** Read on the first watch: every kind is defined by then (kinds are defined as their modules load). */
  private watchableKinds: ReadonlySet<string> | null = null;
  /** Kinds whose documents name their cluster: a cluster filter learns their clusters before their removals. */
  private readonly publishedOfCluster: Array<IDocumentKind<IStoredDocument & { clusterId: string }>>;

  constructor(private readonly cloudly: Cloudly) {
    const publish = <T extends IStoredDocument>(
      kindArg: IDocumentKind<T>,
      publisherArg: { toPublic: (docArg: T) => unknown; clusterOf: (docArg: T) => string | null; clusterOfId?: (idArg: string) => string | null },
    ) =>
      this.publishers.set(kindArg.collectionName, { kind: kindArg as unknown as IDocumentKind<IStoredDocument>, publisher: publisherArg as unknown as IPublisher });
    publish(clusterKind, { toPublic: toPublicCluster, clusterOf: (docArg) => docArg.id, clusterOfId: (idArg) => idArg });
    publish(clusterNodeKind, {
      toPublic: toPublicClusterNode,
      clusterOf: (docArg) => docArg.clusterId,
      // A node's document id is `<clusterId>/<nodeId>` (clusterNodeDocumentId).
      clusterOfId: (idArg) => (idArg.includes('/') ? idArg.slice(0, idArg.indexOf('/')) : null),
    });
    publish(serviceKind, { toPublic: toPublicService, clusterOf: (docArg) => docArg.clusterId });
    publish(serviceBackupKind, { toPublic: toPublicServiceBackup, clusterOf: (docArg) => docArg.clusterId });
    publish(platformBindingKind, { toPublic: (docArg) => docArg, clusterOf: () => null });
    // A verdict the reconciler stored: its public status, and its service's cluster for filters and pages.
    publish(serviceRuntimeStatusKind, {
      toPublic: (docArg) => snapshotServiceRuntimeStatus({ id: docArg.id, specRevision: docArg.specRevision, state: docArg.state, reason: docArg.reason, changedAt: docArg.changedAt }),
      clusterOf: (docArg) => docArg.clusterId ?? null,
    });
    this.publishedOfCluster = [serviceKind, serviceBackupKind] as Array<IDocumentKind<IStoredDocument & { clusterId: string }>>;
    cloudly.metrics.watchSocketBytesHighWater = () => this.socketBytesHighWater;
    registerOperations(cloudly, watchOperations({
      watch: (requestArg, peerArg) => this.watch(requestArg, peerArg),
      unwatch: (watchIdArg, peerArg) => this.unwatch(watchIdArg, peerArg),
      watchableKinds: () => (this.watchableKinds ??= new Set(auditedKindNames())),
    }));
  }

  /** Registers a watcher on the socket (none in a dry run): its events follow the answer. */
  private async watch(request: TWatchRequest, peerArg: EnvelopePeer): Promise<{ watchId: string; revision: number }> {
    if (request.sinceRevision !== undefined) {
      if (request.sinceRevision > this.lastRevision) {
        throw refuseFields([invalidField('request.sinceRevision', `is ahead of this instance's revision ${this.lastRevision}`)]);
      }
      const oldestKept = this.recent.length > 0 ? this.recent[0].revision - 1 : this.lastRevision;
      // Reading the shared log (re)starts with this watcher: changes made elsewhere before now were not numbered.
      const sharedKnownSince = this.shared && !this.sharedTimer ? this.lastRevision : this.sharedKnownSince;
      if (request.sinceRevision < Math.max(oldestKept, this.revisionBase, sharedKnownSince)) {
        throw refuseNamed('conflict', revisionGoneReason, 'is older than this instance keeps; list again and watch from the current revision', 'request.sinceRevision');
      }
    }
    const watchId = `watch-${randomUUID()}`;
    const account = currentOperation().actor.id;
    const held = [...this.watchers.values()].filter((watcherArg) => watcherArg.account === account).length;
    if (held >= this.cloudly.config.watchesPerAccount) {
      throw refuseNamed('conflict', watchLimitReason, `this account holds ${held} watches, as many as it may (CLOUDLY_WATCHES_PER_ACCOUNT); unwatch one first`);
    }
    if (currentOperation().dryRun) {
      return { watchId, revision: this.lastRevision };
    }
    if (request.clusterId !== undefined) {
      // A removal carries no document: learn which cluster the cluster's current documents
      // belong to now, so their removals still match the filter.
      for (const kind of this.publishedOfCluster) {
        for (const doc of await this.cloudly.store.find(kind, { clusterId: request.clusterId })) {
          this.clusterOfDocument.set(`${kind.collectionName}\u0000${doc.id}`, doc.clusterId);
        }
      }
    }
    // From the check to the registration nothing awaits, so no change falls between replay and live.
    const watcher: IWatcher = {
      id: watchId,
      peer: peerArg,
      account,
      inFlight: [],
      lastTaken: request.sinceRevision ?? this.lastRevision,
      stallTimer: null,
      kinds: request.kinds ? new Set(request.kinds) : null,
      clusterId: request.clusterId ?? null,
      queue: request.sinceRevision === undefined ? [] : this.recent.filter((entryArg) => entryArg.revision > request.sinceRevision!),
      unanswered: 0,
      pumping: false,
      stopped: false,
      stopListening: () => undefined,
    };
    watcher.stopListening = peerArg.onClose(() => this.stopWatcher(watcher));
    this.watchers.set(watchId, watcher);
    this.startSharedReads();
    const revision = this.lastRevision;
    // The events follow the answer: the first is sent on a later turn of the event loop.
    setImmediate(() => this.pump(watcher));
    return { watchId, revision };
  }

  /** Stops a watcher of this socket (not in a dry run); false when the socket has no such watcher. */
  private unwatch(watchIdArg: string, peerArg: () => EnvelopePeer): boolean {
    const watcher = this.watchers.get(watchIdArg);
    if (!watcher || watcher.peer !== peerArg()) {
      return false;
    }
    if (!currentOperation().dryRun) {
      this.stopWatcher(watcher);
    }
    return true;
  }

  public async start(): Promise<void> {
    this.running = true;
    this.stopListening = this.cloudly.store.onCommitted((kindArg, idArg) => {
      if (kindArg === auditEventKind) {
        this.record(idArg);
      }
    });
  }

  public async stop(): Promise<void> {
    this.running = false;
    this.stopSharedReads();
    this.stopListening?.();
    for (const watcher of [...this.watchers.values()]) {
      this.stopWatcher(watcher);
    }
  }

  /** The current revision: what a list taken now is consistent with. */
  public get revision(): number {
    return this.lastRevision;
  }

  /** Whether other instances may append to the audit log: the database is not the embedded one. */
  private get shared(): boolean {
    return !this.cloudly.database.embedded;
  }

  /** Starts reading the shared log, from now, when the first watcher registers. */
  private startSharedReads(): void {
    if (!this.shared || this.sharedTimer || !this.running) {
      return;
    }
    // Changes made elsewhere while nobody watched here were not numbered: resuming from before now is `revision-gone`.
    this.sharedKnownSince = this.lastRevision;
    this.sharedWatermark = Date.now();
    const tick = (): void => {
      this.sharedTimer = setTimeout(() => {
        void this.readShared().finally(() => {
          if (this.sharedTimer && this.watchers.size > 0 && this.running) {
            tick();
          } else {
            this.sharedTimer = null;
          }
        });
      }, this.cloudly.config.sharedPollMs ?? 250);
      this.sharedTimer.unref();
    };
    tick();
  }

  private stopSharedReads(): void {
    if (this.sharedTimer) {
      clearTimeout(this.sharedTimer);
      this.sharedTimer = null;
    }
  }

  /** One read of the shared log: every event appended since the watermark (minus the lookback) not yet numbered here. */
  private async readShared(): Promise<void> {
    if (this.sharedReading) {
      return;
    }
    this.sharedReading = true;
    try {
      const from = this.sharedWatermark - sharedLookbackMs;
      const readStarted = Date.now();
      const events = await this.cloudly.store.collection(auditEventKind)
        .find({ at: { $gte: from } }, { projection: { _id: 0, id: 1, at: 1 } })
        .sort({ at: 1 })
        .toArray();
      for (const event of events) {
        const id = String(event.id);
        const at = Number(event.at);
        if (at > this.sharedWatermark) {
          this.sharedWatermark = at;
        }
        if (!this.seen.has(id)) {
          this.record(id, at);
        }
      }
      for (const [id, at] of this.seen) {
        if (at >= from - sharedLookbackMs) {
          break;
        }
        this.seen.delete(id);
      }
      // Everything appended before this read began is seen: the next read looks back from then, not
      // from the newest event (a log gone quiet was otherwise read from its last event on every poll).
      this.sharedWatermark = Math.max(this.sharedWatermark, readStarted);
    } catch (error) {
      this.cloudly.logger.warn({ err: error }, 'shared audit log could not be read for watchers');
    } finally {
      this.sharedReading = false;
    }
  }

  /** One audit append: the next revision now, the event and its document read afterwards. */
  private record(auditEventIdArg: string, atArg: number = Date.now()): void {
    if (this.shared) {
      if (this.seen.has(auditEventIdArg)) {
        return;
      }
      this.seen.set(auditEventIdArg, atArg);
    }
    // Nobody watching: nothing is read now (the write path stays as cheap as without watches); a
    // later replay reads the event then, and shows the document only if it has not moved since.
    const entry: IChangeEntry = { revision: ++this.lastRevision, auditEventId: auditEventIdArg, resolved: null };
    if (this.watchers.size > 0) {
      this.resolved(entry);
    }
    this.recent.push(entry);
    if (this.recent.length > retainedChanges) {
      this.recent.splice(0, this.recent.length - retainedChanges);
    }
    for (const watcher of this.watchers.values()) {
      watcher.queue.push(entry);
      this.pump(watcher);
    }
  }

  private resolved(entryArg: IChangeEntry): Promise<IResolvedChange | null> {
    entryArg.resolved ??= this.resolve(entryArg.auditEventId);
    return entryArg.resolved;
  }

  private async resolve(auditEventIdArg: string): Promise<IResolvedChange | null> {
    try {
      const event = await this.cloudly.store.get(auditEventKind, auditEventIdArg);
      if (!event) {
        return null;
      }
      const key = `${event.target.kind}\u0000${event.target.id}`;
      const resolved: IResolvedChange = {
        kind: event.target.kind,
        id: event.target.id,
        // A removal takes the generation after the one it removed (its first write stamps it).
        generation: event.generationAfter ?? event.generationBefore + 1,
        change: event.outcome,
        clusterId: this.clusterOfDocument.get(key) ?? null,
      };
      const published = this.publishers.get(event.target.kind);
      if (resolved.clusterId === null && published?.publisher.clusterOfId) {
        resolved.clusterId = published.publisher.clusterOfId(event.target.id);
      }
      if (published && event.generationAfter !== null) {
        const doc = await this.cloudly.store.get(published.kind, event.target.id);
        if (doc) {
          resolved.clusterId = published.publisher.clusterOf(doc as never);
          if (resolved.clusterId !== null) {
            this.clusterOfDocument.set(key, resolved.clusterId);
          }
          if (doc.generation === event.generationAfter) {
            resolved.document = published.publisher.toPublic(doc as never);
          }
        }
      }
      if (event.outcome === 'removed') {
        this.clusterOfDocument.delete(key);
      }
      return resolved;
    } catch (error) {
      this.cloudly.logger.warn({ err: error, auditEventId: auditEventIdArg }, 'watched change could not be read');
      return null;
    }
  }

  private matches(watcherArg: IWatcher, changeArg: IResolvedChange): boolean {
    if (watcherArg.kinds && !watcherArg.kinds.has(changeArg.kind)) {
      return false;
    }
    return watcherArg.clusterId === null || changeArg.clusterId === watcherArg.clusterId;
  }

  /** Sends the watcher's queue in revision order; one pump per watcher at a time. */
  private pump(watcherArg: IWatcher): void {
    if (watcherArg.pumping || watcherArg.stopped) {
      return;
    }
    if (watcherArg.queue.length + watcherArg.unanswered > maxWatcherBacklog) {
      this.expire(watcherArg);
      return;
    }
    watcherArg.pumping = true;
    void (async () => {
      try {
        while (!watcherArg.stopped && watcherArg.queue.length > 0) {
          const entry = watcherArg.queue.shift()!;
          const change = await this.resolved(entry);
          if (watcherArg.stopped) {
            break;
          }
          if (!change || !this.matches(watcherArg, change)) {
            watcherArg.lastTaken = entry.revision;
            continue;
          }
          // What this socket holds of its events, unanswered (in this process, the kernel or the
          // peer) or not yet written, is bounded: at the bound the pump waits for answers, and a
          // socket that stays there is closed (`stall`), not fed.
          const bound = this.cloudly.config.watchBufferBytes;
          if (watcherArg.peer.unansweredCallBytes > bound || watcherArg.peer.bufferedAmount > bound) {
            watcherArg.queue.unshift(entry);
            this.stall(watcherArg);
            break;
          }
          this.unstall(watcherArg);
          const event: IChangeEvent = {
            watchId: watcherArg.id,
            revision: entry.revision,
            kind: change.kind,
            id: change.id,
            generation: change.generation,
            change: change.change,
            ...(change.clusterId === null ? {} : { clusterId: change.clusterId }),
            ...(change.document === undefined ? {} : { document: change.document }),
          };
          watcherArg.unanswered++;
          watcherArg.inFlight.push(entry.revision);
          watcherArg.lastTaken = entry.revision;
          // Frames leave the socket in the order they are sent, so the next event need not wait for this answer.
          watcherArg.peer.call('changeEvent', event, changeEventTimeoutMs).then(
            () => {
              watcherArg.unanswered--;
              const at = watcherArg.inFlight.indexOf(entry.revision);
              if (at >= 0) {
                watcherArg.inFlight.splice(at, 1);
              }
              if (watcherArg.stallTimer) {
                // Waiting at the bound: an answer may have made room.
                this.pump(watcherArg);
              }
            },
            (error: unknown) => {
              watcherArg.unanswered--;
              // Unanswered for the whole timeout: the watcher fell behind, and is told where it stood.
              if (error instanceof PeerUnavailableError && error.failure === 'timeout' && !watcherArg.stopped) {
                this.closeBehind(watcherArg.peer);
              } else {
                this.stopWatcher(watcherArg);
              }
            },
          );
          this.socketBytesHighWater = Math.max(this.socketBytesHighWater, watcherArg.peer.unansweredCallBytes, watcherArg.peer.bufferedAmount);
          if (watcherArg.unanswered > maxWatcherBacklog) {
            this.expire(watcherArg);
          }
        }
      } finally {
        watcherArg.pumping = false;
      }
      if (!watcherArg.stopped && !watcherArg.stallTimer && watcherArg.queue.length > 0) {
        this.pump(watcherArg);
      }
    })();
  }

  /** The watcher waits at its socket's bound; still there after CLOUDLY_WATCH_STALL_MS, its socket is closed. */
  private stall(watcherArg: IWatcher): void {
    if (watcherArg.stallTimer) {
      return;
    }
    watcherArg.stallTimer = setTimeout(() => {
      watcherArg.stallTimer = null;
      if (!watcherArg.stopped) {
        this.closeBehind(watcherArg.peer);
      }
    }, this.cloudly.config.watchStallMs);
    watcherArg.stallTimer.unref();
  }

  private unstall(watcherArg: IWatcher): void {
    if (watcherArg.stallTimer) {
      clearTimeout(watcherArg.stallTimer);
      watcherArg.stallTimer = null;
    }
  }

  /**
   * The revision a watcher reached: every event of it up to there was answered (its oldest
   * unanswered event's revision less one, or the last change it is done with).
   */
  private reachedRevision(watcherArg: IWatcher): number {
    return watcherArg.inFlight.length > 0 ? watcherArg.inFlight[0] - 1 : watcherArg.lastTaken;
  }

  /**
   * Closes a socket whose watches fell behind (`watchBehindCloseCode`), with the lowest revision
   * its watches reached: resuming every one of them from there misses nothing (a watch further
   * ahead sees a few events again, with the generations it already has).
   */
  private closeBehind(peerArg: EnvelopePeer): void {
    const watchers = [...this.watchers.values()].filter((watcherArg) => watcherArg.peer === peerArg);
    for (const watcher of watchers) {
      this.stopWatcher(watcher);
    }
    if (watchers.length === 0 || !peerArg.isOpen) {
      return;
    }
    const revision = Math.min(...watchers.map((watcherArg) => this.reachedRevision(watcherArg)));
    this.cloudly.metrics.socketsClosed.inc({ reason: 'watch-behind' });
    this.cloudly.logger.warn({ watches: watchers.length, revision, unansweredBytes: peerArg.unansweredCallBytes, bufferedBytes: peerArg.bufferedAmount },
      'admin socket closed: its watches fell behind (docs/api-dashboard.md)');
    peerArg.close(watchBehindCloseCode, watchBehindCloseReason(revision));
  }

  /** Tells a watcher that fell too far behind to re-list, and drops it. */
  private expire(watcherArg: IWatcher): void {
    const request: IReq_Cloudly_Admin_WatchExpired['request'] = { watchId: watcherArg.id, revision: this.lastRevision, reason: 'too-far-behind' };
    watcherArg.peer.call('watchExpired', request, changeEventTimeoutMs).catch(() => undefined);
    this.stopWatcher(watcherArg);
  }

  private stopWatcher(watcherArg: IWatcher): void {
    if (watcherArg.stopped) {
      return;
    }
    watcherArg.stopped = true;
    watcherArg.queue = [];
    this.unstall(watcherArg);
    watcherArg.stopListening();
    this.watchers.delete(watcherArg.id);
  }
}
