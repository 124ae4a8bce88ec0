import type { IService } from '../interfaces/data/service.js';
import {
  deriveServiceVolumeClaimInitialization,
  serviceVolumeLocalDirectoryDriver,
  type IServiceVolume,
} from '../interfaces/data/servicevolume.js';
import {
  runtimeConfigContract,
  serviceRuntimeVolumeRefusals,
  type TServiceRuntimeRefusal,
  type TServiceRuntimeWaitingReason,
} from '../interfaces/data/serviceruntimestatus.js';
import type { IClusterRelayCapabilities } from '../interfaces/data/clusterrelay.js';
import type { IRuntimeLocalStorageClaimRecord } from '../interfaces/data/runtimelocalstorageclaim.js';
import type { IServiceObservedPlacement } from '../interfaces/data/desiredstate.js';
import type { TClusterRuntimePhase } from '../interfaces/data/clusterruntime.js';
import { parseServiceImageName } from '../interfaces/data/imageversion.js';
import { environmentEntryBytes, plainEnvironmentBytes, serviceEnvironmentContract } from '../interfaces/data/serviceenvironment.js';

/**
 * The pure part of a service's runtime verdict: Cloudly's own judgement of a spec revision from
 * facts it holds. Nothing here reads a database; the manager gathers the facts and stores the
 * verdict so `changedAt` only moves when the verdict does.
 */

/** The claim a volume was given, as the service document records it (the commit point of a claim). */
export interface IServiceVolumeClaimMarker {
  mountPath: string;
  claimId: string;
  nodeId: string;
}

/** What the platform binding owner knows about a service's bindings. Project's own seam. */
export interface IServiceBindingWaits {
  /** Some enabled binding is not yet covered (the secret manifest lags). */
  bindingsPending: boolean;
  /** Some Corestore binding waits for the offline adoption of its legacy resource. */
  legacyAdoptionPending: boolean;
}

export interface IServiceRuntimeFacts {
  service: IService;
  claimMarkers: IServiceVolumeClaimMarker[];
  clusterExists: boolean;
  /**
   * The cluster's runtime phase. A cluster still on Swarm or in its cutover has no Pallet runtime
   * to run a service on yet; absent when not gathered (treated as `pallet`).
   */
  clusterRuntimePhase?: TClusterRuntimePhase;
  /** The ids of the nodes the cluster has now; absent when not gathered (no node check). */
  clusterNodeIds?: ReadonlySet<string>;
  /**
   * The service's workload leases (manager.runtimenetwork): how many of its workloads found no
   * address, and whether the address plan holds no pool at all. Absent when not gathered, or when
   * no address plan exists (Cloudly manages no workload address then).
   */
  workloadLeases?: { shortfall: number; poolMissing: boolean };
  /** The current revision of every bound claim of the service. */
  claims: IRuntimeLocalStorageClaimRecord[];
  bindings: IServiceBindingWaits;
  /**
   * Whether Cloudly holds the image version the service names (`cloudly:sha256:<digest>`); absent
   * when not gathered. A registry image is never judged here: only the runtime can pull it.
   */
  imageVersionHeld?: boolean;
  /**
   * What the cluster's relay stated its runtime supports; null or absent when it stated nothing,
   * and then nothing is refused as unsupported (there is nothing to judge against).
   */
  relayCapabilities?: IClusterRelayCapabilities | null;
  /** The capabilities (`database`, `objectstorage`) of the service's enabled platform bindings. */
  bindingCapabilities?: readonly string[];
  /** Hostnames the service declares that the route table gives to another (older) service. */
  routesTakenByOthers?: readonly string[];
  /**
   * The network side of each node the relay observed running the service at its current spec
   * revision: the leases Cloudly holds for the service on that node and the ones its node
   * confirmed it applied. Absent when not gathered, or when Cloudly manages no workload address.
   */
  nodeNetwork?: { heldLeaseIds: ReadonlyMap<string, readonly string[]>; confirmedLeaseIds: ReadonlySet<string> };
  /** The relay's observations of the service; absent when not gathered. */
  observed?: readonly IServiceObservedPlacement[];
  /** Whether the organization registry holds the service's organization; absent when not gathered. */
  organizationRegistered?: boolean;
  /**
   * Each secret the service names, with its value's length when a copy sealed for the cluster can
   * be delivered, or null when it cannot (`secret-version-missing`). Absent when not gathered.
   */
  secrets?: readonly { name: string; valueBytes: number | null }[];
  /** Whether the service is its cluster's designated ingress; absent when not gathered (read as not). */
  isIngressService?: boolean;
  /** How many workload authorities each node's current runtime session resolved, for the nodes whose relay stated it. */
  nodeWorkloadAuthorities?: ReadonlyMap<string, number>;
  /**
   * What the secret manifest must list on every node running the current revision: the ids of the
   * enabled bindings, and each deliverable secret by name and version. Absent when not gathered.
   */
  manifestExpectation?: { bindingIds: readonly string[]; secrets: ReadonlyArray<{ name: string; secretVersionId: string }> };
}

