import type { Cloudly } from '../classes.cloudly.js';
import type {
  IClusterNode,
  IClusterNodeCorestore,
  TClusterNodeSource,
} from '../interfaces/data/clusternode.js';
import { defineDocumentKind, type IStoredDocument, ownedByClusterOfNodeId } from '../core/store.js';

/**
 * The nodes of each cluster. Administrators add and remove them and set each node's Corestore
 * endpoint; the cluster's elected relay reports them (creating nodes Cloudly did not know) with
 * the host addresses they carry, and reads the Corestore endpoints back. Every read and write of
 * a relay is confined to the cluster of its own socket.
 */

export interface IClusterNodeDocument extends IStoredDocument {
  /** `${clusterId}/${nodeId}`: `/` never occurs in an id, so the pair maps to one document. */
  nodeId: string;
  clusterId: string;
  name: string;
  createdAt: number;
  source: TClusterNodeSource;
  corestore?: IClusterNodeCorestore;
  hostAddresses?: string[];
  reportedAt?: number;
}

export const clusterNodeKind = defineDocumentKind<IClusterNodeDocument>('CloudlyClusterNode', {
  owners: ownedByClusterOfNodeId,
  auditedFields: ['name', 'corestore', 'hostAddresses'],
});

/**
 * The id of a per-node document: `cluster/node`. `/` never occurs in an id, so each pair maps to
 * one document; other managers key their per-node documents the same way.
 */
export const clusterNodeDocumentId = (clusterIdArg: string, nodeIdArg: string): string => `${clusterIdArg}/${nodeIdArg}`;

export const toPublicClusterNode = (docArg: IClusterNodeDocument): IClusterNode => {
  const node: IClusterNode = {
    id: docArg.nodeId,
    clusterId: docArg.clusterId,
    name: docArg.name,
    generation: docArg.generation,
    createdAt: docArg.createdAt,
    source: docArg.source,
  };
  if (docArg.corestore) {
    node.corestore = { endpoint: docArg.corestore.endpoint };
  }
  if (docArg.hostAddresses) {
    node.hostAddresses = [...docArg.hostAddresses];
  }
  if (docArg.reportedAt !== undefined) {
    node.reportedAt = docArg.reportedAt;
  }
  return node;
};

export class ClusterNodes {
  // The node methods are declared operations (./operations.ts); this class keeps the reads and
  // writes other parts of Cloudly use.
  constructor(private readonly cloudly: Cloudly) {}

  // ---- reads other managers use --------------------------------------------------------------

  /** One node of a cluster, or null. */
  public async getNode(clusterIdArg: string, nodeIdArg: string): Promise<IClusterNode | null> {
    const doc = await this.cloudly.store.get(clusterNodeKind, clusterNodeDocumentId(clusterIdArg, nodeIdArg));
    return doc ? toPublicClusterNode(doc) : null;
  }

  /** Every node of a cluster, ordered by id. */
  public async listNodes(clusterIdArg: string): Promise<IClusterNode[]> {
    const docs = await this.cloudly.store.find(clusterNodeKind, { clusterId: clusterIdArg }, { sort: { nodeId: 1 } });
    return docs.map(toPublicClusterNode);
  }

  /**
   * The host addresses a node last reported: null when the node does not exist, undefined when
   * it exists but has stated none (never defaulted).
   */
  public async getNodeHostAddresses(clusterIdArg: string, nodeIdArg: string): Promise<string[] | undefined | null> {
    const node = await this.getNode(clusterIdArg, nodeIdArg);
    return node === null ? null : node.hostAddresses;
  }

  /** The node's Corestore endpoint: null when the node runs none the relay may reach (or does not exist). */
  public async getNodeCorestore(clusterIdArg: string, nodeIdArg: string): Promise<IClusterNodeCorestore | null> {
    return (await this.getNode(clusterIdArg, nodeIdArg))?.corestore ?? null;
  }
}
