import type { Cloudly } from '../classes.cloudly.js';
import { refuse } from '../core/errors.js';
import { defineDocumentKind, type IStoredDocument, type TDecision } from '../core/store.js';
import { isIdString, requireRequestShape, type TFieldCheck } from '../core/validation.js';
import { WorkQueue } from '../core/workqueue.js';
import { isClusterNodeId } from '../interfaces/data/clusternode.js';
import { clusterNodeDocumentId } from '../manager.cluster/clusternodes.js';
import {
  validateRuntimeNetworkProjectionApplication,
  validateRuntimeNetworkWorkloadLeases,
  type IRuntimeNetworkProjection,
  type IRuntimeNetworkProjectionApplication,
  type IRuntimeNetworkWorkloadLease,
} from '../interfaces/data/runtimenetwork.js';
import {
  admitRuntimeNetworkAddressPlanChange,
  validateRuntimeNetworkAddressPlan,
  type IRuntimeNetworkAddressPlan,
} from '../interfaces/data/runtimenetworkaddressplan.js';
import { canonicalizeJson } from '../interfaces/private/canonicaljson.js';
import { isIpv4InPrefix, parseIpv4Prefix } from '../interfaces/private/ipv4.js';
import type {
  IReq_Admin_GetRuntimeNetworkAddressPlan,
  IReq_Admin_GetRuntimeNetworkProjection,
  IReq_Admin_SetRuntimeNetworkAddressPlan,
  IReq_Relay_Cloudly_GetRuntimeNetworkProjection,
  IReq_Relay_Cloudly_ReportRuntimeNetworkLeases,
  IReq_Relay_Cloudly_ReportRuntimeNetworkProjectionApplication,
} from '../interfaces/requests/runtimenetwork.js';
import { composeNextRuntimeNetworkProjection, type IRuntimeNetworkNodeFacts, type TRuntimeNetworkProjectionStep } from './derive.js';
import { judgeLeaseConfirmation } from './allocation.js';
import { WorkloadLeaseAllocator, type IClusterAllocation } from './leases.js';
import { clusterRelayRegistrationKind } from '../manager.cluster/relayregistrations.js';
import { serviceKind } from '../manager.service/service.manager.js';
import { deriveClusterRoutes } from '../manager.desiredstate/routes.js';
import { canonicalRuntimeNetworkProjectionBytes, runtimeNetworkProjectionSignatureType } from '../interfaces/data/runtimenetworksignature.js';

/**
 * The runtime network: the authority's address plan (one per Cloudly, written by administrators at
 * the next revision only) and one projection per node, computed by Cloudly from the plan, the
 * node's reported host addresses, the workload leases the cluster's relay reports and the cluster's
 * ingress routes. A projection is brought up to date whenever it is read and after every lease
 * report, and a new generation is stored only when its content changes.
 */

/** The one address plan document. */
export interface IRuntimeNetworkAddressPlanDocument extends IStoredDocument {
  plan: IRuntimeNetworkAddressPlan;
  writtenAt: number;
  writtenBy: string;
}

/** One node's current projection and the node's latest application of it. Id `cluster/node`. */
export interface IRuntimeNetworkProjectionDocument extends IStoredDocument {
  clusterId: string;
  nodeId: string;
  projection: IRuntimeNetworkProjection;
  application?: IRuntimeNetworkProjectionApplication;
  computedAt: number;
}

/**
 * One node's latest lease statement: the leases of Cloudly's allocation the node confirms it
 * applied. Id `cluster/node`. Only a confirmed lease becomes a projection endpoint.
 */
export interface IRuntimeNetworkLeasesDocument extends IStoredDocument {
  clusterId: string;
  nodeId: string;
  leases: IRuntimeNetworkWorkloadLease[];
  reportedAt: number;
}

export const runtimeNetworkAddressPlanKind = defineDocumentKind<IRuntimeNetworkAddressPlanDocument>('CloudlyRuntimeNetworkAddressPlan');
export const runtimeNetworkProjectionKind = defineDocumentKind<IRuntimeNetworkProjectionDocument>('CloudlyRuntimeNetworkProjection');
export const runtimeNetworkLeasesKind = defineDocumentKind<IRuntimeNetworkLeasesDocument>('CloudlyRuntimeNetworkLeases');

/** The authority's plan is a singleton: one Cloudly, one runtime network authority. */
const addressPlanDocumentId = 'runtime-network-address-plan';

