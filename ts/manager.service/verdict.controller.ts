import type { ICommittedChange } from '../core/changefeed.js';
import type { IController, IReconcileContext, IReconcileResult } from '../core/controller.js';
import { leftDerivedInputs, type DocumentStore } from '../core/store.js';
import type { TClusterRuntimePhase } from '../interfaces/data/clusterruntime.js';
import type { IClusterRelayCapabilities } from '../interfaces/data/clusterrelay.js';
import type { IServiceObservedPlacement } from '../interfaces/data/desiredstate.js';
import type { IPlatformBinding } from '../interfaces/data/platformbinding.js';
import type { IRuntimeLiveness } from '../interfaces/data/serviceruntimestatus.js';
import { clusterKind } from '../manager.cluster/documents.js';
import { clusterNodeKind } from '../manager.cluster/clusternodes.js';
import { clusterLivenessKind } from '../manager.cluster/liveness.js';
import { serviceObservedStateKind } from '../manager.desiredstate/documents.js';
import { deriveClusterRoutes } from '../manager.desiredstate/routes.js';
import { imageVersionId } from '../manager.image/documents.js';
import { runtimeNetworkLeasesKind } from '../manager.runtimenetwork/documents.js';
import type { IClusterAllocation } from '../manager.runtimenetwork/leases.js';
import { decideRuntimeStatus, isStoredVerdict, type IJudgedVerdict } from './decide.js';
import {
  runtimeLocalStorageClaimKind,
  runtimeNodeSessionKind,
  serviceKind,
  serviceRuntimeStatusKind,
  toPublicService,
  type IRuntimeLocalStorageClaimDocument,
  type IServiceDocument,
} from './documents.js';
import { organizationKind } from './organizations.js';
import { clusterIngressSlotKind } from '../manager.ingress/documents.js';
import { secretGroupKind, type ISecretGroupDocument } from '../manager.secret/secretgroups.js';
import { secretRecipientsKind, type ISecretRecipientsDocument } from '../manager.secret/documents.js';
import { resolveServiceSecrets } from './secretresolution.js';
import { isServiceObservedConverged, judgeServiceImagePlan, judgeServiceRuntime } from './runtimestatus.js';

/**
 * The verdict controller: every service's runtime verdict (`IServiceRuntimeStatus`, and beside it
 * whether its cluster is current), judged from every fact Cloudly holds whenever one of them
 * changes, and stored only when it changed. The only writer of `CloudlyServiceRuntimeStatus`.
 *
 * Keys: `service:<id>` judges one service; `cluster:<id>` judges every service of a cluster from
 * one read per kind (creating verdicts never judged, queuing a service key for those whose stored
 * verdict moved); `all` queues every cluster. Which change queues which key is the `inputs`
 * table below (docs/reconciler.md repeats it for operators).
 */

export const allServicesKey = 'all';
export const serviceKey = (serviceIdArg: string): string => `service:${serviceIdArg}`;
export const clusterKey = (clusterIdArg: string): string => `cluster:${clusterIdArg}`;

export type TParsedVerdictKey = { scope: 'service'; id: string } | { scope: 'cluster'; id: string } | { scope: 'all' };

export const parseVerdictKey = (keyArg: string): TParsedVerdictKey | null => {
  if (keyArg === allServicesKey) {
    return { scope: 'all' };
  }
  const separator = keyArg.indexOf(':');
  const scope = keyArg.slice(0, separator);
  const id = keyArg.slice(separator + 1);
  if (separator < 0 || id === '' || (scope !== 'service' && scope !== 'cluster')) {
    return null;
  }
  return { scope, id };
};

type TVerdictTrigger = (changeArg: ICommittedChange) => string[];

const ofService: TVerdictTrigger = (changeArg) => [serviceKey(changeArg.id)];
const ofOwningService: TVerdictTrigger = (changeArg) => (changeArg.owners.serviceId ? [serviceKey(changeArg.owners.serviceId)] : []);
const ofOwningCluster: TVerdictTrigger = (changeArg) => (changeArg.owners.clusterId ? [clusterKey(changeArg.owners.clusterId)] : []);
/** The same for a write that moved what the verdict reads: one of only bookkeeping (a relay token rotation) queues nothing. */
const ofOwningClusterInputs: TVerdictTrigger = (changeArg) => (leftDerivedInputs(changeArg.owners) ? [] : ofOwningCluster(changeArg));

/**
 * The inputs of a runtime verdict, by document kind. Kinds not listed change no verdict; the
 * verdict's own kind is deliberately absent, so a run never triggers itself.
 */
