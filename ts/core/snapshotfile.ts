import * as fsp from 'node:fs/promises';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { BSON, type Document } from 'mongodb';
import { encodeFrame, readFrameAt, StorageDamagedError } from './journal.js';
import type { ICapturedCollection, IIndexSpec } from './journaledstorage.js';
import { writeFully } from './durablefiles.js';
import { noStorageFaults, type StorageFaults } from './storagefaults.js';

/**
 * The embedded database's snapshot: one point in time, and the journal position it covers. The
 * file is a series of the journal's frames (length, CRC-32C, BSON): a header naming the position,
 * the collections in chunks, and an end frame with the counts, so a truncated or altered file is
 * recognised and named with the offset of the damage.
 */

export const snapshotFormat = 'cloudly-embedded-snapshot/2';
/**
 * Documents per frame; serialising one frame is the longest stretch compaction keeps the event
 * loop, so it stays small (a write needs several turns of the loop to be answered).
 */
const documentsPerFrame = 64;
/**
 * Written and synced in pieces of this size: the journal's small fdatasync then never queues
 * behind the flush of a whole snapshot.
 */
const bytesPerWrite = 2 * 1024 * 1024;

export interface ISnapshotContents {
  lsn: number;
  writtenAt: number;
  collections: Array<{ db: string; name: string; docs: Document[]; indexes: IIndexSpec[] | null }>;
  documents: number;
}

export interface IWriteSnapshotOptions {
  /** Test-only fault injection (storagefaults.ts). */
  faults?: StorageFaults;
}

/**
 * Writes `collectionsArg` (captured at `lsnArg`) to `pathArg` and fsyncs it. Serialises in chunks
 * and yields to the event loop between them, so writes keep being answered meanwhile. Every byte
 * is written (short writes are continued; a write that stores nothing fails as ENOSPC); the
 * caller reads the file back (verifySnapshotFile) before it trusts it.
 */
export const writeSnapshotFile = async (
  pathArg: string,
  lsnArg: number,
  collectionsArg: ICapturedCollection[],
  optionsArg: IWriteSnapshotOptions = {},
): Promise<{ documents: number; frames: number; bytes: number }> => {
  const faults = optionsArg.faults ?? noStorageFaults;
  const handle = await fsp.open(pathArg, 'w', 0o600);
  let position = 0;
  try {
    const written = await serializeSnapshot(lsnArg, collectionsArg, async (chunkArg) => {
      await writeFully(handle, chunkArg, position, faults, 'snapshot.write');
      faults.throwIfArmed('snapshot.sync', 'fdatasync');
      await handle.datasync();
      position += chunkArg.length;
    });
    faults.throwIfArmed('snapshot.sync', 'fsync');
    await handle.sync();
    return written;
  } finally {
    await handle.close();
  }
};

/**
 * Serialises a captured point in time as snapshot frames and hands them to `sinkArg` in chunks of
 * about 2 MiB (the file writer, or a download), yielding to the event loop between frames so
 * writes keep being answered meanwhile.
 */
export const serializeSnapshot = async (
  lsnArg: number,
  collectionsArg: ICapturedCollection[],
  sinkArg: (chunkArg: Buffer) => Promise<void>,
): Promise<{ documents: number; frames: number; bytes: number }> => {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let bytes = 0;
  let documents = 0;
  let frames = 0;
  const flush = async () => {
    if (pendingBytes > 0) {
      const chunk = Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      await sinkArg(chunk);
      bytes += chunk.length;
    }
  };
  const push = async (payloadArg: Document) => {
    const frame = encodeFrame(payloadArg);
    pending.push(frame);
    pendingBytes += frame.length;
    frames++;
    if (pendingBytes >= bytesPerWrite) {
      await flush();
    }
  };
  await push({ format: snapshotFormat, lsn: lsnArg, writtenAt: Date.now() });
  for (const collection of collectionsArg) {
    await push({ db: collection.db, coll: collection.name, indexes: collection.indexes, docs: [] });
    for (let start = 0; start < collection.docs.length; start += documentsPerFrame) {
      const docs = collection.docs.slice(start, start + documentsPerFrame);
      await push({ db: collection.db, coll: collection.name, docs });
      documents += docs.length;
      await nextTurn();
    }
  }
  await push({ end: true, documents, frames: frames + 1 });
  await flush();
  return { documents, frames, bytes };
};

/** Frames checked between two turns of the event loop while a snapshot is read back. */
const framesPerTurn = 32;

/**
 * Walks a snapshot's frames and checks every one (marker, length, CRC-32C, BSON, header, counts,
 * end frame, nothing after it); calls `onChunkArg` with each collection chunk. With `yieldArg` it
 * lets the event loop run between groups of frames, so reading a large snapshot back during
 * compaction does not stall the writes being answered meanwhile.
 */
