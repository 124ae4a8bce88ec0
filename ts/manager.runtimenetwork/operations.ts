import { refuse } from '../core/errors.js';
import type { TCloudlyLogger } from '../core/logger.js';
import { adminMutation, adminQuery, relayMutation, relayQuery, type IDeclaredOperation } from '../core/operations.js';
import type { IRelaySession } from '../core/relaysessions.js';
import { isIdString, isNodeIdField, sentenceCheck } from '../core/validation.js';
import {
  validateRuntimeNetworkProjectionApplication,
  validateRuntimeNetworkWorkloadLeases,
  type IRuntimeNetworkProjection,
} from '../interfaces/data/runtimenetwork.js';
import { validateRuntimeNetworkAddressPlan, type IRuntimeNetworkAddressPlan } from '../interfaces/data/runtimenetworkaddressplan.js';
import { clusterNodeDocumentId } from '../manager.cluster/clusternodes.js';
import {
  applicationOf,
  decideAddressPlanWrite,
  decideLeaseStatement,
  decideProjectionApplication,
  type IAllocatedLeaseEntry,
} from './decide.js';
import { addressPlanDocumentId, detach, runtimeNetworkAddressPlanKind, runtimeNetworkLeasesKind, runtimeNetworkProjectionKind } from './documents.js';
import { leaseIndexOf, type IClusterAllocation } from './leases.js';

/**
 * The runtime network's methods as declared operations (ts/core/operations.ts runs them): the
 * address plan (administrators), the node projections (administrators and the cluster's relay),
 * and the relay's lease statements and projection applications. One-document changes decide in
 * ./decide.ts; what they need from elsewhere comes through `IRuntimeNetworkPorts`.
 */

/** What the runtime network's operations need, wired by the manager. */
export interface IRuntimeNetworkPorts {
  logger: TCloudlyLogger;
  /** The cluster, or `not-found`. */
  requireCluster(clusterIdArg: string): Promise<unknown>;
  /** The node of the cluster, or `not-found`. */
  requireNode(clusterIdArg: string, nodeIdArg: string): Promise<unknown>;
  /** Refuses a relay socket that is not its cluster's elected one. */
  requireElected(sessionArg: IRelaySession): Promise<void>;
  /** The stored plan, detached (null while none is written). */
  getAddressPlan(): Promise<IRuntimeNetworkAddressPlan | null>;
  /** Every lease entry of the allocation (cached: the allocator's copy). */
  readLeaseEntries(optionsArg?: { cached?: boolean }): Promise<ReadonlyArray<IAllocatedLeaseEntry>>;
  /** The withdrawal window of released addresses, ms. */
  withdrawalWindowMs(): number;
  /** The cluster's held leases (allocating what is missing first). */
  allocateCluster(clusterIdArg: string): Promise<IClusterAllocation>;
  /** The ids of the cluster's services (live or pending removal). */
  listServiceIds(clusterIdArg: string): Promise<string[]>;
  /** The node's stored projection after the reconciler's owed runs (null while none was published). */
  readPublishedProjection(clusterIdArg: string, nodeIdArg: string): Promise<IRuntimeNetworkProjection | null>;
  /** Asks the projections controller for a run of every node of the cluster. */
  refreshCluster(clusterIdArg: string): Promise<void>;
  /** The projection with Cloudly's detached signature. */
  signed(projectionArg: IRuntimeNetworkProjection): Promise<{ projection: IRuntimeNetworkProjection; signature: string }>;
}

