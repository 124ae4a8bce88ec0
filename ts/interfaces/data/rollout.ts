import type { IServicePort, IServiceRoute, IServiceWritableSpec } from './service.js';

/**
 * Rollouts: one service change over the clusters a label selector selects, planned before it is
 * applied and applied in waves gated by Cloudly's own verdicts. Project's own definitions
 * (docs/rollouts.md).
 */

/** The spec members a rollout may change; every member given replaces that member of each service's spec. */
export interface IRolloutChange {
  image?: string;
  replicas?: number;
  ports?: IServicePort[];
  routes?: IServiceRoute[];
}

/** The verdict Cloudly's judge gives (or predicts) for a spec revision. */
export interface IRolloutVerdict {
  state: 'converged' | 'converging' | 'waiting' | 'refused';
  reason: string | null;
}

/** Why a selected cluster takes no part. */
export const rolloutSkipReasons = [
  'cluster-unknown',
  'service-missing',
  'change-refused',
  'service-pending-removal',
] as const;
export type TRolloutSkipReason = (typeof rolloutSkipReasons)[number];

export interface IRolloutSkippedCluster {
  clusterId: string;
  clusterName: string;
  reason: TRolloutSkipReason;
  /** The service concerned, when there is one. */
  serviceId?: string;
  /** What the contract refused (`change-refused`), or since when the cluster is dark. */
  causes?: string[];
}

/** One service a plan would change: what it is now, what it would be, and the verdict predicted for it. */
export interface IRolloutPlanTarget {
  clusterId: string;
  clusterName: string;
  serviceId: string;
  /** The service's generation the plan read: a rollout changes it only at this generation. */
  generation: number;
  specRevision: number;
  /** The spec revision the change makes (the same when the change alters nothing the nodes run). */
  newSpecRevision: number;
  /** The verdict the judge gives the proposed spec against the cluster's current facts. */
  predicted: IRolloutVerdict;
}

export interface IRolloutPlan {
  selector: string;
  serviceName: string;
  organizationId: string | null;
  change: IRolloutChange;
  targets: IRolloutPlanTarget[];
  skipped: IRolloutSkippedCluster[];
}

/** One wave as asked: a cluster count or a percentage of the selection; the first is the canary. */
export interface IRolloutWaveSpec {
  clusters?: number;
  percent?: number;
  /** Wait this long after the wave passed its gate before the next wave starts. */
  pauseMs?: number;
  /** The wave starts only once an administrator approved it (`approveRolloutWave`). */
  requiresApproval?: boolean;
}

/** When a wave passed: every changed service `converged` at its new revision within `timeoutMs`; at most `maxFailures` failures in the whole rollout. */
export interface IRolloutGate {
  timeoutMs: number;
  maxFailures: number;
}

export type TRolloutOnFailure = 'halt' | 'revert';

/** A rollout's lifecycle; the rollout's operation records it (docs/rollouts.md). */
export const rolloutStates = ['pending', 'running', 'paused', 'waiting-approval', 'completed', 'halted', 'aborted'] as const;
export type TRolloutState = (typeof rolloutStates)[number];

export const rolloutWaveStates = ['pending', 'waiting-approval', 'running', 'passed', 'failed', 'cancelled'] as const;
export type TRolloutWaveState = (typeof rolloutWaveStates)[number];

export const rolloutTargetStates = ['pending', 'updating', 'converged', 'failed', 'conflict', 'skipped', 'reverted', 'cancelled'] as const;
export type TRolloutTargetState = (typeof rolloutTargetStates)[number];

export interface IRolloutTargetProgress {
  clusterId: string;
  clusterName: string;
  serviceId: string;
  wave: number;
  state: TRolloutTargetState;
  /** The verdict's reason of a failure, `gate-timeout`, `generation-mismatch` of a conflict, or why it was skipped. */
  reason: string | null;
  /** The spec revision before the change, and the one the change made (null until applied). */
  previousSpecRevision: number;
  newSpecRevision: number | null;
  /** The spec revision a revert made (null unless reverted): a new revision holding the spec of `restoredFromRevision`. */
  revertedSpecRevision: number | null;
  /** The revision whose spec a revert put back (`previousSpecRevision`; null unless reverted). */
  restoredFromRevision: number | null;
  updatedAt: number | null;
}

export interface IRolloutWaveProgress {
  index: number;
  state: TRolloutWaveState;
  clusterIds: string[];
  pauseMs: number;
  requiresApproval: boolean;
  startedAt: number | null;
  endedAt: number | null;
}

export interface IRollout {
  id: string;
  /** Its operation (`getOperation`), which holds its lifecycle `state`: the same id. */
  operationId: string;
  /** The intent's generation (pause, resume, approve and abort are compare-and-swaps on it). */
  generation: number;
  selector: string;
  serviceName: string;
  organizationId: string | null;
  change: IRolloutChange;
  gate: IRolloutGate;
  onFailure: TRolloutOnFailure;
  maxConcurrent: number;
  createdBy: string;
  createdAt: number;
  paused: boolean;
  approvedWaves: number[];
  abort: { revert: boolean; at: number } | null;
  state: TRolloutState;
  currentWave: number;
  failures: number;
  waves: IRolloutWaveProgress[];
  targets: IRolloutTargetProgress[];
  skipped: IRolloutSkippedCluster[];
  endedAt: number | null;
}

/** What a rollout keeps of each target to apply and revert it (never shown whole: the spec is the service's). */
export interface IRolloutStoredTarget {
  clusterId: string;
  clusterName: string;
  serviceId: string;
  wave: number;
  generation: number;
  specRevision: number;
  /** The revision the change makes (the same when the change alters nothing the nodes run). */
  nextSpecRevision: number;
  previousSpec: IServiceWritableSpec;
  nextSpec: IServiceWritableSpec;
}
