import { auditEventKind, documentKindNamed, inChunks, type DocumentStore, type ICommittedOwners, type IDocumentKind, type IDocumentOwners, type IStoredDocument } from './store.js';
import type { Document } from 'mongodb';

/**
 * One change feed: every committed change reaches every consumer through here, whether this
 * instance committed it (the store's commit listener) or another instance did (the shared audit
 * log, read by one reader with one watermark). Each change carries its document's owners as the
 * kind declares them (`defineDocumentKind`'s `owners`), the way a Kubernetes object carries its
 * namespace and owner references, so no consumer works out a document's cluster again. Shaped
 * like client-go's shared informer: one source, many handlers, each handing work to its own queue.
 *
 * The audit log is read only while a subscriber wants other instances' changes (the reconciler
 * while it leads, the watch while anyone watches) and only when the database is shared: on the
 * embedded database this process is the only writer.
 */

/** How far back each read of the shared audit log looks (an event is appended just after its commit's stamp). */
export const sharedLookbackMs = 5_000;

export interface ICommittedChange {
  /** The document kind's collection name (`CloudlyAuditEvent` for an appended audit event). */
  kind: string;
  id: string;
  /** Owners as the kind declares them, the generation the write gave (absent for a removal), `inputsGeneration`. */
  owners: ICommittedOwners;
  /** True when this instance committed it; false when it was read from the shared audit log. */
  here: boolean;
  /** Epoch milliseconds: when it was committed here, or the audit event's time for another instance's change. */
  at: number;
  /**
   * The document as this instance's write stored it (absent for a removal and for another
   * instance's change): what a controller's `inputViews` look at. Read only, never changed.
   */
  doc?: Readonly<Document>;
}

export interface IChangeSubscriber {
  /** Document kinds (collection names) this subscriber is given; the audit event kind included when named. */
  kinds: ReadonlySet<string>;
  onChange: (changeArg: ICommittedChange) => void;
  /** Whether it needs other instances' changes right now (the log is read while anyone does). */
  wantsElsewhere: () => boolean;
}

export interface IChangeFeedOptions {
  store: DocumentStore;
  /** False on the embedded database: no other instance can commit, the log is never read. */
  shared: boolean;
  pollMs: number;
  readOwnersOf: (kindArg: string, idsArg: string[]) => Promise<Document[]>;
  logger: { warn: (objectArg: object, messageArg: string) => void };
}

export class ChangeFeed {
  private readonly subscribers = new Set<IChangeSubscriber>();
  private stopListening: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  private reading = false;
  private watermark = 0;
  /** Audit events already delivered (appended here, or read before), with their time. */
  private readonly seen = new Map<string, number>();
  /** Since when (epoch ms) the log has been read without a pause; null while it is not read. */
  private elsewhereSinceMs: number | null = null;
  /** Owner queries sent for other instances' changes, and such changes delivered (tests and benchmarks). */
  public ownerQueries = 0;
  public elsewhereChanges = 0;

  constructor(private readonly options: IChangeFeedOptions) {}

  public subscribe(subscriberArg: IChangeSubscriber): () => void {
    this.subscribers.add(subscriberArg);
    return () => this.subscribers.delete(subscriberArg);
  }

  public start(): void {
    this.stopListening ??= this.options.store.onCommitted((kindArg, idArg, ownersArg, docArg) => this.committedHere(kindArg, idArg, ownersArg, docArg));
  }

  public stop(): void {
    this.stopListening?.();
    this.stopListening = null;
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.elsewhereSinceMs = null;
  }

  /**
   * A subscriber began to want other instances' changes: the log is read from now on (from
   * `sharedLookbackMs` before now when it was not read yet). Answers since when the log has been
   * read without a pause (null on the embedded database).
   */
  public wantElsewhere(): number | null {
    if (!this.options.shared || !this.stopListening) {
      return null;
    }
    if (this.elsewhereSinceMs === null) {
      this.elsewhereSinceMs = Date.now();
      this.watermark = this.elsewhereSinceMs - sharedLookbackMs;
      this.schedule();
    }
    return this.elsewhereSinceMs;
  }

  /** Since when the log has been read without a pause, or null while it is not read. */
  public get readingElsewhereSince(): number | null {
    return this.elsewhereSinceMs;
  }

  private committedHere(kindArg: IDocumentKind<IStoredDocument>, idArg: string, ownersArg: ICommittedOwners, docArg: Readonly<Document> | undefined): void {
    const at = Date.now();
    if (kindArg === auditEventKind && this.options.shared) {
      // Read back from the shared log later, this append must not be delivered a second time.
      this.seen.set(idArg, at);
    }
    this.deliver({ kind: kindArg.collectionName, id: idArg, owners: ownersArg, here: true, at, ...(docArg ? { doc: docArg } : {}) });
  }

