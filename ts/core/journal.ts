import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { BSON, type Document } from 'mongodb';
import { crc32c } from './crc32c.js';
import { noProgressError, syncDirectory, writeFully } from './durablefiles.js';
import { injectedError, StorageFaults } from './storagefaults.js';
import type { TCloudlyLogger } from './logger.js';

/**
 * The embedded database's write-ahead journal. Every committed change is one record, appended in
 * commit order and on the device (fdatasync) before the write that made it is answered. Writes
 * that arrive while a sync runs wait for the next one together (group commit), so a burst of
 * concurrent writes costs one sync, not one each.
 *
 * Each record is a frame: magic, CRC-32C of what follows, payload length, the record's sequence
 * number (lsn), then the payload (BSON, so Dates, binary and 64-bit integers keep their types).
 * The lsn sits in the header so recovery skips what a snapshot covers without decoding it. The journal is a series of
 * segment files named after the sequence number (lsn) of their first record; compaction starts a
 * new segment and drops the ones a durable snapshot has made unnecessary.
 */

export const frameMagic = 0x314a4c43; // "CLJ1" little-endian
export const frameHeaderBytes = 20;
/** Larger than any record the embedded server can produce (a MongoDB document is at most 16 MiB). */
export const maximumFramePayloadBytes = 64 * 1024 * 1024;
export const journalSegmentPrefix = 'embedded-db.journal.';

/** Error code the embedded server answers when a write could not be journaled. */
export const journalUnavailableCode = 9_001_701;

export class JournalUnavailableError extends Error {
  public readonly code: number = journalUnavailableCode;
  public readonly codeName: string = 'CloudlyJournalUnavailable';
  constructor(detail: string) {
    super(`embedded database journal unavailable: ${detail}`);
    this.name = 'JournalUnavailableError';
  }
}

/** Error code the embedded server answers when a write was refused because the disk is full. */
export const storageFullCode = 9_001_702;

/**
 * A write refused because the file system has no space (or quota) left. Unlike a failed sync it
 * leaves the journal trustworthy: the database serves reads and takes writes again once space
 * returns (docs/storage.md, "Read-only on a full disk").
 */
export class StorageFullError extends JournalUnavailableError {
  public override readonly code = storageFullCode;
  public override readonly codeName = 'CloudlyStorageFull';
  constructor(detail: string) {
    super(`the disk is full (${detail})`);
    this.name = 'StorageFullError';
  }
}

/** ENOSPC or EDQUOT: the file system has no room for the bytes. */
export const isNoSpaceCode = (codeArg: string | undefined): boolean => codeArg === 'ENOSPC' || codeArg === 'EDQUOT';

/** The file a storage probe writes and removes; its name is never read back. */
export const storageProbeFileName = 'embedded-db.probe';
/** What a probe writes: enough for a batch of small records. */
const storageProbeBytes = 16 * 1024;

/** A journal or snapshot file whose bytes cannot be trusted; start-up stops and changes nothing. */
export class StorageDamagedError extends Error {
  constructor(public readonly file: string, public readonly offset: number | null, detail: string) {
    super(`embedded database file ${file} is damaged${offset === null ? '' : ` at byte offset ${offset}`} (${detail}); `
      + 'refusing to start and leaving every file untouched (see docs/storage.md, "A refused start")');
    this.name = 'StorageDamagedError';
  }
}

export const encodeFrame = (payloadArg: Document, lsnArg = 0): Buffer => {
  const payload = BSON.serialize(payloadArg);
  const frame = Buffer.allocUnsafe(frameHeaderBytes + payload.length);
  frame.writeUInt32LE(frameMagic, 0);
  frame.writeUInt32LE(payload.length, 8);
  frame.writeUIntLE(lsnArg, 12, 6);
  frame.writeUInt16LE(0, 18);
  frame.set(payload, frameHeaderBytes);
  frame.writeUInt32LE(crc32c(frame, 8), 4);
  return frame;
};

export interface IFrame {
  offset: number;
  end: number;
  lsn: number;
  /** Null when read with `decodeArg` false. */
  payload: Document | null;
}

type TFrameRead = { ok: true; frame: IFrame } | { ok: false; reason: string; truncated: boolean };

