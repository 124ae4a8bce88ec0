import type { Cloudly } from '../classes.cloudly.js';

/**
 * What the Corestore manager needs to know from the cluster and service managers, and nothing
 * more: which cluster a node belongs to, and which services exist. Kept as a narrow seam so the
 * adoption logic does not depend on how those managers store their documents.
 */

export interface ICorestoreNodeRecord {
  id: string;
  clusterId: string;
}

export interface ICorestoreDirectory {
  /** The node and its cluster, or null when Cloudly knows no such node. */
  findNode(nodeIdArg: string): Promise<ICorestoreNodeRecord | null>;
  /** The subset of the given service ids that Cloudly knows. */
  findKnownServiceIds(serviceIdsArg: readonly string[]): Promise<Set<string>>;
}

interface INodeLookup {
  getNode?(nodeIdArg: string): Promise<{ id: string; clusterId: string } | null>;
}

interface IServiceLookup {
  getService?(serviceIdArg: string): Promise<{ id: string } | null>;
}

/**
 * The directory backed by the live managers. It asks the cluster manager for nodes and the service
 * manager for services through their public lookups; while a lookup is not provided it knows
 * nothing, which refuses rather than guesses.
 */
export const createManagerDirectory = (cloudlyArg: Cloudly): ICorestoreDirectory => ({
  async findNode(nodeIdArg) {
    const clusters = cloudlyArg.clusterManager as unknown as INodeLookup;
    if (typeof clusters.getNode !== 'function') {
      return null;
    }
    const node = await clusters.getNode(nodeIdArg);
    return node ? { id: node.id, clusterId: node.clusterId } : null;
  },
  async findKnownServiceIds(serviceIdsArg) {
    const services = (cloudlyArg as unknown as { serviceManager?: IServiceLookup }).serviceManager;
    const known = new Set<string>();
    if (!services || typeof services.getService !== 'function') {
      return known;
    }
    for (const serviceId of new Set(serviceIdsArg)) {
      if (await services.getService(serviceId)) {
        known.add(serviceId);
      }
    }
    return known;
  },
});
