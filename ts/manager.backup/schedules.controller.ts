import { createHash } from 'node:crypto';
import type { ICommittedChange } from '../core/changefeed.js';
import type { IController, IReconcileContext, IReconcileResult } from '../core/controller.js';
import type { DocumentStore, TDecision } from '../core/store.js';
import type { TCloudlyLogger } from '../core/logger.js';
import type { IBackupScheduleSkip, TBackupScheduleTarget } from '../interfaces/data/backupschedule.js';
import type { IService } from '../interfaces/data/service.js';
import { jitterOffsetMs, latestOccurrenceBetween, nextOccurrence, parseCron } from './cron.js';
import {
  backupScheduleKind,
  backupScheduleStateKind,
  type IBackupScheduleDocument,
  type IBackupScheduleStateDocument,
} from './schedules.js';

/** The clock schedules are judged by: the wall clock, or (tests only) one that runs faster (CLOUDLY_SCHEDULE_CLOCK_FACTOR). */
export interface IScheduleClock {
  /** Now, epoch ms UTC, on the schedule clock. */
  now(): number;
  /** How many real milliseconds a span of the schedule clock takes. */
  realMsOf(scheduleMsArg: number): number;
}

/** The origin of a faster schedule clock: fixed, so every instance (every process) reads the same time. */
export const scheduleClockOrigin = Date.UTC(2026, 0, 1);

export const scheduleClockOf = (factorArg: number, wallClockArg: () => number = Date.now): IScheduleClock => (factorArg === 1
  ? { now: wallClockArg, realMsOf: (msArg) => msArg }
  : {
    now: () => scheduleClockOrigin + (wallClockArg() - scheduleClockOrigin) * factorArg,
    realMsOf: (msArg) => Math.ceil(msArg / factorArg),
  });

/** One backup a fired occurrence orders. */
export interface IScheduledBackupOrder {
  scheduleId: string;
  occurrenceAt: number;
  serviceId: string;
  clusterId: string;
  nodeId: string;
  backupId: string;
  /** Verify the backup once it completes (the schedule's `verify`). */
  verify?: boolean;
}

export interface IBackupSchedulesPorts {
  store: DocumentStore;
  logger: TCloudlyLogger;
  clock: IScheduleClock;
  /** The services a target covers now (those being deleted left out); for a service target, that one or none. */
  servicesOf(targetArg: TBackupScheduleTarget): Promise<IService[]>;
  /** The node ids of a cluster, in id order. */
  nodesOf(clusterIdArg: string): Promise<string[]>;
  /** Why a cluster is dark (the liveness verdict `unknown`: `relay-disconnected`, `observed-state-stale`), or null while it is current. */
  darkReasonOf(clusterIdArg: string): Promise<string | null>;
  /**
   * Orders one backup as an ordinary backup operation carrying the schedule id; a backup already
   * stored under its id is left as it is ('exists'), so an occurrence is never backed up twice.
   */
  orderBackup(orderArg: IScheduledBackupOrder): Promise<'ordered' | 'exists'>;
}

/** The longest the controller waits before looking at a schedule again, whatever the next occurrence. */
const maximumRequeueMs = 60_000;

export const backupScheduleSkipReasons = {
  clusterUnknown: 'cluster-unknown',
  nodeAmbiguous: 'service-node-ambiguous',
  noServices: 'schedule-has-no-services',
  orderFailed: 'backup-order-failed',
} as const;

export const backupScheduleDisabledReasons = {
  serviceNotFound: 'service-not-found',
  cronInvalid: 'cron-invalid',
  noNextOccurrence: 'cron-has-no-next-occurrence',
} as const;

/** A scheduled backup's id: derived from the schedule, the occurrence and the service, so it names one backup everywhere. */
export const scheduledBackupId = (scheduleIdArg: string, occurrenceAtArg: number, serviceIdArg: string): string =>
  `backup-s-${createHash('sha256').update(`${scheduleIdArg}\u0000${occurrenceAtArg}\u0000${serviceIdArg}`).digest('hex').slice(0, 32)}`;

const serviceKeyPrefix = 'service:';

