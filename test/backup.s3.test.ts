import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { BlobStoreError, type TBlobStoreErrorCode } from '../ts/core/blobstore.js';
import { S3BlobStore } from '../ts/core/s3blobstore.js';
import { ConfigError, readConfig } from '../ts/config.js';
import { fetchServiceDatabaseClosure, sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { serviceBackupKind } from '../ts/manager.backup/backup.manager.js';
import type { IReq_Cloudly_Relay_BackupClusterService } from '../ts/interfaces/requests/backup.js';
import { refusalOf, startTestCloudly, waitFor } from './helpers/cloudly.js';
import { cloudlyProcessEnv, runCloudlyProcessToExit } from './helpers/process.js';
import { startTestS3Server, type ITestS3Server } from './helpers/s3server.js';
import { addClusterWorld, chunked, collect, descriptorOf, sha256Of } from './backup.fixture.js';

/**
 * The S3 blob store against a real S3-protocol server (s3rver, started here on a random loopback
 * port), and a real Cloudly selecting it by configuration.
 */

let s3: ITestS3Server;
/** Small parts so a few MiB make a multipart upload of several parts (s3rver has no 5 MiB minimum). */
const partBytes = 1024 * 1024;
const stores: S3BlobStore[] = [];

const openStore = async (prefixArg = 'contract/', extraArg: Partial<ConstructorParameters<typeof S3BlobStore>[0]> = {}): Promise<S3BlobStore> => {
  const store = new S3BlobStore({ ...s3.storeOptions(prefixArg), partBytes, maxAttempts: 2, connectionTimeoutMs: 1000, ...extraArg });
  await store.init();
  stores.push(store);
  return store;
};

const hasCode = (codeArg: TBlobStoreErrorCode) => (errorArg: unknown): boolean => {
  assert.ok(errorArg instanceof BlobStoreError, `expected a BlobStoreError, got ${String(errorArg)}`);
  assert.equal(errorArg.code, codeArg, errorArg.message);
  return true;
};

const expectationOf = (bytesArg: Buffer) => ({ byteLength: bytesArg.byteLength, sha256: sha256Of(bytesArg) });

before(async () => {
  s3 = await startTestS3Server();
});
after(async () => {
  for (const store of stores) {
    await store.close();
  }
  await s3.destroy();
});

describe('S3 blob store contract', () => {
  test('put, stat, read, ranged read and delete, for a single-part and a multipart blob', async () => {
    const store = await openStore();
    for (const [key, size] of [['small/one', 1000], ['large/many', 3 * partBytes + 12345]] as const) {
      const bytes = randomBytes(size);
      const stored = await store.put(key, expectationOf(bytes), chunked(bytes, 300 * 1024));
      assert.deepEqual({ key: stored.key, byteLength: stored.byteLength, sha256: stored.sha256 }, { key, byteLength: size, sha256: sha256Of(bytes) });
      assert.deepEqual(await store.stat(key), stored);
      assert.ok((await s3.objectKeys()).includes(`contract/${key}`), 'the object is in the bucket under the prefix');
      assert.ok((await collect(store.read(key))).equals(bytes));
      assert.ok((await collect(store.read(key, { offset: 17, length: 700 }))).equals(bytes.subarray(17, 717)));
      assert.ok((await collect(store.read(key, { offset: size - 5 }))).equals(bytes.subarray(size - 5)));
      await assert.rejects(collect(store.read(key, { offset: 10, length: size })), hasCode('blob-range-invalid'));
      await assert.rejects(store.put(key, expectationOf(bytes), chunked(bytes)), hasCode('blob-exists'));
      await store.delete(key);
      assert.equal(await store.stat(key), null);
      await assert.rejects(collect(store.read(key)), hasCode('blob-not-found'));
      assert.ok(!(await s3.objectKeys()).includes(`contract/${key}`));
      // Deleting what is gone is not a failure.
      await store.delete(key);
    }
    assert.deepEqual(await s3.openUploads(), []);
  });

  for (const [label, size, bytesOf, sha256Of_, code] of [
    ['too short', 2 * partBytes + 10, (bytesArg: Buffer) => bytesArg.subarray(0, bytesArg.byteLength - 1), null, 'blob-too-short'],
    ['too long', 2 * partBytes + 10, (bytesArg: Buffer) => Buffer.concat([bytesArg, Buffer.from('x')]), null, 'blob-too-long'],
    ['a wrong sha256, multipart', 2 * partBytes + 10, (bytesArg: Buffer) => bytesArg, 'f'.repeat(64), 'blob-sha256-mismatch'],
    ['a wrong sha256, single part', 1000, (bytesArg: Buffer) => bytesArg, 'e'.repeat(64), 'blob-sha256-mismatch'],
  ] as const) {
    test(`${label}: refused, nothing visible, no multipart upload left`, async () => {
      const store = await openStore();
      const key = `refused/${label.replace(/[^a-z0-9]+/g, '-')}`;
      const bytes = randomBytes(size);
      await assert.rejects(
        store.put(key, { byteLength: size, sha256: sha256Of_ ?? sha256Of(bytes) }, chunked(bytesOf(bytes), 256 * 1024)),
        hasCode(code),
      );
      assert.equal(await store.stat(key), null);
      assert.ok(!(await s3.objectKeys()).includes(`contract/${key}`));
      assert.deepEqual(await s3.openUploads(), []);
      assert.equal(store.pendingAbortCount, 0);
    });
  }

  test('a source that fails mid-stream: its error, nothing visible, the multipart upload aborted', async () => {
    const store = await openStore();
    const bytes = randomBytes(4 * partBytes);
    const failure = new Error('relay went away');
    let uploadsWhileStreaming: string[] = [];
    async function* failing(): AsyncIterable<Buffer> {
      yield bytes.subarray(0, 2 * partBytes + 100);
      uploadsWhileStreaming = await s3.openUploads();
      throw failure;
    }
    await assert.rejects(store.put('failing/source', expectationOf(bytes), failing()), (errorArg) => errorArg === failure);
    assert.equal(uploadsWhileStreaming.length, 1, 'a multipart upload was open while the bytes streamed');
    assert.equal(await store.stat('failing/source'), null);
    assert.deepEqual(await s3.openUploads(), []);
  });

  test('the S3 server stops mid-upload: blob-store-unavailable, nothing visible; the next call aborts the upload left behind', async () => {
    const store = await openStore();
    const bytes = randomBytes(4 * partBytes);
    async function* stopsMidway(): AsyncIterable<Buffer> {
      yield bytes.subarray(0, partBytes + 10);
      await s3.stop();
      yield bytes.subarray(partBytes + 10);
    }
    try {
      await assert.rejects(store.put('restart/upload', expectationOf(bytes), stopsMidway()), hasCode('blob-store-unavailable'));
      await assert.rejects(store.stat('restart/upload'), hasCode('blob-store-unavailable'));
    } finally {
      await s3.start();
    }
    assert.equal(await store.stat('restart/upload'), null);
    assert.equal(store.pendingAbortCount, 1, 'the abort failed while the server was down and is remembered');
    assert.equal((await s3.openUploads()).length, 1);
    // The next put aborts it first, and stores its own blob.
    await store.put('restart/upload', expectationOf(bytes), chunked(bytes));
    assert.equal(store.pendingAbortCount, 0);
    assert.deepEqual(await s3.openUploads(), []);
    assert.ok((await collect(store.read('restart/upload'))).equals(bytes));
  });

  test('the S3 server restarts mid-download: the read resumes where it stopped and the bytes are proven', async () => {
    const store = await openStore();
    // Larger than what loopback socket buffers hold, so the cut really interrupts the transfer.
    const bytes = randomBytes(24 * 1024 * 1024);
    await store.put('restart/download', expectationOf(bytes), chunked(bytes, 1024 * 1024));
    const rangesBefore = s3.requests.filter((requestArg) => requestArg.method === 'GET' && requestArg.range).length;
    const received: Buffer[] = [];
    let restarted = false;
    for await (const chunk of store.read('restart/download')) {
      received.push(chunk);
      if (!restarted) {
        restarted = true;
        await s3.stop();
        await s3.start();
      }
    }
    assert.ok(Buffer.concat(received).equals(bytes));
    const ranges = s3.requests.filter((requestArg) => requestArg.method === 'GET' && requestArg.range).slice(rangesBefore).map((requestArg) => requestArg.range);
    assert.ok(ranges.length >= 2, `the download was resumed (ranges asked: ${ranges.join(', ')})`);
    assert.equal(ranges[0], `bytes=0-${bytes.byteLength - 1}`);
    assert.notEqual(ranges.at(-1), ranges[0], 'the resumed request starts after the bytes already read');
  });

  test('the S3 server stays down mid-download: the read ends with blob-store-unavailable, never a clean end', async () => {
    const store = await openStore('contract/', { readResumes: 2 });
    const bytes = randomBytes(24 * 1024 * 1024);
    await store.put('restart/down', expectationOf(bytes), chunked(bytes, 1024 * 1024));
    let stopped = false;
    try {
      await assert.rejects((async () => {
        for await (const _chunk of store.read('restart/down')) {
          if (!stopped) {
            stopped = true;
            await s3.stop();
          }
        }
      })(), hasCode('blob-store-unavailable'));
    } finally {
      await s3.start();
    }
    assert.ok(stopped);
  });

  test('an unknown bucket is refused by name (blob-store-failed), not a crash', async () => {
    const store = await openStore('contract/', { bucket: 'no-such-bucket' });
    const bytes = randomBytes(100);
    await assert.rejects(store.put('k', expectationOf(bytes), chunked(bytes)), (errorArg) =>
      errorArg instanceof BlobStoreError && (errorArg.code === 'blob-store-failed'));
  });
});

describe('configuration', () => {
  test('CLOUDLY_BLOB_STORE=s3 reads the bucket, prefix, endpoint, region, path style and AWS credentials', () => {
    const config = readConfig({
      CLOUDLY_BLOB_STORE: 's3', CLOUDLY_S3_BUCKET: 'backups', CLOUDLY_S3_PREFIX: 'cloudly/prod', CLOUDLY_S3_ENDPOINT: 'http://127.0.0.1:9000',
      CLOUDLY_S3_REGION: 'eu-central-1', CLOUDLY_S3_FORCE_PATH_STYLE: 'false', AWS_ACCESS_KEY_ID: 'id', AWS_SECRET_ACCESS_KEY: 'secret',
    });
    assert.equal(config.blobStore, 's3');
    assert.deepEqual(config.s3, {
      bucket: 'backups', prefix: 'cloudly/prod/', region: 'eu-central-1', endpoint: 'http://127.0.0.1:9000', forcePathStyle: false,
      credentials: { accessKeyId: 'id', secretAccessKey: 'secret' },
    });
    assert.equal(readConfig({}).blobStore, 'filesystem');
    assert.equal(readConfig({}).s3, null);
  });

  for (const [label, env, variable] of [
    ['an unknown store', { CLOUDLY_BLOB_STORE: 'ftp' }, 'CLOUDLY_BLOB_STORE'],
    ['no bucket', { CLOUDLY_BLOB_STORE: 's3', CLOUDLY_S3_REGION: 'us-east-1' }, 'CLOUDLY_S3_BUCKET'],
    ['a bad bucket', { CLOUDLY_BLOB_STORE: 's3', CLOUDLY_S3_BUCKET: 'No_Such', CLOUDLY_S3_REGION: 'us-east-1' }, 'CLOUDLY_S3_BUCKET'],
    ['no region', { CLOUDLY_BLOB_STORE: 's3', CLOUDLY_S3_BUCKET: 'backups' }, 'CLOUDLY_S3_REGION'],
    ['a bad prefix', { CLOUDLY_BLOB_STORE: 's3', CLOUDLY_S3_BUCKET: 'backups', CLOUDLY_S3_REGION: 'us-east-1', CLOUDLY_S3_PREFIX: 'a/../b' }, 'CLOUDLY_S3_PREFIX'],
    ['a bad endpoint', { CLOUDLY_BLOB_STORE: 's3', CLOUDLY_S3_BUCKET: 'backups', CLOUDLY_S3_REGION: 'us-east-1', CLOUDLY_S3_ENDPOINT: 'ftp://x' }, 'CLOUDLY_S3_ENDPOINT'],
    ['a bad path-style flag', { CLOUDLY_BLOB_STORE: 's3', CLOUDLY_S3_BUCKET: 'backups', CLOUDLY_S3_REGION: 'us-east-1', CLOUDLY_S3_FORCE_PATH_STYLE: 'yes' }, 'CLOUDLY_S3_FORCE_PATH_STYLE'],
    ['a key id without its secret', { CLOUDLY_BLOB_STORE: 's3', CLOUDLY_S3_BUCKET: 'backups', CLOUDLY_S3_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'id' }, 'AWS_SECRET_ACCESS_KEY'],
  ] as const) {
    test(`${label} is a ConfigError naming ${variable}`, () => {
      assert.throws(() => readConfig(env), (errorArg) => errorArg instanceof ConfigError && errorArg.variable === variable);
    });
  }

  test('the server refuses to start without a bucket and names the variable', async () => {
    const dataDir = await fsp.mkdtemp(path.join(s3.directory, '..', 'cloudly-s3-config-'));
    try {
      const { code, output } = await runCloudlyProcessToExit(cloudlyProcessEnv(dataDir, { CLOUDLY_BLOB_STORE: 's3', CLOUDLY_S3_REGION: 'us-east-1' }));
      assert.notEqual(code, 0);
      assert.match(output, /CLOUDLY_S3_BUCKET/);
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('Cloudly with CLOUDLY_BLOB_STORE=s3', () => {
  test('a backup stores the closure in the bucket, and the relay restores it, also after a restart', async () => {
    const prefix = 'cloudly/';
    const { blobStore, s3: s3Config } = readConfig(s3.env(prefix));
    const t = await startTestCloudly({ blobStore, s3: s3Config });
    try {
      assert.ok(t.cloudly.backupManager.blobStore instanceof S3BlobStore);
      const world = await addClusterWorld(t, 's3world');
      // More than one 8 MiB part: a multipart upload.
      const bytes = randomBytes(9 * 1024 * 1024 + 77);
      let receipt: unknown = null;
      let streamFailure: unknown = null;
      /** What the relay streams for the next backup (the closure by default). */
      let source: () => AsyncIterable<Buffer> = () => chunked(bytes);
      world.relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
        try {
          const sent = await sendServiceDatabaseClosure(world.relay, {
            backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(bytes),
          }, source());
          receipt = sent.receipt;
        } catch (error) {
          streamFailure = error;
        }
        return { snapshots: [{ type: 'database', snapshotId: 'snap-s3', resourceName: 'db', databaseName: 'app', createdAt: Date.now(), sizeBytes: bytes.byteLength }] };
      });
      await t.admin.call('createServiceBackup', { clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, backupId: 'b-s3' });
      // The relay holds Cloudly's receipt once the closure is durable and recorded.
      await waitFor(() => receipt !== null, 'the relay has the receipt', 30_000);
      assert.ok((await t.cloudly.store.get(serviceBackupKind, 'b-s3'))?.closure, 'the closure is recorded on the backup');
      assert.equal((receipt as { sha256?: string } | null)?.sha256, sha256Of(bytes));
      const objectKey = `${prefix}closures/${world.clusterId}/b-s3`;
      assert.ok((await s3.objectKeys()).includes(objectKey), `${objectKey} is in the bucket`);
      const onDisk = await fsp.readFile(path.join(s3.directory, s3.bucket, `${objectKey}._S3rver_object`));
      assert.ok(onDisk.equals(bytes), 'the bucket holds exactly the closure');
      assert.deepEqual(await s3.openUploads(), []);
      // Nothing went to the filesystem store.
      const localObjects = await fsp.readdir(path.join(t.dataDir, 'blobs', 'objects')).catch(() => []);
      assert.deepEqual(localObjects, []);

      const restore = async (relayArg: typeof world.relay) => {
        const fetched = await fetchServiceDatabaseClosure(relayArg, { backupId: 'b-s3', serviceId: world.service.id, nodeId: world.nodeId }, { transientChunks: false });
        assert.equal(fetched.descriptor.sha256, sha256Of(bytes));
        return collect(fetched.bytes);
      };
      assert.ok((await restore(world.relay)).equals(bytes));

      // The S3 server stops in the middle of a backup: the relay's stream is aborted with a named
      // reason, nothing is recorded, and Cloudly goes on answering.
      source = async function* stopsMidway() {
        yield bytes.subarray(0, 8.5 * 1024 * 1024);
        await s3.stop();
        yield bytes.subarray(8.5 * 1024 * 1024);
      };
      try {
        await t.admin.call('createServiceBackup', { clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, backupId: 'b-s3-down' })
          .catch(() => undefined);
        await waitFor(() => streamFailure !== null, 'the relay learned the outcome', 30_000);
      } finally {
        await s3.start();
      }
      assert.equal((streamFailure as { reason?: string }).reason, 'closure-blob-store-unavailable');
      assert.equal((await t.cloudly.store.get(serviceBackupKind, 'b-s3-down'))?.closure, undefined);
      assert.ok(!(await s3.objectKeys()).includes(`${prefix}closures/${world.clusterId}/b-s3-down`));
      assert.ok((await restore(world.relay)).equals(bytes), 'the stored closure is still served');
      // A new process over the same database reads the closure from the bucket.
      await t.restart();
      const relay = await t.connectRelay(world.relayToken);
      assert.ok((await restore(relay)).equals(bytes));

      // The bucket unreachable: the relay's closure calls are refused by name, Cloudly stays up.
      await s3.stop();
      try {
        const refusal = await refusalOf(() => relay.fire('restoreServiceDatabaseClosure', {
          backupId: 'b-s3', serviceId: world.service.id, nodeId: world.nodeId,
        }));
        assert.equal(refusal.code, 'unavailable');
        assert.deepEqual(refusal.reasons, ['closure-blob-store-unavailable']);
      } finally {
        await s3.start();
      }
      assert.ok((await restore(relay)).equals(bytes), 'served again once the bucket is back');
    } finally {
      await t.stop();
    }
  });
});
