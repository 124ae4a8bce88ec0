import type { ICommittedChange } from '../core/changefeed.js';
import { ofOwningCluster, ofOwningClusterInputs, type IController, type IReconcileContext, type IReconcileResult } from '../core/controller.js';
import type { DocumentStore } from '../core/store.js';
import { clusterKind } from '../manager.cluster/documents.js';
import { clusterNodeKind } from '../manager.cluster/clusternodes.js';
import { routedServiceView } from '../manager.desiredstate/routes.js';
import { runtimeNetworkProjectionKind } from './documents.js';

/** The key of a pass over every cluster (the address plan changed). */
export const allProjectionsKey = 'all';

export interface IProjectionsPorts {
  store: DocumentStore;
  /** Brings one node's signed projection up to date (written only when its content changed; throws when held back). */
  refreshNode: (clusterIdArg: string, nodeIdArg: string) => Promise<unknown>;
  logger: { warn: (objectArg: object, messageArg: string) => void };
}

/**
 * The projections controller: every node's signed runtime network projection
 * (docs/api/runtimenetwork.md), the only writer of its `projection` (the relay's application report
 * is recorded beside it by the report itself). Keys are cluster ids, and `all` for the address
 * plan. A node whose next projection cannot be published yet keeps its current one; the reasons
 * are logged, and the next change of its inputs looks again.
 */
export class ProjectionsController implements IController {
  public readonly name = 'projections';
  public readonly writes = [runtimeNetworkProjectionKind.collectionName] as const;
  public readonly inputs: Readonly<Record<string, (changeArg: ICommittedChange) => readonly string[]>> = {
    // Its routes and replicas reach the mesh and the ingress grants.
    CloudlyService: ofOwningCluster,
    // A write of only the cluster's bookkeeping (a relay token rotation) changes nothing read here.
    CloudlyCluster: ofOwningClusterInputs,
    CloudlyClusterIngressSlot: ofOwningCluster,
    CloudlyClusterNode: ofOwningCluster,
    CloudlyRuntimeNetworkLeases: ofOwningCluster,
    // The relay's host; a registration with the same announcement (a reconnect) names the same host.
    CloudlyClusterRelayRegistration: ofOwningClusterInputs,
    // A node's applied projection (the relay's application report).
    CloudlyRuntimeNetworkProjection: ofOwningCluster,
    CloudlyRuntimeNetworkAddressPlan: () => [allProjectionsKey],
  };
  public readonly inputViews = {
    // Its routes, its mesh workload (organization, ports, egress) and what its leases are
    // allocated from (replicas, placement): a new image moves none of them.
    CloudlyService: (docArg: Readonly<Record<string, unknown>>) => {
      const runtime = docArg.runtime as { replicas?: unknown; placement?: unknown } | undefined;
      return { ...routedServiceView(docArg), organizationId: docArg.organizationId, networkPolicy: docArg.networkPolicy, replicas: runtime?.replicas, placement: runtime?.placement };
    },
    // Only the relay's application report: this controller's own write of the projection beside it is no input.
    CloudlyRuntimeNetworkProjection: (docArg: Readonly<Record<string, unknown>>) => docArg.application ?? null,
  };
  /** A projection changes with its inputs, not with time: the resync runs the clusters whose digest moved. */
  public readonly digestResync = { keyOf: (clusterIdArg: string) => clusterIdArg };

  constructor(private readonly ports: IProjectionsPorts) {}

  public async all(): Promise<readonly string[]> {
    return [allProjectionsKey];
  }

  public async reconcile(keyArg: string, contextArg: IReconcileContext): Promise<IReconcileResult> {
    const { store } = this.ports;
    if (keyArg === allProjectionsKey) {
      const clusters = await store.findFields(clusterKind, {}, ['id']);
      for (const cluster of clusters) {
        contextArg.enqueue(String(cluster.id));
      }
      return { outcome: 'expanded' };
    }
    for (const node of await store.find(clusterNodeKind, { clusterId: keyArg })) {
      try {
        await this.ports.refreshNode(keyArg, node.nodeId);
      } catch (error) {
        // Held back (the refresh logged its reasons) or a failure of this node: the others go on.
        this.ports.logger.warn({ err: error, clusterId: keyArg, nodeId: node.nodeId }, 'runtime network projection not refreshed');
      }
    }
    return { outcome: 'refreshed' };
  }
}
