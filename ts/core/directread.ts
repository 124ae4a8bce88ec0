import type { Document } from 'mongodb';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import './queryengine.js';
import type { JournaledStorage } from './journaledstorage.js';
import { withCommandFilters } from './storageindex.js';

/**
 * Reads of the embedded database without the database protocol: the store's point and list reads
 * answered from the embedded server's own memory (journaledstorage.ts), in this process, by the
 * same steps the server's `find` takes (the equality index's narrowing, the query engine's filter,
 * sort and limit), and copied out so no caller can change what is stored.
 *
 * Through the driver the same read was built and encoded by the driver, written to the server's
 * socket, decoded and answered by the server, encoded again and decoded again by the driver: most
 * of a read's CPU, and with a verdict's or a desired state's dozen reads per change most of what a
 * change cost (docs/storage.md, "Reads in the process"). What a read answers is what the server's
 * `find` would answer at that moment; a caller still reads its own writes, and every write
 * acknowledged before the read began.
 *
 * Only for the embedded database (with MONGODB_URL every read goes to MongoDB), and only for
 * documents of plain values (objects, arrays, strings, numbers, booleans, null, dates). A document
 * holding anything else (an ObjectId or a Binary below the top level) is read through the driver
 * instead, so the caller gets the driver's types exactly as before; `fallbacks` counts those.
 */

/** The store's projections: every field but these (`exclude`), or only these (`include`). */
export type TDirectProjection = { exclude: readonly string[] } | { include: readonly string[] };

export interface IDirectReadOptions {
  projection: TDirectProjection;
  sort?: Record<string, 1 | -1>;
  limit?: number;
}

export const notPlain = Symbol('not a plain value');

/** A deep copy of a stored value, or `notPlain` when it holds a value the driver would decode to a class of its own. */
export const copyPlainValue = (valueArg: unknown): unknown => {
  if (valueArg === null || typeof valueArg !== 'object') {
    return valueArg;
  }
  if (Array.isArray(valueArg)) {
    const copy = new Array<unknown>(valueArg.length);
    for (let index = 0; index < valueArg.length; index++) {
      const item = copyPlainValue(valueArg[index]);
      if (item === notPlain) {
        return notPlain;
      }
      copy[index] = item;
    }
    return copy;
  }
  if (valueArg instanceof Date) {
    return new Date(valueArg.getTime());
  }
  const prototype = Object.getPrototypeOf(valueArg);
  if (prototype !== Object.prototype && prototype !== null) {
    return notPlain;
  }
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(valueArg)) {
    const item = copyPlainValue((valueArg as Record<string, unknown>)[key]);
    if (item === notPlain) {
      return notPlain;
    }
    copy[key] = item;
  }
  return copy;
};

/** A stored document as the projection shows it, copied; `notPlain` as `copyValue`. */
const copyProjected = (docArg: Document, projectionArg: TDirectProjection): Document | typeof notPlain => {
  const copy: Document = {};
  if ('include' in projectionArg) {
    for (const key of projectionArg.include) {
      if (key in docArg) {
        const item = copyPlainValue(docArg[key]);
        if (item === notPlain) {
          return notPlain;
        }
        copy[key] = item;
      }
    }
    return copy;
  }
  for (const key of Object.keys(docArg)) {
    if (projectionArg.exclude.includes(key)) {
      continue;
    }
    const item = copyPlainValue(docArg[key]);
    if (item === notPlain) {
      return notPlain;
    }
    copy[key] = item;
  }
  return copy;
};

/**
 * A filter as the server receives it: the driver encodes `undefined` as null (its default,
 * `ignoreUndefined: false`), so an `undefined` in a filter matches what null matches.
 */
export const asEncodedFilter = (valueArg: unknown): unknown => {
  if (valueArg === undefined) {
    return null;
  }
  if (valueArg === null || typeof valueArg !== 'object') {
    return valueArg;
  }
  if (Array.isArray(valueArg)) {
    return valueArg.map(asEncodedFilter);
  }
  const prototype = Object.getPrototypeOf(valueArg);
  if (prototype !== Object.prototype && prototype !== null) {
    // A RegExp, a Date, an ObjectId: the server decodes each to the same kind of value.
    return valueArg;
  }
  return Object.fromEntries(Object.entries(valueArg).map(([key, value]) => [key, asEncodedFilter(value)]));
};

/** Keys whose top-level fields only plain projections name (no dotted path, no operator). */
const isTopLevelField = (keyArg: string): boolean => !keyArg.includes('.') && !keyArg.startsWith('$');

export class DirectReader {
  /** Off: every read goes through the driver (the batching tests and the benches' baseline). */
  public enabled = true;
  /** Reads answered here, and reads handed to the driver because a document held a non-plain value. */
  public reads = 0;
  public fallbacks = 0;

  constructor(private readonly source: () => { storage: JournaledStorage; database: string } | null) {}

  /**
   * The documents of `collectionArg` matching `filterArg`, projected, sorted and limited as the
   * server's `find` would answer them, copied; null when the driver must answer (not embedded,
   * turned off, or a document that is not plain values).
   */
  public async find(collectionArg: string, filterArg: Document, optionsArg: IDirectReadOptions): Promise<Document[] | null> {
    const source = this.enabled ? this.source() : null;
    if (!source) {
      return null;
    }
    if ('include' in optionsArg.projection && !optionsArg.projection.include.every(isTopLevelField)) {
      return null;
    }
    // One turn of the event loop first, as a database round trip took: a read answered from memory
    // alone would let a loop of reads (a full pass, a poller) keep sockets and timers waiting.
    await new Promise<void>((resolve) => setImmediate(resolve));
    const filter = asEncodedFilter(filterArg) as Document;
    const { storage, database } = source;
    // The same narrowing the server's handlers get for this filter (storageindex.ts).
    const all = await withCommandFilters({ database, collection: collectionArg, filters: [filter] }, () => storage.findAll(database, collectionArg));
    let docs = congodb.QueryEngine.filter(all as never[], filter as never) as unknown as Document[];
    if (optionsArg.sort) {
      docs = congodb.QueryEngine.sort(docs as never[], optionsArg.sort) as unknown as Document[];
    }
    if (optionsArg.limit !== undefined && optionsArg.limit > 0) {
      docs = docs.slice(0, optionsArg.limit);
    }
    const copies: Document[] = new Array(docs.length);
    for (let index = 0; index < docs.length; index++) {
      const copy = copyProjected(docs[index], optionsArg.projection);
      if (copy === notPlain) {
        this.fallbacks += 1;
        return null;
      }
      copies[index] = copy;
    }
    this.reads += 1;
    return copies;
  }
}
