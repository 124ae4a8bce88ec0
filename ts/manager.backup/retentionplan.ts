import { refuseNamed } from '../core/errors.js';
import { defineDocumentKind, type DocumentStore, type IStoredDocument } from '../core/store.js';
import type { IBackupDeletionState, IBackupRetentionDecision } from '../interfaces/requests/backup.js';
import { operationKind } from '../manager.operation/documents.js';
import { backupDrillKind, isolatedRestoreKind, serviceBackupKind, type IServiceBackupDocument } from './documents.js';
import { planRetention } from './retention.js';
import { backupScheduleKind, backupScheduleReasons } from './schedules.js';

/**
 * A backup being deleted by retention ("deleting"): written before the first part goes (its stored
 * closures, its record, the node archive's prune) and removed after the last, so a deletion cut
 * short (kill -9) is found and finished (rolled forward) by the next pass of the
 * `backup-retention` controller, at start-up at the latest. Written only by that controller.
 */
export interface IServiceBackupDeletionDocument extends IStoredDocument {
  /** Equal to the backup's id. */
  backupId: string;
  clusterId: string;
  serviceId: string;
  scheduleId: string;
  /** The stored closures to remove from the blob store. */
  blobKeys: string[];
  startedAt: number;
  /** The node whose archive holds the backup's snapshots; absent on deletions recorded before nodes were pruned. */
  nodeId?: string;
  /** Set once the closures and the backup record are gone (only the node's prune may be left). */
  closuresRemovedAt?: number;
  /**
   * The node's prune could not be done yet (the cluster is dark, the relay did not answer): why,
   * since when, and how often it was tried. The deletion stays recorded and is tried again when the
   * cluster's relay is back; it is never dropped.
   */
  nodePruneWaiting?: { reason: string; detail?: string; since: number; attempts: number };
}

export const serviceBackupDeletionKind = defineDocumentKind<IServiceBackupDeletionDocument>('CloudlyServiceBackupDeletion');

/** A deletion as `getBackupRetentionPlan` lists it: the blob keys stay inside Cloudly. */
export const toDeletionState = (docArg: IServiceBackupDeletionDocument): IBackupDeletionState => ({
  backupId: docArg.backupId,
  serviceId: docArg.serviceId,
  ...(docArg.nodeId !== undefined ? { nodeId: docArg.nodeId } : {}),
  startedAt: docArg.startedAt,
  closuresRemoved: docArg.closuresRemovedAt !== undefined,
  ...(docArg.nodePruneWaiting ? { nodePruneWaiting: docArg.nodePruneWaiting } : {}),
});

export const retentionReasons = {
  noRetention: 'backup-schedule-has-no-retention',
} as const;

/** Phases of an isolated restore that no longer use its backup. */
const finishedRestorePhases = new Set(['cleaned-up', 'failed']);

/** What a schedule's retention decides now, per service, and the backups it reads (for the deletions). */
export const computeRetentionPlan = async (storeArg: DocumentStore, scheduleIdArg: string): Promise<{
  services: Array<{ serviceId: string; decisions: IBackupRetentionDecision[] }>;
  backups: Map<string, IServiceBackupDocument>;
}> => {
  const schedule = await storeArg.get(backupScheduleKind, scheduleIdArg);
  if (!schedule) {
    throw refuseNamed('not-found', backupScheduleReasons.scheduleNotFound, `schedule ${scheduleIdArg} does not exist`, 'request.scheduleId');
  }
  if (!schedule.retention) {
    throw refuseNamed('conflict', retentionReasons.noRetention, 'the schedule keeps every backup: it sets no retention', 'request.scheduleId');
  }
  const scheduled = await storeArg.find(serviceBackupKind, { scheduleId: scheduleIdArg });
  const backups = new Map(scheduled.map((backupArg) => [backupArg.id, backupArg]));
  const deleting = new Set((await storeArg.findIn(serviceBackupDeletionKind, 'id', scheduled.map((backupArg) => backupArg.id))).map((docArg) => docArg.id));
  const services = [...new Set(scheduled.map((backupArg) => backupArg.serviceId))].sort();
  const plans: Array<{ serviceId: string; decisions: IBackupRetentionDecision[] }> = [];
  for (const serviceId of services) {
    const protectedIds = new Map<string, string>();
    // The newest backup of the service (scheduled or not) whose verification is ok.
    const newestVerified = (await storeArg.find(serviceBackupKind, { serviceId }))
      .filter((backupArg) => backupArg.verification?.outcome === 'ok' && !deleting.has(backupArg.id))
      .sort((x, y) => y.createdAt - x.createdAt)[0];
    if (newestVerified) {
      protectedIds.set(newestVerified.id, 'newest-verified');
    }
    const candidates = scheduled.filter((backupArg) => backupArg.serviceId === serviceId && !deleting.has(backupArg.id));
    const ids = candidates.map((backupArg) => backupArg.id);
    for (const operation of await storeArg.findIn(operationKind, 'backupId', ids, { state: 'running' })) {
      protectedIds.set(operation.backupId, 'in-use');
    }
    for (const restore of await storeArg.findIn(isolatedRestoreKind, 'backupId', ids)) {
      if (!finishedRestorePhases.has(restore.lastState?.phase ?? 'prepared')) {
        protectedIds.set(restore.backupId, 'in-use');
      }
    }
    // A drill running, or one whose scratch restore is not cleaned up yet, still uses its backup.
    for (const drill of await storeArg.findIn(backupDrillKind, 'backupId', ids)) {
      if (drill.outcome === 'running' || (!drill.cleanedUp && drill.cleanupReason === undefined)) {
        protectedIds.set(drill.backupId, 'in-use');
      }
    }
    plans.push({
      serviceId,
      decisions: planRetention(candidates.map((backupArg) => ({ backupId: backupArg.id, createdAt: backupArg.createdAt, state: backupArg.state })), schedule.retention, protectedIds),
    });
  }
  return { services: plans, backups };
};
