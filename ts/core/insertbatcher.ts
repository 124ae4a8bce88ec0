import { MongoBulkWriteError, type Collection, type Document, type ObjectId } from 'mongodb';

/**
 * Coalesces the store's create-once writes (`insert`: an upsert of `$setOnInsert` on an `_id`
 * derived from the id) into one database command per collection, like ./readbatcher.ts does for
 * reads. Every change to an audited document appends its audit event this way, so a thousand
 * relays registering at once append a thousand events: sent together they cost one `update`
 * command with many statements instead of a thousand commands.
 *
 * Each statement keeps its own outcome: the command is unordered, its answer names by index the
 * statements that inserted, and a duplicate-key error names the ones whose id already existed;
 * any other error fails only its own statement's caller. A lone insert is sent exactly as before
 * (`updateOne`). Inserts are collected until the event loop has handled what is ready now.
 */

const isDuplicateKeyCode = (codeArg: unknown): boolean => codeArg === 11000;

/**
 * Statements per command. The embedded server filters a command's candidates once per statement,
 * so a command costs the square of its statements; 64 keeps that small and still sends a storm's
 * creates in a few commands (docs/storage.md).
 */
export const maximumInsertStatements = 64;

interface IPendingInsert {
  objectId: ObjectId;
  doc: Document;
  resolve: (insertedArg: boolean) => void;
  reject: (errorArg: unknown) => void;
}

export class InsertBatcher {
  /** Off: every insert is its own command (the benches' baseline). */
  public enabled = true;
  /** Commands sent for inserts, and inserts carried by them. */
  public commands = 0;
  public inserts = 0;
  private readonly pending = new Map<string, { collection: Collection<Document>; inserts: IPendingInsert[] }>();
  private flushScheduled = false;

  constructor(private readonly maximumStatements = maximumInsertStatements) {}

  /** Creates `docArg` under `objectIdArg` unless that `_id` exists: true when this call created it. */
  public insertIfAbsent(collectionArg: Collection<Document>, objectIdArg: ObjectId, docArg: Document): Promise<boolean> {
    this.inserts++;
    if (!this.enabled) {
      this.commands++;
      return this.insertOne(collectionArg, objectIdArg, docArg);
    }
    const key = `${collectionArg.dbName}\u0000${collectionArg.collectionName}`;
    let batch = this.pending.get(key);
    if (!batch) {
      batch = { collection: collectionArg, inserts: [] };
      this.pending.set(key, batch);
    }
    const answer = new Promise<boolean>((resolve, reject) => {
      batch.inserts.push({ objectId: objectIdArg, doc: docArg, resolve, reject });
    });
    if (batch.inserts.length >= this.maximumStatements) {
      this.pending.delete(key);
      void this.send(batch.collection, batch.inserts);
    } else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => {
        this.flushScheduled = false;
        const batches = [...this.pending.values()];
        this.pending.clear();
        for (const pendingBatch of batches) {
          void this.send(pendingBatch.collection, pendingBatch.inserts);
        }
      });
    }
    return answer;
  }

  private async insertOne(collectionArg: Collection<Document>, objectIdArg: ObjectId, docArg: Document): Promise<boolean> {
    try {
      const result = await collectionArg.updateOne({ _id: objectIdArg }, { $setOnInsert: docArg }, { upsert: true });
      return result.upsertedCount === 1;
    } catch (error) {
      if (isDuplicateKeyCode((error as { code?: unknown }).code)) {
        return false;
      }
      throw error;
    }
  }

  private async send(collectionArg: Collection<Document>, insertsArg: IPendingInsert[]): Promise<void> {
    this.commands++;
    if (insertsArg.length === 1) {
      const [only] = insertsArg;
      await this.insertOne(collectionArg, only.objectId, only.doc).then(only.resolve, only.reject);
      return;
    }
    let inserted: Record<number, unknown>;
    const failed = new Map<number, unknown>();
    try {
      const result = await collectionArg.bulkWrite(
        insertsArg.map((insert) => ({ updateOne: { filter: { _id: insert.objectId }, update: { $setOnInsert: insert.doc }, upsert: true } })),
        { ordered: false },
      );
      inserted = result.upsertedIds;
    } catch (error) {
      const writeErrors = error instanceof MongoBulkWriteError ? [error.writeErrors].flat() as Array<{ index: number; code: unknown; errmsg?: string }> : [];
      if (!(error instanceof MongoBulkWriteError) || writeErrors.length === 0 || error.writeConcernError) {
        // Nothing says which statements took effect: each caller learns the command failed.
        for (const insert of insertsArg) {
          insert.reject(error);
        }
        return;
      }
      inserted = error.result.upsertedIds;
      for (const writeError of writeErrors) {
        failed.set(writeError.index, isDuplicateKeyCode(writeError.code) ? null : Object.assign(new Error(writeError.errmsg ?? 'insert failed'), { code: writeError.code }));
      }
    }
    for (const [index, insert] of insertsArg.entries()) {
      const failure = failed.get(index);
      if (failure) {
        insert.reject(failure);
      } else {
        insert.resolve(index in inserted);
      }
    }
  }
}
