import type { IRelaySession } from '../core/relaysessions.js';
import type { IClusterNode } from '../interfaces/data/clusternode.js';
import type { IClusterDocument } from './documents.js';

/**
 * What other domains read of clusters, their nodes and their relay: one port the composition
 * root builds over the cluster domain and hands to each domain that needs it, so no domain reaches
 * the cluster manager through the root object.
 */
export interface IClusterReads {
  /** The cluster, or a `not-found` refusal naming it. */
  requireCluster(clusterIdArg: string): Promise<IClusterDocument>;
  /** Refuses (`unavailable`) a relay socket that is not its cluster's elected one. */
  requireElected(sessionArg: IRelaySession): Promise<void>;
  getNode(clusterIdArg: string, nodeIdArg: string): Promise<IClusterNode | null>;
  /** The cluster's nodes, ordered by node id. */
  listNodes(clusterIdArg: string): Promise<IClusterNode[]>;
  /** The origin of the relay's accepted registration, or null. */
  relayOrigin(clusterIdArg: string): Promise<string | null>;
  /** The node whose host carries the relay and its addresses, when the relay named it. */
  relayHost(clusterIdArg: string): Promise<{ nodeId: string; hostAddresses: string[] } | null>;
  /** Whether a relay of the cluster is elected here or on another live instance. */
  relayConnected(clusterIdArg: string): Promise<boolean>;
}