const scanSnapshot = async (
  pathArg: string,
  bytesArg: Buffer,
  onChunkArg: (payloadArg: Document) => void,
  yieldArg: boolean,
): Promise<{ lsn: number; writtenAt: number; documents: number; frames: number }> => {
  let offset = 0;
  let header: Document | null = null;
  let frames = 0;
  let documents = 0;
  while (true) {
    const read = readFrameAt(bytesArg, offset);
    if (!read.ok) {
      throw new StorageDamagedError(pathArg, offset, read.truncated && offset === bytesArg.length ? 'the file ends before its end frame' : read.reason);
    }
    const payload = read.frame.payload!;
    frames++;
    if (!header) {
      if (payload.format !== snapshotFormat || typeof payload.lsn !== 'number') {
        throw new StorageDamagedError(pathArg, offset, `not a ${snapshotFormat} file`);
      }
      header = payload;
    } else if (payload.end === true) {
      if (payload.documents !== documents || payload.frames !== frames) {
        throw new StorageDamagedError(pathArg, offset, `the end frame counts ${payload.documents} documents in ${payload.frames} frames, the file holds ${documents} in ${frames}`);
      }
      if (read.frame.end !== bytesArg.length) {
        throw new StorageDamagedError(pathArg, read.frame.end, 'bytes follow the end frame');
      }
      break;
    } else {
      if (typeof payload.db !== 'string' || typeof payload.coll !== 'string' || !Array.isArray(payload.docs)) {
        throw new StorageDamagedError(pathArg, offset, 'a frame that is not a collection chunk');
      }
      onChunkArg(payload);
      documents += payload.docs.length;
    }
    offset = read.frame.end;
    if (yieldArg && frames % framesPerTurn === 0) {
      await nextTurn();
    }
  }
  return { lsn: header.lsn as number, writtenAt: Number(header.writtenAt), documents, frames };
};

/** Reads and checks a snapshot; throws StorageDamagedError naming the offset of any damage. */
export const readSnapshotFile = async (pathArg: string): Promise<ISnapshotContents> => {
  const bytes = await fsp.readFile(pathArg);
  const byName = new Map<string, ISnapshotContents['collections'][number]>();
  const scanned = await scanSnapshot(pathArg, bytes, (payload) => {
    const key = `${payload.db}\u0000${payload.coll}`;
    let entry = byName.get(key);
    if (!entry) {
      entry = { db: payload.db, name: payload.coll, docs: [], indexes: null };
      byName.set(key, entry);
    }
    if (Array.isArray(payload.indexes)) {
      entry.indexes = payload.indexes as IIndexSpec[];
    }
    for (const doc of payload.docs as Document[]) {
      entry.docs.push(doc);
    }
  }, false);
  return { lsn: scanned.lsn, writtenAt: scanned.writtenAt, collections: [...byName.values()], documents: scanned.documents };
};

export interface ISnapshotSummary {
  lsn: number;
  writtenAt: number;
  documents: number;
  frames: number;
  bytes: number;
  collections: number;
}

/**
 * Reads a snapshot back from the file system and checks every frame, without keeping its
 * documents; yields to the event loop as it goes. Throws StorageDamagedError on any damage, and
 * when `expectArg` is given, also when the file is intact but not the snapshot that was written.
 */
export const verifySnapshotFile = async (
  pathArg: string,
  expectArg: { lsn: number; documents: number; frames: number; bytes: number } | null = null,
): Promise<ISnapshotSummary> => {
  const bytes = await fsp.readFile(pathArg);
  const collections = new Set<string>();
  const scanned = await scanSnapshot(pathArg, bytes, (payload) => {
    collections.add(`${payload.db}\u0000${payload.coll}`);
  }, true);
  if (expectArg) {
    const found = { lsn: scanned.lsn, documents: scanned.documents, frames: scanned.frames, bytes: bytes.length };
    for (const key of ['lsn', 'documents', 'frames', 'bytes'] as const) {
      if (found[key] !== expectArg[key]) {
        throw new StorageDamagedError(pathArg, null, `read back ${key} ${found[key]}, but ${expectArg[key]} were written`);
      }
    }
  }
  return { ...scanned, bytes: bytes.length, collections: collections.size };
};

/** The snapshot format before the journal (whole database as Extended JSON); read once, to migrate. */
export const readLegacySnapshotFile = async (pathArg: string): Promise<ISnapshotContents> => {
  const text = await fsp.readFile(pathArg, 'utf8');
  let parsed: unknown;
  try {
    parsed = BSON.EJSON.parse(text, { relaxed: false });
  } catch (error) {
    throw new StorageDamagedError(pathArg, null, `not Extended JSON: ${(error as Error).message}`);
  }
  const file = parsed as { format?: unknown; collections?: Record<string, unknown> } | null;
  if (!file || file.format !== 'cloudly-embedded-snapshot/1' || !file.collections || typeof file.collections !== 'object'
    || !Object.values(file.collections).every((docs) => Array.isArray(docs))) {
    throw new StorageDamagedError(pathArg, null, 'not a cloudly-embedded-snapshot/1 file');
  }
  const collections = Object.entries(file.collections as Record<string, Document[]>)
    .map(([name, docs]) => ({ db: '', name, docs, indexes: null }));
  return { lsn: 0, writtenAt: 0, collections, documents: collections.reduce((sum, c) => sum + c.docs.length, 0) };
};
