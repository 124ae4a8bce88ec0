import { randomUUID } from 'node:crypto';
import type { Cloudly } from '../classes.cloudly.js';
import {
  isClusterNodeId,
  isClusterNodeName,
  maximumClusterNodeNameLength,
  validateClusterNodeCorestore,
  validateClusterNodeReport,
  type IClusterNode,
  type IClusterNodeCorestore,
  type IClusterNodeReport,
  type TClusterNodeSource,
} from '../interfaces/data/clusternode.js';
import type {
  IReq_Any_Cloudly_AddClusterNode,
  IReq_Any_Cloudly_GetClusterNodes,
  IReq_Any_Cloudly_RemoveClusterNode,
  IReq_Any_Cloudly_SetClusterNodeCorestore,
  IReq_Relay_Cloudly_GetClusterNodeCorestores,
  IReq_Relay_Cloudly_ReportClusterNode,
} from '../interfaces/requests/cluster.js';
import { refuse } from '../core/errors.js';
import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import { isArrayOf, isIdString, requireRequestShape, type TFieldCheck } from '../core/validation.js';
import type { ClusterRelayElection } from './relayelection.js';
import { decideNodeCorestore, decideNodeRemoval, decideNodeReport } from './decide.js';
import { nextCursorMember, pageOf, pageShape } from '../core/pagination.js';

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

export const clusterNodeKind = defineDocumentKind<IClusterNodeDocument>('CloudlyClusterNode');

/**
 * The id of a per-node document: `cluster/node`. `/` never occurs in an id, so each pair maps to
 * one document; other managers key their per-node documents the same way.
 */
export const clusterNodeDocumentId = (clusterIdArg: string, nodeIdArg: string): string => `${clusterIdArg}/${nodeIdArg}`;

/** Most nodes one `getClusterNodeCorestores` may name. Project's own limit. */
const maximumNodeIdsPerRead = 1024;

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

const isNodeName: TFieldCheck = (valueArg, pathArg) =>
  isClusterNodeName(valueArg)
    ? []
    : [`${pathArg} must be 1-${maximumClusterNodeNameLength} characters without control characters or surrounding spaces`];

const isNodeId: TFieldCheck = (valueArg, pathArg) =>
  isClusterNodeId(valueArg) ? [] : [`${pathArg} must be a node id (letters, digits, '.', '_', '-'; 1-128 characters)`];

const isCorestoreOrNull: TFieldCheck = (valueArg, pathArg) =>
  valueArg === null ? [] : validateClusterNodeCorestore(valueArg, pathArg);

