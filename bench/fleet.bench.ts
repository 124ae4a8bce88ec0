/**
 * Fleet scale (docs/multi-instance.md, "Fleet scale"): relays reconnecting in a storm, against the
 * aims of issue 36. Writes bench/results/fleet.md.
 *
 *   node --import tsx bench/fleet.bench.ts [relays]            three instances (default 10000)
 *   node --import tsx bench/fleet.bench.ts --one [relays…]     one instance, embedded database:
 *                                                              where a storm's seconds go, per size
 *   npm run bench -- --smoke fleet                             tiny sizes, seconds
 *
 * The relays are the project's relay client in a child process of their own
 * (bench/helpers/fleetrelays.ts), all from 127.0.0.1 (one address, the worst case for per-address
 * limits), all starting at the same moment, reconnecting with the client's full jitter.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { inParallel } from './helpers/benchcloudly.js';
import { counterDelta, FleetProcess, freePort, kernelTcpCounters, percentile, sleep } from './helpers/fleet.js';
import { cpuSecondsOf, memoryOf } from './helpers/processstats.js';
import { reportResults, sized, smoke } from './helpers/smoke.js';
import { cloudlyProcessEnv, startCloudlyProcess, type ICloudlyProcess } from '../test/helpers/process.js';
import { multiInstanceAdminPassword, startDevDatabase, type IDevDatabaseProcess } from '../test/helpers/multiinstance.js';

const args = process.argv.slice(2);
const oneInstance = args.includes('--one');
const sizes = args.filter((arg) => /^\d+$/.test(arg)).map(Number);

const lines: string[] = [];
const say = (lineArg: string): void => {
  console.log(lineArg);
  lines.push(lineArg);
};
const load = (): string => os.loadavg().map((value) => value.toFixed(1)).join(' ');

/** The instance settings every bench instance shares; `extraArg` adds the ones a run compares. */
const instanceEnv = (extraArg: Record<string, string>): Record<string, string> => ({
  // The default log level (info: a line per relay socket opened and closed), as installed.
  CLOUDLY_LOG_LEVEL: 'info',
  CLOUDLY_SOCKET_REQUESTS_PER_SECOND: '1000000',
  ...extraArg,
});

const adminSocket = async (urlArg: string): Promise<CloudlyAdminClient> => {
  const client = new CloudlyAdminClient(urlArg, { liveness: false });
  await client.login('admin', multiInstanceAdminPassword);
  await client.connectSocket();
  return client;
};

/** Creates `countArg` clusters (16 calls in flight) and answers their relay tokens. */
const seedClusters = async (adminArg: CloudlyAdminClient, countArg: number, prefixArg: string): Promise<string[]> => {
  const tokens: string[] = new Array(countArg);
  await inParallel(countArg, 16, async (indexArg) => {
    const { relayToken } = await adminArg.call('createCluster', { name: `${prefixArg}-${indexArg}` });
    tokens[indexArg] = relayToken;
  });
  return tokens;
};

/** Admin reads (`getClusters`) and mutations (`updateCluster`-like: a label change) timed while `stopArg` is false. */
const adminLoad = (adminArg: CloudlyAdminClient, stopArg: () => boolean): Promise<{ reads: number[]; writes: number[] }> => (async () => {
  const reads: number[] = [];
  const writes: number[] = [];
  let round = 0;
  while (!stopArg()) {
    const started = performance.now();
    await adminArg.call('getClusters', { limit: 3 });
    reads.push(performance.now() - started);
    if (round++ % 4 === 0) {
      const written = performance.now();
      // A mutation that commits (a new cluster) and so goes through the store's compare-and-swap path.
      await adminArg.call('createCluster', { name: `storm-probe-${round}-${Math.floor(Math.random() * 1e9)}` });
      writes.push(performance.now() - written);
    }
    await sleep(20);
  }
  return { reads, writes };
})();

interface IStormFigure {
  ms: number;
  reached: boolean;
  registered: number;
  failures: Record<string, number>;
  attemptsMax: number;
  attemptsP99: number;
  waitedMs: number;
  kernel: string;
  serverCpuS: number;
}

