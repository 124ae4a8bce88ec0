import type { CloudlyApi } from './api.js';
import type { ICluster } from '../../ts/interfaces/data/cluster.js';
import type { TSame } from '../../ts/interfaces/private/sametype.js';

/**
 * Compiled by `npm run check` (web/tsconfig.json takes every file of web/src) and never bundled
 * (no page imports it). It holds the dashboard to calls typed by the method name alone: if an
 * untyped form of `api.call` came back (an answer type named by the caller, any method string),
 * the lines marked `@ts-expect-error` would compile, and the check fails on the unused directive.
 */

export const typedCallsOnly = async (apiArg: CloudlyApi): Promise<void> => {
  // @ts-expect-error an answer type named by the caller, for a method the contract does not hold
  await apiArg.call<{ x: 1 }>('notAMethod', {});
  // @ts-expect-error a method name the method map does not hold
  await apiArg.call('notAMethod', {});
  // @ts-expect-error a method name known only at run time
  await apiArg.call(String('getClusters'), {});
  // @ts-expect-error the request of another method
  await apiArg.call('getClusterById', { serviceId: 'service-1' });
  // @ts-expect-error a member the contract does not declare
  await apiArg.call('getClusters', { clusterName: 'x' });
  // @ts-expect-error an answer type named by the caller for a real method
  await apiArg.call<{ cluster: ICluster; extra: string }>('getClusterById', { clusterId: 'cluster-1' });

  // The answer is the contract's, inferred from the name.
  const answer = await apiArg.call('getClusterById', { clusterId: 'cluster-1' });
  const inferred: TSame<typeof answer, { cluster: ICluster }> = true;
  void inferred;
};
