import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { addClusterWorld } from './backup.fixture.js';
import type { IReq_Cloudly_Relay_BackupClusterService, IServiceBackupRecord } from '../ts/interfaces/requests/backup.js';
import type { IBackupSchedule } from '../ts/interfaces/data/backupschedule.js';
import type { IService } from '../ts/interfaces/data/service.js';

/**
 * Backup schedules on a real server: the methods (dry run, audit, paging, generations, every
 * refusal) and the schedules controller firing them on a schedule clock that runs 60 times faster
 * than the wall clock (CLOUDLY_SCHEDULE_CLOCK_FACTOR: a one-minute schedule fires every second).
 */

const clockFactor = 60;
let t: ITestCloudly;
let live: { clusterId: string; nodeId: string; service: IService };
let dark: { clusterId: string; service: IService };
const relayBackups: string[] = [];

before(async () => {
  t = await startTestCloudly({ scheduleClockFactor: clockFactor, relayLivenessGraceMs: 500 });
  const world = await addClusterWorld(t, 'sched');
  live = { clusterId: world.clusterId, nodeId: world.nodeId, service: world.service };
  world.relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    relayBackups.push(request.backupId);
    return { snapshots: [] };
  });
  // A cluster whose relay never connects: past the grace its liveness reads unknown.
  const { cluster } = await t.createCluster('sched-dark');
  await t.addNodes(cluster.id, 'dark-node');
  const { service } = await t.caller.call('createService', {
    service: {
      name: 'dark-db', organizationId: 'org-dark', clusterId: cluster.id, volumes: [],
      runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
    },
  });
  dark = { clusterId: cluster.id, service };
});

after(async () => {
  await t?.stop();
});

const schedulesOf = async (serviceIdArg: string): Promise<IBackupSchedule[]> =>
  (await t.caller.call('getBackupSchedules', { serviceId: serviceIdArg })).schedules;
const scheduleById = async (scheduleIdArg: string): Promise<IBackupSchedule> => {
  const { schedules } = await t.caller.call('getBackupSchedules', {});
  return schedules.find((scheduleArg) => scheduleArg.scheduleId === scheduleIdArg)!;
};
const backupsOfSchedule = async (scheduleIdArg: string): Promise<IServiceBackupRecord[]> =>
  (await t.caller.call('getServiceBackups', {})).backups.filter((backupArg) => backupArg.scheduleId === scheduleIdArg);

