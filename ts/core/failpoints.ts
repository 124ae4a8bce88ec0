/**
 * Fault injection for tests, like etcd's failpoints: the code names a point with
 * `await failpoint('corestore.afterCreationCommit')`, and a test arms that point to throw or to
 * pause there. A point nobody armed costs one map lookup. The points are process-wide (each test
 * file runs in its own process); every name is declared below, so a misspelt one does not compile.
 */

export const failpointNames = [
  /** A platform binding creation is committed to the ledger and not yet rolled forward. */
  'corestore.afterCreationCommit',
  /** A committed platform binding creation is about to be applied (its bindings inserted). */
  'corestore.beforeApplyCreation',
  /**
   * A designation read the cluster's ingress slot (the runtime it is judged on, and the generation
   * its write commits on) and is about to read the ingress service; then it decides and writes.
   */
  'ingress.designation.beforeServiceRead',
  /** A registration read its facts and is about to re-read the generations they were judged on. */
  'ingress.registration.beforeReread',
  /** A desired-state computation of a cluster with an ingress designation read the relay's origin. */
  'desiredstate.compute.afterOriginRead',
] as const;

export type TFailpointName = (typeof failpointNames)[number];

export type TFailpointAction =
  /** Throws this error (or a plain one naming the point) where the point is reached. */
  | { kind: 'throw'; error?: Error }
  /** Waits there until `until` settles, then goes on. */
  | { kind: 'pause'; until: Promise<unknown> };

interface IArmed {
  action: TFailpointAction;
  /** How many more times it fires; Infinity until disarmed. */
  remaining: number;
  /** How many times it fired. */
  hits: number;
}

const armed = new Map<TFailpointName, IArmed>();

/** The point in the code: does what the point is armed to do, nothing when it is not armed. */
export const failpoint = async (nameArg: TFailpointName): Promise<void> => {
  const point = armed.get(nameArg);
  if (!point) {
    return;
  }
  point.hits++;
  point.remaining--;
  if (point.remaining <= 0) {
    armed.delete(nameArg);
  }
  if (point.action.kind === 'throw') {
    throw point.action.error ?? new Error(`failpoint ${nameArg}`);
  }
  await point.action.until.catch(() => undefined);
};

/**
 * Arms a point (replacing an earlier arming of it), for `times` hits or until disarmed. Returns
 * the disarm function and a count of the hits so far.
 */
export const armFailpoint = (
  nameArg: TFailpointName,
  actionArg: TFailpointAction,
  optionsArg: { times?: number } = {},
): { disarm: () => void; hits: () => number } => {
  const point: IArmed = { action: actionArg, remaining: optionsArg.times ?? Infinity, hits: 0 };
  armed.set(nameArg, point);
  return {
    disarm: () => {
      if (armed.get(nameArg) === point) {
        armed.delete(nameArg);
      }
    },
    hits: () => point.hits,
  };
};

export const disarmFailpoint = (nameArg: TFailpointName): void => {
  armed.delete(nameArg);
};

export const disarmAllFailpoints = (): void => {
  armed.clear();
};
