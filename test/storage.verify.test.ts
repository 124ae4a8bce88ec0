import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { startTestCloudly } from './helpers/cloudly.js';
import { cliExecutable } from './cli.fixture.js';
import { runNodeToExit, type IProcessRun } from './helpers/process.js';
import { previousSnapshotFileName, snapshotFileName } from '../ts/core/database.js';
import { frameHeaderBytes, listSegments, readFrameAt } from '../ts/core/journal.js';
import { replayableFrom, type IStorageReport } from '../ts/core/storageverify.js';
import type { IRecoverResult } from '../ts/core/storagerecover.js';

/**
 * `cloudly storage verify` (the real executable) on data directories a real Cloudly wrote and a
 * test then damaged; its recovery advice is followed and a real Cloudly started on the result.
 */

const verify = (dataDirArg: string, outputArg: 'table' | 'json' = 'table'): Promise<IProcessRun> =>
  runNodeToExit([cliExecutable, '-o', outputArg, 'storage', 'verify', '--data-dir', dataDirArg]);

/** A data directory with two snapshots and journal after them: clusters a1, a2 in snapshots, b1, b2 only in the journal. */
const writtenDataDir = async (): Promise<string> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-verify-'));
  const t = await startTestCloudly({ dataDir, logLevel: 'silent' });
  try {
    await t.createCluster('a1');
    await t.cloudly.database.compact();
    await t.createCluster('a2');
    await t.cloudly.database.compact();
    await t.createCluster('b1');
    await t.createCluster('b2');
    // A crash image: the journal after the last snapshot is what holds b1 and b2.
    const image = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-verify-image-'));
    await fsp.cp(dataDir, image, { recursive: true, filter: (source) => !/\.sock$|cloudly\.lock$/.test(source) });
    return image;
  } finally {
    await t.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
};

const clusterNamesAfterStart = async (dataDirArg: string): Promise<string[]> => {
  const t = await startTestCloudly({ dataDir: dataDirArg, logLevel: 'silent' });
  try {
    return (await t.admin.call('getClusters', {})).clusters.map((cluster) => cluster.name).sort();
  } finally {
    await t.stop();
  }
};

