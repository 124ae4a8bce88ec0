/**
 * Watch fan-out benchmark: 1,000 change events (cluster creations, 16 in flight) delivered to 50
 * watchers on their own admin sockets, next to the same burst with no watcher and with one watcher
 * in the same run. Aim (issue 21): every watcher has every event within 1 s of the mutation that
 * made it. Writes bench/results/watchfanout.md.
 *
 * Server and watchers share one process (and this machine's 2 cores), so the figures include the
 * watchers' own work of decoding and answering each event; a separate watcher process would only
 * make them better.
 *
 *   node --import tsx bench/watchfanout.bench.ts [watchers] [events]
 */
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadavg as loadAverage } from 'node:os';
import { inParallel, startBenchCloudly, type IBenchCloudly } from './helpers/benchcloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import type { IReq_Any_Cloudly_CreateCluster } from '../ts/interfaces/requests/admin.js';
import type { IChangeEvent, IReq_Admin_WatchChanges, IReq_Cloudly_Admin_ChangeEvent, IReq_Cloudly_Admin_WatchExpired } from '../ts/interfaces/requests/watch.js';
import { sized, smoke } from './helpers/smoke.js';

const watcherCount = Number(process.argv[2] ?? sized(50, 3));
const eventCount = Number(process.argv[3] ?? sized(1000, 20));
const inFlight = 16;

interface IWatcher {
  client: CloudlyAdminClient;
  /** Receipt time of each cluster id's creation event. */
  received: Map<string, number>;
  duplicates: number;
  outOfOrder: number;
  expired: boolean;
}

const openWatcher = async (benchArg: IBenchCloudly): Promise<IWatcher> => {
  const client = new CloudlyAdminClient(benchArg.cloudly.baseUrl, { liveness: false });
  client.identity = benchArg.admin.identity;
  await client.connectSocket();
  const watcher: IWatcher = { client, received: new Map(), duplicates: 0, outOfOrder: 0, expired: false };
  let lastRevision = 0;
  client.handleCall<IReq_Cloudly_Admin_ChangeEvent>('changeEvent', (eventArg: IChangeEvent) => {
    if (eventArg.revision <= lastRevision) watcher.outOfOrder++;
    lastRevision = eventArg.revision;
    if (eventArg.change !== 'created') return;
    if (watcher.received.has(eventArg.id)) watcher.duplicates++;
    else watcher.received.set(eventArg.id, performance.now());
  });
  client.handleCall<IReq_Cloudly_Admin_WatchExpired>('watchExpired', () => {
    watcher.expired = true;
  });
  await client.call<IReq_Admin_WatchChanges>('watchChanges', { kinds: ['CloudlyCluster'] });
  return watcher;
};

const fmt = (valueArg: number): string => (Number.isFinite(valueArg) ? `${valueArg.toFixed(1)} ms` : '—');

const percentile = (sortedArg: number[], pArg: number): number => sortedArg[Math.min(sortedArg.length - 1, Math.floor(sortedArg.length * pArg))];

