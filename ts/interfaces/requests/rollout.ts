import type { IIdentity } from '../data/user.js';
import type { ICluster } from '../data/cluster.js';
import type { ITypedContract } from './admin.js';

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
