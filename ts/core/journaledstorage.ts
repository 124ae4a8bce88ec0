import { ObjectId, type Document } from 'mongodb';
import type { IStorageAdapter } from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import { JournalUnavailableError, type Journal } from './journal.js';
import { CollectionIndex, currentFiltersFor } from './storageindex.js';

/**
 * The embedded server's storage: documents in memory, every change journaled. It replaces the
 * CongoDB server's own memory adapter, so every write path (the store, auth, smartdata, leases)
 * passes through it and none can bypass the journal.
 *
 * Each change is applied in memory synchronously, in the same turn in which the server's handler
 * read the documents it decided on; that keeps a filtered update (compare-and-swap) atomic, as it
 * is in CongoDB's own memory adapter. The record is appended in that same turn, so the journal's
 * order is the order of the changes. The server sends no answer (to a write or a read) before
 * every record appended until then is on the device (database.ts wraps its command router), so
 * no client ever sees a change that a crash could take back, and a command that writes many
 * documents shares one sync. If a sync fails, the changes are rolled back and every command
 * waiting on them is refused.
 */

export interface IIndexSpec {
  name: string;
  key: Record<string, unknown>;
  unique?: boolean;
  sparse?: boolean;
  expireAfterSeconds?: number;
}

type TCollection = Map<string, Document>;

export interface ICapturedCollection {
  db: string;
  name: string;
  docs: Document[];
  indexes: IIndexSpec[];
}

/** Below this many documents a scan costs less than keeping an index. */
const minimumIndexedCollection = 32;

/** The journal operation of a marker that stands for a record lost to damage (storagerecover.ts). */
export const lostRecordOp = 'lost';

const defaultIndexes = (): IIndexSpec[] => [{ name: '_id_', key: { _id: 1 }, unique: true }];

const copyIndexes = (indexesArg: IIndexSpec[]): IIndexSpec[] => indexesArg.map((index) => ({ ...index, key: { ...index.key } }));

/**
 * True when `bytesArg` is a view on a larger memory block than its own bytes. bson takes the
 * 12 bytes of every ObjectId it makes or reads from node's shared 8 KiB Buffer pool, and a Binary
 * it reads is a view on the whole wire message; a document kept in memory would pin that block.
 */
const sharesItsBlock = (bytesArg: Uint8Array): boolean => bytesArg.byteOffset !== 0 || bytesArg.buffer.byteLength !== bytesArg.byteLength;

/** The same bytes in a block of their own. */
const ownBytes = (bytesArg: Uint8Array): Uint8Array => {
  const own = new Uint8Array(bytesArg.byteLength);
  own.set(bytesArg);
  return own;
};

/**
 * bson's values are told apart by `_bsontype`, not by class: the driver loads bson's CommonJS
 * build and CongoDB its ES module build, two classes of each type.
 */
type TBsonBytesValue =
  | { _bsontype: 'ObjectId'; id: Uint8Array; constructor: new (bytesArg: Uint8Array) => unknown }
  | { _bsontype: 'Binary'; buffer: Uint8Array; position: number; sub_type: number; constructor: new (bytesArg: Uint8Array, subTypeArg: number) => unknown };

/**
 * The value with every ObjectId and Binary in it moved onto memory of its own, changed in place
 * (an equal value of the same class, so nothing a reader sees changes): a document kept in memory
 * then holds its own few bytes, not a shared block each (docs/storage.md, "Memory").
 */