test('schedules are created, listed in pages, updated and deleted by generation; a dry run writes nothing; each write is audited', async () => {
  const spec = { target: { serviceId: live.service.id }, cron: '0 3 * * *', jitterSeconds: 120 };
  const auditBefore = (await t.caller.call('getAuditEvents', { filter: { targetKind: 'CloudlyBackupSchedule' } })).events.length;
  const dry = await t.caller.call('createBackupSchedule', { schedule: spec, scheduleId: 'nightly', dryRun: true } as never) as unknown as { dryRun: boolean; schedule: IBackupSchedule };
  assert.equal(dry.dryRun, true);
  assert.equal(dry.schedule.cron, '0 3 * * *');
  assert.deepEqual(await schedulesOf(live.service.id), [], 'the dry run stored nothing');

  const { schedule } = await t.caller.call('createBackupSchedule', { schedule: spec, scheduleId: 'nightly' });
  assert.equal(schedule.scheduleId, 'nightly');
  assert.equal(schedule.generation, 1);
  const taken = await refusalOf(() => t.caller.call('createBackupSchedule', { schedule: spec, scheduleId: 'nightly' }));
  assert.deepEqual([taken.code, taken.reasons], ['conflict', ['backup-schedule-exists']]);

  // The controller records the first occurrence: the next 03:00 UTC on the schedule clock.
  await waitFor(async () => (await scheduleById('nightly')).status?.nextRunAt !== undefined, 'the controller looked at the schedule', 10_000);
  const looked = await scheduleById('nightly');
  assert.equal(new Date(looked.status!.nextRunAt!).toISOString().slice(11), '03:00:00.000Z');
  assert.equal(looked.status!.state, 'active');

  for (let index = 0; index < 3; index++) {
    await t.caller.call('createBackupSchedule', { schedule: { target: { clusterId: live.clusterId }, cron: `${index} 4 * * *` }, scheduleId: `page-${index}` });
  }
  const first = await t.caller.call('getBackupSchedules', { clusterId: live.clusterId, limit: 2 });
  assert.equal(first.schedules.length, 2);
  assert.ok(first.nextCursor);
  const second = await t.caller.call('getBackupSchedules', { clusterId: live.clusterId, limit: 2, cursor: first.nextCursor });
  assert.deepEqual([...first.schedules, ...second.schedules].map((scheduleArg) => scheduleArg.scheduleId).sort(), ['nightly', 'page-0', 'page-1', 'page-2']);

  const stale = await refusalOf(() => t.caller.call('updateBackupSchedule', { scheduleId: 'nightly', expectedGeneration: 7, schedule: spec }));
  assert.deepEqual([stale.code, stale.reasons], ['conflict', ['generation-mismatch']]);
  const { schedule: updated } = await t.caller.call('updateBackupSchedule', {
    scheduleId: 'nightly', expectedGeneration: 1, schedule: { target: { serviceId: live.service.id }, cron: '30 1 * * 1' },
  });
  assert.equal(updated.generation, 2);
  assert.equal(updated.jitterSeconds, undefined, 'a member left out of the new spec is gone');
  // The controller moves the next run to the changed time; the administrator's generation stays.
  await waitFor(async () => {
    const next = (await scheduleById('nightly')).status?.nextRunAt;
    return next !== undefined && new Date(next).toISOString().slice(11) === '01:30:00.000Z';
  }, 'the next run follows the new cron', 10_000);
  assert.equal((await scheduleById('nightly')).generation, 2);

  const deleted = await t.caller.call('deleteBackupSchedule', { scheduleId: 'nightly', expectedGeneration: 2 });
  assert.equal(deleted.schedule.scheduleId, 'nightly');
  assert.equal(await scheduleById('nightly'), undefined);
  const gone = await refusalOf(() => t.caller.call('deleteBackupSchedule', { scheduleId: 'nightly', expectedGeneration: 2 }));
  assert.deepEqual([gone.code, gone.reasons], ['not-found', ['backup-schedule-not-found']]);
  for (let index = 0; index < 3; index++) {
    await t.caller.call('deleteBackupSchedule', { scheduleId: `page-${index}`, expectedGeneration: 1 });
  }
  const audited = (await t.caller.call('getAuditEvents', { filter: { targetKind: 'CloudlyBackupSchedule' } })).events;
  assert.deepEqual(audited.slice(0, audited.length - auditBefore).map((eventArg) => eventArg.method).sort(),
    ['createBackupSchedule', 'createBackupSchedule', 'createBackupSchedule', 'createBackupSchedule', 'deleteBackupSchedule',
      'deleteBackupSchedule', 'deleteBackupSchedule', 'deleteBackupSchedule', 'updateBackupSchedule']);
});

test('a malformed schedule is refused with every reason, and a target that does not exist is named', async () => {
  const malformed = await refusalOf(() => t.caller.call('createBackupSchedule', {
    schedule: { target: { serviceId: live.service.id }, cron: '61 * * * * *', retention: { keepLast: 0 } },
  }));
  assert.equal(malformed.code, 'invalid-request');
  const causes = malformed.causes as Array<{ path: string; reason: string; message: string }>;
  assert.deepEqual(causes.map((causeArg) => causeArg.path), ['request.schedule.cron', 'request.schedule.retention']);
  assert.match(causes[0]!.message, /exactly 5 fields/);
  assert.match(causes[1]!.message, /keeps nothing/);
  const outOfRange = await refusalOf(() => t.caller.call('createBackupSchedule', {
    schedule: { target: { serviceId: live.service.id }, cron: '60 24 32 13 8' },
  }));
  assert.deepEqual((outOfRange.causes as Array<{ path: string }>).map((causeArg) => causeArg.path),
    ['request.schedule.cron.minute', 'request.schedule.cron.hour', 'request.schedule.cron.day-of-month', 'request.schedule.cron.month', 'request.schedule.cron.day-of-week']);
  const missing = await refusalOf(() => t.caller.call('createBackupSchedule', { schedule: { target: { serviceId: 'no-such-service' }, cron: '* * * * *' } }));
  assert.deepEqual([missing.code, missing.reasons], ['not-found', ['backup-schedule-target-not-found']]);
});

