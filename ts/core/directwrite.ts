import { BSON, MongoServerError, ObjectId, type Document } from 'mongodb';
import { bson as serverBson } from '@push.rocks/smartmongo/dist_ts/congodb/congodb.plugins.js';
import { copyPlainValue, notPlain } from './directread.js';

/**
 * The store's writes to the embedded database without the database protocol: the same commands
 * the driver would send (`findAndModify`, `update`, `delete`), handed to the embedded server's
 * command router in this process instead of its socket (docs/storage.md, "Writes in the process").
 *
 * The router is the one the socket serves (database.ts): the same handlers decide every write on
 * the same storage in the same turn, so a compare-and-swap is decided exactly as before, and no
 * answer comes back before every journal record appended until then is on the device. What goes
 * away is the driver's work around the command (its options, sessions, server selection and
 * cursor), the socket, and one of the two encodings each way.
 *
 * What the server is given is what it would have decoded: the command is copied as the server's
 * own bson would decode the driver's encoding of it (`asServerValue`; anything beyond plain values
 * is encoded and decoded once), so `undefined` becomes null as the driver encodes it, values are
 * copies no caller can change afterwards, and every value has the server's classes. What comes
 * back is copied out of the server's memory: plain values directly, anything else (an ObjectId or
 * Binary below the top level) through one encoding with the driver's bson, so callers get the
 * driver's classes exactly as an answer over the socket gives them.
 *
 * Only for the embedded database: with MONGODB_URL, or turned off, every write goes through the
 * driver and each method here answers `undefined`.
 */

/**
 * The embedded server's command router for commands from this process (database.ts). `decidedArg`
 * is called with the answer as soon as the command has decided, before the journal is waited for.
 */
export type TCommandRoute = (
  commandArg: { commandName: string; database: string; command: Document },
  decidedArg?: (answerArg: Document) => void,
) => Promise<Document>;

export interface IDirectWriteSource {
  route: TCommandRoute;
  database: string;
}

/** One statement of an unordered `update` command, as the driver's `bulkWrite` sends it. */
export interface IUpdateStatement {
  q: Document;
  u: Document;
  upsert?: boolean;
}

/** The per-statement outcome of an `update` command. */
export interface IUpdateOutcome {
  /** Indexes of the statements that inserted a document. */
  upserted: Set<number>;
  /** Statements that failed, by index, with the server's code and message. */
  writeErrors: Map<number, { code: unknown; errmsg: string }>;
}

/** A value out of the server's memory, copied with the classes the driver's decoding gives. */
const asCallerValue = (valueArg: Document): Document => {
  const copy: Document = {};
  for (const key of Object.keys(valueArg)) {
    const value: unknown = valueArg[key];
    if (key === '_id' && value !== null && typeof value === 'object' && (value as { _bsontype?: unknown })._bsontype === 'ObjectId') {
      copy._id = new ObjectId((value as { toHexString(): string }).toHexString());
      continue;
    }
    const item = copyPlainValue(value);
    if (item === notPlain) {
      return BSON.deserialize(serverBson.serialize(valueArg));
    }
    copy[key] = item;
  }
  return copy;
};

/** No lone surrogate (which UTF-8 encoding replaces): Node 20's String.prototype.isWellFormed. */
const isWellFormed = (textArg: string): boolean => (textArg as unknown as { isWellFormed(): boolean }).isWellFormed();

/**
 * A command as the server's bson would decode it after the driver's encoding, copied without
 * encoding it: plain objects and arrays copied, `undefined` (and an array's hole) as null, a valid
 * Date as a new Date, an ObjectId as the server's class; `notPlain` for anything whose encoding
 * does more (another class, a function, a lone surrogate the encoding replaces, a key the encoding
 * refuses or defines as an own `__proto__`), which then takes the encoding. Held to the encoding
 * on random commands in test/foundation.directwrite.test.ts.
 */
export const asServerValue = (valueArg: unknown): unknown => {
  if (valueArg === undefined || valueArg === null) {
    return null;
  }
  switch (typeof valueArg) {
    case 'string':
      return isWellFormed(valueArg) ? valueArg : notPlain;
    case 'number':
    case 'boolean':
      return valueArg;
    case 'object':
      break;
    default:
      return notPlain;
  }
  if (Array.isArray(valueArg)) {
    const copy = new Array<unknown>(valueArg.length);
    for (let index = 0; index < valueArg.length; index++) {
      const item = asServerValue(valueArg[index]);
      if (item === notPlain) {
        return notPlain;
      }
      copy[index] = item;
    }
    return copy;
  }
  const prototype = Object.getPrototypeOf(valueArg);
  if (prototype !== Object.prototype && prototype !== null) {
    if (valueArg instanceof Date) {
      return Number.isNaN(valueArg.getTime()) ? notPlain : new Date(valueArg.getTime());
    }
    if ((valueArg as { _bsontype?: unknown })._bsontype === 'ObjectId' && typeof (valueArg as { toHexString?: unknown }).toHexString === 'function') {
      return new serverBson.ObjectId((valueArg as { toHexString(): string }).toHexString());
    }
    return notPlain;
  }
  const copy: Document = {};
  for (const key of Object.keys(valueArg)) {
    if (key === '__proto__' || key.includes('\u0000') || !isWellFormed(key)) {
      return notPlain;
    }
    const item = asServerValue((valueArg as Record<string, unknown>)[key]);
    if (item === notPlain) {
      return notPlain;
    }
    copy[key] = item;
  }
  return copy;
};

