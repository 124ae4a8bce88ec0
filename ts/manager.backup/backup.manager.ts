import * as path from 'node:path';
import { createLocalJWKSet } from 'jose';
import type { Cloudly } from '../classes.cloudly.js';
import { refuse } from '../core/errors.js';
import { FilesystemBlobStore, type IBlobStore } from '../core/blobstore.js';
import { streamChannelOf } from '../core/streams.js';
import { registerOperations } from '../core/operations.js';
import { identityIssuer } from '../core/auth.js';
import { OperationManager } from '../manager.operation/operation.manager.js';
import { operationKind, type IOperationDocument } from '../manager.operation/documents.js';
import {
  restoreGrantAudience,
  restoreGrantClaimsOf,
  restoreGrantLifetimeSeconds,
  restoreGrantSubjectOf,
  verifyRestoreGrant,
  type IRestoreGrantBinding,
  type IRestoreGrantClaims,
} from './restoregrants.js';
import { backupRefusalReasons, decideBackupInterrupted } from './decide.js';
import { serviceBackupKind } from './documents.js';
import { backupOperations, orderScheduledBackup, type IBackupPorts } from './operations.js';
import { backupScheduleOperations } from './schedules.js';
import { registerBackupMetrics } from './backupmetrics.js';
import type { IScheduledBackupOrder } from './schedules.controller.js';
import { serviceKind } from '../manager.service/documents.js';
import { organizationKind } from '../manager.service/organizations.js';
import { ClosureTransfers } from './transfers.js';
import { backupDrills, type IBackupDrillOrder } from './drills.js';
import type { IIsolatedRestoreNodeState } from '../interfaces/data/isolatedrestore.js';

/**
 * Node-addressed backups, database closures and isolated restores.
 *
 * Administrators order backups, restores and prunes of one exact node; Cloudly calls the
 * cluster's relay with that `nodeId`. During a backup the relay sends the service's database
 * closure on its own session (`backupServiceDatabaseClosure`); Cloudly validates the
 * descriptor before any byte moves, stores the bytes in the blob store (exact length and
 * sha256 proven, fsynced, renamed, recorded) and only then answers the stream with its
 * receipt. A restore fetches the closure back (`restoreServiceDatabaseClosure`).
 *
 * The methods are declared operations (./operations.ts) with pure decisions (./decide.ts); the
 * bytes move in ./transfers.ts. This class wires their ports and owns the start-up settlement of
 * backups whose operation ended without them.
 *
 * The retired coreflow-tagged methods (`executeServiceBackup`, `executeServiceRestore`,
 * `pruneNodeArchive`, `uploadBackupArchiveObject`, `downloadBackupArchiveObject`) are not
 * registered, so Cloudly answers them as not served.
 */

export { maximumSnapshotsPerBackup } from './relayanswers.js';
export { maximumBackupTags } from './operations.js';
/** Reasons this manager gives, defined once. */
export { backupRefusalReasons } from './decide.js';
export {
  closureArchiveObjectPath,
  closureBlobKey,
  isolatedRestoreKind,
  serviceBackupKind,
  toRecord,
  type IIsolatedRestoreDocument,
  type IServiceBackupDocument,
} from './documents.js';

export class BackupManager {
  public readonly blobStore: IBlobStore & { init?(): Promise<void> };
  /** Long work (backups, restores) as operations; started before this manager, stopped after it. */
  public readonly operations: OperationManager;
  /** The closure bytes in flight on this instance. */
  private readonly transfers: ClosureTransfers;
  /** What the backup operations read and call through, built once. */
  private readonly ports: IBackupPorts;
  /** Restore drills (./drills.ts): started here, recorded by the drills controller. */
  private readonly drills: ReturnType<typeof backupDrills>;