/**
 * What the secret manifests of the nodes running the current revision (observed `starting` or
 * `ready`, with a manifest) do not list yet, per node. Nodes whose relay reports no manifest are
 * not judged here. Pure.
 */
export const judgeSecretManifests = (
  factsArg: Pick<IServiceRuntimeFacts, 'service' | 'observed' | 'manifestExpectation'>,
): Array<{ nodeId: string; secrets: string[]; bindingIds: string[] }> => {
  const expected = factsArg.manifestExpectation;
  if (!expected) {
    return [];
  }
  return (factsArg.observed ?? [])
    .filter((placement) => placement.specRevision === factsArg.service.specRevision && (placement.state === 'starting' || placement.state === 'ready') && placement.manifest)
    .map((placement) => ({
      nodeId: placement.nodeId,
      secrets: expected.secrets
        .filter((secret) => !placement.manifest!.secrets.some((entry) => entry.name === secret.name && entry.secretVersionId === secret.secretVersionId))
        .map((secret) => secret.name),
      bindingIds: expected.bindingIds.filter((bindingId) => !placement.manifest!.bindingIds.includes(bindingId)),
    }))
    .filter((gap) => gap.secrets.length > 0 || gap.bindingIds.length > 0);
};

/**
 * `node-authority-unsupported`, judged at the admit step: every node the service could be handed
 * to (its placement nodes in the cluster, or every node of the cluster without a placement) has
 * a runtime session that resolved fewer workload authorities than a service needs. A node whose
 * relay stated no count is not judged, so the refusal needs every eligible node to have stated one. Pure.
 */
export const judgeServiceNodeAuthority = (
  factsArg: Pick<IServiceRuntimeFacts, 'service' | 'clusterNodeIds' | 'nodeWorkloadAuthorities'>,
): TServiceRuntimeRefusal | null => {
  const authorities = factsArg.nodeWorkloadAuthorities;
  if (!authorities || !factsArg.clusterNodeIds) {
    return null;
  }
  const placement = factsArg.service.runtime.placement.nodeIds;
  const eligible = placement.length > 0 ? placement.filter((nodeId) => factsArg.clusterNodeIds!.has(nodeId)) : [...factsArg.clusterNodeIds];
  const short = eligible.filter((nodeId) => (authorities.get(nodeId) ?? Number.POSITIVE_INFINITY) < runtimeConfigContract.requiredWorkloadAuthorities);
  return eligible.length > 0 && short.length === eligible.length ? 'node-authority-unsupported' : null;
};

/**
 * `network-policy-missing` and `network-policy-mismatch`: what the cluster's network authority (as
 * the relay states it, `capabilities.networkPolicy`) can enforce of the policy the service
 * requests. A service that requests none is not judged, nor is anything while the relay states no
 * capabilities (nothing to judge against).
 *
 * - `network-policy-missing`: the capabilities state no network authority, so no policy of the
 *   service would be enforced anywhere.
 * - `network-policy-mismatch`: the authority cannot express the requested egress kind, or a node
 *   the service may run on (its placement's nodes the cluster has, or every node of the cluster
 *   without a placement) is outside the nodes the authority governs. Pure.
 */
export const judgeServiceNetworkPolicy = (
  factsArg: Pick<IServiceRuntimeFacts, 'service' | 'relayCapabilities' | 'clusterNodeIds'>,
): TServiceRuntimeRefusal | null => {
  const policy = factsArg.service.networkPolicy ?? null;
  const capabilities = factsArg.relayCapabilities ?? null;
  if (policy === null || capabilities === null) {
    return null;
  }
  const authority = capabilities.networkPolicy;
  if (authority === undefined) {
    return 'network-policy-missing';
  }
  if (!authority.egress.includes(policy.egress.kind)) {
    return 'network-policy-mismatch';
  }
  if (authority.nodeIds !== undefined && factsArg.clusterNodeIds) {
    const governed = new Set(authority.nodeIds);
    const placement = factsArg.service.runtime.placement.nodeIds;
    const eligible = placement.length > 0 ? placement.filter((nodeId) => factsArg.clusterNodeIds!.has(nodeId)) : [...factsArg.clusterNodeIds];
    if (eligible.some((nodeId) => !governed.has(nodeId))) {
      return 'network-policy-mismatch';
    }
  }
  return null;
};

