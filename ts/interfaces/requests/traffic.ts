import type { ITypedContract } from './admin.js';
import type { IIdentity } from '../data/user.js';
import type { IClusterTrafficStatistics } from '../data/clustertraffic.js';

/**
 * Cloudly → relay → ingress (spec 001's table): one page of the cluster's traffic statistics
 * between two UTC days, both included. The relay passes the call to its cluster's ingress and
 * returns its answer.
 */
export type IReq_Cloudly_Relay_GetClusterTrafficStatistics = ITypedContract<
  'getClusterTrafficStatistics',
  { fromDayUtc: string; toDayUtc: string; cursor?: string; limit: number },
  { statistics: IClusterTrafficStatistics[]; nextCursor?: string }
>;

/**
 * admin → Cloudly: the same read for one cluster, passed to its elected relay. Project's own
 * method (the spec names only the relay hop); `limit` defaults to 100.
 */
export type IReq_Any_Cloudly_GetClusterTrafficStatistics = ITypedContract<
  'getClusterTrafficStatistics',
  { identity: IIdentity; clusterId: string; fromDayUtc: string; toDayUtc: string; cursor?: string; limit?: number },
  { statistics: IClusterTrafficStatistics[]; nextCursor?: string }
>;
