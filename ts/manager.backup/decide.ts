import type { TypedResponseError } from '@api.global/typedrequest';
import type { TDecision } from '../core/store.js';
import { mutationIdReusedReason, refuse } from '../core/errors.js';
import type { IIsolatedRestoreNodeState } from '../interfaces/data/isolatedrestore.js';
import type { IIsolatedRestoreDocument, IServiceBackupDocument } from './documents.js';

/** The machine tokens of the backup domain's refusals, defined once (a refusal's first reason). */
export const backupRefusalReasons = {
  serviceNotFound: 'service-not-found',
  nodeNotFound: 'node-not-found',
  clusterNotFound: 'cluster-not-found',
  clusterMismatch: 'service-not-in-cluster',
  backupNotFound: 'backup-not-found',
  backupInProgress: 'backup-in-progress',
  backupIdInUse: 'backup-id-in-use',
  backupNotCompleted: 'backup-not-completed',
  closureAlreadyStored: 'closure-already-stored',
  closureUploadInProgress: 'closure-upload-in-progress',
  closureNotStored: 'closure-not-stored',
  closureBytesMissing: 'closure-bytes-missing',
  closureRecordFailed: 'closure-record-failed',
  restoreNotFound: 'isolated-restore-not-found',
  drillIdInUse: 'backup-drill-id-in-use',
  drillIdInvalid: 'backup-drill-id-invalid',
  restoreIdInUse: 'isolated-restore-id-in-use',
  backupCancelled: 'operation-cancelled',
  mutationReused: mutationIdReusedReason,
} as const;

/**
 * The backup domain's decisions as pure functions over what the store read, so tests call them
 * directly: each `decide*` answers the `store.mutate` decision for one write, each `*Refusal`
 * names why a request may not go on (or null).
 */

export interface IBackupOrder {
  backupId: string;
  clusterId: string;
  nodeId: string;
  serviceId: string;
  /** The digest of what was ordered; one backup id names one order. */
  orderSha256: string;
  now: number;
  /** How long an attempt may run before it counts as dead (the relay's backup timeout). */
  attemptTimeoutMs: number;
  /** The operation that runs this attempt (absent in decisions made before operations existed). */
  operationId?: string;
}

/**
 * Ordering a backup under an id: a new id creates it running; the same order again answers a
 * completed backup as it is (kept), refuses while an attempt is alive, and orders a failed or
 * dead attempt again; another order under the id is refused.
 */
export const decideBackupOrder = (
  existingArg: IServiceBackupDocument | null,
  orderArg: IBackupOrder,
): TDecision<IServiceBackupDocument> => {
  if (!existingArg) {
    return {
      kind: 'create',
      doc: {
        id: orderArg.backupId,
        clusterId: orderArg.clusterId,
        nodeId: orderArg.nodeId,
        serviceId: orderArg.serviceId,
        createdAt: orderArg.now,
        state: 'running',
        attemptStartedAt: orderArg.now,
        orderSha256: orderArg.orderSha256,
        snapshots: [],
        ...(orderArg.operationId !== undefined ? { operationId: orderArg.operationId } : {}),
      },
    };
  }
  if (existingArg.orderSha256 !== orderArg.orderSha256) {
    return { kind: 'refuse', refusal: refuse('conflict', [backupRefusalReasons.backupIdInUse]) };
  }
  if (existingArg.state === 'completed') {
    return { kind: 'keep' };
  }
  // An attempt older than the relay timeout died with its instance (a crash or restart).
  if (existingArg.state === 'running' && orderArg.now - existingArg.attemptStartedAt <= orderArg.attemptTimeoutMs) {
    return { kind: 'refuse', refusal: refuse('conflict', [backupRefusalReasons.backupInProgress]) };
  }
  // A failed or dead backup is ordered again under the same id.
  return {
    kind: 'write',
    change: {
      set: { state: 'running', attemptStartedAt: orderArg.now, ...(orderArg.operationId !== undefined ? { operationId: orderArg.operationId } : {}) },
      unset: ['failureReason'],
    },
  };
};

/**
 * Records how a backup ended; a backup that is gone is not found (it is not in progress). Given
 * the attempt's operation, an attempt that another order took over (a new operation on the same
 * backup) records nothing.
 */
export const decideBackupSettlement = (
  currentArg: IServiceBackupDocument | null,
  setArg: Partial<Pick<IServiceBackupDocument, 'state' | 'snapshots' | 'replication' | 'failureReason'>>,
  operationIdArg?: string,
): TDecision<IServiceBackupDocument> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuse('not-found', [backupRefusalReasons.backupNotFound]) };
  }
  if (operationIdArg !== undefined && currentArg.operationId !== undefined && currentArg.operationId !== operationIdArg) {
    return { kind: 'keep' };
  }
  return { kind: 'write', change: { set: setArg } };
};

