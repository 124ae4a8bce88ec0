import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { TypedResponseError } from '@api.global/typedrequest';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { refusalOf, startTestCloudly, testAdminPassword, testAdminUsername, waitFor } from './helpers/cloudly.js';
import { CloudlyRefusal } from '../ts/core/refusal.js';
import { cloudlyProcessEnv, killHard, startCloudlyProcess } from './helpers/process.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { descriptorOf, sha256Of, startBackupWorld, type IBackupWorld } from './backup.fixture.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import type {
  IReq_Admin_CreateServiceBackup,
  IReq_Cloudly_Relay_BackupClusterService,
  IReq_Cloudly_Relay_RestoreClusterService,
} from '../ts/interfaces/requests/backup.js';
import type { IOperation } from '../ts/interfaces/requests/operation.js';
import { fetchServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { assertFieldProblems } from './helpers/refusals.js';

/**
 * Long work as operations, against a real Cloudly and a real relay socket: a backup answered at
 * once and observed from running to completed with growing progress; a restore likewise; a
 * repeated mutationId; a cancel while the relay holds the call; an operation whose instance died.
 */

let world: IBackupWorld;
/** What the relay does when Cloudly asks for a backup; each test sets it. */
let onBackup: (requestArg: IReq_Cloudly_Relay_BackupClusterService['request']) => Promise<IReq_Cloudly_Relay_BackupClusterService['response']>;
const snapshotsOf = (bytesArg: Buffer) => [{ type: 'database' as const, snapshotId: 's1', resourceName: 'db', databaseName: 'app', createdAt: 1, sizeBytes: bytesArg.byteLength }];

const serveRelay = (relayArg: CloudlyRelayClient): void => {
  relayArg.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', (request) => onBackup(request));
  relayArg.addHandler<IReq_Cloudly_Relay_RestoreClusterService>('restoreClusterService', async (request) => {
    // The relay fetches the closure back through Cloudly, slowly, as a node writing it would.
    const fetched = await fetchServiceDatabaseClosure(relayArg, { backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId });
    for await (const _chunk of fetched.bytes) {
      await new Promise((resolve) => setTimeout(resolve, 40));
    }
    return { restored: request.snapshots };
  });
};

/** Bytes in chunks with a pause after each, so an upload takes a while. */
async function* slowly(bytesArg: Buffer, chunkArg: number, pauseMsArg: number): AsyncIterable<Buffer> {
  for (let offset = 0; offset < bytesArg.byteLength; offset += chunkArg) {
    yield bytesArg.subarray(offset, offset + chunkArg);
    await new Promise((resolve) => setTimeout(resolve, pauseMsArg));
  }
}

const order = (backupIdArg: string, extraArg: Partial<IReq_Admin_CreateServiceBackup['request']> = {}) =>
  world.t.caller.call('createServiceBackup', {
    clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, backupId: backupIdArg, ...extraArg,
  });
const operationOf = async (operationIdArg: string): Promise<IOperation> =>
  (await world.t.caller.call('getOperation', { operationId: operationIdArg })).operation;
const backupOf = async (backupIdArg: string) =>
  (await world.t.caller.call('getServiceBackups', { serviceId: world.service.id })).backups.find((backupArg) => backupArg.backupId === backupIdArg)!;

before(async () => {
  world = await startBackupWorld();
  serveRelay(world.relay);
});
after(async () => {
  await world.t.stop();
});

const bytes = randomBytes(3 * 1024 * 1024 + 11);

test('a backup answers at once and is observed from running to completed with growing progress', async () => {
  let release!: () => void;
  const relayHolds = new Promise<void>((resolve) => { release = resolve; });
  onBackup = async (request) => {
    await relayHolds;
    await sendServiceDatabaseClosure(world.relay, {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(bytes),
    }, slowly(bytes, 128 * 1024, 60));
    return { snapshots: snapshotsOf(bytes) };
  };
  const answer = await order('op-progress');
  // Answered while the relay has not even started: running, nothing moved yet.
  assert.equal(answer.backup.state, 'running');
  assert.equal(answer.operation!.state, 'running');
  assert.equal(answer.operation!.kind, 'service-backup');
  assert.equal(answer.operation!.backupId, 'op-progress');
  assert.equal(answer.operation!.requestedBy, world.t.identity.userId);
  assert.equal((await backupOf('op-progress')).state, 'running', 'getServiceBackups shows the stored state');
  release();
  const seen: IOperation[] = [];
  const ended = await followOperation(world.t.admin, answer.operation!.operationId, { timeoutMs: 30_000, pollMs: 40, onProgress: (operationArg) => seen.push(operationArg) });
  assert.equal(ended.state, 'completed');
  assert.equal(ended.progress.phase, 'done');
  assert.equal(ended.progress.bytesDone, bytes.byteLength);
  assert.equal(ended.progress.bytesTotal, bytes.byteLength);
  assert.ok(ended.endedAt! >= ended.startedAt);
  const transferring = seen.filter((operationArg) => operationArg.state === 'running' && operationArg.progress.phase === 'transfer');
  const moved = transferring.map((operationArg) => operationArg.progress.bytesDone);
  assert.ok(moved.some((bytesArg) => bytesArg > 0 && bytesArg < bytes.byteLength), `progress in between was observed: ${moved.join(', ')}`);
  assert.deepEqual(moved, [...moved].sort((a, b) => a - b), 'progress only grows');
  assert.ok(transferring.every((operationArg) => operationArg.progress.bytesTotal === bytes.byteLength));
  // The outcome is what the blocking call used to answer.
  const { backup } = outcomeOf(ended);
  assert.equal(backup.state, 'completed');
  assert.equal(backup.closure?.descriptor.sha256, sha256Of(bytes));
  assert.deepEqual(await backupOf('op-progress'), backup);
});

test('a restore is an operation too, with the bytes sent as progress and `restored` in its result', async () => {
  const { operation } = await world.t.caller.call('restoreServiceBackup', { backupId: 'op-progress' });
  assert.equal(operation.state, 'running');
  assert.equal(operation.kind, 'service-restore');
  const seen: IOperation[] = [];
  const ended = await followOperation(world.t.admin, operation.operationId, { timeoutMs: 30_000, pollMs: 40, onProgress: (operationArg) => seen.push(operationArg) });
  assert.equal(ended.state, 'completed');
  assert.equal(ended.progress.bytesDone, bytes.byteLength);
  assert.ok(seen.some((operationArg) => operationArg.state === 'running' && operationArg.progress.phase === 'transfer'), 'the transfer phase was seen');
  assert.deepEqual(outcomeOf(ended).restored, snapshotsOf(bytes));
});

test('the same mutationId answers the same operation; another request under it is refused', async () => {
  let calls = 0;
  onBackup = async () => {
    calls++;
    await new Promise((resolve) => setTimeout(resolve, 300));
    return { snapshots: [] };
  };
  const mutationId = `m-${randomBytes(6).toString('hex')}`;
  const first = await order(undefined as never, { mutationId, backupId: undefined });
  const [second, third] = await Promise.all([order(undefined as never, { mutationId, backupId: undefined }), order(undefined as never, { mutationId, backupId: undefined })]);
  assert.equal(second.operation!.operationId, first.operation!.operationId);
  assert.equal(third.operation!.operationId, first.operation!.operationId);
  assert.equal(second.backup.backupId, first.backup.backupId);
  const ended = await followOperation(world.t.admin, first.operation!.operationId, { timeoutMs: 20_000 });
  assert.equal(ended.state, 'completed');
  const after = await order(undefined as never, { mutationId, backupId: undefined });
  assert.equal(after.operation!.operationId, first.operation!.operationId);
  assert.equal(after.operation!.state, 'completed', 'answered as the operation stands now');
  assert.equal(calls, 1, 'the relay was asked once');
  const reused = await refusalOf(() => order(undefined as never, { mutationId, backupId: undefined, tags: { other: 'request' } }));
  assert.equal(reused.code, 'invalid-request');
  assert.deepEqual(reused.reasons, ['mutation-id-reused']);
  // Without a mutationId, repeating a running order answers its running operation instead of a conflict.
  onBackup = async () => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    return { snapshots: [] };
  };
  const running = await order('op-repeat');
  const repeated = await order('op-repeat');
  assert.equal(repeated.operation!.operationId, running.operation!.operationId);
  await followOperation(world.t.admin, running.operation!.operationId, { timeoutMs: 20_000 });
});

