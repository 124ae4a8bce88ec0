import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { BlobStoreError, FilesystemBlobStore } from '../ts/core/blobstore.js';
import { terminateSha256Worker } from '../ts/core/hashworker.js';
import { sha256Hex } from '../ts/interfaces/private/canonicaljson.js';

async function* chunksOf(bytesArg: Buffer, sizeArg = 1000): AsyncIterable<Buffer> {
  for (let offset = 0; offset < bytesArg.byteLength; offset += sizeArg) {
    yield bytesArg.subarray(offset, offset + sizeArg);
  }
}

const collect = async (sourceArg: AsyncIterable<Buffer>): Promise<Buffer> => {
  const chunks: Buffer[] = [];
  for await (const chunk of sourceArg) {
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
};

/** Every store directory this file made; removed when the file ends. */
const storeDirectories: string[] = [];
after(async () => {
  await Promise.all(storeDirectories.map((dirArg) => fs.rm(dirArg, { recursive: true, force: true })));
});

const storeDirectory = async (): Promise<string> => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cloudly-blobs-'));
  storeDirectories.push(dir);
  return dir;
};

const openStore = async (): Promise<FilesystemBlobStore> => {
  const store = new FilesystemBlobStore(await storeDirectory());
  await store.init();
  return store;
};

const hasCode = (codeArg: string) => (error: unknown): boolean =>
  error instanceof BlobStoreError && error.code === codeArg;

test('exact bytes are stored, recorded, and read back verified', async () => {
  const store = await openStore();
  const bytes = randomBytes(700_001);
  const record = await store.put('closures/c1/s1/b1', { byteLength: bytes.byteLength, sha256: sha256Hex(bytes) }, chunksOf(bytes));
  assert.equal(record.byteLength, bytes.byteLength);
  assert.equal(record.sha256, sha256Hex(bytes));
  assert.deepEqual(await store.stat('closures/c1/s1/b1'), record);
  assert.deepEqual(await collect(store.read('closures/c1/s1/b1')), bytes);
  assert.deepEqual(await store.listTemporaryFiles(), []);
  // A second store on the same directory (a restart) finds the same record.
  const reopened = new FilesystemBlobStore(store.rootDir);
  assert.deepEqual(await reopened.stat('closures/c1/s1/b1'), record);
});

for (const [label, expectedLength, expectedSha, code] of [
  ['short', 1001, null, 'blob-too-short'],
  ['long', 999, null, 'blob-too-long'],
  ['wrong', 1000, 'f'.repeat(64), 'blob-sha256-mismatch'],
] as const) {
  test(`${label} bytes are refused with ${code}, nothing recorded, temporary file gone`, async () => {
    const store = await openStore();
    const bytes = randomBytes(1000);
    await assert.rejects(
      store.put('closures/x', { byteLength: expectedLength, sha256: expectedSha ?? sha256Hex(bytes) }, chunksOf(bytes, 100)),
      hasCode(code),
    );
    assert.equal(await store.stat('closures/x'), null);
    assert.deepEqual(await store.listTemporaryFiles(), []);
    assert.deepEqual(await fs.readdir(path.join(store.rootDir, 'objects')), []);
  });
}

test('a source that asks for its chunks back gets each one once, after the store copied it, and the bytes stay exact', async () => {
  const store = await openStore();
  const bytes = randomBytes(5 * 1024 * 1024 + 3);
  const yielded: Buffer[] = [];
  const released: Uint8Array[] = [];
  const source = {
    async *[Symbol.asyncIterator]() {
      for (let offset = 0; offset < bytes.byteLength; offset += 300_000) {
        // A chunk of its own, which the source scribbles over when it gets it back.
        const chunk = Buffer.from(bytes.subarray(offset, offset + 300_000));
        yielded.push(chunk);
        yield chunk;
        assert.equal(released.at(-1), chunk, 'the store gave the chunk back before asking for the next');
      }
    },
    release(chunkArg: Uint8Array) {
      released.push(chunkArg);
      chunkArg.fill(0);
    },
  };
  const record = await store.put('closures/released', { byteLength: bytes.byteLength, sha256: sha256Hex(bytes) }, source);
  assert.equal(record.sha256, sha256Hex(bytes));
  assert.deepEqual(released, yielded);
  assert.ok((await collect(store.read('closures/released'))).equals(bytes));
});