const isNodeId: TFieldCheck = (valueArg, pathArg) =>
  isClusterNodeId(valueArg) ? [] : [`${pathArg} must be a node id (letters, digits, '.', '_', '-'; 1-128 characters)`];

/** A detached plain copy of stored data, so callers never share objects with the driver's documents. */
const detach = <T>(valueArg: T): T => JSON.parse(JSON.stringify(valueArg)) as T;

/**
 * What a projection step does to the node's stored projection: an unchanged one is kept; a
 * blocked one keeps the current projection, and a node that never had one is refused
 * `unavailable` with the reasons; a next one is written (or created for a node's first).
 */
export const decideProjectionWrite = (
  docArg: IRuntimeNetworkProjectionDocument | null,
  stepArg: TRuntimeNetworkProjectionStep,
  targetArg: { id: string; clusterId: string; nodeId: string; now: number },
): TDecision<IRuntimeNetworkProjectionDocument> => {
  if (stepArg.kind === 'unchanged') {
    return { kind: 'keep' };
  }
  if (stepArg.kind === 'blocked') {
    return docArg ? { kind: 'keep' } : { kind: 'refuse', refusal: refuse('unavailable', stepArg.reasons) };
  }
  const projection = detach(stepArg.projection);
  return docArg
    ? { kind: 'write', change: { set: { projection, computedAt: targetArg.now } } }
    : {
      kind: 'create',
      doc: { id: targetArg.id, clusterId: targetArg.clusterId, nodeId: targetArg.nodeId, projection, computedAt: targetArg.now },
    };
};

/** How long a read of the address plan is trusted (writes of other processes sharing the store). */
const planCacheTtlMs = 5_000;

/** Most stranded leases a refusal names one by one; the rest are counted. */
const maximumNamedStrandedLeases = 32;

/**
 * Every reason a plan would strand allocated leases: a lease (held, or withdrawing inside its
 * window) whose pool the plan no longer has, or has under another prefix. Pure.
 */
export const strandedLeaseReasons = (
  planArg: IRuntimeNetworkAddressPlan,
  entriesArg: ReadonlyArray<{ poolId: string; address: string; lease: { id: string }; clusterId: string; serviceId: string; nodeId: string; releasedAt?: number }>,
  nowArg: number,
  windowMsArg: number,
): string[] => {
  const prefixes = new Map(planArg.pools.map((pool) => [pool.id, pool.prefix]));
  const stranded = entriesArg.filter((entry) => (entry.releasedAt === undefined || entry.releasedAt + windowMsArg > nowArg)
    && !((): boolean => {
      const prefix = parseIpv4Prefix(prefixes.get(entry.poolId));
      return prefix !== null && isIpv4InPrefix(entry.address, prefix);
    })());
  if (stranded.length === 0) {
    return [];
  }
  const named = stranded.slice(0, maximumNamedStrandedLeases).map((entry) =>
    `request.plan would strand lease ${entry.lease.id} (${entry.address} in pool ${entry.poolId}, service ${entry.serviceId}, `
    + `node ${entry.nodeId}, cluster ${entry.clusterId}${entry.releasedAt !== undefined ? ', withdrawing' : ''})`);
  return stranded.length > maximumNamedStrandedLeases
    ? [...named, `request.plan would strand ${stranded.length - maximumNamedStrandedLeases} more leases`]
    : named;
};

export class RuntimeNetworkManager {
  /**
   * Background refreshes of node projections (after a lease statement or a plan change), keyed by
   * `clusterNodeDocumentId`: one run per node at a time, a trigger during a run gets one more run
   * after it, drained on stop. A node whose next projection cannot be published yet fails its
   * refresh; that is expected, so failures are logged as warnings.
   */
  private readonly refreshes: WorkQueue;
  /** Workload lease allocation from the plan's pools (leases.ts). */
  public readonly leases: WorkloadLeaseAllocator;
  private unsubscribe: (() => void) | null = null;
  private planCache: { plan: IRuntimeNetworkAddressPlan | null; readAt: number } | null = null;

  /** A projection with Cloudly's detached signature over its canonical bytes, so a node need not trust the relay. */
  private async signed(projectionArg: IRuntimeNetworkProjection): Promise<{ projection: IRuntimeNetworkProjection; signature: string }> {
    const signature = await this.cloudly.auth.signDetached(canonicalRuntimeNetworkProjectionBytes(projectionArg), runtimeNetworkProjectionSignatureType);
    return { projection: projectionArg, signature };
  }