/**
 * The backup schedules controller: fires each due occurrence of each schedule exactly once,
 * across any number of instances. Only the reconciling instance runs it, and the one write that
 * fires an occurrence is a compare-and-swap of the schedule's state that moves `nextRunAt` past
 * it (CronJob's `lastScheduleTime`): a second look, on this instance or on a new leader, finds
 * `nextRunAt` already moved and fires nothing. The same write records the backups the occurrence
 * orders; their ids are derived from the occurrence, and a start orders those not stored yet
 * (`ordering`), so a crash between the write and the orders neither loses nor repeats one.
 *
 * After downtime the latest missed occurrence runs once (older ones are counted as missed), unless
 * it is older than the schedule's `startingDeadlineSeconds`. A service whose cluster is dark is
 * skipped for that occurrence, with the reason; the next occurrence is the next slot, so nothing
 * piles up. A schedule of one service that is gone is disabled with the reason.
 * The only writer of `CloudlyBackupScheduleState`.
 */
export class BackupSchedulesController implements IController {
  public readonly name = 'backup-schedules';
  public readonly writes = [backupScheduleStateKind.collectionName] as const;
  public readonly inputs: Readonly<Record<string, (changeArg: ICommittedChange) => readonly string[]>> = {
    CloudlyBackupSchedule: (changeArg) => {
      this.known.add(changeArg.id);
      return [changeArg.id];
    },
    // A service that went away disables the schedules that name it.
    CloudlyService: (changeArg) => (this.known.size === 0 ? [] : [`${serviceKeyPrefix}${changeArg.id}`]),
  };

  /**
   * The schedules this instance knows of: filled by `all()` (start-up, every resync) and by every
   * schedule's change, from any instance; a schedule found gone leaves it. While it is empty a
   * service's change asks nothing, so a fleet without schedules pays no read per service write; a
   * schedule this instance has not seen yet is judged by its own key, and at every resync.
   */
  private readonly known = new Set<string>();

  constructor(private readonly ports: IBackupSchedulesPorts) {}

  public async all(): Promise<readonly string[]> {
    const ids = await this.ports.store.findFields(backupScheduleKind, {}, ['id']);
    const stateIds = await this.ports.store.findFields(backupScheduleStateKind, {}, ['id']);
    ids.forEach((docArg) => this.known.add(docArg.id));
    return [...new Set([...ids, ...stateIds].map((docArg) => docArg.id))];
  }

  public async reconcile(keyArg: string, contextArg: IReconcileContext): Promise<IReconcileResult> {
    if (keyArg.startsWith(serviceKeyPrefix)) {
      const schedules = await this.ports.store.findFields(backupScheduleKind, { serviceId: keyArg.slice(serviceKeyPrefix.length) }, ['id']);
      for (const schedule of schedules) {
        contextArg.enqueue(schedule.id);
      }
      return { outcome: 'expanded' };
    }
    return this.reconcileSchedule(keyArg);
  }

  private async writeState(
    idArg: string,
    decideArg: (currentArg: IBackupScheduleStateDocument | null) => TDecision<IBackupScheduleStateDocument>,
  ) {
    return this.ports.store.mutate(backupScheduleStateKind, idArg, decideArg);
  }

  private requeue(outcomeArg: IReconcileResult['outcome'], dueAtArg: number | undefined): IReconcileResult {
    if (dueAtArg === undefined) {
      return { outcome: outcomeArg };
    }
    const waitMs = Math.max(1, this.ports.clock.realMsOf(dueAtArg - this.ports.clock.now()));
    return { outcome: outcomeArg, requeueAfterMs: Math.min(maximumRequeueMs, waitMs) };
  }

