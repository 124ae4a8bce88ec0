import {
  readServiceDataField,
  readServiceDataRecord,
  validateServiceCanonicalId,
} from '../private/servicecontract.js';

/**
 * The producer's verdict on one spec revision of a service. Each reason belongs to exactly one
 * state: `converged` and `converging` carry none, `waiting` a waiting reason, `refused` a refusal.
 */

export const serviceRuntimeWaitingReasons = Object.freeze([
  'node-network-pending',
  'conflict',
  'failure-backoff',
  'storage-import-pending',
  'bindings-pending',
  'legacy-adoption-pending',
] as const);

/**
 * Project's own wait, beside the spec's closed union: `secrets-pending`, the relay's secret
 * manifest of a node running the current revision does not list every secret of the service at
 * the version the service names yet (docs/api/services.md).
 */
const serviceRuntimeOwnWaitingTuple = ['secrets-pending'] as const;
export const serviceRuntimeOwnWaitingReasons = Object.freeze(serviceRuntimeOwnWaitingTuple);

export type TServiceRuntimeWaitingReason = (typeof serviceRuntimeWaitingReasons)[number] | (typeof serviceRuntimeOwnWaitingTuple)[number];

/**
 * The volume refusals, in contract order: the first four name what a local storage claim cannot
 * express, the last two what Cloudly will not guess (see the volume initialization derive rule).
 */
export const serviceRuntimeVolumeRefusals = Object.freeze([
  'volume-driver-unsupported',
  'volume-options-unsupported',
  'volume-shared-unsupported',
  'volume-placement-unsupported',
  'volume-initialization-unknown',
  'volume-ownership-unknown',
] as const);

// The refusals other than the volume ones, as a plain literal: the schema generator reads a
// literal tuple's members, not the result of a call with a spread (docs/foundation.md, the contract schema).
const serviceRuntimeNonVolumeRefusals = [
  'cluster-runtime-missing',
  'organization-missing',
  'image-plan-missing',
  'platform-unsupported',
  'secrets-unsupported',
  'volumes-unsupported',
  'port-protocol-unsupported',
  'ports-too-many',
  'readiness-target-undeclared',
  'environment-too-large',
  'no-eligible-node',
  'replica-limit',
  'node-authority-unsupported',
  'network-policy-missing',
  'network-policy-mismatch',
  'network-workload-pool-missing',
  'network-workload-pool-exhausted',
] as const;

/**
 * Project's own refusals, beside the spec's closed union (which has no token for them):
 * `secret-version-missing`, a secret the service names is a version Cloudly does not hold sealed
 * for the service's cluster, or sealed to a recipient its relay no longer holds (docs/api/services.md).
 */
const serviceRuntimeOwnRefusalTuple = ['secret-version-missing'] as const;
export const serviceRuntimeOwnRefusals = Object.freeze(serviceRuntimeOwnRefusalTuple);

export const serviceRuntimeRefusals = Object.freeze([...serviceRuntimeNonVolumeRefusals, ...serviceRuntimeVolumeRefusals] as const);

export type TServiceRuntimeRefusal =
  | (typeof serviceRuntimeNonVolumeRefusals)[number]
  | (typeof serviceRuntimeVolumeRefusals)[number]
  | (typeof serviceRuntimeOwnRefusalTuple)[number];

/**
 * The limits a runtime config carries. `maximumTargetPorts` is the spec's (64): a service declaring
 * more target ports is refused `ports-too-many`. `maximumReplicas` is the project's own: the spec
 * names `replica-limit` without the number, so one service runs at most 256 replicas (the writable
 * spec admits up to 1,024, so the limit is a runtime verdict, not an input refusal).
 */
export const runtimeConfigContract = Object.freeze({
  maximumTargetPorts: 64,
  maximumReplicas: 256,
  /**
   * The project's own number: the workload authorities a node's runtime session must have resolved
   * to be handed a service (the spec names `node-authority-unsupported`, not the count): one, the
   * authority its workloads run under.
   */
  requiredWorkloadAuthorities: 1,
} as const);

