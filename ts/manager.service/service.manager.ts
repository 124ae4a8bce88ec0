import { findPage, nextCursorMember, oldestFirst, orderedPageShape, pageOf, pageShape } from '../core/pagination.js';
import { randomUUID } from 'node:crypto';
import type { Cloudly } from '../classes.cloudly.js';
import {
  isSameServiceExecution,
  snapshotServicePorts,
  snapshotServiceReadiness,
  snapshotServiceRoutes,
  snapshotServiceRuntimeSpec,
  validateServiceWritableSpec,
  type IService,
  type IServiceWritableSpec,
} from '../interfaces/data/service.js';
import {
  deriveServiceVolumeClaimInitialization,
  getServiceVolumeId,
  snapshotServiceVolumeInitialization,
  validateServiceVolumeInitialization,
  type IServiceVolume,
  type TServiceWritableVolume,
} from '../interfaces/data/servicevolume.js';
import { snapshotServiceEnvironment, snapshotServiceSecrets } from '../interfaces/data/serviceenvironment.js';
import { snapshotServiceNetworkPolicy } from '../interfaces/data/servicenetworkpolicy.js';
import { secretGroupKind } from '../manager.secret/secretgroups.js';
import { secretRecipientsKind } from '../manager.secret/documents.js';
import { resolveServiceSecrets } from './secretresolution.js';
import { snapshotServiceRuntimeStatus, type IServiceRuntimeStatus } from '../interfaces/data/serviceruntimestatus.js';
import type { IRuntimeLocalStorageClaimRecord } from '../interfaces/data/runtimelocalstorageclaim.js';
import {
  bindApplyRuntimeLocalStorageClaimResponse,
  validateRuntimeSessionReference,
  type IApplyRuntimeLocalStorageClaimRequest,
  type IRuntimeSessionReference,
} from '../interfaces/requests/runtimesession.js';
import { refuse, refuseNamed } from '../core/errors.js';
import type { TDecision } from '../core/store.js';
import { adminMutation, adminOrchestration, adminQuery, registerOperations, relayMutation } from '../core/operations.js';
import { WorkQueue } from '../core/workqueue.js';
import { invalidField, isAnyValue, isIdString, isNonNegativeInteger, isPositiveInteger, problemsOfSentences, refuseFields, sentenceCheck, sentenceOfProblem, type TFieldCheck } from '../core/validation.js';
import {
  buildFirstClaimGeneration,
  buildClaimOverNodeGeneration,
  buildNextClaimGeneration,
  pendingClaimRecord,
  type IServiceVolumeClaimDecision,
} from './claims.js';
import { isServiceVolumeClaimable, judgeSecretManifests } from './runtimestatus.js';
import { deriveServiceRuntimeAssignmentViews } from './assignmentviews.js';
import type { IServiceObservedPlacement } from '../interfaces/data/desiredstate.js';
import type { IServiceRuntimeAssignmentView } from '../interfaces/data/serviceruntimeassignmentview.js';
import type { IRuntimeLiveness } from '../interfaces/data/serviceruntimestatus.js';
import { runtimeNetworkLeasesKind } from '../manager.runtimenetwork/documents.js';
import { nodeRuntimeAssignmentsKind } from '../manager.ingress/documents.js';
import { boundRelayText } from '../core/relaycalls.js';
import { migrateServiceShapes } from './migrate.js';
import { organizationOperations, registerNamedOrganizations, registerOrganizationsOfOlderServices } from './organizations.js';
import { cloudlyActor, currentOperation, generatedOnCommit, runInOperation } from '../core/operationcontext.js';
import {
  decideClaimAnswer,
  decideHistoricalSupersession,
  decideUncertainRelease,
  decideVolumeInitialization,
  historicalClaimsOf,
  isHeldHistorical,
  isHeldUncertain,
  volumeRefusal,
} from './decide.js';

export * from './documents.js';
import {
  runtimeLocalStorageClaimKind,
  runtimeNodeSessionKind,
  serviceKind,
  serviceRuntimeStatusKind,
  toPublicService,
  type IRuntimeLocalStorageClaimDocument,
  type IRuntimeNodeSessionDocument,
  type IServiceDocument,
  type IServiceRuntimeStatusDocument,
} from './documents.js';


/**
 * Services, their volumes and volume initialization, their runtime verdicts, and the local storage
 * claims Cloudly issues for their volumes.
 *
 * The service document is the commit point of everything about a volume: its initialization and
 * the decision to give it a claim (a marker holding the claim id, node and derived first-generation
 * initialization) land in the same conditional write, so an initialization can never change
 * after the claim that carries it was decided. Claim documents and their delivery to the node are
 * rolled forward from the markers, idempotently, after every write, on relay events and at start.
 */

const retainedClaimHistory = 16;
/** How long Cloudly waits for a node's answer to one claim push. */
export const claimPushTimeoutMs = 15_000;

const nodeSessionId = (clusterIdArg: string, nodeIdArg: string): string => `${clusterIdArg}/${nodeIdArg}`;