  private async reconcileSchedule(scheduleIdArg: string): Promise<IReconcileResult> {
    const { store, clock } = this.ports;
    const schedule = await store.get(backupScheduleKind, scheduleIdArg);
    const state = await store.get(backupScheduleStateKind, scheduleIdArg);
    if (!schedule) {
      this.known.delete(scheduleIdArg);
      if (!state) {
        return { outcome: 'kept' };
      }
      const removed = await this.writeState(scheduleIdArg, () => ({ kind: 'remove' }));
      return { outcome: removed.outcome === 'removed' ? 'removed' : 'kept' };
    }
    // Orders an earlier firing recorded but did not finish (its instance died, or this one is retrying).
    if (state?.ordering) {
      await this.finishOrdering(state);
    }
    const now = clock.now();
    const parsed = parseCron(schedule.cron);
    const disabledReason = 'problems' in parsed
      ? backupScheduleDisabledReasons.cronInvalid
      : ('serviceId' in schedule.target && (await this.ports.servicesOf(schedule.target)).length === 0
        ? backupScheduleDisabledReasons.serviceNotFound
        : null);
    if (disabledReason !== null || 'problems' in parsed) {
      return this.disable(schedule, disabledReason ?? backupScheduleDisabledReasons.cronInvalid);
    }
    const cron = parsed.schedule;
    if (!state || state.specGeneration !== schedule.generation || state.state === 'disabled' || state.nextRunAt === undefined) {
      // A new or changed schedule starts from now: the first occurrence after this moment.
      const nextRunAt = nextOccurrence(cron, now);
      if (nextRunAt === null) {
        return this.disable(schedule, backupScheduleDisabledReasons.noNextOccurrence);
      }
      const result = await this.writeState(scheduleIdArg, (currentArg) => {
        if (currentArg && currentArg.specGeneration === schedule.generation && currentArg.state === 'active' && currentArg.nextRunAt !== undefined) {
          return { kind: 'keep' };
        }
        const fresh = { state: 'active' as const, nextRunAt, specGeneration: schedule.generation };
        return currentArg
          ? { kind: 'write', change: { set: fresh, unset: ['disabledReason'] } }
          : { kind: 'create', doc: { id: scheduleIdArg, scheduleId: scheduleIdArg, ...fresh, firedOccurrences: 0, skippedServices: 0, missedOccurrences: 0 } };
      });
      return this.requeue(result.outcome === 'created' ? 'created' : result.outcome === 'written' ? 'written' : 'kept', this.dueAt(schedule, result.doc?.nextRunAt ?? nextRunAt));
    }
    const dueAt = this.dueAt(schedule, state.nextRunAt);
    if (now < dueAt) {
      return this.requeue('kept', dueAt);
    }
    // Due: the latest occurrence from the one owed up to now runs, once; any before it were missed.
    const owed = latestOccurrenceBetween(cron, state.nextRunAt - 1, now) ?? { latest: state.nextRunAt, count: 1 };
    const occurrenceAt = owed.latest;
    const next = nextOccurrence(cron, Math.max(now, occurrenceAt));
    const tooLate = schedule.startingDeadlineSeconds !== undefined && now - occurrenceAt > schedule.startingDeadlineSeconds * 1000;
    const plan = tooLate ? { orders: [], skipped: [] } : await this.planOccurrence(schedule, occurrenceAt);
    const fired = await this.writeState(scheduleIdArg, (currentArg) => {
      // Another look fired it already (or the spec changed): nothing to do, and never twice.
      if (!currentArg || currentArg.nextRunAt !== state.nextRunAt || currentArg.specGeneration !== schedule.generation || currentArg.state !== 'active') {
        return { kind: 'keep' };
      }
      if (tooLate) {
        return {
          kind: 'write',
          change: {
            set: { missedOccurrences: currentArg.missedOccurrences + owed.count, ...(next !== null ? { nextRunAt: next } : {}) },
            ...(next === null ? { unset: ['nextRunAt'] as const } : {}),
          },
        };
      }
      return {
        kind: 'write',
        change: {
          set: {
            ...(next !== null ? { nextRunAt: next } : {}),
            lastRun: { occurrenceAt, firedAt: now, backupIds: plan.orders.map((orderArg) => orderArg.backupId), skipped: plan.skipped },
            firedOccurrences: currentArg.firedOccurrences + 1,
            skippedServices: currentArg.skippedServices + plan.skipped.length,
            missedOccurrences: currentArg.missedOccurrences + owed.count - 1,
            ordering: { occurrenceAt, services: plan.orders.map(({ serviceId, clusterId, nodeId, backupId, verify }) => ({ serviceId, clusterId, nodeId, backupId, ...(verify ? { verify } : {}) })) },
          },
          ...(next === null ? { unset: ['nextRunAt'] as const } : {}),
        },
      };
    });
    if (fired.outcome !== 'written') {
      return { outcome: 'kept', requeueAfterMs: 1 };
    }
    if (!tooLate) {
      this.ports.logger.info({ scheduleId: scheduleIdArg, occurrenceAt, backups: plan.orders.length, skipped: plan.skipped.length }, 'backup schedule fired');
      await this.finishOrdering(fired.doc!);
    }
    return this.requeue('written', next === null ? undefined : this.dueAt(schedule, next));
  }

  private dueAt(scheduleArg: IBackupScheduleDocument, occurrenceAtArg: number): number {
    return occurrenceAtArg + jitterOffsetMs(scheduleArg.id, occurrenceAtArg, scheduleArg.jitterSeconds ?? 0);
  }

