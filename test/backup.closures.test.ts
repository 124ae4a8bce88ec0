import { test, before, after } from 'node:test';
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { refusalOf, waitFor } from './helpers/cloudly.js';
import { addClusterWorld, chunked, collect, descriptorOf, sha256Of, startBackupWorld, type IBackupWorld } from './backup.fixture.js';
import { fetchServiceDatabaseClosure, sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { StreamAbortedError, streamChannelOf } from '../ts/core/streams.js';
import { FilesystemBlobStore } from '../ts/core/blobstore.js';
import { serviceBackupKind } from '../ts/manager.backup/backup.manager.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IReq_Cloudly_Relay_BackupClusterService, IServiceBackupRecord } from '../ts/interfaces/requests/backup.js';
import type { TUntypedContract } from '../ts/client/admin.js';
import { assertFieldProblems } from './helpers/refusals.js';

let world: IBackupWorld;
type TBackupRequest = IReq_Cloudly_Relay_BackupClusterService['request'];
/** What the relay does inside `backupClusterService`; each test sets it. */
let onBackup: (requestArg: TBackupRequest) => Promise<void> = async () => undefined;

const serveBackups = (relayArg: CloudlyRelayClient): void => {
  relayArg.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    await onBackup(request);
    return {
      snapshots: [{ type: 'database', snapshotId: `snap-${request.backupId}`, resourceName: 'db', databaseName: 'app', createdAt: Date.now(), sizeBytes: 1 }],
    };
  });
};

/** Orders a backup and follows its operation to the end: the finished backup, or the refusal it recorded, thrown. */
const backUp = async (backupIdArg: string): Promise<{ backup: IServiceBackupRecord }> => {
  const { operation } = await world.t.caller.call('createServiceBackup', {
    clusterId: world.clusterId,
    nodeId: world.nodeId,
    serviceId: world.service.id,
    backupId: backupIdArg,
  });
  return outcomeOf(await followOperation(world.t.admin, operation!.operationId, { timeoutMs: 20_000 }));
};

const blobStore = (): FilesystemBlobStore => world.t.cloudly.backupManager.blobStore as FilesystemBlobStore;

/** Runs a backup whose relay sends `bytes` under `descriptor`, returning what the relay saw. */
const backUpWith = async (backupIdArg: string, bytesArg: Buffer, descriptorArg = descriptorOf(bytesArg)) => {
  let outcome: { receipt?: unknown; error?: unknown } = {};
  onBackup = async (request) => {
    try {
      const sent = await sendServiceDatabaseClosure(world.relay, {
        backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorArg,
      }, chunked(bytesArg));
      outcome = { receipt: sent.receipt };
    } catch (error) {
      outcome = { error };
    }
  };
  const { backup } = await backUp(backupIdArg);
  return { backup, outcome };
};

const abortReason = (errorArg: unknown): string | null => (errorArg instanceof StreamAbortedError ? errorArg.reason : null);

before(async () => {
  world = await startBackupWorld();
  serveBackups(world.relay);
});
after(async () => {
  await world.t.stop();
});

test('a closure streamed during a backup is stored durably and the receipt says exactly what is held', async () => {
  const bytes = randomBytes(3 * 1024 * 1024 + 11);
  const { backup, outcome } = await backUpWith('b-ok', bytes);
  assert.deepEqual(outcome.receipt, {
    backupId: 'b-ok', serviceId: world.service.id, nodeId: world.nodeId,
    byteLength: bytes.byteLength, sha256: sha256Of(bytes), storedAt: (outcome.receipt as { storedAt: number }).storedAt,
  });
  assert.equal(backup.closure?.descriptor.sha256, sha256Of(bytes));
  assert.equal(backup.snapshots.length, 1);
  const stored = await blobStore().stat(`closures/${world.clusterId}/b-ok`);
  assert.equal(stored?.byteLength, bytes.byteLength);
  assert.deepEqual(await blobStore().listTemporaryFiles(), []);
});

