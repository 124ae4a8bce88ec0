import type { Cloudly } from '../classes.cloudly.js';
import { refuse } from '../core/errors.js';
import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import { isBoolean, isIdString, isNonNegativeInteger, isPositiveInteger, requireRequestShape, type TFieldCheck } from '../core/validation.js';
import { WorkQueue } from '../core/workqueue.js';
import {
  computeClusterPlatformDesiredStateDigest,
  observedReportLimits,
  observedServiceStates,
  type IClusterPlatformDesiredState,
  type IClusterPlatformObservedService,
  type IServiceObservedPlacement,
  type TClusterPlatformDesiredStateContent,
} from '../interfaces/data/desiredstate.js';
import type {
  IReq_Any_Cloudly_DeleteService,
  IReq_Any_Cloudly_GetClusterRouteTableResolution,
  IReq_Cloudly_Relay_PushClusterPlatformDesiredStateChanged,
  IReq_Relay_Cloudly_GetClusterPlatformDesiredState,
  IReq_Relay_Cloudly_GetClusterRouteTable,
  IReq_Relay_Cloudly_ReportClusterPlatformObservedState,
} from '../interfaces/requests/desiredstate.js';
import { serviceKind, serviceRuntimeStatusKind, toPublicService, type IServiceDocument } from '../manager.service/service.manager.js';
import { platformBindingKind } from '../manager.corestore/corestore.manager.js';
import { clusterIngressSlotKind } from '../manager.ingress/documents.js';
import { clusterRelayRegistrationKind } from '../manager.cluster/relayregistrations.js';
import { clusterNodeKind } from '../manager.cluster/clusternodes.js';
import { corestoreCredentialKind } from '../manager.secret/documents.js';
import { nodeAssignmentReportShape, prepareClusterIngressSpec } from '../manager.ingress/ingress.manager.js';
import { runtimeNetworkLeasesKind, runtimeNetworkProjectionKind } from '../manager.runtimenetwork/runtimenetwork.manager.js';
import { deriveClusterRoutes, resolveClusterRoutes } from './routes.js';
import type { IClusterUnresolvedRoute } from '../interfaces/data/desiredstate.js';

/**
 * The control loop's Cloudly side (Kubernetes' spec/status with generation/observedGeneration):
 * Cloudly publishes each cluster's desired state as one document with a revision and a digest,
 * hints the elected relay when it changes, and keeps what the relay reports it observed, from
 * which a service's runtime status becomes `converged`. A deleted service leaves the desired
 * state at once and its document goes when the relay reports it stopped.
 */

/** Per cluster: the revision and digest of the last desired state Cloudly published. */
export interface IClusterDesiredStateDocument extends IStoredDocument {
  revision: number;
  digest: string;
  /** The highest `desiredRevision` a relay report was accepted at; older reports are stale. */
  observedRevision: number;
}

/** Per service: what the relay last reported of it, per node. */
export interface IServiceObservedStateDocument extends IStoredDocument {
  clusterId: string;
  placements: IServiceObservedPlacement[];
}

export const clusterDesiredStateKind = defineDocumentKind<IClusterDesiredStateDocument>('CloudlyClusterDesiredState');
export const serviceObservedStateKind = defineDocumentKind<IServiceObservedStateDocument>('CloudlyServiceObservedState');

const isObservedService: TFieldCheck = (valueArg, pathArg) => {
  if (!valueArg || typeof valueArg !== 'object' || Array.isArray(valueArg)) {
    return [`${pathArg} must be an object`];
  }
  const record = valueArg as Record<string, unknown>;
  const reasons: string[] = [];
  for (const key of Object.keys(record)) {
    if (!['serviceId', 'nodeId', 'specRevision', 'replicas', 'state', 'reason'].includes(key)) {
      reasons.push(`${pathArg}.${key} is not a field of an observed service`);
    }
  }
  reasons.push(...isIdString(record.serviceId, `${pathArg}.serviceId`));
  reasons.push(...isIdString(record.nodeId, `${pathArg}.nodeId`));
  reasons.push(...isPositiveInteger(record.specRevision, `${pathArg}.specRevision`));
  reasons.push(...isNonNegativeInteger(record.replicas, `${pathArg}.replicas`));
  if (!(observedServiceStates as readonly unknown[]).includes(record.state)) {
    reasons.push(`${pathArg}.state must be one of ${observedServiceStates.join(', ')}`);
  }
  if (record.reason !== undefined && (typeof record.reason !== 'string' || record.reason.length > observedReportLimits.maximumReasonLength)) {
    reasons.push(`${pathArg}.reason must be a string of at most ${observedReportLimits.maximumReasonLength} characters`);
  }
  return reasons;
};