export const runtimeNetworkOperations = (portsArg: IRuntimeNetworkPorts): IDeclaredOperation[] => [
  adminQuery({
    method: 'getRuntimeNetworkAddressPlan',
    access: 'read',
    input: { required: {} },
    run: async () => ({ plan: await portsArg.getAddressPlan() }),
  }),

  adminMutation({
    method: 'setRuntimeNetworkAddressPlan',
    access: 'write',
    input: { required: { plan: sentenceCheck(validateRuntimeNetworkAddressPlan) } },
    // The allocation's leases (a plan must not strand them) and the writer, read once before deciding.
    facts: async (_request, context) => ({
      entries: await portsArg.readLeaseEntries(),
      windowMs: portsArg.withdrawalWindowMs(),
      actor: context.identity.userId,
    }),
    target: () => ({ kind: runtimeNetworkAddressPlanKind, id: addressPlanDocumentId }),
    decide: (current, { request, facts, now }) => decideAddressPlanWrite(current, request.plan, facts, now),
    // Kept: the request is exactly the stored plan.
    answer: ({ outcome, doc }) => ({ plan: detach(doc!.plan), replayed: outcome === 'kept' }),
    after({ doc }, { facts }) {
      portsArg.logger.info({ revision: doc!.plan.revision, actor: facts.actor }, 'runtime network address plan written');
    },
  }),

  // A pure read of what the reconciler published; a change this instance committed just before is waited for.
  adminQuery({
    method: 'getRuntimeNetworkProjection',
    access: 'read',
    input: { required: { clusterId: isIdString, nodeId: isNodeIdField } },
    async run(request) {
      await portsArg.requireCluster(request.clusterId);
      await portsArg.requireNode(request.clusterId, request.nodeId);
      const projection = await portsArg.readPublishedProjection(request.clusterId, request.nodeId);
      if (!projection) {
        // Not computed yet, or held back (the log says why): nothing is made up.
        throw refuse('unavailable', ['runtime-network-projection-not-published-yet'], { retryAfterMs: 1_000 });
      }
      return portsArg.signed(projection);
    },
  }),

  relayMutation({
    method: 'reportRuntimeNetworkLeases',
    access: 'relay',
    input: { required: { nodeId: isNodeIdField, leases: sentenceCheck(validateRuntimeNetworkWorkloadLeases) } },
    // What the statement is judged against: Cloudly's allocation of the relay's own cluster.
    async facts(request, context) {
      await portsArg.requireElected(context.session);
      const { clusterId } = context;
      await portsArg.requireNode(clusterId, request.nodeId);
      const allocation = await portsArg.allocateCluster(clusterId);
      const serviceIds = await portsArg.listServiceIds(clusterId);
      const entries = await portsArg.readLeaseEntries({ cached: true });
      return {
        id: clusterNodeDocumentId(clusterId, request.nodeId),
        clusterId,
        nodeId: request.nodeId,
        managed: allocation.managed,
        allocated: leaseIndexOf(allocation),
        serviceIds: new Set(serviceIds),
        addressHolders: new Map(entries.filter((entry) => entry.releasedAt === undefined)
          .map((entry) => [entry.address, entry.clusterId === clusterId ? `lease ${entry.lease.id} on node ${entry.nodeId}` : 'a lease of another cluster'])),
      };
    },
    target: (_request, facts) => ({ kind: runtimeNetworkLeasesKind, id: facts.id }),
    decide: (current, { request, facts, now }) => decideLeaseStatement(current, request.leases, facts, now),
    answer: ({ doc }) => ({ generation: doc!.generation }),
    // The confirmed leases become endpoints of the cluster's projections.
    after: async (_outcome, _step, context) => { await portsArg.refreshCluster(context.clusterId); },
  }),

  relayQuery({
    method: 'getClusterNodeRuntimeNetworkProjection',
    access: 'relay',
    input: { required: { nodeId: isNodeIdField } },
    // What the projections controller published, once the runs this instance owes the cluster are
    // done: a read writes nothing (a node whose projection is held back is told to come back).
    run: async (request, context) => {
      await portsArg.requireNode(context.clusterId, request.nodeId);
      const projection = await portsArg.readPublishedProjection(context.clusterId, request.nodeId);
      if (!projection) {
        throw refuse('unavailable', ['runtime-network-projection-not-published-yet'], { retryAfterMs: 1_000 });
      }
      return portsArg.signed(projection);
    },
  }),

  relayMutation({
    method: 'reportRuntimeNetworkProjectionApplication',
    access: 'relay',
    input: { required: { application: sentenceCheck(validateRuntimeNetworkProjectionApplication) } },
    async facts(request, context) {
      await portsArg.requireElected(context.session);
      const application = applicationOf(request.application);
      await portsArg.requireNode(context.clusterId, application.nodeId);
      return { application };
    },
    target: (_request, facts, context) => ({ kind: runtimeNetworkProjectionKind, id: clusterNodeDocumentId(context.clusterId, facts.application.nodeId) }),
    decide: (current, { facts }) => decideProjectionApplication(current, facts.application),
    answer: (_outcome, { facts }) => ({ application: facts.application }),
  }),
];
