import type { Cloudly } from '../classes.cloudly.js';
import { secretGroupKind } from '../manager.secret/secretgroups.js';
import { secretRecipientsKind } from '../manager.secret/documents.js';
import { resolveServiceSecrets } from '../manager.service/secretresolution.js';
import { snapshotServiceEnvironment } from '../interfaces/data/serviceenvironment.js';
import { snapshotServiceNetworkPolicy, type IServiceNetworkPolicy } from '../interfaces/data/servicenetworkpolicy.js';
import type { IClusterReads } from '../manager.cluster/ports.js';
import type { IClusterIngressDesignation } from '../interfaces/data/clusteringressdesignation.js';
import type { IClusterIngressResolvedRoute } from '../interfaces/data/clusteringress.js';
import type { ICorestoreControlCredentialReference } from '../interfaces/data/secret.js';
import type { IClusterPlatformObservedNode, IClusterResolvedRouteTable } from '../interfaces/data/desiredstate.js';
import type { IClusterAllocation } from '../manager.runtimenetwork/leases.js';
import { registerOperations } from '../core/operations.js';
import { isRefusal, readCloudlyErrorData, refuse } from '../core/errors.js';
import type { ICommittedOwners } from '../core/store.js';
import { failpoint } from '../core/failpoints.js';
import { requireValidRelayAnswer } from '../core/relaycalls.js';
import {
  computeClusterPlatformDesiredStateDigest,
  type IClusterPlatformDesiredService,
  type IClusterPlatformDesiredState,
  type IServiceObservedPlacement,
  type TClusterPlatformDesiredStateContent,
} from '../interfaces/data/desiredstate.js';
import type { IReq_Any_Cloudly_GetClusterRouteTableResolution } from '../interfaces/requests/desiredstate.js';
import { serviceKind, toPublicService, type IServiceDocument } from '../manager.service/service.manager.js';
import { platformBindingKind } from '../manager.corestore/corestore.manager.js';
import { clusterNodeKind } from '../manager.cluster/clusternodes.js';
import { prepareClusterIngressSpec } from '../manager.ingress/ingress.manager.js';
import { runtimeNetworkLeasesKind, runtimeNetworkProjectionKind } from '../manager.runtimenetwork/documents.js';
import { deriveClusterRoutes, resolveClusterRoutes, type IRoutedService } from './routes.js';
import { DesiredServiceEntries, documentKeyOf, entryInputsKey, serviceSecretIdsOf, type IRememberedServiceEntry } from './serviceentries.js';
import type { TKnownCanonicalTexts } from '../interfaces/private/canonicaljson.js';
import { snapshotServicePorts, snapshotServiceRoutes, snapshotServiceRuntimeSpec } from '../interfaces/data/service.js';
import type { IClusterAddressLease, IClusterUnresolvedRoute } from '../interfaces/data/desiredstate.js';

/** Orders dotted IPv4 addresses numerically (10.0.0.9 before 10.0.0.10). */
const compareIpv4 = (leftArg: string, rightArg: string): number => {
  const left = leftArg.split('.').map(Number);
  const right = rightArg.split('.').map(Number);
  for (let index = 0; index < 4; index += 1) {
    const difference = (left[index] ?? 0) - (right[index] ?? 0);
    if (difference !== 0) {
      return difference;
    }
  }
  return leftArg < rightArg ? -1 : leftArg > rightArg ? 1 : 0;
};
import { decideDesiredStatePublication, decideForget } from './decide.js';
import { clusterDesiredStateKind, serviceObservedStateKind } from './documents.js';
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

/** The desired service's `networkPolicy` member: present only when the service requests a policy. */
const withNetworkPolicyOf = (serviceArg: { networkPolicy?: IServiceNetworkPolicy | null }): { networkPolicy?: IServiceNetworkPolicy } => {
  const policy = snapshotServiceNetworkPolicy(serviceArg.networkPolicy);
  return policy === null ? {} : { networkPolicy: policy };
};

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

