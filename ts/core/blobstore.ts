import { createHash, randomBytes, type Hash } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { syncDirectory, writeFileSynced } from './durablefiles.js';
import { StagedSha256, stagingSlotOf, type IStagingSlot } from './hashworker.js';

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
  /** A read's `offset`/`length` reach outside the blob. */
  'blob-range-invalid',
  /** The store did not answer (unreachable, timed out, throttled, a server error): retry later. */
  'blob-store-unavailable',
  /** The store answered with a refusal of its own (e.g. access denied, no such bucket). */
  'blob-store-failed',
] as const;
export type TBlobStoreErrorCode = (typeof blobStoreErrorCodes)[number];

/** The prefixes a blob store failure's refusal reason carries, one per kind of blob. */
export const blobStoreReasonPrefixes = ['closure', 'image-version'] as const;

/**
 * The refusal reason of a blob store failure for one kind of blob, e.g. `closure-blob-store-unavailable`:
 * the prefix and the code are both tokens, so the reason is one (test/contracts.reasons.test.ts checks every pair).
 */
export const blobStoreReason = (prefixArg: (typeof blobStoreReasonPrefixes)[number], codeArg: TBlobStoreErrorCode): string =>
  `${prefixArg}-${codeArg}`;

export class BlobStoreError extends Error {
  constructor(public readonly code: TBlobStoreErrorCode, messageArg: string) {
    super(messageArg);
    this.name = 'BlobStoreError';
  }
}

/** Where a blob's bytes go while it is written: staged, then proven by `finish` (its sha256). */
export interface IBlobStaging {
  push(chunkArg: Uint8Array): Promise<void>;
  /** The sha256 (hex) of everything pushed, once the last write is done. */
  finish(): Promise<string>;
  /** Resolves once nothing is in flight any more (also after a failure). */
  settle(): Promise<unknown>;
}

/**
 * Copies a source into a staging sink and proves it: never more than the expected length, exactly
 * that length at the end, and the expected sha256. Each chunk goes back to its source once copied.
 * Shared by the filesystem and the S3 store; the staging is settled before any failure leaves here,
 * so a caller never closes a file or aborts an upload that a write or a part still uses.
 */
export const drainProvenBlob = async (
  keyArg: string,
  sourceArg: IBlobSource,
  expectedArg: { byteLength: number; sha256: string },
  stagingArg: IBlobStaging,
): Promise<void> => {
  let written = 0;
  let sha256: string;
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
      written += chunk.byteLength;
      await stagingArg.push(chunk);
      sourceArg.release?.(chunk);
    }
    sha256 = await stagingArg.finish();
  } finally {
    // Nothing may still be in flight when the caller cleans up.
    await stagingArg.settle().catch(() => undefined);
  }
  if (written < expectedArg.byteLength) {
    throw new BlobStoreError('blob-too-short', `blob ${keyArg} has ${written} of ${expectedArg.byteLength} bytes`);
  }
  if (sha256 !== expectedArg.sha256) {
    throw new BlobStoreError('blob-sha256-mismatch', `blob ${keyArg} does not match its sha256`);
  }
};

/**
 * The bytes `put` stores. A source may ask for each chunk back once the store has copied it
 * out (`release`), e.g. to free the chunk's memory at once; the store never touches a chunk
 * after releasing it.
 */
export interface IBlobSource extends AsyncIterable<Uint8Array> {
  release?(chunkArg: Uint8Array): void;
}