/** A relay states a node's current runtime session: recorded as stated, created on first report. */
const decideNodeSessionReport = (
  currentArg: IRuntimeNodeSessionDocument | null,
  clusterIdArg: string,
  nodeIdArg: string,
  sessionArg: IRuntimeSessionReference,
  nowArg: number,
  authoritiesArg?: number,
): TDecision<IRuntimeNodeSessionDocument> => {
  const session = { id: sessionArg.id, generation: sessionArg.generation };
  // A report that states no count leaves none stated: an earlier count belonged to an earlier session.
  const authorities = authoritiesArg === undefined ? {} : { resolvedWorkloadAuthorities: authoritiesArg };
  return currentArg
    ? { kind: 'write', change: { set: { session, reportedAt: nowArg, ...authorities }, ...(authoritiesArg === undefined ? { unset: ['resolvedWorkloadAuthorities'] } : {}) } }
    : { kind: 'create', doc: { id: nodeSessionId(clusterIdArg, nodeIdArg), clusterId: clusterIdArg, nodeId: nodeIdArg, session, reportedAt: nowArg, ...authorities } };
};

/**
 * A claim is pushed while no bound answer arrived, and an import claim is asked again while its
 * node still waits for the bytes: the node answers the repeat as `replay` with its current state,
 * which is how Cloudly learns the import finished.
 */
export const needsPush = (docArg: IRuntimeLocalStorageClaimDocument): boolean =>
  docArg.current.delivery === 'pending'
  || (docArg.current.claim.lifecycle === 'bound' && docArg.current.nodeState === 'import-required');

/** A stored volume from a writable one, keeping what the server manages for that mount path. */
const toStoredVolume = (writableArg: TServiceWritableVolume, previousArg: IServiceVolume | undefined): IServiceVolume => {
  const volume: IServiceVolume = {
    id: getServiceVolumeId(writableArg.mountPath),
    mountPath: writableArg.mountPath,
    readOnly: writableArg.readOnly,
    driver: writableArg.driver,
  };
  if (writableArg.driverOptions !== undefined) {
    volume.driverOptions = { ...writableArg.driverOptions };
  }
  if (writableArg.mountOptions !== undefined) {
    volume.mountOptions = [...writableArg.mountOptions];
  }
  if (previousArg?.initialization !== undefined) {
    volume.initialization = snapshotServiceVolumeInitialization(previousArg.initialization);
  }
  return volume;
};

const newClaimId = (): string => `lsc-${randomUUID()}`;

/**
 * The update of a service an administrator asked for, decided on the document as read: it must
 * exist, stay in its cluster and organization, not be on its way out, and still have the
 * generation the caller read. The spec revision moves only when the runtime spec changed; every
 * newly eligible volume gets its claim decision in the same write.
 */
const decideServiceUpdate = (
  currentArg: IServiceDocument | null,
  requestArg: { serviceId: string; expectedGeneration: number; service: IServiceWritableSpec },
  nowArg: number,
  newClaimIdArg: () => string,
): TDecision<IServiceDocument> => {
  const spec = requestArg.service;
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'service-not-found', `service ${requestArg.serviceId} does not exist`) };
  }
  const moved: string[] = [];
  if (spec.clusterId !== currentArg.clusterId) {
    moved.push('request.service.clusterId cannot change: a service does not move between clusters');
  }
  if (spec.organizationId !== currentArg.organizationId) {
    moved.push('request.service.organizationId cannot change');
  }
  if (moved.length > 0) {
    return { kind: 'refuse', refusal: refuseFields(problemsOfSentences(moved, 'request')) };
  }
  if (currentArg.deletionRequestedAt !== undefined) {
    return { kind: 'refuse', refusal: refuse('conflict', ['service-pending-removal']) };
  }
  if (currentArg.generation !== requestArg.expectedGeneration) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'generation-mismatch', "is not the service's current generation", 'request.expectedGeneration') };
  }
  const runtime = snapshotServiceRuntimeSpec(spec.runtime);
  const ports = snapshotServicePorts(spec.ports ?? []);
  const routes = snapshotServiceRoutes(spec.routes ?? []);
  const volumes = spec.volumes.map((volume) =>
    toStoredVolume(volume, currentArg.volumes.find((stored) => stored.mountPath === volume.mountPath)));
  const environment = snapshotServiceEnvironment(spec.environment);
  const secrets = snapshotServiceSecrets(spec.secrets);
  const readiness = snapshotServiceReadiness(spec.readiness);
  const networkPolicy = snapshotServiceNetworkPolicy(spec.networkPolicy);
  const specRevision = isSameServiceExecution(toPublicService(currentArg), { runtime, ports, routes, environment, secrets, readiness, networkPolicy })
    ? currentArg.specRevision
    : currentArg.specRevision + 1;
  const view: IService = { ...toPublicService(currentArg), name: spec.name, runtime, ports, routes, volumes, environment, secrets, readiness, networkPolicy, specRevision, updatedAt: nowArg };
  return {
    kind: 'write',
    change: {
      set: {
        name: spec.name,
        runtime,
        ports,
        routes,
        volumes,
        environment,
        secrets,
        readiness,
        networkPolicy,
        specRevision,
        updatedAt: nowArg,
        claimDecisions: decideVolumeClaims(view, currentArg.claimDecisions, newClaimIdArg),
      },
    },
  };
};

/** A new service under a fresh id: a collision with an existing document is refused. */
const decideServiceCreation = (
  currentArg: IServiceDocument | null,
  docArg: Omit<IServiceDocument, 'generation'>,
): TDecision<IServiceDocument> =>
  (currentArg ? { kind: 'refuse', refusal: refuseNamed('conflict', 'service-id-collided', 'service id collided; try again') } : { kind: 'create', doc: docArg });

/**
 * Claim decisions for a service state: existing ones are kept while their mount path exists, and
 * every eligible volume without one gets one now, from the derive rule. Decisions of removed
 * volumes are dropped, which orders their claims purged.
 */