describe('cloudly storage verify', () => {
  test('an intact data directory: exit 0, every file named ok, and what a start would load', async () => {
    const dataDir = await writtenDataDir();
    try {
      const table = await verify(dataDir);
      assert.equal(table.code, 0, table.stderr);
      assert.match(table.stdout, /ok {7}embedded-db\.snapshot: records up to \d+/);
      assert.match(table.stdout, /ok {7}embedded-db\.snapshot\.previous:/);
      assert.match(table.stdout, /start: {3}starts from embedded-db\.snapshot/);
      assert.match(table.stdout, /verdict: intact/);
      const json = JSON.parse((await verify(dataDir, 'json')).stdout) as IStorageReport;
      assert.equal(json.healthy, true);
      assert.ok(json.segments.length >= 1);
      assert.ok(json.segments.every((segment) => segment.state === 'ok'));
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('a snapshot cut short (as a full disk left it): exit 1, names file and offset; following the advice starts with every write', async () => {
    const dataDir = await writtenDataDir();
    try {
      const snapshotPath = path.join(dataDir, snapshotFileName);
      const bytes = await fsp.readFile(snapshotPath);
      await fsp.writeFile(snapshotPath, bytes.subarray(0, bytes.length - 40));
      const before = await fsp.readFile(snapshotPath);
      const result = await verify(dataDir);
      assert.equal(result.code, 1);
      assert.match(result.stdout, /DAMAGED {2}embedded-db\.snapshot: at byte offset \d+: (frame runs past the end of the file|incomplete frame header)/);
      assert.match(result.stdout, /start: {3}refused: .*embedded-db\.snapshot is damaged/);
      const advice = /recover: nothing is lost: move (\S+) out of the data directory/.exec(result.stdout);
      assert.ok(advice, result.stdout);
      assert.equal(advice[1], snapshotPath);
      assert.deepEqual(await fsp.readFile(snapshotPath), before, 'verify changed nothing');
      await fsp.rename(snapshotPath, `${dataDir}.damaged-snapshot`);
      assert.deepEqual(await clusterNamesAfterStart(dataDir), ['a1', 'a2', 'b1', 'b2']);
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
      await fsp.rm(`${dataDir}.damaged-snapshot`, { force: true });
    }
  });

  test('a damaged journal record with valid records after it: names segment and offset, counts what follows, and the provably intact part starts', async () => {
    const dataDir = await writtenDataDir();
    try {
      const segment = (await listSegments(dataDir)).at(-1)!;
      const bytes = await fsp.readFile(segment.path);
      // The last segment holds b1's and b2's records; damage its second record.
      const secondRecord = frameHeaderBytes + bytes.readUInt32LE(8);
      bytes[secondRecord + frameHeaderBytes + 2] ^= 0xff;
      await fsp.writeFile(segment.path, bytes);
      const json = JSON.parse((await verify(dataDir, 'json')).stdout) as IStorageReport;
      const report = json.segments.find((one) => one.file === segment.path)!;
      assert.equal(report.state, 'damaged');
      assert.equal(report.damage!.offset, secondRecord);
      assert.equal(report.damage!.reason, 'checksum mismatch');
      assert.ok(report.damage!.validRecordsAfter >= 1);
      assert.equal(report.intactRecords, 1);
      const result = await verify(dataDir);
      assert.equal(result.code, 1);
      assert.ok(result.stdout.includes(`DAMAGED  ${path.basename(segment.path)}`), result.stdout);
      const truncate = new RegExp(`truncate ${segment.path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} to (\\d+) bytes`).exec(result.stdout);
      assert.ok(truncate, result.stdout);
      assert.equal(Number(truncate[1]), secondRecord);
      // Following it: the snapshots' clusters and the records before the damage are kept.
      await fsp.truncate(segment.path, Number(truncate[1]));
      assert.equal((await verify(dataDir)).code, 0);
      const names = await clusterNamesAfterStart(dataDir);
      assert.ok(names.includes('a1') && names.includes('a2'), names.join(','));
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('both snapshots damaged but the journal reaches back to the first record: rebuild from the journal alone', async () => {
    const running = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-verify-'));
    const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-verify-image-'));
    const t = await startTestCloudly({ dataDir: running, logLevel: 'silent' });
    try {
      await t.createCluster('only');
      await t.cloudly.database.compact();
      // A crash image right after the first compaction (a graceful stop would write a second
      // snapshot: releasing the reconciler's lease is a write).
      await fsp.cp(running, dataDir, { recursive: true, filter: (source) => !/\.sock$|cloudly\.lock$/.test(source) });
    } finally {
      await t.stop();
      await fsp.rm(running, { recursive: true, force: true });
    }
    try {
      // One snapshot exists: the journal from record 1 is kept.
      await fsp.writeFile(path.join(dataDir, snapshotFileName), 'not a snapshot');
      await fsp.rm(path.join(dataDir, previousSnapshotFileName), { force: true });
      const result = await verify(dataDir);
      assert.equal(result.code, 1);
      assert.match(result.stdout, /recover: nothing is lost: move .*embedded-db\.snapshot out of the data directory .*starts from an empty database plus the journal/);
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});

interface IJournalFrame { offset: number; end: number; lsn: number; coll: string; op: string; docs: Array<{ id?: string; name?: string }> }

/**
 * A crash image of a Cloudly that acknowledged 30 cluster creations (all in the journal, no
 * compaction ran), its last segment's frames, and the insert record of the 16th cluster, which
 * has more than 20 records after it.
 */
const acknowledgedJournalImage = async () => {
  const running = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-recover-'));
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-recover-image-'));
  const acknowledged: Array<{ id: string; name: string }> = [];
  const t = await startTestCloudly({ dataDir: running, logLevel: 'silent' });
  try {
    for (let index = 0; index < 30; index++) {
      const { cluster } = await t.createCluster(`acked-${index}`);
      acknowledged.push({ id: cluster.id, name: cluster.name });
    }
    await fsp.cp(running, dataDir, { recursive: true, filter: (source) => !/\.sock$|cloudly\.lock$/.test(source) });
  } finally {
    await t.stop();
    await fsp.rm(running, { recursive: true, force: true });
  }
  const segment = (await listSegments(dataDir)).at(-1)!;
  const bytes = await fsp.readFile(segment.path);
  const frames: IJournalFrame[] = [];
  for (let offset = 0; offset < bytes.length;) {
    const read = readFrameAt(bytes, offset);
    assert.ok(read.ok, `frame at ${offset} reads`);
    const payload = read.frame.payload!;
    frames.push({ offset, end: read.frame.end, lsn: read.frame.lsn, coll: String(payload.coll), op: String(payload.op), docs: (payload.docs ?? []) as Array<{ id?: string; name?: string }> });
    offset = read.frame.end;
  }
  const target = acknowledged[15];
  const damaged = frames.find((frame) => frame.op === 'i' && frame.coll === 'CloudlyCluster' && frame.docs.some((doc) => doc.id === target.id));
  assert.ok(damaged, 'the insert of the target cluster is in the journal');
  const recordsAfter = frames.filter((frame) => frame.lsn > damaged.lsn).length;
  assert.ok(recordsAfter > 20, `the damage is in the middle (${recordsAfter} records after it)`);
  return { dataDir, acknowledged, segmentPath: segment.path, bytes, target, damaged };
};

/** Every acknowledged cluster but the one whose record was lost is there after a start. */
const assertEveryOtherClusterBack = async (dataDirArg: string, acknowledgedArg: Array<{ id: string; name: string }>, lostIdArg: string): Promise<void> => {
  const names = await clusterNamesAfterStart(dataDirArg);
  for (const cluster of acknowledgedArg) {
    if (cluster.id !== lostIdArg) {
      assert.ok(names.includes(cluster.name), `acknowledged ${cluster.name} is back`);
    }
  }
};

describe('cloudly storage recover --skip-damaged', () => {
  test('a bit flip in the middle of the journal: the recovery skips only the damaged record, names it, and every other acknowledged write is back', async () => {
    const { dataDir, acknowledged, segmentPath, bytes, target, damaged } = await acknowledgedJournalImage();
    try {
      // One bit of the cluster's name, inside the record's payload.
      const nameAt = bytes.indexOf(Buffer.from(target.name), damaged.offset + frameHeaderBytes);
      assert.ok(nameAt > damaged.offset && nameAt < damaged.end);
      bytes[nameAt] ^= 0x01;
      await fsp.writeFile(segmentPath, bytes);

      const verified = JSON.parse((await verify(dataDir, 'json')).stdout) as IStorageReport;
      assert.equal(verified.healthy, false);
      assert.equal(verified.segments.at(-1)!.damage!.offset, damaged.offset);
      assert.ok(verified.recovery.some((line) => line.includes('cloudly storage recover --skip-damaged')), verified.recovery.join('\n'));

      const dryRun = await runNodeToExit([cliExecutable, 'storage', 'recover', '--skip-damaged', '--dry-run', '--data-dir', dataDir]);
      assert.equal(dryRun.code, 0, dryRun.stderr + dryRun.stdout);
      assert.deepEqual(await fsp.readFile(segmentPath), bytes, 'a dry run changes nothing');

      const recovered = await runNodeToExit([cliExecutable, 'storage', 'recover', '--skip-damaged', '--data-dir', dataDir]);
      assert.equal(recovered.code, 0, recovered.stderr + recovered.stdout);
      // The output names the lost record: its sequence number, place, collection and document.
      assert.ok(recovered.stdout.includes(`LOST     record ${damaged.lsn} in ${path.basename(segmentPath)} at byte offset ${damaged.offset}, ${damaged.end - damaged.offset} bytes (checksum mismatch): insert into cloudly.CloudlyCluster, id ${target.id}`), recovered.stdout);
      assert.match(recovered.stdout, new RegExp(`lost: record ${damaged.lsn} only`));
      assert.equal((await verify(dataDir)).code, 0, 'the repaired journal verifies intact');
      assert.ok((await fsp.readdir(dataDir)).includes(`${path.basename(segmentPath)}.damaged`), 'the damaged original is kept');
      const again = JSON.parse((await runNodeToExit([cliExecutable, '-o', 'json', 'storage', 'recover', '--skip-damaged', '--data-dir', dataDir])).stdout) as IRecoverResult;
      assert.deepEqual(again.lost, [], 'nothing is left to skip');

      await assertEveryOtherClusterBack(dataDir, acknowledged, target.id);
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('a bit flip in a record\'s length: the next record is found by its checksum and sequence number, and the lost one is named by offset and length', async () => {
    const { dataDir, acknowledged, segmentPath, bytes, target, damaged } = await acknowledgedJournalImage();
    try {
      // The length field (bytes 8-11 of the header): the framing itself no longer says where the next record starts.
      bytes[damaged.offset + 9] ^= 0x40;
      await fsp.writeFile(segmentPath, bytes);
      assert.equal((await verify(dataDir)).code, 1);
      const recovered = await runNodeToExit([cliExecutable, 'storage', 'recover', '--skip-damaged', '--data-dir', dataDir]);
      assert.equal(recovered.code, 0, recovered.stderr + recovered.stdout);
      assert.match(recovered.stdout, new RegExp(`LOST {5}record ${damaged.lsn} in ${path.basename(segmentPath).replace(/\./g, '\\.')} at byte offset ${damaged.offset}, ${damaged.end - damaged.offset} bytes \\([^)]+\\): its contents are unreadable`));
      assert.match(recovered.stdout, new RegExp(`lost: record ${damaged.lsn} only`));
      assert.equal((await verify(dataDir)).code, 0);
      await assertEveryOtherClusterBack(dataDir, acknowledged, target.id);
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('a damaged snapshot is refused and nothing is changed; the recovery must be named', async () => {
    const dataDir = await writtenDataDir();
    try {
      await fsp.writeFile(path.join(dataDir, snapshotFileName), 'not a snapshot');
      const files = await fsp.readdir(dataDir);
      const refused = await runNodeToExit([cliExecutable, 'storage', 'recover', '--skip-damaged', '--data-dir', dataDir]);
      assert.equal(refused.code, 1);
      assert.match(refused.stdout, /refused: .*embedded-db\.snapshot is damaged.*nothing was changed/);
      assert.deepEqual(await fsp.readdir(dataDir), files);
      const usage = await runNodeToExit([cliExecutable, 'storage', 'recover', '--data-dir', dataDir]);
      assert.notEqual(usage.code, 0);
      assert.match(usage.stderr, /--skip-damaged/);
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});

test('a snapshot that ends inside a damaged segment with valid records after the damage does not cover it: moving it away would lose them', () => {
  // As a compaction that captured the first record of the new segment leaves it (snapshot up to 38, segment from 38).
  const damaged = {
    file: 'embedded-db.journal.0000000000000038', firstLsn: 38, intactRecords: 1, lastIntactLsn: 38,
    state: 'damaged' as const, damage: { offset: 648, reason: 'checksum mismatch', validRecordsAfter: 22 },
  };
  const earlier = { file: 'embedded-db.journal.0000000000000028', firstLsn: 28, intactRecords: 10, lastIntactLsn: 37, state: 'ok' as const };
  const replay = replayableFrom([earlier, damaged], 38);
  assert.deepEqual(replay.covered, [], 'not offered to be moved away as covered');
  assert.equal(replay.reaches, 38);
  assert.match(replay.blocked ?? '', /is damaged at byte offset 648/);
  // With nothing after the damage, the snapshot does cover it.
  const alone = replayableFrom([earlier, { ...damaged, damage: { ...damaged.damage, validRecordsAfter: 0 } }], 38);
  assert.equal(alone.blocked, null);
  assert.deepEqual(alone.covered.map((segment) => segment.file), [damaged.file]);
});