export const withOwnBytes = <T>(valueArg: T): T => {
  if (valueArg === null || typeof valueArg !== 'object') {
    return valueArg;
  }
  const bsonValue = valueArg as unknown as TBsonBytesValue;
  if (bsonValue._bsontype === 'ObjectId') {
    return (sharesItsBlock(bsonValue.id) ? new bsonValue.constructor(ownBytes(bsonValue.id)) : valueArg) as T;
  }
  if (bsonValue._bsontype === 'Binary') {
    const bytes = bsonValue.buffer.subarray(0, bsonValue.position);
    return (sharesItsBlock(bytes) ? new bsonValue.constructor(ownBytes(bytes), bsonValue.sub_type) : valueArg) as T;
  }
  if (Array.isArray(valueArg)) {
    for (let index = 0; index < valueArg.length; index++) {
      const value: unknown = valueArg[index];
      if (value !== null && typeof value === 'object') {
        valueArg[index] = withOwnBytes(value);
      }
    }
    return valueArg;
  }
  const prototype: unknown = Object.getPrototypeOf(valueArg);
  if (prototype !== Object.prototype && prototype !== null) {
    return valueArg;
  }
  const record = valueArg as Record<string, unknown>;
  for (const key in record) {
    const value = record[key];
    if (value !== null && typeof value === 'object') {
      record[key] = withOwnBytes(value);
    }
  }
  return valueArg;
};

const hexOf = (idArg: unknown): string => (idArg instanceof ObjectId ? idArg.toHexString() : new ObjectId(idArg as string).toHexString());

export class JournaledStorage implements IStorageAdapter {
  private readonly databases = new Map<string, Map<string, TCollection>>();
  private readonly indexes = new Map<string, Map<string, IIndexSpec[]>>();
  /** Equality indexes of the collections a narrowable read has asked about (storageindex.ts). */
  private readonly collectionIndexes = new WeakMap<TCollection, CollectionIndex>();
  /** Reads answered from an index instead of the whole collection (for tests and benchmarks). */
  public narrowedReads = 0;
  /** Bench-only: false answers every read from the whole collection, as before the index existed. */
  public equalityIndex = true;
  private opLog: Array<{ ts: { toNumber(): number; greaterThan(other: unknown): boolean }; ns: string; o: Document; o2?: Document }> = [];

  constructor(private readonly journal: Journal) {}

  public async initialize(): Promise<void> {}

  public async close(): Promise<void> {}

  // ------------------------------------------------------------------ journaling

  /**
   * Runs `applyArg` (which returns its undo) and appends `recordArg`. Durability is awaited where
   * the server answers, for every change of the command at once.
   */
  private commit(recordArg: Document, applyArg: () => () => void): void {
    this.journal.assertWritable();
    const undo = applyArg();
    void this.journal.append(recordArg, undo);
  }

  /** Applies one journal record during recovery (no journaling, no undo). */
  public replay(recordArg: Document): void {
    const { db, coll } = recordArg as { db: string; coll: string };
    switch (recordArg.op) {
      case 'cd': this.applyCreateDatabase(db); break;
      case 'dd': this.applyDropDatabase(db); break;
      case 'cc': this.applyCreateCollection(db, coll); break;
      case 'dc': this.applyDropCollection(db, coll); break;
      case 'rc': this.applyRenameCollection(db, coll, recordArg.to as string); break;
      case 'i': for (const doc of recordArg.docs as Document[]) { this.applyInsert(db, coll, doc, true); } break;
      // A live update is journaled only when its document exists, so in an intact journal this is
      // a replace. After a record skipped by `cloudly storage recover --skip-damaged` the document
      // may be missing; the record holds the whole document, so it is stored as it was then.
      case 'u': this.applyReplace(db, coll, recordArg.doc as Document, true); break;
      // What `cloudly storage recover --skip-damaged` left in place of an unreadable record.
      case lostRecordOp: break;
      case 'd': this.applyDelete(db, coll, (recordArg.ids as ObjectId[]).map(hexOf)); break;
      case 'si': this.applySaveIndex(db, coll, recordArg.index as IIndexSpec); break;
      case 'di': this.applyDropIndex(db, coll, recordArg.name as string); break;
      default: throw new Error(`unknown journal operation ${String(recordArg.op)}`);
    }
  }

  // ------------------------------------------------------------------ snapshots

  /**
   * Every collection as it is at this instant: arrays of the stored document objects (a change
   * replaces a stored object, never edits it, so the arrays stay this point in time), taken
   * synchronously so no write is half in it.
   */
  public capture(): ICapturedCollection[] {
    const result: ICapturedCollection[] = [];
    for (const [db, collections] of this.databases) {
      for (const [name, docs] of collections) {
        result.push({ db, name, docs: Array.from(docs.values()), indexes: copyIndexes(this.indexes.get(db)?.get(name) ?? defaultIndexes()) });
      }
    }
    return result;
  }

