import type { ICommittedChange } from '../core/changefeed.js';
import type { IController, IReconcileContext, IReconcileResult } from '../core/controller.js';
import type { IBlobStore } from '../core/blobstore.js';
import type { DocumentStore } from '../core/store.js';
import type { TCloudlyLogger } from '../core/logger.js';
import { serviceBackupKind } from './documents.js';
import { computeRetentionPlan, serviceBackupDeletionKind, type IServiceBackupDeletionDocument } from './retentionplan.js';
import { backupScheduleKind } from './schedules.js';
import { pruneNodeArchiveOfDeletions, type INodePrunePorts } from './nodeprune.js';

export interface IBackupRetentionPorts extends Omit<INodePrunePorts, 'store'> {
  store: DocumentStore;
  logger: TCloudlyLogger;
  blobStore: Pick<IBlobStore, 'delete'>;
}

const deletionKeyPrefix = 'deletion:';
const serviceKeyPrefix = 'service:';
const clusterKeyPrefix = 'cluster:';
/** How soon a deletion whose node prune waits is tried again when nothing tells that its relay is back. */
const waitingRetryMs = 60_000;

/**
 * The backup retention controller: applies each schedule's retention (./retention.ts) to the
 * backups the schedule made, after each occurrence (the schedule's state changed) and when the
 * retention is changed. A backup it removes is first recorded as being deleted
 * (`CloudlyServiceBackupDeletion`); then, node by node, the stored closures of that node's
 * deletions leave the blob store and their backup records go, then the relay prunes the node's
 * archive (./nodeprune.ts), then the records go. A deletion cut short is found by the next full
 * pass (at start-up, for a new leader, at every resync) and finished; one whose node prune cannot
 * be done now (a dark cluster, no relay answer) stays recorded with why, and is tried again when
 * the cluster's relay is back. The only writer of `CloudlyServiceBackupDeletion`, and the only one
 * removing backups.
 */
export class BackupRetentionController implements IController {
  public readonly name = 'backup-retention';
  public readonly writes = [serviceBackupDeletionKind.collectionName] as const;
  /** Clusters with a deletion whose node prune waits: only their relay and liveness changes are looked at. */
  private readonly waitingClusters = new Set<string>();
  private readonly ofWaitingCluster = (changeArg: ICommittedChange): readonly string[] =>
    (changeArg.owners.clusterId && this.waitingClusters.has(changeArg.owners.clusterId) ? [`${clusterKeyPrefix}${changeArg.owners.clusterId}`] : []);
  public readonly inputs: Readonly<Record<string, (changeArg: ICommittedChange) => readonly string[]>> = {
    // Each occurrence fired (and each retention changed) has the schedule's backups looked at again.
    CloudlyBackupScheduleState: (changeArg) => [changeArg.id],
    CloudlyBackupSchedule: (changeArg) => [changeArg.id],
    // A backup that completed (or was verified) after its occurrence's pass: the schedules with backups of its service look again.
    CloudlyServiceBackup: (changeArg) => (changeArg.owners.serviceId ? [`${serviceKeyPrefix}${changeArg.owners.serviceId}`] : []),
    // A relay taking its cluster's socket, or the cluster becoming current: the node prunes that waited are tried again.
    CloudlyClusterRelayLease: this.ofWaitingCluster,
    CloudlyClusterLiveness: this.ofWaitingCluster,
    // A drill that let go of its backup (ended and cleaned up): what it kept may go now.
    CloudlyBackupDrill: (changeArg) => (changeArg.owners.serviceId ? [`${serviceKeyPrefix}${changeArg.owners.serviceId}`] : []),
  };

  constructor(private readonly ports: IBackupRetentionPorts) {}

  public async all(): Promise<readonly string[]> {
    const deletions = await this.ports.store.findFields(serviceBackupDeletionKind, {}, ['id', 'clusterId']);
    for (const deletion of deletions) {
      this.waitingClusters.add(deletion.clusterId);
    }
    const schedules = await this.ports.store.find(backupScheduleKind, {});
    return [
      ...deletions.map((docArg) => `${deletionKeyPrefix}${docArg.id}`),
      ...schedules.filter((scheduleArg) => scheduleArg.retention !== undefined).map((scheduleArg) => scheduleArg.id),
    ];
  }