  constructor(private readonly cloudly: Cloudly) {
    this.leases = new WorkloadLeaseAllocator(cloudly, () => this.readPlanCached());
    this.leases.onChanged = (clusterIdArg) => {
      void this.refreshCluster(clusterIdArg).catch(() => undefined);
      this.cloudly.desiredStateManager.requestRefresh(clusterIdArg);
    };
    this.refreshes = new WorkQueue({
      name: 'runtime network projection refresh',
      logger: { error: (objectArg, messageArg) => cloudly.logger.warn(objectArg, messageArg) },
      process: async (keyArg) => {
        // `/` never occurs in an id, so the first one separates the cluster from the node.
        const separator = keyArg.indexOf('/');
        await this.refreshProjection(keyArg.slice(0, separator), keyArg.slice(separator + 1));
      },
    });
    cloudly.addAdminHandler<IReq_Admin_GetRuntimeNetworkAddressPlan>('getRuntimeNetworkAddressPlan', async (request) => {
      request = requireRequestShape(request, { required: {} });
      return { plan: await this.getAddressPlan() };
    });

    cloudly.addAdminHandler<IReq_Admin_SetRuntimeNetworkAddressPlan>('setRuntimeNetworkAddressPlan', async (request, context) => {
      request = requireRequestShape(request, {
        required: { plan: (valueArg, pathArg) => validateRuntimeNetworkAddressPlan(valueArg, pathArg) },
      });
      return this.writeAddressPlan(request.plan, context.identity.userId);
    });

    cloudly.addAdminHandler<IReq_Admin_GetRuntimeNetworkProjection>('getRuntimeNetworkProjection', async (request) => {
      request = requireRequestShape(request, { required: { clusterId: isIdString, nodeId: isNodeId } });
      await this.cloudly.clusterManager.requireCluster(request.clusterId);
      return this.signed(await this.refreshProjection(request.clusterId, request.nodeId));
    });

    cloudly.addRelayHandler<IReq_Relay_Cloudly_ReportRuntimeNetworkLeases>('reportRuntimeNetworkLeases', async (request, context) => {
      request = requireRequestShape(request, {
        required: { nodeId: isNodeId, leases: (valueArg, pathArg) => validateRuntimeNetworkWorkloadLeases(valueArg, pathArg) },
      });
      await this.cloudly.clusterManager.requireElected(context.session);
      const generation = await this.recordLeases(context.clusterId, request.nodeId, request.leases);
      await this.refreshCluster(context.clusterId);
      return { generation };
    });

    cloudly.addRelayHandler<IReq_Relay_Cloudly_GetRuntimeNetworkProjection>('getClusterNodeRuntimeNetworkProjection', async (request, context) => {
      request = requireRequestShape(request, { required: { nodeId: isNodeId } });
      return this.signed(await this.refreshProjection(context.clusterId, request.nodeId));
    });

    cloudly.addRelayHandler<IReq_Relay_Cloudly_ReportRuntimeNetworkProjectionApplication>(
      'reportRuntimeNetworkProjectionApplication',
      async (request, context) => {
        request = requireRequestShape(request, {
          required: { application: (valueArg, pathArg) => validateRuntimeNetworkProjectionApplication(valueArg, pathArg) },
        });
        await this.cloudly.clusterManager.requireElected(context.session);
        return { application: await this.recordApplication(context.clusterId, request.application) };
      },
    );
  }

  private async requireNode(clusterIdArg: string, nodeIdArg: string) {
    const node = await this.cloudly.clusterManager.nodes.getNode(clusterIdArg, nodeIdArg);
    if (!node) {
      throw refuse('not-found', [`node ${nodeIdArg} does not exist in cluster ${clusterIdArg}`]);
    }
    return node;
  }

  // ---- address plan ---------------------------------------------------------------------------

  public async getAddressPlan(): Promise<IRuntimeNetworkAddressPlan | null> {
    return detach(await this.readPlanCached());
  }

