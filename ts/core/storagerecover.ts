import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { BSON, type Document } from 'mongodb';
import { syncDirectory, writeFully } from './durablefiles.js';
import {
  encodeFrame,
  frameHeaderBytes,
  frameMagic,
  Journal,
  listSegments,
  readFrameAt,
  readJournal,
  StorageDamagedError,
} from './journal.js';
import { JournaledStorage, lostRecordOp } from './journaledstorage.js';
import { readSnapshotFile, type ISnapshotContents } from './snapshotfile.js';
import { lockOwner, snapshotFileNames } from './storageverify.js';
import type { TCloudlyLogger } from './logger.js';

/**
 * `cloudly storage recover --skip-damaged` (offline): the choice that keeps what is still
 * readable. A journal record holds whole documents (an insert its documents, an update the whole
 * new document, a delete the ids), so the records after a damaged one do not need it to be
 * applied: the database they rebuild is the acknowledged one without that one change. This tool
 * skips only the damaged bytes, and only where the skip is provable:
 *
 * - the next record after the damage is a frame whose checksum holds and whose sequence number
 *   says exactly how many records the damaged bytes held (usually one), and every record after it
 *   continues the sequence; or the damage runs to the end of a segment and the next segment's
 *   first sequence number says the same;
 * - the snapshot plus every intact record, the skipped ones left out, replays without an error.
 *
 * Each skipped record is replaced by a marker frame with its sequence number (operation `lost`,
 * with the damaged bytes' offset, length and reason), so the journal stays an unbroken sequence
 * that start-up and `storage verify` accept, and the loss stays on record. The damaged segment is
 * kept beside it as `<segment>.damaged`. Everything is checked before anything is written; a
 * refusal changes nothing. The strict choice stays `storage verify`'s: truncate at the damage.
 */

export interface ILostRecord {
  file: string;
  lsn: number;
  /** Where the damaged bytes start and how many there are (the whole span, for all its records). */
  offset: number;
  bytes: number;
  reason: string;
  /** Covered by the snapshot the start loads: nothing acknowledged is lost with it. */
  coveredBySnapshot: boolean;
  /**
   * What the damaged bytes still say when their framing is intact and they decode (the checksum
   * fails, so they may differ from what was written): the operation, collection and document ids.
   */
  readable: { op: string; db: string | null; collection: string | null; ids: string[] } | null;
}

export interface IRecoverResult {
  dataDir: string;
  /** The snapshot the records replay onto, or null for an empty database. */
  base: { file: string; lsn: number; documents: number } | null;
  lost: ILostRecord[];
  /** Intact records after the first damage that are kept (replayed) instead of dropped. */
  keptAfterDamage: number;
  /** The last record a start replays to. */
  reaches: number;
  /** True when the journal was rewritten (false: nothing to do, a refusal, or a dry run). */
  applied: boolean;
  /** The segments rewritten and where each original was kept. */
  rewritten: Array<{ file: string; keptAs: string }>;
  /** Why nothing was changed, when the skip cannot be proven. */
  refused: string | null;
}

interface ISpan {
  offset: number;
  end: number;
  firstLsn: number;
  lastLsn: number;
  reason: string;
}

interface IParsedSegment {
  path: string;
  firstLsn: number;
  bytes: Buffer;
  spans: ISpan[];
  /** The records read intact (decoded), in order. */
  records: Array<{ lsn: number; payload: Document }>;
  /** The lsn after the last record (intact or skipped). */
  nextLsn: number;
  /** A torn final record of the last segment (never acknowledged; start-up cuts it off). */
  tornTailAt: number | null;
}

const silentLogger = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as unknown as TCloudlyLogger;

const markerBytes = (): Buffer => {
  const marker = Buffer.allocUnsafe(4);
  marker.writeUInt32LE(frameMagic, 0);
  return marker;
};

/** The first offset after `fromArg` where a frame with an intact checksum starts, with its lsn. */
const nextValidFrame = (bytesArg: Buffer, fromArg: number): { offset: number; lsn: number } | null => {
  const marker = markerBytes();
  let at = bytesArg.indexOf(marker, fromArg + 1);
  while (at !== -1) {
    const read = readFrameAt(bytesArg, at, false);
    if (read.ok) {
      return { offset: at, lsn: read.frame.lsn };
    }
    at = bytesArg.indexOf(marker, at + 1);
  }
  return null;
};

