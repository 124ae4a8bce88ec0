import { waitFor, type ITestCloudly } from './cloudly.js';
import type { CloudlyRelayClient } from '../../ts/client/relay.js';
import type { IReq_Cloudly_Relay_PushClusterPlatformDesiredStateChanged } from '../../ts/interfaces/requests/desiredstate.js';

/** What a relay was hinted: the revision and digest of a newer desired state. */
export type TDesiredStateHint = { revision: number; digest: string };

/**
 * Connects a relay of the cluster that records every desired-state hint it gets into `hintsArg`
 * (and acknowledges it), and waits until its socket is the cluster's elected one.
 */
export const connectHintedRelay = async (
  tArg: ITestCloudly,
  clusterIdArg: string,
  relayTokenArg: string,
  hintsArg: TDesiredStateHint[],
): Promise<CloudlyRelayClient> => {
  const relay = await tArg.connectRelay(relayTokenArg);
  relay.addHandler<IReq_Cloudly_Relay_PushClusterPlatformDesiredStateChanged>('pushClusterPlatformDesiredStateChanged', async (request) => {
    hintsArg.push(request);
    return { acknowledged: true };
  });
  await waitFor(() => tArg.cloudly.relays.sessionsOf(clusterIdArg).some((session) => tArg.cloudly.clusterManager.isElected(session)), 'relay elected');
  return relay;
};
