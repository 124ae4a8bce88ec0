import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { listSegments, readFrameAt, StorageDamagedError, validFrameFollows } from './journal.js';
import { verifySnapshotFile } from './snapshotfile.js';

/**
 * `cloudly storage verify` (offline): checks every snapshot and journal segment of an embedded
 * data directory without changing a byte, names what is damaged (file, offset, reason), and says
 * what a start would do and what can be recovered. The same checks as start-up, but it goes on
 * past the first damage to report everything.
 */

export const snapshotFileNames = { current: 'embedded-db.snapshot', previous: 'embedded-db.snapshot.previous' } as const;

export interface ISnapshotReport {
  file: string;
  state: 'ok' | 'absent' | 'damaged';
  lsn?: number;
  documents?: number;
  collections?: number;
  bytes?: number;
  writtenAt?: string;
  damage?: { offset: number | null; reason: string };
}

export interface ISegmentReport {
  file: string;
  firstLsn: number;
  /** Records read intact from the start of the segment. */
  intactRecords: number;
  /** The lsn of the last intact record, or null when there is none. */
  lastIntactLsn: number | null;
  state: 'ok' | 'torn-tail' | 'damaged';
  damage?: { offset: number; reason: string; validRecordsAfter: number };
  /** The segment does not start where the one before it ended. */
  gapBefore?: { expectedLsn: number };
}

export interface IStorageReport {
  dataDir: string;
  snapshots: { current: ISnapshotReport; previous: ISnapshotReport };
  segments: ISegmentReport[];
  /** Would a start succeed as the files are, and from what. */
  start: { ok: boolean; detail: string };
  /** What can be done, in the order to try it. Empty when nothing is damaged. */
  recovery: string[];
  /** True when nothing at all is damaged (a torn tail is not damage: it was never acknowledged). */
  healthy: boolean;
  /** A live Cloudly holds the directory: files may change while they are read. */
  inUseByPid: number | null;
}

const checkSnapshot = async (fileArg: string): Promise<ISnapshotReport> => {
  if (!fs.existsSync(fileArg)) {
    return { file: fileArg, state: 'absent' };
  }
  try {
    const summary = await verifySnapshotFile(fileArg);
    return {
      file: fileArg, state: 'ok', lsn: summary.lsn, documents: summary.documents, collections: summary.collections,
      bytes: summary.bytes, writtenAt: new Date(summary.writtenAt).toISOString(),
    };
  } catch (error) {
    if (error instanceof StorageDamagedError) {
      return { file: fileArg, state: 'damaged', damage: { offset: error.offset, reason: /\(([^)]*)\)/.exec(error.message)?.[1] ?? error.message } };
    }
    return { file: fileArg, state: 'damaged', damage: { offset: null, reason: `unreadable: ${(error as Error).message}` } };
  }
};

const checkSegment = async (fileArg: string, firstLsnArg: number): Promise<ISegmentReport> => {
  const bytes = await fsp.readFile(fileArg);
  let offset = 0;
  let lsn = firstLsnArg;
  let intact = 0;
  while (offset < bytes.length) {
    const read = readFrameAt(bytes, offset, false);
    let reason: string | null = read.ok ? null : read.reason;
    if (read.ok && read.frame.lsn !== lsn) {
      reason = `record carries sequence number ${read.frame.lsn}, expected ${lsn}`;
    }
    if (reason !== null) {
      const validAfter = countValidFramesAfter(bytes, offset);
      return {
        file: fileArg, firstLsn: firstLsnArg, intactRecords: intact, lastIntactLsn: intact > 0 ? lsn - 1 : null,
        state: validAfter === 0 ? 'torn-tail' : 'damaged',
        damage: { offset, reason, validRecordsAfter: validAfter },
      };
    }
    intact++;
    lsn++;
    offset = read.ok ? read.frame.end : offset;
  }
  return { file: fileArg, firstLsn: firstLsnArg, intactRecords: intact, lastIntactLsn: intact > 0 ? lsn - 1 : null, state: 'ok' };
};

/** Valid frames anywhere after a damaged one (they were acknowledged; they cannot be replayed without what is lost before them). */
const countValidFramesAfter = (bytesArg: Buffer, offsetArg: number): number => {
  if (!validFrameFollows(bytesArg, offsetArg)) {
    return 0;
  }
  const marker = Buffer.from([0x43, 0x4c, 0x4a, 0x31]);
  let count = 0;
  let at = bytesArg.indexOf(marker, offsetArg + 1);
  while (at !== -1) {
    const read = readFrameAt(bytesArg, at, false);
    if (read.ok) {
      count++;
      at = bytesArg.indexOf(marker, read.frame.end);
    } else {
      at = bytesArg.indexOf(marker, at + 1);
    }
  }
  return count;
};

export const lockOwner = (dataDirArg: string): number | null => {
  try {
    const { pid } = JSON.parse(fs.readFileSync(path.join(dataDirArg, 'cloudly.lock'), 'utf8')) as { pid?: unknown };
    if (typeof pid !== 'number') {
      return null;
    }
    process.kill(pid, 0);
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state === 'Z' || state === 'X' ? null : pid;
  } catch {
    return null;
  }
};