/** What a damaged record's bytes still say, when its header frames exactly the span. */
const readableOf = (bytesArg: Buffer, spanArg: ISpan): ILostRecord['readable'] => {
  if (spanArg.firstLsn !== spanArg.lastLsn || spanArg.offset + frameHeaderBytes > spanArg.end
    || bytesArg.readUInt32LE(spanArg.offset) !== frameMagic) {
    return null;
  }
  const length = bytesArg.readUInt32LE(spanArg.offset + 8);
  if (spanArg.offset + frameHeaderBytes + length !== spanArg.end || bytesArg.readUIntLE(spanArg.offset + 12, 6) !== spanArg.firstLsn) {
    return null;
  }
  try {
    const payload = BSON.deserialize(bytesArg.subarray(spanArg.offset + frameHeaderBytes, spanArg.end), { promoteLongs: false });
    const idText = (valueArg: unknown): string => {
      const text = valueArg && typeof (valueArg as { toHexString?: unknown }).toHexString === 'function'
        ? (valueArg as { toHexString(): string }).toHexString() : String(valueArg);
      return text;
    };
    const describeDoc = (docArg: Document): string => (docArg.id !== undefined ? `id ${String(docArg.id)} (_id ${idText(docArg._id)})` : `_id ${idText(docArg._id)}`);
    const ids = Array.isArray(payload.docs) ? (payload.docs as Document[]).map(describeDoc)
      : payload.doc ? [describeDoc(payload.doc as Document)]
        : Array.isArray(payload.ids) ? (payload.ids as unknown[]).map((id) => `_id ${idText(id)}`) : [];
    return {
      op: String(payload.op),
      db: typeof payload.db === 'string' ? payload.db : null,
      collection: typeof payload.coll === 'string' ? payload.coll : null,
      ids,
    };
  } catch {
    return null;
  }
};

/**
 * Reads one segment frame by frame from `firstLsnArg`; at damage, resynchronises on the next
 * frame with an intact checksum and a later sequence number. Returns a refusal text when the skip
 * cannot be proven.
 */
const parseSegment = async (
  segmentArg: { path: string; firstLsn: number },
  isLastArg: boolean,
  nextSegmentLsnArg: number | null,
): Promise<IParsedSegment | string> => {
  const bytes = await fsp.readFile(segmentArg.path);
  const parsed: IParsedSegment = { path: segmentArg.path, firstLsn: segmentArg.firstLsn, bytes, spans: [], records: [], nextLsn: segmentArg.firstLsn, tornTailAt: null };
  let offset = 0;
  let lsn = segmentArg.firstLsn;
  while (offset < bytes.length) {
    const read = readFrameAt(bytes, offset, true);
    if (read.ok && read.frame.lsn === lsn) {
      parsed.records.push({ lsn, payload: read.frame.payload! });
      lsn++;
      offset = read.frame.end;
      continue;
    }
    const reason = read.ok ? `record carries sequence number ${read.frame.lsn}, expected ${lsn}` : read.reason;
    const next = nextValidFrame(bytes, offset);
    if (next === null) {
      if (isLastArg) {
        // Nothing valid after it: a torn final record, never acknowledged; start-up cuts it off.
        parsed.tornTailAt = offset;
        break;
      }
      // The damage runs to the end of the segment: the next segment says where the sequence goes on.
      if (nextSegmentLsnArg === lsn) {
        return `${segmentArg.path} holds bytes after its last record from byte offset ${offset} (${reason}) and the next segment goes on from there: no record is lost; truncate it to ${offset} bytes`;
      }
      if (nextSegmentLsnArg === null || nextSegmentLsnArg < lsn) {
        return `${segmentArg.path} is damaged at byte offset ${offset} (${reason}) up to its end, and the next segment does not say which records are lost`;
      }
      parsed.spans.push({ offset, end: bytes.length, firstLsn: lsn, lastLsn: nextSegmentLsnArg - 1, reason });
      lsn = nextSegmentLsnArg;
      offset = bytes.length;
      break;
    }
    if (next.lsn <= lsn) {
      return `${segmentArg.path} is damaged at byte offset ${offset} (${reason}), and the next intact record (at byte offset ${next.offset}) carries sequence number ${next.lsn}, not a later one than ${lsn - 1}: which records are lost cannot be proven`;
    }
    parsed.spans.push({ offset, end: next.offset, firstLsn: lsn, lastLsn: next.lsn - 1, reason });
    lsn = next.lsn;
    offset = next.offset;
  }
  parsed.nextLsn = lsn;
  return parsed;
};

