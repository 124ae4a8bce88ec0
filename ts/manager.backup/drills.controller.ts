import type { ICommittedChange } from '../core/changefeed.js';
import type { IController, IReconcileContext, IReconcileResult } from '../core/controller.js';
import type { DocumentStore } from '../core/store.js';
import type { TCloudlyLogger } from '../core/logger.js';
import type { IIsolatedRestoreNodeState } from '../interfaces/data/isolatedrestore.js';
import { operationKind } from '../manager.operation/documents.js';
import { serviceBackupKind, type IServiceBackupDocument } from './documents.js';
import {
  backupDrillKind,
  drillIdOfOperation,
  drillOperationIdOf,
  drillRestoreIdOf,
  isCleanupRetryable,
  isDrillOwed,
  receiptOfOperation,
  scheduledDrillIdOf,
  type IBackupDrillDocument,
  type IBackupDrillOrder,
} from './drills.js';
import { backupScheduleKind } from './schedules.js';

export interface IBackupDrillsPorts {
  store: DocumentStore;
  logger: TCloudlyLogger;
  /** Starts a drill as an operation (./drills.ts); refuses a backup or node it cannot drill. */
  startDrill(orderArg: IBackupDrillOrder): Promise<unknown>;
  /** Removes a drill's scratch restore from its node; null when no restore was recorded. */
  cleanupRestore(restoreIdArg: string): Promise<IIsolatedRestoreNodeState | null>;
}

const drillKeyPrefix = 'drill:';
const scheduleKeyPrefix = 'schedule:';
const backupKeyPrefix = 'backup:';
/** A cleanup the relay could not be asked for is tried again after this long, doubling up to the cap. */
const cleanupRetryBaseMs = 1_000;
const cleanupRetryCapMs = 60_000;

const receiptFields = ['backupId', 'clusterId', 'serviceId', 'nodeId', 'outcome', 'reason', 'detail', 'startedAt', 'finishedAt', 'durationMs', 'bytes', 'restoreId', 'operationId', 'scheduleId', 'cleanedUp', 'cleanupReason'] as const;

/**
 * The backup drills controller: the one writer of drill receipts (`CloudlyBackupDrill`).
 * - A schedule with a `drill`: once its newest backup of a service completes (and is verified `ok`
 *   when the schedule verifies), it starts that backup's drill, every `everyNth` backup. The drill's
 *   id is derived from the backup, so it starts once whoever looks, however often.
 * - Every drill operation's change (its id names the drill, so no read for other operations): the
 *   receipt follows the operation (running, ok, failed with its reason, interrupted when its
 *   instance died). A drill that ended without its scratch restore cleaned up (it failed, its relay
 *   dropped, its instance was killed) has the cleanup done here, retried while the relay cannot be
 *   asked, so nothing stays on the drill node and no receipt stays `running` past its operation.
 */
export class BackupDrillsController implements IController {
  public readonly name = 'backup-drills';
  public readonly writes = [backupDrillKind.collectionName] as const;
  public readonly inputs: Readonly<Record<string, (changeArg: ICommittedChange) => readonly string[]>> = {
    CloudlyOperation: (changeArg) => {
      const drillId = drillIdOfOperation(changeArg.id);
      if (drillId) {
        this.drillsExist = true;
      }
      return drillId ? [`${drillKeyPrefix}${drillId}`] : [];
    },
    CloudlyBackupSchedule: (changeArg) => [`${scheduleKeyPrefix}${changeArg.id}`],
    // No read for a backup while this instance knows of no schedule with a drill; a removed backup
    // (retention) takes its finished receipts along, read only once this instance knows of any drill.
    CloudlyServiceBackup: (changeArg) => (changeArg.owners.generation === undefined
      ? (this.drillsExist ? [`${backupKeyPrefix}${changeArg.id}`] : [])
      : (this.drillSchedules.size === 0 ? [] : [`${backupKeyPrefix}${changeArg.id}`])),
    // A relay taking its cluster's socket: the cleanups that waited for it are tried at once, not
    // at their backoff's next deadline (which grows while the relay is away).
    CloudlyClusterRelayLease: (changeArg) => this.cleanupsWaitingOn(changeArg.owners.clusterId),
  };

