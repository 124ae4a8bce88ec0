import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { startTestCloudly, testAdminPassword, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { startDevDatabase, startInstance, stopInstance, type IDevDatabaseProcess, type IInstanceProcess } from './helpers/multiinstance.js';
import { reconcilerLeaseKind } from '../ts/manager.reconciler/leadership.js';
import { scheduleClockOf } from '../ts/manager.backup/schedules.controller.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IReq_Cloudly_Relay_BackupClusterService, IServiceBackupRecord } from '../ts/interfaces/requests/backup.js';
import type { IBackupSchedule } from '../ts/interfaces/data/backupschedule.js';
import type { IService } from '../ts/interfaces/data/service.js';

/**
 * Backup schedules over three instances on one shared database: a Cloudly process (A, which
 * reconciles) and two in this process (B, C). The schedule clock runs 20 times faster than the wall
 * clock on all three (CLOUDLY_SCHEDULE_CLOCK_FACTOR: a minute is 3 s), so five scheduled minutes
 * take 15 s. B and C also look at the schedule themselves every few milliseconds throughout, as
 * instances that wrongly believed they reconcile would: only the compare-and-swap on the schedule's
 * next run keeps each occurrence to one run.
 */

const clockFactor = 20;
const minuteMs = 60_000;
const clock = scheduleClockOf(clockFactor);
const timing = { relayLeaseTtlMs: 2_000, relayLeaseHeartbeatMs: 500 };

let workDir: string;
let database: IDevDatabaseProcess;
let a: IInstanceProcess;
let b: ITestCloudly;
let c: ITestCloudly;
let relay: CloudlyRelayClient;
let service: IService;
let nodeId: string;
const relayCalls: string[] = [];
let holdBackups = false;
const held: Array<() => void> = [];

before(async () => {
  workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-mi-schedules-'));
  database = await startDevDatabase(path.join(workDir, 'database'));
  // A starts first and takes the reconciler lease.
  a = await startInstance(database, 'a', {
    CLOUDLY_SCHEDULE_CLOCK_FACTOR: String(clockFactor),
    CLOUDLY_RELAY_LEASE_TTL_MS: String(timing.relayLeaseTtlMs),
    CLOUDLY_RELAY_LEASE_HEARTBEAT_MS: String(timing.relayLeaseHeartbeatMs),
    CLOUDLY_ADMIN_PASSWORD: testAdminPassword,
  });
  const shared = { mongoDbUrl: database.mongoDbUrl, secretsKeyFile: database.secretsKeyFile, scheduleClockFactor: clockFactor, ...timing };
  b = await startTestCloudly(shared);
  c = await startTestCloudly(shared);
  const { cluster, relayToken } = await b.createCluster('scheduled');
  nodeId = 'scheduled-node';
  await b.addNodes(cluster.id, nodeId);
  ({ service } = await b.caller.call('createService', {
    service: {
      name: 'scheduled-db', organizationId: 'org-1', clusterId: cluster.id, volumes: [],
      runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
    },
  }));
  relay = await b.connectRelay(relayToken);
  relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    relayCalls.push(request.backupId);
    if (holdBackups) {
      await new Promise<void>((resolve) => held.push(resolve));
    }
    return { snapshots: [] };
  });
});

after(async () => {
  for (const release of held) release();
  await b?.stop();
  await c?.stop();
  if (a) await stopInstance(a);
  await database?.stop();
  await fsp.rm(workDir, { recursive: true, force: true });
});

const scheduleOf = async (scheduleIdArg: string): Promise<IBackupSchedule | undefined> =>
  (await b.caller.call('getBackupSchedules', { serviceId: service.id })).schedules.find((scheduleArg) => scheduleArg.scheduleId === scheduleIdArg);
const backupsOf = async (scheduleIdArg: string): Promise<IServiceBackupRecord[]> =>
  (await b.caller.call('getServiceBackups', { serviceId: service.id })).backups.filter((backupArg) => backupArg.scheduleId === scheduleIdArg);

