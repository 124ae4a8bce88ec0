import { createHash, randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
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
 * Direct (page-cache-bypassing) writes of received bytes. Filling the page cache with a GiB
 * of fresh pages cost about 2 s of system time per GiB on the benchmark VM (the host backs
 * newly touched guest memory), far more than hashing; writes that go straight to the device
 * cost under 0.1 s/GiB. Direct writes need block-aligned memory, offsets and lengths, so
 * the bytes are copied into a few aligned staging buffers; the unaligned tail goes through
 * the ordinary handle. The final fsync (of the same file) stays what makes the bytes durable.
 */
const directStagingBytes = 2 * 1024 * 1024;
const directStagingBuffers = 3;
/** Alignment used for direct writes: covers 512-byte and 4 KiB logical blocks. */
const directAlignment = 4096;

/**
 * Carves `countArg` views of `sizeArg` bytes, all starting on an aligned address, out of one
 * allocation. The address of a Buffer is not visible from JavaScript, so the aligned start is
 * found by trying a direct transfer of one block at each candidate offset: a misaligned one
 * fails with EINVAL. Null when none is accepted.
 */
const findAlignedViews = async (
  countArg: number,
  sizeArg: number,
  tryArg: (slabArg: Buffer, offsetArg: number) => Promise<unknown>,
): Promise<Buffer[] | null> => {
  const slab = Buffer.allocUnsafeSlow(countArg * sizeArg + directAlignment);
  for (let offset = 0; offset < directAlignment; offset += 16) {
    try {
      await tryArg(slab, offset);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EINVAL') {
        continue;
      }
      return null;
    }
    const views: Buffer[] = [];
    for (let index = 0; index < countArg; index++) {
      views.push(slab.subarray(offset + index * sizeArg, offset + (index + 1) * sizeArg));
    }
    return views;
  }
  return null;
};

class DirectFileWriter {
  private readonly buffers: Buffer[];
  private turn = 0;
  private current: Buffer;
  private filled = 0;
  private position = 0;
  private readonly inFlight: Promise<void>[] = [];

  private constructor(private readonly handle: fs.FileHandle, buffersArg: Buffer[]) {
    this.buffers = buffersArg;
    this.current = buffersArg[0];
  }

  /**
   * Opens a second, direct handle on a new empty file, or returns null where the file system
   * refuses direct writes (tmpfs, some overlays) or the memory alignment cannot be found.
   */
  static async open(pathArg: string): Promise<DirectFileWriter | null> {
    if (typeof fsConstants.O_DIRECT !== 'number') {
      return null;
    }
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(pathArg, fsConstants.O_WRONLY | fsConstants.O_DIRECT);
    } catch {
      return null;
    }
    // The probe writes one block at the start of the still empty file; it is truncated away.
    const buffers = await findAlignedViews(directStagingBuffers, directStagingBytes, (slabArg, offsetArg) =>
      handle.write(slabArg, offsetArg, directAlignment, 0));
    const emptied = await handle.truncate(0).then(() => true, () => false);
    if (buffers && emptied) {
      return new DirectFileWriter(handle, buffers);
    }
    await handle.close().catch(() => undefined);
    return null;
  }

  /** Copies the chunk into the staging buffers, writing each one out as it fills. */
  async push(chunkArg: Uint8Array): Promise<void> {
    let consumed = 0;
    while (consumed < chunkArg.byteLength) {
      const take = Math.min(chunkArg.byteLength - consumed, directStagingBytes - this.filled);
      this.current.set(chunkArg.subarray(consumed, consumed + take), this.filled);
      this.filled += take;
      consumed += take;
      if (this.filled === directStagingBytes) {
        await this.submitCurrent();
      }
    }
  }

  /** Waits for every direct write, then writes the unaligned tail through `tailHandleArg`. */
  async finish(tailHandleArg: fs.FileHandle): Promise<void> {
    await this.settle();
    if (this.filled > 0) {
      await writeAllFullyAt(tailHandleArg, this.current.subarray(0, this.filled), this.position);
      this.position += this.filled;
      this.filled = 0;
    }
  }

  /** Waits for the writes in flight (whatever their outcome) so the handle can be closed. */
  async settle(): Promise<void> {
    const pending = this.inFlight.splice(0);
    const results = await Promise.allSettled(pending);
    const failed = results.find((resultArg): resultArg is PromiseRejectedResult => resultArg.status === 'rejected');
    if (failed) {
      throw failed.reason;
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.inFlight.splice(0));
    await this.handle.close().catch(() => undefined);
  }

  private async submitCurrent(): Promise<void> {
    const buffer = this.current;
    const position = this.position;
    this.position += directStagingBytes;
    this.filled = 0;
    const write = writeAllFullyAt(this.handle, buffer, position);
    // Observed here so a failure is never an unhandled rejection; it is rethrown when awaited.
    write.catch(() => undefined);
    this.inFlight.push(write);
    // A staging buffer is reused only after its write finished: at most all but one in flight.
    if (this.inFlight.length >= directStagingBuffers) {
      await this.inFlight.shift();
    }
    this.turn = (this.turn + 1) % directStagingBuffers;
    this.current = this.buffers[this.turn];
  }
}

