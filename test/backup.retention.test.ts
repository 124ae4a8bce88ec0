import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestCloudly, waitFor } from './helpers/cloudly.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { addClusterWorld, chunked, descriptorOf, type IBackupWorld } from './backup.fixture.js';
import { closureBlobKey, serviceBackupKind } from '../ts/manager.backup/backup.manager.js';
import { serviceBackupDeletionKind } from '../ts/manager.backup/retentionplan.js';
import type { IReq_Cloudly_Relay_BackupClusterService, IReq_Cloudly_Relay_PruneClusterNodeArchive, IServiceBackupRecord } from '../ts/interfaces/requests/backup.js';

/**
 * Retention of a schedule's backups on a real server (schedule clock 60 times faster): what goes
 * leaves the blob store and the backup list, the newest verified backup stays whatever the policy
 * says, the plan answers what would go and why, and a deletion recorded but not finished (as a
 * kill -9 leaves it) is finished by the start-up pass.
 */

let world: IBackupWorld;
const prunedNodes: string[] = [];
const closureBytes = randomBytes(256 * 1024);

before(async () => {
  const t = await startTestCloudly({ scheduleClockFactor: 60 });
  world = { t, ...(await addClusterWorld(t, 'retain')) };
  world.relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    await sendServiceDatabaseClosure(world.relay, {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closureBytes),
    }, chunked(closureBytes));
    return { snapshots: [] };
  });
  // This relay's nodes keep no archive (its backups answer no snapshots): each prune finds none.
  world.relay.addHandler<IReq_Cloudly_Relay_PruneClusterNodeArchive>('pruneClusterNodeArchive', async (request) => {
    prunedNodes.push(request.nodeId);
    return { found: false };
  });
});

after(async () => {
  await world?.t.stop();
});

const blobFileOf = (backupIdArg: string): string => path.join(world.t.dataDir, 'blobs', 'objects',
  `${createHash('sha256').update(closureBlobKey(world.clusterId, backupIdArg), 'utf8').digest('hex')}.blob`);
const retentionQuiet = (): boolean => world.t.cloudly.reconciler.busyKeys === 0;
const scheduledBackups = async (scheduleIdArg: string): Promise<IServiceBackupRecord[]> =>
  (await world.t.caller.call('getServiceBackups', { serviceId: world.service.id })).backups.filter((backupArg) => backupArg.scheduleId === scheduleIdArg);

test('keep-last 1 removes older backups with their stored closures, but never the newest verified one', async () => {
  const { schedule } = await world.t.caller.call('createBackupSchedule', {
    schedule: { target: { serviceId: world.service.id }, cron: '* * * * *', retention: { keepLast: 1 } },
  });
  await waitFor(async () => (await scheduledBackups(schedule.scheduleId)).some((backupArg) => backupArg.state === 'completed'), 'a scheduled backup completed', 30_000);
  const verifiedOne = (await scheduledBackups(schedule.scheduleId)).find((backupArg) => backupArg.state === 'completed')!;
  assert.equal((await world.t.caller.call('verifyServiceBackup', { backupId: verifiedOne.backupId })).backup.verification!.outcome, 'ok');
  const seen = new Set<string>();
  await waitFor(async () => {
    for (const backup of await scheduledBackups(schedule.scheduleId)) seen.add(backup.backupId);
    return seen.size >= 5;
  }, 'five scheduled backups made', 30_000);
  // No more occurrences (the retention stays): the backups still running complete, and retention looks again at each.
  await world.t.caller.call('updateBackupSchedule', {
    scheduleId: schedule.scheduleId, expectedGeneration: schedule.generation,
    schedule: { target: { serviceId: world.service.id }, cron: '0 0 1 1 *', retention: { keepLast: 1 } },
  });
  // What is left is the newest and the verified one.
  await waitFor(async () => {
    const backups = await scheduledBackups(schedule.scheduleId);
    return backups.every((backupArg) => backupArg.state !== 'running') && backups.filter((backupArg) => backupArg.state === 'completed').length <= 2;
  }, 'every backup ended and the older ones removed', 30_000);
  await waitFor(async () => retentionQuiet() && (await world.t.cloudly.store.find(serviceBackupDeletionKind, {})).length === 0, 'every deletion finished', 30_000);
  const left = await scheduledBackups(schedule.scheduleId);
  assert.ok(left.some((backupArg) => backupArg.backupId === verifiedOne.backupId), 'the newest verified backup stays');
  const removed = [...seen].filter((idArg) => !left.some((backupArg) => backupArg.backupId === idArg));
  assert.ok(removed.length >= 2, `removed ${removed.length}`);
  for (const backupId of removed) {
    assert.equal(fs.existsSync(blobFileOf(backupId)), false, `${backupId}'s closure left the blob store`);
  }
  assert.equal(fs.existsSync(blobFileOf(verifiedOne.backupId)), true);
  assert.ok(prunedNodes.includes(world.nodeId), 'the node was asked to prune its archive');
});