const decideVolumeClaims = (
  serviceArg: IService,
  existingArg: IServiceVolumeClaimDecision[],
  newClaimIdArg: () => string = newClaimId,
): IServiceVolumeClaimDecision[] => {
  const mountPaths = new Set(serviceArg.volumes.map((volume) => volume.mountPath));
  const decisions = existingArg.filter((decision) => mountPaths.has(decision.mountPath));
  for (const volume of serviceArg.volumes) {
    if (decisions.some((decision) => decision.mountPath === volume.mountPath)) {
      continue;
    }
    if (!isServiceVolumeClaimable(serviceArg, volume)) {
      continue;
    }
    const derived = deriveServiceVolumeClaimInitialization(volume.initialization, serviceArg.runtime.profile.runAs);
    if (derived.refused) {
      continue;
    }
    decisions.push({
      mountPath: volume.mountPath,
      claimId: newClaimIdArg(),
      nodeId: serviceArg.runtime.placement.nodeIds[0],
      volumeId: volume.id,
      initialization: derived.initialization,
      initialOwnership: derived.initialOwnership,
    });
  }
  return decisions;
};

/** What the service manager asks of the controllers; built by the composition root. */
export interface IServiceManagerPorts {
  /** Waits (bounded) for the verdict runs this instance owes the service. */
  settledVerdict: (serviceArg: { id: string; clusterId: string }) => Promise<void>;
  /** Asks the volume claims controller to roll a service's claims forward. */
  requestClaims: (serviceIdArg: string) => void;
}

export class ServiceManager {
  private stopped = false;
  /**
   * Claim pushes, one run per claim at a time; a trigger during a run gets one more run after it,
   * so the last trigger is always seen. The claims controller's poll retries what stays pending.
   */
  private readonly pushes: WorkQueue;
  private ports: IServiceManagerPorts | null = null;

  constructor(private readonly cloudly: Cloudly) {
    this.pushes = new WorkQueue({ name: 'claim push', logger: cloudly.logger, process: (claimIdArg) => this.pushOnce(claimIdArg) });
    this.registerServiceHandlers();
    registerOperations(cloudly, organizationOperations(cloudly, async (organizationIdArg) =>
      (await cloudly.store.find(serviceKind, { organizationId: organizationIdArg })).map((service) => ({ id: service.id, name: service.name }))));
    this.registerVolumeHandlers();
    this.registerClaimHandlers();
  }

  /** The controllers' side, wired by the composition root once the reconciler exists. */
  public connect(portsArg: IServiceManagerPorts): void {
    this.ports = portsArg;
  }

  public async start(): Promise<void> {
    this.stopped = false;
    this.pushes.resume();
    // Documents written before ports and routes moved out of the runtime spec are moved first, so
    // nothing after this point reads the old shape.
    await migrateServiceShapes(this.cloudly.store, this.cloudly.logger);
    // Services stored before the organization registry existed name organizations it does not hold
    // yet: registered on the first start with the registry, so an upgrade refuses nothing that ran
    // before; never again after (an organization deleted since stays deleted).
    const registered = await registerOrganizationsOfOlderServices(this.cloudly.store, async () =>
      (await this.cloudly.store.find(serviceKind, {})).map((service) => service.organizationId));
    if (registered > 0) {
      this.cloudly.logger.info({ registered }, 'registered the organizations stored services name');
    }
    // Whatever a previous run decided but did not finish is rolled forward by the claims
    // controller's start-up pass.
  }

  public async stop(): Promise<void> {
    this.stopped = true;
    await this.pushes.drain();
  }

  // ------------------------------------------------------------------ reads other managers use

  /** The service, or null when Cloudly knows no such service. */
  public async getService(serviceIdArg: string): Promise<IService | null> {
    const doc = await this.cloudly.store.get(serviceKind, serviceIdArg);
    return doc ? toPublicService(doc) : null;
  }

  /** Every service, optionally of one cluster, oldest first. */
  public async listServices(filterArg: { clusterId?: string } = {}): Promise<IService[]> {
    const filter = filterArg.clusterId === undefined ? {} : { clusterId: filterArg.clusterId };
    const docs = await this.cloudly.store.find(serviceKind, filter, { sort: { createdAt: 1 } });
    return docs.map(toPublicService);
  }

  /** Every claim revision of a service's volumes (current and retained history). */
  public async listRuntimeLocalStorageClaims(serviceIdArg: string): Promise<IRuntimeLocalStorageClaimRecord[]> {
    return (await this.readRuntimeLocalStorageClaims(serviceIdArg)).flatMap((doc) => [...doc.history, doc.current]);
  }

  /** The claim documents of a service, oldest issued first. */
  private async readRuntimeLocalStorageClaims(serviceIdArg: string) {
    const docs = await this.cloudly.store.find(runtimeLocalStorageClaimKind, { serviceId: serviceIdArg });
    return docs.sort((left, right) => left.current.issuedAt - right.current.issuedAt || left.id.localeCompare(right.id));
  }

  /** The stored verdict on the service (null when none is stored yet): a pure read, the reconciler keeps it current. */
  public async readServiceRuntimeStatus(serviceIdArg: string): Promise<IServiceRuntimeStatus | null> {
    const doc = await this.cloudly.store.get(serviceRuntimeStatusKind, serviceIdArg);
    return doc ? this.toStatus(serviceIdArg, doc) : null;
  }

