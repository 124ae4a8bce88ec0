/**
 * Journal benchmark: the embedded database with its write-ahead journal, measured on real
 * temporary data directories (real fdatasync, real Unix socket, real driver).
 *
 *   node --import tsx bench/journal.bench.ts
 *
 * Prints:
 * - compare-and-swap writes (`store.swap` on a kind without audit events, so one conditional
 *   write each) per second with the journal and with the journal
 *   disabled (the bench-only `journal: false` switch of CloudlyDatabase; nothing is durable
 *   then), one document's chain (sequential) and 50 documents with one write in flight each,
 *   with p50/p99 latency. Two rounds per side, order rotated;
 * - compaction of 100,000 documents (~330 bytes each): its duration and the longest write stall
 *   it causes, seen by a sequential CAS writer on another collection, next to the longest write
 *   of the same writer without compaction;
 * - restart: recovery of 100,000 documents from the snapshot plus a ~50 MB journal (1,000 ~2 KB
 *   documents rewritten over and over), read from a copy of the data directory taken while the
 *   database runs (what kill -9 leaves).
 *
 * Every swap is checked; a lost one fails the run with a non-zero exit.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CloudlyDatabase } from '../ts/core/database.js';
import { createLogger } from '../ts/core/logger.js';
import { defineDocumentKind, DocumentStore } from '../ts/core/store.js';
import { sized } from './helpers/smoke.js';

/** Project's own definition: the document the CAS phases write. */
interface IBenchDoc {
  id: string;
  generation: number;
  counter: number;
  note: string;
}

/** Not audited: each swap is exactly one conditional write (an audited kind adds its event's insert). */
const benchKind = defineDocumentKind<IBenchDoc>('CloudlyBenchJournal', { audited: false });
const phaseMs = sized(2_500, 200);
const inFlight = 50;
const bulkDocuments = sized(100_000, 2_000);
const journalTargetBytes = sized(50, 1) * 1024 * 1024;