export const verdictInputs: Readonly<Record<string, TVerdictTrigger>> = {
  // The spec, its volumes, their initialization and the claim decisions.
  CloudlyService: ofService,
  // What the relay last reported running (converging → converged).
  CloudlyServiceObservedState: ofService,
  // A claim's node answer (storage import pending).
  CloudlyRuntimeLocalStorageClaim: ofOwningService,
  // An image version stored for the service (image plan missing → held).
  CloudlyImageVersion: ofOwningService,
  // Platform bindings and their status (bindings / legacy adoption pending).
  CloudlyPlatformBinding: ofOwningService,
  // The cluster itself, and its runtime phase (kept in the ingress slot).
  // A write of only the cluster's bookkeeping (a relay token rotation) changes nothing read here.
  CloudlyCluster: ofOwningClusterInputs,
  CloudlyClusterIngressSlot: ofOwningCluster,
  // Nodes joining and leaving (no eligible node; lease placement).
  CloudlyClusterNode: ofOwningCluster,
  // The relay's lease statements.
  CloudlyRuntimeNetworkLeases: ofOwningCluster,
  // The capabilities the relay states for its runtime (every verdict's *-unsupported refusals);
  // a registration that left its announcement as it was (a reconnect) changes no verdict.
  CloudlyClusterRelayRegistration: ofOwningClusterInputs,
  // Whether the cluster is current: a dark cluster's services read `unknown`.
  CloudlyClusterLiveness: ofOwningCluster,
  // The organization registry: every service naming it, in whichever cluster (organization-missing).
  CloudlyOrganization: () => [allServicesKey],
  // The address plan: every cluster's leases.
  CloudlyRuntimeNetworkAddressPlan: () => [allServicesKey],
  // A secret group's versions (secret version missing, the environment's size): every service
  // naming it, in whichever cluster.
  CloudlySecretGroup: () => [allServicesKey],
  // A cluster's enrolled recipients (a copy sealed to a recipient the relay no longer holds).
  CloudlySecretRecipients: ofOwningCluster,
  // A node's runtime session and the workload authorities it resolved (node authority unsupported).
  CloudlyRuntimeNodeSession: ofOwningCluster,
};

/** What the verdict reads that another domain derives or owns; built by the composition root. */
export interface IVerdictPorts {
  store: DocumentStore;
  platformBindingsOfServices: (serviceIdsArg: string[]) => Promise<IPlatformBinding[]>;
  heldImageVersionsOf: (serviceIdsArg: string[]) => Promise<ReadonlySet<string>>;
  clusterRuntimePhase: (clusterIdArg: string) => Promise<TClusterRuntimePhase>;
  /** The cluster's workload lease allocation (allocates what is owed: the lease allocator is its writer). */
  allocateCluster: (clusterIdArg: string) => Promise<IClusterAllocation>;
  relayCapabilities: (clusterIdArg: string) => Promise<IClusterRelayCapabilities | null>;
}

/** What every service of a cluster shares in its verdict. */
interface IClusterVerdictFacts {
  exists: boolean;
  runtimePhase: TClusterRuntimePhase;
  nodeIds: ReadonlySet<string>;
  allocation: IClusterAllocation;
  /** What the cluster's relay stated its runtime supports (null: nothing stated). */
  relayCapabilities: IClusterRelayCapabilities | null;
  /** Which live service the route table gives each declared hostname (the oldest declaring it). */
  routeOwners: ReadonlyMap<string, string>;
  /** Every lease id a node of the cluster confirmed it applied. */
  confirmedLeaseIds: ReadonlySet<string>;
  /** Why the cluster is not current (ts/manager.cluster/liveness.ts), or null. */
  unknown: IRuntimeLiveness | null;
  /** The cluster's enrolled secret recipients (null: none enrolled). */
  recipients: ISecretRecipientsDocument | null;
  /** The service designated as the cluster's ingress, or null. */
  ingressServiceId: string | null;
  /** Workload authorities each node's runtime session resolved, where its relay stated the count. */
  nodeWorkloadAuthorities: ReadonlyMap<string, number>;
}

/** The secret groups the services name, by id, read in one query. */
const readSecretGroupsOf = async (storeArg: DocumentStore, servicesArg: IServiceDocument[]): Promise<Map<string, ISecretGroupDocument>> => {
  const ids = [...new Set(servicesArg.flatMap((service) => Object.values(service.secrets ?? {}).map((reference) => reference.secretId)))];
  if (ids.length === 0) {
    return new Map();
  }
  return new Map((await storeArg.find(secretGroupKind, { id: { $in: ids } })).map((group) => [group.id, group]));
};

