import type { Filter } from 'mongodb';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import './queryengine.js';
import type { DocumentStore, IDocumentKind, IStoredDocument } from './store.js';

/**
 * Administrator list reads from memory: a snapshot of one kind's whole collection, answered with
 * the same filter, sort and limit engine the embedded database uses, instead of a database round
 * trip per call (the way Kubernetes' apiserver serves lists from its watch cache).
 *
 * Freshness (docs/multi-instance.md, "Read path"):
 * - a write committed on this instance marks the snapshot stale at once, so a caller always reads
 *   its own writes and every write this instance made before the read began;
 * - a write committed on another instance is seen within `stalenessMs` (the snapshot is read again
 *   when it is older than that, measured from when its read started);
 * - decisions never read from here: mutations read the database (`store.mutate`).
 *
 * A read that finds the snapshot stale reads the collection once; readers arriving meanwhile share
 * that read unless a commit happened after it started (then they read again).
 */

interface ISnapshot {
  docs: IStoredDocument[];
  /** The whole collection in the order of a sort spec, by the spec's JSON (lists mostly ask the same one). */
  sorted: Map<string, IStoredDocument[]>;
  /** When the read that produced it started (ms). */
  readStartedAt: number;
  /** The kind's commit count when that read started. */
  version: number;
}

interface IKindState {
  /** Commits of this kind on this instance. */
  version: number;
  snapshot: ISnapshot | null;
  loading: { promise: Promise<ISnapshot>; version: number } | null;
}

export interface IFindOptions {
  sort?: Record<string, 1 | -1>;
  limit?: number;
}

/** What a list read needs: `DocumentStore.find`'s shape. */
export interface IListReader {
  find<T extends IStoredDocument>(kindArg: IDocumentKind<T>, filterArg?: Filter<T>, optionsArg?: IFindOptions): Promise<T[]>;
}

export class SnapshotReadCache implements IListReader {
  private readonly kinds = new Map<string, IKindState>();
  /** Reads answered from a snapshot, and reads of a whole collection into one (for tests and benchmarks). */
  public hits = 0;
  public loads = 0;
  /** Pages read from the database directly because the snapshot had to be read again. */
  public pageReads = 0;

  constructor(
    private readonly store: DocumentStore,
    kindsArg: Array<IDocumentKind<IStoredDocument>>,
    private readonly stalenessMs: number,
  ) {
    for (const kind of kindsArg) {
      this.kinds.set(kind.collectionName, { version: 0, snapshot: null, loading: null });
    }
    // Listens as long as the store lives (they belong to the same Cloudly; a restarted manager
    // keeps counting commits).
    store.onCommitted((kindArg) => {
      const state = this.kinds.get(kindArg.collectionName);
      if (state) {
        state.version += 1;
      }
    });
  }

  public async find<T extends IStoredDocument>(kindArg: IDocumentKind<T>, filterArg: Filter<T> = {}, optionsArg: IFindOptions = {}): Promise<T[]> {
    const state = this.kinds.get(kindArg.collectionName);
    if (!state || this.stalenessMs <= 0) {
      return this.store.find(kindArg, filterArg, optionsArg);
    }
    if (optionsArg.limit !== undefined && !this.isCurrent(state)) {
      // A page (a few documents) while the snapshot must be read again: the page is read from the
      // database directly, which answers it with every write in it, and the snapshot is read in
      // the background for the readers after it. Waiting for the whole collection instead made
      // each page read after a write cost a read of every document, the longest wait during a
      // relay storm, when the database is busiest (docs/multi-instance.md, "Admin calls during a storm").
      if (!state.loading || state.loading.version !== state.version) {
        void this.load(kindArg, state, state.version).catch(() => undefined);
      }
      this.pageReads += 1;
      return this.store.find(kindArg, filterArg, optionsArg);
    }
    const snapshot = await this.current(kindArg, state);
    let docs: T[];
    if (optionsArg.sort && Object.keys(filterArg).length === 0) {
      // An unfiltered list: the snapshot sorted once per sort spec, not once per call.
      const key = JSON.stringify(optionsArg.sort);
      let sorted = snapshot.sorted.get(key);
      if (!sorted) {
        sorted = congodb.QueryEngine.sort(snapshot.docs as never[], optionsArg.sort) as unknown as IStoredDocument[];
        snapshot.sorted.set(key, sorted);
      }
      docs = sorted as T[];
    } else {
      docs = congodb.QueryEngine.filter(snapshot.docs as never[], filterArg as never) as unknown as T[];
      if (optionsArg.sort) {
        docs = congodb.QueryEngine.sort(docs as never[], optionsArg.sort) as unknown as T[];
      }
    }
    if (optionsArg.limit) {
      docs = docs.slice(0, optionsArg.limit);
    }
    // Callers may change what they get: each answer is its own copy.
    return structuredClone(docs);
  }

  /** Resolves once the read of this kind's snapshot in flight (if any) has ended. */
  public async loaded(kindArg: IDocumentKind<IStoredDocument>): Promise<void> {
    await this.kinds.get(kindArg.collectionName)?.loading?.promise.catch(() => undefined);
  }

  /** Whether the snapshot may answer now: no commit since its read, and its read started within the bound. */
  private isCurrent(stateArg: IKindState): boolean {
    const snapshot = stateArg.snapshot;
    return snapshot !== null && snapshot.version === stateArg.version && Date.now() - snapshot.readStartedAt < this.stalenessMs;
  }

  private async current(kindArg: IDocumentKind<IStoredDocument>, stateArg: IKindState): Promise<ISnapshot> {
    const wantedVersion = stateArg.version;
    const snapshot = stateArg.snapshot;
    const age = snapshot ? Date.now() - snapshot.readStartedAt : Infinity;
    if (snapshot && snapshot.version === wantedVersion && age < this.stalenessMs) {
      this.hits += 1;
      // Past half its bound, the snapshot is read again in the background, so readers seldom wait
      // for the database (a busy database would make them wait the longest).
      if (age >= this.stalenessMs / 2 && !stateArg.loading) {
        void this.load(kindArg, stateArg, wantedVersion).catch(() => undefined);
      }
      return snapshot;
    }
    // A read that started after every commit this caller must see is as good as a new one.
    if (stateArg.loading && stateArg.loading.version === wantedVersion) {
      return stateArg.loading.promise;
    }
    return this.load(kindArg, stateArg, wantedVersion);
  }

  /** Reads the whole collection into a snapshot; installs it unless a commit came in meanwhile. */
  private async load(kindArg: IDocumentKind<IStoredDocument>, stateArg: IKindState, wantedVersion: number): Promise<ISnapshot> {
    const readStartedAt = Date.now();
    const promise = this.store.find(kindArg, {}).then((docs) => {
      const loaded: ISnapshot = { docs, sorted: new Map(), readStartedAt, version: wantedVersion };
      // Installed only if no commit came in while it was read (else the next reader reads again).
      if (stateArg.version === wantedVersion && (!stateArg.snapshot || stateArg.snapshot.readStartedAt <= readStartedAt)) {
        stateArg.snapshot = loaded;
      }
      return loaded;
    });
    this.loads += 1;
    const loading = { promise, version: wantedVersion };
    stateArg.loading = loading;
    try {
      return await promise;
    } finally {
      if (stateArg.loading === loading) {
        stateArg.loading = null;
      }
    }
  }
}
