import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';

/**
 * Durable storage for large byte objects (database closures, archive objects) that must
 * not live inside the database. The interface is small on purpose so an S3-compatible
 * store can replace the filesystem one: `put` proves the exact length and sha256 while it
 * writes and makes the object visible only once it is durable; `read` proves them again.
 */

export interface IBlobExpectation {
  byteLength: number;
  /** Lowercase hex sha256 over exactly `byteLength` bytes. */
  sha256: string;
}

export interface IStoredBlobRecord extends IBlobExpectation {
  key: string;
  /** Epoch milliseconds at which the bytes became durable. */
  storedAt: number;
}

export const blobStoreErrorCodes = [
  'blob-too-short',
  'blob-too-long',
  'blob-sha256-mismatch',
  'blob-not-found',
  'blob-exists',
  'blob-corrupt',
  'blob-key-invalid',
] as const;
export type TBlobStoreErrorCode = (typeof blobStoreErrorCodes)[number];

export class BlobStoreError extends Error {
  constructor(public readonly code: TBlobStoreErrorCode, messageArg: string) {
    super(messageArg);
    this.name = 'BlobStoreError';
  }
}

export interface IBlobStore {
  /**
   * Stores exactly the expected bytes under `key`. Refuses short, long or wrong bytes
   * with a `BlobStoreError`, leaving nothing behind. The source is read but never closed:
   * the caller settles it (e.g. aborts a stream with the error's code). Chunks are kept
   * until written, so a source must not reuse a chunk's memory after yielding it.
   */
  put(keyArg: string, expectedArg: IBlobExpectation, sourceArg: AsyncIterable<Uint8Array>): Promise<IStoredBlobRecord>;
  /** The record of a durable blob, or null. */
  stat(keyArg: string): Promise<IStoredBlobRecord | null>;
  /**
   * The bytes of a durable blob. The iteration throws `blob-corrupt` instead of finishing
   * when the bytes no longer match the record, so a consumer never sees a clean end of
   * wrong bytes.
   */
  read(keyArg: string, optionsArg?: IBlobReadOptions): AsyncIterable<Buffer>;
  delete(keyArg: string): Promise<void>;
}

export interface IBlobReadOptions {
  /**
   * The consumer is done with each chunk before it asks for the next one (it copies or
   * writes it out at once), so the store may read every chunk into the same few buffers
   * instead of a fresh one each: no garbage per chunk. A consumer that keeps chunks must
   * not set this.
   */
  transientChunks?: boolean;
}

/** Longest blob key. */
export const maximumBlobKeyLength = 512;
const blobKeyPattern = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

export const isBlobKey = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string'
  && valueArg.length <= maximumBlobKeyLength
  && blobKeyPattern.test(valueArg)
  && !valueArg.split('/').some((segment) => segment === '.' || segment === '..');

/**
 * How many written bytes trigger a background flush while a blob is being written. Each
 * flush is a journal commit and a device cache flush; every 32 MiB cost up to ~2 s of
 * system time per GiB on the benchmark machine, every 128 MiB still keeps the final fsync short.
 */
const backgroundSyncBytes = 128 * 1024 * 1024;

/** Writes every chunk in order with as few system calls as the kernel allows. */
const writeAllFully = async (handleArg: fs.FileHandle, chunksArg: Uint8Array[]): Promise<void> => {
  let pending = chunksArg;
  while (pending.length > 0) {
    const { bytesWritten } = await handleArg.writev(pending);
    if (bytesWritten <= 0) {
      throw new Error('the file system accepted no bytes');
    }
    let skip = bytesWritten;
    const rest: Uint8Array[] = [];
    for (const chunk of pending) {
      if (skip >= chunk.byteLength) {
        skip -= chunk.byteLength;
      } else {
        rest.push(skip > 0 ? chunk.subarray(skip) : chunk);
        skip = 0;
      }
    }
    pending = rest;
  }
};

/** Received chunks are gathered up to this many bytes (or chunks) per disk write. */
const writeBatchBytes = 1024 * 1024;
const writeBatchChunks = 64;

