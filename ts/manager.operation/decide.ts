import type { TDecision } from '../core/store.js';
import { mutationIdReusedReason, mutationIdReusedRefusal, refuse, refuseNamed } from '../core/errors.js';
import type { IOperationDocument, IOperationProgressDocument, IOperationRemoteTransfer } from './documents.js';
import type { IOperationError, IOperationProgress } from '../interfaces/requests/operation.js';

/** Reasons the operation manager gives, defined once. */
export const operationReasons = {
  notFound: 'operation-not-found',
  notRunning: 'operation-not-running',
  /** A rollout's operation ends by `abortRollout`, which can also revert. */
  notCancellable: 'operation-not-cancellable',
  mutationReused: mutationIdReusedReason,
  interrupted: 'interrupted',
  cancelled: 'cancelled',
} as const;

/**
 * Starting an operation under an id: created when new; the same request again (same mutationId,
 * same digest) answers the one already there (kept); another request under that mutationId is refused.
 */
export const decideOperationStart = (
  existingArg: IOperationDocument | null,
  docArg: Omit<IOperationDocument, 'generation'>,
): TDecision<IOperationDocument> => {
  if (!existingArg) {
    return { kind: 'create', doc: docArg };
  }
  if (existingArg.requestSha256 !== docArg.requestSha256) {
    return { kind: 'refuse', refusal: mutationIdReusedRefusal() };
  }
  return { kind: 'keep' };
};

export interface IOperationEnd {
  state: 'completed' | 'failed' | 'cancelled';
  now: number;
  reason?: string;
  error?: IOperationError;
  result?: IOperationDocument['result'];
}

/** Ends a running operation; one that has ended already (cancelled, interrupted) stays as it is. */
export const decideOperationEnd = (currentArg: IOperationDocument | null, endArg: IOperationEnd): TDecision<IOperationDocument> => {
  if (!currentArg || currentArg.state !== 'running') {
    return { kind: 'keep' };
  }
  return {
    kind: 'write',
    change: {
      set: {
        state: endArg.state,
        endedAt: endArg.now,
        ...(endArg.reason !== undefined ? { reason: endArg.reason } : {}),
        ...(endArg.error !== undefined ? { error: endArg.error } : {}),
        ...(endArg.result !== undefined ? { result: endArg.result } : {}),
      },
    },
  };
};

/** An administrator's cancel: only a running operation can be cancelled. */
export const decideOperationCancel = (currentArg: IOperationDocument | null, nowArg: number): TDecision<IOperationDocument> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuse('not-found', [operationReasons.notFound]) };
  }
  if (currentArg.kind === 'rollout') {
    return { kind: 'refuse', refusal: refuseNamed('conflict', operationReasons.notCancellable, `is rollout ${currentArg.id}'s: stop it with abortRollout`, 'request.operationId') };
  }
  if (currentArg.state !== 'running') {
    return { kind: 'refuse', refusal: refuseNamed('conflict', operationReasons.notRunning, `is ${currentArg.state}`, 'operation.state') };
  }
  return decideOperationEnd(currentArg, { state: 'cancelled', now: nowArg, reason: operationReasons.cancelled, error: { code: 'conflict', retryable: false, reasons: [operationReasons.cancelled] } });
};

/**
 * Whether a running operation's instance is gone: its heartbeat is older than the expiry, or the
 * caller knows its instance is gone (the embedded database's data-directory lock proves a
 * previous process ended).
 */
export const isOperationAbandoned = (
  docArg: IOperationDocument,
  progressArg: IOperationProgressDocument | null,
  optionsArg: { now: number; expiryMs: number; instanceId: string; otherInstancesAreGone: boolean },
): boolean => {
  if (docArg.state !== 'running' || docArg.instanceId === optionsArg.instanceId) {
    return false;
  }
  if (optionsArg.otherInstancesAreGone) {
    return true;
  }
  const heartbeatAt = progressArg?.heartbeatAt ?? docArg.startedAt;
  return optionsArg.now - heartbeatAt > optionsArg.expiryMs;
};

/** Progress (and heartbeat) of an operation; written whatever the generation (only its runner writes it). */
export const decideProgress = (
  currentArg: IOperationProgressDocument | null,
  idArg: string,
  progressArg: IOperationProgress,
  nowArg: number,
): TDecision<IOperationProgressDocument> =>
  (currentArg
    ? { kind: 'write', change: { set: { ...progressArg, heartbeatAt: nowArg } } }
    : { kind: 'create', doc: { id: idArg, ...progressArg, heartbeatAt: nowArg } });

/**
 * The bytes this instance moved for an operation another instance runs: only the `transfer`
 * member, so the runner's own progress and heartbeat stay as the runner wrote them.
 */
export const decideRemoteTransfer = (
  currentArg: IOperationProgressDocument | null,
  idArg: string,
  transferArg: IOperationRemoteTransfer,
  nowArg: number,
): TDecision<IOperationProgressDocument> =>
  (currentArg
    ? { kind: 'write', change: { set: { transfer: transferArg } } }
    : { kind: 'create', doc: { id: idArg, phase: 'transfer', bytesDone: 0, bytesTotal: null, updatedAt: nowArg, heartbeatAt: nowArg, transfer: transferArg } });

/** The states an operation ends in; only these are ever forgotten by retention. */
export const finishedOperationStates = ['completed', 'failed', 'cancelled'] as const satisfies readonly IOperationDocument['state'][];

/**
 * Whether retention may forget an operation (Kubernetes' TTL after finished): it ended (an
 * interrupted one is `failed`), and it ended before `cutoffArg`. A running operation never is,
 * however old it is.
 */
export const isOperationPastRetention = (docArg: IOperationDocument, cutoffArg: number): boolean =>
  (finishedOperationStates as readonly string[]).includes(docArg.state)
  && typeof docArg.endedAt === 'number'
  && docArg.endedAt < cutoffArg;