  private toStatus(serviceIdArg: string, docArg: IServiceRuntimeStatusDocument): IServiceRuntimeStatus {
    return snapshotServiceRuntimeStatus({
      id: serviceIdArg,
      specRevision: docArg.specRevision,
      state: docArg.state,
      reason: docArg.reason,
      changedAt: docArg.changedAt,
    });
  }

  // ------------------------------------------------------------------ services

  private registerServiceHandlers(): void {
    const isWritableSpec: TFieldCheck = sentenceCheck(validateServiceWritableSpec);
    const isServiceRead = { required: { serviceId: isIdString } };
    registerOperations(this.cloudly, [
      adminMutation({
        method: 'createService',
        access: 'write',
        input: { required: { service: isWritableSpec } },
        facts: async (request) => {
          await this.requireServiceReferences(request.service, null);
          // Naming an organization the registry does not hold yet registers it (create-only, so a
          // concurrent registration is the same fact); it is committed before the service is.
          if (!currentOperation().dryRun) {
            await registerNamedOrganizations(this.cloudly.store, [request.service.organizationId]);
          }
          // The id is made here; a dry run's would never be stored (its answer leaves it out).
          generatedOnCommit('service.id');
          return { id: `svc-${randomUUID()}` };
        },
        target: (_request, facts) => ({ kind: serviceKind, id: facts.id }),
        decide: (current, { request, facts, now }) => decideServiceCreation(current, {
          id: facts.id,
          name: request.service.name,
          organizationId: request.service.organizationId,
          clusterId: request.service.clusterId,
          specRevision: 1,
          runtime: snapshotServiceRuntimeSpec(request.service.runtime),
          ports: snapshotServicePorts(request.service.ports ?? []),
          routes: snapshotServiceRoutes(request.service.routes ?? []),
          volumes: request.service.volumes.map((volume) => toStoredVolume(volume, undefined)),
          environment: snapshotServiceEnvironment(request.service.environment),
          secrets: snapshotServiceSecrets(request.service.secrets),
          readiness: snapshotServiceReadiness(request.service.readiness),
          networkPolicy: snapshotServiceNetworkPolicy(request.service.networkPolicy),
          claimDecisions: [],
          createdAt: now,
          updatedAt: now,
        }),
        answer: ({ doc }) => ({ service: toPublicService(doc!) }),
        after: ({ doc }, _step, context) => {
          this.cloudly.logger.info({ serviceId: doc!.id, actor: context.identity.userId }, 'service created');
        },
      }),
      adminMutation({
        method: 'updateService',
        access: 'write',
        input: { required: { serviceId: isIdString, expectedGeneration: isPositiveInteger, service: isWritableSpec } },
        facts: async (request) => {
          // A move between clusters or organizations is named before the references of the new spec are judged.
          const current = await this.cloudly.store.get(serviceKind, request.serviceId);
          if (current && current.clusterId === request.service.clusterId && current.organizationId === request.service.organizationId) {
            await this.requireServiceReferences(request.service, current.id);
          }
          return { newClaimId };
        },
        target: (request) => ({ kind: serviceKind, id: request.serviceId }),
        decide: (current, { request, facts, now }) => decideServiceUpdate(current, request, now, facts.newClaimId),
        answer: ({ doc }) => ({ service: toPublicService(doc!) }),
        after: ({ doc }, _step, context) => {
          // Its claims roll forward by the claims controller: the service's commit is its input.
          this.cloudly.logger.info({ serviceId: doc!.id, actor: context.identity.userId, specRevision: doc!.specRevision }, 'service updated');
        },
      }),
      adminQuery({
        method: 'getServices',
        access: 'read',
        input: { required: {}, optional: { clusterId: isIdString, ...orderedPageShape('getServices', oldestFirst('createdAt')) } },
        run: async (request) => {
          const page = await findPage(
            this.cloudly.store,
            serviceKind,
            request.clusterId === undefined ? {} : { clusterId: request.clusterId },
            'getServices',
            request,
            oldestFirst('createdAt'),
          );
          return { services: page.items.map(toPublicService), ...nextCursorMember(page) };
        },
      }),
      adminQuery({
        method: 'getServiceById',
        access: 'read',
        input: isServiceRead,
        run: async (request) => ({ service: await this.requireFound(request.serviceId, await this.getService(request.serviceId)) }),
      }),
      // A pure read of what the reconciler stored. A change this instance committed just before
      // (the caller's own write) is waited for, so a caller reads its own writes.
      adminQuery({
        method: 'getServiceRuntimeStatus',
        access: 'read',
        input: isServiceRead,
        run: async (request) => {
          const service = await this.requireFound(request.serviceId, await this.getService(request.serviceId));
          await this.ports?.settledVerdict(service);
          const doc = await this.cloudly.store.get(serviceRuntimeStatusKind, service.id);
          const status = doc ? this.toStatus(service.id, doc) : null;
          if (!status) {
            // Only while the reconciler has not reached a new service yet (or another instance reconciles it).
            throw refuse('unavailable', ['runtime-status-not-judged-yet'], { retryAfterMs: 1_000 });
          }
          const [placements, claims, secrets, bindings] = await Promise.all([
            this.cloudly.desiredStateManager.observedPlacements(status.id),
            this.readRuntimeLocalStorageClaims(service.id),
            this.resolveSecrets(service),
            this.cloudly.corestoreManager.getPlatformBindingsOfServices([service.id]),
          ]);
          const manifestGaps = judgeSecretManifests({
            service,
            observed: placements,
            manifestExpectation: {
              bindingIds: bindings.filter((binding) => binding.enabled).map((binding) => binding.id),
              secrets: secrets.map((secret) => ({ name: secret.name, secretVersionId: secret.reference.secretVersionId })),
            },
          });
          const lastReportedAt = placements.reduce<number | null>((latest, placement) => Math.max(latest ?? 0, placement.reportedAt), null);
          const assignments = await this.assignmentViews(service, placements, claims, doc?.unknown ?? null);
          return {
            status,
            assignments,
            observed: { placements, lastReportedAt },
            historicalClaims: historicalClaimsOf(claims),
            unknown: doc?.unknown ?? null,
            missingSecrets: secrets.flatMap((secret) => (secret.state === 'missing'
              ? [{ name: secret.name, secretId: secret.reference.secretId, secretVersionId: secret.reference.secretVersionId, cause: secret.cause }]
              : [])),
            manifestGaps,
          };
        },
      }),
    ]);
  }

