import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { refusalOf, startTestCloudly, waitFor } from './helpers/cloudly.js';
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { addClusterWorld, chunked, descriptorOf, type IBackupWorld } from './backup.fixture.js';
import { closureBlobKey } from '../ts/manager.backup/backup.manager.js';
import type { IReq_Cloudly_Relay_BackupClusterService, IServiceBackupRecord } from '../ts/interfaces/requests/backup.js';

/**
 * `verifyServiceBackup` on a real server with the filesystem blob store: the stored closure is read
 * back and hashed against the backup's receipt; the files on disk are then damaged for real (a
 * flipped byte, bytes replaced together with the store's own record, the blob removed) and each is
 * reported, never kept as good. A schedule with `verify` verifies each backup it makes.
 */

let world: IBackupWorld;
const closureBytes = randomBytes(3 * 1024 * 1024 + 17);
/** Backups whose relay answer sends no closure. */
const withoutClosure = new Set<string>();

before(async () => {
  // The schedule clock runs 60 times faster (CLOUDLY_SCHEDULE_CLOCK_FACTOR): a one-minute schedule fires every second.
  const t = await startTestCloudly({ scheduleClockFactor: 60 });
  world = { t, ...(await addClusterWorld(t, 'verify')) };
  world.relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    if (!withoutClosure.has(request.backupId)) {
      await sendServiceDatabaseClosure(world.relay, {
        backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closureBytes),
      }, chunked(closureBytes));
    }
    return { snapshots: [] };
  });
});

after(async () => {
  await world?.t.stop();
});

const backUp = async (backupIdArg: string): Promise<IServiceBackupRecord> => {
  const answer = await world.t.caller.call('createServiceBackup', { clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, backupId: backupIdArg });
  const { backup } = await outcomeOf(await followOperation(world.t.admin, answer.operation!.operationId, { timeoutMs: 30_000 })) as { backup: IServiceBackupRecord };
  return backup;
};

/** The filesystem store's files of a backup's closure (ts/core/blobstore.ts names them by the key's sha256). */
const closureFilesOf = (backupIdArg: string) => {
  const name = createHash('sha256').update(closureBlobKey(world.clusterId, backupIdArg), 'utf8').digest('hex');
  const objects = path.join(world.t.dataDir, 'blobs', 'objects');
  return { blob: path.join(objects, `${name}.blob`), record: path.join(objects, `${name}.json`) };
};

test('an intact closure verifies ok and the outcome is recorded on the backup; a dry run records nothing', async () => {
  const backup = await backUp('verify-intact');
  assert.ok(backup.closure, 'the relay sent the closure');
  const dry = await world.t.caller.call('verifyServiceBackup', { backupId: backup.backupId, dryRun: true } as never) as unknown as { backup: IServiceBackupRecord };
  assert.equal(dry.backup.verification?.outcome, 'ok');
  const before = (await world.t.caller.call('getServiceBackups', { serviceId: world.service.id })).backups.find((backupArg) => backupArg.backupId === backup.backupId)!;
  assert.equal(before.verification, undefined, 'the dry run recorded nothing');
  const { backup: verified } = await world.t.caller.call('verifyServiceBackup', { backupId: backup.backupId });
  assert.equal(verified.verification!.outcome, 'ok');
  assert.equal(verified.verification!.checkedObjects, 1);
  assert.equal(typeof verified.verification!.verifiedAt, 'number');
  const listed = (await world.t.caller.call('getServiceBackups', { serviceId: world.service.id })).backups.find((backupArg) => backupArg.backupId === backup.backupId)!;
  assert.deepEqual(listed.verification, verified.verification);
});

test('a flipped byte on disk is a mismatch naming the object', async () => {
  const backup = await backUp('verify-flipped');
  const { blob } = closureFilesOf(backup.backupId);
  const handle = await fsp.open(blob, 'r+');
  const one = Buffer.alloc(1);
  await handle.read(one, 0, 1, 1_000_000);
  one[0] = one[0]! ^ 0xff;
  await handle.write(one, 0, 1, 1_000_000);
  await handle.close();
  const { backup: verified } = await world.t.caller.call('verifyServiceBackup', { backupId: backup.backupId });
  assert.equal(verified.verification!.outcome, 'mismatch');
  assert.deepEqual(verified.verification!.failedObject, {
    path: 'closure/database.closure', size: closureBytes.byteLength, sha256: backup.closure!.descriptor.sha256, problem: 'blob-corrupt',
  });
});