  /**
   * The plan as last read, trusted for `planCacheTtlMs` (every write of this process replaces it;
   * another process's write is seen after at most that long). Callers must not change it.
   */
  private async readPlanCached(): Promise<IRuntimeNetworkAddressPlan | null> {
    const now = Date.now();
    if (this.planCache && now - this.planCache.readAt < planCacheTtlMs) {
      return this.planCache.plan;
    }
    const doc = await this.cloudly.store.get(runtimeNetworkAddressPlanKind, addressPlanDocumentId);
    this.planCache = { plan: doc ? detach(doc.plan) : null, readAt: now };
    return this.planCache.plan;
  }

  /**
   * Writes the plan at exactly the next revision. The revision is the compare-and-swap token: the
   * stored document must still hold the previous revision when the write commits, so of two
   * administrators writing the same next revision exactly one wins and the other gets `conflict`.
   */
  public async writeAddressPlan(
    planArg: IRuntimeNetworkAddressPlan,
    actorArg: string,
  ): Promise<IReq_Admin_SetRuntimeNetworkAddressPlan['response']> {
    const { store } = this.cloudly;
    const doc = await store.get(runtimeNetworkAddressPlanKind, addressPlanDocumentId);
    const previous = doc?.plan ?? null;
    if (previous !== null && canonicalizeJson(previous) === canonicalizeJson(planArg)) {
      return { plan: detach(previous), replayed: true };
    }
    const expectedRevision = previous === null ? 1 : previous.revision + 1;
    if (planArg.revision !== expectedRevision) {
      throw refuse('conflict', [`request.plan.revision must be ${expectedRevision}, the revision after the stored plan`
        + (previous === null ? ' (none is stored yet)' : ` (${previous.revision})`)]);
    }
    const admission = admitRuntimeNetworkAddressPlanChange(previous, planArg);
    // A revision that drops a pool or changes its prefix would strand the leases drawn from it:
    // refused, naming every such lease (leases are never migrated by a plan write; see
    // docs/desired-state.md). The contract's own reasons come first.
    const stranded = strandedLeaseReasons(planArg, await this.leases.readEntries(), Date.now(), this.leases.windowMs);
    if (!admission.admitted || stranded.length > 0) {
      throw refuse('invalid-request', [
        ...(admission.admitted ? [] : admission.reasons.map((reason) => reason.replace(/^next/, 'request.plan'))),
        ...stranded,
      ]);
    }
    const plan = detach(admission.plan);
    const stored = doc
      ? await store.swap(runtimeNetworkAddressPlanKind, addressPlanDocumentId, doc.generation, {
        set: { plan, writtenAt: Date.now(), writtenBy: actorArg },
      })
      : await store.insert(runtimeNetworkAddressPlanKind, { id: addressPlanDocumentId, plan, writtenAt: Date.now(), writtenBy: actorArg });
    if (!stored) {
      throw refuse('conflict', [`another plan revision ${expectedRevision} was written at the same time; read the plan again`]);
    }
    this.planCache = { plan: detach(stored.plan), readAt: Date.now() };
    this.cloudly.logger.info({ revision: plan.revision, actor: actorArg }, 'runtime network address plan written');
    void this.refreshAllStored();
    return { plan: detach(stored.plan), replayed: false };
  }

  // ---- leases and applications ------------------------------------------------------------------

  /**
   * Records a node's lease statement as its confirmation of what it applied. Cloudly allocated every
   * lease; a statement naming anything else (another address, another node's lease, a lease of an
   * unknown or foreign service, a lease never allocated or already released) is refused with every
   * reason and nothing is recorded.
   */
  private async recordLeases(clusterIdArg: string, nodeIdArg: string, leasesArg: IRuntimeNetworkWorkloadLease[]): Promise<number> {
    await this.requireNode(clusterIdArg, nodeIdArg);
    const { store } = this.cloudly;
    const allocation = await this.leases.allocate(clusterIdArg);
    const services = await store.find(serviceKind, { clusterId: clusterIdArg });
    const entries = await this.leases.readEntries({ cached: true });
    const reasons = judgeLeaseConfirmation(leasesArg, {
      nodeId: nodeIdArg,
      allocated: new Map(allocation.leases.map((lease) => [lease.lease.id, lease])),
      serviceIds: new Set(services.map((service) => service.id)),
      addressHolders: new Map(entries.filter((entry) => entry.releasedAt === undefined)
        .map((entry) => [entry.address, entry.clusterId === clusterIdArg ? `lease ${entry.lease.id} on node ${entry.nodeId}` : 'a lease of another cluster'])),
    });
    if (allocation.managed === false) {
      reasons.unshift('request.leases cannot be confirmed: no address plan exists, so Cloudly allocated no lease');
    }
    if (reasons.length > 0 && leasesArg.length > 0) {
      throw refuse('invalid-request', reasons);
    }
    const id = clusterNodeDocumentId(clusterIdArg, nodeIdArg);
    const leases = leasesArg.map((entry) => ({
      lease: { id: entry.lease.id, generation: entry.lease.generation },
      serviceId: entry.serviceId,
      address: entry.address,
    }));
    const reportedAt = Date.now();
    const { doc } = await store.mutate(runtimeNetworkLeasesKind, id, (currentArg) => (currentArg
      ? { kind: 'write', change: { set: { leases, reportedAt } } }
      : { kind: 'create', doc: { id, clusterId: clusterIdArg, nodeId: nodeIdArg, leases, reportedAt } }));
    return doc!.generation;
  }