export class ClusterNodes {
  constructor(
    private readonly cloudly: Cloudly,
    private readonly election: ClusterRelayElection,
    private readonly requireCluster: (clusterIdArg: string) => Promise<unknown>,
  ) {
    cloudly.addAdminHandler<IReq_Any_Cloudly_GetClusterNodes>('getClusterNodes', async (request) => {
      request = requireRequestShape(request, { required: { clusterId: isIdString }, optional: pageShape('getClusterNodes') });
      await this.requireCluster(request.clusterId);
      const page = pageOf('getClusterNodes', await this.listNodes(request.clusterId), (nodeArg) => nodeArg.id, request);
      return { nodes: page.items, ...nextCursorMember(page) };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_AddClusterNode>('addClusterNode', async (request, context) => {
      request = requireRequestShape(request, {
        required: { clusterId: isIdString, name: isNodeName },
        optional: { nodeId: isNodeId },
      });
      await this.requireCluster(request.clusterId);
      const nodeId = request.nodeId ?? `node-${randomUUID()}`;
      const inserted = await this.cloudly.store.insert(clusterNodeKind, {
        id: clusterNodeDocumentId(request.clusterId, nodeId),
        nodeId,
        clusterId: request.clusterId,
        name: request.name,
        createdAt: Date.now(),
        source: 'admin',
      });
      if (!inserted) {
        throw refuse('conflict', [`request.nodeId: node ${nodeId} already exists in cluster ${request.clusterId}`]);
      }
      this.cloudly.logger.info({ clusterId: request.clusterId, nodeId, actor: context.identity.userId }, 'cluster node added');
      return { node: toPublicClusterNode(inserted) };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_RemoveClusterNode>('removeClusterNode', async (request, context) => {
      request = requireRequestShape(request, { required: { clusterId: isIdString, nodeId: isNodeId } });
      await this.requireCluster(request.clusterId);
      // The answer is the node as it was when its removal committed.
      const read: { node: IClusterNodeDocument | null } = { node: null };
      await this.cloudly.store.mutate(clusterNodeKind, clusterNodeDocumentId(request.clusterId, request.nodeId), (currentArg) => {
        read.node = currentArg;
        return decideNodeRemoval(currentArg, request.clusterId, request.nodeId);
      });
      this.cloudly.logger.info({ clusterId: request.clusterId, nodeId: request.nodeId, actor: context.identity.userId }, 'cluster node removed');
      return { node: toPublicClusterNode(read.node!) };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_SetClusterNodeCorestore>('setClusterNodeCorestore', async (request, context) => {
      request = requireRequestShape(request, {
        required: { clusterId: isIdString, nodeId: isNodeId, expected: isCorestoreOrNull, corestore: isCorestoreOrNull },
      });
      await this.requireCluster(request.clusterId);
      const node = await this.swapCorestore(request.clusterId, request.nodeId, request.expected, request.corestore);
      this.cloudly.logger.info({
        clusterId: request.clusterId,
        nodeId: request.nodeId,
        actor: context.identity.userId,
        corestore: node.corestore?.endpoint ?? null,
      }, 'cluster node corestore set');
      return { node };
    });

    cloudly.addRelayHandler<IReq_Relay_Cloudly_ReportClusterNode>('reportClusterNode', async (request, context) => {
      request = requireRequestShape(request, { required: { report: (valueArg, pathArg) => validateClusterNodeReport(valueArg, pathArg) } });
      await this.election.requireElected(context.session);
      return { node: await this.applyReport(context.clusterId, request.report) };
    });

    cloudly.addRelayHandler<IReq_Relay_Cloudly_GetClusterNodeCorestores>('getClusterNodeCorestores', async (request, context) => {
      request = requireRequestShape(request, { required: {}, optional: { nodeIds: isArrayOf(isNodeId, maximumNodeIdsPerRead) } });
      const nodes = await this.listNodes(context.clusterId);
      let selected = nodes;
      if (request.nodeIds) {
        const byId = new Map(nodes.map((node) => [node.id, node]));
        const missing = request.nodeIds.filter((nodeId) => !byId.has(nodeId));
        if (missing.length > 0) {
          throw refuse('not-found', missing.map((nodeId) => `node ${nodeId} is not a node of this relay's cluster`));
        }
        selected = [...new Set(request.nodeIds)].map((nodeId) => byId.get(nodeId)!);
      }
      return {
        nodes: selected.map((node) => ({ nodeId: node.id, corestore: node.corestore ? { endpoint: node.corestore.endpoint } : null })),
      };
    });
  }

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

  // ---- writes ---------------------------------------------------------------------------------

  /** Sets the node's Corestore endpoint, compare-and-swap on the endpoint value (`decideNodeCorestore`). */
  public async swapCorestore(
    clusterIdArg: string,
    nodeIdArg: string,
    expectedArg: IClusterNodeCorestore | null,
    corestoreArg: IClusterNodeCorestore | null,
  ): Promise<IClusterNode> {
    const { doc } = await this.cloudly.store.mutate(clusterNodeKind, clusterNodeDocumentId(clusterIdArg, nodeIdArg), (currentArg) =>
      decideNodeCorestore(currentArg, clusterIdArg, nodeIdArg, expectedArg, corestoreArg));
    return toPublicClusterNode(doc!);
  }

  /**
   * Applies one relay report to the relay's own cluster: introduces the node when it is new (then
   * `name` is required), and replaces `name` and `hostAddresses` only where the report states them.
   */
  public async applyReport(clusterIdArg: string, reportArg: IClusterNodeReport): Promise<IClusterNode> {
    const id = clusterNodeDocumentId(clusterIdArg, reportArg.nodeId);
    const { doc } = await this.cloudly.store.mutate(clusterNodeKind, id, (currentArg) =>
      decideNodeReport(currentArg, id, clusterIdArg, reportArg, Date.now()));
    return toPublicClusterNode(doc!);
  }
}