test('a source that fails midway leaves nothing behind', async () => {
  const store = await openStore();
  async function* failing(): AsyncIterable<Buffer> {
    yield Buffer.alloc(10);
    throw new Error('relay dropped');
  }
  await assert.rejects(store.put('closures/y', { byteLength: 20, sha256: 'a'.repeat(64) }, failing()), /relay dropped/);
  assert.equal(await store.stat('closures/y'), null);
  assert.deepEqual(await store.listTemporaryFiles(), []);
});

test('a stored key is not overwritten', async () => {
  const store = await openStore();
  const bytes = randomBytes(10);
  await store.put('k', { byteLength: 10, sha256: sha256Hex(bytes) }, chunksOf(bytes));
  await assert.rejects(store.put('k', { byteLength: 10, sha256: sha256Hex(bytes) }, chunksOf(bytes)), hasCode('blob-exists'));
});

test('bytes changed on disk after storing fail the read instead of ending cleanly', async () => {
  const store = await openStore();
  const bytes = randomBytes(600_000);
  await store.put('k', { byteLength: bytes.byteLength, sha256: sha256Hex(bytes) }, chunksOf(bytes, 65536));
  const [blobName] = (await fs.readdir(path.join(store.rootDir, 'objects'))).filter((name) => name.endsWith('.blob'));
  const blobPath = path.join(store.rootDir, 'objects', blobName);
  const corrupted = Buffer.from(bytes);
  corrupted[599_999] ^= 0xff;
  await fs.writeFile(blobPath, corrupted);
  let yielded = 0;
  await assert.rejects((async () => {
    for await (const chunk of store.read('k')) {
      yielded += chunk.byteLength;
    }
  })(), hasCode('blob-corrupt'));
  assert.ok(yielded < bytes.byteLength, 'the last chunk is withheld');
  await store.delete('k');
  assert.equal(await store.stat('k'), null);
  await assert.rejects(collect(store.read('k')), hasCode('blob-not-found'));
});

test('transient-chunk reads (buffers reused between chunks) give exactly the bytes, and still refuse changed bytes', async () => {
  const store = await openStore();
  const bytes = randomBytes(3 * 1024 * 1024 + 4321);
  await store.put('t', { byteLength: bytes.byteLength, sha256: sha256Hex(bytes) }, chunksOf(bytes, 300_000));
  // A consumer that is done with each chunk before asking for the next: hash it at once.
  const hash = createHash('sha256');
  let length = 0;
  for await (const chunk of store.read('t', { transientChunks: true })) {
    hash.update(chunk);
    length += chunk.byteLength;
  }
  assert.equal(length, bytes.byteLength);
  assert.equal(hash.digest('hex'), sha256Hex(bytes));
  const [blobName] = (await fs.readdir(path.join(store.rootDir, 'objects'))).filter((name) => name.endsWith('.blob'));
  const corrupted = Buffer.from(bytes);
  corrupted[10] ^= 0x01;
  await fs.writeFile(path.join(store.rootDir, 'objects', blobName), corrupted);
  let yielded = 0;
  await assert.rejects((async () => {
    for await (const chunk of store.read('t', { transientChunks: true })) {
      yielded += chunk.byteLength;
    }
  })(), hasCode('blob-corrupt'));
  assert.ok(yielded < bytes.byteLength, 'the last chunk is withheld');
});

test('many MiB in odd-sized chunks (several staging buffers, unaligned tail) are stored and read back exactly; too many bytes leave nothing', async () => {
  const store = await openStore();
  const bytes = randomBytes(13 * 1024 * 1024 + 777);
  await store.put('big', { byteLength: bytes.byteLength, sha256: sha256Hex(bytes) }, chunksOf(bytes, 1_000_003));
  assert.equal((await fs.stat(path.join(store.rootDir, 'objects', `${sha256Hex(Buffer.from('big'))}.blob`))).size, bytes.byteLength);
  assert.ok((await collect(store.read('big'))).equals(bytes));
  const copies: Buffer[] = [];
  for await (const chunk of store.read('big', { transientChunks: true })) {
    copies.push(Buffer.from(chunk));
  }
  assert.ok(Buffer.concat(copies).equals(bytes));
  const longer = Buffer.concat([bytes, Buffer.alloc(5)]);
  await assert.rejects(
    store.put('big-long', { byteLength: bytes.byteLength, sha256: sha256Hex(bytes) }, chunksOf(longer, 1_000_003)),
    hasCode('blob-too-long'),
  );
  assert.equal(await store.stat('big-long'), null);
  assert.deepEqual(await store.listTemporaryFiles(), []);
});

