/**
 * The embedded database's equality index (ts/core/storageindex.ts) against a scan of the whole
 * collection, in the same run on the same data: the bench switches the index off and on between
 * rounds (the bench-only `equalityIndex` switch of the storage) and alternates which side runs
 * first.
 *
 *   node --import tsx bench/storageindex.bench.ts
 *
 * For collections of 100, 1,000 and 10,000 documents (about 300 bytes each, `id` unique,
 * `clusterId` shared by 10 documents): a `find` by `id` through the store, a compare-and-swap by
 * `id` and generation through the store (one journaled write), and a `find` by `clusterId`;
 * sequential, p50 per operation and the ratio scan/index. Writes bench/results/storageindex.md.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CloudlyDatabase } from '../ts/core/database.js';
import { createLogger } from '../ts/core/logger.js';
import { defineDocumentKind, DocumentStore } from '../ts/core/store.js';
import { sized, smoke } from './helpers/smoke.js';

interface IProbeDocument {
  id: string;
  generation: number;
  clusterId: string;
  payload: string;
  counter: number;
}

const probeKind = defineDocumentKind<IProbeDocument>('StorageIndexProbe', { audited: false });
const operationsPerRound = sized(400, 20);

const median = (samplesArg: number[]): number => {
  const sorted = [...samplesArg].sort((x, y) => x - y);
  return sorted[Math.floor(sorted.length / 2)];
};

const timeOps = async (countArg: number, fnArg: (indexArg: number) => Promise<void>): Promise<number> => {
  const samples: number[] = [];
  for (let index = 0; index < countArg; index++) {
    const started = performance.now();
    await fnArg(index);
    samples.push(performance.now() - started);
  }
  return median(samples);
};

const main = async (): Promise<void> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-index-'));
  const database = new CloudlyDatabase({ mongoDbUrl: null, mongoDbName: 'cloudly', dataDir, logger: createLogger('error') });
  await database.start();
  const store = new DocumentStore(database);
  const storage = database.storage!;
  const lines: string[] = [];
  const say = (lineArg: string): void => {
    console.log(lineArg);
    lines.push(lineArg);
  };
  say(`load average at start ${os.loadavg().map((value) => value.toFixed(1)).join(' ')}`);
  try {
    let total = 0;
    for (const size of [100, 1_000, 10_000]) {
      while (total < size) {
        const batch = Math.min(500, size - total);
        await Promise.all(Array.from({ length: batch }, (_, offset) => {
          const number = total + offset;
          return store.insert(probeKind, { id: `probe-${number}`, clusterId: `cluster-${Math.floor(number / 10)}`, payload: 'x'.repeat(200), counter: 0 });
        }));
        total += batch;
      }
      const ids = Array.from({ length: size }, (_, index) => `probe-${index}`);
      const pick = (indexArg: number): string => ids[(indexArg * 7919) % size];
      const measure = async (): Promise<{ find: number; swap: number; byCluster: number }> => ({
        find: await timeOps(operationsPerRound, async (index) => {
          await store.get(probeKind, pick(index));
        }),
        swap: await timeOps(operationsPerRound, async (index) => {
          const id = pick(index);
          const current = await store.get(probeKind, id);
          if (!await store.swap(probeKind, id, current!.generation, { set: { counter: current!.counter + 1 } })) {
            throw new Error(`swap of ${id} lost: nothing else writes here`);
          }
        }),
        byCluster: await timeOps(operationsPerRound, async (index) => {
          await database.mongoDb.collection(probeKind.collectionName).find({ clusterId: `cluster-${Math.floor(((index * 7919) % size) / 10)}` }).toArray();
        }),
      });
      const rounds: Record<'index' | 'scan', Array<{ find: number; swap: number; byCluster: number }>> = { index: [], scan: [] };
      for (let round = 0; round < sized(4, 1); round++) {
        for (const side of round % 2 === 0 ? ['scan', 'index'] as const : ['index', 'scan'] as const) {
          storage.equalityIndex = side === 'index';
          rounds[side].push(await measure());
        }
      }
      storage.equalityIndex = true;
      const of = (sideArg: 'index' | 'scan', keyArg: 'find' | 'swap' | 'byCluster'): number => median(rounds[sideArg].map((round) => round[keyArg]));
      const figure = (keyArg: 'find' | 'swap' | 'byCluster', labelArg: string): string =>
        `${labelArg} p50 ${of('scan', keyArg).toFixed(3)} ms scanned, ${of('index', keyArg).toFixed(3)} ms indexed (${(of('scan', keyArg) / of('index', keyArg)).toFixed(1)}× faster)`;
      say(`${size} documents: ${figure('find', 'find by id')}; ${figure('swap', 'read + compare-and-swap by id')}; ${figure('byCluster', 'find by clusterId (10 documents)')}`);
    }
  } finally {
    await database.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
  const results = [
    '# Embedded database equality index',
    '',
    `\`node --import tsx bench/storageindex.bench.ts\` on ${os.cpus().length} cores, ${new Date().toISOString()}.`,
    'Sequential operations through the store and the driver over the embedded server\'s Unix socket; each figure is the median of',
    `four rounds of ${operationsPerRound} operations per side, the sides alternating which runs first.`,
    '',
    ...lines.map((line) => `- ${line}`),
    '',
  ].join('\n');
  if (!smoke) {
    await fsp.mkdir(path.join(import.meta.dirname, 'results'), { recursive: true });
    await fsp.writeFile(path.join(import.meta.dirname, 'results', 'storageindex.md'), results);
  }
};

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
