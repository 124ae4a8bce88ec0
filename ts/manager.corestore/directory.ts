import type { Cloudly } from '../classes.cloudly.js';

/**
 * What the Corestore manager needs to know from the cluster and service managers, and nothing
 * more: whether a node belongs to a cluster, and which cluster a service runs on. A node id is
 * unique only within its cluster, so a binding's node is always read in its service's cluster.
 */

export interface ICorestoreServiceRecord {
  id: string;
  clusterId: string;
}

export interface ICorestoreDirectory {
  /** True when the cluster has that node. */
  hasNode(clusterIdArg: string, nodeIdArg: string): Promise<boolean>;
  /** The services among the given ids that Cloudly knows, by id. */
  findServices(serviceIdsArg: readonly string[]): Promise<Map<string, ICorestoreServiceRecord>>;
}

/** The directory backed by the live cluster and service managers. */
export const createManagerDirectory = (cloudlyArg: Cloudly): ICorestoreDirectory => ({
  async hasNode(clusterIdArg, nodeIdArg) {
    return (await cloudlyArg.clusterManager.nodes.getNode(clusterIdArg, nodeIdArg)) !== null;
  },
  async findServices(serviceIdsArg) {
    const found = new Map<string, ICorestoreServiceRecord>();
    const services = await Promise.all([...new Set(serviceIdsArg)].map((serviceId) => cloudlyArg.serviceManager.getService(serviceId)));
    for (const service of services) {
      if (service) {
        found.set(service.id, { id: service.id, clusterId: service.clusterId });
      }
    }
    return found;
  },
});