/** Bytes read from disk per chunk when streaming a blob out. */
const readChunkBytes = 1024 * 1024;

/**
 * Blobs as files: `objects/<sha256 of key>.blob` plus a `.json` record, written through
 * `tmp/` and renamed into place after fsync. A blob without its record does not exist.
 */
export class FilesystemBlobStore implements IBlobStore {
  private readonly objectsDir: string;
  private readonly tmpDir: string;
  private ready: Promise<void> | null = null;

  constructor(public readonly rootDir: string) {
    this.objectsDir = path.join(rootDir, 'objects');
    this.tmpDir = path.join(rootDir, 'tmp');
  }

  /** Creates the directories and removes temporary files a crash left behind. */
  async init(): Promise<void> {
    this.ready ??= (async () => {
      await fs.mkdir(this.objectsDir, { recursive: true });
      await fs.rm(this.tmpDir, { recursive: true, force: true });
      await fs.mkdir(this.tmpDir, { recursive: true });
    })();
    return this.ready;
  }

  /** Names of temporary files currently present (tests use it to prove cleanup). */
  async listTemporaryFiles(): Promise<string[]> {
    await this.init();
    return fs.readdir(this.tmpDir);
  }

  async put(keyArg: string, expectedArg: IBlobExpectation, sourceArg: AsyncIterable<Uint8Array>): Promise<IStoredBlobRecord> {
    await this.init();
    const { blobPath, recordPath } = this.pathsOf(keyArg);
    if (await this.stat(keyArg)) {
      throw new BlobStoreError('blob-exists', `blob ${keyArg} is already stored`);
    }
    const tmpName = `${randomBytes(12).toString('hex')}.part`;
    const tmpPath = path.join(this.tmpDir, tmpName);
    const handle = await fs.open(tmpPath, 'wx', 0o600);
    let closed = false;
    try {
      const hash = createHash('sha256');
      let written = 0;
      // Chunks are gathered into batches of about a MiB, one batch write stays in flight while
      // the next batch is received and hashed, and the kernel is asked to flush every few MiB
      // in the background, so the final fsync is short.
      let pendingWrite: Promise<void> = Promise.resolve();
      let pendingSync: Promise<void> | null = null;
      let unsyncedBytes = 0;
      let batch: Uint8Array[] = [];
      let batchBytes = 0;
      const writeBatch = async (): Promise<void> => {
        const chunks = batch;
        batch = [];
        batchBytes = 0;
        await pendingWrite;
        pendingWrite = writeAllFully(handle, chunks);
        if (unsyncedBytes >= backgroundSyncBytes && !pendingSync) {
          unsyncedBytes = 0;
          pendingSync = pendingWrite.then(() => handle.datasync()).finally(() => {
            pendingSync = null;
          });
        }
      };
      const iterator = sourceArg[Symbol.asyncIterator]();
      try {
        for (;;) {
          const next = await iterator.next();
          if (next.done) {
            break;
          }
          const chunk = next.value;
          if (written + chunk.byteLength > expectedArg.byteLength) {
            throw new BlobStoreError('blob-too-long', `blob ${keyArg} has more than ${expectedArg.byteLength} bytes`);
          }
          hash.update(chunk);
          written += chunk.byteLength;
          unsyncedBytes += chunk.byteLength;
          batch.push(chunk);
          batchBytes += chunk.byteLength;
          if (batchBytes >= writeBatchBytes || batch.length >= writeBatchChunks) {
            await writeBatch();
          }
        }
        if (batch.length > 0) {
          await writeBatch();
        }
      } finally {
        // Never close the file with a write or sync still running on it.
        await Promise.allSettled([pendingWrite, pendingSync]);
      }
      await pendingWrite;
      if (written < expectedArg.byteLength) {
        throw new BlobStoreError('blob-too-short', `blob ${keyArg} has ${written} of ${expectedArg.byteLength} bytes`);
      }
      if (hash.digest('hex') !== expectedArg.sha256) {
        throw new BlobStoreError('blob-sha256-mismatch', `blob ${keyArg} does not match its sha256`);
      }
      await handle.sync();
      await handle.close();
      closed = true;
      await fs.rename(tmpPath, blobPath);
      const record: IStoredBlobRecord = {
        key: keyArg,
        byteLength: expectedArg.byteLength,
        sha256: expectedArg.sha256,
        storedAt: Date.now(),
      };
      await this.writeDurably(recordPath, JSON.stringify(record));
      return record;
    } catch (error) {
      if (!closed) {
        await handle.close().catch(() => undefined);
      }
      await fs.rm(tmpPath, { force: true });
      throw error;
    }
  }