/** One burst of `eventCount` creations; answers when every watcher has all of them (or after 30 s). */
const burst = async (benchArg: IBenchCloudly, watchersArg: IWatcher[], prefixArg: string) => {
  const sentAt = new Map<string, number>();
  const answeredAt = new Map<string, number>();
  const started = performance.now();
  await inParallel(eventCount, inFlight, async (indexArg) => {
    const before = performance.now();
    const { cluster } = await benchArg.admin.call<IReq_Any_Cloudly_CreateCluster>('createCluster', { name: `${prefixArg}-${indexArg}` });
    sentAt.set(cluster.id, before);
    answeredAt.set(cluster.id, performance.now());
  });
  const committedIn = performance.now() - started;
  const lastAnswer = performance.now();
  const deadline = lastAnswer + 30_000;
  while (watchersArg.some((watcherArg) => [...sentAt.keys()].some((idArg) => !watcherArg.received.has(idArg))) && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const latencies: number[] = [];
  const afterAnswer: number[] = [];
  const spreads: number[] = [];
  let missing = 0;
  for (const id of sentAt.keys()) {
    const times = watchersArg.map((watcherArg) => watcherArg.received.get(id)).filter((timeArg): timeArg is number => timeArg !== undefined);
    if (times.length > 1) spreads.push(Math.max(...times) - Math.min(...times));
  }
  let lastReceipt = lastAnswer;
  for (const watcher of watchersArg) {
    for (const [id, sent] of sentAt) {
      const received = watcher.received.get(id);
      if (received === undefined) {
        missing++;
        continue;
      }
      latencies.push(received - sent);
      afterAnswer.push(received - answeredAt.get(id)!);
      lastReceipt = Math.max(lastReceipt, received);
    }
  }
  latencies.sort((a, b) => a - b);
  afterAnswer.sort((a, b) => a - b);
  spreads.sort((a, b) => a - b);
  return {
    committedIn,
    mutationsPerSecond: eventCount / (committedIn / 1000),
    deliveries: latencies.length,
    missing,
    duplicates: watchersArg.reduce((sum, watcherArg) => sum + watcherArg.duplicates, 0),
    outOfOrder: watchersArg.reduce((sum, watcherArg) => sum + watcherArg.outOfOrder, 0),
    expired: watchersArg.filter((watcherArg) => watcherArg.expired).length,
    p50: latencies.length ? percentile(latencies, 0.5) : NaN,
    p99: latencies.length ? percentile(latencies, 0.99) : NaN,
    max: latencies.length ? latencies[latencies.length - 1] : NaN,
    drainAfterLastAnswer: lastReceipt - lastAnswer,
    /** Receipt minus the mutation's answer (sent after its commit); negative: the event came first. */
    afterAnswerP99: afterAnswer.length ? percentile(afterAnswer, 0.99) : NaN,
    afterAnswerMax: afterAnswer.length ? afterAnswer[afterAnswer.length - 1] : NaN,
    /** Per event, first to last watcher: the fan-out's own spread. */
    spreadP50: spreads.length ? percentile(spreads, 0.5) : NaN,
    spreadMax: spreads.length ? spreads[spreads.length - 1] : NaN,
  };
};

const main = async (): Promise<void> => {
  const runs: Array<{ label: string; watchers: number; result: Awaited<ReturnType<typeof burst>> }> = [];
  for (const [label, watchers] of [['no watcher (baseline)', 0], ['one watcher', 1], [`${watcherCount} watchers`, watcherCount]] as const) {
    // A fresh server per run, so each burst starts from the same empty database.
    const bench = await startBenchCloudly('watchfanout');
    try {
      const opened = await Promise.all(Array.from({ length: watchers }, () => openWatcher(bench)));
      const result = await burst(bench, opened, 'fan');
      runs.push({ label, watchers, result });
      console.log(`${label}: ${eventCount} creations in ${result.committedIn.toFixed(0)} ms (${result.mutationsPerSecond.toFixed(0)}/s); ` +
        `deliveries ${result.deliveries}, missing ${result.missing}, duplicates ${result.duplicates}, out of order ${result.outOfOrder}, expired ${result.expired}; ` +
        `latency p50 ${result.p50.toFixed(1)} ms, p99 ${result.p99.toFixed(1)} ms, max ${result.max.toFixed(1)} ms; after the answer p99 ${result.afterAnswerP99.toFixed(1)} ms, max ${result.afterAnswerMax.toFixed(1)} ms; ` +
        `spread first→last watcher p50 ${result.spreadP50.toFixed(1)} ms, max ${result.spreadMax.toFixed(1)} ms; last delivery ${result.drainAfterLastAnswer.toFixed(0)} ms after the last answer`);
      for (const watcher of opened) watcher.client.close();
    } finally {
      await bench.stop();
    }
  }
  const [baseline, one, many] = runs;
  const within = Number.isFinite(many.result.afterAnswerMax) && many.result.afterAnswerMax <= 1000 && many.result.missing === 0;
  const lines = [
    '# Watch fan-out',
    '',
    `Run \`node --import tsx bench/watchfanout.bench.ts ${watcherCount} ${eventCount}\` (${new Date().toISOString().slice(0, 10)}, shared 2-core machine, embedded database;`,
    `server and watchers in one process). ${eventCount} \`createCluster\` calls, ${inFlight} in flight, on one admin socket; each watcher has its own admin`,
    'socket and `watchChanges { kinds: [\'CloudlyCluster\'] }`. Send→receipt: from sending the mutation to the watcher receiving its event (includes the',
    'write itself); after answer: receipt minus the moment the mutation\'s answer (sent after its commit) arrived, negative when the event came first;',
    'spread: per event, from the first to the last watcher receiving it.',
    '',
    '| run | mutations/s | deliveries | missing / duplicate / out of order / expired | send→receipt p50 / p99 / max | after answer p99 / max | spread p50 / max |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...runs.map(({ label, result }) => `| ${label} | ${result.mutationsPerSecond.toFixed(0)} | ${result.deliveries} | ${result.missing} / ${result.duplicates} / ${result.outOfOrder} / ${result.expired} | ` +
      `${fmt(result.p50)} / ${fmt(result.p99)} / ${fmt(result.max)} | ${fmt(result.afterAnswerP99)} / ${fmt(result.afterAnswerMax)} | ${fmt(result.spreadP50)} / ${fmt(result.spreadMax)} |`),
    '',
    `Write throughput with ${watcherCount} watchers: ${(many.result.mutationsPerSecond / baseline.result.mutationsPerSecond).toFixed(2)}× of no watcher` +
      ` (one watcher: ${(one.result.mutationsPerSecond / baseline.result.mutationsPerSecond).toFixed(2)}×). p99 latency with ${watcherCount} watchers:` +
      ` ${(many.result.p99 / one.result.p99).toFixed(2)}× of one watcher.`,
    '',
    `Aim: every watcher has every event within 1 s of its commit — ${within ? 'met' : 'missed'} (latest receipt ${many.result.afterAnswerMax.toFixed(0)} ms after the` +
      ` mutation's answer; ${many.result.missing} missing; ${many.result.max.toFixed(0)} ms from sending the mutation, the write included).`,
    `Load average when the run ended: ${loadAverage().map((valueArg) => valueArg.toFixed(1)).join(' / ')}.`,
    '',
  ];
  if (!smoke) {
    const file = path.join(path.dirname(new URL(import.meta.url).pathname), 'results', 'watchfanout.md');
    await fsp.writeFile(file, lines.join('\n'));
    console.log(`wrote ${file}`);
  }
};

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