  /** One view per replica slot of the service (./assignmentviews.ts), from what Cloudly holds of its cluster now. */
  private async assignmentViews(
    serviceArg: IService,
    placementsArg: IServiceObservedPlacement[],
    claimsArg: IRuntimeLocalStorageClaimDocument[],
    unknownArg: IRuntimeLiveness | null,
  ): Promise<IServiceRuntimeAssignmentView[]> {
    const { store } = this.cloudly;
    const clusterId = serviceArg.clusterId;
    const [serviceDoc, nodes, entries, confirmations, sessions, nodeAssignments] = await Promise.all([
      store.get(serviceKind, serviceArg.id),
      this.cloudly.clusterManager.nodes.listNodes(clusterId),
      this.cloudly.runtimeNetworkManager.leases.readEntries({ cached: true }),
      store.find(runtimeNetworkLeasesKind, { clusterId }),
      store.find(runtimeNodeSessionKind, { clusterId }),
      store.find(nodeRuntimeAssignmentsKind, { clusterId }),
    ]);
    return deriveServiceRuntimeAssignmentViews({
      service: {
        id: serviceArg.id,
        specRevision: serviceArg.specRevision,
        replicas: serviceArg.runtime.replicas,
        placementNodeIds: serviceArg.runtime.placement.nodeIds,
        leaving: serviceDoc === null || serviceDoc.deletionRequestedAt !== undefined,
      },
      clusterNodeIds: nodes.map((node) => node.id),
      leases: entries.filter((entry) => entry.serviceId === serviceArg.id && entry.clusterId === clusterId && entry.releasedAt === undefined),
      confirmedLeaseIds: new Set(confirmations.flatMap((confirmation) => confirmation.leases.map((lease) => lease.lease.id))),
      sessions,
      placements: placementsArg,
      nodeAssignments,
      claims: claimsArg,
      unknown: unknownArg,
    });
  }

  /** How each secret the service names stands for delivery to its cluster (secretresolution.ts). */
  private async resolveSecrets(serviceArg: IService) {
    const ids = [...new Set(Object.values(serviceArg.secrets).map((reference) => reference.secretId))];
    const [groups, recipients] = await Promise.all([
      ids.length === 0 ? [] : this.cloudly.store.find(secretGroupKind, { id: { $in: ids } }),
      this.cloudly.store.get(secretRecipientsKind, serviceArg.clusterId),
    ]);
    return resolveServiceSecrets(serviceArg, new Map(groups.map((group) => [group.id, group])), recipients);
  }

  /** The answer of a `{ identity, serviceId }` read, or `not-found` when the read found no such service. */
  private async requireFound<TAnswer>(serviceIdArg: string, answerArg: TAnswer | null): Promise<TAnswer> {
    if (answerArg === null) {
      throw refuseNamed('not-found', 'service-not-found', `service ${serviceIdArg} does not exist`);
    }
    return answerArg;
  }

  /**
   * A service names a cluster that exists and places itself only on nodes that cluster has: an
   * unknown cluster is `not-found`, every unknown placement node is named in one `invalid-request`.
   */
  private async requireServiceReferences(specArg: IServiceWritableSpec, serviceIdArg: string | null): Promise<void> {
    if (!(await this.cloudly.clusterManager.getCluster(specArg.clusterId))) {
      throw refuseNamed('not-found', 'cluster-not-found', `names no cluster: ${specArg.clusterId}`, 'request.service.clusterId');
    }
    const known = new Set((await this.cloudly.clusterManager.nodes.listNodes(specArg.clusterId)).map((node) => node.id));
    const reasons = specArg.runtime.placement.nodeIds
      .map((nodeId, index) => ({ nodeId, index }))
      .filter(({ nodeId }) => !known.has(nodeId))
      .map(({ nodeId, index }) => `request.service.runtime.placement.nodeIds[${index}] names no node of cluster ${specArg.clusterId}: ${nodeId}`);
    // A hostname routes to one service of a cluster. (Checked, not raced: two services claiming a
    // new hostname at the same instant can both pass; the route table then keeps the older one.)
    const routes = specArg.routes ?? [];
    if (routes.length > 0) {
      const taken = new Map<string, string>();
      for (const other of await this.cloudly.store.findFields(serviceKind, { clusterId: specArg.clusterId }, ['id', 'deletionRequestedAt', 'routes'])) {
        if (other.id !== serviceIdArg && other.deletionRequestedAt === undefined) {
          for (const route of other.routes ?? []) {
            taken.set(route.hostname, other.id);
          }
        }
      }
      routes.forEach((route, index) => {
        const owner = taken.get(route.hostname);
        if (owner) {
          reasons.push(`request.service.routes[${index}].hostname repeats the hostname of a route of service ${owner}`);
        }
      });
    }
    // A secret is named by one version of a group sealed for this cluster; a version that does not
    // exist is named here (and, if it goes later, by the verdict).
    for (const [name, reference] of Object.entries(specArg.secrets ?? {})) {
      const group = await this.cloudly.store.get(secretGroupKind, reference.secretId);
      const version = group?.versions.find((candidate) => candidate.secretVersionId === reference.secretVersionId);
      if (!version) {
        reasons.push(`request.service.secrets.${name} names no secret version: ${reference.secretId}/${reference.secretVersionId}`);
      } else if (!version.sealed.some((copy) => copy.binding.clusterId === specArg.clusterId)) {
        reasons.push(`request.service.secrets.${name} names no secret version sealed for cluster ${specArg.clusterId}: ${reference.secretId}/${reference.secretVersionId}`);
      }
    }
    if (reasons.length > 0) {
      throw refuseFields(problemsOfSentences(reasons, 'request'));
    }
  }