/** How long a newly opened socket waits before it is hinted (its registration usually publishes first). */
const sessionHintDelayMs = 200;
/** A hint a new socket could not take (not elected yet) is tried again this often, this many times in all (about 10 s). */
const sessionHintRetryMs = 500;
const sessionHintAttempts = 20;
/** How long a relay read waits for the controller to publish what it computes before it answers `unavailable`. */
const publishedWaitBoundMs = 3_000;
/** The refusal of a relay read whose desired state the controller has not published yet (retryable). */
export const desiredStateNotPublishedReason = 'desired-state-not-published-yet';
const credentialNotMadeYetReason = 'corestore-credential-not-made-yet';
const isCredentialNotMadeYet = (errorArg: unknown): boolean =>
  isRefusal(errorArg) && (readCloudlyErrorData(errorArg.errorData)?.reasons ?? []).includes(credentialNotMadeYetReason);

/** What the desired state is computed from in other domains; built by the composition root. */
export interface IDesiredStateReads {
  clusters: IClusterReads;
  ingress: {
    getDesignation(clusterIdArg: string): Promise<IClusterIngressDesignation | null>;
    getRouteTable(clusterIdArg: string): Promise<IClusterResolvedRouteTable | null>;
    /** Records the resolved routes as the cluster's one route table (the desired-state controller's write). */
    recordComputedRouteTable(clusterIdArg: string, routesArg: readonly IClusterIngressResolvedRoute[]): Promise<unknown>;
    storeAssignments(clusterIdArg: string, entryArg: IClusterPlatformObservedNode): Promise<unknown>;
  };
  /** The references of the cluster's Corestore control credentials, by node (never a value). */
  credentialReferences(clusterIdArg: string): Promise<Map<string, ICorestoreControlCredentialReference>>;
  /** The cluster's workload lease allocation (the allocator writes what is owed). */
  allocateCluster(clusterIdArg: string): Promise<IClusterAllocation>;
}

/** What the desired-state manager needs from the rest of Cloudly; built by the composition root. */
export interface IDesiredStateManagerPorts {
  /** The controller's key of a cluster ran (bounded wait; at once on an instance that does not reconcile). */
  settled: (clusterIdArg: string) => Promise<void>;
  /** Asks the controller for a run of the cluster (a report finished a removal). */
  requestRefresh: (clusterIdArg: string) => void;
  /** Whether the controller owes the cluster a run right now. */
  isRefreshBusy: (clusterIdArg: string) => boolean;
}

export class DesiredStateManager {
  /** Desired-state computations this instance made (each costs about ten database reads). */
  public computations = 0;
  /** Service entries built from a whole document (the others were remembered: ./serviceentries.ts). */
  public entriesBuilt = 0;
  /** Hints owed to newly opened sockets, waiting for `sessionHintDelayMs`. */
  private readonly hintTimers = new Set<NodeJS.Timeout>();
  /** What this instance last stored of each cluster's observed-state report (./observedmemo.ts). */
  public readonly observedMemo: ObservedReportMemo;
  private unsubscribeMemo: (() => void) | null = null;
  private ports: IDesiredStateManagerPorts | null = null;
  /** Each service's entry of its cluster's desired state, kept while its inputs stay (./serviceentries.ts). */
  private readonly entries = new DesiredServiceEntries();