/**
 * Can the journal, from `afterLsnArg` on, be replayed to its end? Returns the lsn replay reaches
 * and, when it stops short, why.
 */
export const replayableFrom = (segmentsArg: ISegmentReport[], afterLsnArg: number): { reaches: number; blocked: string | null; covered: ISegmentReport[] } => {
  let reaches = afterLsnArg;
  const covered: ISegmentReport[] = [];
  for (const [index, segment] of segmentsArg.entries()) {
    const isLast = index === segmentsArg.length - 1;
    // A segment's records end where the next one begins (its intact records, for the last).
    const segmentEnd = isLast ? (segment.lastIntactLsn ?? segment.firstLsn - 1) : segmentsArg[index + 1].firstLsn - 1;
    // Valid records after a damage are acknowledged writes past its intact part: such a segment is
    // never covered by a snapshot that ends inside it (moving it away would lose them).
    const recordsBeyondDamage = segment.state === 'damaged' && (segment.damage?.validRecordsAfter ?? 0) > 0;
    if (segmentEnd <= afterLsnArg && !recordsBeyondDamage) {
      // Wholly covered by the snapshot: not needed, and movable if damaged.
      if (segment.state !== 'ok') {
        covered.push(segment);
      }
      continue;
    }
    if (segment.firstLsn > reaches + 1) {
      return { reaches, blocked: `records ${reaches + 1} to ${segment.firstLsn - 1} are missing before ${segment.file}`, covered };
    }
    reaches = Math.max(reaches, segment.lastIntactLsn ?? reaches);
    if (segment.state === 'damaged' || (segment.state === 'torn-tail' && !isLast)) {
      return { reaches, blocked: `${segment.file} is damaged at byte offset ${segment.damage!.offset} (${segment.damage!.reason})`, covered };
    }
  }
  return { reaches, blocked: null, covered };
};

export const verifyDataDirectory = async (dataDirArg: string): Promise<IStorageReport> => {
  const dataDir = path.resolve(dataDirArg);
  if (!fs.existsSync(dataDir)) {
    throw new Error(`no data directory at ${dataDir}`);
  }
  const current = await checkSnapshot(path.join(dataDir, snapshotFileNames.current));
  const previous = await checkSnapshot(path.join(dataDir, snapshotFileNames.previous));
  const segments: ISegmentReport[] = [];
  let expected: number | null = null;
  for (const segment of await listSegments(dataDir)) {
    const report = await checkSegment(segment.path, segment.firstLsn);
    if (expected !== null && segment.firstLsn !== expected) {
      report.gapBefore = { expectedLsn: expected };
    }
    segments.push(report);
    expected = (report.lastIntactLsn ?? segment.firstLsn - 1) + 1;
  }
  const lastLsn = segments.reduce((max, segment) => Math.max(max, segment.lastIntactLsn ?? 0), 0);
  const damagedSegments = segments.filter((segment, index) => segment.state === 'damaged' || (segment.state === 'torn-tail' && index < segments.length - 1));
  const recovery: string[] = [];
  let start: IStorageReport['start'];
  const fromSnapshot = (snapshotArg: ISnapshotReport | null) => replayableFrom(segments, snapshotArg?.lsn ?? 0);
  const describe = (snapshotArg: ISnapshotReport | null, reachesArg: number) =>
    `${snapshotArg ? `${path.basename(snapshotArg.file)} (records up to ${snapshotArg.lsn}, ${snapshotArg.documents} documents)` : 'an empty database'} plus the journal up to record ${reachesArg}`;
  const base = current.state !== 'absent' ? current : previous.state !== 'absent' ? previous : null;
  const firstProblem = segments.find((segment, index) => segment.gapBefore || segment.state === 'damaged' || (segment.state === 'torn-tail' && index < segments.length - 1));
  if (base?.state === 'damaged') {
    start = { ok: false, detail: `refused: ${base.file} is damaged${base === previous ? ' (read because the current snapshot is absent)' : ''}` };
  } else if (firstProblem) {
    start = { ok: false, detail: `refused: ${firstProblem.gapBefore ? `records ${firstProblem.gapBefore.expectedLsn} to ${firstProblem.firstLsn - 1} are missing before ${firstProblem.file}` : `${firstProblem.file} is damaged at byte offset ${firstProblem.damage!.offset} (${firstProblem.damage!.reason})`}` };
  } else {
    const replay = fromSnapshot(base);
    start = replay.blocked === null
      ? { ok: true, detail: `starts from ${describe(base, replay.reaches)}` }
      : { ok: false, detail: `refused: ${replay.blocked}` };
  }
  if (!start.ok) {
    // The best intact base: a snapshot the journal continues from, most records reached.
    const candidates = [current, previous].filter((snapshot) => snapshot.state === 'ok');
    const options = [...candidates.map((snapshot) => ({ snapshot, replay: fromSnapshot(snapshot) })), { snapshot: null, replay: fromSnapshot(null) }]
      .filter((option) => option.snapshot !== null || !segments.length || segments[0].firstLsn === 1)
      .sort((a, b) => b.replay.reaches - a.replay.reaches);
    const best = options[0];
    if (best && best.replay.blocked === null) {
      const moves = [
        ...[current, previous].filter((snapshot) => snapshot.state === 'damaged' || (snapshot.state === 'ok' && best.snapshot === null)),
        ...(best.snapshot === previous && current.state !== 'absent' ? [current] : []),
        ...best.replay.covered,
      ];
      const files = [...new Set(moves.map((one) => one.file))];
      recovery.push(`nothing is lost: move ${files.join(' and ')} out of the data directory (keep ${files.length > 1 ? 'them' : 'it'}); Cloudly then starts from ${describe(best.snapshot, best.replay.reaches)}`);
    } else if (best) {
      const lost = lastLsn - best.replay.reaches;
      const damaged = damagedSegments[0];
      recovery.push(`provably intact: ${describe(best.snapshot, best.replay.reaches)}; ${best.replay.blocked}`);
      if (damaged?.damage) {
        recovery.push(`to start with that (losing ${Math.max(0, lost)} acknowledged records after it, ${damaged.damage.validRecordsAfter} of them still readable in ${damaged.file}): keep a copy of the data directory, truncate ${damaged.file} to ${damaged.damage.offset} bytes, and move every later journal segment away (docs/storage.md, "A refused start")`);
        if (damaged.damage.validRecordsAfter > 0) {
          recovery.push(`or keep the intact records after the damage and lose only the damaged record: cloudly storage recover --skip-damaged --data-dir ${dataDir} (add --dry-run to see first what it skips; docs/storage.md, "Skipping a damaged record")`);
        }
      }
      if (best.snapshot === null || best.snapshot === previous) {
        if (current.state === 'damaged') {
          recovery.push(`also move the damaged ${current.file} away`);
        }
      }
    } else {
      recovery.push('no intact snapshot and no journal from the first record: nothing can be rebuilt from these files; restore a backup of the data directory');
    }
  }
  const healthy = current.state !== 'damaged' && previous.state !== 'damaged' && damagedSegments.length === 0
    && segments.every((segment) => !segment.gapBefore) && start.ok;
  if (start.ok && previous.state === 'damaged') {
    recovery.push(`${previous.file} is damaged; it is not needed while ${current.file} is intact, and the next compaction replaces it`);
  }
  return { dataDir, snapshots: { current, previous }, segments, start, recovery, healthy, inUseByPid: lockOwner(dataDir) };
};