  public async reconcile(keyArg: string, contextArg: IReconcileContext): Promise<IReconcileResult> {
    if (keyArg.startsWith(serviceKeyPrefix)) {
      const backups = await this.ports.store.findFields(serviceBackupKind, { serviceId: keyArg.slice(serviceKeyPrefix.length), scheduleId: { $exists: true } }, ['scheduleId']);
      for (const scheduleId of new Set(backups.map((backupArg) => backupArg.scheduleId!))) {
        contextArg.enqueue(scheduleId);
      }
      return { outcome: 'expanded' };
    }
    if (keyArg.startsWith(clusterKeyPrefix)) {
      const clusterId = keyArg.slice(clusterKeyPrefix.length);
      const deletions = await this.ports.store.findFields(serviceBackupDeletionKind, { clusterId }, ['id']);
      // The cluster stays watched while it has deletions: a relay or liveness change between this
      // run and the deletions' own runs (which may wait again) must still queue it.
      if (deletions.length === 0) {
        this.waitingClusters.delete(clusterId);
      }
      for (const deletion of deletions) {
        contextArg.enqueue(`${deletionKeyPrefix}${deletion.id}`);
      }
      return { outcome: 'expanded' };
    }
    if (keyArg.startsWith(deletionKeyPrefix)) {
      const deletion = await this.ports.store.get(serviceBackupDeletionKind, keyArg.slice(deletionKeyPrefix.length));
      if (!deletion) {
        return { outcome: 'kept' };
      }
      return this.finishDeletions([deletion]);
    }
    const schedule = await this.ports.store.get(backupScheduleKind, keyArg);
    if (!schedule?.retention) {
      return { outcome: 'kept' };
    }
    const plan = await computeRetentionPlan(this.ports.store, keyArg);
    // Every deletion is recorded before any part of any of them goes.
    const recorded: IServiceBackupDeletionDocument[] = [];
    for (const service of plan.services) {
      for (const decision of service.decisions.filter((decisionArg) => decisionArg.action === 'remove')) {
        const backup = plan.backups.get(decision.backupId)!;
        const written = await this.ports.store.mutate(serviceBackupDeletionKind, backup.id, (currentArg) => (currentArg
          ? { kind: 'keep' }
          : {
            kind: 'create',
            doc: {
              id: backup.id,
              backupId: backup.id,
              clusterId: backup.clusterId,
              serviceId: backup.serviceId,
              scheduleId: keyArg,
              blobKeys: backup.closure ? [backup.closure.blobKey] : [],
              startedAt: Date.now(),
              nodeId: backup.nodeId,
            },
          }));
        recorded.push(written.doc!);
        this.ports.logger.info({ scheduleId: keyArg, backupId: backup.id, reasons: decision.reasons }, 'backup removed by retention');
      }
    }
    if (recorded.length === 0) {
      return { outcome: 'kept' };
    }
    const finished = await this.finishDeletions(recorded);
    return { ...finished, outcome: 'removed' };
  }

  /**
   * Every part of recorded deletions, node by node: the closures and backup records of that node's
   * deletions, then the node's prune, then their records. Each step is idempotent, so it may be
   * run again after a crash at any point.
   */
  private async finishDeletions(deletionsArg: IServiceBackupDeletionDocument[]): Promise<IReconcileResult> {
    const byNode = new Map<string, IServiceBackupDeletionDocument[]>();
    for (const deletion of deletionsArg) {
      const nodeKey = `${deletion.clusterId}/${deletion.nodeId ?? ''}`;
      byNode.set(nodeKey, [...(byNode.get(nodeKey) ?? []), deletion]);
    }
    let waiting = false;
    for (const [nodeKey, deletions] of [...byNode].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) {
      for (const deletion of deletions) {
        await this.removeClosuresAndRecord(deletion);
      }
      const { clusterId, nodeId } = deletions[0]!;
      if (nodeId !== undefined) {
        const pruned = await pruneNodeArchiveOfDeletions({ ...this.ports }, clusterId, nodeId);
        if (pruned.outcome === 'waiting') {
          waiting = true;
          this.waitingClusters.add(clusterId);
          for (const deletion of deletions) {
            await this.ports.store.mutate(serviceBackupDeletionKind, deletion.id, (currentArg) => (currentArg
              ? {
                kind: 'write',
                change: {
                  set: {
                    nodePruneWaiting: {
                      reason: pruned.reason,
                      ...(pruned.detail !== undefined ? { detail: pruned.detail } : {}),
                      since: currentArg.nodePruneWaiting?.since ?? Date.now(),
                      attempts: (currentArg.nodePruneWaiting?.attempts ?? 0) + 1,
                    },
                  },
                },
              }
              : { kind: 'keep' }));
          }
          this.ports.logger.warn({ clusterId, nodeId, reason: pruned.reason, detail: pruned.detail, backups: deletions.map((docArg) => docArg.backupId) }, 'node archive prune waits; the deletion stays recorded');
          continue;
        }
        this.ports.logger.info({ clusterId, nodeId, nodeKey, found: pruned.found, retention: pruned.retention, removedSnapshots: pruned.result?.removedSnapshotIds.length ?? 0 }, 'node archive pruned after backup deletion');
      }
      for (const deletion of deletions) {
        await this.ports.store.mutate(serviceBackupDeletionKind, deletion.id, (currentArg) => (currentArg ? { kind: 'remove' } : { kind: 'keep' }));
      }
    }
    return waiting ? { outcome: 'removed', requeueAfterMs: waitingRetryMs } : { outcome: 'removed' };
  }

  /** The deletion's stored closures, then its backup record; marked on the deletion, so a repeat skips them. */
  private async removeClosuresAndRecord(deletionArg: IServiceBackupDeletionDocument): Promise<void> {
    if (deletionArg.closuresRemovedAt !== undefined) {
      return;
    }
    // Always asked, also when the store no longer lists the blob: a delete cut short may have taken its record and left its bytes.
    for (const blobKey of deletionArg.blobKeys) {
      await this.ports.blobStore.delete(blobKey);
    }
    await this.ports.store.mutate(serviceBackupKind, deletionArg.backupId, (currentArg) => (currentArg ? { kind: 'remove' } : { kind: 'keep' }));
    const closuresRemovedAt = Date.now();
    await this.ports.store.mutate(serviceBackupDeletionKind, deletionArg.id, (currentArg) => (currentArg
      ? { kind: 'write', change: { set: { closuresRemovedAt } } }
      : { kind: 'keep' }));
  }
}
