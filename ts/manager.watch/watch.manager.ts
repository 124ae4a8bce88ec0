import { randomUUID } from 'node:crypto';
import type { Cloudly } from '../classes.cloudly.js';
import { PeerUnavailableError, type EnvelopePeer } from '../core/envelopepeer.js';
import { registerOperations } from '../core/operations.js';
import { refuse, refuseNamed } from '../core/errors.js';
import { invalidField, refuseFields } from '../core/validation.js';
import { currentOperation } from '../core/operationcontext.js';
import { auditEventKind, auditedKindNames, documentKindNamed, type IDocumentKind, type IStoredDocument } from '../core/store.js';
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
 * every committed change of an audited kind appends exactly one event, and the change feed
 * (ts/core/changefeed.ts) delivers that append (the audit event's kind). Each append
 * gets the next revision here, synchronously, so revisions follow the order of the appends; the
 * event and the document are read afterwards and delivered strictly in revision order.
 *
 * Revisions start at the start time in microseconds, so a revision handed out by an earlier run of
 * this instance is always older than every one of this run and is answered `revision-gone`. The
 * last `retainedChanges` changes at least are kept for resuming; older ones mean re-list.
 *
 * With several instances over one database (docs/multi-instance.md) the audit log is shared: while
 * anyone watches here, the change feed also reads the events other instances appended (every
 * `sharedPollMs`, one reader for every consumer) and this manager numbers each new one like a
 * local one. Revisions stay this instance's own. A change committed elsewhere reaches a watcher
 * here within `sharedPollMs` plus one read of the log. While the feed does not read the log (nobody
 * watches here and this instance does not reconcile), a `sinceRevision` from before such a pause
 * is answered `revision-gone` (list again), since changes made elsewhere during it were not
 * numbered. A change's cluster is the one its document kind declares (`defineDocumentKind`).
 */

/** How many recent changes are kept for `sinceRevision`. */
export const retainedChanges = 10_000;
/** How many changes beyond `retainedChanges` accumulate before the oldest are dropped together. */
const trimStep = 1_000;
/** Changes a watcher may have queued or unanswered before it is told to re-list. */
export const maxWatcherBacklog = 5_000;
/** How long Cloudly lets a `changeEvent` go unanswered before it counts the watcher as gone. */
const changeEventTimeoutMs = 30_000;

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
  actor: IChangeEvent['actor'];
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
  /** The revision from which changes made elsewhere are known: the feed has read the shared log without a pause since. */
  private sharedKnownSince = this.lastRevision;
  /** The feed's reading of the shared log this revision is known from (its start time), null while it is not read. */
  private sharedReadingSince: number | null = null;
  private running = false;
  /** Read on the first watch: every kind is defined by then (kinds are defined as their modules load). */
  private watchableKinds: ReadonlySet<string> | null = null;
  /** Kinds whose documents name their cluster: a cluster filter learns their clusters before their removals. */
  private readonly publishedOfCluster: Array<IDocumentKind<IStoredDocument & { clusterId: string }>>;

  constructor(private readonly cloudly: Cloudly) {
    const publish = <T extends IStoredDocument>(kindArg: IDocumentKind<T>, toPublicArg: (docArg: T) => unknown) =>
      this.publishers.set(kindArg.collectionName, { kind: kindArg as unknown as IDocumentKind<IStoredDocument>, publisher: { toPublic: toPublicArg as never } });
    publish(clusterKind, toPublicCluster);
    publish(clusterNodeKind, toPublicClusterNode);
    publish(serviceKind, toPublicService);
    publish(serviceBackupKind, toPublicServiceBackup);
    publish(platformBindingKind, (docArg) => docArg);
    // The contract's status, and beside it whether the service's cluster is current (the project's own).
    publish(serviceRuntimeStatusKind, (docArg) => ({
      ...snapshotServiceRuntimeStatus({ id: docArg.id, specRevision: docArg.specRevision, state: docArg.state, reason: docArg.reason, changedAt: docArg.changedAt }),
      unknown: docArg.unknown ?? null,
    }));
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
      const sharedKnownSince = this.shared && (this.sharedReadingSince === null || this.cloudly.feed.readingElsewhereSince !== this.sharedReadingSince)
        ? this.lastRevision
        : this.sharedKnownSince;
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
    this.wantSharedChanges();
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
    // Every audit append, this instance's as it commits and (while anyone watches here) other
    // instances' as the change feed reads them from the shared log, exactly once each.
    this.stopListening = this.cloudly.feed.subscribe({
      kinds: new Set([auditEventKind.collectionName]),
      onChange: (changeArg) => this.record(changeArg.id),
      wantsElsewhere: () => this.running && this.watchers.size > 0,
    });
  }

  public async stop(): Promise<void> {
    this.running = false;
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

  /**
   * The first watcher asks the feed for other instances' changes. When the feed was not reading
   * the shared log, changes made elsewhere are known from the current revision on.
   */
  private wantSharedChanges(): void {
    if (!this.shared || !this.running) {
      return;
    }
    const since = this.cloudly.feed.wantElsewhere();
    if (since !== this.sharedReadingSince) {
      this.sharedReadingSince = since;
      this.sharedKnownSince = this.lastRevision;
    }
  }

  /** One audit append: the next revision now, the event and its document read afterwards. */
  private record(auditEventIdArg: string): void {
    // Nobody watching: nothing is read now (the write path stays as cheap as without watches); a
    // later replay reads the event then, and shows the document only if it has not moved since.
    const entry: IChangeEntry = { revision: ++this.lastRevision, auditEventId: auditEventIdArg, resolved: null };
    if (this.watchers.size > 0) {
      this.resolved(entry);
    }
    this.recent.push(entry);
    // Trimmed in steps, not by one entry per change: moving 10,000 entries down for every write
    // cost more than the rest of recording it.
    if (this.recent.length >= retainedChanges + trimStep) {
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
        actor: { kind: event.actor.kind, id: event.actor.id },
      };
      // The cluster as the document's kind declares its owners (a removal: from its id, or as last seen).
      const kind = documentKindNamed(event.target.kind);
      if (resolved.clusterId === null && kind) {
        resolved.clusterId = kind.owners(event.target.id, null).clusterId ?? null;
      }
      const published = this.publishers.get(event.target.kind);
      if (published && event.generationAfter !== null) {
        const doc = await this.cloudly.store.get(published.kind, event.target.id);
        if (doc) {
          resolved.clusterId = published.kind.owners(event.target.id, doc as never).clusterId ?? null;
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
            actor: change.actor,
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
