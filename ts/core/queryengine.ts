import { createRequire } from 'node:module';
import { Context } from 'mingo/core';

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