  // ------------------------------------------------------------------ volume initialization

  private registerVolumeHandlers(): void {
    registerOperations(this.cloudly, [adminMutation({
      method: 'setServiceVolumeInitialization',
      access: 'write',
      input: { required: { serviceId: isIdString, mountPath: isAnyValue, expected: isAnyValue, initialization: isAnyValue } },
      // Both values are checked whole; their reasons travel in the contract's error data.
      check: (request) => [
        // The volume is named by its exact mount path (any other string is volume-not-found), so only the type is judged here.
        ...(typeof request.mountPath === 'string' ? [] : [invalidField('request.mountPath', 'must be a string')]),
        ...(request.expected === null ? [] : problemsOfSentences(validateServiceVolumeInitialization(request.expected, 'request.expected'), 'request.expected')),
        ...(request.initialization === null
          ? []
          : problemsOfSentences(validateServiceVolumeInitialization(request.initialization, 'request.initialization'), 'request.initialization')),
      ],
      // The contract answers in IServiceVolumeInitializationErrorData: an invalid value, and a write
      // that lost every round (a lost round re-reads and decides again; a write that changed this
      // volume meanwhile is answered `conflict` by the decision itself).
      refusals: {
        invalid: (problems) => volumeRefusal('volume-initialization-invalid', problems.map(sentenceOfProblem)),
        conflict: () => volumeRefusal('conflict', ['the service kept changing while the initialization was set']),
      },
      target: (request) => ({ kind: serviceKind, id: request.serviceId }),
      decide: (current, { request, now }) => decideVolumeInitialization(current, {
        serviceId: request.serviceId,
        mountPath: request.mountPath,
        expected: request.expected,
        wanted: request.initialization === null ? null : snapshotServiceVolumeInitialization(request.initialization),
        now,
      }, toPublicService, decideVolumeClaims),
      answer: ({ doc }) => ({ service: toPublicService(doc!) }),
      after: ({ doc }, { request }, context) => {
        // The claim decision it may add is rolled forward by the claims controller (the service's commit is its input).
        this.cloudly.logger.info({ serviceId: doc!.id, mountPath: request.mountPath, actor: context.identity.userId }, 'service volume initialization set');
      },
    })]);
  }

  // ------------------------------------------------------------------ local storage claims

