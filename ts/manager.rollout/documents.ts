import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import type { IOperation, IOperationRollout } from '../interfaces/requests/operation.js';
import { initialProgress, type IOperationDocument } from '../manager.operation/documents.js';
import type {
  IRollout,
  IRolloutChange,
  IRolloutGate,
  IRolloutSkippedCluster,
  IRolloutStoredTarget,
  TRolloutOnFailure,
  TRolloutState,
  TRolloutTargetState,
  TRolloutWaveState,
} from '../interfaces/data/rollout.js';

/**
 * A rollout is kept in three documents under one id: what was asked (`CloudlyRollout`: the plan as
 * read, the waves, and the controls administrators change: pause, approvals, abort), its operation
 * (`CloudlyOperation` of kind `rollout`: the lifecycle state, the one place it is stored) and how
 * far each wave and service got (`CloudlyRolloutProgress`). After the creation, only the rollout
 * controller writes the operation and the progress. All three are audited, so the watch delivers them.
 */
export interface IRolloutDocument extends IStoredDocument {
  selector: string;
  serviceName: string;
  organizationId: string | null;
  change: IRolloutChange;
  gate: IRolloutGate;
  onFailure: TRolloutOnFailure;
  maxConcurrent: number;
  waves: Array<{ clusterIds: string[]; pauseMs: number; requiresApproval: boolean }>;
  targets: IRolloutStoredTarget[];
  skipped: IRolloutSkippedCluster[];
  createdBy: string;
  createdAt: number;
  paused: boolean;
  approvedWaves: number[];
  abort: { revert: boolean; at: number } | null;
}

export interface IRolloutTargetRecord {
  serviceId: string;
  state: TRolloutTargetState;
  reason: string | null;
  /** The service's generation and spec revision after the rollout's change (null until it committed). */
  appliedGeneration: number | null;
  newSpecRevision: number | null;
  revertedSpecRevision: number | null;
  /** Set before the service is changed: a run that finds it without `appliedGeneration` looks for the committed change first. */
  applying: boolean;
  updatedAt: number | null;
}

/**
 * How far a rollout got, as the controller decides on it (./decide.ts): its lifecycle `state` and
 * `endedAt` are stored in its operation, the rest in `CloudlyRolloutProgress` (`IRolloutDetailDocument`).
 */
export interface IRolloutProgressDocument extends IStoredDocument {
  state: TRolloutState;
  currentWave: number;
  failures: number;
  waves: Array<{ state: TRolloutWaveState; startedAt: number | null; endedAt: number | null; notBefore: number | null }>;
  targets: IRolloutTargetRecord[];
  /** Set once a revert of every changed service was decided (on failure with `revert`, or an abort asking for it). */
  reverting: boolean;
  endedAt: number | null;
}

/** The stored progress: everything but the lifecycle, which is the operation's. */
export type IRolloutDetailDocument = Omit<IRolloutProgressDocument, 'state' | 'endedAt'>;

export const rolloutKind = defineDocumentKind<IRolloutDocument>('CloudlyRollout', {
  auditedFields: ['paused', 'approvedWaves', 'abort'],
});
export const rolloutProgressKind = defineDocumentKind<IRolloutDetailDocument>('CloudlyRolloutProgress', {
  auditedFields: ['currentWave', 'failures'],
});

/**
 * Which rollout holds a service (id: the service id): taken by compare-and-swap when a rollout is
 * created, so two rollouts over one service cannot both start; a finished holder's claim is taken over.
 */
export interface IRolloutServiceClaimDocument extends IStoredDocument {
  rolloutId: string;
  claimedAt: number;
}
export const rolloutServiceClaimKind = defineDocumentKind<IRolloutServiceClaimDocument>('CloudlyRolloutServiceClaim', { audited: false });

export const terminalRolloutStates: readonly TRolloutState[] = ['completed', 'halted', 'aborted'];

/** The operation's own state for a rollout's: running until it ends; halted is `failed`, aborted `cancelled`. */
const operationStateOf = (stateArg: TRolloutState): IOperation['state'] => {
  switch (stateArg) {
    case 'completed': return 'completed';
    case 'halted': return 'failed';
    case 'aborted': return 'cancelled';
    default: return 'running';
  }
};

/** The operation's reason (and its `error`'s) for a rollout that halted or was aborted; the services' own reasons are in `getRollout`. */
export const rolloutOperationReasons = Object.freeze({
  halted: 'rollout-halted',
  aborted: 'rollout-aborted',
} as const);

/** The lifecycle members of a rollout's operation for a rollout state: one write sets them together. */
export const rolloutLifecycle = (
  progressArg: Pick<IRolloutProgressDocument, 'state' | 'endedAt' | 'reverting'>,
): Pick<IOperationDocument, 'state' | 'reason' | 'error' | 'endedAt' | 'rollout'> => {
  const state = operationStateOf(progressArg.state);
  const reason = progressArg.state === 'halted' ? rolloutOperationReasons.halted : progressArg.state === 'aborted' ? rolloutOperationReasons.aborted : undefined;
  return {
    state,
    ...(reason ? { reason, error: { code: 'conflict', retryable: false, reasons: [reason] } } : {}),
    ...(progressArg.endedAt !== null ? { endedAt: progressArg.endedAt } : {}),
    rollout: { state: progressArg.state, reverted: progressArg.reverting },
  };
};