test('a cancel stops the wait at once, aborts the upload in flight, and what the relay sends later is discarded', async () => {
  let relayFinished!: (valueArg: unknown) => void;
  const relayOutcome = new Promise((resolve) => { relayFinished = resolve; });
  let uploadStarted!: () => void;
  const uploading = new Promise<void>((resolve) => { uploadStarted = resolve; });
  onBackup = async (request) => {
    try {
      await sendServiceDatabaseClosure(world.relay, {
        backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(bytes),
      }, (async function* () {
        uploadStarted();
        yield* slowly(bytes, 64 * 1024, 100);
      })());
      relayFinished('uploaded');
    } catch (error) {
      relayFinished(error);
    }
    return { snapshots: snapshotsOf(bytes) };
  };
  const { operation } = await order('op-cancel');
  await uploading;
  await waitFor(async () => (await operationOf(operation!.operationId)).progress.bytesDone > 0, 'bytes moved');
  const dry = await world.t.caller.call('cancelOperation', { operationId: operation!.operationId, dryRun: true } as never) as unknown as { dryRun: boolean; operation: IOperation };
  assert.deepEqual([dry.dryRun, dry.operation.state], [true, 'cancelled'], 'a dry run answers the cancel it would record');
  assert.equal((await operationOf(operation!.operationId)).state, 'running', 'and cancels nothing');
  const cancelled = await world.t.caller.call('cancelOperation', { operationId: operation!.operationId });
  assert.equal(cancelled.operation.state, 'cancelled');
  assert.equal(cancelled.operation.reason, 'cancelled');
  const outcome = await relayOutcome;
  assert.ok(outcome instanceof Error, 'the relay\'s upload was aborted');
  await waitFor(async () => (await backupOf('op-cancel')).state === 'failed', 'the backup recorded as failed');
  const backup = await backupOf('op-cancel');
  assert.equal(backup.failureReason, 'operation-cancelled');
  assert.equal(backup.closure, undefined, 'nothing of the aborted upload was recorded');
  // The relay's late answer changed nothing: still cancelled, still failed.
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal((await operationOf(operation!.operationId)).state, 'cancelled');
  assert.equal((await backupOf('op-cancel')).state, 'failed');
  assert.throws(() => outcomeOf(cancelled.operation), (error: unknown) => error instanceof CloudlyRefusal);
  const again = await refusalOf(() => world.t.caller.call('cancelOperation', { operationId: operation!.operationId }));
  assert.equal(again.code, 'conflict');
  assert.deepEqual([again.reasons, again.causes], [['operation-not-running'], [{ path: 'operation.state', message: 'is cancelled' }]]);
  const missing = await refusalOf(() => world.t.caller.call('cancelOperation', { operationId: 'op-missing' }));
  assert.deepEqual([missing.code, missing.reasons], ['not-found', ['operation-not-found']]);
});