export interface IBlobStore {
  /**
   * Stores exactly the expected bytes under `key`. Refuses short, long or wrong bytes
   * with a `BlobStoreError`, leaving nothing behind. The source is read but never closed:
   * the caller settles it (e.g. aborts a stream with the error's code). Chunks are kept
   * until written, so a source must not reuse a chunk's memory after yielding it.
   */
  put(keyArg: string, expectedArg: IBlobExpectation, sourceArg: IBlobSource): Promise<IStoredBlobRecord>;
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
  /**
   * A sha256 the store feeds every byte of a whole read into, in place of a hash of its own, and
   * proves its record against (a copy of it); the caller takes its digest after the read. A caller
   * that checks the bytes against a digest of its own (a backup's receipt) so hashes them once for
   * both checks. Not used for a range.
   */
  sharedHash?: Hash;
  /**
   * A range: the bytes from `offset` (default 0), `length` of them (default: to the end). A
   * range that is not the whole blob proves only its length, not the sha256; a range outside
   * the blob is refused with `blob-range-invalid`.
   */
  offset?: number;
  length?: number;
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
 * How many bytes written through the page cache trigger a background flush (only where direct
 * writes are refused). Each flush is a journal commit and a device cache flush; every 32 MiB
 * cost up to ~2 s of system time per GiB on the benchmark machine, every 128 MiB still keeps
 * the final fsync short.
 */
const backgroundSyncBytes = 128 * 1024 * 1024;

/** Bytes read from disk per chunk when streaming a blob out. */
const readChunkBytes = 1024 * 1024;

/**
 * Received bytes are copied into a few staging buffers; each full buffer is hashed (by the
 * sha256 worker, see `StagedSha256` in hashworker.ts) and then written out while the next
 * ones fill.
 *
 * Writes are direct (past the page cache) where the file system allows: filling the page cache
 * with a GiB of fresh pages cost about 2 s of system time per GiB on the benchmark VM (the host
 * backs newly touched guest memory), far more than hashing; writes that go straight to the
 * device cost under 0.1 s/GiB. Direct writes need block-aligned memory, offsets and lengths,
 * so the staging buffers are aligned and the unaligned tail goes through the ordinary handle.
 * The final fsync (of the same file) stays what makes the bytes durable.
 */
const stagingBytes = 2 * 1024 * 1024;
const stagingBuffers = 3;
/** Alignment used for direct writes: covers 512-byte and 4 KiB logical blocks. */
const directAlignment = 4096;

/**
 * The first offset into `slabArg` at which memory is aligned for direct transfers, or null.
 * The address of a buffer is not visible from JavaScript, so each candidate offset is tried
 * with a direct transfer of one block (`guessArg` first): a misaligned one fails with EINVAL.
 */
const findAlignedOffset = async (
  slabArg: Buffer,
  tryArg: (slabArg: Buffer, offsetArg: number) => Promise<unknown>,
  guessArg = 0,
): Promise<number | null> => {
  const candidates = [guessArg];
  for (let offset = 0; offset < directAlignment; offset += 16) {
    if (offset !== guessArg) {
      candidates.push(offset);
    }
  }
  for (const offset of candidates) {
    try {
      await tryArg(slabArg, offset);
      return offset;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EINVAL') {
        return null;
      }
    }
  }
  return null;
};

/** `countArg` aligned views of `sizeArg` bytes carved out of one allocation, or null. */
const findAlignedViews = async (
  countArg: number,
  sizeArg: number,
  tryArg: (slabArg: Buffer, offsetArg: number) => Promise<unknown>,
): Promise<Buffer[] | null> => {
  const slab = Buffer.allocUnsafeSlow(countArg * sizeArg + directAlignment);
  const offset = await findAlignedOffset(slab, tryArg);
  return offset === null
    ? null
    : Array.from({ length: countArg }, (_value, indexArg) => slab.subarray(offset + indexArg * sizeArg, offset + (indexArg + 1) * sizeArg));
};

/**
 * Writes a new file from pushed chunks through the staging buffers of a `StagedSha256`, which
 * hashes each buffer on the worker thread before it is written here.
 */
class StagedFileWriter {
  private unsyncedBytes = 0;
  private readonly staging: StagedSha256;

  private constructor(
    private readonly handle: fs.FileHandle,
    private readonly direct: fs.FileHandle | null,
    slotsArg: IStagingSlot[],
  ) {
    this.staging = new StagedSha256(slotsArg, (bytesArg, positionArg) => this.write(bytesArg, positionArg));
  }

