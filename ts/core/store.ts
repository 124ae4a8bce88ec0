import { createHash } from 'node:crypto';
import { ObjectId, type Collection, type Document, type Filter } from 'mongodb';
import type { TypedResponseError } from '@api.global/typedrequest';
import type { CloudlyDatabase } from './database.js';
import { refuseNamed } from './errors.js';
import { batchableEquality, ReadBatcher } from './readbatcher.js';
import { DirectReader } from './directread.js';
import { DirectWriter } from './directwrite.js';
import { InsertBatcher } from './insertbatcher.js';
import { currentOperation, type IOperationActor } from './operationcontext.js';
import { auditChangeLimits, type IAuditEvent, type IAuditFieldChange } from '../interfaces/data/audit.js';

/**
 * The one mechanism every manager uses to keep documents. Every document has an `id` and a
 * server-managed `generation`; a change commits by exactly one conditional single-document
 * write on the generation the caller read, so a lost race is a `null` the handler answers as
 * `conflict`, never a silent overwrite. An idempotent mutation stores its answer in that same
 * write, so a replay finds it.
 *
 * The documents live in the collections of the smartdata connection, but writes go through the
 * raw driver collection: smartdata's `save()` is last-write-wins and may re-create a deleted
 * document, which no racing mutation may use.
 */

/**
 * Values per `$in` query of `DocumentStore.findIn` (and of other reads by a list of ids): the
 * embedded database tests each candidate against the whole list.
 */
const inChunkSize = 32;

/** The distinct values, in chunks of `inChunkSize`: one `$in` query each. */
export const inChunks = (valuesArg: Iterable<string>): string[][] => {
  const values = [...new Set(valuesArg)];
  const chunks: string[][] = [];
  for (let start = 0; start < values.length; start += inChunkSize) {
    chunks.push(values.slice(start, start + inChunkSize));
  }
  return chunks;
};

/**
 * The start's audit reconcile reads the ids of every event since the oldest stamp in one query
 * while those are at most this many times the stamps it checks: in one process, 2,740 ids read in
 * bulk took 15–30 ms, asked for by id in chunks of 32 100–160 ms, so an id read in bulk costs
 * about a seventh of one asked for (bench/results/fleet.md, "An idle fleet's database commands
 * and the start after a restart").
 */
const oneReadFactor = 6;

export interface IStoredDocument {
  id: string;
  generation: number;
}

/** A kind of document: its collection name and its shape. */
export interface IDocumentKind<T extends IStoredDocument> {
  readonly collectionName: string;
  /**
   * False for documents whose writes are not changes anyone asked for (relay lease renewals, the
   * audit events themselves): their writes append no audit event.
   */
  readonly audited: boolean;
  /**
   * Whom a document of this kind belongs to, from its id and (when there is one) its stored
   * shape: declared once here, carried by every committed change (`ICommittedOwners`), so no
   * consumer works it out again. Removals pass what the removal read of the document, or null.
   */
  readonly owners: (idArg: string, docArg: Document | null) => IDocumentOwners;
  /**
   * The top-level fields whose values an update's audit event shows before → after (`changed`).
   * Only fields that never hold a secret; absent for every kind that did not opt in.
   */
  readonly auditedFields?: readonly string[];
  /**
   * Top-level fields that no derived work (no controller) reads, such as a cluster's relay token
   * hash. A swap that changes only these leaves the document's `inputsGeneration` behind its
   * generation, so the change feed's consumers can skip it (`leftDerivedInputs`); any other swap
   * of the kind moves `inputsGeneration` to the new generation.
   */
  readonly bookkeepingFields?: readonly string[];
  /** Phantom member that carries the document type; never set. */
  readonly documentType?: T;
}

/** Every kind defined in this process, by collection name: the audit reconciliation walks them. */
const definedKinds = new Map<string, IDocumentKind<IStoredDocument>>();

/** The owners a document names, as a Kubernetes object carries its namespace and owner references. */
export interface IDocumentOwners {
  clusterId?: string;
  serviceId?: string;
}

/** The owners most kinds declare: their `clusterId` and `serviceId` members, as stored. */
export const ownersFromMembers = (_idArg: string, docArg: Document | null): IDocumentOwners => ({
  ...(typeof docArg?.serviceId === 'string' ? { serviceId: docArg.serviceId } : {}),
  ...(typeof docArg?.clusterId === 'string' ? { clusterId: docArg.clusterId } : {}),
});

/** Owners of a kind whose id is its cluster's id (the cluster, its ingress slot, its relay registration and lease). */
export const ownedByClusterOfId = (idArg: string): IDocumentOwners => ({ clusterId: idArg });

/** Owners of a kind whose id is `<clusterId>/<nodeId>` (nodes and what is kept per node); `/` never occurs in an id. */
export const ownedByClusterOfNodeId = (idArg: string, docArg: Document | null): IDocumentOwners => {
  const separator = idArg.indexOf('/');
  return { ...ownersFromMembers(idArg, docArg), ...(separator > 0 ? { clusterId: idArg.slice(0, separator) } : {}) };
};

/** Owners of a kind whose id is its service's id (the service, its verdict, its observations). */
export const ownedByServiceOfId = (idArg: string, docArg: Document | null): IDocumentOwners => ({ ...ownersFromMembers(idArg, docArg), serviceId: idArg });