  /** Loads one collection of a snapshot (recovery only). */
  public load(dbArg: string, collArg: string, docsArg: Document[], indexesArg: IIndexSpec[] | null): void {
    const collection = this.ensureCollection(dbArg, collArg);
    for (const doc of docsArg) {
      this.setDoc(collection, hexOf(doc._id), withOwnBytes(doc));
    }
    if (indexesArg) {
      this.indexes.get(dbArg)!.set(collArg, copyIndexes(indexesArg));
    }
  }

  public documentCount(): number {
    let count = 0;
    for (const collections of this.databases.values()) {
      for (const docs of collections.values()) {
        count += docs.size;
      }
    }
    return count;
  }

  // ------------------------------------------------------------------ in-memory changes

  /** Every change of a collection's documents goes through these two, so its index stays exact. */
  private setDoc(collectionArg: TCollection, hexArg: string, docArg: Document): void {
    const previous = collectionArg.get(hexArg);
    collectionArg.set(hexArg, docArg);
    this.collectionIndexes.get(collectionArg)?.onSet(hexArg, previous, docArg);
  }

  private deleteDoc(collectionArg: TCollection, hexArg: string): void {
    const doc = collectionArg.get(hexArg);
    if (doc === undefined) {
      return;
    }
    collectionArg.delete(hexArg);
    this.collectionIndexes.get(collectionArg)?.onDelete(hexArg, doc);
  }

  private ensureCollection(dbArg: string, collArg: string): TCollection {
    this.applyCreateDatabase(dbArg);
    this.applyCreateCollection(dbArg, collArg);
    return this.databases.get(dbArg)!.get(collArg)!;
  }

  private applyCreateDatabase(dbArg: string): () => void {
    if (this.databases.has(dbArg)) {
      return () => undefined;
    }
    this.databases.set(dbArg, new Map());
    this.indexes.set(dbArg, new Map());
    return () => {
      this.databases.delete(dbArg);
      this.indexes.delete(dbArg);
    };
  }

  private applyDropDatabase(dbArg: string): () => void {
    const collections = this.databases.get(dbArg);
    const indexes = this.indexes.get(dbArg);
    this.databases.delete(dbArg);
    this.indexes.delete(dbArg);
    return () => {
      if (collections) {
        this.databases.set(dbArg, collections);
        this.indexes.set(dbArg, indexes ?? new Map());
      }
    };
  }

  private applyCreateCollection(dbArg: string, collArg: string): () => void {
    const undoDatabase = this.applyCreateDatabase(dbArg);
    const db = this.databases.get(dbArg)!;
    if (db.has(collArg)) {
      return undoDatabase;
    }
    db.set(collArg, new Map());
    this.indexes.get(dbArg)!.set(collArg, defaultIndexes());
    return () => {
      db.delete(collArg);
      this.indexes.get(dbArg)?.delete(collArg);
      undoDatabase();
    };
  }

  private applyDropCollection(dbArg: string, collArg: string): () => void {
    const db = this.databases.get(dbArg);
    const docs = db?.get(collArg);
    const indexes = this.indexes.get(dbArg)?.get(collArg);
    db?.delete(collArg);
    this.indexes.get(dbArg)?.delete(collArg);
    return () => {
      if (db && docs) {
        db.set(collArg, docs);
        this.indexes.get(dbArg)?.set(collArg, indexes ?? defaultIndexes());
      }
    };
  }

  private applyRenameCollection(dbArg: string, fromArg: string, toArg: string): () => void {
    const db = this.databases.get(dbArg);
    const docs = db?.get(fromArg);
    if (!db || !docs) {
      throw new Error(`Collection ${fromArg} not found`);
    }
    const dbIndexes = this.indexes.get(dbArg)!;
    const replacedDocs = db.get(toArg);
    const replacedIndexes = dbIndexes.get(toArg);
    const indexes = dbIndexes.get(fromArg);
    db.set(toArg, docs);
    db.delete(fromArg);
    if (indexes) {
      dbIndexes.set(toArg, indexes);
      dbIndexes.delete(fromArg);
    }
    return () => {
      db.set(fromArg, docs);
      if (replacedDocs) {
        db.set(toArg, replacedDocs);
      } else {
        db.delete(toArg);
      }
      if (indexes) {
        dbIndexes.set(fromArg, indexes);
      }
      if (replacedIndexes) {
        dbIndexes.set(toArg, replacedIndexes);
      } else if (indexes) {
        dbIndexes.delete(toArg);
      }
    };
  }