const isObservedServices: TFieldCheck = (valueArg, pathArg) => {
  if (!Array.isArray(valueArg)) {
    return [`${pathArg} must be an array`];
  }
  if (valueArg.length > observedReportLimits.maximumServices) {
    return [`${pathArg} must hold at most ${observedReportLimits.maximumServices} entries`];
  }
  const reasons = valueArg.flatMap((entry, index) => isObservedService(entry, `${pathArg}[${index}]`));
  const seen = new Set<string>();
  valueArg.forEach((entry, index) => {
    const key = `${(entry as IClusterPlatformObservedService)?.serviceId}/${(entry as IClusterPlatformObservedService)?.nodeId}`;
    if (seen.has(key)) {
      reasons.push(`${pathArg}[${index}] repeats the service and node of an earlier entry`);
    }
    seen.add(key);
  });
  return reasons;
};

export { deriveClusterRoutes } from './routes.js';

/** The optional `nodes` member of an observed-state report: each entry shaped as `reportClusterNodeRuntimeAssignments` is. */
const isObservedNodes: TFieldCheck = (valueArg, pathArg) => {
  if (!Array.isArray(valueArg)) {
    return [`${pathArg} must be an array`];
  }
  if (valueArg.length > observedReportLimits.maximumNodes) {
    return [`${pathArg} must hold at most ${observedReportLimits.maximumNodes} entries`];
  }
  const reasons: string[] = [];
  const seen = new Set<unknown>();
  valueArg.forEach((entry, index) => {
    const path = `${pathArg}[${index}]`;
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) {
      reasons.push(`${path} must be an object`);
      return;
    }
    const record = entry as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      if (!(key in nodeAssignmentReportShape)) {
        reasons.push(`${path}.${key} is not a field of an observed node`);
      }
    }
    for (const [key, check] of Object.entries(nodeAssignmentReportShape)) {
      reasons.push(...check(record[key], `${path}.${key}`));
    }
    if (seen.has(record.nodeId)) {
      reasons.push(`${path} repeats the node of an earlier entry`);
    }
    seen.add(record.nodeId);
  });
  return reasons;
};

export class DesiredStateManager {
  private readonly refreshes: WorkQueue;
  /** Clusters whose elected relay must be hinted on their next refresh even if nothing changed. */
  private readonly hintOwed = new Set<string>();
  private unsubscribe: (() => void) | null = null;
  /** Commits whose cluster is being looked up, before their refresh is queued. */
  private readonly lookups = new Set<Promise<void>>();
  /** The last desired state computed per cluster; the route table is answered from it while it is current. */
  private readonly lastStates = new Map<string, IClusterPlatformDesiredState>();

  constructor(private readonly cloudly: Cloudly) {
    this.refreshes = new WorkQueue({
      name: 'desired-state refresh',
      logger: cloudly.logger,
      process: (clusterIdArg) => this.refreshAndHint(clusterIdArg),
      retry: { maximumRetries: 5, baseDelayMs: 200, maximumDelayMs: 5_000 },
    });
    this.registerHandlers();
  }

  public async start(): Promise<void> {
    this.unsubscribe = this.cloudly.store.onCommitted((kindArg, idArg) => {
      if (kindArg === serviceKind || kindArg === clusterIngressSlotKind || kindArg === platformBindingKind
        || kindArg === clusterRelayRegistrationKind || kindArg === corestoreCredentialKind || kindArg === clusterNodeKind
        || kindArg === runtimeNetworkProjectionKind || kindArg === runtimeNetworkLeasesKind) {
        const lookup = this.clusterOfChange(kindArg.collectionName, idArg).then((clusterId) => {
          if (clusterId) {
            void this.refreshes.add(clusterId);
          }
        }, () => undefined).finally(() => this.lookups.delete(lookup));
        this.lookups.add(lookup);
      }
    });
    // A relay that becomes elected is told the current revision, so it converges without polling.
    this.cloudly.relays.onSessionOpened((sessionArg) => {
      this.hintOwed.add(sessionArg.clusterId);
      void this.refreshes.add(sessionArg.clusterId);
    });
  }

  /** Resolves once every commit seen so far has been turned into a refresh and that refresh has run. */
  public async settled(clusterIdArg: string): Promise<void> {
    while (this.lookups.size > 0) {
      await Promise.all([...this.lookups]);
    }
    await this.refreshes.idle(clusterIdArg);
  }