test('a one-minute schedule fires each occurrence once, as an ordinary backup operation carrying the schedule id', async () => {
  const { schedule } = await t.caller.call('createBackupSchedule', { schedule: { target: { serviceId: live.service.id }, cron: '* * * * *' } });
  await waitFor(async () => (await backupsOfSchedule(schedule.scheduleId)).filter((backupArg) => backupArg.state === 'completed').length >= 3,
    'three scheduled backups completed', 30_000);
  await t.caller.call('deleteBackupSchedule', { scheduleId: schedule.scheduleId, expectedGeneration: schedule.generation });
  await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the controllers are quiet');
  const backups = await backupsOfSchedule(schedule.scheduleId);
  const occurrences = backups.map((backupArg) => backupArg.occurrenceAt!);
  assert.equal(new Set(occurrences).size, occurrences.length, 'no occurrence backed up twice');
  assert.ok(occurrences.every((occurrenceArg) => occurrenceArg % 60_000 === 0), 'each on its minute');
  const operation = await t.caller.call('getOperation', { operationId: backups[0]!.operationId! });
  assert.equal(operation.operation.requestedBy, `schedule:${schedule.scheduleId}`);
  assert.equal(operation.operation.kind, 'service-backup');
  for (const backup of backups) {
    assert.equal(backup.serviceId, live.service.id);
    assert.equal(backup.nodeId, live.nodeId, 'the cluster\'s one node');
  }
  // Every ordered backup reached the relay exactly once.
  for (const backup of backups.filter((backupArg) => backupArg.state === 'completed')) {
    assert.equal(relayBackups.filter((idArg) => idArg === backup.backupId).length, 1);
  }
});

test('a dark cluster records a skipped occurrence with its reason and queues nothing up; a deleted service disables its schedule', async () => {
  await waitFor(async () => (await t.caller.call('getServiceRuntimeStatus', { serviceId: dark.service.id }).catch(() => null))?.unknown?.reason === 'relay-disconnected',
    'the relayless cluster reads unknown', 15_000);
  const { schedule } = await t.caller.call('createBackupSchedule', { schedule: { target: { clusterId: dark.clusterId }, cron: '* * * * *' } });
  await waitFor(async () => ((await scheduleById(schedule.scheduleId)).status?.firedOccurrences ?? 0) >= 3, 'three occurrences looked at', 30_000);
  const status = (await scheduleById(schedule.scheduleId)).status!;
  assert.deepEqual(status.lastRun!.skipped, [{ serviceId: dark.service.id, clusterId: dark.clusterId, reason: 'cluster-unknown', detail: 'relay-disconnected' }]);
  assert.deepEqual(status.lastRun!.backupIds, []);
  assert.equal(status.skippedServices, status.firedOccurrences, 'one skip per occurrence');
  assert.ok(status.nextRunAt! > status.lastRun!.occurrenceAt, 'the next run is the next slot');
  assert.deepEqual(await backupsOfSchedule(schedule.scheduleId), [], 'nothing was ordered for the dark cluster');
  const metrics = await (await fetch(`${t.baseUrl}/metrics`)).text();
  const skipped = metrics.split('\n').find((lineArg) => lineArg.startsWith(`cloudly_backup_schedule_skipped{schedule="${schedule.scheduleId}",kind="service"}`));
  assert.ok(skipped && Number(skipped.split(' ').at(-1)) >= 3, `the skips are counted in /metrics: ${skipped}`);

  // A schedule of one service that is deleted: disabled with the reason, not left firing.
  const { service } = await t.caller.call('createService', {
    service: {
      name: 'short-lived', organizationId: 'org-1', clusterId: live.clusterId, volumes: [],
      runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
    },
  });
  const { schedule: orphan } = await t.caller.call('createBackupSchedule', { schedule: { target: { serviceId: service.id }, cron: '0 0 1 1 *' } });
  await waitFor(async () => (await scheduleById(orphan.scheduleId)).status?.state === 'active', 'the schedule is active', 10_000);
  await t.caller.call('deleteService', { serviceId: service.id, expectedGeneration: service.generation, force: true });
  await waitFor(async () => (await scheduleById(orphan.scheduleId)).status?.state === 'disabled', 'the schedule is disabled', 10_000);
  const disabled = (await scheduleById(orphan.scheduleId)).status!;
  assert.equal(disabled.disabledReason, 'service-not-found');
  assert.equal(disabled.nextRunAt, undefined);
});