  constructor(private readonly cloudly: Cloudly, private readonly reads: IDesiredStateReads) {
    this.observedMemo = new ObservedReportMemo(cloudly.config.observedRefreshMs);
    registerOperations(cloudly, desiredStateOperations({
      store: cloudly.store,
      observedMemo: this.observedMemo,
      requireCluster: (clusterIdArg) => reads.clusters.requireCluster(clusterIdArg),
      requireElected: (sessionArg) => reads.clusters.requireElected(sessionArg),
      listNodeIds: async (clusterIdArg) => (await reads.clusters.listNodes(clusterIdArg)).map((node) => node.id),
      storeAssignments: (clusterIdArg, entryArg) => reads.ingress.storeAssignments(clusterIdArg, entryArg),
      isRefreshBusy: (clusterIdArg) => this.ports?.isRefreshBusy(clusterIdArg) ?? false,
      publishedDesiredState: (clusterIdArg) => this.publishedDesiredState(clusterIdArg),
      settled: (clusterIdArg) => this.ports?.settled(clusterIdArg) ?? Promise.resolve(),
      routeTableResolution: (clusterIdArg) => this.routeTableResolution(clusterIdArg),
      routeTable: (clusterIdArg) => reads.ingress.getRouteTable(clusterIdArg),
      forgetService: (serviceIdArg) => this.forgetService(serviceIdArg),
      requestRefresh: (clusterIdArg) => this.ports?.requestRefresh(clusterIdArg),
    }));
  }

  /** The controller's side, wired by the composition root once the reconciler exists. */
  public connect(portsArg: IDesiredStateManagerPorts): void {
    this.ports = portsArg;
  }

  /** Resolves once the controller's runs this instance owes the cluster are done (bounded). */
  public async settled(clusterIdArg: string): Promise<void> {
    await this.ports?.settled(clusterIdArg);
  }

  /** The cluster's desired state as published (tests and benchmarks; relays read it through their method). */
  public async currentDesiredState(clusterIdArg: string): Promise<IClusterPlatformDesiredState> {
    return this.publishedDesiredState(clusterIdArg);
  }

  public async start(): Promise<void> {
    this.unsubscribeMemo = this.cloudly.feed.subscribe({
      kinds: new Set([clusterKind, clusterNodeKind, serviceKind, clusterDesiredStateKind, serviceObservedStateKind, nodeRuntimeAssignmentsKind]
        .map((kindArg) => kindArg.collectionName)),
      onChange: (changeArg) => {
        if (!changeArg.here) {
          return;
        }
        const clusterId = this.memoClusterOf(changeArg.kind, changeArg.owners);
        if (clusterId !== undefined) {
          this.observedMemo.invalidate(clusterId);
        }
      },
      wantsElsewhere: () => false,
    });
    this.cloudly.relays.onSessionClosed((sessionArg) => this.observedMemo.forgetCluster(sessionArg.clusterId));
    // A relay that becomes elected is told the published revision, so it converges without polling.
    // Nothing is computed for it: the controller publishes every change of the desired state.
    this.cloudly.relays.onSessionOpened((sessionArg) => this.hintSessionLater(sessionArg, sessionHintDelayMs, 0));
  }

  /**
   * The hint a newly opened socket is owed, `delayMs` from now. When it could not be delivered
   * because no socket of the cluster is elected here yet (another instance's lease on the cluster,
   * as when that instance is stopping, has not been released or run out), it is tried again every
   * `sessionHintRetryMs` while the socket stays open, at most `sessionHintAttempts` times.
   */
  private hintSessionLater(sessionArg: { clusterId: string; peer: { isOpen: boolean } }, delayMsArg: number, attemptArg: number): void {
    const timer = setTimeout(() => {
      this.hintTimers.delete(timer);
      void this.hintPublished(sessionArg.clusterId).then((deliveredArg) => {
        // Again only while no socket of the cluster is elected here: an elected socket that did not
        // take it (a relay serving no hints) is not asked again, nor one beside another elected
        // socket. And not once the manager stopped (`stop` clears the feed subscription).
        if (!deliveredArg && sessionArg.peer.isOpen && this.cloudly.relays.activeSession(sessionArg.clusterId) === null
          && attemptArg + 1 < sessionHintAttempts && this.unsubscribeMemo) {
          this.hintSessionLater(sessionArg, sessionHintRetryMs, attemptArg + 1);
        }
      });
    }, delayMsArg);
    this.hintTimers.add(timer);
  }

  public async stop(): Promise<void> {
    this.unsubscribeMemo?.();
    this.unsubscribeMemo = null;
    for (const timer of this.hintTimers) {
      clearTimeout(timer);
    }
    this.hintTimers.clear();
  }