/** Looks at the schedule every few milliseconds on the given instances, until stopped, as a reconciler would. */
const lookRepeatedly = (instancesArg: ITestCloudly[], scheduleIdArg: string): (() => Promise<void>) => {
  let looking = true;
  const loops = instancesArg.map(async (instanceArg) => {
    while (looking) {
      await instanceArg.cloudly.controllers.backupSchedules.reconcile(scheduleIdArg, {
        cause: { kind: 'CloudlyBackupSchedule', id: scheduleIdArg },
        enqueue: () => undefined,
      }).catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  });
  return async () => {
    looking = false;
    await Promise.all(loops);
  };
};

test('three instances and a one-minute schedule over five minutes: exactly five runs, one per occurrence', async () => {
  const lease = await b.cloudly.store.get(reconcilerLeaseKind, 'reconciler');
  const ownIds = [b, c].map((instanceArg) => instanceArg.cloudly.clusterManager.relayElection.instanceId);
  assert.ok(lease && !ownIds.some((idArg) => idArg === lease.holder), 'A (the other process) reconciles');

  const { schedule } = await c.caller.call('createBackupSchedule', { schedule: { target: { serviceId: service.id }, cron: '* * * * *' } });
  const stopLooking = lookRepeatedly([b, c], schedule.scheduleId);
  try {
    await waitFor(async () => (await scheduleOf(schedule.scheduleId))?.status?.nextRunAt !== undefined, 'the first occurrence is recorded', 15_000);
    const first = (await scheduleOf(schedule.scheduleId))!.status!.nextRunAt!;
    const window = Array.from({ length: 5 }, (_, indexArg) => first + indexArg * minuteMs);
    // Past the fifth occurrence on the schedule clock, and its run recorded.
    await waitFor(async () => ((await scheduleOf(schedule.scheduleId))?.status?.lastRun?.occurrenceAt ?? 0) >= window[4]!,
      'the fifth occurrence fired', 90_000);
    assert.ok(clock.now() >= window[4]!);
  } finally {
    await stopLooking();
  }
  // Each firing is counted once in the schedule's state: as many firings as occurrences backed up.
  await waitFor(async () => {
    const status = (await scheduleOf(schedule.scheduleId))!.status!;
    const fired = (await backupsOf(schedule.scheduleId)).filter((backupArg) => backupArg.occurrenceAt! <= status.lastRun!.occurrenceAt);
    return fired.length === status.firedOccurrences && status.skippedServices === 0;
  }, 'the firings counted are the occurrences backed up', 30_000);
  await c.caller.call('deleteBackupSchedule', { scheduleId: schedule.scheduleId, expectedGeneration: schedule.generation });
  const first = Math.min(...(await backupsOf(schedule.scheduleId)).map((backupArg) => backupArg.occurrenceAt!));
  const window = Array.from({ length: 5 }, (_, indexArg) => first + indexArg * minuteMs);
  await waitFor(async () => (await backupsOf(schedule.scheduleId)).filter((backupArg) => window.includes(backupArg.occurrenceAt!) && backupArg.state === 'completed').length >= 5,
    'the five backups completed', 30_000);
  const inWindow = (await backupsOf(schedule.scheduleId)).filter((backupArg) => backupArg.occurrenceAt! < first + 5 * minuteMs);
  assert.equal(inWindow.length, 5, 'exactly five runs');
  assert.deepEqual(inWindow.map((backupArg) => backupArg.occurrenceAt).sort((x, y) => x! - y!), window, 'one per occurrence, each minute of the five');
  for (const backup of inWindow) {
    assert.equal(relayCalls.filter((idArg) => idArg === backup.backupId).length, 1, `${backup.backupId} reached the relay once`);
    assert.equal(backup.nodeId, nodeId);
  }
});

test('kill -9 of the instance running a scheduled backup leaves it interrupted, and that occurrence never runs again', async () => {
  holdBackups = true;
  const { schedule } = await b.caller.call('createBackupSchedule', { schedule: { target: { serviceId: service.id }, cron: '* * * * *' } });
  // A, which reconciles, fires the next occurrence; the relay holds its backup.
  // The backup is recorded first, then its operation begins.
  await waitFor(async () => {
    const [first] = await backupsOf(schedule.scheduleId);
    return first !== undefined && relayCalls.includes(first.backupId);
  }, 'a scheduled backup is at the relay', 30_000);
  const [running] = await backupsOf(schedule.scheduleId);
  assert.equal(running!.state, 'running');
  const operation = (await b.caller.call('getOperation', { operationId: running!.operationId! })).operation;
  assert.equal(operation.state, 'running');
  assert.equal(operation.requestedBy, `schedule:${schedule.scheduleId}`);
  a.child.kill('SIGKILL');
  holdBackups = false;
  for (const release of held.splice(0)) release();
  // B or C takes the lease and goes on firing; A's operation is found abandoned and interrupted.
  await waitFor(async () => (await b.caller.call('getOperation', { operationId: running!.operationId! })).operation.state === 'failed',
    'the operation of the killed instance is interrupted', 90_000);
  const ended = (await b.caller.call('getOperation', { operationId: running!.operationId! })).operation;
  assert.equal(ended.reason, 'interrupted');
  await waitFor(async () => (await backupsOf(schedule.scheduleId)).find((backupArg) => backupArg.backupId === running!.backupId)?.failureReason === 'interrupted',
    'its backup is interrupted', 30_000);
  // Later occurrences run under the new reconciler; the killed one has its one backup and no other.
  await waitFor(async () => (await backupsOf(schedule.scheduleId)).some((backupArg) => backupArg.occurrenceAt! > running!.occurrenceAt! && backupArg.state === 'completed'),
    'a later occurrence ran', 60_000);
  await b.caller.call('deleteBackupSchedule', { scheduleId: schedule.scheduleId, expectedGeneration: schedule.generation });
  const ofKilled = (await backupsOf(schedule.scheduleId)).filter((backupArg) => backupArg.occurrenceAt === running!.occurrenceAt);
  assert.deepEqual(ofKilled.map((backupArg) => [backupArg.backupId, backupArg.state, backupArg.failureReason]), [[running!.backupId, 'failed', 'interrupted']]);
  const occurrences = (await backupsOf(schedule.scheduleId)).map((backupArg) => backupArg.occurrenceAt);
  assert.equal(new Set(occurrences).size, occurrences.length, 'no occurrence ran twice');
});
