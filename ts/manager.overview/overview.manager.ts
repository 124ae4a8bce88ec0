import type { Cloudly } from '../classes.cloudly.js';
import { isIdString, requireRequestShape } from '../core/validation.js';
import { snapshotServiceRuntimeStatus, type IServiceRuntimeStatus } from '../interfaces/data/serviceruntimestatus.js';
import type { IServiceBackupRecord } from '../interfaces/requests/backup.js';
import type { IClusterOverviewService, IReq_Admin_GetClusterOverview } from '../interfaces/requests/overview.js';
import { toPublicCluster } from '../manager.cluster/cluster.manager.js';
import { clusterNodeKind, toPublicClusterNode } from '../manager.cluster/clusternodes.js';
import { serviceKind, serviceRuntimeStatusKind, toPublicService } from '../manager.service/service.manager.js';
import { serviceBackupKind, toRecord as toPublicServiceBackup } from '../manager.backup/backup.manager.js';

/**
 * `getClusterOverview`: a dashboard's cluster page in one call. Every kind is read once for the
 * whole cluster (nodes, services, stored runtime statuses, backups, the relay registration with
 * its lease, the ingress slot), the reads run side by side, and nothing is written: the runtime
 * status is the one last judged and stored (`getServiceRuntimeStatus` judges it afresh for one
 * service).
 */
export class OverviewManager {
  constructor(private readonly cloudly: Cloudly) {
    cloudly.addAdminHandler<IReq_Admin_GetClusterOverview>('getClusterOverview', async (request) => {
      request = requireRequestShape(request, { required: { clusterId: isIdString } });
      const cluster = await this.cloudly.clusterManager.requireCluster(request.clusterId);
      return { overview: await this.readOverview(cluster.id, toPublicCluster(cluster)) };
    });
  }

  private async readOverview(clusterIdArg: string, clusterArg: ReturnType<typeof toPublicCluster>) {
    const { store, clusterManager } = this.cloudly;
    const [nodeDocs, serviceDocs, backupDocs, registration, ingressDesignation] = await Promise.all([
      store.find(clusterNodeKind, { clusterId: clusterIdArg }, { sort: { nodeId: 1 } }),
      store.find(serviceKind, { clusterId: clusterIdArg }, { sort: { createdAt: 1 } }),
      store.find(serviceBackupKind, { clusterId: clusterIdArg }),
      clusterManager.relayRegistrations.getRegistration(clusterIdArg),
      this.cloudly.ingressManager.getDesignation(clusterIdArg),
    ]);
    const statusDocs = serviceDocs.length === 0 ? [] : await store.find(serviceRuntimeStatusKind, { id: { $in: serviceDocs.map((doc) => doc.id) } });
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
    const services: IClusterOverviewService[] = serviceDocs.map((doc) => ({
      service: toPublicService(doc),
      runtimeStatus: statuses.get(doc.id) ?? null,
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
    };
  }
}