test('a relay refusal fails the operation with the refusal the call would have thrown', async () => {
  onBackup = async () => { throw new TypedResponseError('busy', { code: 'conflict', retryable: true, reasons: ['node is busy'] }); };
  const { operation } = await order('op-refused');
  const ended = await followOperation(world.t.admin, operation!.operationId, { timeoutMs: 20_000 });
  assert.equal(ended.state, 'failed');
  assert.equal(ended.reason, 'relay-refused');
  assert.deepEqual(ended.error, { code: 'unavailable', retryable: true, reasons: ['relay-refused'], relayError: { code: 'conflict', retryable: true, reasons: ['node is busy'] } });
  const backup = await backupOf('op-refused');
  assert.deepEqual([backup.state, backup.failureReason], ['failed', 'relay-refused']);
});

test('getOperations filters by cluster, service and state, and pages without losing or repeating one', async () => {
  const all = (await world.t.caller.call('getOperations', {})).operations;
  assert.ok(all.length >= 6);
  const byService = (await world.t.caller.call('getOperations', { serviceId: world.service.id })).operations;
  assert.equal(byService.length, all.length);
  assert.deepEqual((await world.t.caller.call('getOperations', { clusterId: 'cluster-none' })).operations, []);
  const failed = (await world.t.caller.call('getOperations', { state: 'failed' })).operations;
  assert.ok(failed.length >= 1 && failed.every((operationArg) => operationArg.state === 'failed'));
  const paged: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await world.t.caller.call('getOperations', { limit: 2, ...(cursor ? { cursor } : {}) });
    assert.ok(page.operations.length <= 2);
    paged.push(...page.operations.map((operationArg) => operationArg.operationId));
    cursor = page.nextCursor;
  } while (cursor);
  assert.deepEqual([...paged].sort(), all.map((operationArg) => operationArg.operationId).sort());
  const badState = await refusalOf(() => world.t.caller.call('getOperations', { state: 'sleeping' as never }));
  assertFieldProblems(badState, [
    ['request.state', 'field-not-supported', 'must be one of running, completed, failed, cancelled'],
  ]);
});