/** The kind defined under this collection name, if any (the shared audit log names kinds by collection). */
export const documentKindNamed = (collectionNameArg: string): IDocumentKind<IStoredDocument> | undefined => definedKinds.get(collectionNameArg);

export const defineDocumentKind = <T extends IStoredDocument>(
  collectionNameArg: string,
  optionsArg: {
    audited?: boolean;
    owners?: (idArg: string, docArg: Document | null) => IDocumentOwners;
    auditedFields?: ReadonlyArray<keyof T & string>;
    bookkeepingFields?: ReadonlyArray<keyof T & string>;
  } = {},
): IDocumentKind<T> => {
  if (!/^[A-Za-z][A-Za-z0-9_]{0,62}$/.test(collectionNameArg)) {
    throw new Error(`invalid collection name ${collectionNameArg}`);
  }
  const kind = Object.freeze({
    collectionName: collectionNameArg,
    audited: optionsArg.audited ?? true,
    owners: optionsArg.owners ?? ownersFromMembers,
    ...(optionsArg.auditedFields ? { auditedFields: Object.freeze([...optionsArg.auditedFields]) } : {}),
    ...(optionsArg.bookkeepingFields ? { bookkeepingFields: Object.freeze([...optionsArg.bookkeepingFields]) } : {}),
  });
  definedKinds.set(collectionNameArg, kind);
  return kind;
};

/** The collection names of the audited kinds: every kind whose changes the audit log (and a watch) carries. */
export const auditedKindNames = (): string[] =>
  [...definedKinds.values()].filter((kindArg) => kindArg.audited).map((kindArg) => kindArg.collectionName).sort();

/** One committed change as stored: the public audit event (`IAuditEvent`) plus the store's generation. */
export interface IAuditEventDocument extends IStoredDocument, Omit<IAuditEvent, 'id'> {
  /**
   * The changed document's owners as its kind declares them, kept so that another instance's
   * change feed knows them without reading the document (a removed one has none left to read).
   * Stored only; not part of the public event.
   */
  owners?: IDocumentOwners;
}

export const auditEventKind = defineDocumentKind<IAuditEventDocument>('CloudlyAuditEvent', { audited: false });

/**
 * What a committed write carries about itself, in the same write: who, why, from which
 * generation. The audit event is derived from it after the commit (and again at start-up, should
 * the process have died in between), so a committed change never lacks its event.
 */
interface IAuditStamp {
  at: number;
  actor: IOperationActor;
  method: string;
  generationBefore: number;
  mutationId?: string;
  cause?: { kind: string; id: string };
  changed?: IAuditFieldChange[];
  /** Set by the first of a removal's two writes; the second deletes the document. */
  removing?: true;
}

/** How often `mutate` reads again after losing a race before it gives up. */
export const defaultUpdateRounds = 8;

/**
 * What a `mutate` decider wants done with the document it was shown (null when there is none):
 * swap a change onto the generation it read, create it (only when nothing was read), remove it,
 * keep it as it is (no write), or refuse the whole operation with a refusal the caller receives.
 */
export type TDecision<T extends IStoredDocument> =
  | { kind: 'write'; change: ISwapChange<T> }
  | { kind: 'create'; doc: Omit<T, 'generation'> }
  | { kind: 'remove' }
  | { kind: 'keep' }
  | { kind: 'refuse'; refusal: TypedResponseError };

/** How a `mutate` ended; `doc` is the document as it stands afterwards (null once removed or never there). */
export interface IMutateResult<T extends IStoredDocument> {
  outcome: 'written' | 'created' | 'removed' | 'kept';
  doc: T | null;
  /** The generation the decision was made on (0 when there was no document). */
  previousGeneration: number;
}

/** The refusals `mutate` threw because every round lost its race (a decision's own refusals are not among them). */
const lostEveryRound = new WeakSet<object>();

/**
 * Whether a refusal is `mutate`'s own "lost every compare-and-swap round", as opposed to one a
 * decision made: the pipeline answers the former in a contract's own shape where one defines it.
 */
export const isLostEveryRound = (errorArg: unknown): boolean =>
  typeof errorArg === 'object' && errorArg !== null && lostEveryRound.has(errorArg);

/** How many recent mutation answers a document keeps for replays. */
export const retainedMutationAnswers = 64;

interface IMutationRecord {
  mutationId: string;
  answer: unknown;
}

export interface ISwapChange<T> {
  set?: Partial<Omit<T, 'id' | 'generation'>>;
  unset?: Array<Exclude<keyof T, 'id' | 'generation'>>;
}

export interface IMutationAnswer {
  mutationId: string;
  answer: unknown;
}

type TStoredShape = Document & { _id: ObjectId; mutations?: IMutationRecord[]; _audit?: IAuditStamp; _incarnation?: string };

const hiddenFields = { _id: 0, mutations: 0, _audit: 0, _incarnation: 0 } as const;
/** The same, for reads answered in the process (directread.ts). */
const hiddenProjection = { exclude: Object.keys(hiddenFields) };

