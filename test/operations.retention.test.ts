import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { TypedResponseError } from '@api.global/typedrequest';
import { refusalOf, startSharedDatabase, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { startBackupWorld, type IBackupWorld } from './backup.fixture.js';
import { followOperation } from '../ts/client/operations.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import { ConfigError, readConfig } from '../ts/config.js';
import { operationKind, operationProgressKind, type IOperationDocument } from '../ts/manager.operation/documents.js';
import type { OperationManager } from '../ts/manager.operation/operation.manager.js';
import type { IReq_Admin_CreateServiceBackup, IReq_Cloudly_Relay_BackupClusterService } from '../ts/interfaces/requests/backup.js';
import type { IOperation } from '../ts/interfaces/requests/operation.js';

/**
 * Retention of operations (TTL after finished), against a real Cloudly, a real relay socket and
 * the embedded database; two instances over one shared database for the concurrent sweep. Time
 * passes by the sweep's clock fact (`sweepRetention(now)`), as audit retention is tested.
 */

const dayMs = 24 * 3600_000;
let world: IBackupWorld;
let onBackup: (requestArg: IReq_Cloudly_Relay_BackupClusterService['request']) => Promise<IReq_Cloudly_Relay_BackupClusterService['response']>;
let relayCalls = 0;

const serveRelay = (relayArg: CloudlyRelayClient): void => {
  relayArg.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', (request) => {
    relayCalls++;
    return onBackup(request);
  });
};

const operations = (): OperationManager => world.t.cloudly.backupManager.operations;
/** A sweep as if `daysArg` days and a minute had passed since now. */
const afterDays = (daysArg: number): number => Date.now() + daysArg * dayMs + 60_000;
const pastRetention = (): number => afterDays(world.t.cloudly.config.operationRetentionDays);

const order = (backupIdArg: string | undefined, extraArg: Partial<IReq_Admin_CreateServiceBackup['request']> = {}) =>
  world.t.caller.call('createServiceBackup', {
    clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, ...(backupIdArg !== undefined ? { backupId: backupIdArg } : {}), ...extraArg,
  });
const operationOf = async (operationIdArg: string): Promise<IOperation> =>
  (await world.t.caller.call('getOperation', { operationId: operationIdArg })).operation;
const follow = (operationIdArg: string): Promise<IOperation> => followOperation(world.t.admin, operationIdArg, { timeoutMs: 20_000, pollMs: 40 });
const backupIds = async (): Promise<string[]> =>
  (await world.t.caller.call('getServiceBackups', { serviceId: world.service.id })).backups.map((backupArg) => backupArg.backupId);
const assertGone = async (operationIdArg: string, messageArg: string): Promise<void> => {
  const refusal = await refusalOf(() => operationOf(operationIdArg));
  assert.deepEqual([refusal.code, refusal.reasons], ['not-found', ['operation-not-found']], messageArg);
};
/** A relay answer held until `release` is called. */
const heldRelay = () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => { release = resolve; });
  return { release, answer: async () => { await held; return { snapshots: [] }; } };
};

test('CLOUDLY_OPERATION_RETENTION_DAYS defaults to 30 days and refuses what is not 1 to 36,500', () => {
  assert.equal(readConfig({}).operationRetentionDays, 30);
  assert.equal(readConfig({ CLOUDLY_OPERATION_RETENTION_DAYS: '7' }).operationRetentionDays, 7);
  for (const bad of ['0', '36501', '-1', '1.5', 'week']) {
    assert.throws(() => readConfig({ CLOUDLY_OPERATION_RETENTION_DAYS: bad }), (error: unknown) =>
      error instanceof ConfigError && error.variable === 'CLOUDLY_OPERATION_RETENTION_DAYS', bad);
  }
});

before(async () => {
  world = await startBackupWorld();
  serveRelay(world.relay);
});
after(async () => {
  await world.t.stop();
});

