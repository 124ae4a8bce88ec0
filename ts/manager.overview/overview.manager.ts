import type { Cloudly } from '../classes.cloudly.js';
import { clusterFilterOf, isLabelSelectorText } from '../manager.cluster/labels.js';
import { isIdString } from '../core/validation.js';
import { adminQuery, registerOperations } from '../core/operations.js';
import { snapshotServiceRuntimeStatus, type IServiceRuntimeStatus } from '../interfaces/data/serviceruntimestatus.js';
import type { IServiceBackupRecord } from '../interfaces/requests/backup.js';
import type {
  IClusterOverviewService,
  IFleetClusterSummary,
  TFleetRelayState,
  TFleetRuntimeBucket,
} from '../interfaces/requests/overview.js';
import { clusterLivenessKind } from '../manager.cluster/liveness.js';
import { registerFleetMetrics } from './fleetmetrics.js';
import { clusterKind, toPublicCluster } from '../manager.cluster/cluster.manager.js';
import { clusterRelayRegistrationKind } from '../manager.cluster/relayregistrations.js';
import { findPage, nextCursorMember, oldestFirst, orderedPageShape } from '../core/pagination.js';
import { clusterNodeKind, toPublicClusterNode } from '../manager.cluster/clusternodes.js';
import { serviceKind, serviceRuntimeStatusKind, toPublicService } from '../manager.service/service.manager.js';
import { serviceBackupKind, toRecord as toPublicServiceBackup } from '../manager.backup/backup.manager.js';

/**
 * `getClusterOverview`: a dashboard's cluster page in one call. Every kind is read once for the
 * whole cluster (nodes, services, stored runtime statuses, backups, the relay registration with
 * its lease, the ingress slot), the reads run side by side, and nothing is written: the runtime
 * status is the one the reconciler stored (docs/reconciler.md), current within its bound.
 */
export class OverviewManager {
  constructor(private readonly cloudly: Cloudly) {
    registerFleetMetrics(cloudly.metrics.registry, cloudly.store);
    registerOperations(cloudly, [
      adminQuery({
        method: 'getClusterOverview',
        access: 'read',
        input: { required: { clusterId: isIdString } },
        run: async (request) => {
          const cluster = await this.cloudly.clusterManager.requireCluster(request.clusterId);
          return { overview: await this.readOverview(cluster.id, toPublicCluster(cluster)) };
        },
      }),
      adminQuery({
        method: 'getFleetOverview',
        access: 'read',
        input: { required: {}, optional: { selector: isLabelSelectorText, ...orderedPageShape('getFleetOverview', oldestFirst('createdAt')) } },
        run: async (request) => {
          const page = await findPage(this.cloudly.store, clusterKind, clusterFilterOf(request.selector), 'getFleetOverview', request, oldestFirst('createdAt'));
          return { clusters: await this.readFleet(page.items.map(toPublicCluster)), ...nextCursorMember(page) };
        },
      }),
    ]);
  }