/** A rollout's operation as its creation stores it: `pending`, started when the rollout was created. */
export const initialRolloutOperation = (docArg: IRolloutDocument): Omit<IOperationDocument, 'generation'> => ({
  id: docArg.id,
  kind: 'rollout',
  method: 'createRollout',
  clusterId: '',
  serviceId: '',
  nodeId: '',
  backupId: '',
  requestedBy: docArg.createdBy,
  requestSha256: '',
  instanceId: '',
  input: {},
  startedAt: docArg.createdAt,
  ...rolloutLifecycle({ state: 'pending', endedAt: null, reverting: false }),
});

/** The progress the controller decides on: the stored detail with the operation's lifecycle. */
export const rolloutProgressOf = (detailArg: IRolloutDetailDocument, operationArg: IOperationDocument | null): IRolloutProgressDocument => ({
  ...detailArg,
  state: operationArg?.rollout?.state ?? 'pending',
  endedAt: operationArg?.endedAt ?? null,
});

/** The detail of a decided progress, as stored (without the lifecycle). */
export const rolloutDetailOf = (progressArg: IRolloutProgressDocument): Omit<IRolloutDetailDocument, 'id' | 'generation'> => {
  const { id: _id, generation: _generation, state: _state, endedAt: _endedAt, ...detail } = progressArg;
  return detail;
};

/** The public operation of a rollout: its lifecycle, and how many services are in each state. */
export const toPublicRolloutOperation = (operationArg: IOperationDocument, detailArg: IRolloutDetailDocument | null): IOperation => {
  const targets: IOperationRollout['targets'] = {};
  for (const record of detailArg?.targets ?? []) {
    targets[record.state] = (targets[record.state] ?? 0) + 1;
  }
  const state = operationArg.rollout?.state ?? 'pending';
  return {
    operationId: operationArg.id,
    kind: operationArg.kind,
    method: operationArg.method,
    state: operationArg.state,
    ...(operationArg.reason !== undefined ? { reason: operationArg.reason } : {}),
    ...(operationArg.error !== undefined ? { error: operationArg.error } : {}),
    clusterId: operationArg.clusterId,
    serviceId: operationArg.serviceId,
    nodeId: operationArg.nodeId,
    backupId: operationArg.backupId,
    progress: {
      ...initialProgress(operationArg.startedAt),
      phase: state === 'pending' ? 'queued' : terminalRolloutStates.includes(state) ? 'done' : 'waves',
      updatedAt: Math.max(operationArg.startedAt, ...(detailArg?.targets ?? []).map((record) => record.updatedAt ?? 0)),
    },
    requestedBy: operationArg.requestedBy,
    startedAt: operationArg.startedAt,
    ...(operationArg.endedAt !== undefined ? { endedAt: operationArg.endedAt } : {}),
    generation: operationArg.generation,
    rollout: {
      rolloutId: operationArg.id,
      state,
      reverted: operationArg.rollout?.reverted ?? false,
      currentWave: detailArg?.currentWave ?? 0,
      waves: detailArg?.waves.length ?? 0,
      failures: detailArg?.failures ?? 0,
      targets,
      targetsTotal: detailArg?.targets.length ?? 0,
    },
  };
};

/** The public rollout: what was asked, its progress, and its operation's lifecycle (`pending` before the controller first looked). */
export const toPublicRollout = (docArg: IRolloutDocument, detailArg: IRolloutDetailDocument | null, operationArg: IOperationDocument | null): IRollout => {
  const progressArg = detailArg ? rolloutProgressOf(detailArg, operationArg) : null;
  const state = operationArg?.rollout?.state ?? 'pending';
  const records = new Map((progressArg?.targets ?? []).map((record) => [record.serviceId, record]));
  return {
    id: docArg.id,
    operationId: docArg.id,
    generation: docArg.generation,
    selector: docArg.selector,
    serviceName: docArg.serviceName,
    organizationId: docArg.organizationId,
    change: docArg.change,
    gate: docArg.gate,
    onFailure: docArg.onFailure,
    maxConcurrent: docArg.maxConcurrent,
    createdBy: docArg.createdBy,
    createdAt: docArg.createdAt,
    paused: docArg.paused,
    approvedWaves: [...docArg.approvedWaves],
    abort: docArg.abort,
    state,
    currentWave: progressArg?.currentWave ?? 0,
    failures: progressArg?.failures ?? 0,
    waves: docArg.waves.map((wave, index) => ({
      index,
      state: progressArg?.waves[index]?.state ?? 'pending',
      clusterIds: [...wave.clusterIds],
      pauseMs: wave.pauseMs,
      requiresApproval: wave.requiresApproval,
      startedAt: progressArg?.waves[index]?.startedAt ?? null,
      endedAt: progressArg?.waves[index]?.endedAt ?? null,
    })),
    targets: docArg.targets.map((target) => {
      const record = records.get(target.serviceId);
      return {
        clusterId: target.clusterId,
        clusterName: target.clusterName,
        serviceId: target.serviceId,
        wave: target.wave,
        state: record?.state ?? 'pending',
        reason: record?.reason ?? null,
        previousSpecRevision: target.specRevision,
        newSpecRevision: record?.newSpecRevision ?? null,
        revertedSpecRevision: record?.revertedSpecRevision ?? null,
        restoredFromRevision: record?.state === 'reverted' ? target.specRevision : null,
        updatedAt: record?.updatedAt ?? null,
      };
    }),
    skipped: docArg.skipped,
    endedAt: operationArg?.endedAt ?? null,
  };
};