test('finished operations past the retention are deleted with their progress; running ones and younger ones stay', async () => {
  // Interrupted: running when its instance stopped, so `failed` with reason `interrupted`.
  onBackup = () => new Promise(() => undefined);
  const interrupted = (await order('ret-interrupted')).operation!;
  await world.t.restart();
  world.relay = await world.t.connectRelay(world.relayToken);
  serveRelay(world.relay);
  await waitFor(async () => (await world.t.caller.call('getClusterOverview', { clusterId: world.clusterId }) as { overview: { relay: { connected: boolean } } }).overview.relay.connected, 'relay back', 10_000);
  assert.deepEqual([(await operationOf(interrupted.operationId)).state, (await operationOf(interrupted.operationId)).reason], ['failed', 'interrupted']);

  onBackup = async () => ({ snapshots: [] });
  const completed = (await order('ret-completed')).operation!;
  assert.equal((await follow(completed.operationId)).state, 'completed');

  onBackup = async () => { throw new TypedResponseError('busy', { code: 'conflict', retryable: true, reasons: ['node is busy'] }); };
  const failed = (await order('ret-failed')).operation!;
  assert.equal((await follow(failed.operationId)).state, 'failed');

  const cancelHold = heldRelay();
  onBackup = cancelHold.answer;
  const cancelled = (await order('ret-cancelled')).operation!;
  assert.equal((await world.t.caller.call('cancelOperation', { operationId: cancelled.operationId })).operation.state, 'cancelled');
  cancelHold.release();

  const runningHold = heldRelay();
  onBackup = runningHold.answer;
  const running = (await order('ret-running')).operation!;
  await waitFor(async () => (await operationOf(running.operationId)).progress.phase === 'relay', 'the running operation wrote its progress');

  const finished = [interrupted, completed, failed, cancelled].map((operationArg) => operationArg.operationId);
  await waitFor(async () => (await world.t.cloudly.store.find(operationProgressKind, { id: { $in: finished } })).length === finished.length, 'progress of every finished operation written');

  // Within the retention (even a day short of it) nothing is deleted.
  assert.equal(await operations().sweepRetention(Date.now()), 0);
  assert.equal(await operations().sweepRetention(afterDays(world.t.cloudly.config.operationRetentionDays - 1)), 0);
  for (const id of [...finished, running.operationId]) {
    await operationOf(id);
  }

  // Past it, every finished operation is deleted; the running one, however old, stays.
  assert.equal(await operations().sweepRetention(pastRetention()), finished.length);
  for (const id of finished) {
    await assertGone(id, `${id} is deleted`);
    assert.equal(await world.t.cloudly.store.get(operationProgressKind, id), null, `the progress of ${id} is deleted`);
  }
  assert.equal((await operationOf(running.operationId)).state, 'running');
  assert.notEqual(await world.t.cloudly.store.get(operationProgressKind, running.operationId), null, 'the running operation keeps its progress');
  const listed = (await world.t.caller.call('getOperations', {})).operations.map((operationArg) => operationArg.operationId);
  assert.deepEqual(listed, [running.operationId], 'getOperations lists only what is kept');
  // The backups those operations made are not operations: they stay.
  assert.deepEqual((await backupIds()).filter((idArg) => idArg.startsWith('ret-')).sort(), ['ret-cancelled', 'ret-completed', 'ret-failed', 'ret-interrupted', 'ret-running']);
  // Each deletion is audited as Cloudly's own work.
  const { events } = await world.t.caller.call('getAuditEvents', { filter: { targetKind: 'CloudlyOperation', targetId: completed.operationId } });
  const removals = events.filter((eventArg) => eventArg.outcome === 'removed');
  assert.deepEqual(removals.map((eventArg) => [eventArg.actor.kind, eventArg.method]), [['cloudly', 'operationRetention']]);
  // A second sweep finds nothing more to delete.
  assert.equal(await operations().sweepRetention(pastRetention()), 0);

  runningHold.release();
  assert.equal((await follow(running.operationId)).state, 'completed');
});

test('a repeated mutationId answers its operation until retention deletes it; then the completed backup, with no new work', async () => {
  onBackup = async () => ({ snapshots: [] });
  const mutationId = `m-${randomBytes(6).toString('hex')}`;
  const first = await order(undefined, { mutationId });
  assert.equal((await follow(first.operation!.operationId)).state, 'completed');
  const callsBefore = relayCalls;
  assert.equal(await operations().sweepRetention(afterDays(world.t.cloudly.config.operationRetentionDays - 1)), 0);
  const within = await order(undefined, { mutationId });
  assert.equal(within.operation?.operationId, first.operation!.operationId, 'within the retention the same operation answers');
  assert.ok(await operations().sweepRetention(pastRetention()) >= 1);
  await assertGone(first.operation!.operationId, 'the operation is deleted past the retention');
  const later = await order(undefined, { mutationId });
  assert.equal(later.backup.backupId, first.backup.backupId);
  assert.equal(later.backup.state, 'completed');
  assert.equal(later.operation, undefined, 'answered by the completed backup, without an operation');
  assert.equal(relayCalls, callsBefore, 'the relay was not asked again');
  await assertGone(first.operation!.operationId, 'and no operation was started under that id');
});