/** Writes all of `bytesArg` at `positionArg`, however the kernel splits it. */
const writeAllFullyAt = async (handleArg: fs.FileHandle, bytesArg: Uint8Array, positionArg: number): Promise<void> => {
  let done = 0;
  while (done < bytesArg.byteLength) {
    const { bytesWritten } = await handleArg.write(bytesArg, done, bytesArg.byteLength - done, positionArg + done);
    if (bytesWritten <= 0) {
      throw new Error('the file system accepted no bytes');
    }
    done += bytesWritten;
  }
};

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
    let direct: DirectFileWriter | null = null;
    try {
      direct = await DirectFileWriter.open(tmpPath);
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
          if (direct) {
            await direct.push(chunk);
            continue;
          }
          batch.push(chunk);
          batchBytes += chunk.byteLength;
          if (batchBytes >= writeBatchBytes || batch.length >= writeBatchChunks) {
            await writeBatch();
          }
        }
        if (direct) {
          await direct.finish(handle);
        } else if (batch.length > 0) {
          await writeBatch();
        }
      } finally {
        // Never close the file with a write or sync still running on it.
        await Promise.allSettled([pendingWrite, pendingSync, direct?.settle()]);
      }
      await pendingWrite;
      if (written < expectedArg.byteLength) {
        throw new BlobStoreError('blob-too-short', `blob ${keyArg} has ${written} of ${expectedArg.byteLength} bytes`);
      }
      if (hash.digest('hex') !== expectedArg.sha256) {
        throw new BlobStoreError('blob-sha256-mismatch', `blob ${keyArg} does not match its sha256`);
      }
      // fsync of the inode covers the direct writes too (and flushes the device cache).
      await handle.sync();
      await direct?.close();
      direct = null;
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
      await direct?.close();
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
    const blobPath = this.pathsOf(keyArg).blobPath;
    const handle = await fs.open(blobPath, 'r');
    let directHandle: fs.FileHandle | null = null;
    try {
      const hash = createHash('sha256');
      let length = 0;
      let pending: Buffer | null = null;
      // Transient chunks alternate between two buffers: the one held back and the one read.
      // Where the file system allows, they are aligned and read directly, past the page cache
      // (see DirectFileWriter for why that matters); the probe reads the first block.
      let buffers: Buffer[] | null = null;
      if (optionsArg.transientChunks) {
        if (typeof fsConstants.O_DIRECT === 'number' && record.byteLength >= directAlignment) {
          directHandle = await fs.open(blobPath, fsConstants.O_RDONLY | fsConstants.O_DIRECT).catch(() => null);
          const probeHandle = directHandle;
          buffers = probeHandle
            ? await findAlignedViews(2, readChunkBytes, (slabArg, offsetArg) => probeHandle.read(slabArg, offsetArg, directAlignment, 0))
            : null;
          if (!buffers && directHandle) {
            await directHandle.close();
            directHandle = null;
          }
        }
        buffers ??= [Buffer.allocUnsafeSlow(readChunkBytes), Buffer.allocUnsafeSlow(readChunkBytes)];
      }
      let turn = 0;
      // The last chunk is held back until the digest is proven, so wrong bytes never end cleanly.
      for (;;) {
        const target = buffers ? buffers[turn++ % 2] : Buffer.allocUnsafeSlow(readChunkBytes);
        // Direct reads only from aligned positions; after a short read the ordinary handle goes on.
        const source = directHandle && length % directAlignment === 0 ? directHandle : handle;
        const { bytesRead } = await source.read(target, 0, readChunkBytes, length);
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
      await directHandle?.close();
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
