/**
 * Backup schedules benchmark: `schedules` schedules all due in the same minute, fired by the
 * `backup-schedules` controller through the real reconciler (its queue, its concurrency), on the
 * embedded database. Reported: the process CPU per fired schedule and the database commands per
 * occurrence (reads of the schedule, its state and its services, the compare-and-swap that fires
 * it, its audit), from `cloudly_database_commands_total`.
 *
 * The schedules target a cluster without services, so each occurrence is fired and recorded
 * (`schedule-has-no-services`) and orders nothing: the figure is the controller's own cost, not a
 * backup's. They are made with a far cron first (so the controller records a state for each),
 * then every state's next run is moved into the past in one write the controller does not watch,
 * and every schedule is queued once: all due at once.
 *
 *   node --import tsx bench/backupschedules.bench.ts [schedules]
 *   npm run bench -- --smoke backupschedules      (tiny sizes; no results file)
 */
import { execFileSync } from 'node:child_process';
import * as os from 'node:os';
import { performance } from 'node:perf_hooks';
import { startBenchCloudly } from './helpers/benchcloudly.js';
import { reportResults, smoke } from './helpers/smoke.js';
import { backupScheduleKind, backupScheduleStateKind } from '../ts/manager.backup/schedules.js';
import type { IReq_Any_Cloudly_CreateCluster } from '../ts/interfaces/requests/admin.js';

const scheduleCount = Number(process.argv.slice(2).find((argArg) => /^\d+$/.test(argArg)) ?? (smoke ? 50 : 10_000));

const databaseCommands = async (baseUrlArg: string): Promise<number> => {
  const text = await (await fetch(`${baseUrlArg}/metrics?name=cloudly_database_commands_total`)).text();
  return Number(/^cloudly_database_commands_total (\d+)/m.exec(text)![1]);
};

const waitUntil = async (predicateArg: () => Promise<boolean> | boolean): Promise<void> => {
  while (!(await predicateArg())) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
};

const main = async (): Promise<void> => {
  const bench = await startBenchCloudly('backupschedules');
  const { cloudly } = bench;
  try {
    const { cluster } = await bench.admin.call<IReq_Any_Cloudly_CreateCluster>('createCluster', { name: 'bench-schedules' });
    const now = Date.now();
    const seedStarted = performance.now();
    // Inserted 500 at a time: concurrent inserts go to the database as batched commands (the store's
    // InsertBatcher); one at a time, seeding 10,000 took longer than the firing measured after it.
    for (let first = 0; first < scheduleCount; first += 500) {
      await Promise.all(Array.from({ length: Math.min(500, scheduleCount - first) }, (_unused, offsetArg) => cloudly.store.insert(backupScheduleKind, {
        id: `bench-${first + offsetArg}`, createdAt: now, updatedAt: now, target: { clusterId: cluster.id }, cron: '0 0 1 1 *', clusterId: cluster.id,
      })));
    }
    await waitUntil(async () => (await cloudly.store.collection(backupScheduleStateKind).countDocuments({ nextRunAt: { $exists: true } })) === scheduleCount
      && cloudly.reconciler.busyKeys === 0);
    const seedSeconds = (performance.now() - seedStarted) / 1000;
    // Every schedule due now: the state's next run a minute ago (a write no controller watches).
    const due = Math.floor(Date.now() / 60_000) * 60_000 - 60_000;
    await cloudly.store.collection(backupScheduleStateKind).updateMany({}, { $set: { nextRunAt: due } });
    await cloudly.database.flushSnapshot?.();
    const commandsBefore = await databaseCommands(cloudly.baseUrl);
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    for (let index = 0; index < scheduleCount; index++) {
      cloudly.reconciler.enqueue('backup-schedules', `bench-${index}`, { kind: 'CloudlyBackupSchedule', id: `bench-${index}`, at: Date.now() });
    }
    await waitUntil(async () => cloudly.reconciler.busyKeys === 0
      && (await cloudly.store.collection(backupScheduleStateKind).countDocuments({ firedOccurrences: 1 })) === scheduleCount);
    const wallMs = performance.now() - started;
    const cpu = process.cpuUsage(cpuBefore);
    // The two reads of this scrape and the counting polls above are the bench's own; they are few against the total.
    const commands = (await databaseCommands(cloudly.baseUrl)) - commandsBefore;
    const cpuMs = (cpu.user + cpu.system) / 1000;
    const load = execFileSync('uptime', { encoding: 'utf8' }).trim();
    const lines = [
      '# Backup schedules: the controller firing schedules all due in the same minute',
      '',
      `Run: ${new Date().toISOString()}, ${os.cpus().length} cores (\`uptime\`: ${load}), ` +
        `${scheduleCount} schedules on the embedded database, reconcile concurrency ${cloudly.config.reconcileConcurrency ?? 8}.`,
      '',
      '| figure | value |',
      '| --- | --- |',
      `| schedules fired | ${scheduleCount} |`,
      `| seeding (insert, then the controller's first look at each) | ${seedSeconds.toFixed(1)} s |`,
      `| wall time until every one is recorded | ${(wallMs / 1000).toFixed(2)} s |`,
      `| process CPU per fired schedule | ${(cpuMs / scheduleCount).toFixed(2)} ms |`,
      `| database commands per occurrence | ${(commands / scheduleCount).toFixed(1)} (including this bench's polls of the count) |`,
    ];
    await reportResults('backupschedules.md', lines);
  } finally {
    await bench.stop();
  }
};

await main();
