import { MongoBulkWriteError, MongoServerError, type Collection, type Document, type ObjectId } from 'mongodb';
import type { DirectWriter } from './directwrite.js';

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
 * (`updateOne`). Inserts are collected until the event loop has handled what is ready now, and,
 * while a command of the same collection is still out (deciding, or waiting for the journal),
 * until it comes back: a group commit, as a database gathers the next group while one syncs. An
 * insert into an idle collection goes at once as before; under a storm the batches grow with the
 * load instead of shrinking with it: each registration of a reconnect storm ends at its own moment,
 * and without the wait its creates went alone (docs/storage.md, "Reads and creates sent together").
 */

const isDuplicateKeyCode = (codeArg: unknown): boolean => codeArg === 11000;

/**
 * One statement's failure, as the driver reports a lone write's: a server error with the code, so
 * a journal that refuses writes reads as the database unavailable, not as an internal error.
 */
const statementError = (codeArg: unknown, messageArg: string | undefined): MongoServerError =>
  new MongoServerError({ message: messageArg ?? 'insert failed', errmsg: messageArg ?? 'insert failed', code: codeArg as number });

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
  /** Hands the commands to the embedded server in the process (directwrite.ts) while it can. */
  public direct: DirectWriter | null = null;
  private readonly pending = new Map<string, { collection: Collection<Document>; inserts: IPendingInsert[] }>();
  /** Commands out, by collection: the collection's next batch waits for them. */
  private readonly outstanding = new Map<string, number>();
  private flushScheduled = false;

  constructor(private readonly maximumStatements = maximumInsertStatements) {}

  /**
   * Creates `docArg` under `objectIdArg` unless that `_id` exists: true when this call created it.
   * `now`: sent at once, not with the inserts of this turn (a write's audit event, sent while the
   * write waits for the journal so the two share a sync).
   */
  public insertIfAbsent(collectionArg: Collection<Document>, objectIdArg: ObjectId, docArg: Document, optionsArg: { now?: boolean } = {}): Promise<boolean> {
    this.inserts++;
    if (!this.enabled || optionsArg.now) {
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
      // A full batch goes whether or not one is out.
      this.pending.delete(key);
      void this.sendBatch(key, batch.collection, batch.inserts);
    } else {
      this.scheduleFlush();
    }
    return answer;
  }

  /** Sends, once the event loop has handled what is ready now, every batch whose collection has no command out. */
  private scheduleFlush(): void {
    if (this.flushScheduled) {
      return;
    }
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      for (const [key, pendingBatch] of [...this.pending]) {
        if (!this.outstanding.has(key)) {
          this.pending.delete(key);
          void this.sendBatch(key, pendingBatch.collection, pendingBatch.inserts);
        }
      }
    });
  }

  /** One batch's command; when it is back, the batch gathered meanwhile goes. */
  private async sendBatch(keyArg: string, collectionArg: Collection<Document>, insertsArg: IPendingInsert[]): Promise<void> {
    this.outstanding.set(keyArg, (this.outstanding.get(keyArg) ?? 0) + 1);
    try {
      await this.send(collectionArg, insertsArg);
    } finally {
      const left = this.outstanding.get(keyArg)! - 1;
      if (left === 0) {
        this.outstanding.delete(keyArg);
      } else {
        this.outstanding.set(keyArg, left);
      }
      if (left === 0 && this.pending.has(keyArg)) {
        this.scheduleFlush();
      }
    }
  }

  private async insertOne(collectionArg: Collection<Document>, objectIdArg: ObjectId, docArg: Document): Promise<boolean> {
    const direct = await this.sendDirect(collectionArg, [{ objectId: objectIdArg, doc: docArg }]);
    if (direct) {
      const [outcome] = direct;
      if (outcome instanceof Error) {
        throw outcome;
      }
      return outcome;
    }
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
    let outcomes: Array<boolean | Error>;
    try {
      outcomes = (await this.sendDirect(collectionArg, insertsArg)) ?? (await this.sendThroughDriver(collectionArg, insertsArg));
    } catch (error) {
      // Nothing says which statements took effect: each caller learns the command failed.
      for (const insert of insertsArg) {
        insert.reject(error);
      }
      return;
    }
    for (const [index, insert] of insertsArg.entries()) {
      const outcome = outcomes[index];
      if (outcome instanceof Error) {
        insert.reject(outcome);
      } else {
        insert.resolve(outcome);
      }
    }
  }

  /**
   * The unordered upserts as one `bulkWrite`: per insert, whether it created the document (false:
   * the id existed), or the error of its own statement. Throws when no statement's outcome is known.
   */
  private async sendThroughDriver(collectionArg: Collection<Document>, insertsArg: Array<{ objectId: ObjectId; doc: Document }>): Promise<Array<boolean | Error>> {
    let inserted: Record<number, unknown>;
    const failed = new Map<number, Error | null>();
    try {
      const result = await collectionArg.bulkWrite(
        insertsArg.map((insert) => ({ updateOne: { filter: { _id: insert.objectId }, update: { $setOnInsert: insert.doc }, upsert: true } })),
        { ordered: false },
      );
      inserted = result.upsertedIds;
    } catch (error) {
      const writeErrors = error instanceof MongoBulkWriteError ? [error.writeErrors].flat() as Array<{ index: number; code: unknown; errmsg?: string }> : [];
      if (!(error instanceof MongoBulkWriteError) || writeErrors.length === 0 || error.writeConcernError) {
        throw error;
      }
      inserted = error.result.upsertedIds;
      for (const writeError of writeErrors) {
        failed.set(writeError.index, isDuplicateKeyCode(writeError.code) ? null : statementError(writeError.code, writeError.errmsg));
      }
    }
    return insertsArg.map((_insert, index) => failed.get(index) ?? index in inserted);
  }

  /**
   * The same unordered upserts, handed to the embedded server in the process, with the same
   * outcomes; null when the driver must send them (not embedded, or turned off). Throws when the
   * command as a whole was refused.
   */
  private async sendDirect(collectionArg: Collection<Document>, insertsArg: Array<{ objectId: ObjectId; doc: Document }>): Promise<Array<boolean | Error> | null> {
    const outcome = await this.direct?.update(collectionArg.collectionName, insertsArg.map((insert) => ({
      q: { _id: insert.objectId },
      u: { $setOnInsert: insert.doc },
      upsert: true,
    })));
    if (!outcome) {
      return null;
    }
    return insertsArg.map((_insert, index) => {
      const failure = outcome.writeErrors.get(index);
      if (!failure) {
        return outcome.upserted.has(index);
      }
      return isDuplicateKeyCode(failure.code) ? false : statementError(failure.code, failure.errmsg);
    });
  }
}
