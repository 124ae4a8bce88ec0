import { AsyncLocalStorage } from 'node:async_hooks';
import type { Document } from 'mongodb';

/**
 * Equality indexes for the embedded database's in-memory collections.
 *
 * The embedded server's command handlers ask the storage for every document of a collection and
 * then filter them, so without help each read, each compare-and-swap and each delete costs a scan
 * of the whole collection (a `find` by id in a 10,000-document collection tests 10,000 documents).
 * The handlers apply their filter to whatever the storage returns, so the storage may return any
 * superset of the matching documents: that is what this module computes.
 *
 * - database.ts runs each command inside `withCommandFilters`, naming the command's collection and
 *   its filters (one per statement of an update or delete);
 * - the storage's `findAll` asks `narrow` for the documents that can match: for a filter with a
 *   top-level equality on a string (`{ id: 'x' }`, `{ clusterId: { $in: [...] } }`, `{ _id }`),
 *   the documents holding that value, plus every document whose field holds something an equality
 *   on a string could still match (an array, an object), in the collection's own order;
 * - a field's index is built the first time a filter asks for it and kept exact on every change
 *   after that (insert, replace, delete, undo, snapshot load);
 * - anything else (no usable equality, an aggregate, a command naming another collection) gets
 *   the whole collection, as before.
 *
 * Results are identical with and without the index: test/storage.index.test.ts compares them on
 * random documents and filters.
 */

export interface ICommandFilters {
  database: string;
  collection: string;
  /** One filter per statement; every one must be narrowable for the command to be narrowed. */
  filters: Document[];
}

const commandScope = new AsyncLocalStorage<ICommandFilters>();

/** The collection and filters of the commands whose reads may be narrowed. */
export const commandFiltersOf = (commandNameArg: string, databaseArg: string, commandArg: Document): ICommandFilters | null => {
  const of = (collectionArg: unknown, filtersArg: unknown[]): ICommandFilters | null =>
    typeof collectionArg === 'string' && filtersArg.every((filter) => filter === undefined || (typeof filter === 'object' && filter !== null))
      ? { database: databaseArg, collection: collectionArg, filters: filtersArg.map((filter) => (filter ?? {}) as Document) }
      : null;
  const statements = (listArg: unknown): unknown[] | null =>
    Array.isArray(listArg) ? listArg.map((statement: Document | null) => statement?.q ?? statement?.filter) : null;
  switch (commandNameArg) {
    case 'find': return of(commandArg.find, [commandArg.filter]);
    case 'count': return of(commandArg.count, [commandArg.query]);
    case 'distinct': return of(commandArg.distinct, [commandArg.query]);
    case 'findAndModify': return of(commandArg.findAndModify ?? commandArg.findandmodify, [commandArg.query]);
    case 'update': {
      const filters = statements(commandArg.updates);
      return filters ? of(commandArg.update, filters) : null;
    }
    case 'delete': {
      const filters = statements(commandArg.deletes);
      return filters ? of(commandArg.delete, filters) : null;
    }
    default: return null;
  }
};

export const withCommandFilters = <T>(filtersArg: ICommandFilters | null, runArg: () => Promise<T>): Promise<T> =>
  filtersArg ? commandScope.run(filtersArg, runArg) : runArg();

/** The filters of the command being handled, if it reads `databaseArg.collectionArg`. */
export const currentFiltersFor = (databaseArg: string, collectionArg: string): Document[] | null => {
  const scope = commandScope.getStore();
  return scope && scope.database === databaseArg && scope.collection === collectionArg ? scope.filters : null;
};

/** What an equality on a string can be compared with: strings (indexed by value) or containers. */
const isContainer = (valueArg: unknown): boolean => typeof valueArg === 'object' && valueArg !== null;

const hexOfObjectId = (valueArg: unknown): string | null => {
  const candidate = valueArg as { toHexString?: () => unknown; _bsontype?: unknown } | null;
  if (candidate && typeof candidate === 'object' && candidate._bsontype === 'ObjectId' && typeof candidate.toHexString === 'function') {
    const hex = candidate.toHexString();
    return typeof hex === 'string' ? hex : null;
  }
  return null;
};

/** The string values a field condition can equal, or null when it is not an equality on strings. */
const equalStrings = (conditionArg: unknown): string[] | null => {
  if (typeof conditionArg === 'string') {
    return [conditionArg];
  }
  if (!isContainer(conditionArg) || Array.isArray(conditionArg) || hexOfObjectId(conditionArg) !== null) {
    return null;
  }
  const operators = conditionArg as Document;
  const keys = Object.keys(operators);
  if (keys.length === 0 || !keys.every((key) => key.startsWith('$'))) {
    // A literal embedded document: equality on a document, not on a string.
    return null;
  }
  if (typeof operators.$eq === 'string') {
    return [operators.$eq];
  }
  if (Array.isArray(operators.$in) && operators.$in.every((value: unknown) => typeof value === 'string')) {
    return operators.$in as string[];
  }
  return null;
};

/** The `_id` hex values an `_id` condition can equal, or null. */
const equalIds = (conditionArg: unknown): string[] | null => {
  const single = hexOfObjectId(conditionArg);
  if (single !== null) {
    return [single];
  }
  if (!isContainer(conditionArg) || Array.isArray(conditionArg)) {
    return null;
  }
  const operators = conditionArg as Document;
  const eq = hexOfObjectId(operators.$eq);
  if (eq !== null) {
    return [eq];
  }
  if (Array.isArray(operators.$in)) {
    const hexes = operators.$in.map(hexOfObjectId);
    return hexes.every((hex: string | null) => hex !== null) ? hexes as string[] : null;
  }
  return null;
};

