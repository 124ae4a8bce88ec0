import { randomBytes, randomUUID } from 'node:crypto';
import { refuse, refuseNamed } from '../core/errors.js';
import { generatedOnCommit } from '../core/operationcontext.js';
import { hashHighEntropySecret } from '../core/auth.js';
import type { TCloudlyLogger } from '../core/logger.js';
import {
  adminMutation,
  adminOrchestration,
  adminQuery,
  relayMutation,
  relayQuery,
  type IDeclaredOperation,
} from '../core/operations.js';
import type { DocumentStore } from '../core/store.js';
import type { IListReader } from '../core/readcache.js';
import type { IRelaySession } from '../core/relaysessions.js';
import { describedCheck, invalidField, isArrayOf, isIdString, isNodeIdField, isNonNegativeInteger, isString, problemsOfSentences, sentenceCheck, stringSchema, type TFieldCheck } from '../core/validation.js';
import { findPage, nextCursorMember, oldestFirst, orderedPageShape, pageOf, pageShape } from '../core/pagination.js';
import { clusterNodeNamePattern, isClusterNodeName, maximumClusterNodeNameLength, validateClusterNodeCorestore, validateClusterNodeReport, type IClusterNode } from '../interfaces/data/clusternode.js';
import {
  decideClusterDeletion,
  decideNodeCorestore,
  decideNodeCreation,
  decideNodeRemoval,
  decideNodeReport,
  decideRelayTokenRotation,
  decideClusterLabels,
} from './decide.js';
import { clusterKind, labelPairsOf, toPublicCluster, type IClusterDocument } from './documents.js';
import { clusterFilterOf, isClusterLabels, isLabelSelectorText } from './labels.js';
import { clusterNameRule } from '../interfaces/data/cluster.js';
import { clusterNodeDocumentId, clusterNodeKind, toPublicClusterNode } from './clusternodes.js';
import {
  clusterNameReservationId,
  clusterNameReservationKind,
  settleClusterNameReservation,
} from './clusternames.js';

/**
 * The cluster domain's methods as declared operations (ts/core/operations.ts runs them): clusters,
 * relay tokens and nodes. Each names its input, and a one-document change names its target and
 * its pure decision (./decide.ts); what it needs from elsewhere comes through `IClusterPorts`.
 */

export const relayTokenPrefix = 'szrelay_';
const relayTokenBytes = 32;
// The rule lives with the contract, so the dashboard's form checks the same one as you type.
const clusterNamePattern = clusterNameRule.pattern;

/** Most nodes one `getClusterNodeCorestores` may name. Project's own limit. */
const maximumNodeIdsPerRead = 1024;

/** Why a cluster name cannot be taken now (the name and what holds it are in the cause). */
export const clusterNameReasons = Object.freeze({
  taken: 'cluster-name-taken',
  /** A cluster of that name is being removed: the name is free once that is done. */
  beingRemoved: 'cluster-name-being-removed',
} as const);

/** A node a relay named that its cluster does not have. */
export const nodeNotFoundReason = 'node-not-found';

export const newRelayToken = (): string => `${relayTokenPrefix}${randomBytes(relayTokenBytes).toString('base64url')}`;

const isNodeName: TFieldCheck = describedCheck(stringSchema(1, maximumClusterNodeNameLength, clusterNodeNamePattern), (valueArg, pathArg) =>
  isClusterNodeName(valueArg)
    ? []
    : [invalidField(pathArg, `must be 1-${maximumClusterNodeNameLength} characters without control characters or surrounding spaces`)]);

const isCorestoreOrNull: TFieldCheck = (valueArg, pathArg) =>
  valueArg === null ? [] : problemsOfSentences(validateClusterNodeCorestore(valueArg, pathArg), pathArg);