/**
 * The bytes the whole environment takes in the workload's process (`NAME=value` and a NUL per
 * entry, plain and secret alike), counting the secrets whose sizes are known. Pure.
 */
export const serviceEnvironmentBytes = (
  serviceArg: Pick<IService, 'environment'>,
  secretsArg: readonly { name: string; valueBytes: number | null }[],
): number =>
  plainEnvironmentBytes(serviceArg.environment ?? {})
  + secretsArg.reduce((sum, secret) => sum + (secret.valueBytes === null ? 0 : environmentEntryBytes(secret.name, secret.valueBytes)), 0);

/**
 * What a service's image plan rests on: a registry image (the runtime's business), or a pushed
 * image version that Cloudly holds or does not hold. `heldArg` answers for a digest of this service.
 */
export const judgeServiceImagePlan = (
  serviceArg: { runtime: { image: string } },
  heldArg: (digestArg: string) => boolean,
): 'registry' | 'held' | 'missing' => {
  const named = parseServiceImageName(serviceArg.runtime.image);
  if (named.kind === 'registry') {
    return 'registry';
  }
  return heldArg(named.digest) ? 'held' : 'missing';
};

export type TServiceRuntimeVerdict =
  | { state: 'converging'; reason: null }
  | { state: 'waiting'; reason: TServiceRuntimeWaitingReason }
  | { state: 'refused'; reason: TServiceRuntimeRefusal };


/** Every volume refusal one volume earns, in contract order. */
export const judgeServiceVolume = (
  serviceArg: IService,
  volumeArg: IServiceVolume,
  markerArg: IServiceVolumeClaimMarker | undefined,
): TServiceRuntimeRefusal[] => {
  const refusals: TServiceRuntimeRefusal[] = [];
  if (volumeArg.driver !== serviceVolumeLocalDirectoryDriver) {
    refusals.push('volume-driver-unsupported');
  }
  if (Object.keys(volumeArg.driverOptions ?? {}).length > 0 || (volumeArg.mountOptions ?? []).length > 0) {
    refusals.push('volume-options-unsupported');
  }
  // A node-local directory is ReadWriteOnce: more than one replica would mount it twice.
  if (serviceArg.runtime.replicas > 1) {
    refusals.push('volume-shared-unsupported');
  }
  const nodeIds = serviceArg.runtime.placement.nodeIds;
  if (nodeIds.length !== 1 || (markerArg !== undefined && markerArg.nodeId !== nodeIds[0])) {
    refusals.push('volume-placement-unsupported');
  }
  // A claimed volume keeps its claim's own initialization and ownership; the derive rule decided
  // only its first generation.
  if (markerArg === undefined) {
    const derived = deriveServiceVolumeClaimInitialization(volumeArg.initialization, serviceArg.runtime.profile.runAs);
    if (derived.refused) {
      refusals.push(derived.reason);
    }
  }
  return refusals;
};

/** True when Cloudly may issue the volume's first claim now. */
export const isServiceVolumeClaimable = (serviceArg: IService, volumeArg: IServiceVolume): boolean =>
  judgeServiceVolume(serviceArg, volumeArg, undefined).length === 0;

/**
 * The refusals that compare the service with what its cluster's runtime can run (the relay's stated
 * capabilities) and with the runtime config's limits, in contract order; the first one is the
 * verdict. Pure; each reason is earned by one fact.
 */
