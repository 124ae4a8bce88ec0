import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { followOperation } from '../ts/client/operations.js';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';
import type { SimulatedCluster } from '../ts/sim/cluster.js';
import { generatedClosureSha256 } from '../ts/sim/generate.js';
import { closureArchiveObjectPath } from '../ts/manager.backup/backup.manager.js';
import { backupDrillKind, serviceBackupKind, type IBackupDrillDocument } from '../ts/manager.backup/documents.js';
import { refusalOf, startTestCloudly, testAdminPassword, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { IBackupDrillReceipt, IServiceBackupRecord } from '../ts/interfaces/requests/backup.js';

/**
 * Restore drills on a real server against the simulator (in this process, over real sockets):
 * the simulated node stages the closure's bytes (hashing them itself), reports its status, executes
 * and cleans up. A drill on demand and a schedule's drill record their receipts on the backup; a
 * node that fails the restore, and a relay dropped in the middle of a drill, end as failed receipts
 * whose scratch restore is cleaned up; retention keeps a backup while a drill uses it; every bad
 * request is refused with its reasons. Schedules run on a clock 60 times faster than the wall clock.
 */

const seed = 11;
const closureBytes = 300_001;
let t: ITestCloudly;
let fleet: SimFleet;
let cluster: SimulatedCluster;
let clusterId: string;
let serviceId: string;

before(async () => {
  t = await startTestCloudly({ scheduleClockFactor: 60 });
  const { config } = readSimConfig([
    '--bootstrap', '--url', t.baseUrl, '--admin-password', testAdminPassword, '--name-prefix', 'drill',
    '--clusters', '1', '--nodes', '2', '--services', '1', '--start-delay-ms', '100',
    '--closure-bytes', String(closureBytes), '--seed', String(seed), '--reconnect-base-ms', '100', '--reconnect-cap-ms', '500',
  ], {});
  fleet = new SimFleet(config, () => undefined);
  await fleet.start();
  cluster = fleet.clusters[0]!;
  await waitFor(() => cluster.clusterId !== null, 'the simulated cluster registered');
  clusterId = cluster.clusterId!;
  const { services } = await t.caller.call('getServices', {});
  serviceId = services.find((serviceArg) => serviceArg.clusterId === clusterId)!.id;
});

after(async () => {
  await fleet?.stop();
  await t?.stop();
});

const backupOf = async (backupIdArg: string): Promise<IServiceBackupRecord | undefined> =>
  (await t.caller.call('getServiceBackups', { serviceId })).backups.find((backupArg) => backupArg.backupId === backupIdArg);

const backUp = async (backupIdArg: string): Promise<IServiceBackupRecord> => {
  const { operation } = await t.caller.call('createServiceBackup', { clusterId, nodeId: 'node-1', serviceId, backupId: backupIdArg });
  const done = await followOperation(t.caller, operation!.operationId, { timeoutMs: 30_000, pollMs: 50 });
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  return (await backupOf(backupIdArg))!;
};

/** The drill receipt on the backup once it satisfies the predicate. */
const receiptWhen = async (backupIdArg: string, predicateArg: (receiptArg: IBackupDrillReceipt) => boolean, whatArg: string): Promise<IBackupDrillReceipt> => {
  let receipt: IBackupDrillReceipt | undefined;
  await waitFor(async () => {
    receipt = (await backupOf(backupIdArg))?.drill;
    return receipt !== undefined && predicateArg(receipt);
  }, `${whatArg}: ${JSON.stringify(receipt)}`, 30_000);
  return receipt!;
};

test('a drill on demand restores the backup onto the drill node byte for byte, cleans up and records its receipt on the backup', async () => {
  const backup = await backUp('drill-me');
  const operationsBefore = (await t.caller.call('getOperations', { limit: 1000 })).operations.length;
  const dry = await t.caller.call('drillServiceBackup', { backupId: backup.backupId, nodeId: 'node-2', dryRun: true } as never) as unknown as { dryRun: boolean };
  assert.equal(dry.dryRun, true);
  assert.equal((await t.caller.call('getOperations', { limit: 1000 })).operations.length, operationsBefore, 'the dry run started nothing');

  const { drillId, operation } = await t.caller.call('drillServiceBackup', { backupId: backup.backupId, nodeId: 'node-2' });
  assert.equal(operation.kind, 'backup-drill');
  const ended = await followOperation(t.caller, operation.operationId, { timeoutMs: 30_000, pollMs: 50 });
  assert.equal(ended.state, 'completed', JSON.stringify(ended.error));
  const receipt = await receiptWhen(backup.backupId, (receiptArg) => receiptArg.outcome === 'ok' && receiptArg.cleanedUp, 'the drill recorded ok and cleaned up');
  assert.equal(receipt.drillId, drillId);
  assert.equal(receipt.nodeId, 'node-2');
  assert.equal(receipt.bytes, closureBytes);
  assert.equal(receipt.bytes, backup.closure!.descriptor.byteLength);
  assert.ok(receipt.finishedAt! >= receipt.startedAt);
  assert.equal(receipt.durationMs, receipt.finishedAt! - receipt.startedAt);
  assert.equal(receipt.scheduleId, undefined);
  // The node's own record: what it staged hashes to the backup's closure, the bytes the seed generated.
  const onNode = cluster.isolatedRestores.get(receipt.restoreId)!;
  assert.equal(onNode.state.targetNodeName, 'node-2');
  assert.equal(onNode.state.phase, 'cleaned-up');
  assert.equal(onNode.stagedSha256.get(closureArchiveObjectPath), backup.closure!.descriptor.sha256);
  assert.equal(onNode.stagedSha256.get(closureArchiveObjectPath), await generatedClosureSha256(seed, serviceId, backup.backupId, closureBytes));
});

test('bad drill requests and drill members are refused with every reason, and nothing is started or stored', async () => {
  const missing = await refusalOf(() => t.caller.call('drillServiceBackup', { backupId: 'no-such-backup', nodeId: 'node-2' }));
  assert.deepEqual([missing.code, missing.reasons], ['not-found', ['backup-not-found']]);
  const noNode = await refusalOf(() => t.caller.call('drillServiceBackup', { backupId: 'drill-me', nodeId: 'node-9' }));
  assert.deepEqual([noNode.code, noNode.reasons], ['not-found', ['node-not-found']]);
  const badId = await refusalOf(() => t.caller.call('drillServiceBackup', { backupId: 'drill-me', nodeId: 'node-2', drillId: 'mine' }));
  assert.deepEqual([badId.code, badId.reasons], ['invalid-request', ['backup-drill-id-invalid']]);

  const malformed = await refusalOf(() => t.caller.call('createBackupSchedule', {
    schedule: { target: { serviceId }, cron: '0 3 * * *', drill: { everyNth: 0, when: 'always' } as never },
  }));
  assert.equal(malformed.code, 'invalid-request');
  const paths = (malformed.causes as Array<{ path: string }>).map((causeArg) => causeArg.path).sort();
  assert.deepEqual(paths, ['request.schedule.drill.everyNth', 'request.schedule.drill.nodeId', 'request.schedule.drill.when']);
  const spanning = await refusalOf(() => t.caller.call('createBackupSchedule', {
    schedule: { target: { organizationId: 'org-1' }, cron: '0 3 * * *', drill: { nodeId: 'node-2' } },
  }));
  assert.equal(spanning.code, 'invalid-request');
  assert.deepEqual((spanning.causes as Array<{ path: string }>).map((causeArg) => causeArg.path), ['request.schedule.drill']);
  const unknownNode = await refusalOf(() => t.caller.call('createBackupSchedule', {
    schedule: { target: { serviceId }, cron: '0 3 * * *', drill: { nodeId: 'node-9' } },
  }));
  assert.deepEqual([unknownNode.code, unknownNode.reasons], ['not-found', ['backup-schedule-drill-node-not-found']]);
  const dry = await t.caller.call('createBackupSchedule', { schedule: { target: { serviceId }, cron: '0 3 * * *', drill: { nodeId: 'node-2', everyNth: 3 } }, dryRun: true } as never) as unknown as { schedule: { drill: unknown } };
  assert.deepEqual(dry.schedule.drill, { nodeId: 'node-2', everyNth: 3 });
  assert.deepEqual((await t.caller.call('getBackupSchedules', { serviceId })).schedules, [], 'nothing stored');
});

const scrape = async (): Promise<(nameArg: string) => number | null> => {
  const lines = (await (await fetch(`${t.baseUrl}/metrics`)).text()).split('\n');
  return (nameArg) => {
    const line = lines.find((lineArg) => lineArg.startsWith(`${nameArg}{service="${serviceId}"}`));
    return line === undefined ? null : Number(line.split(' ').at(-1));
  };
};

test('a node that fails the restore ends the drill failed with the reason; its scratch restore is cleaned up; the metrics count it', async () => {
  // After the successful drill of the first test: its age, and no failed drill since.
  const before = await scrape();
  const age = before('cloudly_backup_newest_drill_age_seconds');
  assert.ok(age !== null && age >= 0 && age < 3_600, `drill age ${age}`);
  assert.equal(before('cloudly_backup_drills_failed'), 0);
  const backup = await backUp('drill-fails');
  fleet.config.faultDrillFail = true;
  try {
    const { operation } = await t.caller.call('drillServiceBackup', { backupId: backup.backupId, nodeId: 'node-2' });
    const ended = await followOperation(t.caller, operation.operationId, { timeoutMs: 30_000, pollMs: 50 });
    assert.equal(ended.state, 'failed');
  } finally {
    fleet.config.faultDrillFail = false;
  }
  const receipt = await receiptWhen(backup.backupId, (receiptArg) => receiptArg.outcome !== 'running' && receiptArg.cleanedUp, 'the failed drill recorded and cleaned up');
  assert.equal(receipt.outcome, 'failed');
  assert.equal(receipt.reason, 'isolated-restore-failed');
  assert.match(receipt.detail!, /simulated restore failure/);
  assert.equal(cluster.isolatedRestores.get(receipt.restoreId)!.state.phase, 'cleaned-up');
  assert.equal((await scrape())('cloudly_backup_drills_failed'), 1, 'one drill failed since the last successful one');
});

test('a schedule drills each new backup once it verified, and records the receipt with the schedule', async () => {
  const { schedule } = await t.caller.call('createBackupSchedule', {
    schedule: { target: { serviceId, nodeId: 'node-1' }, cron: '* * * * *', verify: true, drill: { nodeId: 'node-2' } },
  });
  assert.deepEqual(schedule.drill, { nodeId: 'node-2' });
  let drilled: IServiceBackupRecord | undefined;
  await waitFor(async () => {
    drilled = (await t.caller.call('getServiceBackups', { serviceId })).backups
      .find((backupArg) => backupArg.scheduleId === schedule.scheduleId && backupArg.drill?.outcome === 'ok' && backupArg.drill.cleanedUp);
    return drilled !== undefined;
  }, 'a scheduled backup drilled', 30_000);
  // No more occurrences.
  await t.caller.call('deleteBackupSchedule', { scheduleId: schedule.scheduleId, expectedGeneration: schedule.generation });
  assert.equal(drilled!.verification?.outcome, 'ok', 'drilled after it verified');
  assert.equal(drilled!.drill!.scheduleId, schedule.scheduleId);
  assert.equal(drilled!.drill!.bytes, closureBytes);
  assert.equal(cluster.isolatedRestores.get(drilled!.drill!.restoreId)!.stagedSha256.get(closureArchiveObjectPath), drilled!.closure!.descriptor.sha256);
  // Drilled once: the receipt's operation is the only drill operation of that backup.
  const drills = (await t.caller.call('getOperations', { limit: 1000 })).operations.filter((operationArg) => operationArg.kind === 'backup-drill' && operationArg.backupId === drilled!.backupId);
  assert.equal(drills.length, 1);
});

test('retention keeps a backup while a drill uses it; a relay dropped mid-drill fails the drill, and its cleanup waits for the relay to come back', async () => {
  const { schedule } = await t.caller.call('createBackupSchedule', { schedule: { target: { serviceId, nodeId: 'node-1' }, cron: '* * * * *' } });
  const completed = async () => (await t.caller.call('getServiceBackups', { serviceId })).backups
    .filter((backupArg) => backupArg.scheduleId === schedule.scheduleId && backupArg.state === 'completed')
    .sort((x, y) => x.createdAt - y.createdAt);
  await waitFor(async () => (await completed()).length >= 2, 'two scheduled backups', 30_000);
  const quiet = await t.caller.call('updateBackupSchedule', { scheduleId: schedule.scheduleId, expectedGeneration: schedule.generation, schedule: { target: { serviceId, nodeId: 'node-1' }, cron: '0 0 1 1 *' } });
  await waitFor(async () => (await t.caller.call('getServiceBackups', { serviceId })).backups.every((backupArg) => backupArg.state !== 'running'), 'no backup running', 30_000);
  const older = (await completed())[0]!;

  // The drill stalls once staged (the node holds its status answer), so it runs while retention looks.
  fleet.config.faultDrillStallMs = 60_000;
  const { operation } = await t.caller.call('drillServiceBackup', { backupId: older.backupId, nodeId: 'node-2' });
  const restoreId = `restore-${operation.operationId.slice('op-'.length)}`;
  await waitFor(() => cluster.isolatedRestores.get(restoreId)?.state.phase === 'ready', 'the drill staged the closure on the node', 30_000);
  const withRetention = await t.caller.call('updateBackupSchedule', {
    scheduleId: schedule.scheduleId, expectedGeneration: quiet.schedule.generation,
    schedule: { target: { serviceId, nodeId: 'node-1' }, cron: '0 0 1 1 *', retention: { keepLast: 1 } },
  });
  await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'retention looked', 30_000);
  const plan = await t.caller.call('getBackupRetentionPlan', { scheduleId: schedule.scheduleId });
  const decision = plan.services[0]!.decisions.find((decisionArg) => decisionArg.backupId === older.backupId)!;
  assert.deepEqual([decision.action, decision.reasons], ['keep', ['in-use']]);
  assert.ok(await backupOf(older.backupId), 'the drilled backup is still there');

  // Retention removes the backup (and its receipts) as soon as the drill lets go of it, which can be
  // before a poll sees the receipt: each receipt is read as it is committed (a read waits one turn,
  // the removal after it at least one journal sync), and the node's phase when the backup goes.
  const receipts: IBackupDrillDocument[] = [];
  let phaseWhenRemoved: string | undefined;
  const stopListening = t.cloudly.store.onCommitted((kindArg, idArg, ownersArg) => {
    if (kindArg === backupDrillKind && ownersArg.generation !== undefined) {
      void t.cloudly.store.get(backupDrillKind, idArg).then((docArg) => docArg && docArg.backupId === older.backupId && receipts.push(docArg));
    }
    if (kindArg === serviceBackupKind && idArg === older.backupId && ownersArg.generation === undefined) {
      phaseWhenRemoved = cluster.isolatedRestores.get(restoreId)?.state.phase;
    }
  });
  try {
    // The relay drops while the node holds the status answer; the relay reconnects on its own.
    fleet.config.faultDrillStallMs = 0;
    const connectionsBefore = fleet.counters.registrations;
    t.cloudly.relays.activeSession(clusterId)!.peer.terminate();
    const ended = await followOperation(t.caller, operation.operationId, { timeoutMs: 30_000, pollMs: 50 });
    assert.equal(ended.state, 'failed');
    await waitFor(() => receipts.some((receiptArg) => receiptArg.outcome === 'failed' && receiptArg.cleanedUp),
      `the failed drill cleaned up after the relay came back: ${JSON.stringify(receipts.at(-1))}`, 30_000);
    const receipt = receipts.find((receiptArg) => receiptArg.outcome === 'failed' && receiptArg.cleanedUp)!;
    assert.equal(receipt.reason, 'relay-disconnected');
    assert.equal(receipt.cleanupReason, undefined);
    assert.ok(fleet.counters.registrations > connectionsBefore, 'the relay reconnected');
    assert.equal(cluster.isolatedRestores.get(restoreId)!.state.phase, 'cleaned-up');
    // Let go of: retention removes it now, and it kept it until the node had cleaned up.
    await waitFor(async () => (await backupOf(older.backupId)) === undefined, 'retention removed the backup once the drill let go of it', 30_000);
    assert.equal(phaseWhenRemoved, 'cleaned-up', 'retention kept the backup while its drill still owed the cleanup');
  } finally {
    stopListening();
  }
  await waitFor(async () => (await t.cloudly.store.find(backupDrillKind, { backupId: older.backupId })).length === 0, 'the removed backup\'s drill receipt went with it', 30_000);
  await t.caller.call('deleteBackupSchedule', { scheduleId: schedule.scheduleId, expectedGeneration: withRetention.schedule.generation });
});
