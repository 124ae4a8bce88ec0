import { snapshotServiceNetworkPolicy, type IServiceNetworkPolicy } from '../interfaces/data/servicenetworkpolicy.js';
import { defineDocumentKind, ownedByClusterOfNodeId, ownedByServiceOfId, type IStoredDocument } from '../core/store.js';
import {
  snapshotServicePorts,
  snapshotServiceRoutes,
  snapshotServiceReadiness,
  snapshotServiceRuntimeSpec,
  type IService,
  type TServiceReadinessTarget,
  type IServicePort,
  type IServiceRoute,
  type IServiceRuntimeSpec,
} from '../interfaces/data/service.js';
import type { IServiceVolume } from '../interfaces/data/servicevolume.js';
import {
  snapshotServiceEnvironment,
  snapshotServiceSecrets,
  type TServiceEnvironment,
  type TServiceSecretEnvironment,
} from '../interfaces/data/serviceenvironment.js';
import type { IRuntimeLiveness, IServiceRuntimeStatus } from '../interfaces/data/serviceruntimestatus.js';
import type { IRuntimeLocalStorageClaimRecord } from '../interfaces/data/runtimelocalstorageclaim.js';
import type { IRuntimeSessionReference } from '../interfaces/requests/runtimesession.js';
import type { IServiceVolumeClaimDecision } from './claims.js';

/**
 * The service domain's documents and their public shape: services, the local storage claims of
 * their volumes, the node runtime sessions the claims are pushed under, and the stored runtime
 * verdicts. Kept apart from the manager so every reader (the controllers, the overviews, the
 * watch) imports the kinds without the manager.
 */

export interface IServiceDocument extends IStoredDocument {
  name: string;
  organizationId: string;
  clusterId: string;
  specRevision: number;
  runtime: IServiceRuntimeSpec;
  /**
   * Beside `runtime`, not in it (absent on documents written before they existed, read as none).
   * Documents from before the move carry them inside `runtime`; `migrateServiceShapes` moves them
   * at start (ts/manager.service/migrate.ts).
   */
  ports?: IServicePort[];
  routes?: IServiceRoute[];
  volumes: IServiceVolume[];
  /** Plain environment entries and secret references (absent on documents written before they existed, read as none). */
  environment?: TServiceEnvironment;
  secrets?: TServiceSecretEnvironment;
  /** The readiness target (absent on documents written before it existed, read as none). */
  readiness?: TServiceReadinessTarget | null;
  /** The requested network policy (absent on documents written before it existed, read as none). */
  networkPolicy?: IServiceNetworkPolicy | null;
  claimDecisions: IServiceVolumeClaimDecision[];
  createdAt: number;
  updatedAt: number;
  /** Set by `deleteService`: the service has left the desired state and goes once its relay reports it stopped. */
  deletionRequestedAt?: number;
}

export interface IRuntimeLocalStorageClaimDocument extends IStoredDocument {
  serviceId: string;
  clusterId: string;
  nodeId: string;
  mountPath: string;
  current: IRuntimeLocalStorageClaimRecord;
  /** Earlier generations, oldest first, at most `retainedClaimHistory`. */
  history: IRuntimeLocalStorageClaimRecord[];
  /**
   * The generation an administrator released after its node answered `uncertain`. Until then
   * Cloudly issues no further generation of the claim: neither a purge nor a remount.
   */
  releasedUncertainGeneration?: number;
}

export interface IRuntimeNodeSessionDocument extends IStoredDocument {
  clusterId: string;
  nodeId: string;
  session: IRuntimeSessionReference;
  reportedAt: number;
  /** How many workload authorities the session resolved, when the relay said (absent: not stated). */
  resolvedWorkloadAuthorities?: number;
}

export interface IServiceRuntimeStatusDocument extends IStoredDocument {
  /** The service's cluster (absent on verdicts stored before the reconciler): watchers and the fleet page find the cluster by it. */
  clusterId?: string;
  specRevision: number;
  state: IServiceRuntimeStatus['state'];
  reason: IServiceRuntimeStatus['reason'];
  changedAt: number;
  /**
   * Set while the service's cluster is not current (its relay gone past the grace, or its reports
   * stale): the verdict above is the last one judged, and every overview counts the service
   * `unknown` (ts/manager.cluster/liveness.ts). Absent while current.
   */
  unknown?: IRuntimeLiveness;
}

export const serviceKind = defineDocumentKind<IServiceDocument>('CloudlyService', {
  owners: ownedByServiceOfId,
  // A service's spec holds no secret (secrets are bound by reference, plain environment values are
  // plain by declaration): its audit events show what changed.
  auditedFields: ['name', 'organizationId', 'clusterId', 'runtime', 'ports', 'routes', 'volumes', 'environment', 'secrets', 'readiness', 'networkPolicy', 'specRevision', 'deletionRequestedAt'],
});
export const runtimeLocalStorageClaimKind = defineDocumentKind<IRuntimeLocalStorageClaimDocument>('CloudlyRuntimeLocalStorageClaim');
export const runtimeNodeSessionKind = defineDocumentKind<IRuntimeNodeSessionDocument>('CloudlyRuntimeNodeSession', { owners: ownedByClusterOfNodeId });
export const serviceRuntimeStatusKind = defineDocumentKind<IServiceRuntimeStatusDocument>('CloudlyServiceRuntimeStatus', { owners: ownedByServiceOfId });

export const toPublicService = (docArg: IServiceDocument): IService => ({
  id: docArg.id,
  name: docArg.name,
  organizationId: docArg.organizationId,
  clusterId: docArg.clusterId,
  generation: docArg.generation,
  specRevision: docArg.specRevision,
  runtime: snapshotServiceRuntimeSpec(docArg.runtime),
  ports: snapshotServicePorts(docArg.ports ?? []),
  routes: snapshotServiceRoutes(docArg.routes ?? []),
  volumes: docArg.volumes.map((volume) => ({ ...volume })),
  environment: snapshotServiceEnvironment(docArg.environment),
  secrets: snapshotServiceSecrets(docArg.secrets),
  readiness: snapshotServiceReadiness(docArg.readiness),
  networkPolicy: snapshotServiceNetworkPolicy(docArg.networkPolicy),
  createdAt: docArg.createdAt,
  updatedAt: docArg.updatedAt,
});