const logger = createLogger(process.env.JOURNAL_BENCH_LOG ?? 'error');
const phase = (nameArg: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${nameArg}\n`);

const openDatabase = async (dataDirArg: string, journalArg: boolean) => {
  const database = new CloudlyDatabase({
    mongoDbUrl: null,
    mongoDbName: 'cloudly',
    dataDir: dataDirArg,
    logger,
    journal: journalArg,
    // The bench triggers compaction itself.
    compactBytes: 64 * 1024 * 1024 * 1024,
    compactIntervalMs: 7 * 24 * 3_600_000,
  });
  await database.start();
  return { database, store: new DocumentStore(database) };
};

interface IMeasured {
  ops: number;
  ms: number;
  latenciesMs: number[];
}

const quantile = (sortedArg: number[], qArg: number): number =>
  sortedArg.length === 0 ? NaN : sortedArg[Math.min(sortedArg.length - 1, Math.floor(qArg * sortedArg.length))];

/** Swaps from `workersArg` workers, each on its own document, for `msArg`; returns every latency. */
const swapLoad = async (storeArg: DocumentStore, idsArg: string[], msArg: number): Promise<IMeasured> => {
  const generations = await Promise.all(idsArg.map(async (id) => (await storeArg.get(benchKind, id))!.generation));
  const latenciesMs: number[] = [];
  const begin = performance.now();
  const deadline = begin + msArg;
  await Promise.all(idsArg.map(async (id, index) => {
    while (performance.now() < deadline) {
      const started = performance.now();
      const swapped = await storeArg.swap(benchKind, id, generations[index], { set: { counter: generations[index], note: 'x' } });
      latenciesMs.push(performance.now() - started);
      if (!swapped) {
        throw new Error(`swap of ${id} at generation ${generations[index]} was lost`);
      }
      generations[index]++;
    }
  }));
  return { ops: latenciesMs.length, ms: performance.now() - begin, latenciesMs };
};

const ensureDocs = async (storeArg: DocumentStore, countArg: number, prefixArg: string): Promise<string[]> => {
  const ids = Array.from({ length: countArg }, (_, index) => `${prefixArg}-${index}`);
  for (const id of ids) {
    await storeArg.insert(benchKind, { id, counter: 0, note: '' });
  }
  return ids;
};

const summarize = (measuredArg: IMeasured[]) => {
  const ops = measuredArg.reduce((sum, one) => sum + one.ops, 0);
  const ms = measuredArg.reduce((sum, one) => sum + one.ms, 0);
  const sorted = measuredArg.flatMap((one) => one.latenciesMs).sort((a, b) => a - b);
  return { perSecond: (ops * 1000) / ms, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted.at(-1) ?? NaN, ops };
};

const line = (labelArg: string, summaryArg: ReturnType<typeof summarize>) =>
  console.log(`${labelArg.padEnd(44)} ${summaryArg.perSecond.toFixed(0).padStart(7)} /s   p50 ${summaryArg.p50.toFixed(2).padStart(6)} ms   p99 ${summaryArg.p99.toFixed(2).padStart(6)} ms   (${summaryArg.ops} writes)`);

const main = async (): Promise<void> => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-journal-bench-'));
  try {
    // ------------------------------------------------------------ CAS with and without the journal
    const journaled = await openDatabase(path.join(root, 'journaled'), true);
    const unjournaled = await openDatabase(path.join(root, 'unjournaled'), false);
    const sides = { journaled, unjournaled };
    const ids = {
      journaled: { one: await ensureDocs(journaled.store, 1, 'seq'), many: await ensureDocs(journaled.store, inFlight, 'par') },
      unjournaled: { one: await ensureDocs(unjournaled.store, 1, 'seq'), many: await ensureDocs(unjournaled.store, inFlight, 'par') },
    };
    const results: Record<string, IMeasured[]> = {};
    for (const [side, handle] of Object.entries(sides) as Array<[keyof typeof sides, typeof journaled]>) {
      await swapLoad(handle.store, ids[side].many, 300); // warm-up
    }
    for (const order of [['journaled', 'unjournaled'], ['unjournaled', 'journaled']] as Array<Array<keyof typeof sides>>) {
      for (const side of order) {
        for (const shape of ['one', 'many'] as const) {
          const key = `${side}/${shape}`;
          (results[key] ??= []).push(await swapLoad(sides[side].store, ids[side][shape], phaseMs / 2));
        }
      }
    }
    console.log('compare-and-swap writes (store.swap), embedded database');
    const figures: Record<string, ReturnType<typeof summarize>> = {};
    for (const key of ['journaled/one', 'unjournaled/one', 'journaled/many', 'unjournaled/many']) {
      figures[key] = summarize(results[key]);
      line(`  ${key.replace('/one', ', sequential').replace('/many', `, ${inFlight} in flight`)}`, figures[key]);
    }
    console.log(`  ratio journaled/unjournaled: sequential ${(figures['journaled/one'].perSecond / figures['unjournaled/one'].perSecond).toFixed(2)}, `
      + `${inFlight} in flight ${(figures['journaled/many'].perSecond / figures['unjournaled/many'].perSecond).toFixed(2)}`);
    console.log(`  journal syncs: ${journaled.database.journal!.syncs} for ${journaled.database.journal!.lastAppendedLsn} records (group commit)`);
    await unjournaled.database.stop();

    // ------------------------------------------------------------ compaction of 100,000 documents
    phase('loading 100,000 documents');
    const bulk = journaled.database.mongoDb.collection('CloudlyBenchBulk');
    const payload = 'p'.repeat(240);
    for (let start = 0; start < bulkDocuments; start += 1000) {
      await bulk.insertMany(Array.from({ length: 1000 }, (_, index) => ({ id: `bulk-${start + index}`, generation: 1, payload, at: new Date() })));
    }
    phase('compacting them once');
    await journaled.database.compact();
    phase('compaction under a writer');
    const writerIds = ids.journaled.one;
    const quiet = await swapLoad(journaled.store, writerIds, 1500);
    let compactionMs = 0;
    const compactionStart = performance.now();
    const compaction = journaled.database.compact().then(() => {
      compactionMs = performance.now() - compactionStart;
    });
    const duringLatencies: number[] = [];
    let compactionDone = false;
    void compaction.then(() => {
      compactionDone = true;
    });
    let generation = (await journaled.store.get(benchKind, writerIds[0]))!.generation;
    while (!compactionDone) {
      const started = performance.now();
      if (!await journaled.store.swap(benchKind, writerIds[0], generation, { set: { counter: generation } })) {
        throw new Error('swap lost during compaction');
      }
      duringLatencies.push(performance.now() - started);
      generation++;
    }
    await compaction;
    const snapshotBytes = (await fsp.stat(journaled.database.snapshotPath)).size;
    console.log(`compaction of ${bulkDocuments + 2 * inFlight} documents (snapshot ${(snapshotBytes / 1024 / 1024).toFixed(1)} MB)`);
    console.log(`  duration ${compactionMs.toFixed(0)} ms; longest write during it ${Math.max(...duringLatencies).toFixed(1)} ms `
      + `(${duringLatencies.length} sequential writes, p50 ${quantile([...duringLatencies].sort((a, b) => a - b), 0.5).toFixed(2)} ms); `
      + `the same writer without compaction: longest ${Math.max(...quiet.latenciesMs).toFixed(1)} ms, `
      + `p50 ${quantile([...quiet.latenciesMs].sort((a, b) => a - b), 0.5).toFixed(2)} ms (${quiet.ops} writes)`);

    // ------------------------------------------------------------ restart with a ~50 MB journal
    phase('writing a ~50 MB journal');
    // Update records of ~2 KB documents, 1,000 per command (updateMany), each document rewritten
    // again and again, until the journal since the snapshot holds ~50 MB.
    const churn = journaled.database.mongoDb.collection('CloudlyBenchChurn');
    await churn.insertMany(Array.from({ length: 1000 }, (_, index) => ({ id: `churn-${index}`, generation: 1, note: '' })));
    const note = 'n'.repeat(2000);
    const journal = journaled.database.journal!;
    const journalBefore = journal.bytesSinceCompaction;
    for (let round = 1; journal.bytesSinceCompaction - journalBefore < journalTargetBytes; round++) {
      await churn.updateMany({}, { $set: { note: `${round}${note}` }, $inc: { generation: 1 } });
    }
    const copy = path.join(root, 'crash-copy');
    await fsp.cp(path.dirname(journaled.database.snapshotPath), copy, {
      recursive: true,
      filter: (source) => !source.endsWith('.sock'),
    });
    let journalBytes = 0;
    for (const name of await fsp.readdir(copy)) {
      if (name.startsWith('embedded-db.journal.')) {
        journalBytes += (await fsp.stat(path.join(copy, name))).size;
      }
    }
    await journaled.database.stop();
    phase('restarting on the copy');
    const restartStart = performance.now();
    const restarted = await openDatabase(copy, true);
    const restartMs = performance.now() - restartStart;
    const recoveredBulk = await restarted.database.mongoDb.collection('CloudlyBenchBulk').countDocuments();
    console.log(`restart from snapshot + journal (${(journalBytes / 1024 / 1024).toFixed(1)} MB of journal segments on disk, `
      + `${restarted.database.journal!.lastAppendedLsn - restarted.database.snapshotLsn} records after the snapshot)`);
    const recovery = restarted.database.recovery!;
    console.log(`  ${restartMs.toFixed(0)} ms until the database answers (snapshot read ${recovery.snapshotReadMs} ms, journal read ${recovery.journalReadMs} ms, `
      + `load + replay ${recovery.applyMs} ms); ${recoveredBulk} bulk documents recovered`);
    if (recoveredBulk !== bulkDocuments) {
      throw new Error(`recovered ${recoveredBulk} bulk documents, expected ${bulkDocuments}`);
    }
    await restarted.database.stop();
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
};

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`journal bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