  private async disable(scheduleArg: IBackupScheduleDocument, reasonArg: string): Promise<IReconcileResult> {
    const result = await this.writeState(scheduleArg.id, (currentArg) => {
      if (currentArg && currentArg.state === 'disabled' && currentArg.disabledReason === reasonArg && currentArg.specGeneration === scheduleArg.generation) {
        return { kind: 'keep' };
      }
      const disabled = { state: 'disabled' as const, disabledReason: reasonArg, specGeneration: scheduleArg.generation };
      return currentArg
        ? { kind: 'write', change: { set: disabled, unset: ['nextRunAt'] } }
        : { kind: 'create', doc: { id: scheduleArg.id, scheduleId: scheduleArg.id, ...disabled, firedOccurrences: 0, skippedServices: 0, missedOccurrences: 0 } };
    });
    if (result.outcome !== 'kept') {
      this.ports.logger.warn({ scheduleId: scheduleArg.id, reason: reasonArg }, 'backup schedule disabled');
    }
    return { outcome: result.outcome === 'created' ? 'created' : result.outcome === 'written' ? 'written' : 'kept' };
  }

  /** Which services an occurrence backs up, on which node, and which it skips and why. */
  private async planOccurrence(scheduleArg: IBackupScheduleDocument, occurrenceAtArg: number): Promise<{ orders: IScheduledBackupOrder[]; skipped: IBackupScheduleSkip[] }> {
    const services = await this.ports.servicesOf(scheduleArg.target);
    if (services.length === 0) {
      return { orders: [], skipped: [{ reason: backupScheduleSkipReasons.noServices }] };
    }
    const orders: IScheduledBackupOrder[] = [];
    const skipped: IBackupScheduleSkip[] = [];
    const darkness = new Map<string, string | null>();
    const nodes = new Map<string, string[]>();
    for (const service of services) {
      if (!darkness.has(service.clusterId)) {
        darkness.set(service.clusterId, await this.ports.darkReasonOf(service.clusterId));
      }
      const dark = darkness.get(service.clusterId);
      if (dark) {
        skipped.push({ serviceId: service.id, clusterId: service.clusterId, reason: backupScheduleSkipReasons.clusterUnknown, detail: dark });
        continue;
      }
      const named = 'serviceId' in scheduleArg.target ? scheduleArg.target.nodeId : undefined;
      let nodeId: string | undefined = named ?? service.runtime.placement.nodeIds[0];
      if (nodeId === undefined) {
        if (!nodes.has(service.clusterId)) {
          nodes.set(service.clusterId, await this.ports.nodesOf(service.clusterId));
        }
        const clusterNodes = nodes.get(service.clusterId)!;
        nodeId = clusterNodes.length === 1 ? clusterNodes[0]! : undefined;
      }
      if (nodeId === undefined) {
        skipped.push({ serviceId: service.id, clusterId: service.clusterId, reason: backupScheduleSkipReasons.nodeAmbiguous });
        continue;
      }
      orders.push({
        scheduleId: scheduleArg.id,
        occurrenceAt: occurrenceAtArg,
        serviceId: service.id,
        clusterId: service.clusterId,
        nodeId,
        backupId: scheduledBackupId(scheduleArg.id, occurrenceAtArg, service.id),
        ...(scheduleArg.verify ? { verify: true } : {}),
      });
    }
    return { orders, skipped };
  }

  /** Orders every backup of the recorded firing not stored yet, then clears the record. */
  private async finishOrdering(stateArg: IBackupScheduleStateDocument): Promise<void> {
    const ordering = stateArg.ordering!;
    for (const order of ordering.services) {
      try {
        await this.ports.orderBackup({ scheduleId: stateArg.id, occurrenceAt: ordering.occurrenceAt, ...order });
      } catch (error) {
        // Ordered as far as it goes: the backup records its own failure when it has one; one that
        // could not even be recorded (its service went away meanwhile) is logged and not retried.
        this.ports.logger.warn({ scheduleId: stateArg.id, serviceId: order.serviceId, err: error }, 'scheduled backup could not be ordered');
      }
    }
    await this.writeState(stateArg.id, (currentArg) =>
      (currentArg?.ordering?.occurrenceAt === ordering.occurrenceAt ? { kind: 'write', change: { unset: ['ordering'] } } : { kind: 'keep' }));
  }
}
