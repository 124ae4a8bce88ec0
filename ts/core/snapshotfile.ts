import * as fsp from 'node:fs/promises';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { BSON, type Document } from 'mongodb';
import { encodeFrame, readFrameAt, StorageDamagedError } from './journal.js';
import type { ICapturedCollection, IIndexSpec } from './journaledstorage.js';

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

/**
 * Writes `collectionsArg` (captured at `lsnArg`) to `pathArg` and fsyncs it. Serialises in chunks
 * and yields to the event loop between them, so writes keep being answered meanwhile.
 */
export const writeSnapshotFile = async (pathArg: string, lsnArg: number, collectionsArg: ICapturedCollection[]): Promise<number> => {
  const handle = await fsp.open(pathArg, 'w', 0o600);
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let position = 0;
  let documents = 0;
  let frames = 0;
  const push = async (payloadArg: Document) => {
    const frame = encodeFrame(payloadArg);
    pending.push(frame);
    pendingBytes += frame.length;
    frames++;
    if (pendingBytes >= bytesPerWrite) {
      await flush();
    }
  };
  const flush = async () => {
    if (pendingBytes > 0) {
      const chunk = Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      await handle.write(chunk, 0, chunk.length, position);
      await handle.datasync();
      position += chunk.length;
    }
  };
  try {
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
    await handle.sync();
  } finally {
    await handle.close();
  }
  return documents;
};

/** Reads and checks a snapshot; throws StorageDamagedError naming the offset of any damage. */
export const readSnapshotFile = async (pathArg: string): Promise<ISnapshotContents> => {
  const bytes = await fsp.readFile(pathArg);
  const byName = new Map<string, ISnapshotContents['collections'][number]>();
  let offset = 0;
  let header: Document | null = null;
  let frames = 0;
  let documents = 0;
  while (true) {
    const read = readFrameAt(bytes, offset);
    if (!read.ok) {
      throw new StorageDamagedError(pathArg, offset, read.truncated && offset === bytes.length ? 'the file ends before its end frame' : read.reason);
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
      if (read.frame.end !== bytes.length) {
        throw new StorageDamagedError(pathArg, read.frame.end, 'bytes follow the end frame');
      }
      break;
    } else {
      if (typeof payload.db !== 'string' || typeof payload.coll !== 'string' || !Array.isArray(payload.docs)) {
        throw new StorageDamagedError(pathArg, offset, 'a frame that is not a collection chunk');
      }
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
      documents += payload.docs.length;
    }
    offset = read.frame.end;
  }
  return { lsn: header.lsn as number, writtenAt: Number(header.writtenAt), collections: [...byName.values()], documents };
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