const readBase = async (dataDirArg: string): Promise<{ file: string; contents: ISnapshotContents } | null | string> => {
  for (const name of [snapshotFileNames.current, snapshotFileNames.previous]) {
    const file = path.join(dataDirArg, name);
    if (!fs.existsSync(file)) {
      continue;
    }
    try {
      return { file, contents: await readSnapshotFile(file) };
    } catch (error) {
      return `${file} is damaged (${error instanceof StorageDamagedError ? error.message : (error as Error).message}); follow \`cloudly storage verify\`'s advice for the snapshot first`;
    }
  }
  return null;
};

/**
 * Plans the skip and, unless `dryRunArg`, applies it. Changes nothing when the skip cannot be
 * proven (`refused` says why) or when nothing is damaged.
 */
export const recoverSkippingDamaged = async (dataDirArg: string, dryRunArg = false): Promise<IRecoverResult> => {
  const dataDir = path.resolve(dataDirArg);
  if (!fs.existsSync(dataDir)) {
    throw new Error(`no data directory at ${dataDir}`);
  }
  const result: IRecoverResult = { dataDir, base: null, lost: [], keptAfterDamage: 0, reaches: 0, applied: false, rewritten: [], refused: null };
  const refuse = (reasonArg: string): IRecoverResult => ({ ...result, refused: reasonArg });
  const owner = lockOwner(dataDir);
  if (owner !== null) {
    return refuse(`Cloudly (pid ${owner}) is running on this data directory; stop it first`);
  }
  const base = await readBase(dataDir);
  if (typeof base === 'string') {
    return refuse(base);
  }
  const baseLsn = base?.contents.lsn ?? 0;
  result.base = base ? { file: base.file, lsn: baseLsn, documents: base.contents.collections.reduce((sum, one) => sum + one.docs.length, 0) } : null;
  const segments = await listSegments(dataDir);
  const parsed: IParsedSegment[] = [];
  for (const [index, segment] of segments.entries()) {
    if (index > 0 && parsed[index - 1].nextLsn !== segment.firstLsn) {
      return refuse(`records ${parsed[index - 1].nextLsn} to ${segment.firstLsn - 1} are missing before ${segment.path} (a segment is missing: put it back)`);
    }
    const one = await parseSegment(segment, index === segments.length - 1, segments[index + 1]?.firstLsn ?? null);
    if (typeof one === 'string') {
      return refuse(one);
    }
    parsed.push(one);
  }
  if (parsed.length > 0 && parsed[0].firstLsn > baseLsn + 1) {
    return refuse(`the snapshot covers records up to ${baseLsn} but the journal resumes at ${parsed[0].firstLsn}: records are missing`);
  }
  for (const segment of parsed) {
    for (const span of segment.spans) {
      for (let lsn = span.firstLsn; lsn <= span.lastLsn; lsn++) {
        result.lost.push({
          file: segment.path, lsn, offset: span.offset, bytes: span.end - span.offset, reason: span.reason,
          coveredBySnapshot: lsn <= baseLsn, readable: readableOf(segment.bytes, span),
        });
      }
    }
  }
  const lastLsn = parsed.length > 0 ? parsed[parsed.length - 1].nextLsn - 1 : baseLsn;
  result.reaches = Math.max(baseLsn, lastLsn);
  if (result.lost.length === 0) {
    return result;
  }
  const firstLost = result.lost[0].lsn;
  result.keptAfterDamage = parsed.reduce((sum, segment) => sum + segment.records.filter((record) => record.lsn > firstLost && record.lsn > baseLsn).length, 0);
  // The proof that the records after the skipped ones stand on their own: they replay.
  try {
    const storage = new JournaledStorage(new Journal({ dir: dataDir, logger: silentLogger, nextLsn: lastLsn + 1, disabled: true }));
    for (const collection of base?.contents.collections ?? []) {
      storage.load(collection.db || 'cloudly', collection.name, collection.docs, collection.indexes);
    }
    for (const segment of parsed) {
      for (const record of segment.records) {
        if (record.lsn > baseLsn) {
          storage.replay(record.payload);
        }
      }
    }
  } catch (error) {
    return refuse(`the records after the damage do not replay without the lost ones (${(error as Error).message}); only the strict choice is left (\`cloudly storage verify\`)`);
  }
  if (dryRunArg) {
    return result;
  }
  for (const segment of parsed.filter((one) => one.spans.length > 0)) {
    const pieces: Buffer[] = [];
    let at = 0;
    for (const span of segment.spans) {
      pieces.push(segment.bytes.subarray(at, span.offset));
      for (let lsn = span.firstLsn; lsn <= span.lastLsn; lsn++) {
        pieces.push(encodeFrame({ op: lostRecordOp, offset: span.offset, bytes: span.end - span.offset, reason: span.reason, at: new Date() }, lsn));
      }
      at = span.end;
    }
    pieces.push(segment.bytes.subarray(at));
    const keptAs = `${segment.path}.damaged`;
    const temporary = `${segment.path}.recover.tmp`;
    const handle = await fsp.open(temporary, 'w', 0o600);
    try {
      await writeFully(handle, Buffer.concat(pieces), 0);
      await handle.sync();
    } finally {
      await handle.close();
    }
    // The damaged original stays, under a name no start reads; then the repaired one takes its place.
    await fsp.rm(keptAs, { force: true });
    await fsp.link(segment.path, keptAs);
    await fsp.rename(temporary, segment.path);
    result.rewritten.push({ file: segment.path, keptAs });
  }
  await syncDirectory(dataDir);
  // What start-up will read: it must now accept the journal as it is.
  await readJournal(dataDir, baseLsn);
  result.applied = true;
  return result;
};