class FieldIndex {
  public readonly byValue = new Map<string, Set<string>>();
  /** Documents whose field holds an array or a document: an equality on a string may still match them. */
  public readonly containers = new Set<string>();

  constructor(public readonly field: string) {}

  public add(hexArg: string, docArg: Document): void {
    const value = docArg[this.field];
    if (typeof value === 'string') {
      let holders = this.byValue.get(value);
      if (!holders) {
        holders = new Set();
        this.byValue.set(value, holders);
      }
      holders.add(hexArg);
    } else if (isContainer(value)) {
      this.containers.add(hexArg);
    }
  }

  public remove(hexArg: string, docArg: Document): void {
    const value = docArg[this.field];
    if (typeof value === 'string') {
      const holders = this.byValue.get(value);
      holders?.delete(hexArg);
      if (holders?.size === 0) {
        this.byValue.delete(value);
      }
    } else if (isContainer(value)) {
      this.containers.delete(hexArg);
    }
  }

  public candidateCount(valuesArg: string[]): number {
    let count = this.containers.size;
    for (const value of new Set(valuesArg)) {
      count += this.byValue.get(value)?.size ?? 0;
    }
    return count;
  }

  public collect(valuesArg: string[], intoArg: Set<string>): void {
    for (const value of new Set(valuesArg)) {
      for (const hex of this.byValue.get(value) ?? []) {
        intoArg.add(hex);
      }
    }
    for (const hex of this.containers) {
      intoArg.add(hex);
    }
  }
}

/** Only plain top-level field names are indexed: no dotted paths, no operators. */
const isIndexableField = (fieldArg: string): boolean => fieldArg.length > 0 && !fieldArg.startsWith('$') && !fieldArg.includes('.');

/**
 * The index state of one collection: the position of every document in the collection's own
 * order (a Map's order: first insertion of a key that is present; replacing keeps the place) and
 * the field indexes built so far.
 */
export class CollectionIndex {
  private readonly positions = new Map<string, number>();
  private nextPosition = 0;
  private readonly fields = new Map<string, FieldIndex>();

  constructor(private readonly docs: Map<string, Document>) {
    for (const hex of docs.keys()) {
      this.positions.set(hex, this.nextPosition++);
    }
  }

  /** Call right after `docs.set(hex, doc)`; `previousArg` is what the key held before, if anything. */
  public onSet(hexArg: string, previousArg: Document | undefined, docArg: Document): void {
    if (previousArg === undefined) {
      this.positions.set(hexArg, this.nextPosition++);
    }
    for (const index of this.fields.values()) {
      if (previousArg !== undefined) {
        index.remove(hexArg, previousArg);
      }
      index.add(hexArg, docArg);
    }
  }

  /** Call right after `docs.delete(hex)` removed `docArg`. */
  public onDelete(hexArg: string, docArg: Document): void {
    this.positions.delete(hexArg);
    for (const index of this.fields.values()) {
      index.remove(hexArg, docArg);
    }
  }

  private field(fieldArg: string): FieldIndex {
    let index = this.fields.get(fieldArg);
    if (!index) {
      index = new FieldIndex(fieldArg);
      for (const [hex, doc] of this.docs) {
        index.add(hex, doc);
      }
      this.fields.set(fieldArg, index);
    }
    return index;
  }

  /** The hex ids that can match one filter, or null when the filter has no usable equality. */
  private candidatesOf(filterArg: Document): Set<string> | null {
    let best: { count: number; collect: (into: Set<string>) => void } | null = null;
    const consider = (countArg: number, collectArg: (into: Set<string>) => void): void => {
      if (!best || countArg < best.count) {
        best = { count: countArg, collect: collectArg };
      }
    };
    const visit = (filter: Document): void => {
      for (const [key, condition] of Object.entries(filter)) {
        if (key === '$and' && Array.isArray(condition)) {
          for (const part of condition) {
            if (isContainer(part) && !Array.isArray(part)) {
              visit(part as Document);
            }
          }
          continue;
        }
        if (key === '_id') {
          const hexes = equalIds(condition);
          if (hexes) {
            const present = hexes.filter((hex) => this.docs.has(hex));
            consider(present.length, (into) => present.forEach((hex) => into.add(hex)));
          }
          continue;
        }
        if (!isIndexableField(key)) {
          continue;
        }
        const values = equalStrings(condition);
        if (values) {
          const index = this.field(key);
          consider(index.candidateCount(values), (into) => index.collect(values, into));
        }
      }
    };
    visit(filterArg);
    if (!best) {
      return null;
    }
    const candidates = new Set<string>();
    (best as { collect: (into: Set<string>) => void }).collect(candidates);
    return candidates;
  }

  /**
   * The documents that can match any of the filters, in the collection's order; null when a
   * filter has no usable equality or the candidates are most of the collection anyway.
   */
  public narrow(filtersArg: Document[]): Document[] | null {
    const all = new Set<string>();
    for (const filter of filtersArg) {
      const candidates = this.candidatesOf(filter);
      if (!candidates) {
        return null;
      }
      for (const hex of candidates) {
        all.add(hex);
      }
    }
    if (all.size * 2 > this.docs.size) {
      return null;
    }
    const ordered = Array.from(all).sort((left, right) => this.positions.get(left)! - this.positions.get(right)!);
    return ordered.map((hex) => this.docs.get(hex)!);
  }
}