export const groupBy = <T>(itemsArg: T[], keyArg: (itemArg: T) => string): Map<string, T[]> => {
  const groups = new Map<string, T[]>();
  for (const item of itemsArg) {
    const key = keyArg(item);
    groups.set(key, [...(groups.get(key) ?? []), item]);
  }
  return groups;
};

/**
 * The verdict on a service's current spec revision from the facts gathered for it: Cloudly's own
 * judgement (`judgeServiceRuntime`), then, when nothing stands in the way, the relay's
 * observations decide between `converging` and `converged`. Pure.
 */
const judgeServiceVerdict = (
  docArg: IServiceDocument,
  clusterArg: IClusterVerdictFacts,
  claimDocsArg: IRuntimeLocalStorageClaimDocument[],
  bindingsArg: IPlatformBinding[],
  observedArg: IServiceObservedPlacement[],
  organizationRegisteredArg: boolean,
  heldImageVersionsArg: ReadonlySet<string>,
  secretGroupsArg: ReadonlyMap<string, ISecretGroupDocument>,
): IJudgedVerdict => {
  const service = toPublicService(docArg);
  const resolved = resolveServiceSecrets(docArg, secretGroupsArg, clusterArg.recipients);
  const secrets = resolved.map((secret) => ({ name: secret.name, valueBytes: secret.state === 'deliverable' ? secret.valueBytes : null }));
  const imagePlan = judgeServiceImagePlan(service, (digestArg) => heldImageVersionsArg.has(imageVersionId(service.id, digestArg)));
  const heldLeaseIds = new Map<string, string[]>();
  for (const lease of clusterArg.allocation.leases) {
    if (lease.serviceId === service.id) {
      heldLeaseIds.set(lease.nodeId, [...(heldLeaseIds.get(lease.nodeId) ?? []), lease.lease.id]);
    }
  }
  const verdict = judgeServiceRuntime({
    organizationRegistered: organizationRegisteredArg,
    relayCapabilities: clusterArg.relayCapabilities,
    bindingCapabilities: bindingsArg.filter((binding) => binding.enabled).map((binding) => binding.capability),
    routesTakenByOthers: service.routes
      .map((route) => route.hostname)
      .filter((hostname) => (clusterArg.routeOwners.get(hostname) ?? service.id) !== service.id),
    nodeNetwork: clusterArg.allocation.managed ? { heldLeaseIds, confirmedLeaseIds: clusterArg.confirmedLeaseIds } : undefined,
    observed: observedArg,
    service,
    claimMarkers: docArg.claimDecisions ?? [],
    clusterExists: clusterArg.exists,
    clusterRuntimePhase: clusterArg.runtimePhase,
    clusterNodeIds: clusterArg.nodeIds,
    // No address plan: Cloudly manages no workload address and refuses nothing for it.
    workloadLeases: clusterArg.allocation.managed
      ? { shortfall: clusterArg.allocation.shortfall.get(service.id) ?? 0, poolMissing: clusterArg.allocation.poolMissing }
      : undefined,
    claims: claimDocsArg.map((claimDoc) => claimDoc.current),
    // An enabled binding that is not `ready` yet has no credentials in the service's secret manifest.
    bindings: {
      bindingsPending: bindingsArg.some((binding) => binding.enabled && binding.status !== 'ready'),
      legacyAdoptionPending: bindingsArg.some((binding) => binding.statusReason === 'legacy-adoption-pending'),
    },
    ...(imagePlan === 'registry' ? {} : { imageVersionHeld: imagePlan === 'held' }),
    secrets,
    isIngressService: clusterArg.ingressServiceId === service.id,
    nodeWorkloadAuthorities: clusterArg.nodeWorkloadAuthorities,
    manifestExpectation: {
      bindingIds: bindingsArg.filter((binding) => binding.enabled).map((binding) => binding.id),
      secrets: resolved.map((secret) => ({ name: secret.name, secretVersionId: secret.reference.secretVersionId })),
    },
  });
  const judged = verdict.state === 'converging' && isServiceObservedConverged(service, observedArg)
    ? { state: 'converged' as const, reason: null }
    : verdict;
  return {
    specRevision: service.specRevision,
    state: judged.state,
    reason: judged.reason,
    ...(clusterArg.unknown ? { unknown: clusterArg.unknown } : {}),
  };
};


