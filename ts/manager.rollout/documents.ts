import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
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
 * A rollout is kept in two documents under one id: what was asked (`CloudlyRollout`: the plan as
 * read, the waves, and the controls administrators change: pause, approvals, abort) and how far it
 * got (`CloudlyRolloutProgress`, written only by the rollout controller). Both are audited, so the
 * watch delivers them.
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

export const rolloutKind = defineDocumentKind<IRolloutDocument>('CloudlyRollout', {
  auditedFields: ['paused', 'approvedWaves', 'abort'],
});
export const rolloutProgressKind = defineDocumentKind<IRolloutProgressDocument>('CloudlyRolloutProgress', {
  auditedFields: ['state', 'currentWave', 'failures'],
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

/** The public rollout: what was asked, and its progress (as `pending` before the controller first looked). */
export const toPublicRollout = (docArg: IRolloutDocument, progressArg: IRolloutProgressDocument | null): IRollout => {
  const records = new Map((progressArg?.targets ?? []).map((record) => [record.serviceId, record]));
  return {
    id: docArg.id,
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
    state: progressArg?.state ?? 'pending',
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
        updatedAt: record?.updatedAt ?? null,
      };
    }),
    skipped: docArg.skipped,
    endedAt: progressArg?.endedAt ?? null,
  };
};