/** Waits for every relay to be registered; answers what happened on the way. */
const measureStorm = async (fleetArg: FleetProcess, relaysArg: number, serverPidsArg: () => number[], boundMsArg: number): Promise<IStormFigure> => {
  const kernelBefore = kernelTcpCounters();
  const cpuBefore = serverPidsArg().reduce((sum, pid) => sum + cpuSecondsOf(pid), 0);
  const done = await fleetArg.waitFor((statsArg) => statsArg.registered === relaysArg, boundMsArg);
  const cpuAfter = serverPidsArg().reduce((sum, pid) => sum + cpuSecondsOf(pid), 0);
  const stats = await fleetArg.stats(true);
  return {
    ms: done.ms,
    reached: done.reached,
    registered: done.stats.registered,
    failures: stats.failures,
    attemptsMax: stats.attemptsMax,
    attemptsP99: stats.attemptsP99,
    waitedMs: stats.waitedMs,
    kernel: counterDelta(kernelBefore, kernelTcpCounters()),
    serverCpuS: cpuAfter - cpuBefore,
  };
};

const describeStorm = (figureArg: IStormFigure, relaysArg: number): string => {
  const failures = Object.entries(figureArg.failures).map(([kind, count]) => `${kind} ${count}`).join(', ') || 'none';
  return `${figureArg.reached ? 'all' : `only ${figureArg.registered} of`} ${relaysArg} registered in ${(figureArg.ms / 1000).toFixed(1)} s; `
    + `server CPU ${figureArg.serverCpuS.toFixed(1)} s (${((figureArg.serverCpuS * 1000) / figureArg.ms * 100).toFixed(0)}% of a core); `
    + `failed attempts: ${failures}; attempts per relay p99 ${figureArg.attemptsP99} max ${figureArg.attemptsMax}; `
    + `relays' backoff waits summed ${(figureArg.waitedMs / 1000).toFixed(0)} s; kernel: ${figureArg.kernel}`;
};

/** One instance, embedded database: a cold start of N relays, then a restart storm. */
const oneInstanceStorm = async (relaysArg: number, envArg: Record<string, string>, labelArg: string): Promise<void> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-fleet-one-'));
  const port = await freePort();
  const env = cloudlyProcessEnv(dataDir, { CLOUDLY_PORT: String(port), ...instanceEnv(envArg) });
  let server: ICloudlyProcess | null = await startCloudlyProcess(env);
  const fleet = new FleetProcess();
  try {
    const admin = await adminSocket(server.baseUrl);
    const tokens = await seedClusters(admin, relaysArg, 'one');
    admin.close();
    say(`- ${labelArg}, ${relaysArg} relays (load ${load()}):`);
    fleet.start([server.baseUrl], tokens);
    const cold = await measureStorm(fleet, relaysArg, () => [server!.child.pid!], sized(240_000, 30_000));
    say(`  - cold start: ${describeStorm(cold, relaysArg)}`);
    const idleRss = memoryOf(server.child.pid!).rss;
    server.child.kill('SIGTERM');
    await new Promise((resolve) => server!.child.once('exit', resolve));
    server = await startCloudlyProcess(env);
    const restart = await measureStorm(fleet, relaysArg, () => [server!.child.pid!], sized(240_000, 30_000));
    const memory = memoryOf(server.child.pid!);
    say(`  - restart: ${describeStorm(restart, relaysArg)}; RSS with all connected ${(idleRss / 2 ** 20).toFixed(0)} MiB before the restart, peak ${(memory.peak / 2 ** 20).toFixed(0)} MiB after`);
  } finally {
    await fleet.stop();
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await new Promise((resolve) => server!.child.once('exit', resolve));
    }
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
};

const main = async (): Promise<void> => {
  say('# Fleet benchmark');
  say('');
  say(`\`node --import tsx bench/fleet.bench.ts ${args.join(' ')}\` on ${os.cpus().length} cores, ${new Date().toISOString()}.`);
  say('');
  if (oneInstance) {
    const compare = process.env.FLEET_COMPARE_ENV ? JSON.parse(process.env.FLEET_COMPARE_ENV) as Record<string, string> : null;
    for (const size of sizes.length > 0 ? sizes : [sized(1000, 20)]) {
      await oneInstanceStorm(size, {}, 'defaults');
      if (compare) {
        await oneInstanceStorm(size, compare, JSON.stringify(compare));
      }
    }
  }
  await reportResults(oneInstance ? 'fleet-one.md' : 'fleet.md', lines);
};

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
