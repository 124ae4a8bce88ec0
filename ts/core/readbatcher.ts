import type { Collection, Document } from 'mongodb';

/**
 * Coalesces point reads into one database command, the way a GraphQL DataLoader does.
 *
 * Every read a manager makes by one field's value (`get` by id, `find` of a cluster's services,
 * `findOne` by a token hash) costs one command, and a command's cost on Cloudly's side is mostly
 * the driver's (building, writing and parsing it), whatever the database does with it. When many
 * such reads of one collection and one field are asked for at once (a thousand relays reconnecting
 * each make the same dozen reads for their own cluster), they are collected until the event loop
 * has handled what is ready now (`setImmediate`), then sent as one `{ field: { $in: [...] } }`
 * read, and its answer is split by value, each group in the order the database answered.
 *
 * What a caller gets is what its own read would have answered at some moment after it asked:
 * the batch is sent after every read in it was asked for, so a caller still reads its own writes.
 * A lone read is sent exactly as it was asked (no `$in`). Only plain equalities on a string are
 * batched; anything with a limit, a projection of its own or another operator is not.
 */

/** The field and value of a filter that is one plain equality on a string (`{ clusterId: 'c1' }`), or null. */
export const batchableEquality = (filterArg: Document): { field: string; value: string } | null => {
  const keys = Object.keys(filterArg);
  if (keys.length !== 1) {
    return null;
  }
  const [field] = keys;
  const value = filterArg[field];
  return typeof value === 'string' && !field.startsWith('$') && !field.includes('.') ? { field, value } : null;
};

/** Whether a stored document's field equals the value as the database compares it (an array equals each element). */
const holds = (docArg: Document, fieldArg: string, valueArg: string): boolean => {
  const held = docArg[fieldArg];
  return held === valueArg || (Array.isArray(held) && held.includes(valueArg));
};

interface IWaiter {
  value: string;
  /** A `findOne`: only the first document of its group. */
  first: boolean;
  resolve: (docsArg: Document[]) => void;
  reject: (errorArg: unknown) => void;
}

interface IBatch {
  collection: Collection<Document>;
  field: string;
  sort: Record<string, 1 | -1> | undefined;
  values: Set<string>;
  waiters: IWaiter[];
}

export interface IReadBatcherOptions {
  /** The projection every read of the store uses. */
  projection: Document;
  /** Distinct values in one command; a batch that reaches it is sent at once. */
  maximumValues?: number;
}

export class ReadBatcher {
  /** Off: every read is sent on its own (the benches' baseline). */
  public enabled = true;
  /** Commands sent for batched reads, and reads answered by them (their ratio is the saving). */
  public commands = 0;
  public reads = 0;
  private readonly pending = new Map<string, IBatch>();
  private flushScheduled = false;
  private readonly maximumValues: number;

  constructor(private readonly options: IReadBatcherOptions) {
    this.maximumValues = options.maximumValues ?? 500;
  }

  /**
   * The documents of `collectionArg` whose `fieldArg` equals `valueArg` (all of them in the
   * database's order, sorted by `sortArg` when given; only the first with `firstArg`).
   */
  public read(
    collectionArg: Collection<Document>,
    fieldArg: string,
    valueArg: string,
    optionsArg: { sort?: Record<string, 1 | -1>; first: boolean },
  ): Promise<Document[]> {
    const sortKey = optionsArg.sort ? JSON.stringify(optionsArg.sort) : '';
    const key = `${collectionArg.dbName}\u0000${collectionArg.collectionName}\u0000${fieldArg}\u0000${sortKey}`;
    let batch = this.pending.get(key);
    if (!batch) {
      batch = { collection: collectionArg, field: fieldArg, sort: optionsArg.sort, values: new Set(), waiters: [] };
      this.pending.set(key, batch);
    }
    const answer = new Promise<Document[]>((resolve, reject) => {
      batch.waiters.push({ value: valueArg, first: optionsArg.first, resolve, reject });
    });
    batch.values.add(valueArg);
    this.reads++;
    if (batch.values.size >= this.maximumValues) {
      this.pending.delete(key);
      void this.send(batch);
    } else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
    return answer;
  }

  private flush(): void {
    this.flushScheduled = false;
    const batches = [...this.pending.values()];
    this.pending.clear();
    for (const batch of batches) {
      void this.send(batch);
    }
  }

  private async send(batchArg: IBatch): Promise<void> {
    this.commands++;
    const values = [...batchArg.values];
    const filter = values.length === 1 ? { [batchArg.field]: values[0] } : { [batchArg.field]: { $in: values } };
    let docs: Document[];
    try {
      let cursor = batchArg.collection.find(filter, { projection: this.options.projection });
      if (batchArg.sort) {
        cursor = cursor.sort(batchArg.sort);
      }
      if (values.length === 1 && batchArg.waiters.every((waiter) => waiter.first)) {
        cursor = cursor.limit(1);
      }
      docs = await cursor.toArray();
    } catch (error) {
      for (const waiter of batchArg.waiters) {
        waiter.reject(error);
      }
      return;
    }
    const groups = new Map<string, Document[]>(values.map((value) => [value, []]));
    for (const doc of docs) {
      for (const value of values.length === 1 ? values : this.valuesHeld(doc, batchArg.field, groups)) {
        groups.get(value)!.push(doc);
      }
    }
    // Two callers of one value each get their own copies: a caller may change what it was given.
    const handedOut = new Set<string>();
    for (const waiter of batchArg.waiters) {
      const group = groups.get(waiter.value)!;
      const mine = waiter.first ? group.slice(0, 1) : group;
      waiter.resolve(handedOut.has(waiter.value) ? mine.map((doc) => structuredClone(doc)) : mine.slice());
      handedOut.add(waiter.value);
    }
  }

  /** The batch's values a document belongs to. */
  private valuesHeld(docArg: Document, fieldArg: string, groupsArg: Map<string, Document[]>): string[] {
    const held = docArg[fieldArg];
    if (typeof held === 'string') {
      return groupsArg.has(held) ? [held] : [];
    }
    return [...groupsArg.keys()].filter((value) => holds(docArg, fieldArg, value));
  }
}