export class VerdictController implements IController {
  public readonly name = 'verdict';
  public readonly writes = [serviceRuntimeStatusKind.collectionName] as const;
  public readonly inputs = verdictInputs;
  /** Nothing judged here changes with time alone (the cluster's liveness is an input): the resync runs the clusters whose digest moved. */
  public readonly digestResync = { keyOf: clusterKey };

  constructor(private readonly ports: IVerdictPorts) {}

  public scopeOf(keyArg: string): string {
    return parseVerdictKey(keyArg)?.scope ?? 'service';
  }

  public async all(): Promise<readonly string[]> {
    return [allServicesKey];
  }

  public async reconcile(keyArg: string, contextArg: IReconcileContext): Promise<IReconcileResult> {
    const parsed = parseVerdictKey(keyArg);
    if (!parsed) {
      return { outcome: 'kept' };
    }
    if (parsed.scope === 'service') {
      return { outcome: await this.reconcileService(parsed.id) };
    }
    if (parsed.scope === 'all') {
      const clusters = await this.ports.store.findFields(clusterKind, {}, ['id']);
      for (const cluster of clusters) {
        contextArg.enqueue(clusterKey(String(cluster.id)));
      }
      return { outcome: 'expanded' };
    }
    // One read per kind for the whole cluster: verdicts never judged are created at once, and only
    // services whose stored verdict moved get a run of their own.
    const { created, owed } = await this.judgeCluster(parsed.id);
    for (const serviceId of owed) {
      contextArg.enqueue(serviceKey(serviceId));
    }
    return { outcome: created > 0 ? 'created' : 'expanded' };
  }

  /**
   * The reconciler's step for one service (ts/manager.reconciler): judges its current spec revision
   * from every fact Cloudly holds and stores the verdict when it changed, so `changedAt` moves only
   * with it. A service that is gone has no verdict: a stored one is removed. Never called on a read.
   */
  public async reconcileService(serviceIdArg: string): Promise<'written' | 'created' | 'kept' | 'removed'> {
    const doc = await this.ports.store.get(serviceKind, serviceIdArg);
    if (!doc) {
      const { outcome } = await this.ports.store.mutate(serviceRuntimeStatusKind, serviceIdArg, (storedArg) =>
        (storedArg ? { kind: 'remove' } : { kind: 'keep' }));
      return outcome === 'removed' ? 'removed' : 'kept';
    }
    const judged = await this.judgeService(doc);
    const { outcome } = await this.ports.store.mutate(serviceRuntimeStatusKind, serviceIdArg, (storedArg) =>
      decideRuntimeStatus(storedArg, serviceIdArg, { ...judged, clusterId: doc.clusterId }, Date.now()));
    return outcome;
  }

  /**
   * The verdict of a service document from every fact stored now; writes nothing. A rollout's plan
   * gives it the spec it proposes (ts/manager.rollout/), so the prediction is the judge's own.
   */
  public async judgeService(doc: IServiceDocument): Promise<IJudgedVerdict> {
    // Only the services declaring one of this service's hostnames can own it: read those, not the cluster.
    const hostnames = (doc.routes ?? []).map((route) => route.hostname);
    const [cluster, claims, bindings, observed, organization, heldImages, secretGroups] = await Promise.all([
      this.readClusterVerdictFacts(doc.clusterId, hostnames.length === 0
        ? Promise.resolve([])
        : this.ports.store.find(serviceKind, { clusterId: doc.clusterId, 'routes.hostname': { $in: hostnames } } as never)),
      this.ports.store.find(runtimeLocalStorageClaimKind, { serviceId: doc.id }),
      this.ports.platformBindingsOfServices([doc.id]),
      this.ports.store.get(serviceObservedStateKind, doc.id).then((docArg) => docArg?.placements ?? []),
      this.ports.store.get(organizationKind, doc.organizationId),
      this.ports.heldImageVersionsOf([doc.id]),
      readSecretGroupsOf(this.ports.store, [doc]),
    ]);
    return judgeServiceVerdict(doc, cluster, claims, bindings, observed, organization !== null, heldImages, secretGroups);
  }