/** Records a stored closure on its backup, unless the backup is gone or already has one. */
export const decideClosureRecord = (
  currentArg: IServiceBackupDocument | null,
  closureArg: NonNullable<IServiceBackupDocument['closure']>,
): TDecision<IServiceBackupDocument> =>
  (currentArg && !currentArg.closure ? { kind: 'write', change: { set: { closure: closureArg } } } : { kind: 'keep' });

/**
 * The backup of an operation that ended without settling it (its instance died, or its operation
 * was never recorded) fails `interrupted`, unless another attempt (operation) has taken it over.
 */
export const decideBackupInterrupted = (
  currentArg: IServiceBackupDocument | null,
  operationIdArg: string,
): TDecision<IServiceBackupDocument> =>
  (currentArg?.state === 'running' && currentArg.operationId === operationIdArg
    ? { kind: 'write', change: { set: { state: 'failed', failureReason: 'interrupted' } } }
    : { kind: 'keep' });

/**
 * Why a backup cannot be restored from, or null: it must exist and be completed; an isolated
 * restore also needs its closure stored.
 */
export const backupRestoreRefusal = (
  backupArg: IServiceBackupDocument | null,
  optionsArg: { needsClosure: boolean },
): TypedResponseError | null => {
  if (!backupArg) {
    return refuse('not-found', [backupRefusalReasons.backupNotFound]);
  }
  if (backupArg.state !== 'completed' || (optionsArg.needsClosure && !backupArg.closure)) {
    return refuse('conflict', [backupRefusalReasons.backupNotCompleted]);
  }
  return null;
};

/** What a relay names when it sends or fetches a closure; the socket names the cluster. */
export interface IClosureAddress {
  clusterId: string;
  serviceId: string;
  nodeId: string;
}

/**
 * Why a relay may not send a backup's closure, or null. Another cluster's backup (or one of
 * another service or node) is answered exactly like a missing one.
 */
export const closureUploadRefusal = (
  backupArg: IServiceBackupDocument | null,
  addressArg: IClosureAddress,
): TypedResponseError | null => {
  if (!backupArg || backupArg.clusterId !== addressArg.clusterId || backupArg.serviceId !== addressArg.serviceId || backupArg.nodeId !== addressArg.nodeId) {
    return refuse('not-found', [backupRefusalReasons.backupNotFound]);
  }
  if (backupArg.closure) {
    return refuse('conflict', [backupRefusalReasons.closureAlreadyStored]);
  }
  if (backupArg.state === 'failed' && backupArg.failureReason === backupRefusalReasons.backupCancelled) {
    return refuse('conflict', [backupRefusalReasons.backupCancelled]);
  }
  return null;
};

/**
 * Why a relay may not fetch a backup's closure, or null: another cluster's backup (or another
 * service's) is answered like a missing one; a closure restores onto any node of its cluster.
 */
export const closureDownloadRefusal = (
  backupArg: IServiceBackupDocument | null,
  addressArg: Omit<IClosureAddress, 'nodeId'>,
): TypedResponseError | null => {
  if (!backupArg || backupArg.clusterId !== addressArg.clusterId || backupArg.serviceId !== addressArg.serviceId) {
    return refuse('not-found', [backupRefusalReasons.backupNotFound]);
  }
  if (!backupArg.closure) {
    return refuse('not-found', [backupRefusalReasons.closureNotStored]);
  }
  return null;
};

/** Creates an isolated restore under its id; an id already taken is refused. */
export const decideIsolatedRestoreCreation = (
  currentArg: IIsolatedRestoreDocument | null,
  docArg: Omit<IIsolatedRestoreDocument, 'generation'>,
): TDecision<IIsolatedRestoreDocument> =>
  (currentArg
    ? { kind: 'refuse', refusal: refuse('conflict', [backupRefusalReasons.restoreIdInUse]) }
    : { kind: 'create', doc: docArg });

/** Records the node's last answered state on its restore; a restore that is gone has nothing to record on. */
export const decideRestoreStateRecord = (
  currentArg: IIsolatedRestoreDocument | null,
  stateArg: IIsolatedRestoreNodeState,
): TDecision<IIsolatedRestoreDocument> =>
  (currentArg ? { kind: 'write', change: { set: { lastState: stateArg } } } : { kind: 'keep' });