/** Reads the frame at `offsetArg`; says why not when it cannot (truncated: it runs past the end). */
export const readFrameAt = (bytesArg: Buffer, offsetArg: number, decodeArg = true): TFrameRead => {
  if (offsetArg + frameHeaderBytes > bytesArg.length) {
    return { ok: false, reason: 'incomplete frame header', truncated: true };
  }
  if (bytesArg.readUInt32LE(offsetArg) !== frameMagic) {
    return { ok: false, reason: 'no frame marker', truncated: false };
  }
  const length = bytesArg.readUInt32LE(offsetArg + 8);
  if (length > maximumFramePayloadBytes) {
    return { ok: false, reason: `implausible frame length ${length}`, truncated: false };
  }
  const end = offsetArg + frameHeaderBytes + length;
  if (end > bytesArg.length) {
    return { ok: false, reason: 'frame runs past the end of the file', truncated: true };
  }
  if (crc32c(bytesArg, offsetArg + 8, end) !== bytesArg.readUInt32LE(offsetArg + 4)) {
    return { ok: false, reason: 'checksum mismatch', truncated: false };
  }
  const lsn = bytesArg.readUIntLE(offsetArg + 12, 6);
  if (!decodeArg) {
    return { ok: true, frame: { offset: offsetArg, end, lsn, payload: null } };
  }
  try {
    const payload = BSON.deserialize(bytesArg.subarray(offsetArg + frameHeaderBytes, end), { promoteLongs: false });
    return { ok: true, frame: { offset: offsetArg, end, lsn, payload } };
  } catch (error) {
    return { ok: false, reason: `undecodable payload: ${(error as Error).message}`, truncated: false };
  }
};

/** True when a valid frame starts anywhere after `offsetArg` (the damage is not just a torn tail). */
export const validFrameFollows = (bytesArg: Buffer, offsetArg: number): boolean => {
  const marker = Buffer.allocUnsafe(4);
  marker.writeUInt32LE(frameMagic, 0);
  let at = bytesArg.indexOf(marker, offsetArg + 1);
  while (at !== -1) {
    if (readFrameAt(bytesArg, at).ok) {
      return true;
    }
    at = bytesArg.indexOf(marker, at + 1);
  }
  return false;
};

export const segmentFileName = (firstLsnArg: number): string =>
  `${journalSegmentPrefix}${firstLsnArg.toString().padStart(16, '0')}`;

export interface IJournalSegment {
  path: string;
  firstLsn: number;
}

export const listSegments = async (dirArg: string): Promise<IJournalSegment[]> => {
  const names = await fsp.readdir(dirArg).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') {
      return [] as string[];
    }
    throw error;
  });
  return names
    .filter((name) => name.startsWith(journalSegmentPrefix) && /^[0-9]{16}$/.test(name.slice(journalSegmentPrefix.length)))
    .map((name) => ({ path: path.join(dirArg, name), firstLsn: Number(name.slice(journalSegmentPrefix.length)) }))
    .sort((a, b) => a.firstLsn - b.firstLsn);
};

export interface IJournalRecord extends Document {
  lsn: number;
}

export interface IJournalReadResult {
  /** Records after `afterLsnArg`, in order. */
  records: IJournalRecord[];
  lastLsn: number;
  /** A torn final record to cut off before appending again (never acknowledged). */
  tornTail: { path: string; offset: number; bytes: number; reason: string } | null;
  segments: IJournalSegment[];
}

/**
 * Reads every segment and returns the records after `afterLsnArg`. Refuses (StorageDamagedError)
 * on anything but a torn final record: a damaged record with valid ones after it, damage in any
 * segment but the last, or a gap in the sequence. Changes no file.
 */