  /** Drills whose cleanup failed retryably, by cluster: queued again when the cluster's relay returns. */
  private readonly waitingCleanups = new Map<string, Set<string>>();

  private cleanupsWaitingOn(clusterIdArg: string | undefined): readonly string[] {
    const waiting = clusterIdArg === undefined ? undefined : this.waitingCleanups.get(clusterIdArg);
    if (!waiting) {
      return [];
    }
    this.waitingCleanups.delete(clusterIdArg!);
    return [...waiting].map((drillId) => `${drillKeyPrefix}${drillId}`);
  }

  /** The schedules with a drill this instance knows of: filled by `all()` and by each schedule's change. */
  private readonly drillSchedules = new Set<string>();
  private readonly cleanupAttempts = new Map<string, number>();
  /** Whether any drill receipt may exist: set by `all()` and by every drill operation's change. */
  private drillsExist = false;

  constructor(private readonly ports: IBackupDrillsPorts) {}

  public async all(): Promise<readonly string[]> {
    const { store } = this.ports;
    const schedules = await store.findFields(backupScheduleKind, { drill: { $exists: true } }, ['id']);
    const owed = await store.findFields(backupDrillKind, { cleanedUp: false }, ['id', 'cleanupReason']);
    const running = await store.findFields(operationKind, { kind: 'backup-drill', state: 'running' }, ['id']);
    this.drillsExist ||= running.length > 0 || (await store.findFields(backupDrillKind, {}, ['id'])).length > 0;
    return [
      ...schedules.map((docArg) => `${scheduleKeyPrefix}${docArg.id}`),
      ...owed.filter((docArg) => docArg.cleanupReason === undefined).map((docArg) => `${drillKeyPrefix}${docArg.id}`),
      ...running.flatMap((docArg) => {
        const drillId = drillIdOfOperation(docArg.id);
        return drillId ? [`${drillKeyPrefix}${drillId}`] : [];
      }),
    ];
  }

  public async reconcile(keyArg: string, contextArg: IReconcileContext): Promise<IReconcileResult> {
    if (keyArg.startsWith(scheduleKeyPrefix)) {
      return this.reconcileSchedule(keyArg.slice(scheduleKeyPrefix.length), contextArg);
    }
    if (keyArg.startsWith(backupKeyPrefix)) {
      return this.reconcileBackup(keyArg.slice(backupKeyPrefix.length));
    }
    return this.reconcileDrill(keyArg.slice(drillKeyPrefix.length));
  }

  /** Remembers whether the schedule drills, and looks at its newest backup of each service (a drill missed while no instance reconciled). */
  private async reconcileSchedule(scheduleIdArg: string, contextArg: IReconcileContext): Promise<IReconcileResult> {
    const schedule = await this.ports.store.get(backupScheduleKind, scheduleIdArg);
    if (!schedule?.drill) {
      this.drillSchedules.delete(scheduleIdArg);
      return { outcome: 'kept' };
    }
    this.drillSchedules.add(scheduleIdArg);
    for (const backup of newestPerService(await this.ports.store.find(serviceBackupKind, { scheduleId: scheduleIdArg, state: 'completed' }))) {
      contextArg.enqueue(`${backupKeyPrefix}${backup.id}`);
    }
    return { outcome: 'expanded' };
  }