  /**
   * A writer for the new, empty file at `pathArg`, already open as `handleArg`. It writes
   * directly through a second handle where the file system allows direct writes and aligned
   * memory is found (some file systems refuse them), through `handleArg` otherwise.
   */
  static async open(pathArg: string, handleArg: fs.FileHandle, directIoArg: boolean): Promise<StagedFileWriter> {
    let direct: fs.FileHandle | null = null;
    const slots: IStagingSlot[] = [];
    if (directIoArg) {
      direct = await fs.open(pathArg, fsConstants.O_WRONLY | fsConstants.O_DIRECT).catch(() => null);
      const probe = direct;
      // Each probe writes one block at the start of the still empty file; it is truncated away.
      let guess = 0;
      while (probe && slots.length < stagingBuffers) {
        const memory = Buffer.allocUnsafeSlow(stagingBytes + directAlignment);
        const offset = await findAlignedOffset(memory, (slabArg, offsetArg) => probe.write(slabArg, offsetArg, directAlignment, 0), guess);
        if (offset === null) {
          break;
        }
        slots.push(stagingSlotOf(memory, offset, stagingBytes));
        guess = offset;
      }
      const emptied = slots.length === stagingBuffers && await handleArg.truncate(0).then(() => true, () => false);
      if (!emptied) {
        await direct?.close().catch(() => undefined);
        direct = null;
        slots.length = 0;
      }
    }
    return new StagedFileWriter(handleArg, direct, slots.length > 0 ? slots : StagedSha256.plainSlots(stagingBuffers, stagingBytes));
  }

  /** Copies the chunk into the staging buffers, writing each one out as it fills. */
  push(chunkArg: Uint8Array): Promise<void> {
    return this.staging.push(chunkArg);
  }

  /** Writes the rest, waits for every write, and answers the sha256 of all pushed bytes. */
  finish(): Promise<string> {
    return this.staging.finish();
  }

  /** Waits for the writes in flight, whatever their outcome, then fails with the first failure. */
  settle(): Promise<void> {
    return this.staging.settle();
  }

  /** Releases the direct handle and the hash; the ordinary handle stays the caller's. */
  async close(): Promise<void> {
    await this.staging.close();
    await this.direct?.close().catch(() => undefined);
  }