/** The command as the server decodes the driver's encoding of it: copied, or encoded and decoded when it holds more than plain values. */
const asServerCommand = (commandArg: Document): Document => {
  const copy = asServerValue(commandArg);
  return copy === notPlain ? serverBson.deserialize(serverBson.serialize(commandArg, { ignoreUndefined: false })) : copy as Document;
};

export class DirectWriter {
  /** Off: every write goes through the driver (the benches' baseline). */
  public enabled = true;
  /** Commands handed to the router in the process. */
  public commands = 0;

  constructor(private readonly source: () => IDirectWriteSource | null) {}

  /** Runs one command as the server would have decoded it; undefined when the driver must send it. */
  private async run(commandNameArg: string, commandArg: Document, decidedArg?: (answerArg: Document) => void): Promise<Document | undefined> {
    const source = this.enabled ? this.source() : null;
    if (!source) {
      return undefined;
    }
    const command = asServerCommand(commandArg);
    this.commands += 1;
    const answer = await source.route({ commandName: commandNameArg, database: source.database, command }, decidedArg);
    if (answer.ok !== 1) {
      // What the driver throws for a command the server refused.
      throw new MongoServerError(answer as ConstructorParameters<typeof MongoServerError>[0]);
    }
    return answer;
  }

  /**
   * `findOneAndUpdate(filter, update, { returnDocument: 'after', projection })`: the document after
   * the update, null when none matched, undefined when the driver must send it. `updated` gets
   * the updated document as soon as the update is decided, before it is durable: a write it
   * starts then (the change's audit event) is journaled in the same sync.
   */
  public async findOneAndUpdate(
    collectionArg: string,
    filterArg: Document,
    updateArg: Document,
    optionsArg: { projection?: Document; updated?: (afterArg: Document) => void } = {},
  ): Promise<Document | null | undefined> {
    const command: Document = { findAndModify: collectionArg, query: filterArg, update: updateArg, new: true };
    if (optionsArg.projection) {
      command.fields = optionsArg.projection;
    }
    let after: Document | null = null;
    const answer = await this.run('findAndModify', command, (decidedArg) => {
      const value = decidedArg.ok === 1 ? decidedArg.value as Document | null | undefined : null;
      if (value) {
        // Copied at once: the stored document may change again before the journal answers.
        after = asCallerValue(value);
        optionsArg.updated?.(after);
      }
    });
    return answer === undefined ? undefined : after;
  }

  /** An unordered `update` command: each statement's outcome, or undefined when the driver must send it. */
  public async update(collectionArg: string, statementsArg: IUpdateStatement[]): Promise<IUpdateOutcome | undefined> {
    const answer = await this.run('update', { update: collectionArg, updates: statementsArg, ordered: false });
    if (answer === undefined) {
      return undefined;
    }
    const upserted = new Set(((answer.upserted ?? []) as Array<{ index: number }>).map((entry) => entry.index));
    const writeErrors = new Map(((answer.writeErrors ?? []) as Array<{ index: number; code: unknown; errmsg?: string }>)
      .map((entry) => [entry.index, { code: entry.code, errmsg: entry.errmsg ?? 'write failed' }]));
    return { upserted, writeErrors };
  }

  /** `deleteOne(filter)`: how many were deleted (0 or 1), undefined when the driver must send it. */
  public async deleteOne(collectionArg: string, filterArg: Document): Promise<number | undefined> {
    const answer = await this.run('delete', { delete: collectionArg, deletes: [{ q: filterArg, limit: 1 }], ordered: true });
    if (answer === undefined) {
      return undefined;
    }
    const [failure] = (answer.writeErrors ?? []) as Array<{ code: unknown; errmsg?: string }>;
    if (failure) {
      throw new MongoServerError({ message: failure.errmsg ?? 'delete failed', errmsg: failure.errmsg ?? 'delete failed', code: failure.code as number });
    }
    return Number(answer.n ?? 0);
  }
}
