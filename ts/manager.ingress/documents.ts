import { defineDocumentKind, type IStoredDocument, ownedByClusterOfId } from '../core/store.js';
import type { IEncryptedSecretValue } from '../core/secretbox.js';
import type { IClusterIngressDesignation, IFleetCutoverIngressDesignation } from '../interfaces/data/clusteringressdesignation.js';
import type { IClusterIngressPreparedSpec, IClusterIngressResolvedRoute } from '../interfaces/data/clusteringress.js';
import type { TClusterRuntimePhase } from '../interfaces/data/clusterruntime.js';
import type { IRuntimeAssignmentStatus } from '../interfaces/data/runtimeassignment.js';

/**
 * The documents of the ingress manager. Every one is keyed by the cluster id (or cluster and
 * node), so "one per cluster" is enforced by the store's once-per-id insert rather than by an
 * index the embedded database would not enforce.
 */

/**
 * The one ingress designation slot of a cluster. It holds either a Pallet designation or a
 * fleet-cutover one, never both, so the one-kind rule is a property of a single document. It also
 * holds the cluster's runtime record, so a designation commits against exactly the runtime it was
 * decided on: a runtime change and a designation race on this one document's generation.
 * `bearer` is the current credential's secret version with its value encrypted at rest: it leaves
 * Cloudly only sealed to the cluster's enrolled recipient, never in an answer in clear or a log line.
 */
export interface IClusterIngressSlotDocument extends IStoredDocument {
  clusterId: string;
  /** `none` until the cluster receives a designation of either kind. */
  kind: 'none' | 'pallet' | 'fleet-cutover';
  designation: IClusterIngressDesignation | null;
  fleetCutover: IFleetCutoverIngressDesignation | null;
  bearer: IStoredBearer | null;
  /**
   * The cluster's runtime: its phase and the generation a runtime reference names. Every cluster
   * this Cloudly creates is born on Pallet; a fleet migration moves it through other phases.
   */
  runtime: IClusterRuntimeRecord;
}

export interface IClusterRuntimeRecord {
  phase: TClusterRuntimePhase;
  /** Bumps on every phase change; independent of the slot document's own generation. */
  generation: number;
}

export interface IStoredBearer {
  secretId: string;
  secretVersionId: string;
  /** The bearer, AES-256-GCM under the secrets data key (ts/core/secretbox.ts). */
  encryptedValue?: IEncryptedSecretValue;
  /** Only in documents written before encryption at rest; encrypted in place at start. */
  value?: string;
}

/** What a designation mutation answers and a replay repeats (without `replayed`). */
export interface IStoredDesignationAnswer {
  /** Digest of the request that produced the answer; a reused mutationId must repeat it. */
  requestDigest: string;
  designation: IClusterIngressDesignation;
  spec: IClusterIngressPreparedSpec;
}

export const clusterIngressSlotKind = defineDocumentKind<IClusterIngressSlotDocument>('CloudlyClusterIngressSlot', { owners: ownedByClusterOfId });

/**
 * The cluster's one route table, written only by the desired-state computation (never by a request):
 * its `generation` is the table's revision. Documents an administrator wrote with the retired
 * `setClusterIngressRoutes` carry routes without `targets`; the first computation replaces them and
 * the revision keeps growing from theirs, so an ingress never sees it go back.
 */
export interface IClusterIngressRouteTableDocument extends IStoredDocument {
  clusterId: string;
  routes: IClusterIngressResolvedRoute[];
  computedAt: number;
}

export const clusterIngressRouteTableKind =
  defineDocumentKind<IClusterIngressRouteTableDocument>('CloudlyClusterIngressRouteTable');

/** A node's latest runtime assignment report, as its cluster's relay sent it. Id: `clusterNodeDocumentId`. */
export interface INodeRuntimeAssignmentsDocument extends IStoredDocument {
  clusterId: string;
  nodeId: string;
  sessionId: string;
  assignments: IRuntimeAssignmentStatus[];
  reportedAt: number;
}

export const nodeRuntimeAssignmentsKind =
  defineDocumentKind<INodeRuntimeAssignmentsDocument>('CloudlyNodeRuntimeAssignments');
