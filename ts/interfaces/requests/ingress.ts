import type { ITypedContract } from './admin.js';
import type { IIdentity } from '../data/user.js';
import type {
  IClusterIngressPreparedSpec,
  IClusterIngressRegistration,
  IClusterIngressRegistrationAcceptance,
  IClusterIngressRouteTable,
  IClusterIngressRouteTableChange,
} from '../data/clusteringress.js';
import type {
  IClusterIngressDesignation,
  IClusterIngressDesignationRequest,
} from '../data/clusteringressdesignation.js';
import type { IClusterRuntimeReference } from '../data/clusterruntime.js';
import type { IRuntimeAssignmentStatus } from '../data/runtimeassignment.js';
import type { ISealedSecret, ISecretVersionReference } from '../data/secret.js';

/** Administrator → Cloudly: designate (or re-designate) a Pallet cluster's ingress service. */
export type IReq_Any_Cloudly_DesignateClusterIngress = ITypedContract<
  'designateClusterIngress',
  { identity: IIdentity; designation: IClusterIngressDesignationRequest },
  { designation: IClusterIngressDesignation; spec: IClusterIngressPreparedSpec; replayed: boolean }
>;

/** Administrator → Cloudly: the cluster's current ingress designation, `null` when it has none. */
export type IReq_Any_Cloudly_GetClusterIngressDesignation = ITypedContract<
  'getClusterIngressDesignation',
  { identity: IIdentity; clusterId: string },
  { designation: IClusterIngressDesignation | null }
>;

/**
 * Administrator → Cloudly: the cluster's current runtime reference, which a designation request
 * must repeat as `currentRuntime`. Project's own definition.
 */
export type IReq_Any_Cloudly_GetClusterRuntime = ITypedContract<
  'getClusterRuntime',
  { identity: IIdentity; clusterId: string },
  { runtime: IClusterRuntimeReference }
>;

/** Ingress → relay → Cloudly, on the relay's socket: the ingress announces itself. */
export type IReq_Relay_Cloudly_RegisterClusterIngress = ITypedContract<
  'registerClusterIngress',
  IClusterIngressRegistration,
  IClusterIngressRegistrationAcceptance
>;

/**
 * Ingress → relay (→ Cloudly): the cluster's one route table (the routes its services declare,
 * resolved to lease targets), `null` while Cloudly has computed none. There is no administrator
 * write of it: routes are declared on services (`service.routes`).
 */
export type IReq_Relay_Cloudly_GetClusterIngressRouteTable = ITypedContract<
  'getClusterIngressRouteTable',
  { knownRevision: number | null },
  { table: IClusterIngressRouteTable | null }
>;

/** Cloudly → relay → ingress: a newer route table exists. */
export type IReq_Cloudly_Relay_PushClusterIngressRouteTableChanged = ITypedContract<
  'pushClusterIngressRouteTableChanged',
  IClusterIngressRouteTableChange,
  Record<string, never>
>;

/**
 * Relay → Cloudly: what one node states about its current session and the assignments it runs.
 * It replaces the node's previous report. Project's own definition.
 */
export type IReq_Relay_Cloudly_ReportClusterNodeRuntimeAssignments = ITypedContract<
  'reportClusterNodeRuntimeAssignments',
  { nodeId: string; sessionId: string; assignments: IRuntimeAssignmentStatus[] },
  { generation: number }
>;

/**
 * Relay → Cloudly: the ingress bearer secret version the relay's node must hand to the ingress
 * workload, sealed to the cluster's enrolled secret recipient (the current one, or the previous one
 * when `recipientId` names it) and bound to the cluster, purpose `cluster-ingress-bearer`, the
 * secret version and the credential generation. Answered only for the cluster's current
 * designation credential and only on that cluster's elected relay socket. Project's own definition.
 */
export type IReq_Relay_Cloudly_ResolveClusterIngressBearer = ITypedContract<
  'resolveClusterIngressBearer',
  { secretVersion: ISecretVersionReference; recipientId?: string },
  { material: ISealedSecret }
>;
