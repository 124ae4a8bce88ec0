import type { IServicePort, IServiceRoute, IServiceRuntimeSpec } from './service.js';
import type { IServiceVolume } from './servicevolume.js';
import type { IClusterIngressDesignation } from './clusteringressdesignation.js';
import type {
  IClusterIngressPreparedSpec,
  IClusterIngressResolvedRoute,
  IClusterIngressRouteTable,
  IClusterIngressRouteTarget,
} from './clusteringress.js';
import type { ICorestoreControlCredentialReference, ISealedSecret, ISecretVersionReference } from './secret.js';
import type { TServiceEnvironment } from './serviceenvironment.js';
import type { IServiceNetworkPolicy } from './servicenetworkpolicy.js';
import { computeDomainDigestHex, type TKnownCanonicalTexts } from '../private/canonicaljson.js';
import type { IRuntimeAssignmentStatus } from './runtimeassignment.js';

/**
 * Project's own definitions (the spec names `getClusterPlatformDesiredState` and
 * `reportClusterPlatformObservedState` but does not shape them): what a cluster should run, as
 * one document with a revision and a digest, and what its relay observed running.
 */

export const clusterPlatformDesiredStateDigestDomain = 'serve.zone/cluster-platform-desired-state';

/** One platform binding a service has, by reference: never a credential. */
export interface IClusterPlatformDesiredBinding {
  bindingId: string;
  capability: string;
  enabled: boolean;
  nodeId: string | null;
}

export interface IClusterPlatformDesiredService {
  serviceId: string;
  name: string;
  organizationId: string;
  specRevision: number;
  /** Execution policy only, exactly as stored. */
  runtime: IServiceRuntimeSpec;
  /** The ports the workload listens on (beside the runtime spec, not in it). */
  ports: IServicePort[];
  /** The hostnames the service declares; the resolved table is `routes` of the desired state. */
  routes: IServiceRoute[];
  volumes: IServiceVolume[];
  platformBindings: IClusterPlatformDesiredBinding[];
  /** Plain environment entries, as the service declares them. */
  environment: TServiceEnvironment;
  /**
   * The service's secrets that can reach the cluster, each only sealed to the cluster's recipient
   * (purpose `service-secret`); the relay opens each on the node and sets it under `name`. A secret
   * that cannot reach the cluster is left out and the service's verdict is `secret-version-missing`.
   */
  secrets: IClusterPlatformDesiredSecret[];
  /**
   * The network policy the service requests, for the cluster's network authority to enforce;
   * absent when it requests none, so a service without one has the canonical bytes it had before
   * the member existed. Project's own member.
   */
  networkPolicy?: IServiceNetworkPolicy;
}

/** One secret of a service as its cluster's relay receives it: never in clear (docs/secrets.md). */
export interface IClusterPlatformDesiredSecret {
  name: string;
  secretVersion: ISecretVersionReference;
  version: number;
  sealed: ISealedSecret;
}

/** A service that leaves the cluster: the relay stops it and reports it `stopped`. */
export interface IClusterPlatformDesiredRemoval {
  serviceId: string;
  requestedAt: number;
}

/**
 * One workload lease Cloudly allocated from the address plan's pools: replica `replica` of the
 * service runs on `nodeId` at `address`. The relay applies it and confirms it with
 * `reportRuntimeNetworkLeases`.
 */
export interface IClusterDesiredLease {
  serviceId: string;
  nodeId: string;
  replica: number;
  lease: { id: string; generation: number };
  address: string;
}

/** The route target of the one route table (see `IClusterIngressRouteTarget`). */
export type IClusterRouteTarget = IClusterIngressRouteTarget;

/** A route of the one route table (see `IClusterIngressResolvedRoute`). */
export type IClusterResolvedRoute = IClusterIngressResolvedRoute;

/**
 * Why a route has no target yet, as a token, the first that holds in the order the chain is
 * built: no ingress designated; the ingress service holds no workload lease; no node confirmed
 * one of its leases; the routed service holds no lease; no node confirmed one of its leases; no
 * node's projection grants the ingress that service's port yet.
 */
export const clusterUnresolvedRouteCauses = [
  'no-ingress-designation',
  'ingress-without-lease',
  'ingress-lease-unconfirmed',
  'service-without-lease',
  'service-lease-unconfirmed',
  'ingress-grant-missing',
] as const;
export type TClusterUnresolvedRouteCause = (typeof clusterUnresolvedRouteCauses)[number];

/**
 * A workload address a service's replica holds on a node of the cluster (its lease), and whether
 * the node confirmed it applied it. Project's own definition, for administrators' views.
 */