/** The report as lines for a terminal. */
export const formatStorageReport = (reportArg: IStorageReport): string => {
  const lines: string[] = [`data directory ${reportArg.dataDir}`];
  if (reportArg.inUseByPid !== null) {
    lines.push(`note: Cloudly (pid ${reportArg.inUseByPid}) is running on it; files may change while they are read`);
  }
  for (const snapshot of [reportArg.snapshots.current, reportArg.snapshots.previous]) {
    const name = path.basename(snapshot.file);
    if (snapshot.state === 'ok') {
      lines.push(`ok       ${name}: records up to ${snapshot.lsn}, ${snapshot.documents} documents in ${snapshot.collections} collections, ${snapshot.bytes} bytes, written ${snapshot.writtenAt}`);
    } else if (snapshot.state === 'absent') {
      lines.push(`absent   ${name}`);
    } else {
      lines.push(`DAMAGED  ${name}: ${snapshot.damage!.offset === null ? '' : `at byte offset ${snapshot.damage!.offset}: `}${snapshot.damage!.reason}`);
    }
  }
  for (const segment of reportArg.segments) {
    const name = path.basename(segment.file);
    const range = segment.lastIntactLsn === null ? 'no intact records' : `records ${segment.firstLsn} to ${segment.lastIntactLsn}`;
    if (segment.gapBefore) {
      lines.push(`GAP      before ${name}: records ${segment.gapBefore.expectedLsn} to ${segment.firstLsn - 1} are missing`);
    }
    if (segment.state === 'ok') {
      lines.push(`ok       ${name}: ${range}`);
    } else if (segment.state === 'torn-tail') {
      lines.push(`torn     ${name}: ${range}, then an incomplete record at byte offset ${segment.damage!.offset} (${segment.damage!.reason}; never acknowledged, cut off at the next start)`);
    } else {
      lines.push(`DAMAGED  ${name}: ${range} intact, then damage at byte offset ${segment.damage!.offset} (${segment.damage!.reason}); ${segment.damage!.validRecordsAfter} valid records follow it`);
    }
  }
  lines.push(`start:   ${reportArg.start.detail}`);
  for (const step of reportArg.recovery) {
    lines.push(`recover: ${step}`);
  }
  lines.push(reportArg.healthy ? 'verdict: intact' : 'verdict: DAMAGED');
  return `${lines.join('\n')}\n`;
};
