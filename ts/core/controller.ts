import type { Document } from 'mongodb';
import type { ICommittedChange } from './changefeed.js';
import type { IWorkQueueRetry } from './workqueue.js';
import { leftDerivedInputs } from './store.js';

/**
 * A controller: one derived thing and the one place that writes it. Declared as a value, the way
 * controller-runtime's builder declares one (`For` / `Owns` / `Watches` / `Complete`): which
 * changes queue which keys, which keys a full pass looks at, and a level-based `reconcile(key)`
 * that reads what is stored now and writes only what differs. A controller never holds
 * `Cloudly`: its constructor takes the ports the composition root builds for it, which are its
 * whole list of dependencies (as `NewDeploymentController(informers…, client)` is called in
 * kube-controller-manager). The reconciler (ts/manager.reconciler/) runs every controller of one
 * list: its keyed queue, leadership, the resync and the metrics.
 */

/** Why a key runs: the input change that queued it (kind and id), and when that change was committed. */
export interface IReconcileCause {
  kind: string;
  id: string;
  /** Epoch milliseconds of the input's commit; absent for passes nobody's change asked for. */
  at?: number;
}

/** What one run did: `created`/`written`/`removed` stored something, `kept` found it current, `expanded` queued what it covers. */
export type TReconcileOutcome = 'created' | 'written' | 'removed' | 'kept' | 'expanded' | 'refreshed';

export interface IReconcileResult {
  outcome: TReconcileOutcome;
  /** Look at this key again after this long even if no input changes (a deadline the facts imply). */
  requeueAfterMs?: number;
}

export interface IReconcileContext {
  cause: IReconcileCause;
  /** Queues another key of the same controller, as caused by the same change. */
  enqueue: (keyArg: string) => void;
}

export interface IController {
  /** Metrics label, logs, and the audit `cause` of what it writes. */
  readonly name: string;
  /** The derived document kinds it writes; every derived kind has exactly one writer (test/reconciler.controllers.test.ts). */
  readonly writes: readonly string[];
  /** Which keys a committed change of each input kind queues (For / Owns / Watches). */
  readonly inputs: Readonly<Record<string, (changeArg: ICommittedChange) => readonly string[]>>;
  /**
   * What the controller reads of a document of an input kind, where that is less than the whole
   * document (controller-runtime's predicates on an update's old and new object): a change made
   * here whose view is the same as the view of the document's previous change queues nothing. A
   * view must name every member any of the controller's reads takes from such a document; the
   * reconciler compares views as JSON (docs/reconciler.md, "Changes that move nothing read").
   */
  readonly inputViews?: Readonly<Record<string, (docArg: Readonly<Document>) => unknown>>;
  /** The keys of a full pass: at start-up, for a new leader, at every resync. */
  all: () => Promise<readonly string[]>;
  reconcile: (keyArg: string, contextArg: IReconcileContext) => Promise<TReconcileOutcome | IReconcileResult>;
  /** The metrics scope of a key (the verdict reports `service`, `cluster` and `all` apart); the name by default. */
  scopeOf?: (keyArg: string) => string;
  /**
   * Whether the periodic resync includes this controller (false: only the start-up pass and a new
   * leader's pass do, for controllers whose every input reaches them through the feed).
   */
  resync?: boolean;
  /**
   * Resync from digests (docs/reconciler.md, "The resync"): set by a controller whose keys are
   * clusters. The periodic resync then reads one bulk projection per kind of its `inputs` and
   * `writes` and runs only the clusters whose digest moved since their last run, not every
   * cluster. What changes with time alone must be a `requeueAfterMs` deadline.
   */
  digestResync?: IDigestResync;
  /**
   * A source that is not a document change (Watches on a channel): every `everyMs` on the leader,
   * `keys()` names keys that may have changed (a relay lease released on another instance, which
   * no audit event tells of).
   */
  poll?: { everyMs: number; keys: () => Promise<readonly string[]> };
  concurrency?: number;
  retry?: IWorkQueueRetry;
}

export interface IDigestResync {
  /** The controller's key for a cluster's inputs (the verdict's `cluster:<id>`). */
  keyOf: (clusterIdArg: string) => string;
  /**
   * Per kind, the fields whose values stand for a document in place of its generation, for a kind
   * written more often than its readers care (a relay lease's renewals move its generation).
   */
  fields?: Readonly<Record<string, readonly string[]>>;
}

/** The keys of a change that name its cluster (owners as the kind declares them): the cluster's id. */
export const ofOwningCluster = (changeArg: ICommittedChange): string[] => (changeArg.owners.clusterId ? [changeArg.owners.clusterId] : []);

/**
 * `ofOwningCluster` for a change that moved what controllers read: a write of only a kind's
 * bookkeeping (the cluster's relay token, `bookkeepingFields` in store.ts) queues nothing.
 */
export const ofOwningClusterInputs = (changeArg: ICommittedChange): string[] =>
  (leftDerivedInputs(changeArg.owners) ? [] : ofOwningCluster(changeArg));