  private deliver(changeArg: ICommittedChange): void {
    for (const subscriber of this.subscribers) {
      if (!subscriber.kinds.has(changeArg.kind)) {
        continue;
      }
      try {
        subscriber.onChange(changeArg);
      } catch (error) {
        this.options.logger.warn({ err: error, kind: changeArg.kind }, 'a change-feed subscriber failed');
      }
    }
  }

  private schedule(): void {
    if (this.timer || this.elsewhereSinceMs === null) {
      return;
    }
    this.timer = setTimeout(() => {
      void this.readShared().finally(() => {
        this.timer = null;
        if ([...this.subscribers].some((subscriber) => subscriber.wantsElsewhere())) {
          this.schedule();
        } else {
          this.elsewhereSinceMs = null;
        }
      });
    }, this.options.pollMs);
    this.timer.unref();
  }

  /**
   * One read of the shared audit log: every event appended since the watermark (minus the
   * lookback, for appends that came late) that was not delivered yet. Subscribers of the audit
   * event kind get the event; subscribers of the changed document's kind get the change with its
   * owners, read together, one query per kind and chunk of ids. Events are marked seen only once
   * their owners are read, so a failed read leaves them to the next one.
   */
  private async readShared(): Promise<void> {
    if (this.reading) {
      return;
    }
    this.reading = true;
    try {
      const from = this.watermark - sharedLookbackMs;
      const readStarted = Date.now();
      const events = await this.options.store.collection(auditEventKind)
        .find({ at: { $gte: from } }, { projection: { _id: 0, id: 1, at: 1, target: 1, generationAfter: 1, owners: 1 } })
        .sort({ at: 1 })
        .toArray();
      const fresh: Array<{ id: string; at: number; kind: string; targetId: string; generationAfter: unknown; owners: IDocumentOwners | null }> = [];
      for (const event of events) {
        const id = String(event.id);
        const at = Number(event.at);
        this.watermark = Math.max(this.watermark, at);
        if (!this.seen.has(id)) {
          const target = event.target as { kind: string; id: string };
          fresh.push({ id, at, kind: target.kind, targetId: target.id, generationAfter: event.generationAfter, owners: (event.owners as IDocumentOwners | undefined) ?? null });
        }
      }
      const wanted = this.wantedKinds();
      const owners = await this.readOwners(fresh.filter((event) => wanted.has(event.kind)));
      for (const event of fresh) {
        this.seen.set(event.id, event.at);
        this.deliver({ kind: auditEventKind.collectionName, id: event.id, owners: {}, here: false, at: event.at });
        if (!wanted.has(event.kind)) {
          continue;
        }
        this.elsewhereChanges++;
        // Judged against the generation this event's write made, not the document's current one.
        const generation = typeof event.generationAfter === 'number' ? { generation: event.generationAfter } : {};
        const stored = owners.get(`${event.kind}\u0000${event.targetId}`) ?? null;
        const kind = documentKindNamed(event.kind);
        // The owners the event was appended with (a removal's included), else as the document is stored now.
        const declared = event.owners ?? (kind ? kind.owners(event.targetId, stored) : {});
        const inputsGeneration = typeof stored?.inputsGeneration === 'number' ? { inputsGeneration: stored.inputsGeneration } : {};
        this.deliver({ kind: event.kind, id: event.targetId, owners: { ...declared, ...inputsGeneration, ...generation }, here: false, at: event.at });
      }
      for (const [id, at] of this.seen) {
        if (at >= from - sharedLookbackMs) {
          break;
        }
        this.seen.delete(id);
      }
      // Everything appended before this read began has been seen: the next read looks back from
      // then, not from the newest event (a log gone quiet after a storm is not read again whole).
      this.watermark = Math.max(this.watermark, readStarted);
    } catch (error) {
      this.options.logger.warn({ err: error }, 'the shared audit log could not be read');
    } finally {
      this.reading = false;
    }
  }

  private wantedKinds(): Set<string> {
    const kinds = new Set<string>();
    for (const subscriber of this.subscribers) {
      for (const kind of subscriber.kinds) {
        if (kind !== auditEventKind.collectionName) {
          kinds.add(kind);
        }
      }
    }
    return kinds;
  }

  /** The stored documents' owner members (a removed one has none), by `kind\0id`. */
  private async readOwners(eventsArg: Array<{ kind: string; targetId: string }>): Promise<Map<string, Document>> {
    const idsByKind = new Map<string, Set<string>>();
    for (const event of eventsArg) {
      let ids = idsByKind.get(event.kind);
      if (!ids) {
        ids = new Set();
        idsByKind.set(event.kind, ids);
      }
      ids.add(event.targetId);
    }
    const owners = new Map<string, Document>();
    const queries: Promise<void>[] = [];
    for (const [kind, idSet] of idsByKind) {
      for (const chunk of inChunks(idSet)) {
        this.ownerQueries++;
        queries.push(this.options.readOwnersOf(kind, chunk).then((docs) => {
          for (const doc of docs) {
            owners.set(`${kind}\u0000${String(doc.id)}`, doc);
          }
        }));
      }
    }
    await Promise.all(queries);
    return owners;
  }
}