/** What the cluster domain's operations need, wired by the manager from the composition root's parts. */
export interface IClusterPorts {
  store: DocumentStore;
  /** Where administrators' cluster lists are read (a snapshot kept fresh within a bound: ts/core/readcache.ts). */
  listReader: IListReader;
  logger: TCloudlyLogger;
  /** The cluster document, or `not-found`. */
  requireCluster(clusterIdArg: string): Promise<IClusterDocument>;
  /** Every node of a cluster, ordered by id. */
  listNodes(clusterIdArg: string): Promise<IClusterNode[]>;
  /** The ids of the services on a cluster (the service domain's read). */
  listServiceIds(clusterIdArg: string): Promise<string[]>;
  /** Refuses a relay socket that is not its cluster's elected one. */
  requireElected(sessionArg: IRelaySession): Promise<void>;
  /** Closes the cluster's relay sockets opened with a token generation below the given one; how many. */
  closeRelaySessionsBefore(clusterIdArg: string, tokenGenerationArg: number): number;
  /** What follows a cluster's removal (sockets, nodes, registration, name reservation). */
  finishClusterDeletion(clusterIdArg: string, nameArg: string): Promise<{ removedNodes: number; closedSockets: number }>;
}

export const clusterOperations = (portsArg: IClusterPorts): IDeclaredOperation[] => [
  adminOrchestration({
    method: 'createCluster',
    why: 'two documents: the name reservation decides the name, then the cluster (clusternames.ts has the crash rules)',
    access: 'write',
    input: { required: { name: isString(clusterNameRule.minimumLength, clusterNameRule.maximumLength, clusterNamePattern) } },
    // Two documents: the name reservation decides the name, then the cluster (clusternames.ts
    // has the steps and the crash rules).
    async run(request, context) {
      const { store } = portsArg;
      // A dry run goes through every step below, but the id and the token it makes are never
      // stored: its answer leaves them out rather than show an id or a token that never works.
      generatedOnCommit('cluster.id', 'relayToken');
      const relayToken = newRelayToken();
      const cluster = {
        id: `cluster-${randomUUID()}`,
        name: request.name,
        createdAt: Date.now(),
        relayTokenHash: hashHighEntropySecret(relayToken),
        relayTokenGeneration: 1,
      };
      const reservationId = clusterNameReservationId(request.name);
      const reservation = await store.insert(clusterNameReservationKind, {
        id: reservationId,
        name: request.name,
        clusterId: cluster.id,
        state: 'pending',
        cluster,
      });
      if (!reservation) {
        // Finish or clear what an earlier creator or deleter of this name may have left half done.
        const settled = await settleClusterNameReservation(store, clusterKind, reservationId);
        const beingRemoved = settled === 'released' || settled === 'gone';
        throw refuseNamed(
          'conflict',
          beingRemoved ? clusterNameReasons.beingRemoved : clusterNameReasons.taken,
          beingRemoved ? `a cluster named ${request.name} was being removed; try again` : `a cluster named ${request.name} already exists`,
          'request.name',
        );
      }
      // Null when a settlement rolled the reservation forward first: the same document, by its id.
      const stored = (await store.insert(clusterKind, cluster)) ?? (await store.get(clusterKind, cluster.id));
      if (!stored) {
        throw refuseNamed('conflict', 'cluster-removed-while-created', `the cluster named ${request.name} was removed while it was being created`, 'request.name');
      }
      // The reservation this call inserted (pending, its first generation) names the cluster just
      // stored: bound in one compare-and-swap, without reading both again. Whatever touched it
      // meanwhile (another process's settlement, a deletion) moved its generation; then it is
      // settled whole. Two fewer round trips on the path every create takes, each one a wait
      // behind a reconnect storm's work.
      const bound = stored.id === cluster.id
        && await store.swap(clusterNameReservationKind, reservationId, reservation.generation, { set: { state: 'bound' } }) !== null;
      if (!bound) {
        await settleClusterNameReservation(store, clusterKind, reservationId);
      }
      portsArg.logger.info({ clusterId: stored.id, actor: context.identity.userId }, 'cluster created');
      return { cluster: toPublicCluster(stored), relayToken };
    },
  }),

  adminQuery({
    method: 'getClusters',
    access: 'read',
    input: { required: {}, optional: { selector: isLabelSelectorText, ...orderedPageShape('getClusters', oldestFirst('createdAt')) } },
    async run(request) {
      const page = await findPage(portsArg.listReader, clusterKind, clusterFilterOf(request.selector), 'getClusters', request, oldestFirst('createdAt'));
      return { clusters: page.items.map(toPublicCluster), ...nextCursorMember(page) };
    },
  }),

  adminMutation({
    method: 'setClusterLabels',
    access: 'write',
    input: { required: { clusterId: isIdString, labels: isClusterLabels, expectedGeneration: isNonNegativeInteger } },
    target: (request) => ({ kind: clusterKind, id: request.clusterId }),
    decide: (current, { request }) => decideClusterLabels(current, request.clusterId, request.expectedGeneration, labelPairsOf(request.labels)),
    answer: ({ doc }) => ({ cluster: toPublicCluster(doc!) }),
  }),

  adminQuery({
    method: 'getClusterById',
    access: 'read',
    input: { required: { clusterId: isIdString } },
    async run(request) {
      return { cluster: toPublicCluster(await portsArg.requireCluster(request.clusterId)) };
    },
  }),

  adminMutation({
    method: 'rotateClusterRelayToken',
    access: 'write',
    input: { required: { clusterId: isIdString, expectedGeneration: isNonNegativeInteger } },
    // The token is this call's own fact: made once, so a lost race retries with the same token.
    facts: async () => ({ relayToken: newRelayToken() }),
    target: (request) => ({ kind: clusterKind, id: request.clusterId }),
    decide: (current, { request, facts }) =>
      decideRelayTokenRotation(current, request.clusterId, request.expectedGeneration, hashHighEntropySecret(facts.relayToken)),
    answer: ({ doc }, { facts }) => {
      // A dry run's token would never be stored, so it would never work: not answered.
      generatedOnCommit('relayToken');
      return { cluster: toPublicCluster(doc!), relayToken: facts.relayToken };
    },
    after({ doc }, _step, context) {
      // Sockets opened with the old token close (none in a dry run: nothing was written).
      const closed = portsArg.closeRelaySessionsBefore(doc!.id, doc!.relayTokenGeneration);
      portsArg.logger.info({ clusterId: doc!.id, actor: context.identity.userId, closedSessions: closed }, 'relay token rotated');
    },
  }),

  adminOrchestration({
    method: 'deleteCluster',
    why: 'the name reservation settled, the cluster removed, then its nodes, tokens and sockets (the cascade, finished at start-up)',
    access: 'write',
    input: { required: { clusterId: isIdString, expectedGeneration: isNonNegativeInteger } },
    // The cluster's removal, then its cascade (each step idempotent; start-up finishes one that died).
    async run(request, context) {
      const existing = await portsArg.requireCluster(request.clusterId);
      const serviceIds = await portsArg.listServiceIds(request.clusterId);
      // A reservation still `pending` is bound first, so the cluster removed below is never rolled forward again.
      await settleClusterNameReservation(portsArg.store, clusterKind, clusterNameReservationId(existing.name));
      let removed: IClusterDocument | null = null;
      await portsArg.store.mutate(clusterKind, request.clusterId, (current) => {
        removed = current;
        return decideClusterDeletion(current, request.clusterId, request.expectedGeneration, serviceIds);
      });
      const cluster = removed as unknown as IClusterDocument;
      const cascade = await portsArg.finishClusterDeletion(cluster.id, cluster.name);
      portsArg.logger.info({ clusterId: cluster.id, actor: context.identity.userId, ...cascade }, 'cluster deleted');
      return { cluster: toPublicCluster(cluster), ...cascade };
    },
  }),

  adminQuery({
    method: 'getClusterNodes',
    access: 'read',
    input: { required: { clusterId: isIdString }, optional: pageShape('getClusterNodes') },
    async run(request) {
      await portsArg.requireCluster(request.clusterId);
      const page = pageOf('getClusterNodes', await portsArg.listNodes(request.clusterId), (nodeArg) => nodeArg.id, request);
      return { nodes: page.items, ...nextCursorMember(page) };
    },
  }),

  adminMutation({
    method: 'addClusterNode',
    access: 'write',
    input: { required: { clusterId: isIdString, name: isNodeName }, optional: { nodeId: isNodeIdField } },
    async facts(request) {
      await portsArg.requireCluster(request.clusterId);
      if (request.nodeId === undefined) {
        // Made here when the request names none; a dry run's would never be stored.
        generatedOnCommit('node.id');
      }
      return { nodeId: request.nodeId ?? `node-${randomUUID()}` };
    },
    target: (request, facts) => ({ kind: clusterNodeKind, id: clusterNodeDocumentId(request.clusterId, facts.nodeId) }),
    decide: (current, { request, facts, now }) => decideNodeCreation(current, {
      id: clusterNodeDocumentId(request.clusterId, facts.nodeId),
      nodeId: facts.nodeId,
      clusterId: request.clusterId,
      name: request.name,
      createdAt: now,
      source: 'admin',
    }),
    answer: ({ doc }) => ({ node: toPublicClusterNode(doc!) }),
    after({ doc }, _step, context) {
      portsArg.logger.info({ clusterId: doc!.clusterId, nodeId: doc!.nodeId, actor: context.identity.userId }, 'cluster node added');
    },
  }),

  adminMutation({
    method: 'removeClusterNode',
    access: 'write',
    input: { required: { clusterId: isIdString, nodeId: isNodeIdField } },
    facts: async (request) => { await portsArg.requireCluster(request.clusterId); },
    target: (request) => ({ kind: clusterNodeKind, id: clusterNodeDocumentId(request.clusterId, request.nodeId) }),
    decide: (current, { request }) => decideNodeRemoval(current, request.clusterId, request.nodeId),
    // The answer is the node as it was when its removal committed.
    answer: ({ previous }) => ({ node: toPublicClusterNode(previous!) }),
    after(_outcome, { request }, context) {
      portsArg.logger.info({ clusterId: request.clusterId, nodeId: request.nodeId, actor: context.identity.userId }, 'cluster node removed');
    },
  }),

  adminMutation({
    method: 'setClusterNodeCorestore',
    access: 'write',
    input: { required: { clusterId: isIdString, nodeId: isNodeIdField, expected: isCorestoreOrNull, corestore: isCorestoreOrNull } },
    facts: async (request) => { await portsArg.requireCluster(request.clusterId); },
    target: (request) => ({ kind: clusterNodeKind, id: clusterNodeDocumentId(request.clusterId, request.nodeId) }),
    decide: (current, { request }) => decideNodeCorestore(current, request.clusterId, request.nodeId, request.expected, request.corestore),
    answer: ({ doc }) => ({ node: toPublicClusterNode(doc!) }),
    after({ doc }, _step, context) {
      portsArg.logger.info({
        clusterId: doc!.clusterId,
        nodeId: doc!.nodeId,
        actor: context.identity.userId,
        corestore: doc!.corestore?.endpoint ?? null,
      }, 'cluster node corestore set');
    },
  }),

  relayMutation({
    method: 'reportClusterNode',
    access: 'relay',
    input: { required: { report: sentenceCheck(validateClusterNodeReport) } },
    async facts(request, context) {
      await portsArg.requireElected(context.session);
      // Every read and write of a relay is confined to the cluster of its own socket.
      return { clusterId: context.clusterId, id: clusterNodeDocumentId(context.clusterId, request.report.nodeId) };
    },
    target: (_request, facts) => ({ kind: clusterNodeKind, id: facts.id }),
    decide: (current, { request, facts, now }) => decideNodeReport(current, facts.id, facts.clusterId, request.report, now),
    answer: ({ doc }) => ({ node: toPublicClusterNode(doc!) }),
  }),

  relayQuery({
    method: 'getClusterNodeCorestores',
    access: 'relay',
    input: { required: {}, optional: { nodeIds: isArrayOf(isNodeIdField, maximumNodeIdsPerRead) } },
    async run(request, context) {
      const nodes = await portsArg.listNodes(context.clusterId);
      let selected = nodes;
      if (request.nodeIds) {
        const byId = new Map(nodes.map((node) => [node.id, node]));
        const missing = request.nodeIds.flatMap((nodeId, index) => (byId.has(nodeId) ? [] : [{ path: `request.nodeIds[${index}]`, message: 'names no node of this relay\'s cluster' }]));
        if (missing.length > 0) {
          throw refuse('not-found', [nodeNotFoundReason], { causes: missing });
        }
        selected = [...new Set(request.nodeIds)].map((nodeId) => byId.get(nodeId)!);
      }
      return {
        nodes: selected.map((node) => ({ nodeId: node.id, corestore: node.corestore ? { endpoint: node.corestore.endpoint } : null })),
      };
    },
  }),
];
