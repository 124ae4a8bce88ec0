import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import type {
  IOperation,
  IOperationError,
  IOperationProgress,
  IOperationRollout,
  TOperationKind,
  TOperationState,
} from '../interfaces/requests/operation.js';

/**
 * An operation is kept in two documents: the operation itself (audited: its start, cancel and end
 * are changes someone asked for) and its progress (not audited: bytes and heartbeats written a few
 * times a second would flood the audit log). Both share the operation's id.
 */
export interface IOperationDocument extends IStoredDocument {
  kind: TOperationKind;
  method: string;
  state: TOperationState;
  reason?: string;
  error?: IOperationError;
  clusterId: string;
  serviceId: string;
  nodeId: string;
  backupId: string;
  requestedBy: string;
  mutationId?: string;
  /** Digest of the request, so a reused mutationId with another request is refused. */
  requestSha256: string;
  /** The Cloudly instance that runs it (a random id per process start). */
  instanceId: string;
  /** What the runner needs that the backup document does not hold (tags, restore options). */
  input: Record<string, unknown>;
  startedAt: number;
  endedAt?: number;
  result?: IOperation['result'];
  /** A rollout's lifecycle (kind `rollout`), written with `state` in one write by the rollout controller. */
  rollout?: Pick<IOperationRollout, 'state' | 'reverted'>;
}

/**
 * Closure bytes another instance moves for an operation: the relay's stream arrives on the socket
 * of the instance that holds the relay, which need not be the instance that runs the operation.
 */
export interface IOperationRemoteTransfer {
  bytesDone: number;
  bytesTotal: number | null;
  updatedAt: number;
  /** The instance whose socket carries the stream. */
  instanceId: string;
}

export interface IOperationProgressDocument extends IStoredDocument, IOperationProgress {
  /** Renewed by the running instance; an operation whose heartbeat stops is interrupted. */
  heartbeatAt: number;
  /** Written only by the instance that moves the bytes when it is not the runner; the runner never writes it. */
  transfer?: IOperationRemoteTransfer;
}

export const operationKind = defineDocumentKind<IOperationDocument>('CloudlyOperation');
export const operationProgressKind = defineDocumentKind<IOperationProgressDocument>('CloudlyOperationProgress', { audited: false });

export const initialProgress = (nowArg: number): IOperationProgress => ({ phase: 'queued', bytesDone: 0, bytesTotal: null, updatedAt: nowArg });

/**
 * The progress a reader sees: the runner's own, with the bytes another instance moved when the
 * runner has none of its own. While that transfer is the newest news it is the phase too.
 */
export const judgeOperationProgress = (progressArg: IOperationProgressDocument): IOperationProgress => {
  const own: IOperationProgress = { phase: progressArg.phase, bytesDone: progressArg.bytesDone, bytesTotal: progressArg.bytesTotal, updatedAt: progressArg.updatedAt };
  const remote = progressArg.transfer;
  if (!remote) {
    return own;
  }
  if (remote.updatedAt >= own.updatedAt && own.phase !== 'recording' && own.phase !== 'done') {
    return { phase: 'transfer', bytesDone: remote.bytesDone, bytesTotal: remote.bytesTotal, updatedAt: remote.updatedAt };
  }
  return own.bytesDone > 0 ? own : { ...own, bytesDone: remote.bytesDone, bytesTotal: own.bytesTotal ?? remote.bytesTotal };
};

/** The public operation: the document's members and its latest progress. */
export const toPublicOperation = (docArg: IOperationDocument, progressArg: IOperationProgressDocument | null): IOperation => ({
  operationId: docArg.id,
  kind: docArg.kind,
  method: docArg.method,
  state: docArg.state,
  ...(docArg.reason !== undefined ? { reason: docArg.reason } : {}),
  ...(docArg.error !== undefined ? { error: docArg.error } : {}),
  clusterId: docArg.clusterId,
  serviceId: docArg.serviceId,
  nodeId: docArg.nodeId,
  backupId: docArg.backupId,
  progress: progressArg
    ? { ...judgeOperationProgress(progressArg), ...(docArg.state === 'completed' ? { phase: 'done' as const } : {}) }
    : { ...initialProgress(docArg.startedAt), ...(docArg.state === 'completed' ? { phase: 'done' as const } : {}) },
  requestedBy: docArg.requestedBy,
  ...(docArg.mutationId !== undefined ? { mutationId: docArg.mutationId } : {}),
  startedAt: docArg.startedAt,
  ...(docArg.endedAt !== undefined ? { endedAt: docArg.endedAt } : {}),
  generation: docArg.generation,
  ...(docArg.result !== undefined ? { result: docArg.result } : {}),
});