export const judgeServiceAdmission = (
  factsArg: Pick<IServiceRuntimeFacts, 'service' | 'relayCapabilities' | 'bindingCapabilities' | 'secrets' | 'isIngressService'>,
): TServiceRuntimeRefusal | null => {
  const { service } = factsArg;
  const capabilities = factsArg.relayCapabilities ?? null;
  const bindingCapabilities = factsArg.bindingCapabilities ?? [];
  if (capabilities !== null) {
    // A platform binding the runtime cannot serve.
    if (bindingCapabilities.some((capability) => !capabilities.platforms.includes(capability))) {
      return 'platform-unsupported';
    }
    // An enabled binding's credentials reach the workload as secrets, as do the service's own.
    if ((bindingCapabilities.length > 0 || Object.keys(service.secrets ?? {}).length > 0) && !capabilities.secrets) {
      return 'secrets-unsupported';
    }
    if (service.volumes.length > 0 && !capabilities.volumes) {
      return 'volumes-unsupported';
    }
    if (service.ports.some((port) => !capabilities.portProtocols.includes(port.protocol))) {
      return 'port-protocol-unsupported';
    }
  }
  if (service.ports.length > runtimeConfigContract.maximumTargetPorts) {
    return 'ports-too-many';
  }
  // Traffic reaches a routed service (or the ingress) only once it is ready: without a target the
  // runtime cannot tell, so it would route to replicas that are not.
  if ((service.routes.length > 0 || factsArg.isIngressService === true) && (service.readiness ?? null) === null) {
    return 'readiness-target-undeclared';
  }
  if (serviceEnvironmentBytes(service, factsArg.secrets ?? []) > serviceEnvironmentContract.maximumTotalBytes) {
    return 'environment-too-large';
  }
  return null;
};

/** `replica-limit`: more replicas than one runtime config carries. Pure. */
export const judgeServiceReplicaLimit = (serviceArg: Pick<IService, 'runtime'>): TServiceRuntimeRefusal | null =>
  (serviceArg.runtime.replicas > runtimeConfigContract.maximumReplicas ? 'replica-limit' : null);

/**
 * The waits of the spec's own three, in contract order, from what the relay observed and what the
 * route table and the nodes' lease statements say. Pure.
 *
 * - `node-network-pending`: a node runs the service at its current revision, but has not confirmed
 *   every lease Cloudly holds for the service on it, so the workload has no address there yet.
 * - `conflict`: a hostname the service declares is routed to another, older service (two writes
 *   raced past the hostname check; the route table keeps the older one until one of them changes).
 * - `failure-backoff`: the relay reports the current revision `failed` on a node; it retries with
 *   its own backoff, and the wait holds until a report says otherwise.
 */
export const judgeServiceWaits = (
  factsArg: Pick<IServiceRuntimeFacts, 'service' | 'routesTakenByOthers' | 'nodeNetwork' | 'observed'> & { claims?: IServiceRuntimeFacts['claims'] },
): TServiceRuntimeWaitingReason | null => {
  const current = (factsArg.observed ?? []).filter((placement) => placement.specRevision === factsArg.service.specRevision);
  const network = factsArg.nodeNetwork;
  if (network && current.some((placement) => (placement.state === 'starting' || placement.state === 'ready')
    && (network.heldLeaseIds.get(placement.nodeId) ?? []).some((leaseId) => !network.confirmedLeaseIds.has(leaseId)))) {
    return 'node-network-pending';
  }
  // Another (older) service holds a hostname this one declares; or a node holds a newer generation
  // of a claim than Cloudly issued (it answered `historical`), so Cloudly and the node disagree about
  // the volume and nothing moves until an administrator supersedes the node's generation.
  if ((factsArg.routesTakenByOthers ?? []).length > 0 || (factsArg.claims ?? []).some((record) => record.answerStatus === 'historical')) {
    return 'conflict';
  }
  if (current.some((placement) => placement.state === 'failed')) {
    return 'failure-backoff';
  }
  return null;
};

