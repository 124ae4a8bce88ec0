/**
 * Control-plane snapshot benchmark: `cloudly snapshot save` (online, through the API) and
 * `cloudly snapshot restore` of 100,000 documents, on a real Cloudly (embedded database, real
 * port, real journal).
 *
 *   node --import tsx bench/snapshot.bench.ts
 *
 * Prints the save's duration and the longest write a sequential writer saw during it, next to the
 * same writer without a save and to a compaction of the same data (the baselines, same run); then
 * the restore's duration and the time until the restored database answers.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Cloudly } from '../ts/classes.cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyDatabase } from '../ts/core/database.js';
import { createLogger } from '../ts/core/logger.js';
import { writeFully } from '../ts/core/durablefiles.js';
import { verifySnapshotFile } from '../ts/core/snapshotfile.js';
import { restoreSnapshotFile } from '../ts/cli/snapshot.js';
import { sized } from './helpers/smoke.js';

const documents = sized(100_000, 2_000);
const phase = (nameArg: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${nameArg}\n`);
const max = (valuesArg: number[]) => valuesArg.reduce((a, b) => Math.max(a, b), 0);
const p50 = (valuesArg: number[]) => [...valuesArg].sort((a, b) => a - b)[Math.floor(valuesArg.length / 2)] ?? NaN;

/** A sequential writer (one journaled update at a time) until `untilArg` settles; every latency. */
const writeDuring = async (cloudlyArg: Cloudly, untilArg: Promise<unknown>): Promise<number[]> => {
  const collection = cloudlyArg.database.mongoDb.collection('CloudlyBenchWriter');
  await collection.updateOne({ id: 'writer' }, { $set: { n: 0 } }, { upsert: true });
  let done = false;
  void untilArg.finally(() => {
    done = true;
  });
  const latencies: number[] = [];
  for (let n = 1; !done; n++) {
    const started = performance.now();
    await collection.updateOne({ id: 'writer' }, { $set: { n } });
    latencies.push(performance.now() - started);
  }
  return latencies;
};

const main = async (): Promise<void> => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-snapshot-bench-'));
  const cloudly = new Cloudly({ config: {
    port: 0, host: '127.0.0.1', mongoDbUrl: null, dataDir: path.join(root, 'data'), logLevel: 'silent',
    adminUsername: 'admin', adminPassword: 'bench-admin-password-1', journalCompactBytes: 16 * 1024 * 1024 * 1024,
  } });
  await cloudly.start();
  try {
    phase(`loading ${documents.toLocaleString('en')} documents`);
    const bulk = cloudly.database.mongoDb.collection('CloudlyBenchBulk');
    const payload = 'p'.repeat(256);
    for (let start = 0; start < documents; start += 1000) {
      await bulk.insertMany(Array.from({ length: Math.min(1000, documents) }, (_, index) => ({ id: `bulk-${start + index}`, generation: 1, payload, at: new Date() })));
    }
    const admin = new CloudlyAdminClient(cloudly.baseUrl);
    const identity = await admin.login('admin', 'bench-admin-password-1');

    phase('writer alone');
    const quiet = await writeDuring(cloudly, new Promise((resolve) => setTimeout(resolve, 2000)));

    phase('compaction under the writer (baseline)');
    let compactionMs = 0;
    const compactionStarted = performance.now();
    const compaction = cloudly.database.compact().then(() => {
      compactionMs = performance.now() - compactionStarted;
    });
    const duringCompaction = await writeDuring(cloudly, compaction);

    phase('online save under the writer');
    const file = path.join(root, 'control-plane.snapshot');
    let saveMs = 0;
    let savedBytes = 0;
    const saveStarted = performance.now();
    const save = (async () => {
      const response = await fetch(`${cloudly.baseUrl}/admin/snapshot`, { headers: { authorization: `Bearer ${identity.jwt}` } });
      if (response.status !== 200 || !response.body) {
        throw new Error(`save refused: HTTP ${response.status} ${await response.text()}`);
      }
      const handle = await fsp.open(file, 'wx', 0o600);
      try {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          await writeFully(handle, chunk, savedBytes);
          savedBytes += chunk.byteLength;
        }
        await handle.sync();
      } finally {
        await handle.close();
      }
      await verifySnapshotFile(file);
      saveMs = performance.now() - saveStarted;
    })();
    const duringSave = await writeDuring(cloudly, save);
    await save;
    admin.close();

    console.log(`control-plane snapshot of ${documents.toLocaleString('en')} documents (${(savedBytes / 1024 / 1024).toFixed(1)} MB), load average ${os.loadavg().map((value) => value.toFixed(1)).join(' ')}`);
    console.log(`  save (download, write, fsync, verify): ${saveMs.toFixed(0)} ms; longest write during it ${max(duringSave).toFixed(1)} ms `
      + `(${duringSave.length} writes, p50 ${p50(duringSave).toFixed(2)} ms)`);
    console.log(`  baselines: writer alone longest ${max(quiet).toFixed(1)} ms (p50 ${p50(quiet).toFixed(2)} ms); `
      + `compaction ${compactionMs.toFixed(0)} ms, longest write during it ${max(duringCompaction).toFixed(1)} ms; `
      + `save / compaction duration ${(saveMs / compactionMs).toFixed(2)}`);

    phase('restore');
    const restoredDir = path.join(root, 'restored');
    const restoreStarted = performance.now();
    await restoreSnapshotFile(file, restoredDir);
    const restoreMs = performance.now() - restoreStarted;
    const openStarted = performance.now();
    const restored = new CloudlyDatabase({ mongoDbUrl: null, mongoDbName: 'cloudly', dataDir: restoredDir, logger: createLogger('error') });
    await restored.start();
    const count = await restored.mongoDb.collection('CloudlyBenchBulk').countDocuments();
    const openMs = performance.now() - openStarted;
    await restored.stop();
    if (count !== documents) {
      throw new Error(`restored ${count} documents, expected ${documents}`);
    }
    console.log(`  restore (verify, copy, fsync, read back): ${restoreMs.toFixed(0)} ms; then until the restored database answers: ${openMs.toFixed(0)} ms (${count.toLocaleString('en')} documents)`);
  } finally {
    await cloudly.stop();
    await fsp.rm(root, { recursive: true, force: true });
  }
};

await main();
