import type { Cloudly } from '../classes.cloudly.js';
import type { IClusterReads } from '../manager.cluster/ports.js';
import type { IClusterIngressDesignation } from '../interfaces/data/clusteringressdesignation.js';
import { refuse, refuseNamed } from '../core/errors.js';
import { registerOperations } from '../core/operations.js';
import { clusterNodeDocumentId } from '../manager.cluster/clusternodes.js';
import type { IRuntimeNetworkProjection, IRuntimeNetworkWorkloadLease } from '../interfaces/data/runtimenetwork.js';
import type { IRuntimeNetworkAddressPlan } from '../interfaces/data/runtimenetworkaddressplan.js';
import {
  composeNextRuntimeNetworkProjection,
  type IRuntimeNetworkMeshWorkload,
  type IRuntimeNetworkNodeFacts,
  type TRuntimeNetworkProjectionStep,
} from './derive.js';
import { leaseIndexOf, WorkloadLeaseAllocator, type IClusterAllocation } from './leases.js';
import { serviceKind, type IServiceDocument } from '../manager.service/service.manager.js';
import { deriveClusterRoutes } from '../manager.desiredstate/routes.js';
import { canonicalRuntimeNetworkProjectionBytes, runtimeNetworkProjectionSignatureType } from '../interfaces/data/runtimenetworksignature.js';
import { decideProjectionWrite } from './decide.js';
import {
  addressPlanDocumentId,
  detach,
  runtimeNetworkAddressPlanKind,
  runtimeNetworkLeasesKind,
  runtimeNetworkProjectionKind,
} from './documents.js';
import { runtimeNetworkOperations } from './operations.js';

/**
 * The runtime network: the authority's address plan (one per Cloudly, written by administrators at
 * the next revision only) and one projection per node, computed by Cloudly from the plan, the
 * node's reported host addresses, the workload leases the cluster's relay reports and the cluster's
 * ingress routes. A projection is brought up to date whenever it is read and after every lease
 * report, and a new generation is stored only when its content changes. The methods are declared
 * operations (./operations.ts, decisions in ./decide.ts); this class wires their ports and owns the
 * projection refreshes and the lease allocator.
 */

export {
  runtimeNetworkAddressPlanKind,
  runtimeNetworkLeasesKind,
  runtimeNetworkProjectionKind,
  type IRuntimeNetworkAddressPlanDocument,
  type IRuntimeNetworkLeasesDocument,
  type IRuntimeNetworkProjectionDocument,
} from './documents.js';
export { decideProjectionWrite, strandedLeaseReasons } from './decide.js';

/** A service as the full mesh sees it: its organization and the ports it declares. */
const meshWorkloadOf = (serviceArg: IServiceDocument): IRuntimeNetworkMeshWorkload => ({
  serviceId: serviceArg.id,
  organizationId: serviceArg.organizationId,
  ports: (serviceArg.ports ?? []).map((port) => ({ protocol: port.protocol, port: port.port })),
  ...(serviceArg.networkPolicy && serviceArg.networkPolicy.egress.kind !== 'mesh' ? { meshEgress: false } : {}),
});

/** What the runtime network manager asks of the controllers; built by the composition root. */
export interface IRuntimeNetworkManagerPorts {
  /** A cluster's lease allocation changed: the controllers that read it run. */
  allocationChanged: (clusterIdArg: string) => void;
  requestProjections: (clusterIdArg: string) => void;
  /** Waits (bounded) for the runs owed to the cluster's projections on this instance. */
  settledProjections: (clusterIdArg: string) => Promise<void>;
}

export class RuntimeNetworkManager {
  /** Workload lease allocation from the plan's pools (leases.ts). */
  public readonly leases: WorkloadLeaseAllocator;
  /** The controllers' side, wired by the composition root once the reconciler exists. */
  private ports: IRuntimeNetworkManagerPorts | null = null;

  /** A projection with Cloudly's detached signature over its canonical bytes, so a node need not trust the relay. */
  private async signed(projectionArg: IRuntimeNetworkProjection): Promise<{ projection: IRuntimeNetworkProjection; signature: string }> {
    const signature = await this.cloudly.auth.signDetached(canonicalRuntimeNetworkProjectionBytes(projectionArg), runtimeNetworkProjectionSignatureType);
    return { projection: projectionArg, signature };
  }

  constructor(
    private readonly cloudly: Cloudly,
    private readonly clusters: IClusterReads,
    /** The cluster's ingress designation (the ingress domain's), or null. */
    private readonly designationOf: (clusterIdArg: string) => Promise<IClusterIngressDesignation | null>,
  ) {
    this.leases = new WorkloadLeaseAllocator(cloudly, () => this.getAddressPlan());
    // Leases are inputs of the projections, the desired state and every verdict of the cluster (a
    // workload without one is refused): each of their controllers is asked for a run.
    this.leases.onChanged = (clusterIdArg) => this.ports?.allocationChanged(clusterIdArg);
    registerOperations(cloudly, runtimeNetworkOperations({
      logger: cloudly.logger,
      requireCluster: (clusterIdArg) => clusters.requireCluster(clusterIdArg),
      requireNode: (clusterIdArg, nodeIdArg) => this.requireNode(clusterIdArg, nodeIdArg),
      requireElected: (sessionArg) => clusters.requireElected(sessionArg),
      getAddressPlan: () => this.getAddressPlan(),
      readLeaseEntries: (optionsArg) => this.leases.readEntries(optionsArg),
      withdrawalWindowMs: () => this.leases.windowMs,
      allocateCluster: (clusterIdArg) => this.leases.allocate(clusterIdArg),
      listServiceIds: async (clusterIdArg) => (await cloudly.store.findFields(serviceKind, { clusterId: clusterIdArg }, ['id'])).map((service) => service.id),
      readPublishedProjection: async (clusterIdArg, nodeIdArg) => {
        await this.ports?.settledProjections(clusterIdArg);
        const doc = await cloudly.store.get(runtimeNetworkProjectionKind, clusterNodeDocumentId(clusterIdArg, nodeIdArg));
        return doc ? detach(doc.projection) : null;
      },
      refreshCluster: async (clusterIdArg) => this.refreshCluster(clusterIdArg),
      signed: (projectionArg) => this.signed(projectionArg),
    }));
  }