/** The journal's operations (journaledstorage.ts `replay`) as words. */
const operationWords: Record<string, string> = {
  i: 'insert into', u: 'update in', d: 'delete from', cd: 'create database', dd: 'drop database',
  cc: 'create collection', dc: 'drop collection', rc: 'rename collection', si: 'save index of', di: 'drop index of',
};

/** The result as lines for a terminal. */
export const formatRecoverResult = (resultArg: IRecoverResult): string => {
  const lines: string[] = [`data directory ${resultArg.dataDir}`];
  lines.push(`base:    ${resultArg.base ? `${path.basename(resultArg.base.file)} (records up to ${resultArg.base.lsn}, ${resultArg.base.documents} documents)` : 'an empty database'}`);
  for (const lost of resultArg.lost) {
    const what = lost.readable
      ? `${operationWords[lost.readable.op] ?? lost.readable.op} ${lost.readable.db ?? '?'}.${lost.readable.collection ?? '?'}${lost.readable.ids.length > 0 ? `, ${lost.readable.ids.join(', ')}` : ''} (read from the damaged bytes, unverified)`
      : 'its contents are unreadable';
    lines.push(`LOST     record ${lost.lsn} in ${path.basename(lost.file)} at byte offset ${lost.offset}, ${lost.bytes} bytes (${lost.reason}): ${what}${lost.coveredBySnapshot ? '; covered by the snapshot, so nothing acknowledged is lost with it' : ''}`);
  }
  if (resultArg.refused !== null) {
    lines.push(`refused: ${resultArg.refused}; nothing was changed`);
    return `${lines.join('\n')}\n`;
  }
  if (resultArg.lost.length === 0) {
    lines.push('nothing to skip: no damaged record with intact records after it');
    return `${lines.join('\n')}\n`;
  }
  lines.push(`kept:    ${resultArg.keptAfterDamage} intact records after the damage replay without the lost ${resultArg.lost.length === 1 ? 'one' : 'ones'}`);
  for (const rewritten of resultArg.rewritten) {
    lines.push(`applied: ${path.basename(rewritten.file)} rewritten with a marker in place of each lost record; the damaged original kept as ${path.basename(rewritten.keptAs)}`);
  }
  const lostLsns = resultArg.lost.filter((lost) => !lost.coveredBySnapshot).map((lost) => lost.lsn);
  lines.push(`result:  ${resultArg.applied ? 'Cloudly starts' : 'dry run: Cloudly would start'} from ${resultArg.base ? path.basename(resultArg.base.file) : 'an empty database'} plus the journal up to record ${resultArg.reaches}; `
    + `${lostLsns.length === 0 ? 'no acknowledged write is lost' : `lost: record${lostLsns.length === 1 ? '' : 's'} ${lostLsns.join(', ')} only`}`);
  return `${lines.join('\n')}\n`;
};