  public async stop(): Promise<void> {
    this.unsubscribe?.();
    await this.refreshes.drain();
  }

  /** Queues a refresh of the cluster's desired state (another manager's facts changed). */
  public requestRefresh(clusterIdArg: string): void {
    void this.refreshes.add(clusterIdArg);
  }

  private async clusterOfChange(collectionArg: string, idArg: string): Promise<string | null> {
    const { store } = this.cloudly;
    // The slot and the relay registration (whose origin the ingress spec carries) are kept per cluster.
    if (collectionArg === clusterIngressSlotKind.collectionName || collectionArg === clusterRelayRegistrationKind.collectionName) {
      return idArg;
    }
    if (collectionArg === corestoreCredentialKind.collectionName) {
      return (await store.get(corestoreCredentialKind, idArg))?.clusterId ?? null;
    }
    if (collectionArg === clusterNodeKind.collectionName || collectionArg === runtimeNetworkProjectionKind.collectionName
      || collectionArg === runtimeNetworkLeasesKind.collectionName) {
      // A node document's id is `<clusterId>/<nodeId>`; `/` never occurs in an id.
      return idArg.slice(0, idArg.indexOf('/'));
    }
    if (collectionArg === platformBindingKind.collectionName) {
      const binding = await store.get(platformBindingKind, idArg);
      return binding ? (await store.get(serviceKind, binding.serviceId))?.clusterId ?? null : null;
    }
    return (await store.get(serviceKind, idArg))?.clusterId ?? null;
  }

  /** The desired content of a cluster, computed from what is stored now. */
  public async computeContent(clusterIdArg: string): Promise<TClusterPlatformDesiredStateContent> {
    const { store } = this.cloudly;
    const services = (await store.find(serviceKind, { clusterId: clusterIdArg })).sort((a, b) => (a.id < b.id ? -1 : 1));
    const live = services.filter((service) => service.deletionRequestedAt === undefined);
    const serviceIds = new Set(live.map((service) => service.id));
    const bindings = (await store.find(platformBindingKind, {})).filter((binding) => serviceIds.has(binding.serviceId))
      .sort((a, b) => (a.id < b.id ? -1 : 1));
    const designation = await this.cloudly.ingressManager.getDesignation(clusterIdArg);
    let ingress: TClusterPlatformDesiredStateContent['ingress'] = null;
    if (designation) {
      const ingressService = live.find((service) => service.id === designation.ingressServiceId);
      const origin = (await this.cloudly.clusterManager.relayRegistrations.getRegistration(clusterIdArg))?.origin ?? null;
      ingress = {
        designation,
        spec: ingressService && origin !== null
          ? prepareClusterIngressSpec(toPublicService(ingressService), designation.credential.secretVersion, origin)
          : null,
      };
    }
    const nodeIds = (await this.cloudly.clusterManager.nodes.listNodes(clusterIdArg)).map((node) => node.id).sort();
    const credentials = await this.cloudly.secretManager.corestoreCredentialReferences(clusterIdArg, nodeIds);
    const nodes: TClusterPlatformDesiredStateContent['nodes'] = nodeIds.map((nodeId) => ({ nodeId, corestoreCredential: credentials.get(nodeId)! }));
    const { leases, routes } = await this.resolveRoutes(clusterIdArg, live, designation?.ingressServiceId ?? null);
    return {
      clusterId: clusterIdArg,
      nodes,
      services: live.map((service) => ({
        serviceId: service.id,
        name: service.name,
        organizationId: service.organizationId,
        specRevision: service.specRevision,
        runtime: service.runtime,
        volumes: service.volumes,
        platformBindings: bindings.filter((binding) => binding.serviceId === service.id)
          .map((binding) => ({ bindingId: binding.id, capability: binding.capability, enabled: binding.enabled, nodeId: binding.nodeId })),
      })),
      ingress,
      removals: services.filter((service) => service.deletionRequestedAt !== undefined)
        .map((service) => ({ serviceId: service.id, requestedAt: service.deletionRequestedAt! })),
      leases,
      routes: routes.routes,
    };
  }

