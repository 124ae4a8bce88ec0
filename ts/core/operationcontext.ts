import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Who is changing things right now, and whether for real: set once per request by the handler
 * guards (`Cloudly.addAdminHandler` / `addRelayHandler`) and read by the store, which stamps the
 * actor into every committed write (the audit log) and writes nothing in a dry run. Work started
 * from a request (a claim push it queued) keeps its context: it happened because of that call.
 * Work with no request behind it (start-up roll-forward, timers) is Cloudly's own.
 */

export type TActorKind = 'admin' | 'relay' | 'cloudly';

export interface IOperationActor {
  kind: TActorKind;
  /** The admin's user id, `relay:<clusterId>`, or `cloudly`. */
  id: string;
}

export interface IOperationContext {
  actor: IOperationActor;
  method: string;
  /** True while a dry run is decided: the store answers what it would write and writes nothing. */
  dryRun: boolean;
  /**
   * Set by `haltIfDryRun`: the side effect a dry run stopped before. Kept on the context, so the
   * guard answers the halt even where a handler's own error handling caught the throw.
   */
  haltedBefore?: string;
  /**
   * Set by `generatedOnCommit` in a dry run: members of the answer (dotted paths) that only the
   * real call makes, a new id or a secret. The guard answers the dry run without them and lists
   * them under `generatedOnCommit`.
   */
  generatedOnCommit?: string[];
  /** For Cloudly's own reconciles: the input change that made it look again (kept in the audit event). */
  cause?: { kind: string; id: string };
}

export const cloudlyActor: IOperationActor = Object.freeze({ kind: 'cloudly', id: 'cloudly' });

const contexts = new AsyncLocalStorage<IOperationContext>();

export const runInOperation = <T>(contextArg: IOperationContext, fnArg: () => Promise<T>): Promise<T> => contexts.run(contextArg, fnArg);

/**
 * Runs `fnArg` as Cloudly's own work, outside whatever operation called it: background work a
 * request queued is done (and audited) as Cloudly's, once, whoever asked for it.
 */
export const runAsCloudly = <T>(fnArg: () => T): T => contexts.exit(fnArg);

/** The context of the operation this code runs for; Cloudly's own when there is none. */
export const currentOperation = (): IOperationContext =>
  contexts.getStore() ?? { actor: cloudlyActor, method: 'cloudly', dryRun: false };

/**
 * Thrown where a dry run would have to act outside the database (call a relay, write a blob):
 * the guard answers `{ dryRun: true, haltedBefore }` instead of doing it.
 */
export class DryRunHalt extends Error {
  constructor(public readonly haltedBefore: string) {
    super(`dry run halted before ${haltedBefore}`);
    this.name = 'DryRunHalt';
  }
}

/** Throws `DryRunHalt` when the current operation is a dry run; call it before any side effect. */
export const haltIfDryRun = (whatArg: string): void => {
  const operation = currentOperation();
  if (operation.dryRun) {
    operation.haltedBefore ??= whatArg;
    throw new DryRunHalt(whatArg);
  }
};

/**
 * Names members of the answer (dotted paths, `cluster.id`, `relayToken`) that the real call makes
 * when it commits: a random id, a secret. A dry run cannot know them, and a made-up one would name
 * a thing that never exists or a credential that never works, so its answer leaves them out and
 * lists their paths in `generatedOnCommit` (docs/operations.md, "Dry runs"). Outside a dry run it
 * does nothing.
 */
export const generatedOnCommit = (...pathsArg: string[]): void => {
  const operation = currentOperation();
  if (operation.dryRun) {
    operation.generatedOnCommit = [...(operation.generatedOnCommit ?? []), ...pathsArg.filter((pathArg) => !operation.generatedOnCommit?.includes(pathArg))];
  }
};

/** A copy of `answerArg` without the members at `pathsArg` (dotted paths through plain objects). */
export const withoutPaths = (answerArg: unknown, pathsArg: readonly string[]): unknown => {
  if (typeof answerArg !== 'object' || answerArg === null || Array.isArray(answerArg)) {
    return answerArg;
  }
  const copy: Record<string, unknown> = { ...(answerArg as Record<string, unknown>) };
  const nested = new Map<string, string[]>();
  for (const path of pathsArg) {
    const dot = path.indexOf('.');
    if (dot < 0) {
      delete copy[path];
    } else {
      const head = path.slice(0, dot);
      nested.set(head, [...(nested.get(head) ?? []), path.slice(dot + 1)]);
    }
  }
  for (const [head, rest] of nested) {
    if (Object.hasOwn(copy, head)) {
      copy[head] = withoutPaths(copy[head], rest);
    }
  }
  return copy;
};
