import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { previousSnapshotFileName, snapshotFileName } from '../ts/core/database.js';
import { listSegments } from '../ts/core/journal.js';
import { readSnapshotFile, verifySnapshotFile, writeSnapshotFile } from '../ts/core/snapshotfile.js';
import { StorageFaults } from '../ts/core/storagefaults.js';

/**
 * Every step of a compaction fails once, injected by the fault layer (storagefaults.ts), in a
 * real Cloudly: the step's failure leaves the current snapshot, the previous one and every
 * journal segment they need as they were, removes its temporary file, and the compaction
 * succeeds on its own once the fault is gone. What the files hold is then started as a crash
 * would leave it (a copy of the directory) and must hold every acknowledged write.
 */

const tempDir = (prefixArg: string) => fsp.mkdtemp(path.join(os.tmpdir(), prefixArg));

const fileBytes = async (fileArg: string): Promise<Buffer | null> => fsp.readFile(fileArg).catch(() => null);

const clusterNames = async (tArg: ITestCloudly): Promise<string[]> =>
  (await tArg.caller.call('getClusters', {})).clusters.map((cluster) => cluster.name).sort();

describe('snapshot writer: every byte is checked', () => {
  test('a short write is continued: the snapshot is complete and reads back', async () => {
    const dir = await tempDir('cloudly-snapshot-short-');
    try {
      const faultFile = path.join(dir, 'faults');
      await fsp.writeFile(faultFile, 'snapshot.write=SHORT');
      const docs = Array.from({ length: 500 }, (_, index) => ({ _id: `id-${index}`, payload: 'x'.repeat(100) }));
      const file = path.join(dir, 'snap');
      const written = await writeSnapshotFile(file, 7, [{ db: 'd', name: 'c', docs, indexes: [] }], { faults: new StorageFaults(faultFile) });
      assert.equal(written.documents, 500);
      const summary = await verifySnapshotFile(file, { lsn: 7, ...written });
      assert.equal(summary.documents, 500);
      assert.equal((await readSnapshotFile(file)).collections[0].docs.length, 500);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  test('a write that claims bytes it did not store is caught by reading the snapshot back', async () => {
    const dir = await tempDir('cloudly-snapshot-silent-');
    try {
      const faultFile = path.join(dir, 'faults');
      await fsp.writeFile(faultFile, 'snapshot.write=SILENT');
      const file = path.join(dir, 'snap');
      const docs = Array.from({ length: 50 }, (_, index) => ({ _id: `id-${index}` }));
      const written = await writeSnapshotFile(file, 3, [{ db: 'd', name: 'c', docs, indexes: [] }], { faults: new StorageFaults(faultFile) });
      await assert.rejects(() => verifySnapshotFile(file, { lsn: 3, ...written }), /is damaged/);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});

interface IStepCase {
  fault: string;
  /** False where the step does not fail the compaction (a short write is continued; a segment left behind only costs space). */
  compactionFails: boolean;
}

const stepCases: IStepCase[] = [
  { fault: 'snapshot.write=ENOSPC', compactionFails: true },
  { fault: 'snapshot.write=EIO', compactionFails: true },
  { fault: 'snapshot.write=SHORT', compactionFails: false },
  { fault: 'snapshot.write=SILENT', compactionFails: true },
  { fault: 'snapshot.sync=EIO', compactionFails: true },
  { fault: 'snapshot.link=ENOSPC', compactionFails: true },
  { fault: 'snapshot.link=EIO', compactionFails: true },
  { fault: 'snapshot.rename=ENOSPC', compactionFails: true },
  { fault: 'snapshot.rename=EIO', compactionFails: true },
  { fault: 'journal.unlink=EIO', compactionFails: false },
];

describe('compaction: a failed step changes nothing recovery needs, and is retried', () => {
  for (const { fault, compactionFails } of stepCases) {
    test(`${fault}: current and previous snapshot and the journal they need stay; retried once the fault is gone; a crash image holds every write`, async () => {
      const faultDir = await tempDir('cloudly-faults-');
      const faultFile = path.join(faultDir, 'faults');
      const t = await startTestCloudly({ journalFailpointFile: faultFile, compactRetryMs: 100, logLevel: 'silent' });
      const crashDir = await tempDir('cloudly-crash-image-');
      try {
        const db = t.cloudly.database;
        for (const name of ['one', 'two', 'three']) {
          await t.createCluster(name);
          await db.compact();
        }
        await t.createCluster('four');
        const currentPath = path.join(t.dataDir, snapshotFileName);
        const previousPath = path.join(t.dataDir, previousSnapshotFileName);
        const currentBefore = await fileBytes(currentPath);
        const previousBefore = await fileBytes(previousPath);
        const segmentsBefore = (await listSegments(t.dataDir)).map((segment) => segment.firstLsn);
        const written = db.snapshotsWritten;
        const failed = db.compactionsFailed;
        await fsp.writeFile(faultFile, fault);
        if (compactionFails) {
          await assert.rejects(() => db.compact(), new RegExp(fault.includes('SILENT') ? 'is damaged' : fault.split('=')[1]));
          assert.equal(db.compactionsFailed, failed + 1);
          assert.deepEqual(await fileBytes(currentPath), currentBefore, 'the current snapshot is untouched');
          assert.deepEqual(await fileBytes(previousPath), previousBefore, 'the previous snapshot is untouched');
          const segmentsAfter = (await listSegments(t.dataDir)).map((segment) => segment.firstLsn);
          for (const firstLsn of segmentsBefore) {
            assert.ok(segmentsAfter.includes(firstLsn), `journal segment ${firstLsn} is kept`);
          }
          assert.deepEqual((await fsp.readdir(t.dataDir)).filter((name) => name.endsWith('.tmp')), [], 'the temporary snapshot is removed');
          // Writes go on while compaction fails.
          await t.createCluster('five');
        } else {
          await db.compact();
          assert.equal(db.snapshotsWritten, written + 1);
          await verifySnapshotFile(currentPath);
          await t.createCluster('five');
        }
        // What a kill -9 right now would leave (a retry, still failing, may be writing a temporary
        // snapshot meanwhile; start-up removes those unread, so the copy leaves them out).
        await fsp.cp(t.dataDir, crashDir, { recursive: true, filter: (source) => !/\.sock$|cloudly\.lock$|\.tmp$/.test(source) });
        await fsp.rm(faultFile);
        if (compactionFails) {
          await waitFor(() => db.snapshotsWritten > written, 'the compaction is retried and succeeds once the fault is gone', 15_000);
          await verifySnapshotFile(currentPath);
        }
        const recovered = await startTestCloudly({ dataDir: crashDir, logLevel: 'silent' });
        try {
          assert.deepEqual(await clusterNames(recovered), ['five', 'four', 'one', 'three', 'two']);
        } finally {
          await recovered.stop();
        }
      } finally {
        await t.stop();
        await fsp.rm(crashDir, { recursive: true, force: true });
        await fsp.rm(faultDir, { recursive: true, force: true });
      }
    });
  }
});

describe('journal append: a short write is continued, a failed one refused', () => {
  test('journal.write=SHORT: writes are answered and kept; ENOSPC refuses them unavailable and keeps nothing', async () => {
    const faultDir = await tempDir('cloudly-faults-');
    const faultFile = path.join(faultDir, 'faults');
    const t = await startTestCloudly({ journalFailpointFile: faultFile, logLevel: 'silent' });
    try {
      await fsp.writeFile(faultFile, 'journal.write=SHORT');
      await t.createCluster('short-1');
      await t.createCluster('short-2');
      await fsp.writeFile(faultFile, 'journal.write=ENOSPC');
      const refusal = await refusalOf(() => t.createCluster('refused'));
      assert.equal(refusal.code, 'unavailable');
      await fsp.rm(faultFile);
      await t.restart();
      assert.deepEqual(await clusterNames(t), ['short-1', 'short-2']);
    } finally {
      await t.stop();
      await fsp.rm(faultDir, { recursive: true, force: true });
    }
  });
});

describe('read-only on a full disk (injected)', () => {
  test('journal.write=ENOSPC: writes refused storage-full with retryAfterMs, reads served, /readyz and the gauge say read-only, also after a restart while full; the probe ends it without a write', async () => {
    const faultDir = await tempDir('cloudly-faults-');
    const faultFile = path.join(faultDir, 'faults');
    const t = await startTestCloudly({ journalFailpointFile: faultFile, storageProbeMs: 100, logLevel: 'silent' });
    const readOnly = async (): Promise<{ status: number; storage: unknown; reasons: unknown; gauge: string | undefined }> => {
      const response = await fetch(`${t.baseUrl}/readyz`);
      const body = await response.json() as { storage?: unknown; reasons?: unknown };
      const metrics = await (await fetch(`${t.baseUrl}/metrics`)).text();
      return { status: response.status, storage: body.storage, reasons: body.reasons, gauge: /^cloudly_storage_read_only (\d+)$/m.exec(metrics)?.[1] };
    };
    try {
      await t.createCluster('before');
      assert.deepEqual(await readOnly(), { status: 200, storage: undefined, reasons: undefined, gauge: '0' });
      await fsp.writeFile(faultFile, 'journal.write=ENOSPC');
      const refusal = await refusalOf(() => t.createCluster('refused'));
      assert.deepEqual(refusal, { code: 'unavailable', retryable: true, reasons: ['storage-full'], retryAfterMs: 100 });
      assert.deepEqual(await readOnly(), { status: 200, storage: 'read-only', reasons: ['storage-full'], gauge: '1' });
      assert.deepEqual(await clusterNames(t), ['before']);
      await t.restart();
      assert.deepEqual(await readOnly(), { status: 200, storage: 'read-only', reasons: ['storage-full'], gauge: '1' });
      assert.deepEqual(await clusterNames(t), ['before']);
      assert.deepEqual((await refusalOf(() => t.createCluster('refused-after-restart'))).reasons, ['storage-full']);
      await fsp.rm(faultFile);
      await waitFor(async () => (await readOnly()).storage === undefined, 'the probe ends the read-only state with no write', 30_000);
      assert.equal((await readOnly()).gauge, '0');
      await t.createCluster('after');
      assert.deepEqual(await clusterNames(t), ['after', 'before']);
    } finally {
      await t.stop();
      await fsp.rm(faultDir, { recursive: true, force: true });
    }
  });
});