  /**
   * The cluster whose remembered observed-state report a commit may make wrong: undefined when it
   * cannot (a report's own writes), null when its cluster is not known (every entry goes).
   */
  private memoClusterOf(kindArg: string, ownersArg: ICommittedOwners): string | null | undefined {
    if (kindArg === clusterDesiredStateKind.collectionName || kindArg === serviceObservedStateKind.collectionName
      || kindArg === nodeRuntimeAssignmentsKind.collectionName) {
      if (currentOperation().method === 'reportClusterPlatformObservedState') {
        // A report's own writes (its accepted revision, observations, assignments): the report
        // remembers what it stored, and a concurrent report of the cluster began after it.
        return undefined;
      }
    }
    return ownersArg.clusterId ?? null;
  }

  /**
   * The desired content of a cluster, computed from what is stored now. The services are read as
   * ids and generations; only those whose remembered entry no longer matches its document or its
   * other inputs are read whole and built again (./serviceentries.ts).
   */
  public async computeContent(clusterIdArg: string): Promise<TClusterPlatformDesiredStateContent> {
    this.computations++;
    const { store } = this.cloudly;
    type THead = Pick<IServiceDocument, 'id' | 'generation' | 'deletionRequestedAt'> & { _incarnation?: string };
    const heads = (await store.findFields(serviceKind, { clusterId: clusterIdArg }, ['id', 'generation', '_incarnation' as never, 'deletionRequestedAt']) as THead[])
      .sort((a, b) => (a.id < b.id ? -1 : 1));
    const kept = this.entries.ofCluster(clusterIdArg);
    const docs = new Map<string, IServiceDocument>();
    /** Ids read whole: one not found was removed meanwhile, and its remembered entry is not used. */
    const readIds = new Set<string>();
    const readWhole = async (idsArg: string[]): Promise<void> => {
      idsArg.forEach((idArg) => readIds.add(idArg));
      if (idsArg.length > 0) {
        for (const doc of await store.findIn(serviceKind, 'id', idsArg, { clusterId: clusterIdArg })) {
          docs.set(doc.id, doc);
        }
      }
    };
    const liveHeads = heads.filter((head) => head.deletionRequestedAt === undefined);
    await readWhole(liveHeads.filter((head) => {
      const key = documentKeyOf(head);
      return key === null || kept.get(head.id)?.document !== key;
    }).map((head) => head.id));
    // A service read whole that was removed or marked for deletion meanwhile is left for the run its change queued.
    const live = liveHeads.filter((head) => {
      const doc = docs.get(head.id);
      return doc ? doc.deletionRequestedAt === undefined : !readIds.has(head.id) && kept.has(head.id);
    });
    const secretIdsOf = (idArg: string): readonly string[] => {
      const doc = docs.get(idArg);
      return doc ? serviceSecretIdsOf(doc) : kept.get(idArg)!.secretIds;
    };
    const secretGroupIds = [...new Set(live.flatMap((head) => secretIdsOf(head.id)))];
    const [bindings, secretGroups, recipients, designation] = await Promise.all([
      live.length === 0 ? [] : store.find(platformBindingKind, { serviceId: { $in: live.map((head) => head.id) } }),
      secretGroupIds.length === 0 ? [] : store.find(secretGroupKind, { id: { $in: secretGroupIds } }),
      store.get(secretRecipientsKind, clusterIdArg),
      this.reads.ingress.getDesignation(clusterIdArg),
    ]);
    const bindingsOf = new Map<string, IClusterPlatformDesiredService['platformBindings']>();
    for (const binding of bindings.sort((a, b) => (a.id < b.id ? -1 : 1))) {
      const list = bindingsOf.get(binding.serviceId) ?? [];
      list.push({ bindingId: binding.id, capability: binding.capability, enabled: binding.enabled, nodeId: binding.nodeId });
      bindingsOf.set(binding.serviceId, list);
    }
    const groupsById = new Map(secretGroups.map((group) => [group.id, group]));
    const recipientsGeneration = recipients?.generation ?? null;
    const inputs = new Map(live.map((head) => [head.id, entryInputsKey(bindingsOf.get(head.id) ?? [], secretIdsOf(head.id),
      (groupIdArg) => groupsById.get(groupIdArg)?.generation ?? null, recipientsGeneration)]));
    const inputsOf = (idArg: string): string => inputs.get(idArg) ?? '';
    // Entries whose document is current but whose bindings or secrets moved are built again from the whole document.
    await readWhole(live.filter((head) => !docs.has(head.id) && kept.get(head.id)!.inputs !== inputsOf(head.id))
      .map((head) => head.id));
    const entries = new Map<string, IRememberedServiceEntry>();
    for (const head of live) {
      const doc = docs.get(head.id);
      const remembered = kept.get(head.id);
      if (!doc) {
        if (remembered && remembered.inputs === inputsOf(head.id)) {
          entries.set(head.id, remembered);
        }
        continue;
      }
      if (doc.deletionRequestedAt !== undefined) {
        continue;
      }
      const entry: IClusterPlatformDesiredService = {
        serviceId: doc.id,
        name: doc.name,
        organizationId: doc.organizationId,
        specRevision: doc.specRevision,
        runtime: snapshotServiceRuntimeSpec(doc.runtime),
        ports: snapshotServicePorts(doc.ports ?? []),
        routes: snapshotServiceRoutes(doc.routes ?? []),
        volumes: doc.volumes,
        platformBindings: bindingsOf.get(doc.id) ?? [],
        environment: snapshotServiceEnvironment(doc.environment),
        secrets: resolveServiceSecrets(doc, groupsById, recipients).flatMap((secret) => (secret.state === 'deliverable'
          ? [{ name: secret.name, secretVersion: { ...secret.reference }, version: secret.version, sealed: secret.sealed }]
          : [])),
        ...withNetworkPolicyOf(doc),
      };
      this.entriesBuilt++;
      // The incarnation is the head's (a whole read leaves it out): a service created again in
      // between pairs an incarnation that is gone with a generation, a key no later head has.
      const document = documentKeyOf({ generation: doc.generation, _incarnation: head._incarnation });
      const built = { document: document ?? '', inputs: inputsOf(doc.id), createdAt: doc.createdAt, secretIds: serviceSecretIdsOf(doc), entry };
      // A document without an incarnation is built every time, never remembered.
      entries.set(doc.id, document === null ? built : this.entries.remember(built));
    }
    this.entries.replace(clusterIdArg, new Map([...entries].filter(([, rememberedArg]) => rememberedArg.document !== '')));
    const services = [...entries.values()];
    let ingress: TClusterPlatformDesiredStateContent['ingress'] = null;
    if (designation) {
      const ingressService = entries.has(designation.ingressServiceId)
        ? docs.get(designation.ingressServiceId) ?? await store.get(serviceKind, designation.ingressServiceId)
        : null;
      const origin = await this.reads.clusters.relayOrigin(clusterIdArg);
      await failpoint('desiredstate.compute.afterOriginRead');
      ingress = {
        designation,
        spec: ingressService && origin !== null
          ? prepareClusterIngressSpec(toPublicService(ingressService), designation.credential.secretVersion, origin)
          : null,
      };
    }
    const nodeIds = (await this.reads.clusters.listNodes(clusterIdArg)).map((node) => node.id).sort();
    const credentials = await this.reads.credentialReferences(clusterIdArg);
    if (nodeIds.some((nodeId) => !credentials.has(nodeId))) {
      // The Corestore credentials controller makes them; its write queues this cluster again.
      throw refuse('unavailable', [credentialNotMadeYetReason], { retryAfterMs: 1_000 });
    }
    const nodes: TClusterPlatformDesiredStateContent['nodes'] = nodeIds.map((nodeId) => ({ nodeId, corestoreCredential: credentials.get(nodeId)! }));
    const routed = services.map((remembered) => ({ id: remembered.entry.serviceId, createdAt: remembered.createdAt, ports: remembered.entry.ports, routes: remembered.entry.routes }));
    const { leases, routes } = await this.resolveRoutes(clusterIdArg, routed, designation?.ingressServiceId ?? null);
    return {
      clusterId: clusterIdArg,
      nodes,
      services: services.map((remembered) => remembered.entry),
      ingress,
      removals: heads.filter((head) => head.deletionRequestedAt !== undefined)
        .map((head) => ({ serviceId: head.id, requestedAt: head.deletionRequestedAt! })),
      leases,
      routes: routes.routes,
    };
  }

