import { createRequire } from 'node:module';
import type { Document } from 'mongodb';
import { Query } from 'mingo';
import { Context } from 'mingo/core';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';

/**
 * The embedded database matches documents with mingo, and so does the read cache
 * (readcache.ts). mingo 7's `new Query(filter)` copies its whole operator table (every query,
 * expression, pipeline, projection, accumulator and window operator, a few hundred entries) into
 * a new context on every construction: `Context.from` with one context returns a fresh copy of it.
 * The embedded database makes one query per command and the read cache one per list, so that
 * copy was most of a query's cost (docs/storage.md, "The embedded database's queries").
 *
 * Here `Context.from` with a single context returns that context itself. A query only reads its
 * context's operators. The only code in mingo that adds to a context it was given is the `$fill`
 * and `$setWindowFields` stages and the updater, and all three add operators the default context
 * already holds, which `addOps` keeps as they are. With two or more contexts it still merges
 * them into a new one.
 *
 * Applied once, on load, and only to the mingo major version this was written against; with any
 * other, mingo is left as it is.
 */

const sharedContextMajor = 7;

const mingoVersion = (): string | null => {
  try {
    return (createRequire(import.meta.url)('mingo/package.json') as { version?: string }).version ?? null;
  } catch {
    return null;
  }
};

const patched = Symbol.for('cloudly.mingo.sharedContext');
let sharing = true;

type TContextFrom = (...contextsArg: Context[]) => Context;

const applySharedContext = (): boolean => {
  const holder = Context as unknown as { from: TContextFrom; [patched]?: true };
  if (holder[patched]) {
    return true;
  }
  const version = mingoVersion();
  if (version === null || Number(version.split('.')[0]) !== sharedContextMajor) {
    return false;
  }
  const copyingFrom = holder.from;
  holder.from = function sharedFrom(this: unknown, ...contextsArg: Context[]): Context {
    return sharing && contextsArg.length === 1 ? contextsArg[0] : copyingFrom.apply(this, contextsArg);
  };
  holder[patched] = true;
  return true;
};

/** Whether queries share mingo's operator context (false: an unknown mingo version, left alone). */
export const queriesShareContext: boolean = applySharedContext();

/** For bench/queryengine.bench.ts only: false copies the table per query again, as mingo does. */
export const setQueriesShareContext = (onArg: boolean): void => {
  sharing = onArg;
};

/**
 * A filter's `$in` on a list of strings, tested with one hash set for the whole filter instead of
 * mingo's: mingo's `$in` builds a set of the whole list again for every document it tests, so a
 * filter naming N ids over M documents cost N × M (one `{ id: { $in: 10,000 ids } }` over 10,000
 * services took 11 s, and a verdict pass's 1,000 ids over a cluster's statuses 33 ms each).
 *
 * Only a top-level field whose condition is exactly `{ $in: [strings] }`, or a string (`{ id: 'x' }`,
 * the same test as `{ $in: ['x'] }`), is taken; every other condition of the filter is still
 * mingo's, and a filter of such conditions alone compiles no mingo query at all (most reads by id
 * or by cluster: compiling their query was 8% of a relay storm's CPU). A document's value decides it here when it is a
 * string, missing or null, or an array of strings, as mingo decides them: a string in the set, an
 * array with one of its members in it (missing, null and every other value match no string).
 * A document with any other value is tested against the whole filter by mingo, as before, so the
 * answer and its order are mingo's own. `test/foundation.directread.test.ts` holds the embedded
 * server's answers to filters with `$in` to the same reads answered through the driver.
 */
interface IStringIn {
  field: string;
  values: Set<string>;
}

const stringInOf = (fieldArg: string, conditionArg: unknown): IStringIn | null => {
  if (fieldArg.startsWith('$') || fieldArg.includes('.')) {
    return null;
  }
  // `{ field: 'x' }` matches what `{ field: { $in: ['x'] } }` matches: the value, or an array holding it.
  if (typeof conditionArg === 'string') {
    return { field: fieldArg, values: new Set([conditionArg]) };
  }
  if (conditionArg === null || typeof conditionArg !== 'object' || Array.isArray(conditionArg)) {
    return null;
  }
  if (Object.getPrototypeOf(conditionArg) !== Object.prototype) {
    return null;
  }
  const keys = Object.keys(conditionArg);
  const list = (conditionArg as { $in?: unknown }).$in;
  if (keys.length !== 1 || keys[0] !== '$in' || !Array.isArray(list) || !list.every((value) => typeof value === 'string')) {
    return null;
  }
  return { field: fieldArg, values: new Set(list as string[]) };
};

/** True or false when the value decides it as mingo would, null when mingo must. */
const inDecides = (valueArg: unknown, valuesArg: Set<string>): boolean | null => {
  if (valueArg === undefined || valueArg === null) {
    return false;
  }
  if (typeof valueArg === 'string') {
    return valuesArg.has(valueArg);
  }
  if (Array.isArray(valueArg)) {
    let found = false;
    for (const item of valueArg) {
      if (typeof item !== 'string') {
        return null;
      }
      found ||= valuesArg.has(item);
    }
    return found;
  }
  return null;
};

/** For bench/queryengine.bench.ts and the tests: false leaves every `$in` to mingo, as before. */
export const setStringInSets = (onArg: boolean): void => {
  stringInSets = onArg;
};
let stringInSets = true;

const applyStringInSets = (): void => {
  const holder = congodb.QueryEngine as unknown as { filter: (documentsArg: Document[], filterArg: Document) => Document[]; [patched]?: true };
  if (holder[patched]) {
    return;
  }
  const mingoFilter = holder.filter;
  holder.filter = function filterWithSets(this: unknown, documentsArg: Document[], filterArg: Document): Document[] {
    if (!stringInSets || !filterArg || typeof filterArg !== 'object') {
      return mingoFilter.call(this, documentsArg, filterArg);
    }
    const sets: IStringIn[] = [];
    const rest: Document = {};
    for (const key of Object.keys(filterArg)) {
      const stringIn = stringInOf(key, filterArg[key]);
      if (stringIn) {
        sets.push(stringIn);
      } else {
        rest[key] = filterArg[key];
      }
    }
    if (sets.length === 0) {
      return mingoFilter.call(this, documentsArg, filterArg);
    }
    const restQuery = Object.keys(rest).length > 0 ? new Query(rest) : null;
    let wholeQuery: Query | null = null;
    const matching: Document[] = [];
    for (const doc of documentsArg) {
      let decided: boolean | null = true;
      for (const { field, values } of sets) {
        const verdict = inDecides(doc[field], values);
        if (verdict === false) {
          decided = false;
          break;
        }
        if (verdict === null) {
          decided = null;
        }
      }
      if (decided === false) {
        continue;
      }
      if (decided === null) {
        wholeQuery ??= new Query(filterArg);
        if (wholeQuery.test(doc)) {
          matching.push(doc);
        }
      } else if (!restQuery || restQuery.test(doc)) {
        matching.push(doc);
      }
    }
    return matching;
  };
  holder[patched] = true;
};

// The same mingo major version as the shared context: the semantics of `$in` above are its.
if (queriesShareContext) {
  applyStringInSets();
}