test('concurrent puts share the hash worker without mixing their bytes: each right one is stored, the wrong one refused', async () => {
  const store = await openStore();
  const blobs = Array.from({ length: 4 }, () => randomBytes(5 * 1024 * 1024 + 4097));
  const wrong = randomBytes(5 * 1024 * 1024 + 4097);
  const results = await Promise.allSettled([
    ...blobs.map((bytesArg, indexArg) =>
      store.put(`c${indexArg}`, { byteLength: bytesArg.byteLength, sha256: sha256Hex(bytesArg) }, chunksOf(bytesArg, 65_537))),
    // Claims the sha256 of the first blob but carries other bytes of the same length.
    store.put('c-wrong', { byteLength: wrong.byteLength, sha256: sha256Hex(blobs[0]) }, chunksOf(wrong, 65_537)),
  ]);
  assert.deepEqual(results.map((resultArg) => resultArg.status), ['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected']);
  assert.ok(hasCode('blob-sha256-mismatch')((results[4] as PromiseRejectedResult).reason));
  for (const [index, bytes] of blobs.entries()) {
    assert.ok((await collect(store.read(`c${index}`))).equals(bytes));
  }
  assert.equal(await store.stat('c-wrong'), null);
  assert.deepEqual(await store.listTemporaryFiles(), []);
});

test('with direct I/O off (as where a file system refuses it), bytes go through the page cache and are checked the same way', async () => {
  const store = new FilesystemBlobStore(await storeDirectory(), { directIo: false });
  await store.init();
  const bytes = randomBytes(9 * 1024 * 1024 + 123);
  await store.put('buffered', { byteLength: bytes.byteLength, sha256: sha256Hex(bytes) }, chunksOf(bytes, 300_001));
  assert.ok((await collect(store.read('buffered'))).equals(bytes));
  const copies: Buffer[] = [];
  for await (const chunk of store.read('buffered', { transientChunks: true })) {
    copies.push(Buffer.from(chunk));
  }
  assert.ok(Buffer.concat(copies).equals(bytes));
  const flipped = Buffer.from(bytes);
  flipped[flipped.byteLength - 1] ^= 1;
  await assert.rejects(
    store.put('buffered-wrong', { byteLength: bytes.byteLength, sha256: sha256Hex(bytes) }, chunksOf(flipped, 300_001)),
    hasCode('blob-sha256-mismatch'),
  );
  assert.equal(await store.stat('buffered-wrong'), null);
  assert.deepEqual(await store.listTemporaryFiles(), []);
});

test('a hash worker that dies in the middle of a put fails that put, leaves nothing behind, and the next put works', async () => {
  const store = await openStore();
  const bytes = randomBytes(12 * 1024 * 1024);
  async function* killedHalfway(): AsyncIterable<Buffer> {
    for (let offset = 0; offset < bytes.byteLength; offset += 256 * 1024) {
      if (offset === 6 * 1024 * 1024) {
        await terminateSha256Worker();
      }
      yield bytes.subarray(offset, offset + 256 * 1024);
    }
  }
  await assert.rejects(store.put('killed', { byteLength: bytes.byteLength, sha256: sha256Hex(bytes) }, killedHalfway()), /sha256 (worker|session)/);
  assert.equal(await store.stat('killed'), null);
  assert.deepEqual(await store.listTemporaryFiles(), []);
  await store.put('after', { byteLength: bytes.byteLength, sha256: sha256Hex(bytes) }, chunksOf(bytes, 256 * 1024));
  assert.ok((await collect(store.read('after'))).equals(bytes));
});

test('keys that could escape the store are refused', async () => {
  const store = await openStore();
  for (const key of ['../x', '/abs', 'a//b', 'a/../b', '', 'a b']) {
    await assert.rejects(store.stat(key), hasCode('blob-key-invalid'));
  }
});
