import { isCanonicalId, isPositiveCounter, readExactDataRecord } from '../private/dataproperties.js';

/**
 * The runtimes a cluster can be in. A cluster that ran Swarm passes through `cutover` on its way
 * to `pallet`; a cluster born on Pallet starts and stays in `pallet`. Project's own definition.
 */
export const clusterRuntimePhases = Object.freeze(['swarm', 'cutover', 'pallet'] as const);

export type TClusterRuntimePhase = typeof clusterRuntimePhases[number];

/**
 * Names the runtime state of one cluster at one generation. `id` is the cluster's id (a cluster
 * has exactly one runtime record) and `generation` bumps on every change of that record, so a
 * caller that sends the reference it read proves it decided against the current runtime.
 * Project's own definition.
 */
export interface IClusterRuntimeReference {
  id: string;
  phase: TClusterRuntimePhase;
  generation: number;
}

export const clusterRuntimeReferenceError = 'Cluster runtime reference rejected.';

/**
 * A detached copy of a runtime reference with exactly its three members, read from plain data
 * only. It throws `clusterRuntimeReferenceError` for anything else, never a detail of the value.
 */
export const snapshotClusterRuntimeReference = (valueArg: unknown): IClusterRuntimeReference => {
  let record: Record<string, unknown> | null = null;
  try {
    record = readExactDataRecord(valueArg, ['id', 'phase', 'generation']);
    if (record !== null) {
      const descriptors = Object.getOwnPropertyDescriptors(record);
      const id = descriptors.id?.value;
      const phase = descriptors.phase?.value;
      const generation = descriptors.generation?.value;
      if (
        isCanonicalId(id)
        && (clusterRuntimePhases as readonly unknown[]).includes(phase)
        && isPositiveCounter(generation)
      ) {
        return { id, phase: phase as TClusterRuntimePhase, generation };
      }
    }
  } catch {
    // A proxy or exotic object may throw while being read; it is refused like any other bad value.
  }
  throw new Error(clusterRuntimeReferenceError);
};
