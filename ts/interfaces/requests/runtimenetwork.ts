import type { IIdentity } from '../data/user.js';
import type {
  IRuntimeNetworkProjection,
  IRuntimeNetworkProjectionApplication,
  IRuntimeNetworkWorkloadLease,
} from '../data/runtimenetwork.js';
import type { IRuntimeNetworkAddressPlan } from '../data/runtimenetworkaddressplan.js';
import type { ITypedContract } from './admin.js';

/**
 * Reads and writes of the runtime network. The upstream text names the data and the pure decisions
 * but no request methods for them; every method here is the project's own definition. One Cloudly
 * holds one runtime network authority, so the plan is read and written without naming it.
 */

/** The authority's current address plan, or null when none has been written yet. */
export type IReq_Admin_GetRuntimeNetworkAddressPlan = ITypedContract<
  'getRuntimeNetworkAddressPlan',
  { identity: IIdentity },
  { plan: IRuntimeNetworkAddressPlan | null }
>;

/**
 * Writes the next revision of the plan. Admitted only by `admitRuntimeNetworkAddressPlanChange` at
 * exactly the following revision, which is the compare-and-swap token: a stale or skipped revision
 * or a lost race answers `conflict`; a plan that breaks a rule answers `invalid-request` with every
 * reason. Writing exactly the stored plan again answers it with `replayed: true`.
 */
export type IReq_Admin_SetRuntimeNetworkAddressPlan = ITypedContract<
  'setRuntimeNetworkAddressPlan',
  { identity: IIdentity; plan: IRuntimeNetworkAddressPlan },
  { plan: IRuntimeNetworkAddressPlan; replayed: boolean }
>;

/**
 * A node's current projection, brought up to date with the facts Cloudly holds first. Every node
 * has one (generation 1 is computed on first read); an unknown node answers `not-found`.
 */
export type IReq_Admin_GetRuntimeNetworkProjection = ITypedContract<
  'getRuntimeNetworkProjection',
  { identity: IIdentity; clusterId: string; nodeId: string },
  /** `signature`: project's own member, see `verifyRuntimeNetworkProjectionSignature`. */
  { projection: IRuntimeNetworkProjection; signature: string }
>;

/** The relay states the workload address leases one node of its cluster holds (replacing the last statement). */
export type IReq_Relay_Cloudly_ReportRuntimeNetworkLeases = ITypedContract<
  'reportRuntimeNetworkLeases',
  { nodeId: string; leases: IRuntimeNetworkWorkloadLease[] },
  { generation: number }
>;

/** The relay reads one node's current projection, brought up to date first. */
export type IReq_Relay_Cloudly_GetRuntimeNetworkProjection = ITypedContract<
  'getClusterNodeRuntimeNetworkProjection',
  { nodeId: string },
  /** `signature`: project's own member, see `verifyRuntimeNetworkProjectionSignature`. */
  { projection: IRuntimeNetworkProjection; signature: string }
>;

/**
 * The relay states that a node applied exactly one projection. Only the node's current projection
 * may be stated; once it is, the next projection may drop the withdrawals it carried.
 */
export type IReq_Relay_Cloudly_ReportRuntimeNetworkProjectionApplication = ITypedContract<
  'reportRuntimeNetworkProjectionApplication',
  { application: IRuntimeNetworkProjectionApplication },
  { application: IRuntimeNetworkProjectionApplication }
>;
