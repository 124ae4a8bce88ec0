/**
 * What a durable compare-and-swap write costs the server, and whether its memory stays flat under
 * writes (issue 58). Writes bench/results/write.md.
 *
 *   node --import tsx bench/write.bench.ts [updates]      default 30,000 updates of 34 clusters
 *   WRITE_CPU_PROFILE_DIR=dir node --import tsx bench/write.bench.ts
 *                                                          the server records V8 CPU profiles, one per
 *                                                          phase (bench/helpers/cpuprofile.mjs); then
 *                                                          node --import tsx bench/helpers/profilesummary.ts dir sequential
 *   npm run bench -- --smoke write                         tiny sizes, seconds
 *
 * One Cloudly process started as production starts it (bin/cloudly-server, its node flags, the
 * embedded database, log level info), driven by one admin client over its WebSocket from this
 * process. The write is `rotateClusterRelayToken` on its expected generation: the request pipeline,
 * the read, the conditional write, the journal's sync and the audit event. Figures are the server
 * process's CPU (from /proc), which the load of a shared machine does not inflate as it does wall
 * time; wall figures are printed, never judged.
 *
 * With an `etcd` binary on PATH (Debian's `etcd-server`; not needed by the tests or CI) the rounds
 * alternate with etcd's own, on 34 keys, each write a txn on the key's mod revision over etcd's JSON
 * gateway from the same Node client process (bench/helpers/etcd.ts), and the ratios are printed.
 *
 * Memory: RSS before and after `updates` writes spread over the 34 clusters, once settled. The
 * embedded database keeps every audit event in memory for CLOUDLY_AUDIT_RETENTION_DAYS (one event
 * per write), so part of the growth is those events: the bench prints their count beside it.
 *
 * Creates: a fresh Cloudly and, with etcd on PATH, a fresh etcd; each one's RSS idle, then
 * `creates` creates from 8 writers (`createCluster`; etcd: a put of a new key), and its RSS 30 s
 * after the last.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { cloudlyProcessEnv, startCloudlyProcess } from '../test/helpers/process.js';
import { cpuSecondsOf, memoryOf } from './helpers/processstats.js';
import { percentile, sleep } from './helpers/fleet.js';
import { reportResults, sized } from './helpers/smoke.js';
import { findEtcd, startEtcd } from './helpers/etcd.js';
import { inParallel } from './helpers/benchcloudly.js';

const args = process.argv.slice(2);
const updates = Number(args.find((arg) => /^\d+$/.test(arg)) ?? sized(30_000, 200));
const sequentialWrites = sized(2_000, 50);
const parallelWrites = sized(4_000, 64);
const rounds = sized(3, 1);
const clusterCount = 34;
const writers = 32;
const settleMs = sized(10_000, 500);
const creates = sized(10_000, 100);
const afterCreatesMs = sized(30_000, 500);
const mib = (bytesArg: number): string => (bytesArg / 2 ** 20).toFixed(1);

const lines: string[] = [];
const say = (lineArg: string): void => {
  console.error(lineArg);
  lines.push(lineArg);
};
const load = (): string => os.loadavg().map((value) => value.toFixed(1)).join(' ');

const profileDir = process.env.WRITE_CPU_PROFILE_DIR ? path.resolve(process.env.WRITE_CPU_PROFILE_DIR) : null;

const main = async (): Promise<void> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-write-'));
  if (profileDir) {
    await fsp.mkdir(profileDir, { recursive: true });
  }
  const memoryFile = path.join(dataDir, 'memory.json');
  const preloads = ['memoryprobe.mjs', ...(profileDir ? ['cpuprofile.mjs'] : [])]
    .map((nameArg) => `--import ${path.join(import.meta.dirname, 'helpers', nameArg)}`);
  const server = await startCloudlyProcess(cloudlyProcessEnv(dataDir, {
    CLOUDLY_LOG_LEVEL: 'info',
    NODE_OPTIONS: ['--expose-gc', ...preloads].join(' '),
    CLOUDLY_BENCH_MEMORY_FILE: memoryFile,
    // One admin socket carries every write; its default limit (1,000 requests a second) is a
    // guard against a flooding caller, not what this bench measures.
    CLOUDLY_SOCKET_REQUESTS_PER_SECOND: '100000',
    // CLOUDLY_EMBEDDED_DIRECT_READS=0 or CLOUDLY_EMBEDDED_DIRECT_WRITES=0 in the bench's environment:
    // the baselines of reads or writes through the driver.
    ...(process.env.CLOUDLY_EMBEDDED_DIRECT_READS ? { CLOUDLY_EMBEDDED_DIRECT_READS: process.env.CLOUDLY_EMBEDDED_DIRECT_READS } : {}),
    ...(process.env.CLOUDLY_EMBEDDED_DIRECT_WRITES ? { CLOUDLY_EMBEDDED_DIRECT_WRITES: process.env.CLOUDLY_EMBEDDED_DIRECT_WRITES } : {}),
    ...(profileDir ? { CLOUDLY_BENCH_PROFILE_DIR: profileDir, CLOUDLY_BENCH_PROFILE_NAME: 'write' } : {}),
  }));
  const pid = server.child.pid!;
  /** Ends the server's current profile segment, named `labelArg` (a no-op unless profiling). */
  const markPhase = async (labelArg: string): Promise<void> => {
    if (profileDir) {
      await fsp.writeFile(path.join(profileDir, 'phase'), labelArg);
      process.kill(pid, 'SIGUSR2');
      await sleep(500);
    }
  };
  /** The server's live heap and memory outside it, after full collections (bench/helpers/memoryprobe.mjs). */
  const liveMemory = async (): Promise<{ heapUsed: number; external: number; rss: number }> => {
    await fsp.rm(memoryFile, { force: true });
    process.kill(pid, 'SIGWINCH');
    for (let waited = 0; waited < 30_000; waited += 50) {
      const text = await fsp.readFile(memoryFile, 'utf8').catch(() => null);
      if (text) {
        return JSON.parse(text) as { heapUsed: number; external: number; rss: number };
      }
      await sleep(50);
    }
    throw new Error('the server wrote no memory figures');
  };
  const admin = new CloudlyAdminClient(server.baseUrl);
  try {
    await admin.login('admin', 'process-admin-password');
    await admin.connectSocket();
    const clusters: Array<{ id: string; generation: number }> = [];
    for (let index = 0; index < clusterCount; index++) {
      const created = await admin.call('createCluster', { name: `write-bench-${index}` });
      clusters.push({ id: created.cluster.id, generation: created.cluster.generation });
    }
    const rotate = async (clusterArg: { id: string; generation: number }): Promise<void> => {
      const answer = await admin.call('rotateClusterRelayToken', { clusterId: clusterArg.id, expectedGeneration: clusterArg.generation });
      clusterArg.generation = answer.cluster.generation;
    };
    await sleep(settleMs);
    await markPhase('seed');
    // The server's own background (timers, controllers' passes) while nothing is asked of it: on a
    // loaded machine the writes take longer in wall time, and this much CPU per second comes with them.
    const idleCpuBefore = cpuSecondsOf(pid);
    const idleStarted = performance.now();
    await sleep(sized(10_000, 500));
    const idleCpuMsPerSecond = ((cpuSecondsOf(pid) - idleCpuBefore) * 1000) / ((performance.now() - idleStarted) / 1000);
    await markPhase('idle');

    say(`# What a write costs (bench/write.bench.ts), ${new Date().toISOString()}, load ${load()}, ${os.cpus().length} cores`);
    say('');
    const viaProtocol = (variableArg: string): boolean => process.env[variableArg] === '0';
    const reads = viaProtocol('CLOUDLY_EMBEDDED_DIRECT_READS') ? 'through the database protocol (CLOUDLY_EMBEDDED_DIRECT_READS=0)' : 'in the process';
    const writes = viaProtocol('CLOUDLY_EMBEDDED_DIRECT_WRITES') ? 'through the database protocol (CLOUDLY_EMBEDDED_DIRECT_WRITES=0)' : 'in the process';
    say(`Server: one Cloudly process (bin/cloudly-server, embedded database, log level info, reads ${reads}, writes ${writes}); client: one admin WebSocket from the bench process.`);
    say('');

    // Rounds, alternating with etcd's when an `etcd` binary is on PATH (bench/helpers/etcd.ts): one
    // at a time (server CPU per write, the latency the client saw), then `writers` at once, each on
    // a key of its own (no lost races). Figures are the medians of the rounds.
    interface IRound { sequentialCpuMs: number; sequentialOps: number; sequentialSeconds: number; latencies: number[]; parallelCpuMs: number; parallelOps: number; parallelSeconds: number }
    const runRound = async (pidArg: number, writeArg: (indexArg: number) => Promise<void>, markArg: boolean): Promise<IRound> => {
      const latencies: number[] = [];
      let cpuBefore = cpuSecondsOf(pidArg);
      let started = performance.now();
      for (let index = 0; index < sequentialWrites; index++) {
        const writeStarted = performance.now();
        await writeArg(index % clusterCount);
        latencies.push(performance.now() - writeStarted);
      }
      const sequentialSeconds = (performance.now() - started) / 1000;
      const sequentialCpuMs = ((cpuSecondsOf(pidArg) - cpuBefore) * 1000) / sequentialWrites;
      if (markArg) {
        await markPhase('sequential');
      }
      cpuBefore = cpuSecondsOf(pidArg);
      started = performance.now();
      let next = 0;
      await Promise.all(Array.from({ length: writers }, async (_unused, writerArg) => {
        while (next < parallelWrites) {
          next++;
          await writeArg(writerArg);
        }
      }));
      const parallelSeconds = (performance.now() - started) / 1000;
      const parallelCpuMs = ((cpuSecondsOf(pidArg) - cpuBefore) * 1000) / parallelWrites;
      if (markArg) {
        await markPhase('parallel');
      }
      return {
        sequentialCpuMs, sequentialOps: sequentialWrites / sequentialSeconds, sequentialSeconds, latencies,
        parallelCpuMs, parallelOps: parallelWrites / parallelSeconds, parallelSeconds,
      };
    };
    const idleRss = memoryOf(pid).rss;
    const etcdBinary = findEtcd();
    const etcd = etcdBinary ? await startEtcd(etcdBinary, path.join(dataDir, 'etcd')) : null;
    const etcdRevisions: number[] = [];
    if (etcd) {
      for (let index = 0; index < clusterCount; index++) {
        etcdRevisions.push(await etcd.put(`/bench/cluster-${index}`, 'token-0'));
      }
    }
    const etcdSwap = async (indexArg: number): Promise<void> => {
      const revision = await etcd!.compareAndSwap(`/bench/cluster-${indexArg}`, etcdRevisions[indexArg], `token-${etcdRevisions[indexArg]}`);
      if (revision === null) {
        throw new Error('an etcd compare-and-swap lost a race no other writer ran');
      }
      etcdRevisions[indexArg] = revision;
    };
    const etcdIdleRss = etcd ? memoryOf(etcd.child.pid!).rss : null;
    const cloudlyRounds: IRound[] = [];
    const etcdRounds: IRound[] = [];
    for (let round = 0; round < rounds; round++) {
      cloudlyRounds.push(await runRound(pid, (indexArg) => rotate(clusters[indexArg]), round === 0));
      if (etcd) {
        etcdRounds.push(await runRound(etcd.child.pid!, etcdSwap, false));
      }
    }
    await etcd?.stop();
    const median = (roundsArg: IRound[], fieldArg: (roundArg: IRound) => number): number => percentile(roundsArg.map(fieldArg), 0.5);

    const withoutIdle = (cpuMsArg: number, writesArg: number, secondsArg: number): string =>
      `${Math.max(0, cpuMsArg - (idleCpuMsPerSecond * secondsArg) / writesArg).toFixed(2)} ms`;
    say(`Server CPU while idle: ${idleCpuMsPerSecond.toFixed(1)} ms per second. ${rounds} rounds${etcd ? ', alternating with etcd\'s' : ''}; the figures are their medians.`);
    say('');
    const rows = (nameArg: string, roundsArg: IRound[], idleArg: boolean): string[] => {
      const latencies = roundsArg.flatMap((roundArg) => roundArg.latencies);
      const sequentialCpu = median(roundsArg, (roundArg) => roundArg.sequentialCpuMs);
      const parallelCpu = median(roundsArg, (roundArg) => roundArg.parallelCpuMs);
      return [
        `| ${nameArg}, one at a time | ${sequentialWrites} | ${sequentialCpu.toFixed(2)} ms | ${idleArg ? withoutIdle(sequentialCpu, sequentialWrites, median(roundsArg, (roundArg) => roundArg.sequentialSeconds)) : '—'} | ${median(roundsArg, (roundArg) => roundArg.sequentialOps).toFixed(0)} | ${percentile(latencies, 0.5).toFixed(1)} / ${percentile(latencies, 0.99).toFixed(1)} ms |`,
        `| ${nameArg}, ${writers} writers at once | ${parallelWrites} | ${parallelCpu.toFixed(2)} ms | ${idleArg ? withoutIdle(parallelCpu, parallelWrites, median(roundsArg, (roundArg) => roundArg.parallelSeconds)) : '—'} | ${median(roundsArg, (roundArg) => roundArg.parallelOps).toFixed(0)} | — |`,
      ];
    };
    say('| durable compare-and-swap | writes a round | server CPU per write | the same, idle CPU taken off | ops/s (wall) | p50 / p99 (wall) |');
    say('| --- | --- | --- | --- | --- | --- |');
    rows('Cloudly (`rotateClusterRelayToken` on its expected generation)', cloudlyRounds, true).forEach(say);
    if (etcd) {
      rows('etcd (a txn comparing the key\'s mod revision, over its JSON gateway)', etcdRounds, false).forEach(say);
    }
    const eachRound = (roundsArg: IRound[]): string => roundsArg.map((roundArg) => roundArg.sequentialCpuMs.toFixed(2)).join(' / ');
    say('');
    say(`Each round, one at a time, server CPU per write in ms: Cloudly ${eachRound(cloudlyRounds)}${etcd ? `; etcd ${eachRound(etcdRounds)}` : ''} (the first round of a fresh process includes its compiler's warm-up).`);
    say('');
    if (etcd) {
      const ratio = (fieldArg: (roundArg: IRound) => number): number => median(cloudlyRounds, fieldArg) / median(etcdRounds, fieldArg);
      const cpuRatio = ratio((roundArg) => roundArg.sequentialCpuMs);
      const opsRatio = ratio((roundArg) => roundArg.sequentialOps);
      say(`Cloudly/etcd, one at a time: server CPU per write ${cpuRatio.toFixed(2)}× (aim ≤ 2×: ${cpuRatio <= 2 ? 'met' : 'missed'}), ops/s ${opsRatio.toFixed(2)}× (aim ≥ 0.6×: ${opsRatio >= 0.6 ? 'met' : 'missed'}); ${writers} writers at once: CPU per write ${ratio((roundArg) => roundArg.parallelCpuMs).toFixed(2)}×, ops/s ${ratio((roundArg) => roundArg.parallelOps).toFixed(2)}×. Idle RSS before the rounds: Cloudly ${mib(idleRss)} MiB with 34 clusters (aim ≤ 60 MB), etcd ${mib(etcdIdleRss!)} MiB with 34 keys.`);
    } else {
      say(`No \`etcd\` on PATH: Cloudly's figures alone (aims: ≤ 1.5 ms of server CPU per write one at a time; idle RSS ≤ 60 MB: ${mib(idleRss)} MiB with 34 clusters before the rounds).`);
    }
    say('');

    // Memory under writes: `updates` more writes over the 34 clusters, 8 writers each on its own clusters.
    await sleep(settleMs);
    const liveBefore = await liveMemory();
    const memoryBefore = memoryOf(pid);
    const writesBefore = sequentialWrites + parallelWrites + clusterCount;
    let done = 0;
    const checkpoints: string[] = [];
    const checkpointEvery = Math.max(1, Math.floor(updates / 3));
    await Promise.all(Array.from({ length: 8 }, async (_, writerArg) => {
      const own = clusters.filter((_cluster, index) => index % 8 === writerArg);
      for (let round = 0; done < updates; round++) {
        const counted = ++done;
        await rotate(own[round % own.length]);
        if (counted % checkpointEvery === 0) {
          checkpoints.push(`${counted}: ${mib(memoryOf(pid).rss)} MiB`);
        }
      }
    }));
    await markPhase('memory');
    await sleep(settleMs);
    const memoryAfter = memoryOf(pid);
    const growth = memoryAfter.rss - memoryBefore.rss;
    const liveAfter = await liveMemory();
    say(`| memory under writes | RSS before (just after full collections) | RSS after ${updates} writes, settled ${settleMs / 1000} s | growth | peak RSS |`);
    say('| --- | --- | --- | --- | --- |');
    say(`| ${clusterCount} clusters | ${mib(memoryBefore.rss)} MiB | ${mib(memoryAfter.rss)} MiB | ${mib(growth)} MiB (aim ≤ 20 MiB for 30,000) | ${mib(memoryAfter.peak)} MiB |`);
    say('');
    say(`RSS along the way: ${checkpoints.join(', ')}.`);
    say(`Audit events kept in memory by the embedded database at the end: ${writesBefore + updates} (one per write, kept for CLOUDLY_AUDIT_RETENTION_DAYS); the growth includes them.`);
    const liveGrowth = liveAfter.heapUsed + liveAfter.external - liveBefore.heapUsed - liveBefore.external;
    say(`Live memory after full collections (V8 heap + memory outside it): ${mib(liveBefore.heapUsed + liveBefore.external)} → ${mib(liveAfter.heapUsed + liveAfter.external)} MiB, ${mib(liveGrowth)} MiB more, ${(liveGrowth / updates / 1024).toFixed(2)} KiB per write; each write keeps one audit event (about 1.5 KiB of live heap in a heap snapshot, bench/results/write-profile.md). The rest of the RSS growth, ${mib(growth - liveGrowth)} MiB, is memory V8 and the allocator hold beyond the live memory; right after those full collections the RSS was ${mib(liveAfter.rss)} MiB (${mib(liveAfter.rss - memoryBefore.rss)} MiB above the start).`);
  } finally {
    admin.close();
    server.child.kill('SIGTERM');
    await new Promise((resolve) => server.child.once('exit', resolve));
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
  await createsPhase();
  await reportResults('write.md', lines);
};