  async stat(keyArg: string): Promise<IStoredBlobRecord | null> {
    await this.init();
    const { blobPath, recordPath } = this.pathsOf(keyArg);
    let record: IStoredBlobRecord;
    try {
      record = JSON.parse(await fs.readFile(recordPath, 'utf8')) as IStoredBlobRecord;
    } catch {
      return null;
    }
    if (record.key !== keyArg) {
      return null;
    }
    try {
      const stats = await fs.stat(blobPath);
      return stats.size === record.byteLength ? record : null;
    } catch {
      return null;
    }
  }

  async *read(keyArg: string, optionsArg: IBlobReadOptions = {}): AsyncIterable<Buffer> {
    const record = await this.stat(keyArg);
    if (!record) {
      throw new BlobStoreError('blob-not-found', `blob ${keyArg} is not stored`);
    }
    const handle = await fs.open(this.pathsOf(keyArg).blobPath, 'r');
    try {
      const hash = createHash('sha256');
      let length = 0;
      let pending: Buffer | null = null;
      // Transient chunks alternate between two buffers: the one held back and the one read.
      const buffers = optionsArg.transientChunks
        ? [Buffer.allocUnsafeSlow(readChunkBytes), Buffer.allocUnsafeSlow(readChunkBytes)]
        : null;
      let turn = 0;
      // The last chunk is held back until the digest is proven, so wrong bytes never end cleanly.
      for (;;) {
        const target = buffers ? buffers[turn++ % 2] : Buffer.allocUnsafeSlow(readChunkBytes);
        const { bytesRead } = await handle.read(target, 0, readChunkBytes, null);
        if (bytesRead === 0) {
          break;
        }
        const bytes = bytesRead === target.byteLength ? target : target.subarray(0, bytesRead);
        hash.update(bytes);
        length += bytesRead;
        if (length > record.byteLength) {
          throw new BlobStoreError('blob-corrupt', `blob ${keyArg} grew past its recorded length`);
        }
        if (pending) {
          yield pending;
        }
        pending = bytes;
      }
      if (length !== record.byteLength || hash.digest('hex') !== record.sha256) {
        throw new BlobStoreError('blob-corrupt', `blob ${keyArg} no longer matches its record`);
      }
      if (pending) {
        yield pending;
      }
    } finally {
      await handle.close();
    }
  }

  async delete(keyArg: string): Promise<void> {
    await this.init();
    const { blobPath, recordPath } = this.pathsOf(keyArg);
    // The record goes first: without it the blob no longer exists for any reader.
    await fs.rm(recordPath, { force: true });
    await fs.rm(blobPath, { force: true });
  }

  private pathsOf(keyArg: string): { blobPath: string; recordPath: string } {
    if (!isBlobKey(keyArg)) {
      throw new BlobStoreError('blob-key-invalid', 'blob key must be a relative path of safe characters');
    }
    const name = createHash('sha256').update(keyArg, 'utf8').digest('hex');
    return {
      blobPath: path.join(this.objectsDir, `${name}.blob`),
      recordPath: path.join(this.objectsDir, `${name}.json`),
    };
  }

  private async writeDurably(targetArg: string, textArg: string): Promise<void> {
    const tmpPath = path.join(this.tmpDir, `${randomBytes(12).toString('hex')}.record`);
    const handle = await fs.open(tmpPath, 'wx', 0o600);
    try {
      await handle.writeFile(textArg, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(tmpPath, targetArg);
    await this.syncDirectory(this.objectsDir);
  }

  private async syncDirectory(dirArg: string): Promise<void> {
    const handle = await fs.open(dirArg, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }
}