/** The audit event id of one change: the same change always gets the same id, so never two events. */
const auditEventId = (collectionNameArg: string, idArg: string, incarnationArg: string, generationArg: number | 'removed'): string =>
  `${collectionNameArg}:${idArg}:${incarnationArg}:${generationArg}`;

/** `_id` derived from the collection and the id, so one id can only ever be inserted once. */
const documentObjectId = (collectionNameArg: string, idArg: string): ObjectId =>
  new ObjectId(createHash('sha256').update(`${collectionNameArg}\u0000${idArg}`).digest().subarray(0, 12));

const stripStoredFields = <T>(docArg: Document | null): T | null => {
  if (!docArg) {
    return null;
  }
  const { _id: _ignoredId, mutations: _ignoredMutations, _audit: _ignoredAudit, _incarnation: _ignoredIncarnation, ...rest } = docArg;
  return rest as T;
};

/** A swap's change applied to a copy of the stored document, as the database would: for dry runs. */
const applyChange = (docArg: Document, setArg: Document, unsetArg: readonly string[]): Document => {
  const next: Document = { ...docArg, ...setArg };
  for (const key of unsetArg) {
    delete next[key];
  }
  return next;
};

const jsonOf = (valueArg: unknown): string => JSON.stringify(valueArg ?? null);
const isPlainRecord = (valueArg: unknown): valueArg is Record<string, unknown> =>
  typeof valueArg === 'object' && valueArg !== null && !Array.isArray(valueArg);
const shownValue = (valueArg: unknown): unknown => {
  const text = jsonOf(valueArg);
  return text.length > auditChangeLimits.valueChars ? `${text.slice(0, auditChangeLimits.valueChars - 1)}…` : valueArg ?? null;
};

/**
 * The fields of `fieldsArg` an update changed, before → after: a changed object is followed two
 * levels in (`runtime.image`), arrays and deeper values are compared whole. Bounded by
 * `auditChangeLimits`.
 */
export const auditedChanges = (fieldsArg: readonly string[], beforeArg: Document, afterArg: Document): IAuditFieldChange[] => {
  const changes: IAuditFieldChange[] = [];
  const visit = (pathArg: string, beforeValueArg: unknown, afterValueArg: unknown, depthArg: number): void => {
    if (changes.length >= auditChangeLimits.fields || jsonOf(beforeValueArg) === jsonOf(afterValueArg)) {
      return;
    }
    if (depthArg < 2 && isPlainRecord(beforeValueArg) && isPlainRecord(afterValueArg)) {
      for (const key of [...new Set([...Object.keys(beforeValueArg), ...Object.keys(afterValueArg)])].sort()) {
        visit(`${pathArg}.${key}`, beforeValueArg[key], afterValueArg[key], depthArg + 1);
      }
      return;
    }
    changes.push({ field: pathArg, before: shownValue(beforeValueArg), after: shownValue(afterValueArg) });
  };
  for (const field of fieldsArg) {
    visit(field, beforeArg[field], afterArg[field], 0);
  }
  return changes;
};

/**
 * Whom a committed document belongs to, as far as it says (its `serviceId` and `clusterId`
 * members): enough for a listener to know what the change affects without reading it again,
 * removals included.
 */
export interface ICommittedOwners extends IDocumentOwners {
  /** The generation the write gave the document (absent for a removal). */
  generation?: number;
  /**
   * For a document that carries `inputsGeneration` (the generation of its last write that changed
   * what work derived from it reads; a relay registration's announcement), that member: a write
   * that leaves it behind `generation` changed nothing derived work reads (`leftDerivedInputs`).
   */
  inputsGeneration?: number;
}

/**
 * Whether a committed write changed nothing that work derived from the document reads: the
 * document carries `inputsGeneration` and it is older than the write's generation. Without the
 * member (most kinds, a removal) every write counts as a change.
 */
export const leftDerivedInputs = (ownersArg: ICommittedOwners): boolean =>
  typeof ownersArg.inputsGeneration === 'number' && typeof ownersArg.generation === 'number' && ownersArg.inputsGeneration < ownersArg.generation;

/**
 * A commit's listener: the kind, the id, the owners, and the document as the write stored it
 * (absent for a removal). The document is the store's own: a listener reads it and keeps nothing
 * of it that it could change.
 */
export type TCommitListener = (kindArg: IDocumentKind<IStoredDocument>, idArg: string, ownersArg: ICommittedOwners, docArg?: Readonly<Document>) => void;

export class DocumentStore {
  /** Counts committed writes; `/metrics` and the benchmark read it. */
  public committedWrites = 0;

  /** Audit events that could not be appended after their commit; start-up reconciliation adds them. */
  public auditAppendFailures = 0;

  /** Reads by one field's value, coalesced across callers (ts/core/readbatcher.ts). */
  public readonly reads = new ReadBatcher({ projection: hiddenFields });
  /** Create-once writes, coalesced across callers (ts/core/insertbatcher.ts). */
  public readonly inserts = new InsertBatcher();

  /**
   * Reads of the embedded database answered in the process, without the database protocol
   * (directread.ts); with MONGODB_URL, or turned off, every read goes through the driver.
   */
  public readonly direct: DirectReader;

  /**
   * Writes to the embedded database handed to its command router in the process, without the
   * database protocol (directwrite.ts); with MONGODB_URL, or turned off, through the driver.
   */
  public readonly writes: DirectWriter;

