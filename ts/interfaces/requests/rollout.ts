import type { IIdentity } from '../data/user.js';
import type { ICluster } from '../data/cluster.js';
import type { ITypedContract } from './admin.js';
import type { IPageAnswer, IPageRequest } from './pagination.js';
import type { IOperation } from './operation.js';
import type {
  IRollout,
  IRolloutChange,
  IRolloutGate,
  IRolloutPlan,
  IRolloutWaveSpec,
  TRolloutOnFailure,
} from '../data/rollout.js';

/**
 * Project's own definition: replaces a cluster's labels (compare-and-swap on the cluster's
 * generation). Keys and values in Kubernetes' syntax (ts/interfaces/data/clusterlabels.ts); an
 * empty object removes every label.
 */
export type IReq_Admin_SetClusterLabels = ITypedContract<
  'setClusterLabels',
  { identity: IIdentity; clusterId: string; labels: Record<string, string>; expectedGeneration: number },
  { cluster: ICluster }
>;

/** Project's own definition: what a change would do on each selected cluster, predicted by Cloudly's judge; writes nothing. */
export type IReq_Admin_PlanRollout = ITypedContract<
  'planRollout',
  { identity: IIdentity; selector: string; organizationId?: string; serviceName: string; change: IRolloutChange },
  { plan: IRolloutPlan }
>;

/**
 * Project's own definition: starts a rollout, advanced wave by wave by the rollout controller, and
 * answers its operation (kind `rollout`, the rollout's id), which `getOperation(s)` follow.
 * Refused before anything changes: `rollout-selects-nothing`, `rollout-overlaps` (the running
 * rollout's id in the cause), waves that do not cover the selection, a change the contract refuses.
 */
export type IReq_Admin_CreateRollout = ITypedContract<
  'createRollout',
  {
    identity: IIdentity;
    selector: string;
    organizationId?: string;
    serviceName: string;
    change: IRolloutChange;
    waves: IRolloutWaveSpec[];
    gate?: Partial<IRolloutGate>;
    onFailure?: TRolloutOnFailure;
    maxConcurrent?: number;
  },
  { rollout: IRollout; plan: IRolloutPlan; operation: IOperation }
>;

export type IReq_Admin_GetRollouts = ITypedContract<
  'getRollouts',
  { identity: IIdentity } & IPageRequest,
  { rollouts: IRollout[] } & IPageAnswer
>;

export type IReq_Admin_GetRollout = ITypedContract<
  'getRollout',
  { identity: IIdentity; rolloutId: string },
  { rollout: IRollout }
>;

/** Project's own definition: no further service is changed until `resumeRollout` (services already changed keep their gate). */
export type IReq_Admin_PauseRollout = ITypedContract<
  'pauseRollout',
  { identity: IIdentity; rolloutId: string; expectedGeneration: number },
  { rollout: IRollout }
>;

export type IReq_Admin_ResumeRollout = ITypedContract<
  'resumeRollout',
  { identity: IIdentity; rolloutId: string; expectedGeneration: number },
  { rollout: IRollout }
>;

/** Project's own definition: lets a wave that `requiresApproval` start. */
export type IReq_Admin_ApproveRolloutWave = ITypedContract<
  'approveRolloutWave',
  { identity: IIdentity; rolloutId: string; wave: number; expectedGeneration: number },
  { rollout: IRollout }
>;

/** Project's own definition: halts the rollout; with `revert`, every changed service goes back to its previous spec at once. */
export type IReq_Admin_AbortRollout = ITypedContract<
  'abortRollout',
  { identity: IIdentity; rolloutId: string; expectedGeneration: number; revert?: boolean },
  { rollout: IRollout }
>;