  /** Inserts; throws (changing nothing) on a duplicate `_id` unless replaying. */
  private applyInsert(dbArg: string, collArg: string, docArg: Document, replayingArg = false): () => void {
    const undoCollection = this.applyCreateCollection(dbArg, collArg);
    const collection = this.databases.get(dbArg)!.get(collArg)!;
    const id = hexOf(docArg._id);
    if (collection.has(id) && !replayingArg) {
      undoCollection();
      throw Object.assign(new Error(`Duplicate key error: _id ${id}`), { code: 11000 });
    }
    this.setDoc(collection, id, withOwnBytes(docArg));
    return () => {
      this.deleteDoc(collection, id);
      undoCollection();
    };
  }

  private applyReplace(dbArg: string, collArg: string, docArg: Document, replayingArg = false): () => void {
    const collection = this.databases.get(dbArg)?.get(collArg);
    const id = hexOf(docArg._id);
    const previous = collection?.get(id);
    if (replayingArg && !previous) {
      return this.applyInsert(dbArg, collArg, docArg, true);
    }
    if (!collection || !previous) {
      return () => undefined;
    }
    this.setDoc(collection, id, withOwnBytes(docArg));
    return () => {
      this.setDoc(collection, id, previous);
    };
  }

  private applyDelete(dbArg: string, collArg: string, idsArg: string[]): () => void {
    const collection = this.databases.get(dbArg)?.get(collArg);
    const removed: Array<[string, Document]> = [];
    for (const id of idsArg) {
      const doc = collection?.get(id);
      if (collection && doc) {
        this.deleteDoc(collection, id);
        removed.push([id, doc]);
      }
    }
    return () => {
      for (const [id, doc] of removed) {
        this.setDoc(collection!, id, doc);
      }
    };
  }

  private applySaveIndex(dbArg: string, collArg: string, indexArg: IIndexSpec): () => void {
    const undoCollection = this.applyCreateCollection(dbArg, collArg);
    const dbIndexes = this.indexes.get(dbArg)!;
    const previous = dbIndexes.get(collArg);
    const next = copyIndexes(previous ?? defaultIndexes());
    const at = next.findIndex((index) => index.name === indexArg.name);
    if (at >= 0) {
      next[at] = { ...indexArg };
    } else {
      next.push({ ...indexArg });
    }
    dbIndexes.set(collArg, next);
    return () => {
      if (previous) {
        dbIndexes.set(collArg, previous);
      }
      undoCollection();
    };
  }

  private applyDropIndex(dbArg: string, collArg: string, nameArg: string): () => void {
    const dbIndexes = this.indexes.get(dbArg);
    const previous = dbIndexes?.get(collArg);
    if (!dbIndexes || !previous) {
      return () => undefined;
    }
    dbIndexes.set(collArg, previous.filter((index) => index.name !== nameArg));
    return () => {
      dbIndexes.set(collArg, previous);
    };
  }

  // ------------------------------------------------------------------ IStorageAdapter: databases

  public async listDatabases(): Promise<string[]> {
    return Array.from(this.databases.keys());
  }

  public async createDatabase(dbArg: string): Promise<void> {
    if (!this.databases.has(dbArg)) {
      this.commit({ op: 'cd', db: dbArg }, () => this.applyCreateDatabase(dbArg));
    }
  }

  public async dropDatabase(dbArg: string): Promise<boolean> {
    if (!this.databases.has(dbArg)) {
      return false;
    }
    this.commit({ op: 'dd', db: dbArg }, () => this.applyDropDatabase(dbArg));
    return true;
  }

