import type { TObservedServiceState } from './desiredstate.js';
import type { TRuntimeAssignmentState } from './runtimeassignment.js';
import type { TRuntimeLocalStorageClaimLifecycle, TRuntimeLocalStorageClaimNodeState } from './runtimelocalstorageclaim.js';
import type { IRuntimeLiveness } from './serviceruntimestatus.js';

/**
 * `data.IServiceRuntimeAssignmentView`: one replica slot's current assignment as an administrator
 * sees it. The upstream text names the type and cuts its shape after that sentence, so the members
 * are the project's own definition: what Cloudly holds about the slot (its node, its workload lease,
 * the node's session, the node's report and workloads, the service's claims on that node), each
 * with where it comes from, and whether it is current.
 */
export interface IServiceRuntimeAssignmentView {
  serviceId: string;
  /** The replica slot: 0 up to the service's `runtime.replicas`, exclusive. */
  replica: number;
  /** The spec revision the slot is meant to run: the service's current one. */
  specRevision: number;
  /**
   * The node Cloudly assigns the slot to: its lease's node when the slot holds a lease, otherwise the
   * node the placement rule gives it (docs/api/runtimenetwork.md, "Workload leases"); null when the
   * service has no eligible node.
   */
  nodeId: string | null;
  /**
   * The slot's workload lease, null when it holds none (no address plan, or no free address).
   * `confirmed`: the node stated it applied the lease (`reportRuntimeNetworkLeases`).
   */
  lease: { id: string; generation: number; address: string; confirmed: boolean } | null;
  /** The node's runtime session as its relay last reported it (`reportRuntimeNodeSession`), null when none. */
  session: { id: string; generation: number; reportedAt: number } | null;
  /**
   * What the relay last reported of the service on the slot's node, null when nothing. A relay reports
   * per node, not per slot: every slot on one node shows the same report.
   */
  observed: {
    specRevision: number;
    replicas: number;
    state: TObservedServiceState;
    reason?: string;
    reportedAt: number;
  } | null;
  /** The node's runtime assignments of the service, as its last assignment report named them. */
  workloads: Array<{ assignmentId: string; sessionId: string; state: TRuntimeAssignmentState }>;
  /** The service's local storage claims on the slot's node, each at its current generation. */
  claims: Array<{
    id: string;
    generation: number;
    mountPath: string;
    lifecycle: TRuntimeLocalStorageClaimLifecycle;
    nodeState: TRuntimeLocalStorageClaimNodeState | null;
  }>;
  /**
   * Null while what is shown is current. Otherwise the cluster's liveness verdict (its relay gone
   * past the grace, or its reports stale): every observation above is as of its `reportedAt`, and
   * `condition` is `stale`, never a running one.
   */
  stale: IRuntimeLiveness | null;
  /** The slot in one token (`serviceRuntimeAssignmentConditions`), judged in that order. */
  condition: TServiceRuntimeAssignmentCondition;
}

/**
 * The slot in one token, the first that holds: `unassigned` (no eligible node), `stale` (the
 * cluster is not current), `awaiting-report` (no report of the node covers this slot: none, or it
 * counts fewer replicas than slots on the node), `outdated` (the node runs an older spec revision),
 * then the node's reported state: `starting`, `running` (reported `ready`), `failed`, `stopped`.
 * Project's own definition.
 */
export const serviceRuntimeAssignmentConditions = Object.freeze([
  'unassigned',
  'stale',
  'awaiting-report',
  'outdated',
  'starting',
  'running',
  'failed',
  'stopped',
] as const);

export type TServiceRuntimeAssignmentCondition = (typeof serviceRuntimeAssignmentConditions)[number];