export const judgeServiceRuntime = (factsArg: IServiceRuntimeFacts): TServiceRuntimeVerdict => {
  // No cluster, or a cluster whose Pallet runtime does not exist yet (still on Swarm, or in the
  // middle of its cutover): there is no runtime to hand the service to.
  if (!factsArg.clusterExists || (factsArg.clusterRuntimePhase !== undefined && factsArg.clusterRuntimePhase !== 'pallet')) {
    return { state: 'refused', reason: 'cluster-runtime-missing' };
  }
  if (factsArg.organizationRegistered === false) {
    return { state: 'refused', reason: 'organization-missing' };
  }
  // A service naming an image version Cloudly does not hold has nothing a node could run.
  if (factsArg.imageVersionHeld === false) {
    return { state: 'refused', reason: 'image-plan-missing' };
  }
  // A secret the workload needs that its relay could not open: the service would start without it.
  if ((factsArg.secrets ?? []).some((secret) => secret.valueBytes === null)) {
    return { state: 'refused', reason: 'secret-version-missing' };
  }
  const admission = judgeServiceAdmission(factsArg);
  if (admission) {
    return { state: 'refused', reason: admission };
  }
  // A placement whose every node has left the cluster leaves the service nowhere to run.
  const placement = factsArg.service.runtime.placement.nodeIds;
  if (factsArg.clusterNodeIds && placement.length > 0 && !placement.some((nodeId) => factsArg.clusterNodeIds!.has(nodeId))) {
    return { state: 'refused', reason: 'no-eligible-node' };
  }
  const replicaLimit = judgeServiceReplicaLimit(factsArg.service);
  if (replicaLimit) {
    return { state: 'refused', reason: replicaLimit };
  }
  const nodeAuthority = judgeServiceNodeAuthority(factsArg);
  if (nodeAuthority) {
    return { state: 'refused', reason: nodeAuthority };
  }
  const networkPolicy = judgeServiceNetworkPolicy(factsArg);
  if (networkPolicy) {
    return { state: 'refused', reason: networkPolicy };
  }
  // A workload without its lease has no address to run at (contract order: before the volume refusals).
  if (factsArg.workloadLeases && factsArg.workloadLeases.shortfall > 0) {
    return { state: 'refused', reason: factsArg.workloadLeases.poolMissing ? 'network-workload-pool-missing' : 'network-workload-pool-exhausted' };
  }
  const earned = new Set<TServiceRuntimeRefusal>();
  for (const volume of factsArg.service.volumes) {
    const marker = factsArg.claimMarkers.find((candidate) => candidate.mountPath === volume.mountPath);
    for (const refusal of judgeServiceVolume(factsArg.service, volume, marker)) {
      earned.add(refusal);
    }
  }
  // The volume refusals in contract order: the first one any volume earns is the verdict.
  const refusal = serviceRuntimeVolumeRefusals.find((candidate) => earned.has(candidate));
  if (refusal) {
    return { state: 'refused', reason: refusal };
  }
  const wait = judgeServiceWaits(factsArg);
  if (wait) {
    return { state: 'waiting', reason: wait };
  }
  const importPending = factsArg.claims.some((record) =>
    record.claim.lifecycle === 'bound'
    && record.claim.initialization === 'import'
    && (record.nodeState === null || record.nodeState === 'import-required'));
  if (importPending) {
    return { state: 'waiting', reason: 'storage-import-pending' };
  }
  // A binding waiting for its legacy adoption is the more specific wait, so it names the verdict.
  if (factsArg.bindings.legacyAdoptionPending) {
    return { state: 'waiting', reason: 'legacy-adoption-pending' };
  }
  // Judged from the secret manifest where the relay reports one; from the bindings' status otherwise.
  const gaps = judgeSecretManifests(factsArg);
  if (factsArg.bindings.bindingsPending || gaps.some((gap) => gap.bindingIds.length > 0)) {
    return { state: 'waiting', reason: 'bindings-pending' };
  }
  if (gaps.some((gap) => gap.secrets.length > 0)) {
    return { state: 'waiting', reason: 'secrets-pending' };
  }
  return { state: 'converging', reason: null };
};

/**
 * Whether the relay's observations show the service running as wanted at its current spec
 * revision: the ready replicas at that revision add up to the wanted ones, on placement nodes.
 * A service wanted at zero replicas is converged once the relay reported it at that revision and
 * nothing of it runs.
 */
export const isServiceObservedConverged = (
  serviceArg: { specRevision: number; runtime: { replicas: number; placement: { nodeIds: string[] } } },
  placementsArg: IServiceObservedPlacement[],
): boolean => {
  const current = placementsArg.filter((placement) => placement.specRevision === serviceArg.specRevision);
  const stale = placementsArg.some((placement) => placement.specRevision !== serviceArg.specRevision && placement.state !== 'stopped');
  if (current.length === 0 || stale) {
    return false;
  }
  if (serviceArg.runtime.replicas === 0) {
    return current.every((placement) => placement.state === 'stopped');
  }
  const allowed = serviceArg.runtime.placement.nodeIds;
  const ready = current.filter((placement) => placement.state === 'ready' && (allowed.length === 0 || allowed.includes(placement.nodeId)));
  const busy = current.some((placement) => placement.state === 'starting' || placement.state === 'failed');
  return !busy && ready.reduce((sum, placement) => sum + placement.replicas, 0) === serviceArg.runtime.replicas;
};
