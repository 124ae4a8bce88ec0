import type { ICommandContext } from './context.js';
import type { ICluster } from '../interfaces/data/cluster.js';
import type { IOperation } from '../interfaces/requests/operation.js';
import type { TSame } from '../interfaces/private/sametype.js';

/**
 * Compiled by `npm run check` (tsconfig.json takes every file of ts/) and imported by nothing. It
 * holds the CLI to calls typed by the method name alone: if an untyped form of `ctx.call` came
 * back (an answer type named by the caller, any method string, a loose request record), a line
 * marked `@ts-expect-error` would compile, and the check fails on the unused directive.
 */

export const typedCommandCallsOnly = async (ctxArg: ICommandContext, optionTextArg: string): Promise<void> => {
  // @ts-expect-error an answer type named by the caller, for a method the contract does not hold
  await ctxArg.call<{ x: 1 }>('notAMethod', {});
  // @ts-expect-error a method name the method map does not hold
  await ctxArg.call('notAMethod', {});
  // @ts-expect-error a method name known only at run time
  await ctxArg.call(String('getClusters'), {});
  // @ts-expect-error the request of another method
  await ctxArg.call('getClusterById', { serviceId: 'service-1' });
  // @ts-expect-error a member the contract does not declare
  await ctxArg.call('getClusters', { clusterName: 'x' });
  // @ts-expect-error an answer type named by the caller for a real method
  await ctxArg.call<{ cluster: ICluster; extra: string }>('getClusterById', { clusterId: 'cluster-1' });
  // @ts-expect-error a loose record where the contract wants its request
  await ctxArg.call('getClusterById', {} as Record<string, unknown>);
  // @ts-expect-error an option's text where the contract wants one of its roles
  await ctxArg.call('setUserRole', { userId: 'user-1', role: optionTextArg, expectedGeneration: 1 });
  // @ts-expect-error an option's text where the contract wants a number
  await ctxArg.call('getUsers', { limit: optionTextArg });

  // The answer is the contract's, inferred from the name; a mutation may carry dryRun.
  const answer = await ctxArg.call('getClusterById', { clusterId: 'cluster-1' });
  const inferred: TSame<typeof answer, { cluster: ICluster }> = true;
  const cancelled = await ctxArg.call('cancelOperation', { operationId: 'operation-1', dryRun: true });
  const cancelledInferred: TSame<typeof cancelled, { operation: IOperation }> = true;
  void inferred;
  void cancelledInferred;
};