test('the retention plan answers what stays and what would go, and why; the controller then does exactly that', async () => {
  // The retention controller acts on the inserts below at once; the plan is read while it is stopped.
  await world.t.cloudly.reconciler.stop();
  const { schedule } = await world.t.caller.call('createBackupSchedule', {
    schedule: { target: { serviceId: world.service.id }, cron: '0 0 1 1 *', retention: { keepLast: 2 } },
  });
  // Backups of this schedule, as if three occurrences had run (the plan reads what is stored).
  for (const [index, createdAt] of [Date.UTC(2026, 0, 1), Date.UTC(2026, 0, 2), Date.UTC(2026, 0, 3)].entries()) {
    await world.t.cloudly.store.insert(serviceBackupKind, {
      id: `planned-${index}`, clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, createdAt, state: 'completed',
      attemptStartedAt: createdAt, orderSha256: 'x'.repeat(64), snapshots: [], scheduleId: schedule.scheduleId, occurrenceAt: createdAt,
    });
  }
  const plan = await world.t.caller.call('getBackupRetentionPlan', { scheduleId: schedule.scheduleId });
  assert.deepEqual(plan.services.map((serviceArg) => serviceArg.serviceId), [world.service.id]);
  assert.deepEqual(plan.services[0]!.decisions.map((decisionArg) => [decisionArg.backupId, decisionArg.action, decisionArg.reasons]), [
    ['planned-2', 'keep', ['last-1']],
    ['planned-1', 'keep', ['last-2']],
    ['planned-0', 'remove', ['outside-policy']],
  ]);
  await world.t.cloudly.reconciler.start();
  const storedIds = async () => (await world.t.caller.call('getServiceBackups', { serviceId: world.service.id })).backups
    .map((backupArg) => backupArg.backupId).filter((idArg) => idArg.startsWith('planned-')).sort();
  await waitFor(async () => !(await storedIds()).includes('planned-0'), 'the controller removed what the plan said would go', 15_000);
  assert.deepEqual(await storedIds(), ['planned-1', 'planned-2']);
  const none = await world.t.caller.call('createBackupSchedule', { schedule: { target: { serviceId: world.service.id }, cron: '0 0 1 1 *' } });
  const refused = await world.t.caller.call('getBackupRetentionPlan', { scheduleId: none.schedule.scheduleId }).catch((errorArg: { errorData?: { reasons?: string[] } }) => errorArg.errorData);
  assert.deepEqual((refused as { reasons: string[] }).reasons, ['backup-schedule-has-no-retention']);
});

test('a deletion recorded but not finished, as a kill -9 leaves it, is finished by the next full pass (start-up)', async () => {
  const answer = await world.t.caller.call('createServiceBackup', { clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, backupId: 'half-deleted' });
  await waitFor(async () => (await world.t.caller.call('getOperation', { operationId: answer.operation!.operationId })).operation.state === 'completed', 'the backup completed', 30_000);
  assert.equal(fs.existsSync(blobFileOf('half-deleted')), true);
  // The state a crash right after the deletion record leaves: the record, the backup and its bytes all there.
  await world.t.cloudly.store.insert(serviceBackupDeletionKind, {
    id: 'half-deleted', backupId: 'half-deleted', clusterId: world.clusterId, serviceId: world.service.id, scheduleId: 'none',
    blobKeys: [closureBlobKey(world.clusterId, 'half-deleted')], startedAt: Date.now(),
  });
  await world.t.restart();
  await waitFor(async () => !(await world.t.caller.call('getServiceBackups', { serviceId: world.service.id })).backups.some((backupArg) => backupArg.backupId === 'half-deleted')
    && (await world.t.cloudly.store.get(serviceBackupDeletionKind, 'half-deleted')) === null, 'the deletion rolled forward', 15_000);
  assert.equal(fs.existsSync(blobFileOf('half-deleted')), false);
});
