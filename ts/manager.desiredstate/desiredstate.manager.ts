import type { Cloudly } from '../classes.cloudly.js';
import { registerOperations } from '../core/operations.js';
import { defaultRelayWorkConcurrency } from '../config.js';
import { WorkQueue } from '../core/workqueue.js';
import type { ICommittedOwners, IDocumentKind, IStoredDocument } from '../core/store.js';
import { failpoint } from '../core/failpoints.js';
import { requireValidRelayAnswer } from '../core/relaycalls.js';
import {
  computeClusterPlatformDesiredStateDigest,
  type IClusterPlatformDesiredState,
  type IServiceObservedPlacement,
  type TClusterPlatformDesiredStateContent,
} from '../interfaces/data/desiredstate.js';
import type { IReq_Any_Cloudly_GetClusterRouteTableResolution } from '../interfaces/requests/desiredstate.js';
import { serviceKind, serviceRuntimeStatusKind, toPublicService, type IServiceDocument } from '../manager.service/service.manager.js';
import { platformBindingKind } from '../manager.corestore/corestore.manager.js';
import { clusterIngressSlotKind } from '../manager.ingress/documents.js';
import { clusterRelayRegistrationKind } from '../manager.cluster/relayregistrations.js';
import { clusterNodeKind } from '../manager.cluster/clusternodes.js';
import { corestoreCredentialKind } from '../manager.secret/documents.js';
import { prepareClusterIngressSpec } from '../manager.ingress/ingress.manager.js';
import { runtimeNetworkLeasesKind, runtimeNetworkProjectionKind } from '../manager.runtimenetwork/documents.js';
import { deriveClusterRoutes, resolveClusterRoutes } from './routes.js';
import { snapshotServicePorts, snapshotServiceRoutes, snapshotServiceRuntimeSpec } from '../interfaces/data/service.js';
import type { IClusterUnresolvedRoute } from '../interfaces/data/desiredstate.js';
import { decideDesiredStatePublication, decideForget } from './decide.js';
import { clusterDesiredStateKind, serviceObservedStateKind, type IServiceObservedStateDocument } from './documents.js';
import { desiredStateOperations } from './operations.js';
import { ObservedReportMemo } from './observedmemo.js';
import { currentOperation } from '../core/operationcontext.js';
import { clusterKind } from '../manager.cluster/documents.js';
import { nodeRuntimeAssignmentsKind } from '../manager.ingress/documents.js';

/**
 * The control loop's Cloudly side (Kubernetes' spec/status with generation/observedGeneration):
 * Cloudly publishes each cluster's desired state as one document with a revision and a digest,
 * hints the elected relay when it changes, and keeps what the relay reports it observed, from
 * which a service's runtime status becomes `converged`. A deleted service leaves the desired
 * state at once and its document goes when the relay reports it stopped. The methods are declared
 * operations (./operations.ts, decisions in ./decide.ts); this class wires their ports and owns
 * the refresh queue and the hints.
 */

export {
  clusterDesiredStateKind,
  serviceObservedStateKind,
  type IClusterDesiredStateDocument,
  type IServiceObservedStateDocument,
} from './documents.js';
export { deriveClusterRoutes } from './routes.js';

/** What is wrong with a relay's answer to the desired-state hint (`{ acknowledged: boolean }`), member by member. */
export const hintAnswerReasons = (answerArg: unknown): string[] => {
  if (!answerArg || typeof answerArg !== 'object' || Array.isArray(answerArg)) {
    return ['answer must be { acknowledged }'];
  }
  const answer = answerArg as Record<string, unknown>;
  return [
    ...Object.keys(answer).filter((key) => key !== 'acknowledged').map((key) => `answer.${key} is not a member of the answer`),
    ...(typeof Object.getOwnPropertyDescriptor(answer, 'acknowledged')?.value === 'boolean' ? [] : ['answer.acknowledged must be a boolean']),
  ];
};

/** How long a newly opened socket's refresh waits for the registration's (which carries the hint instead). */
const sessionHintDelayMs = 200;

/** The last computation of a cluster used no registration origin (the cluster has no ingress designation). */
const originNotUsed = Symbol('origin not used');