  /** The cluster's held leases (allocating what is missing first). */
  public async allocateCluster(clusterIdArg: string): Promise<IClusterAllocation> {
    return this.leases.allocate(clusterIdArg);
  }

  /** Records that a node applied exactly its current projection; anything else is a conflict. */
  private async recordApplication(
    clusterIdArg: string,
    applicationArg: IRuntimeNetworkProjectionApplication,
  ): Promise<IRuntimeNetworkProjectionApplication> {
    const application = {
      projectionId: applicationArg.projectionId,
      nodeId: applicationArg.nodeId,
      generation: applicationArg.generation,
      digest: applicationArg.digest,
    };
    await this.requireNode(clusterIdArg, application.nodeId);
    const { store } = this.cloudly;
    const id = clusterNodeDocumentId(clusterIdArg, application.nodeId);
    const doc = await store.get(runtimeNetworkProjectionKind, id);
    const projection = doc?.projection;
    if (!doc || !projection || projection.id !== application.projectionId || projection.generation !== application.generation
      || projection.digest !== application.digest) {
      throw refuse('conflict', ['request.application does not name the node\'s current projection; read it again']);
    }
    if (doc.application && canonicalizeJson(doc.application) === canonicalizeJson(application)) {
      return application;
    }
    const stored = await store.swap(runtimeNetworkProjectionKind, id, doc.generation, { set: { application } });
    if (!stored) {
      throw refuse('conflict', ['the node\'s projection changed while the application was recorded; read it again']);
    }
    return application;
  }

  // ---- projections ------------------------------------------------------------------------------

  private async gatherFacts(clusterIdArg: string, nodeIdArg: string): Promise<IRuntimeNetworkNodeFacts> {
    const node = await this.requireNode(clusterIdArg, nodeIdArg);
    const { store } = this.cloudly;
    const [plan, leaseDocs, designation, table, allocation, relayHost, services] = await Promise.all([
      this.getAddressPlan(),
      store.find(runtimeNetworkLeasesKind, { clusterId: clusterIdArg }, { sort: { nodeId: 1 } }),
      this.cloudly.ingressManager.getDesignation(clusterIdArg),
      this.cloudly.ingressManager.getRouteTable(clusterIdArg),
      this.leases.allocate(clusterIdArg),
      this.cloudly.clusterManager.relayRegistrations.getRelayHost(clusterIdArg),
      store.find(serviceKind, { clusterId: clusterIdArg }),
    ]);
    // Lease statements of nodes that were removed since no longer place anything.
    const liveNodes = new Set((await this.cloudly.clusterManager.nodes.listNodes(clusterIdArg)).map((entry) => entry.id));
    // A confirmed lease is an endpoint while Cloudly still holds it for that node, at that address.
    const held = new Map(allocation.leases.map((lease) => [lease.lease.id, lease]));
    const isHeld = (nodeIdArg: string, leaseArg: IRuntimeNetworkWorkloadLease) => {
      const allocated = held.get(leaseArg.lease.id);
      return allocated !== undefined && allocated.nodeId === nodeIdArg && allocated.address === leaseArg.address
        && allocated.lease.generation === leaseArg.lease.generation && allocated.serviceId === leaseArg.serviceId;
    };
    // The host of the relay's node carries what the registration states, beside the node's own report.
    const hostAddresses = relayHost !== null && relayHost.nodeId === nodeIdArg && relayHost.hostAddresses.length > 0
      ? [...new Set([...(node.hostAddresses ?? []), ...relayHost.hostAddresses])].sort()
      : node.hostAddresses;
    // Routes: those the services declare, then those an administrator wrote for other hostnames.
    const declared = deriveClusterRoutes(services.filter((service) => service.deletionRequestedAt === undefined));
    const declaredHostnames = new Set(declared.map((route) => route.hostname));
    const routes = table === null && declared.length === 0
      ? null
      : [...declared, ...(table?.routes ?? []).filter((route) => !declaredHostnames.has(route.hostname))]
        .sort((a, b) => (a.hostname < b.hostname ? -1 : a.hostname > b.hostname ? 1 : 0));
    return {
      clusterId: clusterIdArg,
      nodeId: nodeIdArg,
      plan,
      hostAddresses,
      leasesByNode: leaseDocs.filter((doc) => liveNodes.has(doc.nodeId))
        .map((doc) => ({ nodeId: doc.nodeId, leases: doc.leases.filter((lease) => isHeld(doc.nodeId, lease)) })),
      ingressServiceId: designation?.ingressServiceId ?? null,
      routes,
    };
  }