test('bytes replaced together with the store\'s own record still differ from the receipt: a mismatch with what was found', async () => {
  const backup = await backUp('verify-replaced');
  const { blob, record } = closureFilesOf(backup.backupId);
  const other = randomBytes(closureBytes.byteLength);
  await fsp.writeFile(blob, other);
  const stored = JSON.parse(await fsp.readFile(record, 'utf8')) as { sha256: string };
  stored.sha256 = createHash('sha256').update(other).digest('hex');
  await fsp.writeFile(record, JSON.stringify(stored));
  const { backup: verified } = await world.t.caller.call('verifyServiceBackup', { backupId: backup.backupId });
  assert.equal(verified.verification!.outcome, 'mismatch');
  assert.equal(verified.verification!.failedObject!.problem, 'sha256-differs');
  assert.equal(verified.verification!.failedObject!.actualSha256, stored.sha256);
  assert.equal(verified.verification!.failedObject!.sha256, backup.closure!.descriptor.sha256);
});

test('a removed closure is missing; an earlier ok is replaced, never kept', async () => {
  const backup = await backUp('verify-removed');
  assert.equal((await world.t.caller.call('verifyServiceBackup', { backupId: backup.backupId })).backup.verification!.outcome, 'ok');
  await fsp.rm(closureFilesOf(backup.backupId).blob);
  const { backup: verified } = await world.t.caller.call('verifyServiceBackup', { backupId: backup.backupId });
  assert.equal(verified.verification!.outcome, 'missing');
  assert.equal(verified.verification!.failedObject!.problem, 'blob-not-found');
});

test('a backup with nothing stored, or not found, is refused with its reason', async () => {
  withoutClosure.add('verify-no-closure');
  await backUp('verify-no-closure');
  const none = await refusalOf(() => world.t.caller.call('verifyServiceBackup', { backupId: 'verify-no-closure' }));
  assert.deepEqual([none.code, none.reasons], ['conflict', ['closure-not-stored']]);
  const missing = await refusalOf(() => world.t.caller.call('verifyServiceBackup', { backupId: 'no-such-backup' }));
  assert.deepEqual([missing.code, missing.reasons], ['not-found', ['backup-not-found']]);
});

test('a schedule with verify verifies each backup it makes, and /metrics shows the ages and the interval the alert compares', async () => {
  const { schedule } = await world.t.caller.call('createBackupSchedule', {
    schedule: { target: { serviceId: world.service.id }, cron: '* * * * *', verify: true },
  });
  // The next occurrence's backup, verified before its operation ends.
  await waitFor(async () => (await world.t.caller.call('getServiceBackups', { serviceId: world.service.id })).backups
    .some((backupArg) => backupArg.scheduleId === schedule.scheduleId && backupArg.verification !== undefined), 'a scheduled backup verified', 30_000);
  const scrape = async (): Promise<(nameArg: string) => number | null> => {
    const lines = (await (await fetch(`${world.t.baseUrl}/metrics`)).text()).split('\n');
    return (nameArg) => {
      const line = lines.find((lineArg) => lineArg.startsWith(`${nameArg}{service="${world.service.id}"}`));
      return line === undefined ? null : Number(line.split(' ').at(-1));
    };
  };
  // What the alert on verified backups reads: the schedule's interval and the age of the newest verified backup.
  const metric = await scrape();
  assert.equal(metric('cloudly_backup_schedule_interval_seconds'), 60);
  const verifiedAge = metric('cloudly_backup_newest_verified_age_seconds');
  const successAge = metric('cloudly_backup_newest_success_age_seconds');
  assert.ok(verifiedAge !== null && verifiedAge >= 0 && verifiedAge < 3_600, `verified age ${verifiedAge}`);
  assert.ok(successAge !== null && successAge <= verifiedAge, `success age ${successAge} is at most the verified age ${verifiedAge}`);
  await world.t.caller.call('deleteBackupSchedule', { scheduleId: schedule.scheduleId, expectedGeneration: schedule.generation });
  await waitFor(async () => (await scrape())('cloudly_backup_schedule_interval_seconds') === null, 'no schedule covers the service any more', 10_000);
  const scheduled = (await world.t.caller.call('getServiceBackups', { serviceId: world.service.id })).backups
    .find((backupArg) => backupArg.scheduleId === schedule.scheduleId && backupArg.verification !== undefined)!;
  assert.equal(scheduled.state, 'completed');
  assert.equal(scheduled.verification!.outcome, 'ok');
});