export class DesiredStateManager {
  private readonly refreshes: WorkQueue;
  /** Clusters whose elected relay must be hinted on their next refresh even if nothing changed. */
  private readonly hintOwed = new Set<string>();
  private unsubscribe: (() => void) | null = null;
  /** Commits whose cluster is being looked up, before their refresh is queued. */
  private readonly lookups = new Set<Promise<void>>();
  /** The last desired state computed per cluster; the route table is answered from it while it is current. */
  private readonly lastStates = new Map<string, IClusterPlatformDesiredState>();
  /**
   * The relay registration's origin the last computation of each cluster used (`originNotUsed`
   * when the cluster has no ingress designation): a registration commit that leaves it as it was
   * queues no refresh.
   */
  private readonly originsUsed = new Map<string, string | null | typeof originNotUsed>();
  /**
   * Computations running per cluster, and who waits for them to end: a registration commit waits
   * for the ones that may have read the origin before it, then compares what they used.
   */
  private readonly computing = new Map<string, { running: number; ended: Array<() => void> }>();
  /** Desired-state computations this instance made (each costs about ten database reads). */
  public computations = 0;
  /** Refreshes owed to newly opened sockets, waiting for `sessionHintDelayMs`. */
  private readonly hintTimers = new Set<NodeJS.Timeout>();
  /** What this instance last stored of each cluster's observed-state report (./observedmemo.ts). */
  public readonly observedMemo: ObservedReportMemo;
  private unsubscribeMemo: (() => void) | null = null;

  constructor(private readonly cloudly: Cloudly) {
    const refreshConcurrency = cloudly.config.relayWorkConcurrency ?? defaultRelayWorkConcurrency;
    this.refreshes = new WorkQueue({
      name: 'desired-state refresh',
      logger: cloudly.logger,
      process: (clusterIdArg) => this.refreshAndHint(clusterIdArg),
      retry: { maximumRetries: 5, baseDelayMs: 200, maximumDelayMs: 5_000 },
      // A storm refreshes every reconnected cluster: a few at a time (CLOUDLY_RELAY_WORK_CONCURRENCY).
      ...(refreshConcurrency > 0 ? { concurrency: refreshConcurrency } : {}),
    });
    this.observedMemo = new ObservedReportMemo(cloudly.config.observedRefreshMs);
    registerOperations(cloudly, desiredStateOperations({
      store: cloudly.store,
      observedMemo: this.observedMemo,
      requireCluster: (clusterIdArg) => cloudly.clusterManager.requireCluster(clusterIdArg),
      requireElected: (sessionArg) => cloudly.clusterManager.requireElected(sessionArg),
      listNodeIds: async (clusterIdArg) => (await cloudly.clusterManager.nodes.listNodes(clusterIdArg)).map((node) => node.id),
      storeAssignments: (clusterIdArg, entryArg) => cloudly.ingressManager.storeAssignments(clusterIdArg, entryArg),
      isRefreshBusy: (clusterIdArg) => this.refreshes.isBusy(clusterIdArg),
      lastState: (clusterIdArg) => this.lastStates.get(clusterIdArg),
      currentDesiredState: (clusterIdArg) => this.currentDesiredState(clusterIdArg),
      routeTableResolution: (clusterIdArg) => this.routeTableResolution(clusterIdArg),
      routeTable: (clusterIdArg) => cloudly.ingressManager.getRouteTable(clusterIdArg),
      forgetService: (serviceIdArg) => this.forgetService(serviceIdArg),
      requestRefresh: (clusterIdArg) => this.requestRefresh(clusterIdArg),
    }));
  }