  private async reconcileBackup(backupIdArg: string): Promise<IReconcileResult> {
    const { store } = this.ports;
    const backup = await store.get(serviceBackupKind, backupIdArg);
    if (!backup) {
      return this.removeReceiptsOf(backupIdArg);
    }
    if (!backup.scheduleId || backup.state !== 'completed' || !this.drillSchedules.has(backup.scheduleId)) {
      return { outcome: 'kept' };
    }
    const schedule = await store.get(backupScheduleKind, backup.scheduleId);
    if (!schedule?.drill) {
      this.drillSchedules.delete(backup.scheduleId);
      return { outcome: 'kept' };
    }
    // A verifying schedule drills only what verified: a damaged closure is not restored.
    if (schedule.verify && backup.verification?.outcome !== 'ok') {
      return { outcome: 'kept' };
    }
    const drillId = scheduledDrillIdOf(backup.id);
    if (await store.get(backupDrillKind, drillId)) {
      return { outcome: 'kept' };
    }
    // Only the service's newest backup of the schedule is drilled: one found late (after downtime) is not.
    const newestFirst = (await store.find(serviceBackupKind, { scheduleId: schedule.id, serviceId: backup.serviceId, state: 'completed' }))
      .sort((x, y) => y.createdAt - x.createdAt);
    if (newestFirst[0]?.id !== backup.id) {
      return { outcome: 'kept' };
    }
    const everyNth = schedule.drill.everyNth ?? 1;
    const drilled = everyNth > 1
      ? new Set((await store.findFields(backupDrillKind, { scheduleId: schedule.id, serviceId: backup.serviceId }, ['backupId'])).map((docArg) => docArg.backupId))
      : new Set<string>();
    if (!isDrillOwed(newestFirst.map((backupArg) => backupArg.id), drilled, backup.id, everyNth)) {
      return { outcome: 'kept' };
    }
    try {
      await this.ports.startDrill({ drillId, backupId: backup.id, nodeId: schedule.drill.nodeId, scheduleId: schedule.id, requestedBy: `schedule:${schedule.id}` });
      return { outcome: 'expanded' };
    } catch (error) {
      // Not started (the drill node is gone, the closure is not stored): the receipt says why, and nothing is on a node.
      const reasons = (error as { errorData?: { reasons?: unknown } }).errorData?.reasons;
      const now = Date.now();
      const failed = await store.mutate(backupDrillKind, drillId, (currentArg) => (currentArg ? { kind: 'keep' } : {
        kind: 'create',
        doc: {
          id: drillId, backupId: backup.id, clusterId: backup.clusterId, serviceId: backup.serviceId, nodeId: schedule.drill!.nodeId,
          outcome: 'failed' as const, reason: Array.isArray(reasons) && typeof reasons[0] === 'string' ? reasons[0] : 'drill-not-started',
          startedAt: now, finishedAt: now, durationMs: 0, bytes: 0, restoreId: drillRestoreIdOf(drillId), operationId: drillOperationIdOf(drillId),
          scheduleId: schedule.id, cleanedUp: true,
        },
      }));
      this.ports.logger.warn({ drillId, backupId: backup.id, err: error }, 'scheduled backup drill not started');
      return { outcome: failed.outcome === 'created' ? 'created' : 'kept' };
    }
  }

  /**
   * The receipts of a backup that is gone (retention removed it): each one finished and cleaned up
   * goes with it. One still running or owing its cleanup stays until that is done (retention keeps
   * such a backup, so only a backup removed otherwise gets here).
   */
  private async removeReceiptsOf(backupIdArg: string): Promise<IReconcileResult> {
    let removed = 0;
    for (const drill of await this.ports.store.find(backupDrillKind, { backupId: backupIdArg })) {
      const finished = drill.outcome !== 'running' && (drill.cleanedUp || drill.cleanupReason !== undefined);
      const result = await this.ports.store.mutate(backupDrillKind, drill.id, (currentArg) => (currentArg && finished ? { kind: 'remove' } : { kind: 'keep' }));
      removed += result.outcome === 'removed' ? 1 : 0;
    }
    return { outcome: removed > 0 ? 'removed' : 'kept' };
  }

