import type { IIdentity } from '../data/user.js';
import type { IRouteCertificateStatus } from '../data/routecertificate.js';
import type { ICluster } from '../data/cluster.js';
import type { IClusterNode } from '../data/clusternode.js';
import type { IClusterRelayRegistration } from '../data/clusterrelay.js';
import type { IClusterIngressDesignation } from '../data/clusteringressdesignation.js';
import type { IService } from '../data/service.js';
import type { IRuntimeLiveness, IServiceRuntimeStatus } from '../data/serviceruntimestatus.js';
import type { IServiceBackupRecord } from './backup.js';
import type { ITypedContract } from './admin.js';
import type { IPageRequest, IPageAnswer } from './pagination.js';

/** Project's own definition: the state of a cluster's relay connection, as the answering instance sees it. */
export interface IClusterRelayConnectionState {
  /** Relay sockets of this cluster open on the answering instance, registered or not. */
  socketsOpenHere: Array<{ sessionId: string; connectedAt: number; elected: boolean }>;
  /** Whether an elected relay socket holds the cluster's lease on any instance. */
  connected: boolean;
  /** The relay's accepted registration, or null when it never registered. */
  registration: IClusterRelayRegistration | null;
}

/** Project's own definition: one service on the overview. */
export interface IClusterOverviewService {
  service: IService;
  /** The runtime status as last judged and stored; null when it was never judged yet. */
  runtimeStatus: IServiceRuntimeStatus | null;
  /**
   * Null while what is shown of the service is current; otherwise why not (`relay-disconnected`,
   * `observed-state-stale`) and since when: `runtimeStatus` is then the last verdict judged, and the
   * service counts as `unknown`, never `converged` or `converging` (docs/reconciler.md, "Liveness").
   */
  unknown: IRuntimeLiveness | null;
  /** The newest backup of the service, or null. */
  latestBackup: IServiceBackupRecord | null;
}

/**
 * Project's own definition: everything a dashboard's cluster page shows, in one call with one read
 * per kind of document (docs/api-dashboard.md).
 */
export interface IClusterOverview {
  cluster: ICluster;
  relay: IClusterRelayConnectionState;
  nodes: IClusterNode[];
  services: IClusterOverviewService[];
  ingressDesignation: IClusterIngressDesignation | null;
  /** Each route opted in to a certificate (`certificate: 'acme'`), sorted by hostname: its status, never a key. */
  certificates: IRouteCertificateStatus[];
}

export type IReq_Admin_GetClusterOverview = ITypedContract<
  'getClusterOverview',
  { identity: IIdentity; clusterId: string },
  { overview: IClusterOverview }
>;

/**
 * Project's own definition: a relay's connection as the fleet page shows it. `connected`: a
 * registered relay holds the cluster's lease; `unregistered`: a relay socket is connected but its
 * relay never registered; `missing`: no relay is connected.
 */
export type TFleetRelayState = 'connected' | 'unregistered' | 'missing';

/** Project's own definition: the buckets the overviews count services in. */
export type TFleetRuntimeBucket = 'converged' | 'converging' | 'waiting' | 'refused' | 'unjudged' | 'unknown';

/** Project's own definition: one cluster's counts and health on the fleet page. */
export interface IFleetClusterSummary {
  cluster: ICluster;
  relay: { state: TFleetRelayState; registered: boolean; socketsOpenHere: number };
  nodeCount: number;
  /**
   * Services by their stored runtime state; `unjudged` for a service never judged yet, `unknown`
   * for one whose cluster is not current (its relay gone past the grace, or its reports stale),
   * whatever its last verdict was.
   */
  services: { total: number; byRuntimeState: Record<TFleetRuntimeBucket, number> };
  /** Null while the cluster is current; otherwise why its services read `unknown`, and since when. */
  unknown: IRuntimeLiveness | null;
  /** Backups by stored state (only the states that need attention are counted). */
  backups: { running: number; failed: number };
}

/**
 * Project's own definition: every cluster's summary, paged like the cluster list (without `limit`
 * and `cursor`, every cluster in creation order); one read per kind for the whole page.
 */
export type IReq_Admin_GetFleetOverview = ITypedContract<
  'getFleetOverview',
  /** `selector`: a label selector; only the clusters it selects. */
  { identity: IIdentity; selector?: string } & IPageRequest,
  { clusters: IFleetClusterSummary[] } & IPageAnswer
>;