  /**
   * The cluster's held leases (allocated first, so the desired state never names a workload
   * without its lease when the pool has room) and its routes resolved against them, the nodes'
   * confirmations and the stored projections.
   */
  private async resolveRoutes(clusterIdArg: string, liveArg: IServiceDocument[], ingressServiceIdArg: string | null) {
    const { store } = this.cloudly;
    const [allocation, confirmations, projections] = await Promise.all([
      this.cloudly.runtimeNetworkManager.allocateCluster(clusterIdArg),
      store.find(runtimeNetworkLeasesKind, { clusterId: clusterIdArg }),
      store.find(runtimeNetworkProjectionKind, { clusterId: clusterIdArg }),
    ]);
    const leases = allocation.leases.map((lease) => ({
      serviceId: lease.serviceId, nodeId: lease.nodeId, replica: lease.replica, lease: lease.lease, address: lease.address,
    }));
    const routes = resolveClusterRoutes({
      routes: deriveClusterRoutes(liveArg),
      ingressServiceId: ingressServiceIdArg,
      leases,
      confirmed: new Set(confirmations.flatMap((doc) => doc.leases.map((lease) => lease.lease.id))),
      projections: projections.map((doc) => doc.projection),
    });
    return { leases, routes };
  }

  /** The route table and the routes left out of it, for administrators. */
  public async routeTableResolution(clusterIdArg: string): Promise<IReq_Any_Cloudly_GetClusterRouteTableResolution['response']> {
    const state = await this.currentDesiredState(clusterIdArg);
    const live = (await this.cloudly.store.find(serviceKind, { clusterId: clusterIdArg }))
      .filter((service) => service.deletionRequestedAt === undefined);
    const { routes } = await this.resolveRoutes(clusterIdArg, live, state.ingress?.designation.ingressServiceId ?? null);
    const unresolved: IClusterUnresolvedRoute[] = routes.unresolved;
    return { table: { clusterId: clusterIdArg, revision: state.revision, routes: state.routes }, unresolved };
  }

  /**
   * The cluster's desired state: computed now, and published under the next revision when its
   * digest differs from the last published one (one conditional write; readers race safely).
   */
  public async currentDesiredState(clusterIdArg: string): Promise<IClusterPlatformDesiredState> {
    const content = await this.computeContent(clusterIdArg);
    const digest = computeClusterPlatformDesiredStateDigest(content);
    const { doc } = await this.cloudly.store.mutate(clusterDesiredStateKind, clusterIdArg, (currentArg) => {
      if (!currentArg) {
        return { kind: 'create', doc: { id: clusterIdArg, revision: 1, digest, observedRevision: 0 } };
      }
      return currentArg.digest === digest ? { kind: 'keep' } : { kind: 'write', change: { set: { revision: currentArg.revision + 1, digest } } };
    });
    const state = { ...content, revision: doc!.revision, digest };
    this.lastStates.set(clusterIdArg, state);
    return state;
  }

  private async refreshAndHint(clusterIdArg: string): Promise<void> {
    const before = await this.cloudly.store.get(clusterDesiredStateKind, clusterIdArg);
    const state = await this.currentDesiredState(clusterIdArg);
    const owed = this.hintOwed.delete(clusterIdArg);
    if (!owed && before?.revision === state.revision) {
      return;
    }
    // Elected here, or on another live instance (the hint is forwarded there: docs/multi-instance.md).
    if (!(await this.cloudly.clusterManager.electedSession(clusterIdArg))
      && !(await this.cloudly.clusterManager.relayElection.isClusterConnected(clusterIdArg))) {
      return;
    }
    try {
      await this.cloudly.relays.call<IReq_Cloudly_Relay_PushClusterPlatformDesiredStateChanged['response']>(
        clusterIdArg,
        'pushClusterPlatformDesiredStateChanged',
        { revision: state.revision, digest: state.digest } satisfies IReq_Cloudly_Relay_PushClusterPlatformDesiredStateChanged['request'],
      );
    } catch (error) {
      // A hint is only a hint: the relay converges by reading.
      this.cloudly.logger.debug({ clusterId: clusterIdArg, revision: state.revision, err: error }, 'desired-state hint not delivered');
    }
  }

  /** The observations of a service, newest report per node; empty when the relay reported none. */
  public async observedPlacements(serviceIdArg: string): Promise<IServiceObservedPlacement[]> {
    return (await this.cloudly.store.get(serviceObservedStateKind, serviceIdArg))?.placements ?? [];
  }

