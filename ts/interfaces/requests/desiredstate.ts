import type { IIdentity } from '../data/user.js';
import type {
  IClusterPlatformDesiredState,
  IClusterPlatformObservedReport,
  IClusterResolvedRouteTable,
  IClusterUnresolvedRoute,
  IClusterAddressLease,
} from '../data/desiredstate.js';
import type { ITypedContract } from './admin.js';

/**
 * Project's own definitions of the relay-session reads and reports the spec names (spec 000 near
 * line 393): no identity, the verified relay socket names the cluster; elected relay only.
 */

/** Relay → Cloudly: the cluster's desired state; `unchanged` (without the body) when `knownRevision` is current. */
export type IReq_Relay_Cloudly_GetClusterPlatformDesiredState = ITypedContract<
  'getClusterPlatformDesiredState',
  { knownRevision?: number },
  { unchanged: true; revision: number; digest: string } | { unchanged: false; desiredState: IClusterPlatformDesiredState }
>;

/** Cloudly → relay: a newer desired state exists; read it. Coalesced; a relay that misses one still converges by reading. */
export type IReq_Cloudly_Relay_PushClusterPlatformDesiredStateChanged = ITypedContract<
  'pushClusterPlatformDesiredStateChanged',
  { revision: number; digest: string },
  { acknowledged: boolean }
>;

/** Relay → Cloudly: what runs where. All or nothing: one bad entry refuses the report. */
export type IReq_Relay_Cloudly_ReportClusterPlatformObservedState = ITypedContract<
  'reportClusterPlatformObservedState',
  IClusterPlatformObservedReport,
  { accepted: number; removed: string[] }
>;

/**
 * Relay → Cloudly: the route table computed from the services' declared routes, each route with the
 * lease addresses and port it resolves to; a route with no target yet is left out.
 */
export type IReq_Relay_Cloudly_GetClusterRouteTable = ITypedContract<
  'getClusterRouteTable',
  Record<string, never>,
  { table: IClusterResolvedRouteTable }
>;

/** Administrator → Cloudly: the same table, and every route left out of it with the reason. */
export type IReq_Any_Cloudly_GetClusterRouteTableResolution = ITypedContract<
  'getClusterRouteTableResolution',
  { identity: IIdentity; clusterId: string },
  /** `leases`: every workload address the cluster's services hold, sorted by address (the routes are resolved against them). */
  { table: IClusterResolvedRouteTable; unresolved: IClusterUnresolvedRoute[]; leases: IClusterAddressLease[] }
>;

/** Administrator → Cloudly: remove a service. It leaves the desired state at once and is deleted when its relay reports it stopped, or at once with `force`. */
export type IReq_Any_Cloudly_DeleteService = ITypedContract<
  'deleteService',
  { identity: IIdentity; serviceId: string; expectedGeneration: number; force?: boolean },
  { serviceId: string; deleted: boolean; pendingRemoval: boolean }
>;