export const readJournal = async (dirArg: string, afterLsnArg: number): Promise<IJournalReadResult> => {
  const segments = await listSegments(dirArg);
  const records: IJournalRecord[] = [];
  let expectedLsn: number | null = null;
  let tornTail: IJournalReadResult['tornTail'] = null;
  for (const [index, segment] of segments.entries()) {
    const bytes = await fsp.readFile(segment.path);
    const isLast = index === segments.length - 1;
    if (expectedLsn !== null && segment.firstLsn !== expectedLsn) {
      throw new StorageDamagedError(segment.path, 0, `segment starts at record ${segment.firstLsn}, expected ${expectedLsn}: records are missing`);
    }
    let offset = 0;
    let segmentLsn = segment.firstLsn;
    while (offset < bytes.length) {
      const read = readFrameAt(bytes, offset, segmentLsn > afterLsnArg);
      if (!read.ok) {
        if (isLast && !validFrameFollows(bytes, offset)) {
          tornTail = { path: segment.path, offset, bytes: bytes.length - offset, reason: read.reason };
          break;
        }
        throw new StorageDamagedError(segment.path, offset, `${read.reason}, and ${isLast ? 'valid records follow it' : 'later segments follow it'}`);
      }
      const { lsn } = read.frame;
      if (lsn !== segmentLsn) {
        throw new StorageDamagedError(segment.path, offset, `record carries sequence number ${lsn}, expected ${segmentLsn}`);
      }
      if (lsn > afterLsnArg) {
        records.push({ ...read.frame.payload!, lsn });
      }
      segmentLsn++;
      offset = read.frame.end;
    }
    expectedLsn = segmentLsn;
  }
  const lastLsn = expectedLsn === null ? afterLsnArg : Math.max(afterLsnArg, expectedLsn - 1);
  if (records.length > 0 && records[0].lsn !== afterLsnArg + 1) {
    const first = segments.find((segment) => segment.firstLsn <= records[0].lsn) ?? segments[0];
    throw new StorageDamagedError(first.path, 0, `the snapshot covers records up to ${afterLsnArg} but the journal resumes at ${records[0].lsn}: records are missing`);
  }
  return { records, lastLsn, tornTail, segments };
};

interface IBatch {
  frames: Buffer[];
  bytes: number;
  firstLsn: number;
  lastLsn: number;
  undo: Array<() => void>;
  promise: Promise<void>;
  resolve: () => void;
  reject: (errorArg: Error) => void;
}

export interface IJournalOptions {
  dir: string;
  logger: TCloudlyLogger;
  /** Sequence number of the next record. */
  nextLsn: number;
  /**
   * Test-only failpoint file: the faults it names (storagefaults.ts) are injected at the journal's
   * steps while it exists.
   */
  failpointFile?: string | null;
  /** Bench-only: keep the in-memory order and batching, but never touch the disk. */
  disabled?: boolean;
  /** Called after every durable batch with the bytes written since the last compaction. */
  onDurable?: (bytesSinceCompactionArg: number) => void;
  /** Called when a full disk takes writes again (a write or a probe was stored). */
  onStorageWritable?: () => void;
}

export class Journal {
  public nextLsn: number;
  public durableLsn: number;
  /** Bytes appended since the last compaction started; the size trigger reads it. */
  public bytesSinceCompaction = 0;
  /** Bumped whenever appended records had to be rolled back, so a snapshot taken over them is void. */
  public rollbacks = 0;
  public syncs = 0;
  /** Set when the journal can no longer be trusted (a failed sync); every write is refused. */
  public failure: Error | null = null;
  /**
   * Since when the disk has been full (a batch or a probe met ENOSPC), or null. Writes are still
   * tried, each refused `storage-full` while no space returns; the first one that is stored, or a
   * successful probe, ends the state.
   */
  public storageFullSince: number | null = null;
  private openBatch: IBatch | null = null;
  private inFlight: IBatch | null = null;
  private flushScheduled = false;
  private flushing = false;
  private handle: fsp.FileHandle | null = null;
  private handleBytes = 0;
  private handlePath: string | null = null;
  private readonly faults: StorageFaults;
  private rotateRequested = true;
  private closed = false;

  constructor(private readonly options: IJournalOptions) {
    this.faults = new StorageFaults(options.failpointFile ?? null);
    this.nextLsn = options.nextLsn;
    this.durableLsn = options.nextLsn - 1;
  }

  public get lastAppendedLsn(): number {
    return this.nextLsn - 1;
  }

  /** Throws when a write would not be journaled; call before changing anything in memory. */
  public assertWritable(): void {
    if (this.failure) {
      throw new JournalUnavailableError(this.failure.message);
    }
    if (this.closed) {
      throw new JournalUnavailableError('the database is stopping');
    }
  }

