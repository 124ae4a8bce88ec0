/**
 * The embedded database's queries with mingo's operator table shared (ts/core/queryengine.ts)
 * against mingo's own copy per query, in the same run on the same data: the bench switches the
 * sharing off and on between rounds and alternates which side runs first.
 *
 *   node --import tsx bench/queryengine.bench.ts
 *
 * - the query engine alone: CongoDB's `QueryEngine.filter` by `id` over 100 documents, µs per call;
 * - end to end: a `find` by `id` through the store and a read + compare-and-swap by `id` in a
 *   collection of 100 documents, over the embedded server's Unix socket, p50 per operation; and the
 *   process's CPU per operation over the same rounds.
 *
 * Writes bench/results/queryengine.md.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import { CloudlyDatabase } from '../ts/core/database.js';
import { createLogger } from '../ts/core/logger.js';
import { queriesShareContext, setQueriesShareContext } from '../ts/core/queryengine.js';
import { defineDocumentKind, DocumentStore } from '../ts/core/store.js';
import { ownCpuSeconds } from './helpers/processstats.js';
import { reportResults, sized } from './helpers/smoke.js';

interface IProbeDocument {
  id: string;
  generation: number;
  counter: number;
  payload: string;
}

type TSide = 'copied' | 'shared';

const probeKind = defineDocumentKind<IProbeDocument>('QueryEngineProbe', { audited: false });
const documentCount = 100;
const callsPerRound = sized(20_000, 200);
const operationsPerRound = sized(1_000, 20);
const rounds = sized(4, 1);

const median = (samplesArg: number[]): number => [...samplesArg].sort((x, y) => x - y)[Math.floor(samplesArg.length / 2)];

/** Each side's figure from every round, the sides alternating which runs first. */
const alternate = async (measureArg: (sideArg: TSide) => Promise<number>): Promise<Record<TSide, number>> => {
  const figures: Record<TSide, number[]> = { copied: [], shared: [] };
  for (let round = 0; round < rounds; round++) {
    for (const side of round % 2 === 0 ? ['copied', 'shared'] as const : ['shared', 'copied'] as const) {
      setQueriesShareContext(side === 'shared');
      figures[side].push(await measureArg(side));
    }
  }
  setQueriesShareContext(true);
  return { copied: median(figures.copied), shared: median(figures.shared) };
};

const compare = (labelArg: string, figuresArg: Record<TSide, number>, unitArg: string, digitsArg: number): string =>
  `${labelArg}: ${figuresArg.copied.toFixed(digitsArg)} ${unitArg} copied, ${figuresArg.shared.toFixed(digitsArg)} ${unitArg} shared (${(figuresArg.copied / figuresArg.shared).toFixed(2)}×)`;

const main = async (): Promise<void> => {
  if (!queriesShareContext) {
    throw new Error('this mingo is not the version ts/core/queryengine.ts was written for: nothing to compare');
  }
  const lines: string[] = [
    '# The embedded database\'s queries: mingo\'s operator table shared or copied',
    '',
    `\`node --import tsx bench/queryengine.bench.ts\` on ${os.cpus().length} cores, ${new Date().toISOString()}, load average at start ${os.loadavg().map((value) => value.toFixed(1)).join(' ')}.`,
    `Each figure is the median of ${rounds} rounds per side, the sides alternating which runs first.`,
    '',
  ];
  const documents = Array.from({ length: documentCount }, (_, index) => ({ _id: `o-${index}`, id: `probe-${index}`, generation: 1, counter: 0, payload: 'x'.repeat(200) }));
  const engine = await alternate(async () => {
    const started = performance.now();
    for (let call = 0; call < callsPerRound; call++) {
      congodb.QueryEngine.filter(documents as never[], { id: `probe-${(call * 7919) % documentCount}` } as never);
    }
    return ((performance.now() - started) * 1000) / callsPerRound;
  });
  lines.push(`- ${compare(`the query engine alone, \`QueryEngine.filter\` by id over ${documentCount} documents`, engine, 'µs per call', 1)}`);

  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-queryengine-'));
  const database = new CloudlyDatabase({ mongoDbUrl: null, mongoDbName: 'cloudly', dataDir, logger: createLogger('error') });
  await database.start();
  const store = new DocumentStore(database);
  try {
    await Promise.all(Array.from({ length: documentCount }, (_, index) =>
      store.insert(probeKind, { id: `probe-${index}`, counter: 0, payload: 'x'.repeat(200) })));
    const pick = (indexArg: number): string => `probe-${(indexArg * 7919) % documentCount}`;
    const cpuPerOperation: Record<TSide, number[]> = { copied: [], shared: [] };
    const timed = (kindArg: 'find' | 'swap') => async (sideArg: TSide): Promise<number> => {
      const samples: number[] = [];
      const cpuBefore = ownCpuSeconds();
      for (let index = 0; index < operationsPerRound; index++) {
        const started = performance.now();
        const id = pick(index);
        const current = await store.get(probeKind, id);
        if (kindArg === 'swap' && !await store.swap(probeKind, id, current!.generation, { set: { counter: current!.counter + 1 } })) {
          throw new Error(`swap of ${id} lost: nothing else writes here`);
        }
        samples.push(performance.now() - started);
      }
      if (kindArg === 'find') {
        cpuPerOperation[sideArg].push(((ownCpuSeconds() - cpuBefore) * 1e6) / operationsPerRound);
      }
      return median(samples);
    };
    const find = await alternate(timed('find'));
    const swap = await alternate(timed('swap'));
    lines.push(`- ${compare(`a find by id through the store, ${documentCount} documents, p50`, find, 'ms', 3)}`);
    lines.push(`- ${compare('a read + compare-and-swap by id through the store, p50', swap, 'ms', 3)}`);
    lines.push(`- ${compare('CPU of this process (client and embedded server) per find by id', { copied: median(cpuPerOperation.copied), shared: median(cpuPerOperation.shared) }, 'µs', 0)}`);
  } finally {
    await database.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
  lines.push('');
  await reportResults('queryengine.md', lines);
};

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