  private registerClaimHandlers(): void {
    registerOperations(this.cloudly, [
      adminQuery({
        method: 'getRuntimeLocalStorageClaims',
        access: 'read',
        input: { required: { serviceId: isIdString }, optional: pageShape('getRuntimeLocalStorageClaims') },
        run: async (request) => {
          if (!(await this.cloudly.store.get(serviceKind, request.serviceId))) {
            throw refuseNamed('not-found', 'service-not-found', `service ${request.serviceId} does not exist`);
          }
          // A page counts claims (each with its retained history), ordered by claim id.
          const page = pageOf('getRuntimeLocalStorageClaims', await this.readRuntimeLocalStorageClaims(request.serviceId), (docArg) => docArg.id, request);
          return { claims: page.items.flatMap((docArg) => [...docArg.history, docArg.current]), ...nextCursorMember(page) };
        },
      }),
      adminMutation({
        method: 'releaseUncertainRuntimeLocalStorageClaim',
        access: 'write',
        input: { required: { claimId: isIdString, generation: isPositiveInteger } },
        target: (request) => ({ kind: runtimeLocalStorageClaimKind, id: request.claimId }),
        decide: (current, { request }) => decideUncertainRelease(current, request.claimId, request.generation),
        answer: ({ doc }) => ({ claim: doc!.current }),
        after: ({ doc }, { request }, context) => {
          this.cloudly.logger.info(
            { claimId: doc!.id, generation: request.generation, actor: context.identity.userId },
            'uncertain local storage claim released',
          );
          // The held change (a purge or a remount) is issued and pushed after this answer.
          this.scheduleReconcile(doc!.serviceId);
        },
      }),
      adminMutation({
        method: 'supersedeHistoricalRuntimeLocalStorageClaim',
        access: 'write',
        input: { required: { claimId: isIdString, generation: isPositiveInteger } },
        // The next generation is sealed (async) from the claim as read; the decision checks it still applies.
        facts: async (request) => {
          const doc = await this.cloudly.store.get(runtimeLocalStorageClaimKind, request.claimId);
          const nodeClaim = doc?.current.nodeClaim;
          return {
            next: doc && nodeClaim && isHeldHistorical(doc)
              ? pendingClaimRecord(await buildClaimOverNodeGeneration(doc.current.claim, nodeClaim), Date.now())
              : null,
          };
        },
        target: (request) => ({ kind: runtimeLocalStorageClaimKind, id: request.claimId }),
        decide: (current, { request, facts }) => decideHistoricalSupersession(current, request, facts.next, retainedClaimHistory),
        answer: ({ doc }) => ({ claim: doc!.current }),
        after: ({ doc }, { request }, context) => {
          this.cloudly.logger.info(
            { claimId: doc!.id, generation: request.generation, issuedGeneration: doc!.current.claim.generation, actor: context.identity.userId },
            'historical local storage claim superseded over the node\'s generation',
          );
          void this.pushClaim(doc!.id);
        },
      }),
      relayMutation({
        method: 'reportRuntimeNodeSession',
        access: 'relay',
        input: { required: { nodeId: isIdString, session: sentenceCheck(validateRuntimeSessionReference) }, optional: { resolvedWorkloadAuthorities: isNonNegativeInteger } },
        // The socket names the cluster: every report is confined to the relay's own cluster and its nodes.
        facts: async (request, context) => {
          if (!(await this.cloudly.clusterManager.nodes.getNode(context.clusterId, request.nodeId))) {
            throw refuseNamed('not-found', 'node-not-found', 'names no node of this relay\'s cluster', 'request.nodeId');
          }
          return { clusterId: context.clusterId };
        },
        target: (request, facts) => ({ kind: runtimeNodeSessionKind, id: nodeSessionId(facts.clusterId, request.nodeId) }),
        decide: (current, { request, facts, now }) => decideNodeSessionReport(current, facts.clusterId, request.nodeId, request.session, now, request.resolvedWorkloadAuthorities),
        answer: async ({ doc }) => {
          const pending = await this.pendingClaimIds({ clusterId: doc!.clusterId, nodeId: doc!.nodeId });
          // Pushed after this answer: the push travels over the same relay socket.
          setImmediate(() => {
            for (const claimId of pending) {
              void this.pushClaim(claimId);
            }
          });
          return { accepted: true, pushedClaims: pending.length };
        },
      }),
    ]);
  }

  private scheduleReconcile(serviceIdArg: string): void {
    this.ports?.requestClaims(serviceIdArg);
  }

  /**
   * Rolls a service's claims forward from its document: a first generation for every decision
   * without a claim, a purge generation for every bound claim whose volume is gone, a new bound
   * generation when a volume's read-only flag changed; then pushes what is pending. The claims
   * controller's step (./claims.controller.ts); a failure is retried by it.
   */
  /**
   * One compare-and-swap of a service's spec on the generation a rollout read (ts/manager.rollout/):
   * `updateService`'s own decision, recorded under `mutationIdArg`, so a rollout resumed after a
   * crash finds whether its change committed (`store.findMutation`) instead of making it twice.
   * Throws the decision's refusal (`generation-mismatch` when someone else changed the service).
   */
  public async updateServiceSpecAt(
    serviceIdArg: string,
    expectedGenerationArg: number,
    specArg: IServiceWritableSpec,
    mutationIdArg: string,
  ): Promise<IServiceDocument> {
    const now = Date.now();
    const request = { serviceId: serviceIdArg, expectedGeneration: expectedGenerationArg, service: specArg };
    const { doc } = await this.cloudly.store.mutate(serviceKind, serviceIdArg, (current) => decideServiceUpdate(current, request, now, newClaimId), {
      mutation: { mutationId: mutationIdArg, answer: { applied: true } },
    });
    return doc!;
  }

  public async rollClaimsForward(serviceIdArg: string): Promise<void> {
    await this.reconcileOnce(serviceIdArg);
  }

  private async reconcileOnce(serviceIdArg: string): Promise<void> {
    const doc = await this.cloudly.store.get(serviceKind, serviceIdArg);
    const decisions = doc?.claimDecisions ?? [];
    const service = doc ? toPublicService(doc) : null;
    for (const decision of decisions) {
      const volume = service?.volumes.find((candidate) => candidate.mountPath === decision.mountPath);
      if (!service || !volume) {
        continue;
      }
      if (await this.cloudly.store.get(runtimeLocalStorageClaimKind, decision.claimId)) {
        continue;
      }
      const claim = await buildFirstClaimGeneration(service, volume, decision);
      // A concurrent reconcile may insert the same first generation; the insert has one winner.
      await this.cloudly.store.insert(runtimeLocalStorageClaimKind, {
        id: claim.id,
        serviceId: service.id,
        clusterId: service.clusterId,
        nodeId: decision.nodeId,
        mountPath: decision.mountPath,
        current: pendingClaimRecord(claim, Date.now()),
        history: [],
      });
    }
    for (const claimDoc of await this.cloudly.store.find(runtimeLocalStorageClaimKind, { serviceId: serviceIdArg })) {
      // Decided on the claim as it stands: a write that lost to another (an answer being recorded,
      // another reconcile) reads it again, and a claim already moved on is kept as it is.
      await this.cloudly.store.mutate(runtimeLocalStorageClaimKind, claimDoc.id, async (latestArg) => {
        const claim = latestArg?.current.claim;
        if (!latestArg || !claim || claim.lifecycle !== 'bound' || isHeldUncertain(latestArg) || isHeldHistorical(latestArg)) {
          return { kind: 'keep' };
        }
        const decided = decisions.some((decision) => decision.claimId === latestArg.id);
        const volume = service?.volumes.find((candidate) => candidate.mountPath === latestArg.mountPath);
        let next = null;
        if (!decided) {
          next = await buildNextClaimGeneration(claim, { lifecycle: 'purge', readOnly: claim.mount.readOnly });
        } else if (volume && volume.readOnly !== claim.mount.readOnly) {
          next = await buildNextClaimGeneration(claim, { lifecycle: 'bound', readOnly: volume.readOnly });
        }
        return next
          ? {
            kind: 'write',
            change: {
              set: {
                current: pendingClaimRecord(next, Date.now()),
                history: [...latestArg.history, latestArg.current].slice(-retainedClaimHistory),
              },
            },
          }
          : { kind: 'keep' };
      });
    }
    for (const claimId of await this.pendingClaimIds({ serviceId: serviceIdArg })) {
      await this.pushClaim(claimId);
    }
  }