test('a bad descriptor is refused with every reason before any byte moves', async () => {
  let refusal: Record<string, unknown> = {};
  let bytesSent = -1;
  onBackup = async (request) => {
    const sender = streamChannelOf(world.relay.peer).openSender();
    refusal = await refusalOf(() => world.relay.fire('backupServiceDatabaseClosure', {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId,
      descriptor: { ...descriptorOf(Buffer.from('x')), byteLength: 0, sha256: 'nope' },
      closure: sender.reference('send'),
    }));
    const writing = sender.write(Buffer.from('x')).catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 50));
    bytesSent = sender.bytesSent;
    sender.abort('test-done');
    await writing;
  };
  const { backup } = await backUp('b-bad-descriptor');
  assert.equal(refusal.code, 'invalid-request');
  assertFieldProblems(refusal, [
    ['request.descriptor.byteLength', 'field-invalid', 'must be an integer from 1 to 68719476736'],
    ['request.descriptor.sha256', 'field-invalid', 'must be 64 lowercase hex digits'],
  ]);
  assert.equal(bytesSent, 0, 'no credit was granted, so no byte moved');
  assert.equal(backup.closure, undefined);
});

for (const [label, mutate, reason] of [
  ['a truncated stream', (bytesArg: Buffer) => ({ bytes: bytesArg.subarray(0, bytesArg.byteLength - 100), descriptor: descriptorOf(bytesArg) }), 'closure-blob-too-short'],
  ['extra bytes', (bytesArg: Buffer) => ({ bytes: Buffer.concat([bytesArg, Buffer.from('extra')]), descriptor: descriptorOf(bytesArg) }), 'closure-blob-too-long'],
  ['a wrong sha256', (bytesArg: Buffer) => ({ bytes: bytesArg, descriptor: descriptorOf(bytesArg, { sha256: sha256Of(Buffer.from('other')) }) }), 'closure-blob-sha256-mismatch'],
  ['a wrong length', (bytesArg: Buffer) => ({ bytes: bytesArg, descriptor: descriptorOf(bytesArg, { byteLength: bytesArg.byteLength * 2 }) }), 'closure-blob-too-short'],
] as const) {
  test(`${label} is refused: the relay learns why, nothing is recorded, no temporary file remains`, async () => {
    const backupId = `b-${label.replace(/[^a-z0-9]+/g, '-')}`;
    const { bytes, descriptor } = mutate(randomBytes(1024 * 1024));
    const { backup, outcome } = await backUpWith(backupId, bytes, descriptor);
    assert.equal(abortReason(outcome.error), reason);
    assert.equal(backup.closure, undefined);
    const doc = await world.t.cloudly.store.get(serviceBackupKind, backupId);
    assert.equal(doc?.closure, undefined);
    assert.equal(await blobStore().stat(`closures/${world.clusterId}/${backupId}`), null);
    assert.deepEqual(await blobStore().listTemporaryFiles(), []);
  });
}

test('a relay dropped mid-stream leaves nothing recorded, and a reconnected relay can send again', async () => {
  const bytes = randomBytes(8 * 1024 * 1024);
  let dropped: unknown = null;
  onBackup = async (request) => {
    async function* halfThenDrop(): AsyncIterable<Buffer> {
      yield bytes.subarray(0, 2 * 1024 * 1024);
      world.relay.terminate();
      yield bytes.subarray(2 * 1024 * 1024);
    }
    try {
      await sendServiceDatabaseClosure(world.relay, {
        backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(bytes),
      }, halfThenDrop());
    } catch (error) {
      dropped = error;
    }
  };
  const refusal = await refusalOf(() => backUp('b-dropped'));
  assert.equal(refusal.code, 'unavailable');
  assert.equal(abortReason(dropped), 'stream-peer-disconnected');
  await waitFor(async () => (await blobStore().listTemporaryFiles()).length === 0, 'temporary file removed');
  const doc = await world.t.cloudly.store.get(serviceBackupKind, 'b-dropped');
  assert.equal(doc?.closure, undefined);
  assert.equal(doc?.state, 'failed');
  world.relay = await world.t.connectRelay(world.relayToken);
  serveBackups(world.relay);
  await waitFor(() => world.t.cloudly.relays.activeSession(world.clusterId) !== null, 'relay elected');
  const again = await backUpWith('b-dropped', bytes);
  assert.equal((again.outcome.receipt as { sha256: string }).sha256, sha256Of(bytes));
});