  /**
   * Appends one record (already applied in memory) and answers when it is on the device. `undoArg`
   * takes the in-memory change back if the record never reaches the device.
   */
  public append(recordArg: Document, undoArg: () => void): Promise<void> {
    const lsn = this.nextLsn;
    if (this.options.disabled) {
      this.nextLsn++;
      this.durableLsn = lsn;
      return Promise.resolve();
    }
    const frame = encodeFrame(recordArg, lsn);
    this.nextLsn++;
    if (!this.openBatch) {
      let resolve!: () => void;
      let reject!: (errorArg: Error) => void;
      const promise = new Promise<void>((resolveArg, rejectArg) => {
        resolve = resolveArg;
        reject = rejectArg;
      });
      // A batch nobody awaits (a failed one, rejected) must not become an unhandled rejection.
      promise.catch(() => undefined);
      this.openBatch = { frames: [], bytes: 0, firstLsn: lsn, lastLsn: lsn, undo: [], promise, resolve, reject };
    }
    const batch = this.openBatch;
    batch.frames.push(frame);
    batch.bytes += frame.length;
    batch.lastLsn = lsn;
    batch.undo.push(undoArg);
    this.scheduleFlush();
    return batch.promise;
  }

  /** Resolves when everything appended so far is on the device; rejects if any of it was refused. */
  public whenDurable(): Promise<void> {
    return (this.openBatch ?? this.inFlight)?.promise ?? Promise.resolve();
  }

  /** The next batch goes to a new segment (compaction calls this before it captures its snapshot). */
  public requestRotation(): void {
    this.rotateRequested = true;
    this.bytesSinceCompaction = 0;
  }

  public async close(): Promise<void> {
    if (this.closed) {
      return;
    }
    await this.whenDurable().catch(() => undefined);
    while (this.flushing) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.closed = true;
    if (this.handle) {
      await this.handle.close().catch(() => undefined);
      this.handle = null;
    }
  }

  private scheduleFlush(): void {
    if (this.flushScheduled || this.flushing) {
      return;
    }
    this.flushScheduled = true;
    // setImmediate, not a microtask: every write that arrives in this turn of the event loop
    // joins the batch.
    setImmediate(() => {
      this.flushScheduled = false;
      void this.flushLoop();
    });
  }