  /**
   * The fleet page's summaries of `clustersArg`: one read per kind for all of them (nodes,
   * services, their stored statuses, backups that need attention, relay registrations, leases),
   * side by side except the statuses, which need the service ids. Counting happens here.
   */
  private async readFleet(clustersArg: Array<ReturnType<typeof toPublicCluster>>): Promise<IFleetClusterSummary[]> {
    if (clustersArg.length === 0) {
      return [];
    }
    const { store, clusterManager } = this.cloudly;
    const ids = clustersArg.map((clusterArg) => clusterArg.id);
    const [nodeDocs, serviceDocs, backupDocs, registrationDocs, leases] = await Promise.all([
      store.findIn(clusterNodeKind, 'clusterId', ids),
      store.findIn(serviceKind, 'clusterId', ids),
      store.findIn(serviceBackupKind, 'clusterId', ids, { state: { $in: ['running', 'failed'] } }),
      store.findIn(clusterRelayRegistrationKind, 'id', ids),
      clusterManager.relayElection.readLeases(ids),
    ]);
    const [statusDocs, livenessDocs] = await Promise.all([
      serviceDocs.length === 0 ? [] : store.findIn(serviceRuntimeStatusKind, 'id', serviceDocs.map((docArg) => docArg.id)),
      store.findIn(clusterLivenessKind, 'id', ids),
    ]);
    // A service of a cluster that is not current counts `unknown`, whatever its last verdict says.
    const bucketOf = new Map<string, TFleetRuntimeBucket>(statusDocs.map((docArg) => [docArg.id, docArg.unknown ? 'unknown' : docArg.state]));
    const livenessOf = new Map(livenessDocs.map((docArg) => [docArg.id, docArg.unknown]));
    const leaseOf = new Map(leases.map((leaseArg) => [leaseArg.clusterId, leaseArg]));
    const registered = new Set(registrationDocs.map((docArg) => docArg.id));
    const summaries = new Map<string, IFleetClusterSummary>(clustersArg.map((clusterArg) => [clusterArg.id, {
      cluster: clusterArg,
      relay: { state: 'missing', registered: registered.has(clusterArg.id), socketsOpenHere: this.cloudly.relays.sessionsOf(clusterArg.id).length },
      nodeCount: 0,
      services: { total: 0, byRuntimeState: { converged: 0, converging: 0, waiting: 0, refused: 0, unjudged: 0, unknown: 0 } },
      unknown: livenessOf.get(clusterArg.id) ?? null,
      backups: { running: 0, failed: 0 },
    }]));
    for (const summary of summaries.values()) {
      const connected = await clusterManager.relayElection.isClusterConnected(summary.cluster.id, leaseOf.get(summary.cluster.id) ?? null);
      const state: TFleetRelayState = connected || summary.relay.socketsOpenHere > 0
        ? (summary.relay.registered ? 'connected' : 'unregistered')
        : 'missing';
      summary.relay.state = state;
    }
    for (const doc of nodeDocs) {
      summaries.get(doc.clusterId)!.nodeCount++;
    }
    for (const doc of serviceDocs) {
      const summary = summaries.get(doc.clusterId)!;
      summary.services.total++;
      summary.services.byRuntimeState[bucketOf.get(doc.id) ?? 'unjudged']++;
    }
    for (const doc of backupDocs) {
      const summary = summaries.get(doc.clusterId)!;
      if (doc.state === 'running') summary.backups.running++;
      else summary.backups.failed++;
    }
    return [...summaries.values()];
  }

  private async readOverview(clusterIdArg: string, clusterArg: ReturnType<typeof toPublicCluster>) {
    const { store, clusterManager } = this.cloudly;
    const [nodeDocs, serviceDocs, backupDocs, registration, ingressDesignation, certificates] = await Promise.all([
      store.find(clusterNodeKind, { clusterId: clusterIdArg }, { sort: { nodeId: 1 } }),
      store.find(serviceKind, { clusterId: clusterIdArg }, { sort: { createdAt: 1 } }),
      store.find(serviceBackupKind, { clusterId: clusterIdArg }),
      clusterManager.relayRegistrations.getRegistration(clusterIdArg),
      this.cloudly.ingressManager.getDesignation(clusterIdArg),
      this.cloudly.certificateManager.statuses(clusterIdArg),
    ]);
    const statusDocs = serviceDocs.length === 0 ? [] : await store.findIn(serviceRuntimeStatusKind, 'id', serviceDocs.map((doc) => doc.id));
    const statuses = new Map<string, IServiceRuntimeStatus>(statusDocs.map((doc) => [doc.id, snapshotServiceRuntimeStatus({
      id: doc.id, specRevision: doc.specRevision, state: doc.state, reason: doc.reason, changedAt: doc.changedAt,
    })]));
    const latestBackups = new Map<string, IServiceBackupRecord>();
    for (const doc of backupDocs) {
      const known = latestBackups.get(doc.serviceId);
      if (!known || doc.createdAt > known.createdAt || (doc.createdAt === known.createdAt && doc.id > known.backupId)) {
        latestBackups.set(doc.serviceId, toPublicServiceBackup(doc));
      }
    }
    const electedSessionId = clusterManager.relayElection.electedSessionId(clusterIdArg);
    const socketsOpenHere = this.cloudly.relays.sessionsOf(clusterIdArg).map((session) => ({
      sessionId: session.id,
      connectedAt: session.connectedAt,
      elected: session.peer.isOpen && session.id === electedSessionId,
    }));
    const unknownOf = new Map(statusDocs.map((doc) => [doc.id, doc.unknown ?? null]));
    const services: IClusterOverviewService[] = serviceDocs.map((doc) => ({
      service: toPublicService(doc),
      runtimeStatus: statuses.get(doc.id) ?? null,
      unknown: unknownOf.get(doc.id) ?? null,
      latestBackup: latestBackups.get(doc.id) ?? null,
    }));
    return {
      cluster: clusterArg,
      relay: {
        socketsOpenHere,
        // The registration's flag is read from the lease; without a registration, the lease alone says.
        connected: registration ? registration.connected : await clusterManager.relayElection.isClusterConnected(clusterIdArg),
        registration,
      },
      nodes: nodeDocs.map(toPublicClusterNode),
      services,
      ingressDesignation,
      certificates,
    };
  }
}
