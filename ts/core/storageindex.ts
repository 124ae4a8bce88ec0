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
    // One value is the common case (a find by id); only a list can repeat one.
    for (const value of valuesArg.length === 1 ? valuesArg : new Set(valuesArg)) {
      count += this.byValue.get(value)?.size ?? 0;
    }
    return count;
  }

  public collect(valuesArg: string[], intoArg: Set<string>): void {
    for (const value of valuesArg.length === 1 ? valuesArg : new Set(valuesArg)) {
      for (const hex of this.byValue.get(value) ?? []) {
        intoArg.add(hex);
      }
    }
    for (const hex of this.containers) {
      intoArg.add(hex);
    }
  }
}

/**
 * The `_id` hex of every statement when each one is exactly `{ _id: <ObjectId> }` (the insert
 * batcher's upserts), else null; read once per command, as the handler asks for candidates once per
 * statement with the same filters.
 */
const idStatements = new WeakMap<Document[], string[] | null>();

const readIdStatements = (filtersArg: Document[]): string[] | null => {
  const unique = new Set<string>();
  for (const filter of filtersArg) {
    const keys = Object.keys(filter);
    const hex = keys.length === 1 && keys[0] === '_id' ? hexOfObjectId(filter._id) : null;
    if (hex === null) {
      return null;
    }
    unique.add(hex);
  }
  return [...unique];
};

const idStatementsOf = (filtersArg: Document[]): string[] | null => {
  let hexes = idStatements.get(filtersArg);
  if (hexes === undefined) {
    hexes = readIdStatements(filtersArg);
    idStatements.set(filtersArg, hexes);
  }
  return hexes;
};

/** The cheapest equality found so far in a filter: `_id` values present, or a field index and its values. */
interface IBestEquality {
  count: number;
  ids: string[] | null;
  index: FieldIndex | null;
  values: string[] | null;
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

  /**
   * Notes in `bestArg` the equality of `filterArg` (or of its `$and` parts) with the fewest
   * candidates. Runs once per statement of every command, so it makes no closures and no sets.
   */
  private considerEqualities(filterArg: Document, bestArg: IBestEquality): void {
    for (const key of Object.keys(filterArg)) {
      const condition: unknown = filterArg[key];
      if (key === '$and') {
        if (Array.isArray(condition)) {
          for (const part of condition) {
            if (isContainer(part) && !Array.isArray(part)) {
              this.considerEqualities(part as Document, bestArg);
            }
          }
        }
        continue;
      }
      if (key === '_id') {
        const hexes = equalIds(condition);
        if (hexes) {
          const present: string[] = [];
          for (const hex of hexes) {
            if (this.docs.has(hex)) {
              present.push(hex);
            }
          }
          if (present.length < bestArg.count) {
            Object.assign(bestArg, { count: present.length, ids: present, index: null, values: null });
          }
        }
        continue;
      }
      if (!isIndexableField(key)) {
        continue;
      }
      const values = equalStrings(condition);
      if (values) {
        const index = this.field(key);
        const count = index.candidateCount(values);
        if (count < bestArg.count) {
          Object.assign(bestArg, { count, ids: null, index, values });
        }
      }
    }
  }

  /** The hex ids that can match one filter, added to `intoArg`; false when the filter has no usable equality. */
  private collectCandidates(filterArg: Document, intoArg: Set<string>): boolean {
    const best: IBestEquality = { count: Infinity, ids: null, index: null, values: null };
    this.considerEqualities(filterArg, best);
    if (best.ids) {
      for (const hex of best.ids) {
        intoArg.add(hex);
      }
      return true;
    }
    if (best.index && best.values) {
      best.index.collect(best.values, intoArg);
      return true;
    }
    return false;
  }

  /**
   * The documents of these ids that exist, in no particular order: each statement of such a
   * command matches at most the one document of its own `_id`, so the order of the others the
   * handler filters out cannot change what it does. No set and no sort: the handler asks once per
   * statement, and a sort each time made a command of n statements cost n² log n.
   */
  private presentOf(hexesArg: string[]): Document[] {
    const present: Document[] = [];
    for (const hex of hexesArg) {
      const doc = this.docs.get(hex);
      if (doc !== undefined) {
        present.push(doc);
      }
    }
    return present;
  }

  /**
   * The documents that can match any of the filters, in the collection's order; null when a
   * filter has no usable equality or the candidates are most of the collection anyway.
   */
  public narrow(filtersArg: Document[]): Document[] | null {
    if (filtersArg.length > 1) {
      const hexes = idStatementsOf(filtersArg);
      if (hexes) {
        return this.presentOf(hexes);
      }
    }
    const all = new Set<string>();
    for (const filter of filtersArg) {
      if (!this.collectCandidates(filter, all)) {
        return null;
      }
    }
    if (all.size * 2 > this.docs.size) {
      return null;
    }
    const ordered = Array.from(all).sort((left, right) => this.positions.get(left)! - this.positions.get(right)!);
    return ordered.map((hex) => this.docs.get(hex)!);
  }
}