export interface IClusterAddressLease {
  serviceId: string;
  nodeId: string;
  replica: number;
  leaseId: string;
  address: string;
  confirmed: boolean;
}

/** A route left out of the table, with the reason. */
export interface IClusterUnresolvedRoute {
  hostname: string;
  serviceId: string;
  port: number;
  /** What is missing, for a program (a page words it from this, with names). */
  cause: TClusterUnresolvedRouteCause;
  /** The same in a sentence, with ids. */
  reason: string;
}

/**
 * The one route table, as `getClusterRouteTable` answers it to the relay: the same document, with
 * the same revision, that `getClusterIngressRouteTable` answers the ingress.
 */
export type IClusterResolvedRouteTable = IClusterIngressRouteTable;

export interface IClusterPlatformDesiredState {
  clusterId: string;
  /** Grows by one with every change of the content; never goes back. */
  revision: number;
  /** Domain digest (`serve.zone/cluster-platform-desired-state`) of every other member but `revision`. */
  digest: string;
  /** Sorted by serviceId. */
  services: IClusterPlatformDesiredService[];
  /** Every node of the cluster, sorted by nodeId, with its Corestore control credential by reference (never the value). */
  nodes: Array<{ nodeId: string; corestoreCredential: ICorestoreControlCredentialReference }>;
  /** The Pallet ingress designation and its prepared per-node spec (secret references only), or null. */
  ingress: { designation: IClusterIngressDesignation; spec: IClusterIngressPreparedSpec | null } | null;
  /** Sorted by serviceId. */
  removals: IClusterPlatformDesiredRemoval[];
  /** Every lease Cloudly holds for the cluster's workloads, sorted by service, node and replica. */
  leases: IClusterDesiredLease[];
  /** The resolved route table (routes with targets only), sorted by hostname. */
  routes: IClusterResolvedRoute[];
}

export type TClusterPlatformDesiredStateContent = Omit<IClusterPlatformDesiredState, 'revision' | 'digest'>;

/** `knownArg`: canonical texts of parts that did not change (project's own: the digest is the same). */
export const computeClusterPlatformDesiredStateDigest = (contentArg: TClusterPlatformDesiredStateContent, knownArg?: TKnownCanonicalTexts): string =>
  computeDomainDigestHex(clusterPlatformDesiredStateDigestDomain, contentArg, knownArg);

export const observedServiceStates = ['starting', 'ready', 'failed', 'stopped'] as const;
export type TObservedServiceState = (typeof observedServiceStates)[number];

/** What the relay saw of one service on one node. */
export interface IClusterPlatformObservedService {
  serviceId: string;
  nodeId: string;
  /** The spec revision the node runs. */
  specRevision: number;
  /** Replicas running on that node. */
  replicas: number;
  state: TObservedServiceState;
  /** Free text from the relay, at most 256 characters; shown to administrators. */
  reason?: string;
  /**
   * Optional: the service's secret manifest on that node, what reached its workloads there: each
   * secret by name and version, and each platform binding whose credentials it was given. Judged
   * for `secrets-pending` and `bindings-pending` (docs/api/services.md). Project's own member.
   */
  manifest?: IServiceSecretManifest;
}

/** What reached a service's workloads on one node. Project's own definition. */
export interface IServiceSecretManifest {
  secrets: Array<{ name: string; secretVersionId: string }>;
  bindingIds: string[];
}

export interface IClusterPlatformObservedReport {
  /** The desired-state revision the relay had applied when it observed this. */
  desiredRevision: number;
  services: IClusterPlatformObservedService[];
  /**
   * Optional: each node's runtime assignments under its session, stored as
   * `reportClusterNodeRuntimeAssignments` stores them (one source of truth; the ingress
   * registration judge reads it). A node an entry names replaces its last assignment report.
   */
  nodes?: IClusterPlatformObservedNode[];
}

/** One node's assignment observation inside an observed-state report. */
export interface IClusterPlatformObservedNode {
  nodeId: string;
  sessionId: string;
  assignments: IRuntimeAssignmentStatus[];
}

export const observedReportLimits = Object.freeze({ maximumServices: 4096, maximumReasonLength: 256, maximumNodes: 1024, maximumManifestEntries: 256 } as const);

/** The observations of one service that Cloudly keeps beside its runtime status. */
export interface IServiceObservedPlacement {
  nodeId: string;
  specRevision: number;
  replicas: number;
  state: TObservedServiceState;
  reason?: string;
  reportedAt: number;
  /** The secret manifest the relay reported for that node, when it reported one. */
  manifest?: IServiceSecretManifest;
}
