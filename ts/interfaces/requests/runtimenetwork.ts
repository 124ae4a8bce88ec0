import type { IIdentity } from '../data/user.js';
import type { IRuntimeNetworkProjection } from '../data/runtimenetwork.js';
import type { IRuntimeNetworkAddressPlan } from '../data/runtimenetworkaddressplan.js';
import type { ITypedContract } from './admin.js';

/**
 * Administrator reads and writes of the runtime network. The upstream text names the data and the
 * pure decisions but no request methods for them; these methods are the project's own definition.
 */

/** The authority's current address plan, or null when none has been written yet. */
export type IReq_Admin_GetRuntimeNetworkAddressPlan = ITypedContract<
  'getRuntimeNetworkAddressPlan',
  { identity: IIdentity; authorityId: string },
  { plan: IRuntimeNetworkAddressPlan | null }
>;

/**
 * Writes the next revision of an authority's plan. Admitted only by
 * `admitRuntimeNetworkAddressPlanChange` at exactly the following revision (the revision is the
 * compare-and-swap token); a lost race or a stale revision answers `conflict`, a plan that breaks
 * the rules `invalid-request` with every reason. Writing the stored plan again answers it with
 * `replayed: true`.
 */
export type IReq_Admin_SetRuntimeNetworkAddressPlan = ITypedContract<
  'setRuntimeNetworkAddressPlan',
  { identity: IIdentity; plan: IRuntimeNetworkAddressPlan },
  { plan: IRuntimeNetworkAddressPlan; replayed: boolean }
>;

/** A node's current projection, or null when Cloudly has computed none for it yet. */
export type IReq_Admin_GetRuntimeNetworkProjection = ITypedContract<
  'getRuntimeNetworkProjection',
  { identity: IIdentity; clusterId: string; nodeId: string },
  { projection: IRuntimeNetworkProjection | null }
>;