  constructor(private readonly database: CloudlyDatabase) {
    this.direct = new DirectReader(() => {
      const storage = database.servingStorage;
      return storage ? { storage, database: database.name } : null;
    });
    this.writes = new DirectWriter(() => {
      const route = database.servingRoute;
      return route ? { route, database: database.name } : null;
    });
    this.inserts.direct = this.writes;
  }

  private auditStamp(kindArg: IDocumentKind<IStoredDocument>, generationBeforeArg: number, mutationArg?: IMutationAnswer): IAuditStamp | null {
    if (!kindArg.audited) {
      return null;
    }
    const operation = currentOperation();
    const stamp: IAuditStamp = { at: Date.now(), actor: operation.actor, method: operation.method, generationBefore: generationBeforeArg };
    if (mutationArg) {
      stamp.mutationId = mutationArg.mutationId;
    }
    if (operation.cause) {
      stamp.cause = { kind: operation.cause.kind, id: operation.cause.id };
    }
    return stamp;
  }

  /** Appends the audit event of a committed change; idempotent by the event's derived id. */
  private async appendAudit(
    kindArg: IDocumentKind<IStoredDocument>,
    idArg: string,
    incarnationArg: string,
    stampArg: IAuditStamp,
    generationAfterArg: number | null,
    docArg: Document | null,
    nowArg = false,
  ): Promise<void> {
    const owners = kindArg.owners(idArg, docArg);
    const event: Omit<IAuditEventDocument, 'generation'> = {
      id: auditEventId(kindArg.collectionName, idArg, incarnationArg, generationAfterArg ?? 'removed'),
      at: stampArg.at,
      actor: stampArg.actor,
      method: stampArg.method,
      target: { kind: kindArg.collectionName, id: idArg },
      outcome: generationAfterArg === null ? 'removed' : stampArg.generationBefore === 0 ? 'created' : 'updated',
      generationBefore: stampArg.generationBefore,
      generationAfter: generationAfterArg,
    };
    if (stampArg.mutationId) {
      event.mutationId = stampArg.mutationId;
    }
    if (stampArg.cause) {
      event.cause = stampArg.cause;
    }
    if (stampArg.changed && generationAfterArg !== null) {
      event.changed = stampArg.changed;
    }
    if (owners.clusterId !== undefined || owners.serviceId !== undefined) {
      event.owners = owners;
    }
    const inserted = this.insert(auditEventKind, event, { now: nowArg });
    if (nowArg) {
      // Sent before the change is durable: the caller learns whether the change itself was.
      await inserted;
      return;
    }
    await this.auditAppended(inserted);
  }

  /** Waits for a committed change's audit event; a failure is counted, never the writer's. */
  private async auditAppended(appendArg: Promise<unknown>): Promise<void> {
    try {
      await appendArg;
    } catch {
      // The change is committed and carries its stamp: start-up reconciliation appends the event.
      this.auditAppendFailures++;
    }
  }

  /**
   * Appends the audit event of every change whose document still carries a stamp without one,
   * and finishes removals that were stamped but not yet deleted: what a process that died between
   * a commit and its audit append left behind. Runs at start-up, before any manager.
   */
  public async reconcileAudit(): Promise<{ appended: number; removalsFinished: number }> {
    let appended = 0;
    let removalsFinished = 0;
    // Every audited kind's stamps, read side by side (one query per kind).
    const stampedOfKind = await Promise.all([...definedKinds.values()].filter((kind) => kind.audited).map(async (kind) => ({
      kind,
      stamped: await this.collection(kind)
        .find({ _audit: { $exists: true } }, { projection: { _id: 0, id: 1, generation: 1, _audit: 1, _incarnation: 1 } })
        .toArray(),
    })));
    const eventIdOf = (kindArg: IDocumentKind<IStoredDocument>, docArg: Document): string =>
      auditEventId(kindArg.collectionName, docArg.id as string, String(docArg._incarnation ?? 'none'), docArg.generation as number);
    const wanted = stampedOfKind.flatMap(({ kind, stamped }) =>
      stamped.filter((doc) => !(doc._audit as IAuditStamp).removing).map((doc) => ({ id: eventIdOf(kind, doc), at: (doc._audit as IAuditStamp).at })));
    const recorded = await this.recordedAuditEvents(wanted);
    for (const { kind, stamped } of stampedOfKind) {
      const eventIdOfDoc = (docArg: Document): string => eventIdOf(kind, docArg);
      for (const doc of stamped) {
        const stamp = doc._audit as IAuditStamp;
        const incarnation = String(doc._incarnation ?? 'none');
        if (stamp.removing) {
          const deleted = await this.collection(kind).deleteOne({ id: doc.id, generation: doc.generation } as Filter<TStoredShape>);
          if (deleted.deletedCount === 1) {
            removalsFinished++;
            await this.appendAudit(kind, doc.id as string, incarnation, stamp, null, doc);
            appended++;
          }
          continue;
        }
        if (!recorded.has(eventIdOfDoc(doc))) {
          await this.appendAudit(kind, doc.id as string, incarnation, stamp, doc.generation as number, doc);
          appended++;
        }
      }
    }
    return { appended, removalsFinished };
  }