test('operations page newest first: every operation that existed is seen exactly once while new ones start between pages', async () => {
  onBackup = async () => { throw new TypedResponseError('busy', { code: 'conflict', retryable: true, reasons: ['node is busy'] }); };
  for (let index = 0; index < 5; index++) {
    await order(`op-page-seed-${index}`);
  }
  const existing = (await world.t.caller.call('getOperations', {})).operations;
  assert.ok(existing.length >= 7);
  const startedAts = existing.map((operationArg) => operationArg.startedAt);
  assert.deepEqual(startedAts, [...startedAts].sort((left, right) => right - left), 'the whole list is newest first');
  const seen: IOperation[] = [];
  const started: string[] = [];
  let cursor: string | undefined;
  let round = 0;
  do {
    const page = await world.t.caller.call('getOperations', { limit: 2, ...(cursor ? { cursor } : {}) });
    assert.ok(page.operations.length <= 2);
    seen.push(...page.operations);
    cursor = page.nextCursor;
    assert.ok(cursor === undefined || cursor.length <= 160, `the cursor is short (${cursor?.length} characters)`);
    // A new operation starts between every two pages.
    started.push((await order(`op-page-new-${round++}`)).operation!.operationId);
  } while (cursor);
  const seenIds = seen.map((operationArg) => operationArg.operationId);
  assert.equal(new Set(seenIds).size, seenIds.length, 'no operation is seen twice');
  // Those that existed are seen, in the whole list's order; one started since may only appear where its start puts it.
  assert.deepEqual(seenIds.filter((idArg) => !started.includes(idArg)), existing.map((operationArg) => operationArg.operationId));
  const seenStarts = seen.map((operationArg) => operationArg.startedAt);
  assert.deepEqual(seenStarts, [...seenStarts].sort((left, right) => right - left), 'pages are newest first');
});

test('an instance that stops while an operation runs marks it failed `interrupted`; the backup can be ordered again after the restart', async () => {
  onBackup = () => new Promise(() => undefined);
  const { operation } = await order('op-crash');
  assert.equal(operation!.state, 'running');
  // The test helper's restart stops gracefully (the SIGKILL case is the next test).
  await world.t.restart();
  const interrupted = await operationOf(operation!.operationId);
  assert.equal(interrupted.state, 'failed');
  assert.equal(interrupted.reason, 'interrupted');
  const backup = await backupOf('op-crash');
  assert.deepEqual([backup.state, backup.failureReason], ['failed', 'interrupted']);
  world.relay = await world.t.connectRelay(world.relayToken);
  serveRelay(world.relay);
  onBackup = async () => ({ snapshots: [] });
  await waitFor(async () => (await world.t.caller.call('getClusterOverview', { clusterId: world.clusterId }) as { overview: { relay: { connected: boolean } } }).overview.relay.connected, 'relay back', 10_000);
  const again = await order('op-crash');
  assert.notEqual(again.operation!.operationId, operation!.operationId);
  assert.equal((await followOperation(world.t.admin, again.operation!.operationId, { timeoutMs: 20_000 })).state, 'completed');
});

test('an operation of a Cloudly killed with SIGKILL mid-backup is failed `interrupted` when Cloudly starts again', async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-op-crash-'));
  const child = await startCloudlyProcess(cloudlyProcessEnv(dataDir, { CLOUDLY_ADMIN_PASSWORD: testAdminPassword }));
  let operationId: string;
  let relay: CloudlyRelayClient | null = null;
  try {
    const admin = new CloudlyAdminClient(child.baseUrl);
    await admin.login(testAdminUsername, testAdminPassword);
    const { cluster, relayToken } = await admin.call('createCluster', { name: 'crash' });
    await admin.call('addClusterNode', { clusterId: cluster.id, name: 'crash-node', nodeId: 'crash-node' });
    const { service } = await admin.call('createService', {
      service: { name: 'crash-db', organizationId: 'org-1', clusterId: cluster.id, runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } }, volumes: [] },
    });
    relay = await CloudlyRelayClient.connect(child.baseUrl, relayToken, { reconnect: false });
    let asked!: () => void;
    const relayAsked = new Promise<void>((resolve) => { asked = resolve; });
    relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', () => { asked(); return new Promise(() => undefined); });
    await waitFor(async () => (await admin.call('getClusterOverview', { clusterId: cluster.id }) as { overview: { relay: { connected: boolean } } }).overview.relay.connected, 'relay connected', 10_000);
    const answer = await admin.call('createServiceBackup', { clusterId: cluster.id, nodeId: 'crash-node', serviceId: service.id, backupId: 'crash-backup' });
    operationId = answer.operation!.operationId;
    await relayAsked;
    await killHard(child.child);
  } finally {
    relay?.close();
    if (child.child.exitCode === null && child.child.signalCode === null) {
      await killHard(child.child);
    }
  }
  const t = await startTestCloudly({ dataDir });
  try {
    const { operation } = await t.caller.call('getOperation', { operationId });
    assert.equal(operation.state, 'failed');
    assert.equal(operation.reason, 'interrupted');
    assert.deepEqual(operation.error, { code: 'unavailable', retryable: true, reasons: ['interrupted'] });
    const { backups } = await t.caller.call('getServiceBackups', {});
    assert.deepEqual([backups[0].state, backups[0].failureReason], ['failed', 'interrupted']);
  } finally {
    await t.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