  /** The receipt as the drill's operation stands, and the cleanup a drill that ended still owes. */
  private async reconcileDrill(drillIdArg: string): Promise<IReconcileResult> {
    const { store } = this.ports;
    const operation = await store.get(operationKind, drillOperationIdOf(drillIdArg));
    const current = await store.get(backupDrillKind, drillIdArg);
    if (!operation) {
      return { outcome: 'kept' };
    }
    const receipt = receiptOfOperation(operation);
    let cleanedUp = current?.cleanedUp === true || operation.result?.state?.phase === 'cleaned-up';
    let cleanupReason = current?.cleanupReason;
    let retryAfterMs: number | undefined;
    if (receipt.outcome !== 'running' && !cleanedUp && cleanupReason === undefined) {
      try {
        const state = await this.ports.cleanupRestore(receipt.restoreId);
        cleanedUp = state === null || state.phase === 'cleaned-up';
        if (!cleanedUp) {
          cleanupReason = `cleanup-answered-${state!.phase}`;
        }
        this.cleanupAttempts.delete(drillIdArg);
      } catch (error) {
        if (isCleanupRetryable(error)) {
          const attempts = (this.cleanupAttempts.get(drillIdArg) ?? 0) + 1;
          this.cleanupAttempts.set(drillIdArg, attempts);
          const waiting = this.waitingCleanups.get(receipt.clusterId) ?? new Set<string>();
          waiting.add(drillIdArg);
          this.waitingCleanups.set(receipt.clusterId, waiting);
          retryAfterMs = Math.min(cleanupRetryCapMs, cleanupRetryBaseMs * 2 ** Math.min(attempts - 1, 16));
        } else {
          const reasons = (error as { errorData?: { reasons?: unknown } }).errorData?.reasons;
          cleanupReason = Array.isArray(reasons) && typeof reasons[0] === 'string' ? reasons[0] : 'cleanup-refused';
        }
      }
    }
    const wanted: Omit<IBackupDrillDocument, 'generation'> = {
      id: drillIdArg,
      ...receipt,
      cleanedUp,
      ...(cleanupReason !== undefined ? { cleanupReason } : {}),
    };
    const written = await store.mutate(backupDrillKind, drillIdArg, (existingArg) => {
      if (!existingArg) {
        return { kind: 'create', doc: wanted };
      }
      const set: Record<string, unknown> = {};
      const unset: Array<(typeof receiptFields)[number]> = [];
      const existing = existingArg as unknown as Record<string, unknown>;
      for (const field of receiptFields) {
        const value = (wanted as unknown as Record<string, unknown>)[field];
        if (value === undefined) {
          if (existing[field] !== undefined) unset.push(field);
        } else if (JSON.stringify(value) !== JSON.stringify(existing[field])) {
          set[field] = value;
        }
      }
      return Object.keys(set).length === 0 && unset.length === 0
        ? { kind: 'keep' }
        : { kind: 'write', change: { set: set as Partial<IBackupDrillDocument>, unset } };
    });
    if (written.outcome !== 'kept' && receipt.outcome !== 'running') {
      this.ports.logger.info({ drillId: drillIdArg, outcome: receipt.outcome, reason: receipt.reason, cleanedUp }, 'backup drill recorded');
    }
    const outcome = written.outcome === 'created' ? 'created' : written.outcome === 'written' ? 'written' : 'kept';
    return retryAfterMs === undefined ? { outcome } : { outcome, requeueAfterMs: retryAfterMs };
  }
}

const newestPerService = (backupsArg: IServiceBackupDocument[]): IServiceBackupDocument[] => {
  const newest = new Map<string, IServiceBackupDocument>();
  for (const backup of backupsArg) {
    const seen = newest.get(backup.serviceId);
    if (!seen || seen.createdAt < backup.createdAt) {
      newest.set(backup.serviceId, backup);
    }
  }
  return [...newest.values()];
};