  public async databaseExists(dbArg: string): Promise<boolean> {
    return this.databases.has(dbArg);
  }

  // ------------------------------------------------------------------ collections

  public async listCollections(dbArg: string): Promise<string[]> {
    return Array.from(this.databases.get(dbArg)?.keys() ?? []);
  }

  public async createCollection(dbArg: string, collArg: string): Promise<void> {
    if (!this.databases.get(dbArg)?.has(collArg)) {
      this.commit({ op: 'cc', db: dbArg, coll: collArg }, () => this.applyCreateCollection(dbArg, collArg));
    }
  }

  public async dropCollection(dbArg: string, collArg: string): Promise<boolean> {
    if (!this.databases.get(dbArg)?.has(collArg)) {
      return false;
    }
    this.commit({ op: 'dc', db: dbArg, coll: collArg }, () => this.applyDropCollection(dbArg, collArg));
    return true;
  }

  public async collectionExists(dbArg: string, collArg: string): Promise<boolean> {
    return this.databases.get(dbArg)?.has(collArg) ?? false;
  }

  public async renameCollection(dbArg: string, oldNameArg: string, newNameArg: string): Promise<void> {
    this.commit({ op: 'rc', db: dbArg, coll: oldNameArg, to: newNameArg }, () => this.applyRenameCollection(dbArg, oldNameArg, newNameArg));
  }

  // ------------------------------------------------------------------ documents

  public async insertOne(dbArg: string, collArg: string, docArg: Document): Promise<Document & { _id: ObjectId }> {
    const stored = { ...docArg, _id: docArg._id instanceof ObjectId ? docArg._id : new ObjectId(docArg._id) };
    this.commit({ op: 'i', db: dbArg, coll: collArg, docs: [stored] }, () => this.applyInsert(dbArg, collArg, stored));
    return stored;
  }

  /** All documents in one record; a duplicate stops it there, the earlier ones stay (as before). */
  public async insertMany(dbArg: string, collArg: string, docsArg: Document[]): Promise<Array<Document & { _id: ObjectId }>> {
    this.journal.assertWritable();
    const stored: Array<Document & { _id: ObjectId }> = [];
    const undos: Array<() => void> = [];
    let failure: unknown = null;
    for (const doc of docsArg) {
      const one = { ...doc, _id: doc._id instanceof ObjectId ? doc._id : new ObjectId(doc._id) };
      try {
        undos.push(this.applyInsert(dbArg, collArg, one));
        stored.push(one);
      } catch (error) {
        failure = error;
        break;
      }
    }
    if (stored.length > 0) {
      void this.journal.append({ op: 'i', db: dbArg, coll: collArg, docs: stored }, () => {
        for (const undo of undos.reverse()) {
          undo();
        }
      });
    }
    if (failure) {
      throw failure;
    }
    return stored;
  }

  /**
   * The server's handlers filter what this returns, so a read, update or delete whose filter has a
   * top-level string equality gets only the documents that can match (storageindex.ts).
   */
  public async findAll(dbArg: string, collArg: string): Promise<Array<Document & { _id: ObjectId }>> {
    const collection = this.databases.get(dbArg)?.get(collArg);
    if (!collection) {
      return [];
    }
    const filters = this.equalityIndex && collection.size >= minimumIndexedCollection ? currentFiltersFor(dbArg, collArg) : null;
    if (filters) {
      let index = this.collectionIndexes.get(collection);
      if (!index) {
        index = new CollectionIndex(collection);
        this.collectionIndexes.set(collection, index);
      }
      const narrowed = index.narrow(filters);
      if (narrowed) {
        this.narrowedReads += 1;
        return narrowed as Array<Document & { _id: ObjectId }>;
      }
    }
    return Array.from(collection.values()) as Array<Document & { _id: ObjectId }>;
  }

  public async findById(dbArg: string, collArg: string, idArg: ObjectId): Promise<(Document & { _id: ObjectId }) | null> {
    return (this.databases.get(dbArg)?.get(collArg)?.get(idArg.toHexString()) as (Document & { _id: ObjectId }) | undefined) ?? null;
  }

