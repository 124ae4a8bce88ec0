import * as promClient from 'prom-client';
import type { DocumentStore } from '../core/store.js';
import { serviceKind } from '../manager.service/documents.js';
import { nextOccurrence, parseCron } from './cron.js';
import { backupDrillKind, serviceBackupKind } from './documents.js';
import { backupScheduleKind, backupScheduleStateKind } from './schedules.js';

/**
 * Backups in `/metrics`, for alerting (docs/alerts.example.yml, "no verified backup in twice the
 * schedule's interval"): per service the age of its newest completed and newest verified backup
 * and the interval its schedules promise; per schedule its stored failed runs and the services and
 * occurrences it skipped or missed. Read from the database when scraped, as the fleet gauges are,
 * so every instance answers the same figures: aggregate with `max`.
 */

/** The gap between a schedule's next two occurrences from now: its interval as an alert reads it. */
const intervalMsOf = (cronArg: string, nowArg: number): number | null => {
  const parsed = parseCron(cronArg);
  if ('problems' in parsed) {
    return null;
  }
  const first = nextOccurrence(parsed.schedule, nowArg);
  const second = first === null ? null : nextOccurrence(parsed.schedule, first);
  return first === null || second === null ? null : second - first;
};

export const registerBackupMetrics = (registryArg: promClient.Registry, storeArg: DocumentStore, nowArg: () => number = Date.now): void => {
  const registers = [registryArg];
  /** The newest completed backup per service and the newest verified one, from one read of the completed backups. */
  const newestPerService = async () => {
    const completed = await storeArg.findFields(serviceBackupKind, { state: 'completed' }, ['serviceId', 'createdAt', 'verification']);
    const success = new Map<string, number>();
    const verified = new Map<string, number>();
    for (const backup of completed) {
      success.set(backup.serviceId, Math.max(success.get(backup.serviceId) ?? 0, backup.createdAt));
      if (backup.verification?.outcome === 'ok') {
        verified.set(backup.serviceId, Math.max(verified.get(backup.serviceId) ?? 0, backup.createdAt));
      }
    }
    return { success, verified };
  };
  /** A gauge per service, its values read when scraped. */
  const serviceGauge = (nameArg: string, helpArg: string, valuesArg: (nowMsArg: number) => Promise<Iterable<readonly [string, number]>>): void => {
    new promClient.Gauge({
      name: nameArg,
      help: helpArg,
      labelNames: ['service'],
      registers,
      async collect() {
        this.reset();
        for (const [service, value] of await valuesArg(nowArg())) {
          this.set({ service }, value);
        }
      },
    });
  };
  /** Seconds from each service's time to now. */
  const secondsSince = (timesArg: ReadonlyMap<string, number>, nowMsArg: number): Array<readonly [string, number]> =>
    [...timesArg].map(([service, at]) => [service, (nowMsArg - at) / 1000] as const);
  serviceGauge('cloudly_backup_newest_success_age_seconds',
    'Per service with a completed backup: seconds since its newest completed backup was ordered.',
    async (now) => secondsSince((await newestPerService()).success, now));
  serviceGauge('cloudly_backup_newest_verified_age_seconds',
    'Per service with a verified backup: seconds since its newest backup whose verification is ok was ordered.',
    async (now) => secondsSince((await newestPerService()).verified, now));
  /** Per service: when its newest successful drill finished, and how many drills failed (or were interrupted) after it. */
  const drillsPerService = async () => {
    const drills = await storeArg.findFields(backupDrillKind, { outcome: { $in: ['ok', 'failed', 'interrupted'] } }, ['serviceId', 'outcome', 'startedAt', 'finishedAt']);
    const newestOk = new Map<string, number>();
    for (const drill of drills) {
      if (drill.outcome === 'ok') {
        newestOk.set(drill.serviceId, Math.max(newestOk.get(drill.serviceId) ?? 0, drill.finishedAt ?? drill.startedAt));
      }
    }
    const failedSince = new Map<string, number>();
    for (const drill of drills) {
      failedSince.set(drill.serviceId, (failedSince.get(drill.serviceId) ?? 0)
        + (drill.outcome !== 'ok' && drill.startedAt > (newestOk.get(drill.serviceId) ?? 0) ? 1 : 0));
    }
    return { newestOk, failedSince };
  };
  serviceGauge('cloudly_backup_newest_drill_age_seconds',
    'Per service with a successful restore drill: seconds since its newest successful drill finished.',
    async (now) => secondsSince((await drillsPerService()).newestOk, now));
  serviceGauge('cloudly_backup_drills_failed',
    'Per service with restore drills: drills that failed or were interrupted since its newest successful drill (all of them when none succeeded).',
    async () => (await drillsPerService()).failedSince);
  serviceGauge('cloudly_backup_schedule_interval_seconds',
    'Per service an active schedule covers: the shortest interval between two occurrences of those schedules.',
    async (now) => {
      const states = new Map((await storeArg.find(backupScheduleStateKind, {})).map((stateArg) => [stateArg.id, stateArg]));
      const intervals = new Map<string, number>();
      for (const schedule of await storeArg.find(backupScheduleKind, {})) {
        const interval = intervalMsOf(schedule.cron, now);
        if (interval === null || states.get(schedule.id)?.state !== 'active') {
          continue;
        }
        const target = schedule.target;
        const filter = 'serviceId' in target ? { id: target.serviceId } : 'clusterId' in target ? { clusterId: target.clusterId } : { organizationId: target.organizationId };
        for (const service of await storeArg.findFields(serviceKind, filter, ['id'])) {
          intervals.set(service.id, Math.min(intervals.get(service.id) ?? Number.POSITIVE_INFINITY, interval));
        }
      }
      return [...intervals].map(([service, interval]) => [service, interval / 1000] as const);
    });
  new promClient.Gauge({
    name: 'cloudly_backup_schedule_failed_runs',
    help: 'Per schedule: its backups that failed, as still stored (retention removes old ones).',
    labelNames: ['schedule'],
    registers,
    async collect() {
      this.reset();
      const failed = await storeArg.findFields(serviceBackupKind, { state: 'failed', scheduleId: { $exists: true } }, ['scheduleId']);
      const counts = new Map<string, number>();
      for (const backup of failed) {
        counts.set(backup.scheduleId!, (counts.get(backup.scheduleId!) ?? 0) + 1);
      }
      for (const schedule of await storeArg.findFields(backupScheduleKind, {}, ['id'])) {
        this.set({ schedule: schedule.id }, counts.get(schedule.id) ?? 0);
      }
    },
  });
  new promClient.Gauge({
    name: 'cloudly_backup_schedule_skipped',
    help: 'Per schedule: services skipped in its occurrences (a dark cluster, no node), and occurrences missed whole (downtime), since it was created.',
    labelNames: ['schedule', 'kind'],
    registers,
    async collect() {
      this.reset();
      for (const state of await storeArg.find(backupScheduleStateKind, {})) {
        this.set({ schedule: state.id, kind: 'service' }, state.skippedServices);
        this.set({ schedule: state.id, kind: 'occurrence' }, state.missedOccurrences);
      }
    },
  });
};