test('two backups stream at once, each stored exactly; a second upload of one backup is refused', async () => {
  const first = randomBytes(4 * 1024 * 1024);
  const second = randomBytes(5 * 1024 * 1024 + 3);
  const receipts: Record<string, unknown> = {};
  let duplicate: Record<string, unknown> = {};
  onBackup = async (request) => {
    const bytes = request.backupId === 'b-par-1' ? first : second;
    const sending = sendServiceDatabaseClosure(world.relay, {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(bytes),
    }, chunked(bytes));
    if (request.backupId === 'b-par-1') {
      duplicate = await refusalOf(() => sendServiceDatabaseClosure(world.relay, {
        backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(bytes),
      }, chunked(bytes)));
    }
    receipts[request.backupId] = (await sending).receipt;
  };
  await Promise.all([backUp('b-par-1'), backUp('b-par-2')]);
  assert.equal((receipts['b-par-1'] as { sha256: string }).sha256, sha256Of(first));
  assert.equal((receipts['b-par-2'] as { sha256: string }).sha256, sha256Of(second));
  assert.equal(duplicate.code, 'conflict');
  assert.deepEqual(duplicate.reasons, ['closure-upload-in-progress']);
  for (const [id, bytes] of [['b-par-1', first], ['b-par-2', second]] as const) {
    const { bytes: fetched } = await fetchServiceDatabaseClosure(world.relay, { backupId: id, serviceId: world.service.id, nodeId: world.nodeId });
    assert.equal(sha256Of(await collect(fetched)), sha256Of(bytes));
  }
});

test('a restore answers the descriptor first, then exactly the stored bytes', async () => {
  const bytes = randomBytes(2 * 1024 * 1024 + 5);
  const { backup } = await backUpWith('b-restore', bytes);
  const fetched = await fetchServiceDatabaseClosure(world.relay, { backupId: 'b-restore', serviceId: world.service.id, nodeId: world.nodeId });
  assert.deepEqual(fetched.descriptor, backup.closure?.descriptor);
  assert.deepEqual(await collect(fetched.bytes), bytes);
});

test('a relay of another cluster can neither fetch nor send a closure of this cluster', async () => {
  const bytes = randomBytes(64 * 1024);
  await backUpWith('b-foreign', bytes);
  const other = await addClusterWorld(world.t, 'beta');
  const fetchRefusal = await refusalOf(() => fetchServiceDatabaseClosure(other.relay, {
    backupId: 'b-foreign', serviceId: world.service.id, nodeId: world.nodeId,
  }));
  assert.equal(fetchRefusal.code, 'not-found');
  assert.deepEqual(fetchRefusal.reasons, ['backup-not-found']);
  const sendRefusal = await refusalOf(() => sendServiceDatabaseClosure(other.relay, {
    backupId: 'b-foreign', serviceId: world.service.id, nodeId: world.nodeId, descriptor: descriptorOf(bytes),
  }, chunked(bytes)));
  assert.equal(sendRefusal.code, 'not-found');
  other.relay.close();
});

test('bytes stored before a restart are still there, verified, after it', async () => {
  const bytes = randomBytes(3 * 1024 * 1024);
  await backUpWith('b-restart', bytes);
  await world.t.restart();
  world.relay = await world.t.connectRelay(world.relayToken);
  serveBackups(world.relay);
  const fetched = await fetchServiceDatabaseClosure(world.relay, { backupId: 'b-restart', serviceId: world.service.id, nodeId: world.nodeId });
  assert.equal(fetched.descriptor.sha256, sha256Of(bytes));
  assert.equal(sha256Of(await collect(fetched.bytes)), sha256Of(bytes));
});

