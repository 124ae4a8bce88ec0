import { waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IService } from '../ts/interfaces/data/service.js';
import type { IClusterRuntimeReference } from '../ts/interfaces/data/clusterruntime.js';
import type { IClusterIngressDesignationRequest } from '../ts/interfaces/data/clusteringressdesignation.js';
import type { IReq_Cloudly_Relay_PushClusterIngressRouteTableChanged } from '../ts/interfaces/requests/ingress.js';

/**
 * A cluster ready to designate an ingress: an elected relay that registered its origin and
 * records route-table hints, and an ingress service placed on two nodes. Shared by the ingress
 * test files; every step goes through the real server.
 */
export const relayOrigin = 'https://relay.edge.example.com';

export interface IIngressCluster {
  clusterId: string;
  relayToken: string;
  relay: CloudlyRelayClient;
  hints: number[];
  service: IService;
  runtime: IClusterRuntimeReference & { phase: 'pallet' };
}

export const connectElectedRelay = async (
  tArg: ITestCloudly,
  clusterIdArg: string,
  relayTokenArg: string,
  hintsArg: number[] = [],
): Promise<CloudlyRelayClient> => {
  // The hint comes the moment the socket opens: the handler is there before it does.
  const relay = await tArg.connectRelay(relayTokenArg, {
    handlers: (clientArg) => clientArg.addHandler<IReq_Cloudly_Relay_PushClusterIngressRouteTableChanged>('pushClusterIngressRouteTableChanged', async (request) => {
      hintsArg.push(request.revision);
      return {};
    }),
  });
  await waitFor(
    () => tArg.cloudly.relays.sessionsOf(clusterIdArg).some((session) => tArg.cloudly.clusterManager.isElected(session)),
    'relay elected',
  );
  return relay;
};

export const prepareIngressCluster = async (tArg: ITestCloudly, nameArg: string): Promise<IIngressCluster> => {
  const { cluster, relayToken } = await tArg.createCluster(nameArg);
  await tArg.addNodes(cluster.id, 'node-1', 'node-2');
  const hints: number[] = [];
  const relay = await connectElectedRelay(tArg, cluster.id, relayToken, hints);
  await relay.fire('registerClusterRelay', {
    registration: { origin: relayOrigin, version: '1.0.0', protocol: 'cluster-relay/1' },
  });
  const { service } = await tArg.caller.call('createService', {
    service: {
      name: `${nameArg}-ingress`,
      organizationId: 'org-1',
      clusterId: cluster.id,
      runtime: {
        image: 'registry.example.com/serve.zone/ingress:1',
        replicas: 2,
        profile: { runAs: null },
        placement: { nodeIds: ['node-1', 'node-2'] },
      },
      volumes: [],
    },
  });
  const { runtime } = await tArg.caller.call('getClusterRuntime', { clusterId: cluster.id });
  return { clusterId: cluster.id, relayToken, relay, hints, service, runtime: runtime as IIngressCluster['runtime'] };
};

export const designationRequest = (
  clusterArg: IIngressCluster,
  overridesArg: Partial<IClusterIngressDesignationRequest> = {},
): IClusterIngressDesignationRequest => ({
  mutationId: `mutation-${Math.random().toString(36).slice(2)}`,
  clusterId: clusterArg.clusterId,
  ingressServiceId: clusterArg.service.id,
  currentRuntime: clusterArg.runtime,
  expectedSpecRevision: clusterArg.service.specRevision,
  expectedDesignation: null,
  ...overridesArg,
});
