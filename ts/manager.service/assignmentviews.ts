import type { IServiceObservedPlacement } from '../interfaces/data/desiredstate.js';
import type { IRuntimeAssignmentStatus } from '../interfaces/data/runtimeassignment.js';
import type { IRuntimeLocalStorageClaimRecord } from '../interfaces/data/runtimelocalstorageclaim.js';
import type {
  IServiceRuntimeAssignmentView,
  TServiceRuntimeAssignmentCondition,
} from '../interfaces/data/serviceruntimeassignmentview.js';
import type { IRuntimeLiveness } from '../interfaces/data/serviceruntimestatus.js';
import { ipv4ToNumber } from '../interfaces/private/ipv4.js';
import { eligibleNodesOf, placeServiceReplicas } from '../manager.runtimenetwork/allocation.js';

/** What Cloudly holds that shapes a service's assignment views. Every list may name other services' or nodes' facts. */
export interface IServiceAssignmentFacts {
  service: {
    id: string;
    specRevision: number;
    replicas: number;
    placementNodeIds: readonly string[];
    /** A service whose deletion was requested has left the desired state: it has no slots. */
    leaving: boolean;
  };
  clusterNodeIds: readonly string[];
  /** The held (not released) lease entries of the service. */
  leases: ReadonlyArray<{ lease: { id: string; generation: number }; nodeId: string; replica: number; address: string }>;
  /** Lease ids some node stated it applied. */
  confirmedLeaseIds: ReadonlySet<string>;
  sessions: ReadonlyArray<{ nodeId: string; session: { id: string; generation: number }; reportedAt: number }>;
  placements: readonly IServiceObservedPlacement[];
  nodeAssignments: ReadonlyArray<{ nodeId: string; sessionId: string; assignments: readonly IRuntimeAssignmentStatus[] }>;
  claims: ReadonlyArray<{ nodeId: string; mountPath: string; current: IRuntimeLocalStorageClaimRecord }>;
  /** The service's liveness verdict: null while its cluster is current. */
  unknown: IRuntimeLiveness | null;
}

const runningConditions: Record<IServiceObservedPlacement['state'], TServiceRuntimeAssignmentCondition> = {
  starting: 'starting',
  ready: 'running',
  failed: 'failed',
  stopped: 'stopped',
};

/**
 * One view per replica slot of the service's current spec, by replica. A slot's node is its lease's
 * node, or, for a slot without a lease, the node the allocator's own placement rule gives it with the
 * held leases kept in place, so the view names the node the allocation will use. Pure.
 */
export const deriveServiceRuntimeAssignmentViews = (factsArg: IServiceAssignmentFacts): IServiceRuntimeAssignmentView[] => {
  const { service } = factsArg;
  if (service.leaving || service.replicas <= 0) {
    return [];
  }
  const leaseOf = new Map<number, IServiceAssignmentFacts['leases'][number]>();
  for (const lease of factsArg.leases) {
    const other = leaseOf.get(lease.replica);
    // Two instances racing may briefly hold two leases for one replica; the lower address is the one kept.
    if (other === undefined || ipv4ToNumber(lease.address) < ipv4ToNumber(other.address)) {
      leaseOf.set(lease.replica, lease);
    }
  }
  const held = new Map([...leaseOf].map(([replica, lease]) => [replica, lease.nodeId]));
  const nodes = placeServiceReplicas(service.replicas, eligibleNodesOf(service.placementNodeIds, factsArg.clusterNodeIds), held);
  const sessionOf = new Map(factsArg.sessions.map((entry) => [entry.nodeId, entry]));
  const placementOf = new Map(factsArg.placements.map((placement) => [placement.nodeId, placement]));
  const assignmentsOf = new Map(factsArg.nodeAssignments.map((entry) => [entry.nodeId, entry]));
  const slotsSeenOnNode = new Map<string, number>();
  const views: IServiceRuntimeAssignmentView[] = [];
  for (let replica = 0; replica < service.replicas; replica += 1) {
    const lease = leaseOf.get(replica);
    const nodeId = lease?.nodeId ?? nodes[replica] ?? null;
    // The slot's ordinal among the service's slots on its node: a report counting fewer replicas does not cover it.
    const ordinal = nodeId === null ? 0 : slotsSeenOnNode.get(nodeId) ?? 0;
    if (nodeId !== null) {
      slotsSeenOnNode.set(nodeId, ordinal + 1);
    }
    const session = nodeId === null ? undefined : sessionOf.get(nodeId);
    const placement = nodeId === null ? undefined : placementOf.get(nodeId);
    const assignments = nodeId === null ? undefined : assignmentsOf.get(nodeId);
    const observed = placement === undefined ? null : {
      specRevision: placement.specRevision,
      replicas: placement.replicas,
      state: placement.state,
      ...(placement.reason === undefined ? {} : { reason: placement.reason }),
      reportedAt: placement.reportedAt,
    };
    views.push({
      serviceId: service.id,
      replica,
      specRevision: service.specRevision,
      nodeId,
      lease: lease === undefined ? null : {
        id: lease.lease.id,
        generation: lease.lease.generation,
        address: lease.address,
        confirmed: factsArg.confirmedLeaseIds.has(lease.lease.id),
      },
      session: session === undefined ? null : { id: session.session.id, generation: session.session.generation, reportedAt: session.reportedAt },
      observed,
      workloads: (assignments?.assignments ?? [])
        .filter((assignment) => assignment.serviceId === service.id)
        .map((assignment) => ({ assignmentId: assignment.assignmentId, sessionId: assignment.sessionId, state: assignment.state })),
      claims: nodeId === null ? [] : factsArg.claims
        .filter((claim) => claim.nodeId === nodeId)
        .map((claim) => ({
          id: claim.current.claim.id,
          generation: claim.current.claim.generation,
          mountPath: claim.mountPath,
          lifecycle: claim.current.claim.lifecycle,
          nodeState: claim.current.nodeState,
        })),
      stale: factsArg.unknown,
      condition: conditionOf(nodeId, factsArg.unknown, observed, ordinal, service.specRevision),
    });
  }
  return views;
};

const conditionOf = (
  nodeIdArg: string | null,
  unknownArg: IRuntimeLiveness | null,
  observedArg: IServiceRuntimeAssignmentView['observed'],
  ordinalArg: number,
  specRevisionArg: number,
): TServiceRuntimeAssignmentCondition => {
  if (nodeIdArg === null) {
    return 'unassigned';
  }
  if (unknownArg !== null) {
    return 'stale';
  }
  if (observedArg === null || ordinalArg >= observedArg.replicas) {
    return 'awaiting-report';
  }
  if (observedArg.specRevision < specRevisionArg) {
    return 'outdated';
  }
  return runningConditions[observedArg.state];
};