  private async requireNode(clusterIdArg: string, nodeIdArg: string) {
    const node = await this.clusters.getNode(clusterIdArg, nodeIdArg);
    if (!node) {
      throw refuseNamed('not-found', 'node-not-found', `node ${nodeIdArg} does not exist in cluster ${clusterIdArg}`);
    }
    return node;
  }

  // ---- address plan ---------------------------------------------------------------------------

  /**
   * The plan as stored now. It used to be kept for 5 s and replaced by this process's writes, but
   * the controllers a plan write triggers could read the old one in between (the commit queues
   * them before the write's caller replaces the copy), and judge every service on it until the
   * next change; one read of one document costs less than that.
   */
  public async getAddressPlan(): Promise<IRuntimeNetworkAddressPlan | null> {
    const doc = await this.cloudly.store.get(runtimeNetworkAddressPlanKind, addressPlanDocumentId);
    return doc ? detach(doc.plan) : null;
  }

  // ---- leases ------------------------------------------------------------------------------------

  /** The cluster's held leases (allocating what is missing first). */
  public async allocateCluster(clusterIdArg: string): Promise<IClusterAllocation> {
    return this.leases.allocate(clusterIdArg);
  }

  // ---- projections ------------------------------------------------------------------------------

  private async gatherFacts(clusterIdArg: string, nodeIdArg: string): Promise<IRuntimeNetworkNodeFacts> {
    const node = await this.requireNode(clusterIdArg, nodeIdArg);
    const { store } = this.cloudly;
    const [plan, leaseDocs, designation, allocation, relayHost, services] = await Promise.all([
      this.getAddressPlan(),
      store.find(runtimeNetworkLeasesKind, { clusterId: clusterIdArg }, { sort: { nodeId: 1 } }),
      this.designationOf(clusterIdArg),
      this.leases.allocate(clusterIdArg),
      this.clusters.relayHost(clusterIdArg),
      store.find(serviceKind, { clusterId: clusterIdArg }),
    ]);
    // Lease statements of nodes that were removed since no longer place anything.
    const liveNodes = new Set((await this.clusters.listNodes(clusterIdArg)).map((entry) => entry.id));
    // A confirmed lease is an endpoint while Cloudly still holds it for that node, at that address.
    const held = leaseIndexOf(allocation);
    const isHeld = (nodeIdArg: string, leaseArg: IRuntimeNetworkWorkloadLease) => {
      const allocated = held.get(leaseArg.lease.id);
      return allocated !== undefined && allocated.nodeId === nodeIdArg && allocated.address === leaseArg.address
        && allocated.lease.generation === leaseArg.lease.generation && allocated.serviceId === leaseArg.serviceId;
    };
    // The host of the relay's node carries what the registration states, beside the node's own report.
    const hostAddresses = relayHost !== null && relayHost.nodeId === nodeIdArg && relayHost.hostAddresses.length > 0
      ? [...new Set([...(node.hostAddresses ?? []), ...relayHost.hostAddresses])].sort()
      : node.hostAddresses;
    const liveServices = services.filter((service) => service.deletionRequestedAt === undefined);
    // Routes have one source: what the live services declare (docs/api/ingress.md). The grants
    // are derived from them, and the route table resolves them against those grants.
    const declared = deriveClusterRoutes(liveServices);
    const routes = declared.length === 0 ? null : declared;
    return {
      clusterId: clusterIdArg,
      nodeId: nodeIdArg,
      plan,
      hostAddresses,
      leasesByNode: leaseDocs.filter((doc) => liveNodes.has(doc.nodeId))
        .map((doc) => ({ nodeId: doc.nodeId, leases: doc.leases.filter((lease) => isHeld(doc.nodeId, lease)) })),
      ingressServiceId: designation?.ingressServiceId ?? null,
      routes,
      workloads: liveServices.map(meshWorkloadOf),
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

  /** The controllers' side, wired by the composition root once the reconciler exists. */
  public connect(portsArg: IRuntimeNetworkManagerPorts): void {
    this.ports = portsArg;
  }

  public async start(): Promise<void> {
    this.leases.resume();
  }

  public async stop(): Promise<void> {
    await this.leases.drain();
  }

  /** Asks the projections controller for a run of every node of the cluster. */
  public refreshCluster(clusterIdArg: string): void {
    this.ports?.requestProjections(clusterIdArg);
  }
}
