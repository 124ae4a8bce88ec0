import type { IIdentity } from '../data/user.js';
import type { ICluster } from '../data/cluster.js';
import type { IClusterNode } from '../data/clusternode.js';
import type { IClusterRelayRegistration } from '../data/clusterrelay.js';
import type { IClusterIngressDesignation } from '../data/clusteringressdesignation.js';
import type { IService } from '../data/service.js';
import type { IServiceRuntimeStatus } from '../data/serviceruntimestatus.js';
import type { IServiceBackupRecord } from './backup.js';
import type { ITypedContract } from './admin.js';

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
}

export type IReq_Admin_GetClusterOverview = ITypedContract<
  'getClusterOverview',
  { identity: IIdentity; clusterId: string },
  { overview: IClusterOverview }
>;
