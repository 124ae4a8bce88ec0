import type { IIdentity } from '../data/user.js';
import type { ICluster } from '../data/cluster.js';
import type { IPageRequest, IPageAnswer } from './pagination.js';

/** Shape every request contract here follows (typedrequest's ITypedRequest, narrowed). */
export interface ITypedContract<TMethod extends string, TRequest, TResponse> {
  method: TMethod;
  request: TRequest;
  response: TResponse;
}

export type IReq_Admin_LoginWithUsernameAndPassword = ITypedContract<
  'adminLoginWithUsernameAndPassword',
  { username: string; password: string },
  { identity: IIdentity }
>;

export type IReq_Any_Cloudly_CreateCluster = ITypedContract<
  'createCluster',
  { identity: IIdentity; name: string },
  { cluster: ICluster; relayToken: string }
>;

export type IReq_Any_Cloudly_GetClusters = ITypedContract<
  'getClusters',
  /** `selector`: project's own member, a label selector (ts/interfaces/data/clusterlabels.ts); only the clusters it selects. */
  { identity: IIdentity; selector?: string } & IPageRequest,
  { clusters: ICluster[] } & IPageAnswer
>;

export type IReq_Any_Cloudly_GetClusterById = ITypedContract<
  'getClusterById',
  { identity: IIdentity; clusterId: string },
  { cluster: ICluster }
>;

export type IReq_Any_Cloudly_RotateClusterRelayToken = ITypedContract<
  'rotateClusterRelayToken',
  { identity: IIdentity; clusterId: string; expectedGeneration: number },
  { cluster: ICluster; relayToken: string }
>;

/**
 * Project's own definition: removes a cluster (compare-and-swap on its generation). Refused
 * `conflict` while services exist on it. Its relay sockets are closed; its nodes, relay
 * registration and name reservation are removed (docs/api-dashboard.md lists the cascade).
 */
export type IReq_Admin_DeleteCluster = ITypedContract<
  'deleteCluster',
  { identity: IIdentity; clusterId: string; expectedGeneration: number },
  { cluster: ICluster; removedNodes: number; closedSockets: number }
>;
