import type { IIdentity } from '../data/user.js';
import type { IRefusalCause } from '../data/refusal.js';
import type { TBackupSnapshot } from '../data/backup.js';
import type { IIsolatedRestoreNodeState } from '../data/isolatedrestore.js';
import type { ITypedContract } from './admin.js';
import type { IPageRequest, IPageAnswer } from './pagination.js';
import type { IServiceBackupRecord } from './backup.js';
import type { TRolloutState, TRolloutTargetState } from '../data/rollout.js';

/**
 * Project's own definitions (the contract text is silent on long-running work): an operation is
 * what Cloudly answers at once for work that takes as long as a relay needs (a backup, a restore).
 * The caller follows it with `getOperation` / `getOperations` and may `cancelOperation` it.
 * docs/api-dashboard.md describes the states, phases and the cancel rule.
 */

export const operationStates = ['running', 'completed', 'failed', 'cancelled'] as const;
export type TOperationState = typeof operationStates[number];

export const operationKinds = ['service-backup', 'service-restore', 'isolated-restore', 'backup-drill', 'rollout'] as const;
export type TOperationKind = typeof operationKinds[number];

/** Where an operation is; bytes are the closure bytes moved between Cloudly and the relay. */
export interface IOperationProgress {
  /**
   * `queued` (accepted, not started), `relay` (the relay works: snapshots, export),
   * `transfer` (closure bytes move), `recording` (Cloudly records the outcome), `done`;
   * `waves` for a rollout whose waves are under way (its `rollout` member says how far; no bytes move).
   */
  phase: 'queued' | 'relay' | 'transfer' | 'recording' | 'waves' | 'done';
  bytesDone: number;
  /** Known once the closure's descriptor arrived; null before (or when no bytes move). */
  bytesTotal: number | null;
  /** Epoch ms of the last progress write. */
  updatedAt: number;
}

/** How a failed operation was refused: the same error data a blocking call would have thrown. */
export interface IOperationError {
  code: string;
  retryable: boolean;
  reasons?: string[];
  /** The refusal's sentences for people, each naming its path when it has one. */
  causes?: IRefusalCause[];
  /** The relay's own error data when the relay refused (`relay-refused`). */
  relayError?: unknown;
}

/**
 * A rollout's operation (kind `rollout`, the same id as the rollout): its lifecycle as the rollout
 * controller records it, and how far its services got. The waves and each service: `getRollout`.
 */
export interface IOperationRollout {
  rolloutId: string;
  /** `pending`, `running`, `paused`, `waiting-approval` (the operation `running`), `completed`, `halted` (`failed`), `aborted` (`cancelled`). */
  state: TRolloutState;
  /** Whether the changed services were put back (on failure with `revert`, or an abort asking for it). */
  reverted: boolean;
  currentWave: number;
  waves: number;
  failures: number;
  /** How many of its services are in each state (states with none are left out). */
  targets: Partial<Record<TRolloutTargetState, number>>;
  targetsTotal: number;
}

export interface IOperation {
  operationId: string;
  kind: TOperationKind;
  /**
   * The admin method that started it. For an isolated restore, `nodeId` is its target node. A
   * rollout spans clusters: its `clusterId`, `serviceId`, `nodeId` and `backupId` are empty.
   */
  method: string;
  state: TOperationState;
  /** Why it failed or was cancelled (the first reason; `interrupted` when its instance died). */
  reason?: string;
  error?: IOperationError;
  clusterId: string;
  serviceId: string;
  nodeId: string;
  backupId: string;
  progress: IOperationProgress;
  /** The administrator's user id that started it. */
  requestedBy: string;
  mutationId?: string;
  startedAt: number;
  endedAt?: number;
  generation: number;
  /**
   * What the blocking call used to answer, once completed: the backup (for an isolated restore,
   * the one restored from), `restored` of a restore, `restoreId` and the node's `state` of an
   * isolated restore.
   */
  result?: {
    backup: IServiceBackupRecord;
    restored?: TBackupSnapshot[];
    restoreId?: string;
    state?: IIsolatedRestoreNodeState;
    /** A drill's: the bytes the node staged and proved before it restored them. */
    drillBytes?: number;
  };
  /** A rollout's lifecycle and progress (kind `rollout` only). */
  rollout?: IOperationRollout;
}

/** One operation by id. */
export type IReq_Admin_GetOperation = ITypedContract<
  'getOperation',
  { identity: IIdentity; operationId: string },
  { operation: IOperation }
>;

/** Operations, optionally of one cluster, service or state; paged like every admin list. */
export type IReq_Admin_GetOperations = ITypedContract<
  'getOperations',
  { identity: IIdentity; clusterId?: string; serviceId?: string; state?: TOperationState } & IPageRequest,
  { operations: IOperation[] } & IPageAnswer
>;

/**
 * Cancels a running operation. The relay contract has no cancel: Cloudly stops waiting, marks the
 * operation `cancelled`, aborts a closure stream it is receiving or sending, and discards what the
 * relay answers later. The relay may still finish its own part on the node.
 */
export type IReq_Admin_CancelOperation = ITypedContract<
  'cancelOperation',
  { identity: IIdentity; operationId: string },
  { operation: IOperation }
>;
