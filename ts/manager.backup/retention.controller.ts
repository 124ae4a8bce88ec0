import type { ICommittedChange } from '../core/changefeed.js';
import type { IController, IReconcileContext, IReconcileResult } from '../core/controller.js';
import type { IBlobStore } from '../core/blobstore.js';
import type { DocumentStore } from '../core/store.js';
import type { TCloudlyLogger } from '../core/logger.js';
import { serviceBackupKind } from './documents.js';
import { computeRetentionPlan, serviceBackupDeletionKind, type IServiceBackupDeletionDocument } from './retentionplan.js';
import { backupScheduleKind } from './schedules.js';

export interface IBackupRetentionPorts {
  store: DocumentStore;
  logger: TCloudlyLogger;
  blobStore: Pick<IBlobStore, 'delete'>;
}

const deletionKeyPrefix = 'deletion:';
const serviceKeyPrefix = 'service:';

/**
 * The backup retention controller: applies each schedule's retention (./retention.ts) to the
 * backups the schedule made, after each occurrence (the schedule's state changed) and when the
 * retention is changed. A backup it removes is first recorded as being deleted
 * (`CloudlyServiceBackupDeletion`), then its stored closures leave the blob store, then the backup,
 * then the record: a deletion cut short is found by the next full pass (at start-up, for a new
 * leader, at every resync) and finished, so nothing half-deleted stays. The only writer of
 * `CloudlyServiceBackupDeletion`, and the only one removing backups.
 */
export class BackupRetentionController implements IController {
  public readonly name = 'backup-retention';
  public readonly writes = [serviceBackupDeletionKind.collectionName] as const;
  public readonly inputs: Readonly<Record<string, (changeArg: ICommittedChange) => readonly string[]>> = {
    // Each occurrence fired (and each retention changed) has the schedule's backups looked at again.
    CloudlyBackupScheduleState: (changeArg) => [changeArg.id],
    CloudlyBackupSchedule: (changeArg) => [changeArg.id],
    // A backup that completed (or was verified) after its occurrence's pass: the schedules with backups of its service look again.
    CloudlyServiceBackup: (changeArg) => (changeArg.owners.serviceId ? [`${serviceKeyPrefix}${changeArg.owners.serviceId}`] : []),
    // A drill that let go of its backup (ended and cleaned up): what it kept may go now.
    CloudlyBackupDrill: (changeArg) => (changeArg.owners.serviceId ? [`${serviceKeyPrefix}${changeArg.owners.serviceId}`] : []),
  };

  constructor(private readonly ports: IBackupRetentionPorts) {}

  public async all(): Promise<readonly string[]> {
    const deletions = await this.ports.store.findFields(serviceBackupDeletionKind, {}, ['id']);
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
    if (keyArg.startsWith(deletionKeyPrefix)) {
      const deletion = await this.ports.store.get(serviceBackupDeletionKind, keyArg.slice(deletionKeyPrefix.length));
      if (!deletion) {
        return { outcome: 'kept' };
      }
      await this.finishDeletion(deletion);
      return { outcome: 'removed' };
    }
    const schedule = await this.ports.store.get(backupScheduleKind, keyArg);
    if (!schedule?.retention) {
      return { outcome: 'kept' };
    }
    const plan = await computeRetentionPlan(this.ports.store, keyArg);
    let removed = 0;
    for (const service of plan.services) {
      for (const decision of service.decisions.filter((decisionArg) => decisionArg.action === 'remove')) {
        const backup = plan.backups.get(decision.backupId)!;
        const recorded = await this.ports.store.mutate(serviceBackupDeletionKind, backup.id, (currentArg) => (currentArg
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
            },
          }));
        await this.finishDeletion(recorded.doc!);
        this.ports.logger.info({ scheduleId: keyArg, backupId: backup.id, reasons: decision.reasons }, 'backup removed by retention');
        removed += 1;
      }
    }
    return { outcome: removed > 0 ? 'removed' : 'kept' };
  }

  /** Every part of a recorded deletion, in order; each step is idempotent, so it may be run again. */
  private async finishDeletion(deletionArg: IServiceBackupDeletionDocument): Promise<void> {
    // Always asked, also when the store no longer lists the blob: a delete cut short may have taken its record and left its bytes.
    for (const blobKey of deletionArg.blobKeys) {
      await this.ports.blobStore.delete(blobKey);
    }
    await this.ports.store.mutate(serviceBackupKind, deletionArg.backupId, (currentArg) => (currentArg ? { kind: 'remove' } : { kind: 'keep' }));
    await this.ports.store.mutate(serviceBackupDeletionKind, deletionArg.id, (currentArg) => (currentArg ? { kind: 'remove' } : { kind: 'keep' }));
  }
}