  /** The canonical texts of the remembered service entries: what the digest of a computed content reuses. */
  public get knownTexts(): TKnownCanonicalTexts {
    return this.entries.texts;
  }

  /** Forgets every remembered service entry (the controller's full pass; tests). */
  public forgetEntries(): void {
    this.entries.clear();
  }

  /**
   * The cluster's held leases (allocated first, so the desired state never names a workload
   * without its lease when the pool has room) and its routes resolved against them, the nodes'
   * confirmations and the stored projections.
   */
  private async resolveRoutes(clusterIdArg: string, liveArg: readonly IRoutedService[], ingressServiceIdArg: string | null) {
    const { store } = this.cloudly;
    const [allocation, confirmations, projections] = await Promise.all([
      this.reads.allocateCluster(clusterIdArg),
      store.find(runtimeNetworkLeasesKind, { clusterId: clusterIdArg }),
      store.find(runtimeNetworkProjectionKind, { clusterId: clusterIdArg }),
    ]);
    const leases = allocation.leases.map((lease) => ({
      serviceId: lease.serviceId, nodeId: lease.nodeId, replica: lease.replica, lease: lease.lease, address: lease.address,
    }));
    const confirmed = new Set(confirmations.flatMap((doc) => doc.leases.map((lease) => lease.lease.id)));
    const routes = resolveClusterRoutes({
      routes: deriveClusterRoutes(liveArg),
      ingressServiceId: ingressServiceIdArg,
      leases,
      confirmed,
      projections: projections.map((doc) => doc.projection),
    });
    return { leases, confirmed, routes };
  }