/** RSS idle and `afterCreatesMs` after `creates` creates, in a fresh Cloudly and a fresh etcd. */
const createsPhase = async (): Promise<void> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-creates-'));
  const measured: Array<{ name: string; idle: number; after: number }> = [];
  try {
    const server = await startCloudlyProcess(cloudlyProcessEnv(dataDir, { CLOUDLY_LOG_LEVEL: 'info', CLOUDLY_SOCKET_REQUESTS_PER_SECOND: '100000' }));
    const admin = new CloudlyAdminClient(server.baseUrl);
    try {
      await admin.login('admin', 'process-admin-password');
      await admin.connectSocket();
      await sleep(settleMs);
      const idle = memoryOf(server.child.pid!).rss;
      await inParallel(creates, 8, (indexArg) => admin.call('createCluster', { name: `create-bench-${indexArg}` }));
      await sleep(afterCreatesMs);
      measured.push({ name: 'Cloudly (`createCluster`)', idle, after: memoryOf(server.child.pid!).rss });
    } finally {
      admin.close();
      server.child.kill('SIGTERM');
      await new Promise((resolve) => server.child.once('exit', resolve));
    }
    const etcdBinary = findEtcd();
    if (etcdBinary) {
      const etcd = await startEtcd(etcdBinary, path.join(dataDir, 'etcd'));
      try {
        await sleep(settleMs);
        const idle = memoryOf(etcd.child.pid!).rss;
        await inParallel(creates, 8, (indexArg) => etcd.put(`/bench/create-${indexArg}`, `value-${indexArg}`));
        await sleep(afterCreatesMs);
        measured.push({ name: 'etcd (a put of a new key)', idle, after: memoryOf(etcd.child.pid!).rss });
      } finally {
        await etcd.stop();
      }
    }
  } finally {
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
  say('');
  say(`| ${creates} creates, 8 writers, fresh processes | RSS idle | RSS ${afterCreatesMs / 1000} s after the last create | growth |`);
  say('| --- | --- | --- | --- |');
  for (const row of measured) {
    say(`| ${row.name} | ${mib(row.idle)} MiB | ${mib(row.after)} MiB | ${mib(row.after - row.idle)} MiB |`);
  }
  if (measured.length === 2) {
    const ratio = measured[0].after / measured[1].after;
    say('');
    say(`Cloudly/etcd after the creates: ${ratio.toFixed(1)}× (aim ≤ 2×: ${ratio <= 2 ? 'met' : 'missed'}).`);
  }
};

await main();