export type TServiceRuntimeState = 'converged' | 'converging' | 'waiting' | 'refused';

interface IServiceRuntimeStatusBase {
  /** The service the verdict is about. */
  id: string;
  specRevision: number;
  /** Epoch milliseconds when this state and reason were first reached for the revision. */
  changedAt: number;
}

export type IServiceRuntimeStatus =
  | (IServiceRuntimeStatusBase & { state: 'converged' | 'converging'; reason: null })
  | (IServiceRuntimeStatusBase & { state: 'waiting'; reason: TServiceRuntimeWaitingReason })
  | (IServiceRuntimeStatusBase & { state: 'refused'; reason: TServiceRuntimeRefusal });

export const serviceRuntimeStatusContract = Object.freeze({
  error: 'Service runtime status rejected: exact schema and state/reason pairing required.',
} as const);

const statusKeys = ['id', 'specRevision', 'state', 'reason', 'changedAt'] as const;

/**
 * Detached exact-schema snapshot of a status. Throws when a member is missing, extra or of the
 * wrong type, or when the reason does not belong to the state.
 */
export const snapshotServiceRuntimeStatus = (valueArg: unknown): IServiceRuntimeStatus => {
  let record: Record<string, unknown> | null;
  try {
    record = readServiceDataRecord(valueArg);
  } catch {
    record = null;
  }
  if (
    record === null
    || Object.keys(record).length !== statusKeys.length
    || !statusKeys.every((key) => Object.hasOwn(record as object, key))
  ) {
    throw new TypeError(serviceRuntimeStatusContract.error);
  }
  const id = readServiceDataField(record, 'id');
  const specRevision = readServiceDataField(record, 'specRevision');
  const changedAt = readServiceDataField(record, 'changedAt');
  const state = readServiceDataField(record, 'state');
  const reason = readServiceDataField(record, 'reason');
  if (
    validateServiceCanonicalId(id, 'id').length > 0
    || !Number.isSafeInteger(specRevision) || (specRevision as number) < 1
    || !Number.isSafeInteger(changedAt) || (changedAt as number) < 0
  ) {
    throw new TypeError(serviceRuntimeStatusContract.error);
  }
  const base = { id: id as string, specRevision: specRevision as number, changedAt: changedAt as number };
  if ((state === 'converged' || state === 'converging') && reason === null) {
    return { ...base, state, reason: null };
  }
  if (state === 'waiting' && ([...serviceRuntimeWaitingReasons, ...serviceRuntimeOwnWaitingReasons] as readonly unknown[]).includes(reason)) {
    return { ...base, state, reason: reason as TServiceRuntimeWaitingReason };
  }
  if (state === 'refused' && ([...serviceRuntimeRefusals, ...serviceRuntimeOwnRefusals] as readonly unknown[]).includes(reason)) {
    return { ...base, state, reason: reason as TServiceRuntimeRefusal };
  }
  throw new TypeError(serviceRuntimeStatusContract.error);
};

/**
 * Project's own extension, beside the contract's status (seed 001's state and reason unions are
 * closed and stay as they are): why what is shown of a service is not current, and since when
 * (epoch milliseconds: the last time Cloudly had evidence from the cluster's relay). A service
 * whose cluster has had no live relay session past the grace (`relay-disconnected`), or whose
 * relay's observed-state reports are older than their bound (`observed-state-stale`), counts as
 * `unknown` on every overview and is never shown `converged` or `converging`
 * (docs/reconciler.md, "Liveness").
 */
export const runtimeLivenessReasons = Object.freeze(['relay-disconnected', 'observed-state-stale'] as const);

export type TRuntimeLivenessReason = (typeof runtimeLivenessReasons)[number];

export interface IRuntimeLiveness {
  state: 'unknown';
  reason: TRuntimeLivenessReason;
  since: number;
}