  /** The route table and the routes left out of it, for administrators. */
  public async routeTableResolution(clusterIdArg: string): Promise<IReq_Any_Cloudly_GetClusterRouteTableResolution['response']> {
    await this.ports?.settled(clusterIdArg);
    const [live, designation] = await Promise.all([
      this.cloudly.store.find(serviceKind, { clusterId: clusterIdArg }).then((docsArg) => docsArg.filter((service) => service.deletionRequestedAt === undefined)),
      this.reads.ingress.getDesignation(clusterIdArg),
    ]);
    const { routes, leases, confirmed } = await this.resolveRoutes(clusterIdArg, live, designation?.ingressServiceId ?? null);
    const unresolved: IClusterUnresolvedRoute[] = routes.unresolved;
    const addressLeases: IClusterAddressLease[] = leases
      .map((lease) => ({ serviceId: lease.serviceId, nodeId: lease.nodeId, replica: lease.replica, leaseId: lease.lease.id, address: lease.address, confirmed: confirmed.has(lease.lease.id) }))
      .sort((left, right) => compareIpv4(left.address, right.address));
    // The one table, as the controller recorded it (its own revision, the ingress's too).
    const table = await this.reads.ingress.getRouteTable(clusterIdArg);
    return { table: table ?? { clusterId: clusterIdArg, revision: 0, routes: [] }, unresolved, leases: addressLeases };
  }

