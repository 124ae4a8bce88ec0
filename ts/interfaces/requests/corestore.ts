import type { IIdentity } from '../data/user.js';
import type {
  IPlatformBinding,
  IPlatformBindingUpsert,
  TPlatformBindingStatus,
  TPlatformBindingStatusReason,
} from '../data/platformbinding.js';
import type {
  ICorestoreLegacyResourceSelection,
  TClusterCorestoreLegacyResourceInventory,
} from '../data/corestorelegacy.js';
import type { ICorestoreLegacyResourceAdoptionPlanEntry } from '../platform/corestorelegacy.js';
import type { ITypedContract } from './admin.js';
import type { IPageRequest, IPageAnswer } from './pagination.js';

/**
 * Cloudly → relay, on the relay's own socket: one node's legacy inventory as read from that
 * node's Corestore, or why it could not be read.
 */
export type IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources = ITypedContract<
  'getClusterCorestoreLegacyResources',
  { nodeId: string },
  TClusterCorestoreLegacyResourceInventory
>;

/** Administrator → Cloudly: read one node's inventory with the digest an adoption must quote. */
export type IReq_Any_Cloudly_GetCorestoreLegacyResources = ITypedContract<
  'getCorestoreLegacyResources',
  { identity: IIdentity; clusterId: string; nodeId: string },
  { inventory: TClusterCorestoreLegacyResourceInventory; inventorySha256: string | null }
>;

/**
 * Administrator → Cloudly: create the adopting bindings of the selected resources, all or none.
 * Refusals carry `ICorestoreLegacyAdoptionErrorData`.
 */
export type IReq_Any_Cloudly_AdoptCorestoreLegacyResources = ITypedContract<
  'adoptCorestoreLegacyResources',
  {
    identity: IIdentity;
    clusterId: string;
    nodeId: string;
    expectedInventorySha256: string;
    resources: ICorestoreLegacyResourceSelection[];
  },
  { platformBindings: IPlatformBinding[]; plan: ICorestoreLegacyResourceAdoptionPlanEntry[] }
>;

/**
 * Administrator → Cloudly: create (`expectedGeneration: null`) or change the binding of a service
 * capability. Project's own request shape.
 */
export type IReq_Any_Cloudly_UpsertPlatformBinding = ITypedContract<
  'upsertPlatformBinding',
  { identity: IIdentity; platformBinding: IPlatformBindingUpsert; expectedGeneration: number | null },
  { platformBinding: IPlatformBinding }
>;

/** Administrator → Cloudly: the bindings of one service, or all. Project's own. */
export type IReq_Any_Cloudly_GetPlatformBindings = ITypedContract<
  'getPlatformBindings',
  { identity: IIdentity; serviceId?: string } & IPageRequest,
  { platformBindings: IPlatformBinding[] } & IPageAnswer
>;

/**
 * Relay → Cloudly: a node's report on one binding. A report without `statusReason` (or with null)
 * clears the stored reason.
 */
export type IReq_Relay_Cloudly_UpdatePlatformBindingStatus = ITypedContract<
  'updatePlatformBindingStatus',
  { platformBindingId: string; status: TPlatformBindingStatus; statusReason?: TPlatformBindingStatusReason | null },
  { platformBinding: IPlatformBinding }
>;

/**
 * Project's own definition: removes one platform binding (compare-and-swap on its generation).
 * Nothing else is removed; the binding leaves the cluster's desired state.
 */
export type IReq_Admin_DeletePlatformBinding = ITypedContract<
  'deletePlatformBinding',
  { identity: IIdentity; platformBindingId: string; expectedGeneration: number },
  { platformBinding: IPlatformBinding }
>;