  public async start(): Promise<void> {
    this.unsubscribeMemo = this.cloudly.store.onCommitted((kindArg, idArg, ownersArg) => {
      const clusterId = this.memoClusterOf(kindArg, idArg, ownersArg);
      if (clusterId !== undefined) {
        this.observedMemo.invalidate(clusterId);
      }
    });
    this.cloudly.relays.onSessionClosed((sessionArg) => this.observedMemo.forgetCluster(sessionArg.clusterId));
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
    // A relay registers right after it connects, and that commit refreshes the cluster too: the
    // refresh for the new socket waits a moment and is dropped when one already carried the hint.
    this.cloudly.relays.onSessionOpened((sessionArg) => {
      const { clusterId } = sessionArg;
      this.hintOwed.add(clusterId);
      const timer = setTimeout(() => {
        this.hintTimers.delete(timer);
        if (this.hintOwed.has(clusterId)) {
          void this.refreshes.add(clusterId);
        }
      }, sessionHintDelayMs);
      this.hintTimers.add(timer);
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
    this.unsubscribeMemo?.();
    for (const timer of this.hintTimers) {
      clearTimeout(timer);
    }
    this.hintTimers.clear();
    await this.refreshes.drain();
  }

  /**
   * The cluster whose remembered observed-state report a commit may make wrong: undefined when it
   * cannot (another kind, or a report's own writes), null when its cluster is not known (a
   * removal: every entry goes).
   */
  private memoClusterOf(kindArg: IDocumentKind<IStoredDocument>, idArg: string, ownersArg: ICommittedOwners): string | null | undefined {
    if (kindArg === clusterKind) {
      return idArg;
    }
    if (kindArg === clusterNodeKind) {
      return idArg.slice(0, idArg.indexOf('/'));
    }
    if (kindArg === serviceKind) {
      return ownersArg.clusterId ?? null;
    }
    if (kindArg === clusterDesiredStateKind || kindArg === serviceObservedStateKind || kindArg === nodeRuntimeAssignmentsKind) {
      if (currentOperation().method === 'reportClusterPlatformObservedState') {
        // A report's own writes (its accepted revision, observations, assignments): the report
        // remembers what it stored, and a concurrent report of the cluster began after it.
        return undefined;
      }
      return kindArg === clusterDesiredStateKind ? idArg : ownersArg.clusterId ?? null;
    }
    return undefined;
  }

  /** Queues a refresh of the cluster's desired state (another manager's facts changed). */
  public requestRefresh(clusterIdArg: string): void {
    void this.refreshes.add(clusterIdArg);
  }

  private async clusterOfChange(collectionArg: string, idArg: string): Promise<string | null> {
    const { store } = this.cloudly;
    if (collectionArg === clusterIngressSlotKind.collectionName) {
      return idArg;
    }
    // The relay registration matters only for its origin, which the ingress spec carries: a relay
    // that registers again (every reconnect) changes nothing the last computation used.
    if (collectionArg === clusterRelayRegistrationKind.collectionName) {
      // A computation running now may have read the registration before this commit or after it:
      // once it has ended, what it used is compared with what is stored now. During a reconnect
      // storm the new socket's refresh is usually still running when the registration commits.
      await this.computationsEnded(idArg);
      const used = this.originsUsed.get(idArg);
      if (used === undefined) {
        return idArg;
      }
      if (used === originNotUsed) {
        return null;
      }
      return (await this.cloudly.clusterManager.relayRegistrations.getOrigin(idArg)) === used ? null : idArg;
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
    this.computations++;
    const computing = this.computing.get(clusterIdArg) ?? { running: 0, ended: [] };
    computing.running++;
    this.computing.set(clusterIdArg, computing);
    try {
      const { content, originUsed } = await this.readContent(clusterIdArg);
      this.originsUsed.set(clusterIdArg, originUsed);
      return content;
    } finally {
      if (--computing.running === 0) {
        this.computing.delete(clusterIdArg);
        for (const resolve of computing.ended) {
          resolve();
        }
      }
    }
  }

  /** Resolves once no computation of the cluster is running (at once when none is). */
  private computationsEnded(clusterIdArg: string): Promise<void> {
    const computing = this.computing.get(clusterIdArg);
    return computing ? new Promise((resolve) => computing.ended.push(resolve)) : Promise.resolve();
  }

  private async readContent(clusterIdArg: string): Promise<{ content: TClusterPlatformDesiredStateContent; originUsed: string | null | typeof originNotUsed }> {
    const { store } = this.cloudly;
    const services = (await store.find(serviceKind, { clusterId: clusterIdArg })).sort((a, b) => (a.id < b.id ? -1 : 1));
    const live = services.filter((service) => service.deletionRequestedAt === undefined);
    const serviceIds = new Set(live.map((service) => service.id));
    const bindings = (serviceIds.size === 0 ? [] : await store.find(platformBindingKind, { serviceId: { $in: [...serviceIds] } }))
      .sort((a, b) => (a.id < b.id ? -1 : 1));
    const designation = await this.cloudly.ingressManager.getDesignation(clusterIdArg);
    let ingress: TClusterPlatformDesiredStateContent['ingress'] = null;
    let originUsed: string | null | typeof originNotUsed = originNotUsed;
    if (designation) {
      const ingressService = live.find((service) => service.id === designation.ingressServiceId);
      const origin = await this.cloudly.clusterManager.relayRegistrations.getOrigin(clusterIdArg);
      originUsed = origin;
      await failpoint('desiredstate.compute.afterOriginRead');
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
    const content: TClusterPlatformDesiredStateContent = {
      clusterId: clusterIdArg,
      nodes,
      services: live.map((service) => ({
        serviceId: service.id,
        name: service.name,
        organizationId: service.organizationId,
        specRevision: service.specRevision,
        runtime: snapshotServiceRuntimeSpec(service.runtime),
        ports: snapshotServicePorts(service.ports ?? []),
        routes: snapshotServiceRoutes(service.routes ?? []),
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
    return { content, originUsed };
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
    // The one table, as the computation above recorded it (its own revision, the ingress's too).
    const table = await this.cloudly.ingressManager.getRouteTable(clusterIdArg);
    return { table: table ?? { clusterId: clusterIdArg, revision: 0, routes: [] }, unresolved };
  }

  /**
   * The cluster's desired state: computed now, and published under the next revision when its
   * digest differs from the last published one (one conditional write; readers race safely).
   */
  public async currentDesiredState(clusterIdArg: string): Promise<IClusterPlatformDesiredState> {
    return (await this.publish(clusterIdArg)).state;
  }

  /** Computes the desired state and publishes it when its digest changed; says whether it did. */
  private async publish(clusterIdArg: string): Promise<{ state: IClusterPlatformDesiredState; published: boolean }> {
    const content = await this.computeContent(clusterIdArg);
    const digest = computeClusterPlatformDesiredStateDigest(content);
    const { doc, outcome } = await this.cloudly.store.mutate(clusterDesiredStateKind, clusterIdArg, (currentArg) =>
      decideDesiredStatePublication(currentArg, clusterIdArg, digest));
    const state = { ...content, revision: doc!.revision, digest };
    // The resolved routes are the cluster's one route table: recorded under its own revision (moving
    // only when the routes change) and hinted to the ingress through the relay.
    await this.cloudly.ingressManager.recordComputedRouteTable(clusterIdArg, content.routes);
    this.lastStates.set(clusterIdArg, state);
    return { state, published: outcome !== 'kept' };
  }

  private async refreshAndHint(clusterIdArg: string): Promise<void> {
    const { state, published } = await this.publish(clusterIdArg);
    const owed = this.hintOwed.delete(clusterIdArg);
    if (!owed && !published) {
      return;
    }
    // Elected here, or on another live instance (the hint is forwarded there: docs/multi-instance.md).
    if (!(await this.cloudly.clusterManager.electedSession(clusterIdArg))
      && !(await this.cloudly.clusterManager.relayElection.isClusterConnected(clusterIdArg))) {
      return;
    }
    try {
      const answer = await this.cloudly.relays.ask(clusterIdArg, 'pushClusterPlatformDesiredStateChanged', {
        revision: state.revision,
        digest: state.digest,
      });
      requireValidRelayAnswer(hintAnswerReasons(answer));
    } catch (error) {
      // A hint is only a hint: the relay converges by reading.
      this.cloudly.logger.debug({ clusterId: clusterIdArg, revision: state.revision, err: error }, 'desired-state hint not delivered');
    }
  }

  /** The observations of a service, newest report per node; empty when the relay reported none. */
  public async observedPlacements(serviceIdArg: string): Promise<IServiceObservedPlacement[]> {
    return (await this.cloudly.store.get(serviceObservedStateKind, serviceIdArg))?.placements ?? [];
  }

  /** What the relay last reported of every service of a cluster, in one read. */
  public async observedStatesOfCluster(clusterIdArg: string): Promise<IServiceObservedStateDocument[]> {
    return this.cloudly.store.find(serviceObservedStateKind, { clusterId: clusterIdArg });
  }

  /** Removes what Cloudly derived from a service that is gone: its observations and runtime status. */
  private async forgetService(serviceIdArg: string): Promise<void> {
    const { store } = this.cloudly;
    for (const kind of [serviceObservedStateKind, serviceRuntimeStatusKind] as const) {
      await store.mutate(kind as typeof serviceObservedStateKind, serviceIdArg, decideForget);
    }
  }
}