  private registerHandlers(): void {
    const { cloudly } = this;
    cloudly.addRelayHandler<IReq_Relay_Cloudly_GetClusterPlatformDesiredState>('getClusterPlatformDesiredState', async (request, context) => {
      request = requireRequestShape(request, { required: {}, optional: { knownRevision: isNonNegativeInteger } });
      await cloudly.clusterManager.requireElected(context.session);
      if (request.knownRevision !== undefined && !this.refreshes.isBusy(context.clusterId)) {
        // Every input of the desired state is watched (commits of services, bindings, the ingress
        // slot and the relay registration queue a refresh that publishes a new revision), so with
        // no refresh under way the published revision is current: answered without recomputing.
        const published = await cloudly.store.get(clusterDesiredStateKind, context.clusterId);
        if (published && published.revision === request.knownRevision) {
          return { unchanged: true, revision: published.revision, digest: published.digest };
        }
      }
      const state = await this.currentDesiredState(context.clusterId);
      return request.knownRevision === state.revision
        ? { unchanged: true, revision: state.revision, digest: state.digest }
        : { unchanged: false, desiredState: state };
    });

    cloudly.addRelayHandler<IReq_Relay_Cloudly_GetClusterRouteTable>('getClusterRouteTable', async (request, context) => {
      requireRequestShape(request, { required: {} });
      await cloudly.clusterManager.requireElected(context.session);
      // With no refresh under way, the last computed state is current when it is the published
      // revision (every input is watched): answered without recomputing.
      const cached = this.lastStates.get(context.clusterId);
      if (cached && !this.refreshes.isBusy(context.clusterId)) {
        const published = await cloudly.store.get(clusterDesiredStateKind, context.clusterId);
        if (published && published.revision === cached.revision && published.digest === cached.digest) {
          return { table: { clusterId: context.clusterId, revision: cached.revision, routes: cached.routes } };
        }
      }
      const state = await this.currentDesiredState(context.clusterId);
      return { table: { clusterId: context.clusterId, revision: state.revision, routes: state.routes } };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_GetClusterRouteTableResolution>('getClusterRouteTableResolution', async (request) => {
      request = requireRequestShape(request, { required: { clusterId: isIdString } });
      await cloudly.clusterManager.requireCluster(request.clusterId);
      return this.routeTableResolution(request.clusterId);
    });

    cloudly.addRelayHandler<IReq_Relay_Cloudly_ReportClusterPlatformObservedState>('reportClusterPlatformObservedState', async (request, context) => {
      request = requireRequestShape(request, {
        required: { desiredRevision: isNonNegativeInteger, services: isObservedServices },
        optional: { nodes: isObservedNodes },
      });
      await cloudly.clusterManager.requireElected(context.session);
      return this.acceptObservedReport(context.clusterId, request);
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_DeleteService>('deleteService', async (request) => {
      request = requireRequestShape(request, { required: { serviceId: isIdString, expectedGeneration: isPositiveInteger }, optional: { force: isBoolean } });
      const now = Date.now();
      let clusterId: string | null = null;
      const { outcome } = await cloudly.store.mutate(serviceKind, request.serviceId, (currentArg) => {
        if (!currentArg) {
          return { kind: 'refuse', refusal: refuse('not-found', [`request.serviceId names no service: ${request.serviceId}`]) };
        }
        if (currentArg.generation !== request.expectedGeneration) {
          return { kind: 'refuse', refusal: refuse('conflict', ["request.expectedGeneration is not the service's current generation"]) };
        }
        clusterId = currentArg.clusterId;
        if (request.force) {
          return { kind: 'remove' };
        }
        return currentArg.deletionRequestedAt !== undefined ? { kind: 'keep' } : { kind: 'write', change: { set: { deletionRequestedAt: now } } };
      });
      if (outcome === 'removed') {
        await this.forgetService(request.serviceId);
      }
      if (clusterId !== null) {
        void this.refreshes.add(clusterId);
      }
      return { serviceId: request.serviceId, deleted: outcome === 'removed', pendingRemoval: outcome !== 'removed' };
    });
  }

  /** Removes what Cloudly derived from a service that is gone: its observations and runtime status. */
  private async forgetService(serviceIdArg: string): Promise<void> {
    const { store } = this.cloudly;
    for (const kind of [serviceObservedStateKind, serviceRuntimeStatusKind] as const) {
      await store.mutate(kind as typeof serviceObservedStateKind, serviceIdArg, (currentArg) => (currentArg ? { kind: 'remove' } : { kind: 'keep' }));
    }
  }

  private async acceptObservedReport(
    clusterIdArg: string,
    reportArg: IReq_Relay_Cloudly_ReportClusterPlatformObservedState['request'],
  ): Promise<IReq_Relay_Cloudly_ReportClusterPlatformObservedState['response']> {
    const { store } = this.cloudly;
    const published = await store.get(clusterDesiredStateKind, clusterIdArg);
    const currentRevision = published?.revision ?? 0;
    if (reportArg.desiredRevision > currentRevision) {
      throw refuse('invalid-request', [`request.desiredRevision is ahead of the cluster's desired-state revision ${currentRevision}`]);
    }
    if (published && reportArg.desiredRevision < published.observedRevision) {
      throw refuse('conflict', ['desired-revision-stale']);
    }
    const services = new Map((await store.find(serviceKind, { clusterId: clusterIdArg })).map((service) => [service.id, service]));
    const nodes = new Set((await this.cloudly.clusterManager.nodes.listNodes(clusterIdArg)).map((node) => node.id));
    const reasons: string[] = [];
    reportArg.services.forEach((entry, index) => {
      const path = `request.services[${index}]`;
      const service = services.get(entry.serviceId);
      if (!service) {
        reasons.push(`${path}.serviceId names no service of this cluster`);
      } else {
        if (entry.specRevision > service.specRevision) {
          reasons.push(`${path}.specRevision is ahead of the service's spec revision ${service.specRevision}`);
        } else if (entry.specRevision === service.specRevision && entry.replicas > service.runtime.replicas) {
          reasons.push(`${path}.replicas contradicts the spec: more than the ${service.runtime.replicas} wanted`);
        }
      }
      if (!nodes.has(entry.nodeId)) {
        reasons.push(`${path}.nodeId names no node of this cluster`);
      }
    });
    (reportArg.nodes ?? []).forEach((entry, index) => {
      if (!nodes.has(entry.nodeId)) {
        reasons.push(`request.nodes[${index}].nodeId names no node of this cluster`);
      }
    });
    if (reasons.length > 0) {
      throw refuse('invalid-request', reasons);
    }
    await store.mutate(clusterDesiredStateKind, clusterIdArg, (currentArg) => {
      if (!currentArg) {
        return { kind: 'keep' };
      }
      if (reportArg.desiredRevision < currentArg.observedRevision) {
        return { kind: 'refuse', refusal: refuse('conflict', ['desired-revision-stale']) };
      }
      return currentArg.observedRevision === reportArg.desiredRevision
        ? { kind: 'keep' }
        : { kind: 'write', change: { set: { observedRevision: reportArg.desiredRevision } } };
    });
    // The nodes' assignment observations: the one stored observation the ingress judge reads.
    for (const entry of reportArg.nodes ?? []) {
      await this.cloudly.ingressManager.storeAssignments(clusterIdArg, entry);
    }
    const now = Date.now();
    const byService = new Map<string, IClusterPlatformObservedService[]>();
    for (const entry of reportArg.services) {
      byService.set(entry.serviceId, [...(byService.get(entry.serviceId) ?? []), entry]);
    }
    const removed: string[] = [];
    for (const [serviceId, entries] of byService) {
      const { doc } = await store.mutate(serviceObservedStateKind, serviceId, (currentArg) => {
        const kept = (currentArg?.placements ?? []).filter((placement) => !entries.some((entry) => entry.nodeId === placement.nodeId));
        const placements = [...kept, ...entries.map((entry) => ({
          nodeId: entry.nodeId,
          specRevision: entry.specRevision,
          replicas: entry.replicas,
          state: entry.state,
          ...(entry.reason !== undefined ? { reason: entry.reason } : {}),
          reportedAt: now,
        }))].sort((a, b) => (a.nodeId < b.nodeId ? -1 : 1));
        return currentArg
          ? { kind: 'write', change: { set: { placements } } }
          : { kind: 'create', doc: { id: serviceId, clusterId: clusterIdArg, placements } };
      });
      const service = services.get(serviceId)!;
      // A service pending removal goes once nothing of it runs anywhere the relay reported.
      if (service.deletionRequestedAt !== undefined && doc && doc.placements.every((placement) => placement.state === 'stopped')) {
        const { outcome } = await store.mutate(serviceKind, serviceId, (currentArg) =>
          (currentArg && currentArg.deletionRequestedAt !== undefined ? { kind: 'remove' } : { kind: 'keep' }));
        if (outcome === 'removed') {
          await this.forgetService(serviceId);
          removed.push(serviceId);
        }
      }
    }
    if (removed.length > 0) {
      void this.refreshes.add(clusterIdArg);
    }
    return { accepted: reportArg.services.length, removed };
  }
}
