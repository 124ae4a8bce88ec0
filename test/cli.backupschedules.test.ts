import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { refusalOf, waitFor } from './helpers/cloudly.js';
import { addClusterWorld, chunked, descriptorOf, type IBackupWorld } from './backup.fixture.js';
import { assertRefusedLikeApi, createCli, jsonOf, type ICli } from './cli.fixture.js';
import { startTestCloudly } from './helpers/cloudly.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { closureBlobKey } from '../ts/manager.backup/backup.manager.js';
import type { IReq_Cloudly_Relay_BackupClusterService } from '../ts/interfaces/requests/backup.js';

/**
 * `cloudly backups schedules create|list|update|plan|delete` and `cloudly backups verify` against a
 * real server: JSON output equal to the API's answer, a malformed cron refused with every reason
 * and exit code 1, and a damaged closure reported by verify with exit code 1.
 */

let world: IBackupWorld;
let cli: ICli;
const closureBytes = randomBytes(128 * 1024);

before(async () => {
  const t = await startTestCloudly({ scheduleClockFactor: 60 });
  world = { t, ...(await addClusterWorld(t, 'cli-sched')) };
  world.relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    await sendServiceDatabaseClosure(world.relay, {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closureBytes),
    }, chunked(closureBytes));
    return { snapshots: [] };
  });
  cli = await createCli();
  await cli.login(world.t);
});

after(async () => {
  await cli?.dispose();
  await world?.t.stop();
});

test('schedules are created, listed, updated, planned and deleted from the CLI as the API answers them', async () => {
  const created = await cli.run(['backups', 'schedules', 'create', '--service', world.service.id, '--cron', '0 2 * * *', '--keep-last', '3', '--schedule-id', 'cli-nightly', '-o', 'json']);
  assert.equal(created.code, 0, created.stderr);
  assert.equal(jsonOf(created).schedule.scheduleId, 'cli-nightly');
  assert.deepEqual(jsonOf(created).schedule.retention, { keepLast: 3 });

  await waitFor(async () => (await world.t.caller.call('getBackupSchedules', {})).schedules.some((scheduleArg) => scheduleArg.status?.nextRunAt !== undefined),
    'the controller looked at it', 10_000);
  const listed = await cli.run(['backups', 'schedules', 'list', '-o', 'json']);
  assert.deepEqual(jsonOf(listed), await world.t.caller.call('getBackupSchedules', {}));
  const table = await cli.run(['backups', 'schedules', 'list']);
  assert.match(table.stdout, /cli-nightly\s+0 2 \* \* \*\s+service /);

  const updated = await cli.run(['backups', 'schedules', 'update', '--schedule', 'cli-nightly', '--expect', '1', '--service', world.service.id, '--cron', '30 3 * * 1', '-o', 'json']);
  assert.equal(updated.code, 0, updated.stderr);
  assert.equal(jsonOf(updated).schedule.cron, '30 3 * * 1');
  assert.equal(jsonOf(updated).schedule.generation, 2);

  const plan = await cli.run(['backups', 'schedules', 'plan', '--schedule', 'cli-nightly', '-o', 'json']);
  assert.equal(plan.code, 1, 'a schedule whose retention was left out of the update has none');
  assertRefusedLikeApi(plan, await refusalOf(() => world.t.caller.call('getBackupRetentionPlan', { scheduleId: 'cli-nightly' })));

  const malformed = await cli.run(['backups', 'schedules', 'create', '--service', world.service.id, '--cron', '61 * * * * *']);
  assertRefusedLikeApi(malformed, await refusalOf(() => world.t.caller.call('createBackupSchedule', { schedule: { target: { serviceId: world.service.id }, cron: '61 * * * * *' } })));

  const deleted = await cli.run(['backups', 'schedules', 'delete', '--schedule', 'cli-nightly', '--expect-current', '-o', 'json']);
  assert.equal(deleted.code, 0, deleted.stderr);
  assert.deepEqual((await world.t.caller.call('getBackupSchedules', {})).schedules, []);
});

test('verify reports ok, and a damaged closure as a mismatch with exit code 1', async () => {
  const answer = await world.t.caller.call('createServiceBackup', { clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, backupId: 'cli-verify' });
  await waitFor(async () => (await world.t.caller.call('getOperation', { operationId: answer.operation!.operationId })).operation.state === 'completed', 'backed up', 30_000);
  const ok = await cli.run(['backups', 'verify', '--backup', 'cli-verify']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /outcome\s+ok/);
  const blob = path.join(world.t.dataDir, 'blobs', 'objects', `${createHash('sha256').update(closureBlobKey(world.clusterId, 'cli-verify'), 'utf8').digest('hex')}.blob`);
  const bytes = await fsp.readFile(blob);
  bytes[10] = bytes[10]! ^ 0x01;
  await fsp.writeFile(blob, bytes);
  const damaged = await cli.run(['backups', 'verify', '--backup', 'cli-verify', '-o', 'json']);
  assert.equal(damaged.code, 1, 'a failed check exits 1');
  const reported = JSON.parse(damaged.stdout) as { backup: { verification: { outcome: string; failedObject: { problem: string } } } };
  assert.equal(reported.backup.verification.outcome, 'mismatch');
  assert.equal(reported.backup.verification.failedObject.problem, 'blob-corrupt');
});

test('drill: a dry run starts nothing, a backup that does not exist is refused as the API refuses it, and a schedule takes its drill options', async () => {
  const answer = await world.t.caller.call('createServiceBackup', { clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, backupId: 'cli-drill' });
  await waitFor(async () => (await world.t.caller.call('getOperation', { operationId: answer.operation!.operationId })).operation.state === 'completed', 'backed up', 30_000);
  const dry = await cli.run(['backups', 'drill', '--backup', 'cli-drill', '--node', world.nodeId, '--dry-run', '-o', 'json']);
  assert.equal(dry.code, 0, dry.stderr);
  assert.equal((JSON.parse(dry.stdout) as { dryRun: boolean }).dryRun, true);
  const operations = (await world.t.caller.call('getOperations', { limit: 1000 })).operations;
  assert.equal(operations.filter((operationArg) => operationArg.kind === 'backup-drill').length, 0, 'the dry run started no drill');
  const missing = await cli.run(['backups', 'drill', '--backup', 'no-such-backup', '--node', world.nodeId]);
  assertRefusedLikeApi(missing, await refusalOf(() => world.t.caller.call('drillServiceBackup', { backupId: 'no-such-backup', nodeId: world.nodeId })));
  const created = await cli.run(['backups', 'schedules', 'create', '--service', world.service.id, '--cron', '0 2 * * *', '--drill-node', world.nodeId, '--drill-every', '2', '-o', 'json']);
  assert.equal(created.code, 0, created.stderr);
  const { schedule } = JSON.parse(created.stdout) as { schedule: { scheduleId: string; generation: number; drill: unknown } };
  assert.deepEqual(schedule.drill, { nodeId: world.nodeId, everyNth: 2 });
  await world.t.caller.call('deleteBackupSchedule', { scheduleId: schedule.scheduleId, expectedGeneration: schedule.generation });
});