  /**
   * Brings one node's projection up to date and answers it. A new generation is written only when
   * the content changed, by one conditional write on the stored document; a lost race re-reads and
   * computes again. When no valid next projection can be published yet, the current one stays and
   * the reasons are logged; a node that never had one gets `unavailable` with them.
   */
  public async refreshProjection(clusterIdArg: string, nodeIdArg: string): Promise<IRuntimeNetworkProjection> {
    const { store } = this.cloudly;
    const id = clusterNodeDocumentId(clusterIdArg, nodeIdArg);
    // The facts are gathered afresh for every read: a write that lost to a concurrent refresh of
    // the same node computes again on what that refresh stored.
    let step: TRuntimeNetworkProjectionStep | null = null;
    const result = await store.mutate(runtimeNetworkProjectionKind, id, async (docArg) => {
      step = composeNextRuntimeNetworkProjection(docArg?.projection ?? null, docArg?.application ?? null,
        await this.gatherFacts(clusterIdArg, nodeIdArg));
      if (step.kind === 'blocked') {
        this.cloudly.logger.warn({ clusterId: clusterIdArg, nodeId: nodeIdArg, reasons: step.reasons }, 'runtime network projection held back');
      }
      return decideProjectionWrite(docArg, step, { id, clusterId: clusterIdArg, nodeId: nodeIdArg, now: Date.now() });
    });
    const last = step as TRuntimeNetworkProjectionStep | null;
    if (last?.kind === 'unchanged') {
      return detach(last.projection);
    }
    if (result.outcome !== 'kept') {
      this.cloudly.logger.info({ clusterId: clusterIdArg, nodeId: nodeIdArg, generation: result.doc!.projection.generation }, 'runtime network projection computed');
    }
    return detach(result.doc!.projection);
  }

  public async start(): Promise<void> {
    this.refreshes.resume();
    this.leases.resume();
    // A relay registration names the node whose host carries the relay: that node's projection changes.
    this.unsubscribe = this.cloudly.store.onCommitted((kindArg, idArg) => {
      if (kindArg === clusterRelayRegistrationKind) {
        void this.refreshCluster(idArg).catch(() => undefined);
      }
    });
  }

  public async stop(): Promise<void> {
    this.unsubscribe?.();
    await this.leases.drain();
    await this.refreshes.drain();
  }

  /** Refreshes every node of a cluster, one after another; a failure of one node is logged and does not stop the others. */
  public async refreshCluster(clusterIdArg: string): Promise<void> {
    for (const node of await this.cloudly.clusterManager.nodes.listNodes(clusterIdArg)) {
      await this.refreshes.add(clusterNodeDocumentId(clusterIdArg, node.id));
    }
  }

  /** After a plan change: refresh every node that already has a projection (best effort, in the background). */
  private async refreshAllStored(): Promise<void> {
    try {
      for (const doc of await this.cloudly.store.find(runtimeNetworkProjectionKind, {})) {
        // After a stop the queue takes no work, so this ends quickly.
        await this.refreshes.add(doc.id);
      }
    } catch (error) {
      this.cloudly.logger.warn({ err: error }, 'runtime network refresh after a plan change failed');
    }
  }
}