  private async flushLoop(): Promise<void> {
    if (this.flushing) {
      return;
    }
    this.flushing = true;
    try {
      while (this.openBatch) {
        const batch = this.openBatch;
        this.openBatch = null;
        this.inFlight = batch;
        try {
          await this.writeBatch(batch);
          this.durableLsn = batch.lastLsn;
          this.bytesSinceCompaction += batch.bytes;
          this.leaveStorageFull('a write was stored');
          this.inFlight = null;
          batch.resolve();
          this.options.onDurable?.(this.bytesSinceCompaction);
        } catch (error) {
          this.inFlight = null;
          await this.refuseFrom(batch, error as NodeJS.ErrnoException);
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  /**
   * Whether the disk takes writes again: writes, syncs and removes a small file next to the
   * segments (the journal's write fault of the test failpoint applies to it). Ends the full-disk
   * state when it succeeds, enters it on ENOSPC; any other failure changes nothing and is thrown.
   */
  public async probeStorage(): Promise<boolean> {
    if (this.options.disabled || this.closed) {
      return true;
    }
    const probePath = path.join(this.options.dir, storageProbeFileName);
    try {
      const handle = await fsp.open(probePath, 'w', 0o600);
      try {
        await writeFully(handle, Buffer.alloc(storageProbeBytes), 0, this.faults, 'journal.write');
        await handle.datasync();
      } finally {
        await handle.close();
      }
    } catch (error) {
      if (!isNoSpaceCode((error as NodeJS.ErrnoException).code)) {
        throw error;
      }
      this.enterStorageFull(error as Error);
      return false;
    } finally {
      await fsp.rm(probePath, { force: true }).catch(() => undefined);
    }
    this.leaveStorageFull('a storage probe was stored');
    return true;
  }

  private enterStorageFull(errorArg: Error): void {
    if (this.storageFullSince === null) {
      this.storageFullSince = Date.now();
      this.options.logger.warn({ err: errorArg }, 'embedded database: the disk is full; serving reads, refusing writes storage-full until space returns');
    }
  }

  private leaveStorageFull(whyArg: string): void {
    if (this.storageFullSince !== null) {
      this.options.logger.info({ fullForMs: Date.now() - this.storageFullSince, why: whyArg }, 'embedded database: the disk takes writes again');
      this.storageFullSince = null;
      this.options.onStorageWritable?.();
    }
  }

  private async writeBatch(batchArg: IBatch): Promise<void> {
    if (this.rotateRequested || !this.handle) {
      await this.openSegment(batchArg.firstLsn);
    }
    const faults = this.faults;
    const handle = this.handle!;
    let written = 0;
    while (written < batchArg.bytes) {
      let buffers = written === 0 ? batchArg.frames : [Buffer.concat(batchArg.frames).subarray(written)];
      const fault = faults.at('journal.write');
      if (fault === 'ENOSPC' || fault === 'EIO') {
        throw injectedError(fault, 'write', 'journal.write');
      }
      if (fault === 'SHORT' || fault === 'SILENT') {
        // What a nearly full file system does: the call stores part of the bytes and says so.
        const rest = Buffer.concat(buffers);
        buffers = [rest.subarray(0, Math.ceil(rest.length / 2))];
      }
      const result = await handle.writev(buffers, this.handleBytes + written).catch((error: NodeJS.ErrnoException) => {
        // With O_DSYNC a write also flushes: anything but "no space" leaves the device state
        // unknown, as a failed fdatasync would.
        throw Object.assign(error, { syscall: ['ENOSPC', 'EDQUOT', 'EFBIG'].includes(error.code ?? '') ? 'write' : 'fdatasync' });
      });
      if (result.bytesWritten <= 0) {
        // A write that stores nothing and reports no error would loop for ever: a full disk.
        throw noProgressError(path.basename(this.handlePath ?? 'journal'));
      }
      written += result.bytesWritten;
    }
    faults.throwIfArmed('journal.sync', 'fdatasync');
    this.handleBytes += batchArg.bytes;
    this.syncs++;
  }

  private async openSegment(firstLsnArg: number): Promise<void> {
    if (this.handle) {
      await this.handle.close();
      this.handle = null;
    }
    const segmentPath = path.join(this.options.dir, segmentFileName(firstLsnArg));
    // 'w', not 'wx': a segment of this name can only be a leftover of a batch that was refused
    // (its records rolled back), whose bytes nobody was told about.
    // O_DSYNC: each write returns once its bytes are on the device, as write + fdatasync would,
    // in one trip to the thread pool instead of two.
    this.handlePath = segmentPath;
    this.handle = await fsp.open(segmentPath, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_DSYNC, 0o600);
    this.handleBytes = 0;
    await syncDirectory(this.options.dir);
    this.rotateRequested = false;
  }

  /**
   * The batch could not be made durable: take it, and everything appended after it, back out of
   * memory (newest first; none of it was answered), cut the file back to its last durable byte,
   * and refuse the writers. A failed sync leaves the device state unknown, so it stops writes for
   * good (until a restart replays what is really on disk).
   */
  private async refuseFrom(batchArg: IBatch, errorArg: NodeJS.ErrnoException): Promise<void> {
    const later = this.openBatch;
    this.openBatch = null;
    for (const batch of later ? [later, batchArg] : [batchArg]) {
      for (const undo of [...batch.undo].reverse()) {
        undo();
      }
    }
    this.nextLsn = batchArg.firstLsn;
    this.rollbacks++;
    let detail = `${errorArg.code ?? 'error'} on ${errorArg.syscall ?? 'write'}: ${errorArg.message}`;
    if (errorArg.syscall === 'fdatasync') {
      this.failure = new Error(`a journal sync failed (${detail}); restart Cloudly once the disk is healthy`);
    }
    if (this.handle) {
      // Cut the refused records off again, so a restart does not bring back what was refused.
      // After a failed sync this may fail too; then such a write's outcome is unknown, as for any
      // write whose answer was lost.
      try {
        await this.handle.truncate(this.handleBytes);
        await this.handle.datasync();
      } catch (truncateError) {
        this.failure ??= new Error(`the journal could not be cut back after a failed write (${(truncateError as Error).message})`);
      }
    }
    if (this.failure) {
      detail = this.failure.message;
    }
    this.options.logger.error(
      { err: errorArg, firstLsn: batchArg.firstLsn, refusedRecords: (later ? later.lastLsn : batchArg.lastLsn) - batchArg.firstLsn + 1, writesStopped: this.failure !== null },
      'embedded database journal write failed; the writes were refused and rolled back',
    );
    const noSpace = this.failure === null && isNoSpaceCode(errorArg.code);
    if (noSpace) {
      this.enterStorageFull(errorArg);
    }
    const refusal = noSpace ? new StorageFullError(detail) : new JournalUnavailableError(detail);
    batchArg.reject(refusal);
    later?.reject(refusal);
  }
}