test('an operation that finishes during a sweep, or changes after the sweep read it, is kept; a later sweep judges it again', async () => {
  onBackup = async () => ({ snapshots: [] });
  const old = (await order('race-old')).operation!;
  const changed = (await order('race-changed')).operation!;
  assert.equal((await follow(old.operationId)).state, 'completed');
  assert.equal((await follow(changed.operationId)).state, 'completed');
  const hold = heldRelay();
  onBackup = hold.answer;
  const finishing = (await order('race-finishing')).operation!;

  let read: string[] = [];
  const deleted = await operations().sweepRetention(pastRetention(), {
    afterRead: async (candidatesArg) => {
      read = candidatesArg.map((docArg) => docArg.id);
      // While the sweep holds what it read: one operation ends, another is rewritten (as another
      // instance's write would), so the generation the sweep read is no longer the stored one.
      hold.release();
      await waitFor(async () => (await world.t.cloudly.store.get(operationKind, finishing.operationId))?.state === 'completed', 'the operation finished');
      const current = (await world.t.cloudly.store.get(operationKind, changed.operationId))!;
      assert.ok(await world.t.cloudly.store.swap(operationKind, current.id, current.generation, { set: { endedAt: current.endedAt! } }));
    },
  });
  assert.ok(read.includes(old.operationId) && read.includes(changed.operationId), 'both finished operations were candidates');
  assert.ok(!read.includes(finishing.operationId), 'the running one was not');
  assert.equal(deleted, read.length - 1, 'every candidate but the changed one was deleted');
  await assertGone(old.operationId, 'the unchanged candidate is deleted');
  assert.equal((await operationOf(changed.operationId)).state, 'completed', 'the candidate changed meanwhile is kept');
  const justFinished = await operationOf(finishing.operationId);
  assert.equal(justFinished.state, 'completed', 'the operation that finished during the sweep is kept');
  // Both are finished and past the retention by the same clock: the next sweep deletes them. So is
  // progress left without its operation (an instance that died between the two deletions).
  await world.t.cloudly.store.mutate(operationProgressKind, 'op-orphaned', () => ({ kind: 'create', doc: { id: 'op-orphaned', phase: 'done' as const, bytesDone: 0, bytesTotal: null, updatedAt: Date.now(), heartbeatAt: Date.now() } }));
  assert.equal(await operations().sweepRetention(pastRetention()), 2);
  await assertGone(changed.operationId, 'deleted by the next sweep');
  await assertGone(finishing.operationId, 'deleted by the next sweep');
  assert.equal(await world.t.cloudly.store.get(operationProgressKind, 'op-orphaned'), null, 'orphaned progress is deleted');
});

test('two instances sweeping one database at once delete each finished operation once, keep the running ones, and neither fails', async () => {
  const database = await startSharedDatabase();
  const instances: ITestCloudly[] = [];
  try {
    instances.push(await startTestCloudly(database.shared));
    instances.push(await startTestCloudly(database.shared));
    const [a, b] = instances;
    const begin = async (tArg: ITestCloudly, idArg: string): Promise<IOperationDocument> => (await tArg.cloudly.backupManager.operations.begin({
      operationId: idArg,
      kind: 'service-backup',
      method: 'createServiceBackup',
      clusterId: 'cluster-shared',
      serviceId: 'service-shared',
      nodeId: 'node-shared',
      backupId: `backup-${idArg}`,
      requestedBy: tArg.identity.userId,
      requestSha256: idArg,
    })).doc;
    const finished: string[] = [];
    const running: string[] = [];
    for (let index = 0; index < 40; index++) {
      // Started on either instance, ended by an administrator's cancel on the other.
      const starter = index % 2 === 0 ? a : b;
      const canceller = index % 2 === 0 ? b : a;
      const doc = await begin(starter, `op-shared-${index}`);
      if (index % 8 === 0) {
        running.push(doc.id);
        continue;
      }
      await canceller.admin.call('cancelOperation', { operationId: doc.id });
      finished.push(doc.id);
    }
    const now = afterDays(a.cloudly.config.operationRetentionDays);
    const [deletedByA, deletedByB] = await Promise.all([
      a.cloudly.backupManager.operations.sweepRetention(now),
      b.cloudly.backupManager.operations.sweepRetention(now),
    ]);
    assert.equal(deletedByA + deletedByB, finished.length, `each finished operation deleted exactly once (a ${deletedByA}, b ${deletedByB})`);
    const kept = (await a.admin.call('getOperations', {})).operations;
    assert.deepEqual(kept.map((operationArg) => operationArg.operationId).sort(), [...running].sort(), 'exactly the running operations are left');
    assert.ok(kept.every((operationArg) => operationArg.state === 'running'));
    for (const id of finished.slice(0, 3)) {
      const refusal = await refusalOf(() => b.admin.call('getOperation', { operationId: id }));
      assert.deepEqual([refusal.code, refusal.reasons], ['not-found', ['operation-not-found']]);
    }
    // One removal event per deleted operation: no deletion was done twice.
    const { events } = await a.admin.call('getAuditEvents', { filter: { targetKind: 'CloudlyOperation', method: 'operationRetention' }, limit: 200 });
    assert.deepEqual(events.map((eventArg) => eventArg.target.id).sort(), [...finished].sort());
  } finally {
    for (const instance of instances.reverse()) {
      await instance.stop();
    }
    await database.stop();
  }
});