  /**
   * The desired-state controller's step (./desiredstate.controller.ts): computes the cluster's
   * desired state and publishes it under the next revision when its digest differs from the last
   * published one (one conditional write), and records the resolved routes as the cluster's one
   * route table (its own revision, moving only when the routes change).
   */
  public async publish(clusterIdArg: string): Promise<{ state: IClusterPlatformDesiredState; published: boolean }> {
    const content = await this.computeContent(clusterIdArg);
    const digest = computeClusterPlatformDesiredStateDigest(content, this.entries.texts);
    const { doc, outcome } = await this.cloudly.store.mutate(clusterDesiredStateKind, clusterIdArg, (currentArg) =>
      decideDesiredStatePublication(currentArg, clusterIdArg, digest));
    const state = { ...content, revision: doc!.revision, digest };
    await this.reads.ingress.recordComputedRouteTable(clusterIdArg, content.routes);
    return { state, published: outcome !== 'kept' };
  }

  /**
   * The cluster's desired state as published: computed from what is stored now and answered under
   * the published revision once its digest is the published one. A read writes nothing: when the
   * controller has not published what is stored yet, the read waits for it (the controller's key on
   * this instance, a moment on another), then answers `unavailable` (retryable).
   */
  public async publishedDesiredState(clusterIdArg: string): Promise<IClusterPlatformDesiredState> {
    const deadline = Date.now() + publishedWaitBoundMs;
    for (;;) {
      await this.ports?.settled(clusterIdArg);
      let content: TClusterPlatformDesiredStateContent;
      try {
        content = await this.computeContent(clusterIdArg);
      } catch (error) {
        // A node whose Corestore credential the controller has not made yet (a node that just
        // joined): waited for within the same bound, as an unpublished state is.
        if (Date.now() >= deadline || !isCredentialNotMadeYet(error)) {
          throw error;
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      const digest = computeClusterPlatformDesiredStateDigest(content, this.entries.texts);
      const published = await this.cloudly.store.get(clusterDesiredStateKind, clusterIdArg);
      if (published && published.digest === digest) {
        return { ...content, revision: published.revision, digest };
      }
      if (Date.now() >= deadline) {
        throw refuse('unavailable', [desiredStateNotPublishedReason], {
          retryAfterMs: 500,
          causes: [{ message: 'the desired state of this cluster is being published; read it again' }],
        });
      }
      this.ports?.requestRefresh(clusterIdArg);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Tells the cluster's elected relay (here or on another live instance) the published revision; answers whether it took it. */
  public async hint(clusterIdArg: string, stateArg: { revision: number; digest: string }): Promise<boolean> {
    // Elected here, or on another live instance (the hint is forwarded there: docs/multi-instance.md).
    if (!(await this.reads.clusters.relayConnected(clusterIdArg))) {
      return false;
    }
    try {
      const answer = await this.cloudly.relays.ask(clusterIdArg, 'pushClusterPlatformDesiredStateChanged', {
        revision: stateArg.revision,
        digest: stateArg.digest,
      });
      requireValidRelayAnswer(hintAnswerReasons(answer));
      return true;
    } catch (error) {
      // A hint is only a hint: the relay converges by reading.
      this.cloudly.logger.debug({ clusterId: clusterIdArg, revision: stateArg.revision, err: error }, 'desired-state hint not delivered');
      return false;
    }
  }

  /** A newly opened socket is told the published revision (nothing published yet: nothing to tell, counted as told). */
  private async hintPublished(clusterIdArg: string): Promise<boolean> {
    try {
      const published = await this.cloudly.store.get(clusterDesiredStateKind, clusterIdArg);
      return published ? await this.hint(clusterIdArg, published) : true;
    } catch (error) {
      this.cloudly.logger.debug({ clusterId: clusterIdArg, err: error }, 'desired-state hint of a new socket not delivered');
      return false;
    }
  }

  /** The observations of a service, newest report per node; empty when the relay reported none. */
  public async observedPlacements(serviceIdArg: string): Promise<IServiceObservedPlacement[]> {
    return (await this.cloudly.store.get(serviceObservedStateKind, serviceIdArg))?.placements ?? [];
  }

  /** Removes the relay's observations of a service that is gone (its verdict goes with the verdict controller's next run). */
  private async forgetService(serviceIdArg: string): Promise<void> {
    await this.cloudly.store.mutate(serviceObservedStateKind, serviceIdArg, decideForget);
  }
}
