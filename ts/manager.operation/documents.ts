import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import type {
  IOperation,
  IOperationError,
  IOperationProgress,
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
}

export interface IOperationProgressDocument extends IStoredDocument, IOperationProgress {
  /** Renewed by the running instance; an operation whose heartbeat stops is interrupted. */
  heartbeatAt: number;
}

export const operationKind = defineDocumentKind<IOperationDocument>('CloudlyOperation');
export const operationProgressKind = defineDocumentKind<IOperationProgressDocument>('CloudlyOperationProgress', { audited: false });

export const initialProgress = (nowArg: number): IOperationProgress => ({ phase: 'queued', bytesDone: 0, bytesTotal: null, updatedAt: nowArg });

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
    ? { phase: docArg.state === 'completed' ? 'done' : progressArg.phase, bytesDone: progressArg.bytesDone, bytesTotal: progressArg.bytesTotal, updatedAt: progressArg.updatedAt }
    : { ...initialProgress(docArg.startedAt), ...(docArg.state === 'completed' ? { phase: 'done' as const } : {}) },
  requestedBy: docArg.requestedBy,
  ...(docArg.mutationId !== undefined ? { mutationId: docArg.mutationId } : {}),
  startedAt: docArg.startedAt,
  ...(docArg.endedAt !== undefined ? { endedAt: docArg.endedAt } : {}),
  generation: docArg.generation,
  ...(docArg.result !== undefined ? { result: docArg.result } : {}),
});