  /** How the last `reconcileAudit` asked which events exist (for tests and benchmarks). */
  public lastAuditLookup: { how: 'none' | 'one-read' | 'by-id'; events: number } = { how: 'none', events: 0 };

  /**
   * Which of these events (id, and the `at` of the stamp, which its event carries too) the log
   * holds. An event has its stamp's `at`, so every one asked for is among the events from the
   * oldest stamp on: when those are at most `oneReadFactor` times as many as the ids asked for,
   * their ids are read in one query (one scan, a few bytes each); otherwise (a long history of
   * events after the oldest stamp) by id in `findIn`'s chunks, ids only. At 1,000 clusters the
   * chunks were 88 round trips and 160 ms in one process; the one read 3 and 15 ms.
   */
  private async recordedAuditEvents(wantedArg: { id: string; at: number }[]): Promise<Set<string>> {
    if (wantedArg.length === 0) {
      this.lastAuditLookup = { how: 'none', events: 0 };
      return new Set();
    }
    const events = this.collection(auditEventKind as unknown as IDocumentKind<IStoredDocument>);
    const oldest = wantedArg.reduce((min, event) => Math.min(min, event.at), Infinity);
    const since = { at: { $gte: oldest } } as Filter<TStoredShape>;
    const count = await events.countDocuments(since);
    if (count <= wantedArg.length * oneReadFactor) {
      this.lastAuditLookup = { how: 'one-read', events: count };
      const docs = await events.find(since, { projection: { _id: 0, id: 1 } }).batchSize(count + 1).toArray();
      return new Set(docs.map((doc) => String(doc.id)));
    }
    this.lastAuditLookup = { how: 'by-id', events: count };
    const found = await Promise.all(inChunks(wantedArg.map((event) => event.id)).map((chunk) =>
      events.find({ id: { $in: chunk } } as Filter<TStoredShape>, { projection: { _id: 0, id: 1 } }).toArray()));
    return new Set(found.flat().map((doc) => String(doc.id)));
  }

  public collection<T extends IStoredDocument>(kindArg: IDocumentKind<T>): Collection<TStoredShape> {
    // The driver builds a new Collection (and resolves its options) on every `db.collection()`:
    // 1% of an instance's CPU in a relay storm, where every command asks for one. A Collection is
    // a stateless handle, so one per name and database handle is kept.
    const db = this.database.mongoDb;
    let collections = this.collections.get(db);
    if (!collections) {
      collections = new Map();
      this.collections.set(db, collections);
    }
    let collection = collections.get(kindArg.collectionName);
    if (!collection) {
      collection = db.collection<TStoredShape>(kindArg.collectionName);
      collections.set(kindArg.collectionName, collection);
    }
    return collection;
  }

  /** The Collection handles `collection` made, per database handle (a reconnect brings a new one). */
  private readonly collections = new WeakMap<object, Map<string, Collection<TStoredShape>>>();

  private readonly commitListeners = new Set<TCommitListener>();

  /**
   * Tells `listenerArg` of every committed write (kind and id) on this instance, after the commit:
   * how a domain learns that what it derives from another domain's documents changed. A
   * listener's failure is its own; it never reaches the writer.
   */
  public onCommitted(listenerArg: TCommitListener): () => void {
    this.commitListeners.add(listenerArg);
    return () => this.commitListeners.delete(listenerArg);
  }

  private committed(kindArg: IDocumentKind<IStoredDocument>, idArg: string, docArg: Document | null, removedArg = false): void {
    this.committedWrites++;
    const owners: ICommittedOwners = {
      ...kindArg.owners(idArg, docArg),
      ...(typeof docArg?.generation === 'number' ? { generation: docArg.generation } : {}),
      ...(typeof docArg?.inputsGeneration === 'number' ? { inputsGeneration: docArg.inputsGeneration } : {}),
    };
    for (const listener of this.commitListeners) {
      try {
        listener(kindArg, idArg, owners, removedArg || docArg === null ? undefined : docArg);
      } catch {
        // The write is committed; a listener that fails must not turn it into a failure.
      }
    }
  }