  private async pendingClaimIds(filterArg: { serviceId?: string; clusterId?: string; nodeId?: string }): Promise<string[]> {
    const docs = await this.cloudly.store.find(runtimeLocalStorageClaimKind, filterArg);
    return docs.filter(needsPush).map((doc) => doc.id);
  }

  /** Pushes every pending claim of a cluster; an offline relay leaves them pending. */
  public async pushPendingClaims(clusterIdArg: string): Promise<void> {
    if (this.stopped) {
      return;
    }
    for (const claimId of await this.pendingClaimIds({ clusterId: clusterIdArg })) {
      await this.pushClaim(claimId);
    }
  }

  /**
   * Sends a claim's current generation to its node through the cluster relay and binds the answer
   * to exactly what was sent. Anything short of a bound answer leaves the claim pending with the
   * reason recorded; a later trigger sends it again (the node answers a repeat as `replay`).
   */
  public async pushClaim(claimIdArg: string): Promise<void> {
    // A failure is logged by the queue ('claim push failed'); the periodic retry pushes again.
    await this.pushes.add(claimIdArg);
  }

  private async pushOnce(claimIdArg: string): Promise<void> {
    const doc = await this.cloudly.store.get(runtimeLocalStorageClaimKind, claimIdArg);
    if (!doc || !needsPush(doc)) {
      return;
    }
    const sessionDoc = await this.cloudly.store.get(runtimeNodeSessionKind, nodeSessionId(doc.clusterId, doc.nodeId));
    if (!sessionDoc) {
      await this.recordDeliveryError(doc, 'node-session-unknown');
      return;
    }
    const request: IApplyRuntimeLocalStorageClaimRequest = { session: sessionDoc.session, claim: doc.current.claim };
    let response: unknown;
    try {
      // Read only through the contract's binding below: the answer stays unknown until then.
      response = await this.cloudly.relays.ask(doc.clusterId, 'applyRuntimeLocalStorageClaim', request);
    } catch (error) {
      // The one relay-call mapping names the failure first; a relay's own refusal adds its code.
      const data = (error as { errorData?: { reasons?: string[]; relayError?: { code: string | null } } }).errorData;
      const reason = data?.reasons?.[0] ?? 'relay-failed';
      await this.recordDeliveryError(doc, data?.relayError?.code ? `${reason}: ${data.relayError.code}` : reason);
      return;
    }
    let bound;
    try {
      bound = bindApplyRuntimeLocalStorageClaimResponse(response, request);
    } catch (error) {
      // The message can quote the node's answer: cut it before it reaches the log or the claim.
      const rejection = `answer-rejected: ${boundRelayText((error as Error).message, 1024)}`;
      this.cloudly.logger.warn({ claimId: claimIdArg, reason: rejection }, 'node answer does not match the sent claim; claim stays pending');
      await this.recordDeliveryError(doc, rejection);
      return;
    }
    const now = Date.now();
    // The claim is read afresh: a newer generation that replaced the one this answer is about is kept.
    // The write is Cloudly's, audited under the call whose answer it records (a historical answer
    // is then found in the audit log by method and claim, beside the warning below).
    const { outcome } = await runInOperation({ actor: cloudlyActor, method: 'applyRuntimeLocalStorageClaim', dryRun: false }, () =>
      this.cloudly.store.mutate(runtimeLocalStorageClaimKind, claimIdArg, (latestArg) =>
        decideClaimAnswer(latestArg, request.claim, bound, now)));
    if (bound.status === 'historical' && outcome === 'written') {
      // Nothing more is pushed for this claim: an operator must know, and the verdict says `conflict`.
      this.cloudly.logger.warn(
        { claimId: claimIdArg, serviceId: doc.serviceId, nodeId: doc.nodeId, issuedGeneration: request.claim.generation, nodeGeneration: bound.claim.generation },
        'node holds a newer local storage claim generation than Cloudly issued; pushes stop until an administrator supersedes it (supersedeHistoricalRuntimeLocalStorageClaim)',
      );
    }
  }

  private async recordDeliveryError(docArg: IRuntimeLocalStorageClaimDocument, reasonArg: string): Promise<void> {
    if (docArg.current.lastDeliveryError === reasonArg) {
      return;
    }
    // Only a record; losing this race to a newer write changes nothing that matters.
    await this.cloudly.store.swap(runtimeLocalStorageClaimKind, docArg.id, docArg.generation, {
      set: { current: { ...docArg.current, lastDeliveryError: reasonArg } },
    });
  }
}
