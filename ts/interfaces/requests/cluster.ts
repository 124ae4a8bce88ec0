import type { ITypedContract } from './admin.js';
import type { IIdentity } from '../data/user.js';
import type { IClusterNode, IClusterNodeCorestore, IClusterNodeReport } from '../data/clusternode.js';
import type { IClusterRelayAnnouncement, IClusterRelayRegistration } from '../data/clusterrelay.js';
import type { IPageRequest, IPageAnswer } from './pagination.js';

// ---------------------------------------------------------------------------------------------
// Administrator → Cloudly: nodes of a cluster. Project's own definitions.
// ---------------------------------------------------------------------------------------------

/** Every node Cloudly knows for one cluster, whether an administrator added it or a relay reported it. */
export type IReq_Any_Cloudly_GetClusterNodes = ITypedContract<
  'getClusterNodes',
  { identity: IIdentity; clusterId: string } & IPageRequest,
  { nodes: IClusterNode[] } & IPageAnswer
>;

/**
 * Adds a node to a cluster. `nodeId` is the node's own identifier when the caller knows it (the
 * same id the relay reports it under); when omitted, Cloudly chooses one. An id already present
 * in the cluster is refused with `conflict`.
 */
export type IReq_Any_Cloudly_AddClusterNode = ITypedContract<
  'addClusterNode',
  { identity: IIdentity; clusterId: string; name: string; nodeId?: string },
  { node: IClusterNode }
>;

/** Removes a node; answers the node as it was removed. */
export type IReq_Any_Cloudly_RemoveClusterNode = ITypedContract<
  'removeClusterNode',
  { identity: IIdentity; clusterId: string; nodeId: string },
  { node: IClusterNode }
>;

/**
 * Sets (`corestore` an object) or clears (`corestore: null`) a node's Corestore endpoint, as a
 * compare-and-swap on the value the caller read: `expected` is that value, `null` when the node
 * had none. When the stored value differs from `expected`, nothing changes and the answer is
 * `conflict`.
 */
export type IReq_Any_Cloudly_SetClusterNodeCorestore = ITypedContract<
  'setClusterNodeCorestore',
  {
    identity: IIdentity;
    clusterId: string;
    nodeId: string;
    expected: IClusterNodeCorestore | null;
    corestore: IClusterNodeCorestore | null;
  },
  { node: IClusterNode }
>;

/**
 * The relay registrations an administrator asks Cloudly about: what Cloudly accepted, plus
 * whether a verified socket carries each relay right now (`connected`). `clusterIds` narrows the
 * answer to those clusters; without it, every cluster whose relay ever registered is answered.
 */
export type IReq_Any_Cloudly_GetClusterRelayRegistrations = ITypedContract<
  'getClusterRelayRegistrations',
  { identity: IIdentity; clusterIds?: string[] } & IPageRequest,
  { registrations: IClusterRelayRegistration[] } & IPageAnswer
>;

// ---------------------------------------------------------------------------------------------
// Relay → Cloudly over the relay's own authenticated socket (no identity: the socket names the
// cluster). Project's own definitions.
// ---------------------------------------------------------------------------------------------

/**
 * The relay tells Cloudly where it listens. Accepted only from the socket Cloudly elected for the
 * cluster; any other socket of that cluster is refused `unavailable` and may retry.
 */
export type IReq_Relay_Cloudly_RegisterClusterRelay = ITypedContract<
  'registerClusterRelay',
  { registration: IClusterRelayAnnouncement },
  { registration: IClusterRelayRegistration }
>;

/**
 * The relay reports one node of its own cluster. A node Cloudly does not know yet is added
 * (`source: 'relay-report'`, the report must then carry `name`). `hostAddresses` replaces the
 * stored list when present; when absent, the stored list is left as it is.
 */
export type IReq_Relay_Cloudly_ReportClusterNode = ITypedContract<
  'reportClusterNode',
  { report: IClusterNodeReport },
  { node: IClusterNode }
>;

/** One node's Corestore endpoint as the relay reads it; `null` means the node runs none it may reach. */
export interface IClusterNodeCorestoreAssignment {
  nodeId: string;
  corestore: IClusterNodeCorestore | null;
}

/**
 * The relay reads the Corestore endpoints of its own cluster's nodes: the named ones, or all of
 * them when `nodeIds` is omitted. A named node that is not in the relay's cluster is `not-found`.
 */
export type IReq_Relay_Cloudly_GetClusterNodeCorestores = ITypedContract<
  'getClusterNodeCorestores',
  { nodeIds?: string[] },
  { nodes: IClusterNodeCorestoreAssignment[] }
>;
