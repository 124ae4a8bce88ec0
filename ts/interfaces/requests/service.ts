import type { ITypedContract } from './admin.js';
import type { IServiceObservedPlacement } from '../data/desiredstate.js';
import type { IIdentity } from '../data/user.js';
import type { IService, IServiceWritableSpec } from '../data/service.js';
import type { IOrganization, IOrganizationWritable } from '../data/organization.js';
import type { TServiceVolumeInitialization } from '../data/servicevolume.js';
import type { IServiceRuntimeStatus, IRuntimeLiveness } from '../data/serviceruntimestatus.js';
import type { IRuntimeLocalStorageClaimRecord, IRuntimeLocalStorageClaimReference } from '../data/runtimelocalstorageclaim.js';
import type { IPageRequest, IPageAnswer } from './pagination.js';
import type { IServiceRuntimeAssignmentView } from '../data/serviceruntimeassignmentview.js';

/** Volumes are `TServiceWritableVolume`: one stating `initialization` is refused by path. */
export type IReq_Any_Cloudly_CreateService = ITypedContract<
  'createService',
  { identity: IIdentity; service: IServiceWritableSpec },
  { service: IService }
>;

/**
 * Replaces the writable spec; compare-and-swap on the service generation. A stored
 * initialization stays with the volume of the same mount path and goes with a removed volume.
 */
export type IReq_Any_Cloudly_UpdateService = ITypedContract<
  'updateService',
  { identity: IIdentity; serviceId: string; expectedGeneration: number; service: IServiceWritableSpec },
  { service: IService }
>;

export type IReq_Any_Cloudly_GetServices = ITypedContract<
  'getServices',
  { identity: IIdentity; clusterId?: string } & IPageRequest,
  { services: IService[] } & IPageAnswer
>;

export type IReq_Any_Cloudly_GetServiceById = ITypedContract<
  'getServiceById',
  { identity: IIdentity; serviceId: string },
  { service: IService }
>;

/**
 * The only write of a volume's initialization, named by its exact mount path. `expected` is the
 * value the caller read (`null` for none); any other stored value refuses with `conflict`.
 * `initialization: null` clears it (project's own choice). Refusals carry
 * `IServiceVolumeInitializationErrorData`.
 */
export type IReq_Any_Cloudly_SetServiceVolumeInitialization = ITypedContract<
  'setServiceVolumeInitialization',
  {
    identity: IIdentity;
    serviceId: string;
    mountPath: string;
    expected: TServiceVolumeInitialization | null;
    initialization: TServiceVolumeInitialization | null;
  },
  { service: IService }
>;

/** The current verdict for the service's current spec revision. */
/**
 * A claim of the service that Cloudly holds because its node answered `historical`: the node holds
 * a newer generation (`nodeClaim`) than the one Cloudly issued (`generation`). One of the things a
 * `conflict` verdict can stand for; `supersedeHistoricalRuntimeLocalStorageClaim` is the way out.
 * Project's own definition.
 */
export interface IServiceHistoricalClaim {
  claimId: string;
  nodeId: string;
  mountPath: string;
  /** Cloudly's generation the node answered historical. */
  generation: number;
  /** The newer generation the node holds. */
  nodeClaim: IRuntimeLocalStorageClaimReference;
  answeredAt: number | null;
}