  constructor(private readonly cloudly: Cloudly, optionsArg: { blobStore?: IBlobStore } = {}) {
    this.operations = cloudly.addManager(new OperationManager(cloudly));
    this.operations.onAbandoned((docArg) => this.settleInterrupted(docArg));
    this.blobStore = optionsArg.blobStore ?? new FilesystemBlobStore(path.join(cloudly.config.dataDir, 'blobs'));
    this.transfers = new ClosureTransfers({
      blobStore: this.blobStore,
      store: cloudly.store,
      logger: cloudly.logger,
      flushSnapshot: () => cloudly.database.flushSnapshot(),
      reportRemoteTransfer: (operationIdArg) => this.operations.reportRemoteTransfer(operationIdArg),
    });
    // Every relay socket gets its stream channel as soon as it opens.
    cloudly.relays.onSessionOpened((sessionArg) => {
      streamChannelOf(sessionArg.peer);
    });
    this.ports = {
      store: cloudly.store,
      logger: cloudly.logger,
      operations: this.operations,
      transfers: this.transfers,
      relays: cloudly.relays,
      askSession: (sessionArg, methodArg, requestArg) => cloudly.relays.callSession<unknown>(sessionArg, methodArg, requestArg),
      requireService: async (serviceIdArg) => {
        const service = await cloudly.serviceManager.getService(serviceIdArg);
        if (!service) {
          throw refuse('not-found', [backupRefusalReasons.serviceNotFound]);
        }
        return service;
      },
      requireCluster: async (clusterIdArg) => {
        if (!(await cloudly.clusterManager.getCluster(clusterIdArg))) {
          throw refuse('not-found', [backupRefusalReasons.clusterNotFound]);
        }
      },
      requireNode: async (clusterIdArg, nodeIdArg) => {
        if (!(await cloudly.clusterManager.nodes.getNode(clusterIdArg, nodeIdArg))) {
          throw refuse('not-found', [backupRefusalReasons.nodeNotFound]);
        }
      },
      signRestoreGrant: (bindingArg) => this.signRestoreGrant(bindingArg),
      blobStore: this.blobStore,
      isStarted: () => cloudly.started,
    };
    registerOperations(cloudly, backupOperations(this.ports));
    this.drills = backupDrills(this.ports);
    registerOperations(cloudly, this.drills.declared);
    registerBackupMetrics(cloudly.metrics.registry, cloudly.store);
    registerOperations(cloudly, backupScheduleOperations({
      store: cloudly.store,
      clusterOfService: async (serviceIdArg) => {
        const service = await cloudly.store.get(serviceKind, serviceIdArg);
        return service && service.deletionRequestedAt === undefined ? service.clusterId : null;
      },
      clusterExists: async (clusterIdArg) => (await cloudly.clusterManager.getCluster(clusterIdArg)) !== null,
      organizationExists: async (organizationIdArg) => (await cloudly.store.get(organizationKind, organizationIdArg)) !== null,
      nodeExists: async (clusterIdArg, nodeIdArg) => (await cloudly.clusterManager.nodes.getNode(clusterIdArg, nodeIdArg)) !== null,
    }));
  }

  /** Orders one backup of a schedule's occurrence (the schedules controller's port). */
  public orderScheduledBackup(orderArg: IScheduledBackupOrder): Promise<'ordered' | 'exists'> {
    return orderScheduledBackup(this.ports, orderArg);
  }

  /** Starts one drill (the drills controller's port for a schedule's drill). */
  public startDrill(orderArg: IBackupDrillOrder): Promise<unknown> {
    return this.drills.startDrill(orderArg);
  }

  /** Removes a drill's scratch restore from its node (the drills controller's port). */
  public cleanupDrillRestore(restoreIdArg: string): Promise<IIsolatedRestoreNodeState | null> {
    return this.drills.cleanupRestore(restoreIdArg);
  }

  public async start(): Promise<void> {
    await this.blobStore.init?.();
    // A backup left running by an attempt whose operation ended (or never got recorded) failed with it.
    for (const backup of await this.cloudly.store.find(serviceBackupKind, { state: 'running' })) {
      const operation = backup.operationId ? await this.cloudly.store.get(operationKind, backup.operationId) : null;
      if (backup.operationId && (!operation || operation.state !== 'running')) {
        await this.cloudly.store.mutate(serviceBackupKind, backup.id, (currentArg) => decideBackupInterrupted(currentArg, backup.operationId!));
      }
    }
  }

  public async stop(): Promise<void> {
    await this.transfers.stop();
  }

  /** The backup of an operation whose instance died fails with it, unless another attempt took it over. */
  private async settleInterrupted(docArg: IOperationDocument): Promise<void> {
    if (docArg.kind !== 'service-backup') {
      return;
    }
    await this.cloudly.store.mutate(serviceBackupKind, docArg.backupId, (currentArg) => decideBackupInterrupted(currentArg, docArg.id));
  }

  /** The JWKS-published key set that verifies restore grants, as Corestore would use it. */
  public async verifyRestoreGrant(grantArg: string, bindingArg: IRestoreGrantBinding): Promise<IRestoreGrantClaims> {
    return verifyRestoreGrant(grantArg, createLocalJWKSet(this.cloudly.auth.jwks), identityIssuer, bindingArg);
  }

  /** Signs one restore grant with Cloudly's identity key (published in the JWKS). */
  public async signRestoreGrant(bindingArg: IRestoreGrantBinding): Promise<string> {
    return this.cloudly.auth.signJwt(restoreGrantClaimsOf(bindingArg), {
      audience: restoreGrantAudience,
      subject: restoreGrantSubjectOf(bindingArg),
      expiresAtMs: Date.now() + restoreGrantLifetimeSeconds * 1000,
    });
  }
}