  /**
   * Creates a document at generation 1 exactly once per id: concurrent inserts of one id have
   * exactly one winner. Returns the stored document, or null when the id already exists.
   */
  public async insert<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    docArg: Omit<T, 'generation'> & { generation?: number },
    optionsArg: { mutation?: IMutationAnswer; now?: boolean } = {},
  ): Promise<T | null> {
    const doc = { ...docArg, generation: 1 } as Document;
    if (optionsArg.mutation) {
      doc.mutations = [{ mutationId: optionsArg.mutation.mutationId, answer: optionsArg.mutation.answer }];
    }
    if (currentOperation().dryRun) {
      // By `id`, which names one document as its derived `_id` does: the embedded database finds
      // nothing by `_id` in a query, so a dry insert of an existing id answered a creation.
      const existing = await this.collection(kindArg).findOne({ id: docArg.id } as Filter<TStoredShape>, { projection: { _id: 1 } });
      return existing ? null : stripStoredFields<T>(doc);
    }
    const stamp = this.auditStamp(kindArg as unknown as IDocumentKind<IStoredDocument>, 0, optionsArg.mutation);
    if (stamp) {
      doc._audit = stamp;
      doc._incarnation = new ObjectId().toHexString();
    }
    const inserted = await this.inserts.insertIfAbsent(
      this.collection(kindArg) as unknown as Collection<Document>,
      documentObjectId(kindArg.collectionName, docArg.id),
      doc,
      { now: optionsArg.now },
    );
    if (!inserted) {
      return null;
    }
    this.committed(kindArg as unknown as IDocumentKind<IStoredDocument>, docArg.id, doc);
    if (stamp) {
      await this.appendAudit(kindArg as unknown as IDocumentKind<IStoredDocument>, docArg.id, doc._incarnation as string, stamp, 1, doc);
    }
    return stripStoredFields<T>(doc);
  }

  public async get<T extends IStoredDocument>(kindArg: IDocumentKind<T>, idArg: string): Promise<T | null> {
    return this.findOne(kindArg, { id: idArg } as Filter<T>);
  }

  public async findOne<T extends IStoredDocument>(kindArg: IDocumentKind<T>, filterArg: Filter<T>): Promise<T | null> {
    const direct = await this.direct.find(kindArg.collectionName, filterArg as Document, { projection: hiddenProjection, limit: 1 });
    if (direct) {
      return (direct[0] as T | undefined) ?? null;
    }
    const equality = this.reads.enabled ? batchableEquality(filterArg as Document) : null;
    if (equality) {
      const [doc] = await this.reads.read(this.collection(kindArg) as unknown as Collection<Document>, equality.field, equality.value, { first: true });
      return stripStoredFields<T>(doc ?? null);
    }
    const doc = await this.collection(kindArg).findOne(filterArg as Filter<TStoredShape>, { projection: hiddenFields });
    return stripStoredFields<T>(doc);
  }

  public async find<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    filterArg: Filter<T> = {},
    optionsArg: { sort?: Record<string, 1 | -1>; limit?: number } = {},
  ): Promise<T[]> {
    const direct = await this.direct.find(kindArg.collectionName, filterArg as Document, { projection: hiddenProjection, sort: optionsArg.sort, limit: optionsArg.limit });
    if (direct) {
      return direct as T[];
    }
    const equality = this.reads.enabled && !optionsArg.limit ? batchableEquality(filterArg as Document) : null;
    if (equality) {
      const docs = await this.reads.read(this.collection(kindArg) as unknown as Collection<Document>, equality.field, equality.value, { first: false, sort: optionsArg.sort });
      return docs.map((doc) => stripStoredFields<T>(doc) as T);
    }
    let cursor = this.collection(kindArg).find(filterArg as Filter<TStoredShape>, { projection: hiddenFields });
    if (optionsArg.sort) {
      cursor = cursor.sort(optionsArg.sort);
    }
    if (optionsArg.limit) {
      cursor = cursor.limit(optionsArg.limit);
    }
    const docs = await cursor.toArray();
    return docs.map((doc) => stripStoredFields<T>(doc) as T);
  }

  /**
   * Only these fields of the matching documents: for a whole-collection read at start-up that
   * needs a few fields of every document (a cluster's id and name, not its whole spec), so the
   * database encodes and the driver decodes that much and no more.
   */
  public async findFields<T extends IStoredDocument, K extends keyof T & string>(
    kindArg: IDocumentKind<T>,
    filterArg: Filter<T>,
    fieldsArg: readonly K[],
    optionsArg: { sort?: Record<string, 1 | -1> } = {},
  ): Promise<Pick<T, K>[]> {
    const direct = await this.direct.find(kindArg.collectionName, filterArg as Document, { projection: { include: fieldsArg }, sort: optionsArg.sort });
    if (direct) {
      return direct as Pick<T, K>[];
    }
    const projection: Document = { _id: 0 };
    for (const field of fieldsArg) {
      projection[field] = 1;
    }
    let cursor = this.collection(kindArg).find(filterArg as Filter<TStoredShape>, { projection });
    if (optionsArg.sort) {
      cursor = cursor.sort(optionsArg.sort);
    }
    return (await cursor.toArray()) as unknown as Pick<T, K>[];
  }

  /**
   * The documents whose `fieldArg` is one of `valuesArg` (and that match `filterArg`), in no
   * particular order. A long list is read in chunks side by side: the embedded database tests each
   * candidate document against the whole `$in` list (building a hash of it per document), so one
   * query of n values over the n-odd documents they name costs n² where chunks cost n × chunk.
   */
  public async findIn<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    fieldArg: keyof T & string,
    valuesArg: readonly string[],
    filterArg: Filter<T> = {},
  ): Promise<T[]> {
    const parts = await Promise.all(inChunks(valuesArg).map((chunk) => this.find(kindArg, { ...filterArg, [fieldArg]: { $in: chunk } } as Filter<T>)));
    return parts.flat();
  }

  /**
   * The compare-and-swap: applies the change only if the document still has `expectedGeneration`,
   * and bumps the generation in the same write. Returns the new document, or null when the
   * document is gone or another writer got there first.
   */
  public async swap<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    idArg: string,
    expectedGenerationArg: number,
    changeArg: ISwapChange<T>,
    optionsArg: { mutation?: IMutationAnswer; current?: T } = {},
  ): Promise<T | null> {
    const collection = this.collection(kindArg);
    const filter = { id: idArg, generation: expectedGenerationArg } as Filter<TStoredShape>;
    const set: Document = { ...(changeArg.set ?? {}), generation: expectedGenerationArg + 1 };
    const unset = (changeArg.unset ?? []) as string[];
    const bookkeeping = kindArg.bookkeepingFields;
    // Set before `_audit` and `mutations` join `set`: those are the store's own, never derived inputs.
    const onlyBookkeeping = bookkeeping !== undefined
      && [...Object.keys(set), ...unset].every((keyArg) => keyArg === 'generation' || bookkeeping.includes(keyArg));
    if (bookkeeping && !onlyBookkeeping) {
      set.inputsGeneration = expectedGenerationArg + 1;
    }
    if (currentOperation().dryRun) {
      const current = await collection.findOne(filter);
      return current ? stripStoredFields<T>(applyChange(current, set, unset)) : null;
    }
    const stamp = this.auditStamp(kindArg as unknown as IDocumentKind<IStoredDocument>, expectedGenerationArg, optionsArg.mutation);
    if (stamp) {
      const shown = kindArg.auditedFields;
      if (shown && ![...Object.keys(set), ...unset].some((keyArg) => keyArg.includes('.'))) {
        // The write below is conditional on this generation, so what this read sees (or what the
        // caller read at that generation) is exactly what it changes.
        const before = optionsArg.current?.generation === expectedGenerationArg
          ? optionsArg.current as unknown as Document
          : await this.readProjected(kindArg, filter, shown);
        if (!before) {
          return null;
        }
        const changed = auditedChanges(shown, before, applyChange(before, set, unset));
        if (changed.length > 0) {
          stamp.changed = changed;
        }
      }
      set._audit = stamp;
    }
    if (optionsArg.mutation) {
      // The answers ride in the committing write itself; the read below only carries the older
      // answers forward, and the generation filter still decides the race.
      const current = await this.readProjected(kindArg, filter, ['mutations']);
      if (!current) {
        return null;
      }
      const kept = (current.mutations ?? []).slice(-(retainedMutationAnswers - 1));
      set.mutations = [...kept, { mutationId: optionsArg.mutation.mutationId, answer: optionsArg.mutation.answer }];
    }
    const update: Document = { $set: set };
    if (onlyBookkeeping) {
      // The document's inputs were last changed at or before the generation this write replaces;
      // `$min` keeps an older mark and sets one on a document that has none yet.
      update.$min = { inputsGeneration: expectedGenerationArg };
    }
    if (unset.length > 0) {
      update.$unset = Object.fromEntries(unset.map((key) => [key, '']));
    }
    const kind = kindArg as unknown as IDocumentKind<IStoredDocument>;
    const appendAuditOf = (afterArg: Document, nowArg: boolean): Promise<void> =>
      this.appendAudit(kind, idArg, String(afterArg._incarnation ?? 'none'), stamp!, expectedGenerationArg + 1, afterArg, nowArg);
    // In the process, the audit event is appended as soon as the write has decided, so the two
    // share one journal sync; a crash between them is what start-up reconciliation finishes.
    let auditAppended: Promise<void> | null = null;
    const written = await this.writes.findOneAndUpdate(kindArg.collectionName, filter, update, {
      updated: stamp
        ? (afterArg) => {
          auditAppended = appendAuditOf(afterArg, true);
          // Awaited below once the change is durable; a refused change refuses its event too.
          auditAppended.catch(() => undefined);
        }
        : undefined,
    });
    const after = written !== undefined ? written : await collection.findOneAndUpdate(filter, update, { returnDocument: 'after' });
    if (!after) {
      return null;
    }
    this.committed(kind, idArg, after);
    if (auditAppended) {
      await this.auditAppended(auditAppended);
    } else if (stamp) {
      await appendAuditOf(after, false);
    }
    return stripStoredFields<T>(after);
  }

  /** The first document matching `filterArg`, with only `fieldsArg` (and `_id` through the driver). */
  private async readProjected(kindArg: IDocumentKind<IStoredDocument>, filterArg: Document, fieldsArg: readonly string[]): Promise<Document | null> {
    const direct = await this.direct.find(kindArg.collectionName, filterArg, { projection: { include: fieldsArg }, limit: 1 });
    if (direct) {
      return direct[0] ?? null;
    }
    return this.collection(kindArg).findOne(filterArg as Filter<TStoredShape>, { projection: Object.fromEntries(fieldsArg.map((fieldArg) => [fieldArg, 1])) });
  }

  /**
   * The one read-decide-write primitive (Kubernetes' GuaranteedUpdate): reads the document, asks
   * `decideArg` what to do with it, and commits that decision with one conditional write on the
   * generation it read. A lost race reads and decides again, at most `rounds` times; then the
   * operation is refused `conflict`. A `refuse` decision is thrown as it is. Never answers an
   * ambiguous null: the outcome says what happened. `read`: the document as the caller just read
   * it, decided on in the first round instead of reading it again (the write's generation filter
   * still decides the race; a lost one reads again).
   */
  public async mutate<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    idArg: string,
    decideArg: (currentArg: T | null) => TDecision<T> | Promise<TDecision<T>>,
    optionsArg: { rounds?: number; mutation?: IMutationAnswer; read?: T | null } = {},
  ): Promise<IMutateResult<T>> {
    const rounds = optionsArg.rounds ?? defaultUpdateRounds;
    for (let round = 0; round < rounds; round++) {
      const current = round === 0 && optionsArg.read !== undefined ? optionsArg.read : await this.get(kindArg, idArg);
      const decision = await decideArg(current);
      const previousGeneration = current?.generation ?? 0;
      switch (decision.kind) {
        case 'refuse':
          throw decision.refusal;
        case 'keep':
          return { outcome: 'kept', doc: current, previousGeneration };
        case 'create': {
          if (current) {
            throw new Error(`mutate of ${kindArg.collectionName} ${idArg}: create decided on an existing document`);
          }
          if ((decision.doc as { id: string }).id !== idArg) {
            throw new Error(`mutate of ${kindArg.collectionName} ${idArg}: create decided a document with another id`);
          }
          const created = await this.insert(kindArg, decision.doc, { mutation: optionsArg.mutation });
          if (created) {
            return { outcome: 'created', doc: created, previousGeneration };
          }
          break;
        }
        case 'write': {
          if (!current) {
            throw new Error(`mutate of ${kindArg.collectionName} ${idArg}: write decided on no document`);
          }
          const written = await this.swap(kindArg, idArg, current.generation, decision.change, { mutation: optionsArg.mutation, current });
          if (written) {
            return { outcome: 'written', doc: written, previousGeneration };
          }
          break;
        }
        case 'remove': {
          if (!current) {
            return { outcome: 'kept', doc: null, previousGeneration };
          }
          if (await this.remove(kindArg, idArg, current.generation)) {
            return { outcome: 'removed', doc: null, previousGeneration };
          }
          break;
        }
      }
    }
    const lost = refuseNamed('conflict', 'kept-changing', `${kindArg.collectionName} ${idArg} kept changing during ${rounds} attempts; try again`);
    lostEveryRound.add(lost);
    throw lost;
  }

  /**
   * Deletes the document if it still has `expectedGeneration`; false when the race was lost. An
   * audited kind is removed in two writes: the first stamps the removal (and takes the next
   * generation, so the race is still decided there), the second deletes that generation. A
   * process that dies between them has its removal finished by start-up reconciliation.
   */
  public async remove<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    idArg: string,
    expectedGenerationArg: number,
  ): Promise<boolean> {
    const collection = this.collection(kindArg);
    const filter = { id: idArg, generation: expectedGenerationArg } as Filter<TStoredShape>;
    if (currentOperation().dryRun) {
      return (await collection.countDocuments(filter, { limit: 1 })) === 1;
    }
    const stamp = this.auditStamp(kindArg as unknown as IDocumentKind<IStoredDocument>, expectedGenerationArg);
    let generation = expectedGenerationArg;
    let incarnation = 'none';
    let owners: Document | null = null;
    if (stamp) {
      const marking = { $set: { _audit: { ...stamp, removing: true as const }, generation: expectedGenerationArg + 1 } };
      const projection = { _incarnation: 1, serviceId: 1, clusterId: 1 };
      const markedInProcess = await this.writes.findOneAndUpdate(kindArg.collectionName, filter, marking, { projection });
      const marked = markedInProcess !== undefined
        ? markedInProcess
        : await collection.findOneAndUpdate(filter, marking, { returnDocument: 'after', projection });
      if (!marked) {
        return false;
      }
      generation = expectedGenerationArg + 1;
      incarnation = String(marked._incarnation ?? 'none');
      owners = marked;
    }
    const deleteFilter = { id: idArg, generation } as Filter<TStoredShape>;
    const deletedInProcess = await this.writes.deleteOne(kindArg.collectionName, deleteFilter);
    const deletedCount = deletedInProcess !== undefined ? deletedInProcess : (await collection.deleteOne(deleteFilter)).deletedCount;
    if (deletedCount !== 1) {
      return false;
    }
    this.committed(kindArg as unknown as IDocumentKind<IStoredDocument>, idArg, owners, true);
    if (stamp) {
      await this.appendAudit(kindArg as unknown as IDocumentKind<IStoredDocument>, idArg, incarnation, stamp, null, owners);
    }
    return true;
  }

  /** The stored answer of an earlier mutation, and the document that holds it. */
  public async findMutation<T extends IStoredDocument>(
    kindArg: IDocumentKind<T>,
    mutationIdArg: string,
  ): Promise<{ doc: T; answer: unknown } | null> {
    const filter = { 'mutations.mutationId': mutationIdArg };
    const direct = await this.direct.find(kindArg.collectionName, filter, { projection: { exclude: ['_id'] }, limit: 1 });
    const doc = direct ? (direct[0] as TStoredShape | undefined) ?? null : await this.collection(kindArg).findOne(filter as Filter<TStoredShape>);
    if (!doc) {
      return null;
    }
    const record = (doc.mutations ?? []).find((mutation) => mutation.mutationId === mutationIdArg);
    return record ? { doc: stripStoredFields<T>(doc) as T, answer: record.answer } : null;
  }
}
