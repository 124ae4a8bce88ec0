import { waitFor, type ITestCloudly } from './cloudly.js';
import type { CloudlyRelayClient } from '../../ts/client/relay.js';
import type { IReq_Cloudly_Relay_PushClusterPlatformDesiredStateChanged } from '../../ts/interfaces/requests/desiredstate.js';
import type { ICluster } from '../../ts/interfaces/data/cluster.js';
import type { IService } from '../../ts/interfaces/data/service.js';

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

/**
 * A cluster with the given nodes, one service `web` placed on the first of them, and its relay
 * connected, elected and holding the first desired state: where a relay's reports start.
 */
export const reportingCluster = async (
  tArg: ITestCloudly,
  nameArg: string,
  nodeIdsArg: string[],
): Promise<{ cluster: ICluster; service: IService; relay: CloudlyRelayClient; relayToken: string; revision: number; hints: TDesiredStateHint[] }> => {
  const { cluster, relayToken } = await tArg.createCluster(nameArg);
  await tArg.addNodes(cluster.id, ...nodeIdsArg);
  const { service } = await tArg.caller.call('createService', {
    service: {
      name: 'web',
      organizationId: 'org-1',
      clusterId: cluster.id,
      runtime: { image: 'registry.example/web:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [nodeIdsArg[0]] } },
      ports: [],
      routes: [],
      volumes: [],
    },
  });
  await tArg.cloudly.desiredStateManager.settled(cluster.id);
  const hints: TDesiredStateHint[] = [];
  const relay = await connectHintedRelay(tArg, cluster.id, relayToken, hints);
  const answer = await relay.fire('getClusterPlatformDesiredState', {});
  if (answer.unchanged) {
    throw new Error('a relay that never read the desired state was told it is unchanged');
  }
  return { cluster, service, relay, relayToken, revision: answer.desiredState.revision, hints };
};