export type IReq_Any_Cloudly_GetServiceRuntimeStatus = ITypedContract<
  'getServiceRuntimeStatus',
  { identity: IIdentity; serviceId: string },
  {
    status: IServiceRuntimeStatus;
    /**
     * One `IServiceRuntimeAssignmentView` per replica slot of the current spec, by replica (empty for
     * a service being deleted): where each slot is assigned and what is known of it, marked `stale`
     * while `unknown` is set.
     */
    assignments: IServiceRuntimeAssignmentView[];
    /** Project's own member, beside the contract's exact status: what the relay last reported, per node. */
    observed: { placements: IServiceObservedPlacement[]; lastReportedAt: number | null };
    /**
     * Project's own member: the service's claims held because their node answered `historical`,
     * by claim id (empty when none). The verdict waits on `conflict` while one is listed.
     */
    historicalClaims: IServiceHistoricalClaim[];
    /**
     * Project's own member: null while what is shown is current; otherwise why not (the cluster's
     * relay gone past the grace, or its reports stale) and since when. `status` is then the last
     * verdict judged, and every overview counts the service `unknown` (docs/reconciler.md, "Liveness").
     */
    unknown: IRuntimeLiveness | null;
    /**
     * Project's own member: each secret the service names that cannot reach its cluster, with why
     * (`version-missing`, `not-sealed-for-cluster`, `recipient-gone`); the verdict is then
     * `secret-version-missing`. Empty when none.
     */
    missingSecrets: IServiceMissingSecret[];
    /**
     * Project's own member: per node running the current revision whose relay reported a secret
     * manifest, the secrets (by name) and enabled bindings (by id) it does not list yet; the
     * verdict waits `bindings-pending` or `secrets-pending` while one is listed. Empty when none.
     */
    manifestGaps: Array<{ nodeId: string; secrets: string[]; bindingIds: string[] }>;
  }
>;

/** A secret a service names that its cluster's relay cannot be given. Project's own definition. */
export interface IServiceMissingSecret {
  name: string;
  secretId: string;
  secretVersionId: string;
  cause: 'version-missing' | 'not-sealed-for-cluster' | 'recipient-gone';
}

/** Every local storage claim revision Cloudly issued for the service, with each node answer. Project's own. */
export type IReq_Any_Cloudly_GetRuntimeLocalStorageClaims = ITypedContract<
  'getRuntimeLocalStorageClaims',
  { identity: IIdentity; serviceId: string } & IPageRequest,
  { claims: IRuntimeLocalStorageClaimRecord[] } & IPageAnswer
>;

/**
 * An administrator's decision on a claim whose node answered `uncertain`: until it is released,
 * Cloudly issues no further generation of that claim (no purge of a removed volume, no remount).
 * `generation` names the held generation. Project's own method.
 */
export type IReq_Any_Cloudly_ReleaseUncertainRuntimeLocalStorageClaim = ITypedContract<
  'releaseUncertainRuntimeLocalStorageClaim',
  { identity: IIdentity; claimId: string; generation: number },
  { claim: IRuntimeLocalStorageClaimRecord }
>;

/**
 * The way out of a claim whose node answered `historical` (it holds a newer generation than Cloudly
 * issued): Cloudly issues its own current intent as the generation after the node's, chained to it,
 * and pushes it. `generation` names Cloudly's generation that was answered historical. Project's own
 * method (docs/api/services.md).
 */
export type IReq_Any_Cloudly_SupersedeHistoricalRuntimeLocalStorageClaim = ITypedContract<
  'supersedeHistoricalRuntimeLocalStorageClaim',
  { identity: IIdentity; claimId: string; generation: number },
  { claim: IRuntimeLocalStorageClaimRecord }
>;

/**
 * Registers an organization (project's own method). An id already registered is `conflict`. A
 * service created in an organization the registry does not hold registers it with its id as name.
 */
export type IReq_Admin_CreateOrganization = ITypedContract<
  'createOrganization',
  { identity: IIdentity; organization: IOrganizationWritable },
  { organization: IOrganization }
>;

/** Every registered organization, by id (project's own method). */
export type IReq_Admin_GetOrganizations = ITypedContract<
  'getOrganizations',
  { identity: IIdentity } & IPageRequest,
  { organizations: IOrganization[] } & IPageAnswer
>;

/**
 * Removes an organization from the registry, compare-and-swap on its generation (project's own
 * method). Its services stay and are refused `organization-missing` until it is registered again.
 */
export type IReq_Admin_DeleteOrganization = ITypedContract<
  'deleteOrganization',
  { identity: IIdentity; organizationId: string; expectedGeneration: number },
  { organizationId: string; deleted: true }
>;