  /**
   * The reconciler's look at a whole cluster (a resync, a node change): every service judged from
   * one read per kind. A service that has no verdict yet gets it here, by a create-only insert (a
   * run of its own that got there first wins, and the service is then owed a run). The ids whose
   * stored verdict differs from the judged one are answered, not written: each is reconciled on its
   * own from facts read afresh, so this older look never overwrites a newer verdict.
   */
  public async judgeCluster(clusterIdArg: string): Promise<{ created: number; owed: string[] }> {
    const { store } = this.ports;
    const services = await store.find(serviceKind, { clusterId: clusterIdArg });
    if (services.length === 0) {
      return { created: 0, owed: [] };
    }
    const ids = services.map((service) => service.id);
    const [cluster, claims, bindings, observedDocs, statuses, organizations, heldImages, secretGroups] = await Promise.all([
      this.readClusterVerdictFacts(clusterIdArg, Promise.resolve(services)),
      store.find(runtimeLocalStorageClaimKind, { clusterId: clusterIdArg }),
      this.ports.platformBindingsOfServices(ids),
      store.find(serviceObservedStateKind, { clusterId: clusterIdArg }),
      store.find(serviceRuntimeStatusKind, { id: { $in: ids } }),
      store.find(organizationKind, { id: { $in: [...new Set(services.map((service) => service.organizationId))] } }),
      this.ports.heldImageVersionsOf(ids),
      readSecretGroupsOf(store, services),
    ]);
    const registered = new Set(organizations.map((organization) => organization.id));
    const storedOf = new Map(statuses.map((status) => [status.id, status]));
    const observedOf = new Map(observedDocs.map((observed) => [observed.id, observed.placements]));
    const claimsOf = groupBy(claims, (claim) => claim.serviceId);
    const bindingsOf = groupBy(bindings, (binding) => binding.serviceId);
    const owed: string[] = [];
    const now = Date.now();
    const created = await Promise.all(services.map(async (service) => {
      const judged = judgeServiceVerdict(
        service, cluster, claimsOf.get(service.id) ?? [], bindingsOf.get(service.id) ?? [], observedOf.get(service.id) ?? [],
        registered.has(service.organizationId), heldImages, secretGroups,
      );
      const stored = storedOf.get(service.id);
      if (!stored) {
        // Inserts asked at once go to the database as one command (ts/core/insertbatcher.ts).
        const inserted = await store.insert(serviceRuntimeStatusKind, { id: service.id, clusterId: clusterIdArg, ...judged, changedAt: now });
        if (!inserted) {
          owed.push(service.id);
        }
        return inserted ? 1 : 0;
      }
      if (!isStoredVerdict(stored, judged)) {
        owed.push(service.id);
      }
      return 0;
    }));
    return { created: created.reduce<number>((sum, one) => sum + one, 0), owed };
  }

  /**
   * What every service of a cluster shares in its verdict, read once. `routedArg` are the services
   * whose routes decide the hostnames judged (the whole cluster for a cluster pass, only those
   * declaring one service's hostnames for a service's own run).
   */
  private async readClusterVerdictFacts(clusterIdArg: string, routedArg: Promise<IServiceDocument[]>): Promise<IClusterVerdictFacts> {
    const [cluster, runtimePhase, nodes, allocation, relayCapabilities, services, confirmations, liveness, recipients, ingressSlot, nodeSessions] = await Promise.all([
      this.ports.store.get(clusterKind, clusterIdArg),
      this.ports.clusterRuntimePhase(clusterIdArg),
      this.ports.store.find(clusterNodeKind, { clusterId: clusterIdArg }),
      this.ports.allocateCluster(clusterIdArg),
      this.ports.relayCapabilities(clusterIdArg),
      routedArg,
      this.ports.store.find(runtimeNetworkLeasesKind, { clusterId: clusterIdArg }),
      this.ports.store.get(clusterLivenessKind, clusterIdArg),
      this.ports.store.get(secretRecipientsKind, clusterIdArg),
      this.ports.store.get(clusterIngressSlotKind, clusterIdArg),
      this.ports.store.find(runtimeNodeSessionKind, { clusterId: clusterIdArg }),
    ]);
    // The same rule the route table uses: one service per hostname, the oldest live one declaring it.
    const routeOwners = new Map(deriveClusterRoutes(services.filter((service) => service.deletionRequestedAt === undefined))
      .map((route) => [route.hostname, route.serviceId]));
    return {
      exists: cluster !== null,
      runtimePhase,
      nodeIds: new Set(nodes.map((node) => node.nodeId)),
      allocation,
      relayCapabilities,
      routeOwners,
      confirmedLeaseIds: new Set(confirmations.flatMap((doc) => doc.leases.map((lease) => lease.lease.id))),
      unknown: liveness?.unknown ?? null,
      recipients,
      ingressServiceId: ingressSlot?.designation?.ingressServiceId ?? null,
      nodeWorkloadAuthorities: new Map(nodeSessions.flatMap((session) => (session.resolvedWorkloadAuthorities === undefined
        ? [] : [[session.nodeId, session.resolvedWorkloadAuthorities] as const]))),
    };
  }

}