  public async updateById(dbArg: string, collArg: string, idArg: ObjectId, docArg: Document): Promise<boolean> {
    const collection = this.databases.get(dbArg)?.get(collArg);
    if (!collection?.has(idArg.toHexString())) {
      return false;
    }
    const stored = { ...docArg, _id: idArg };
    this.commit({ op: 'u', db: dbArg, coll: collArg, doc: stored }, () => this.applyReplace(dbArg, collArg, stored));
    return true;
  }

  public async deleteById(dbArg: string, collArg: string, idArg: ObjectId): Promise<boolean> {
    return (await this.deleteByIds(dbArg, collArg, [idArg])) === 1;
  }

  public async deleteByIds(dbArg: string, collArg: string, idsArg: ObjectId[]): Promise<number> {
    const collection = this.databases.get(dbArg)?.get(collArg);
    const present = idsArg.filter((id) => collection?.has(id.toHexString()));
    if (present.length === 0) {
      return 0;
    }
    this.commit({ op: 'd', db: dbArg, coll: collArg, ids: present }, () => this.applyDelete(dbArg, collArg, present.map((id) => id.toHexString())));
    return present.length;
  }

  public async count(dbArg: string, collArg: string): Promise<number> {
    return this.databases.get(dbArg)?.get(collArg)?.size ?? 0;
  }

  // ------------------------------------------------------------------ indexes

  public async saveIndex(dbArg: string, collArg: string, nameArg: string, specArg: Omit<IIndexSpec, 'name'>): Promise<void> {
    const index = { name: nameArg, ...specArg } as IIndexSpec;
    this.commit({ op: 'si', db: dbArg, coll: collArg, index }, () => this.applySaveIndex(dbArg, collArg, index));
  }

  public async getIndexes(dbArg: string, collArg: string): Promise<IIndexSpec[]> {
    return this.indexes.get(dbArg)?.get(collArg) ?? defaultIndexes();
  }

  public async dropIndex(dbArg: string, collArg: string, nameArg: string): Promise<boolean> {
    if (nameArg === '_id_') {
      throw new Error('Cannot drop _id index');
    }
    const present = this.indexes.get(dbArg)?.get(collArg)?.some((index) => index.name === nameArg) ?? false;
    if (!present) {
      return false;
    }
    this.commit({ op: 'di', db: dbArg, coll: collArg, name: nameArg }, () => this.applyDropIndex(dbArg, collArg, nameArg));
    return true;
  }

  // ------------------------------------------------------------------ oplog and transactions
  // CongoDB's transaction engine uses these; Cloudly relies on no transaction (see the design),
  // so they keep CongoDB's in-memory behaviour and are not journaled.

  public async appendOpLog(entryArg: Document): Promise<void> {
    this.opLog.push(entryArg as (typeof this.opLog)[number]);
    if (this.opLog.length > 10_000) {
      this.opLog = this.opLog.slice(-10_000);
    }
  }

  public async getOpLogAfter(tsArg: { toNumber(): number }, limitArg = 1000): Promise<never[]> {
    return this.opLog.filter((entry) => entry.ts.toNumber() > tsArg.toNumber()).slice(0, limitArg) as never[];
  }

  public async getLatestOpLogTimestamp(): Promise<never | null> {
    return (this.opLog.at(-1)?.ts ?? null) as never;
  }

  public async createSnapshot(dbArg: string, collArg: string): Promise<Array<Document & { _id: ObjectId }>> {
    return structuredClone(await this.findAll(dbArg, collArg));
  }

  public async hasConflicts(dbArg: string, collArg: string, idsArg: ObjectId[], snapshotTimeArg: unknown): Promise<boolean> {
    const ns = `${dbArg}.${collArg}`;
    const modified = new Set<string>();
    for (const entry of this.opLog) {
      if (entry.ns === ns && entry.ts.greaterThan(snapshotTimeArg)) {
        for (const id of [entry.o._id, entry.o2?._id]) {
          if (id) {
            modified.add(String(id));
          }
        }
      }
    }
    return idsArg.some((id) => modified.has(String(id)));
  }
}

export { JournalUnavailableError };