test('the retired coreflow-tagged methods are not served', async () => {
  for (const method of ['uploadBackupArchiveObject', 'downloadBackupArchiveObject', 'executeServiceBackup', 'executeServiceRestore', 'pruneNodeArchive']) {
    const refusal = await refusalOf(() => world.relay.fire<TUntypedContract>(method, {}));
    assert.equal(refusal.code, 'invalid-request');
    assert.deepEqual(refusal.reasons, ['method-not-served']);
  }
});

test('bytes left over from an attempt that never recorded them do not block a new upload', async () => {
  const leftover = randomBytes(1000);
  await blobStore().put(`closures/${world.clusterId}/b-orphan`, { byteLength: 1000, sha256: sha256Of(leftover) }, chunked(leftover));
  const bytes = randomBytes(300_000);
  const { backup, outcome } = await backUpWith('b-orphan', bytes);
  assert.equal((outcome.receipt as { sha256: string }).sha256, sha256Of(bytes));
  assert.equal(backup.closure?.descriptor.sha256, sha256Of(bytes));
  const fetched = await fetchServiceDatabaseClosure(world.relay, { backupId: 'b-orphan', serviceId: world.service.id, nodeId: world.nodeId });
  assert.deepEqual(await collect(fetched.bytes), bytes);
});

test('a restore of bytes changed on disk ends in an abort at the relay, never a clean end', async () => {
  const bytes = randomBytes(3 * 1024 * 1024 + 1);
  await backUpWith('b-rotted', bytes);
  // Same length, one bit flipped: the record still matches the file size, only the digest can tell.
  const blobName = `${createHash('sha256').update(`closures/${world.clusterId}/b-rotted`).digest('hex')}.blob`;
  const blobPath = path.join(blobStore().rootDir, 'objects', blobName);
  const rotted = Buffer.from(bytes);
  rotted[1234] ^= 0x01;
  await fs.writeFile(blobPath, rotted);
  const fetched = await fetchServiceDatabaseClosure(world.relay, { backupId: 'b-rotted', serviceId: world.service.id, nodeId: world.nodeId });
  assert.equal(fetched.descriptor.sha256, sha256Of(bytes));
  let yielded = 0;
  let failure: unknown = null;
  try {
    for await (const chunk of fetched.bytes) {
      yielded += chunk.byteLength;
    }
  } catch (error) {
    failure = error;
  }
  assert.equal(abortReason(failure), 'closure-blob-corrupt');
  assert.ok(yielded < bytes.byteLength, 'the relay never received the whole closure');
});

test('a relay dropped mid-restore fails its fetch, and a reconnected relay fetches the exact bytes', async () => {
  const bytes = randomBytes(12 * 1024 * 1024);
  await backUpWith('b-restore-drop', bytes);
  const fetched = await fetchServiceDatabaseClosure(world.relay, { backupId: 'b-restore-drop', serviceId: world.service.id, nodeId: world.nodeId });
  let yielded = 0;
  let failure: unknown = null;
  try {
    for await (const chunk of fetched.bytes) {
      yielded += chunk.byteLength;
      if (yielded >= 1024 * 1024) {
        world.relay.terminate();
      }
    }
  } catch (error) {
    failure = error;
  }
  assert.equal(abortReason(failure), 'stream-peer-disconnected');
  assert.ok(yielded < bytes.byteLength);
  world.relay = await world.t.connectRelay(world.relayToken);
  serveBackups(world.relay);
  await waitFor(() => world.t.cloudly.relays.activeSession(world.clusterId) !== null, 'relay elected');
  const again = await fetchServiceDatabaseClosure(world.relay, { backupId: 'b-restore-drop', serviceId: world.service.id, nodeId: world.nodeId });
  assert.equal(sha256Of(await collect(again.bytes)), sha256Of(bytes));
});
