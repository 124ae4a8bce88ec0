import type { Cloudly } from '../classes.cloudly.js';
import type { IRelaySession } from '../core/relaysessions.js';
import type { IService } from '../interfaces/data/service.js';
import { runtimeNodeSessionKind } from '../manager.service/service.manager.js';

/**
 * What the ingress manager needs from the cluster and service managers, kept narrow so the
 * designation and the registration judge depend on facts, not on another manager's internals.
 */
export interface IIngressDependencies {
  /** Whether the cluster exists. */
  clusterExists(clusterIdArg: string): Promise<boolean>;
  /** The service, or null. */
  getService(serviceIdArg: string): Promise<IService | null>;
  /** The exact origin of the cluster's accepted relay registration, or null when it has none. */
  getRelayOrigin(clusterIdArg: string): Promise<string | null>;
  /** Whether this relay socket is the connection Cloudly elected for its cluster. */
  isElectedRelaySession(sessionArg: IRelaySession): Promise<boolean>;
  /** Whether the node is one of the cluster's nodes. */
  nodeExists(clusterIdArg: string, nodeIdArg: string): Promise<boolean>;
  /** The node's current runtime session id as the service manager recorded it, or null. */
  getNodeSessionId(clusterIdArg: string, nodeIdArg: string): Promise<string | null>;
}

/** The dependencies as this Cloudly's cluster and service managers provide them. */
export const cloudlyIngressDependencies = (cloudlyArg: Cloudly): IIngressDependencies => ({
  async clusterExists(clusterIdArg) {
    return (await cloudlyArg.clusterManager.getCluster(clusterIdArg)) !== null;
  },
  async getService(serviceIdArg) {
    return cloudlyArg.serviceManager.getService(serviceIdArg);
  },
  async getRelayOrigin(clusterIdArg) {
    return (await cloudlyArg.clusterManager.relayRegistrations.getRegistration(clusterIdArg))?.origin ?? null;
  },
  async isElectedRelaySession(sessionArg) {
    return cloudlyArg.clusterManager.confirmElected(sessionArg);
  },
  async nodeExists(clusterIdArg, nodeIdArg) {
    return (await cloudlyArg.clusterManager.nodes.getNode(clusterIdArg, nodeIdArg)) !== null;
  },
  async getNodeSessionId(clusterIdArg, nodeIdArg) {
    const doc = await cloudlyArg.store.findOne(runtimeNodeSessionKind, { clusterId: clusterIdArg, nodeId: nodeIdArg });
    return doc?.session.id ?? null;
  },
});