  /**
   * Writes one hashed staging buffer at its position: directly when it is whole aligned blocks
   * (every buffer but the last is full, so positions stay aligned), through the page cache
   * otherwise, with a flush every `backgroundSyncBytes` there.
   */
  private async write(bytesArg: Buffer, positionArg: number): Promise<void> {
    const target = this.direct && bytesArg.byteLength % directAlignment === 0 ? this.direct : this.handle;
    await writeAllFullyAt(target, bytesArg, positionArg);
    if (target === this.handle) {
      this.unsyncedBytes += bytesArg.byteLength;
      if (this.unsyncedBytes >= backgroundSyncBytes) {
        this.unsyncedBytes = 0;
        await this.handle.datasync();
      }
    }
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

  /** Direct (page-cache-bypassing) I/O is used where the file system allows it, unless turned off. */
  private readonly directIo: boolean;

  constructor(public readonly rootDir: string, optionsArg: { directIo?: boolean } = {}) {
    this.directIo = (optionsArg.directIo ?? true) && typeof fsConstants.O_DIRECT === 'number';
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

  async put(keyArg: string, expectedArg: IBlobExpectation, sourceArg: IBlobSource): Promise<IStoredBlobRecord> {
    await this.init();
    const { blobPath, recordPath } = this.pathsOf(keyArg);
    if (await this.stat(keyArg)) {
      throw new BlobStoreError('blob-exists', `blob ${keyArg} is already stored`);
    }
    const tmpName = `${randomBytes(12).toString('hex')}.part`;
    const tmpPath = path.join(this.tmpDir, tmpName);
    const handle = await fs.open(tmpPath, 'wx', 0o600);
    let closed = false;
    let writer: StagedFileWriter | null = null;
    try {
      writer = await StagedFileWriter.open(tmpPath, handle, this.directIo);
      await drainProvenBlob(keyArg, sourceArg, expectedArg, writer);
      // fsync of the inode covers the direct writes too (and flushes the device cache).
      await handle.sync();
      await writer.close();
      writer = null;
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
      await writer?.close();
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
    if (optionsArg.offset !== undefined || optionsArg.length !== undefined) {
      yield* this.readRange(keyArg, blobPath, record, optionsArg.offset ?? 0, optionsArg.length);
      return;
    }
    const handle = await fs.open(blobPath, 'r');
    let directHandle: fs.FileHandle | null = null;
    let reading: Promise<unknown> | null = null;
    try {
      const hash = optionsArg.sharedHash ?? createHash('sha256');
      let length = 0;
      let pending: Buffer | null = null;
      // Transient chunks rotate through three buffers: the one held back (the consumer has it), the
      // one being hashed, and the one the next read fills meanwhile, so reading and hashing overlap.
      // Where the file system allows, they are aligned and read directly, past the page cache
      // (see DirectFileWriter for why that matters); the probe reads the first block.
      let buffers: Buffer[] | null = null;
      if (optionsArg.transientChunks) {
        if (this.directIo && record.byteLength >= directAlignment) {
          directHandle = await fs.open(blobPath, fsConstants.O_RDONLY | fsConstants.O_DIRECT).catch(() => null);
          const probeHandle = directHandle;
          buffers = probeHandle
            ? await findAlignedViews(3, readChunkBytes, (slabArg, offsetArg) => probeHandle.read(slabArg, offsetArg, directAlignment, 0))
            : null;
          if (!buffers && directHandle) {
            await directHandle.close();
            directHandle = null;
          }
        }
        buffers ??= [Buffer.allocUnsafeSlow(readChunkBytes), Buffer.allocUnsafeSlow(readChunkBytes), Buffer.allocUnsafeSlow(readChunkBytes)];
      }
      let turn = 0;
      const readAt = (positionArg: number): Promise<{ target: Buffer; bytesRead: number }> => {
        const target = buffers ? buffers[turn++ % 3]! : Buffer.allocUnsafeSlow(readChunkBytes);
        // Direct reads only from aligned positions; after a short read the ordinary handle goes on.
        const source = directHandle && positionArg % directAlignment === 0 ? directHandle : handle;
        const read = source.read(target, 0, readChunkBytes, positionArg).then(({ bytesRead }) => ({ target, bytesRead }));
        reading = read.catch(() => undefined);
        return read;
      };
      let next = readAt(0);
      // The last chunk is held back until the digest is proven, so wrong bytes never end cleanly.
      for (;;) {
        const { target, bytesRead } = await next;
        if (bytesRead === 0) {
          break;
        }
        const bytes = bytesRead === target.byteLength ? target : target.subarray(0, bytesRead);
        length += bytesRead;
        if (length > record.byteLength) {
          throw new BlobStoreError('blob-corrupt', `blob ${keyArg} grew past its recorded length`);
        }
        // The next read fills the buffer the consumer gave back while this one is hashed.
        next = readAt(length);
        hash.update(bytes);
        if (pending) {
          yield pending;
        }
        pending = bytes;
      }
      const digest = (optionsArg.sharedHash ? hash.copy() : hash).digest('hex');
      if (length !== record.byteLength || digest !== record.sha256) {
        throw new BlobStoreError('blob-corrupt', `blob ${keyArg} no longer matches its record`);
      }
      if (pending) {
        yield pending;
      }
    } finally {
      // A read still under way (the consumer stopped early) ends before its handle closes.
      await reading;
      await directHandle?.close();
      await handle.close();
    }
  }

  /** A range of a blob: only its length is proven (a part of the bytes has no sha256 to check). */
  private async *readRange(keyArg: string, blobPathArg: string, recordArg: IStoredBlobRecord, offsetArg: number, lengthArg?: number): AsyncIterable<Buffer> {
    const end = lengthArg === undefined ? recordArg.byteLength : offsetArg + lengthArg;
    if (!Number.isSafeInteger(offsetArg) || !Number.isSafeInteger(end) || offsetArg < 0 || end < offsetArg || end > recordArg.byteLength) {
      throw new BlobStoreError('blob-range-invalid', `blob ${keyArg} has ${recordArg.byteLength} bytes; the range asked for is outside`);
    }
    const handle = await fs.open(blobPathArg, 'r');
    try {
      for (let position = offsetArg; position < end;) {
        const target = Buffer.allocUnsafeSlow(Math.min(readChunkBytes, end - position));
        const { bytesRead } = await handle.read(target, 0, target.byteLength, position);
        if (bytesRead === 0) {
          throw new BlobStoreError('blob-corrupt', `blob ${keyArg} is shorter than its record`);
        }
        position += bytesRead;
        yield bytesRead === target.byteLength ? target : target.subarray(0, bytesRead);
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
    await writeFileSynced(tmpPath, textArg, 'wx');
    await fs.rename(tmpPath, targetArg);
    await syncDirectory(this.objectsDir);
  }
}
