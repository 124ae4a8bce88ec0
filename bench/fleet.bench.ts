/**
 * Fleet scale (docs/multi-instance.md, "Fleet scale"): relays reconnecting in a storm, against the
 * aims of issue 36. Writes bench/results/fleet.md.
 *
 *   node --import tsx bench/fleet.bench.ts [relays]            three instances (default 10000)
 *   node --import tsx bench/fleet.bench.ts --one [relays…]     one instance, embedded database:
 *                                                              where a storm's seconds go, per size
 *   node --import tsx bench/fleet.bench.ts --idle [relays…]    one instance in this process: an idle fleet's
 *                                                              database commands per relay per minute, and
 *                                                              those of one resync, per size (default 100 1000);
 *                                                              --no-relays: the clusters without relays
 *   npm run bench -- --smoke fleet                             tiny sizes, seconds
 *   FLEET_CPU_PROFILE_DIR=dir …                                the instances and the database write CPU profiles there,
 *                                                              one per phase (bench/helpers/profilesummary.ts sums them)
 *   --source                                                   the instances start as npm start starts them, not from the test bundle
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
import { CloudlyTransportError } from '../ts/client/transport.js';
import { inParallel, startBenchCloudly } from './helpers/benchcloudly.js';
import { buildTestServer, testServerEnvName } from '../scripts/testserver.js';
import type { IFleetStats } from './helpers/fleetrelays.js';
import { counterDelta, FleetProcess, kernelTcpCounters, percentile, sleep } from './helpers/fleet.js';
import { cpuSecondsOf, memoryOf } from './helpers/processstats.js';
import { reportResults, sized, smoke } from './helpers/smoke.js';
import { cloudlyProcessEnv, startCloudlyProcess, type ICloudlyProcess } from '../test/helpers/process.js';
import { databaseCommandsOf } from '../test/helpers/cloudly.js';
import { multiInstanceAdminPassword, startDevDatabase, type IDevDatabaseProcess } from '../test/helpers/multiinstance.js';

const args = process.argv.slice(2);
const oneInstance = args.includes('--one');
const idleMode = args.includes('--idle');
/** With `--idle`: clusters only, no relay connected (a size whose storm one instance in this process cannot take in minutes). */
const withoutRelays = args.includes('--no-relays');
const sizes = args.filter((arg) => /^\d+$/.test(arg)).map(Number);

const lines: string[] = [];
/** Where the hand-kept part of bench/results/fleet.md begins. */
const keptMarker = '## Where a storm\'s seconds go';
const say = (lineArg: string): void => {
  // Progress on stderr; the whole list is printed (and kept) by reportResults at the end.
  console.error(lineArg);
  lines.push(lineArg);
};
const load = (): string => os.loadavg().map((value) => value.toFixed(1)).join(' ');

/**
 * Settings passed on to the instances when set, so one tree can be measured both ways: the storm's
 * work bounded or not (CLOUDLY_RELAY_WORK_CONCURRENCY=0), the per-address limits raised as for
 * a fleet that, unlike the bench's, does not come from one address, and glibc's malloc arenas
 * (MALLOC_ARENA_MAX) for the RSS per relay.
 */
const passedSettings = ['CLOUDLY_RELAY_WORK_CONCURRENCY', 'CLOUDLY_PENDING_CONNECTIONS_PER_ADDRESS', 'CLOUDLY_SOCKET_UPGRADES_PER_ADDRESS', 'MALLOC_ARENA_MAX'];
const passedSettingsText = (): string => passedSettings.filter((name) => process.env[name]).map((name) => `${name}=${process.env[name]} `).join('');

/**
 * A cluster whose relay has been gone this long reads dark (CLOUDLY_RELAY_LIVENESS_GRACE_MS: the
 * default, 30 s, in a full run). A cold storm starts once every seeded cluster reads dark, as after
 * an outage: each relay's arrival then brings its cluster back, at every size alike. Started at once
 * after seeding, a storm found the clusters seeded more than the grace before their relay came dark
 * and the rest not, so its work per relay grew with the time seeding took (at 10,000 relays, 0.6
 * liveness writes per relay and their audit events, none at 1,000 or 5,000).
 */
const livenessGraceMs = sized(30_000, 1_000);
/** Seeding done to every cluster dark: the grace, then the liveness poll (1 s) and its writes. */
const allDarkAfterMs = livenessGraceMs + sized(5_000, 1_500);

/** The instance settings every bench instance shares; `extraArg` adds the ones a run compares. */
const instanceEnv = (extraArg: Record<string, string>): Record<string, string> => ({
  // The default log level (info: a line per relay socket opened and closed), as installed.
  CLOUDLY_LOG_LEVEL: 'info',
  CLOUDLY_RELAY_LIVENESS_GRACE_MS: String(livenessGraceMs),
  CLOUDLY_SOCKET_REQUESTS_PER_SECOND: '1000000',
  // Passed on when set, so one tree can be measured with the storm's work bounded and without (0).
  ...Object.fromEntries(passedSettings.filter((name) => process.env[name]).map((name) => [name, process.env[name]!])),
  ...extraArg,
});

/** A connection the storm reset (ECONNRESET), as fetch reports it: the cause of its "fetch failed". */
const wasReset = (errorArg: unknown): boolean => (errorArg as { cause?: { code?: unknown } } | null)?.cause?.code === 'ECONNRESET';

/**
 * Runs `stepArg` again while it is refused 503 or its connection is reset (the bench's administrator
 * and scrapes come from 127.0.0.1 like every relay, so a storm can fill that address's pending
 * connections), for at most a minute, following the advised wait (1 s after a reset).
 */
const retryingRefusals = async <T>(stepArg: () => Promise<T>): Promise<T> => {
  const until = performance.now() + 60_000;
  for (;;) {
    try {
      return await stepArg();
    } catch (error) {
      const refused = error instanceof CloudlyTransportError && error.status === 503;
      if ((!refused && !wasReset(error)) || performance.now() > until) {
        throw error;
      }
      await sleep(refused ? (error as CloudlyTransportError).retryAfterMs ?? 1000 : 1000);
    }
  }
};

const adminSocket = async (urlArg: string): Promise<CloudlyAdminClient> => {
  const client = new CloudlyAdminClient(urlArg, { liveness: false });
  await retryingRefusals(() => client.login('admin', multiInstanceAdminPassword));
  await retryingRefusals(() => client.connectSocket());
  return client;
};

/** An instance's /metrics text, asked again while it is refused 503. */
const metricsOf = (instanceArg: IInstance): Promise<string> => retryingRefusals(async () => {
  const response = await fetch(`http://127.0.0.1:${instanceArg.port}/metrics`);
  if (response.status === 503) {
    throw new CloudlyTransportError(503, await response.text(), Number(response.headers.get('retry-after') ?? 1) * 1000);
  }
  return response.text();
});

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
  /** CPU seconds over the storm of the other processes named (the shared database, the relays' process). */
  otherCpuS: Record<string, number>;
}

/**
 * Waits for every relay to be registered (and for `alsoArg`, when given); answers what happened on
 * the way. The time counts from `sinceArg` (a moment before the call: the kill, the listening
 * again) when given, from the call otherwise.
 */
const measureStorm = async (
  fleetArg: FleetProcess,
  relaysArg: number,
  serverPidsArg: () => number[],
  boundMsArg: number,
  optionsArg: { sinceArg?: number; alsoArg?: (statsArg: IFleetStats) => boolean; otherPids?: Record<string, number> } = {},
): Promise<IStormFigure> => {
  const kernelBefore = kernelTcpCounters();
  const cpuBefore = serverPidsArg().reduce((sum, pid) => sum + cpuSecondsOf(pid), 0);
  const others = Object.entries(optionsArg.otherPids ?? {});
  const othersBefore = others.map(([, pid]) => cpuSecondsOf(pid));
  const since = optionsArg.sinceArg ?? performance.now();
  const done = await fleetArg.waitFor((statsArg) => statsArg.registered === relaysArg && (optionsArg.alsoArg?.(statsArg) ?? true), boundMsArg);
  const cpuAfter = serverPidsArg().reduce((sum, pid) => sum + cpuSecondsOf(pid), 0);
  const stats = await fleetArg.stats(true);
  return {
    ms: done.reached ? performance.now() - since : done.ms,
    reached: done.reached,
    registered: done.stats.registered,
    failures: stats.failures,
    attemptsMax: stats.attemptsMax,
    attemptsP99: stats.attemptsP99,
    waitedMs: stats.waitedMs,
    kernel: counterDelta(kernelBefore, kernelTcpCounters()),
    serverCpuS: cpuAfter - cpuBefore,
    otherCpuS: Object.fromEntries(others.map(([name, pid], index) => [name, cpuSecondsOf(pid) - othersBefore[index]])),
  };
};

const describeStorm = (figureArg: IStormFigure, relaysArg: number): string => {
  const failures = Object.entries(figureArg.failures).map(([kind, count]) => `${kind} ${count}`).join(', ') || 'none';
  // The CPU a storm cost every process together, per relay of the fleet: what sizes the fleet a
  // machine's cores can take in a storm of a given length (all processes share them here).
  const allCpuS = figureArg.serverCpuS + Object.values(figureArg.otherCpuS).reduce((sum, cpuS) => sum + cpuS, 0);
  return `${figureArg.reached ? 'all' : `only ${figureArg.registered} of`} ${relaysArg} registered in ${(figureArg.ms / 1000).toFixed(1)} s; `
    + `CPU of every process ${(allCpuS * 1000 / relaysArg).toFixed(1)} ms per relay; `
    + `server CPU ${figureArg.serverCpuS.toFixed(1)} s (${((figureArg.serverCpuS * 1000) / figureArg.ms * 100).toFixed(0)}% of a core); `
    + Object.entries(figureArg.otherCpuS).map(([name, cpuS]) => `${name} CPU ${cpuS.toFixed(1)} s (${((cpuS * 1000) / figureArg.ms * 100).toFixed(0)}%); `).join('')
    + `failed attempts: ${failures}; attempts per relay p99 ${figureArg.attemptsP99} max ${figureArg.attemptsMax}; `
    + `relays' backoff waits summed ${(figureArg.waitedMs / 1000).toFixed(0)} s; kernel: ${figureArg.kernel}`;
};

/** Whether a server's start failed because its port was taken. */
const portTaken = (errorArg: unknown): boolean => /EADDRINUSE/.test(String((errorArg as { output?: unknown } | null)?.output ?? ''));

/**
 * Starts a server on `portArg`; 0 lets the kernel pick one, read back from its listening line (a
 * port probed free beforehand could be taken by another process before the server binds it). A
 * restart must come back on its port, the only address its relays know: a port another process's
 * socket holds for a moment is asked for again, at most ten times half a second apart.
 */
const startOnPort = async (envOfArg: (portArg: number) => NodeJS.ProcessEnv, portArg: number): Promise<{ process: ICloudlyProcess; port: number }> => {
  for (let attempt = 1; ; attempt++) {
    try {
      const started = await startCloudlyProcess(envOfArg(portArg));
      return { process: started, port: Number(new URL(started.baseUrl).port) };
    } catch (error) {
      if (portArg === 0 || !portTaken(error) || attempt >= 10) {
        throw error;
      }
      await sleep(500);
    }
  }
};

/** What one size of the one-instance storms cost, for the table across sizes. */
interface IOneInstanceFigures {
  relays: number;
  label: string;
  cold: IStormFigure;
  restart: IStormFigure;
  /** Database commands the server counted over each storm. */
  coldCommands: number;
  restartCommands: number;
  idleRssPerRelay: number;
}

const oneInstanceFigures: IOneInstanceFigures[] = [];
/** Cloudly's CPU per steady report, net of the window without reports, by fleet size. */
const steadyFigures = new Map<number, number>();

/** Cloudly's CPU and database commands per relay at each size, and their ratio to the smallest (linear: ≤ 1.2×). */
const sayScaling = (): void => {
  const base = oneInstanceFigures[0];
  if (!base || oneInstanceFigures.length < 2) {
    return;
  }
  const perRelay = (valueArg: number, relaysArg: number) => valueArg / relaysArg;
  const ratio = (valueArg: number, baseArg: number) => `${(valueArg / baseArg).toFixed(2)}×`;
  say('');
  say(`Cost per relay across sizes, Cloudly's process only (the relays' process apart), and its ratio to ${base.relays} relays; linear means ≤ 1.2×. Commands: \`cloudly_database_commands_total\` (the driver's commands and the writes handed to the embedded database in the process; reads in the process are no commands):`);
  say('');
  say('| relays | setting | cold: CPU per relay | ratio | commands per relay | ratio | restart: CPU per relay | ratio | commands per relay | ratio | RSS per idle relay | CPU per steady report | all registered: cold / restart |');
  say('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const figures of oneInstanceFigures) {
    const same = oneInstanceFigures.find((candidateArg) => candidateArg.label === figures.label) ?? base;
    const coldCpu = perRelay(figures.cold.serverCpuS * 1000, figures.relays);
    const restartCpu = perRelay(figures.restart.serverCpuS * 1000, figures.relays);
    const coldCommands = perRelay(figures.coldCommands, figures.relays);
    const restartCommands = perRelay(figures.restartCommands, figures.relays);
    say(`| ${figures.relays} | ${figures.label} | ${coldCpu.toFixed(2)} ms | ${ratio(coldCpu, perRelay(same.cold.serverCpuS * 1000, same.relays))} `
      + `| ${coldCommands.toFixed(1)} | ${ratio(coldCommands, perRelay(same.coldCommands, same.relays))} `
      + `| ${restartCpu.toFixed(2)} ms | ${ratio(restartCpu, perRelay(same.restart.serverCpuS * 1000, same.relays))} `
      + `| ${restartCommands.toFixed(1)} | ${ratio(restartCommands, perRelay(same.restartCommands, same.relays))} `
      + `| ${(figures.idleRssPerRelay / 1024).toFixed(1)} KB | ${(steadyFigures.get(figures.relays) ?? NaN).toFixed(3)} ms | ${(figures.cold.ms / 1000).toFixed(1)} s / ${(figures.restart.ms / 1000).toFixed(1)} s${figures.cold.reached && figures.restart.reached ? '' : ' (not all)'} |`);
  }
};

/** One instance, embedded database: a cold start of N relays, then a restart storm. */
const oneInstanceStorm = async (relaysArg: number, envArg: Record<string, string>, labelArg: string): Promise<void> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-fleet-one-'));
  // Every relay comes from 127.0.0.1 here: an address may hold half the connections by default
  // (9,872 under this machine's 20,000 open files), which a real fleet's many addresses never meet.
  const envOf = (portArg: number): NodeJS.ProcessEnv => cloudlyProcessEnv(dataDir, {
    CLOUDLY_PORT: String(portArg),
    CLOUDLY_CONNECTIONS_PER_ADDRESS: String(relaysArg + 1_000),
    ...instanceEnv(envArg),
    ...profileEnv('one'),
  });
  const first = await startOnPort(envOf, 0);
  let server: ICloudlyProcess | null = first.process;
  const fleet = new FleetProcess();
  try {
    const admin = await adminSocket(server.baseUrl);
    const tokens = await seedClusters(admin, relaysArg, 'one');
    admin.close();
    await sleep(allDarkAfterMs);
    say(`- ${labelArg}, ${relaysArg} relays (load ${load()}; the storm starts ${ms(allDarkAfterMs)} after seeding, every cluster dark):`);
    const rssBefore = memoryOf(server.child.pid!).rss;
    await markPhase('before-cold', [server.child.pid!]);
    const commandsBeforeCold = await databaseCommandsOf(server.baseUrl);
    fleet.start([server.baseUrl], tokens);
    const cold = await measureStorm(fleet, relaysArg, () => [server!.child.pid!], sized(240_000, 30_000));
    const coldCommands = await databaseCommandsOf(server.baseUrl) - commandsBeforeCold;
    await markPhase('cold', [server.child.pid!]);
    say(`  - cold start: ${describeStorm(cold, relaysArg)}`);
    // The storm's garbage settles before the connected figure is read.
    await sleep(sized(5000, 200));
    const idleRss = memoryOf(server.child.pid!).rss;
    say(`  - memory: RSS ${(rssBefore / 2 ** 20).toFixed(0)} MiB before the relays, ${(idleRss / 2 ** 20).toFixed(0)} MiB with all connected and idle: ${((idleRss - rssBefore) / relaysArg / 1024).toFixed(1)} KB per idle relay`);
    // A steady fleet: every relay reports its (unchanged) observed state every 30 s. What a report
    // costs is judged net of the same window without reports, in Cloudly's CPU.
    const windowMs = sized(30_000, 1_000);
    const pid = server.child.pid!;
    await markPhase('settled', [pid]);
    let cpuAt = cpuSecondsOf(pid);
    await sleep(windowMs);
    const quietCpuS = cpuSecondsOf(pid) - cpuAt;
    await markPhase('quiet', [pid]);
    fleet.report(30_000);
    // A whole period and then some: every relay's first report (stored whole) is behind the window,
    // whose reports are then repeats, answered from what the instance stored last. In a longer
    // steady state one in ten is stored whole again (CLOUDLY_OBSERVED_REFRESH_MS, 300 s);
    // bench/report.bench.ts measures both kinds.
    await sleep(sized(35_000, 1_500));
    await markPhase('reports-start', [pid]);
    const reportsBefore = (await fleet.stats(false)).reports;
    cpuAt = cpuSecondsOf(pid);
    await sleep(windowMs);
    const reportingCpuS = cpuSecondsOf(pid) - cpuAt;
    const reports = (await fleet.stats(false)).reports - reportsBefore;
    await markPhase('steady', [pid]);
    fleet.report(0);
    const perReportMs = reports > 0 ? ((reportingCpuS - quietCpuS) * 1000) / reports : NaN;
    steadyFigures.set(relaysArg, perReportMs);
    say(`  - steady state (each relay reports every 30 s, ${ms(windowMs)} windows, after every relay reported once): ${reports} reports; Cloudly's CPU ${(reportingCpuS * 1000 / (windowMs / 1000)).toFixed(0)} ms a second with them, ${(quietCpuS * 1000 / (windowMs / 1000)).toFixed(0)} ms a second without: ${perReportMs.toFixed(3)} ms per report net (aim ≤ 0.2 ms)`);
    server.child.kill('SIGTERM');
    await new Promise((resolve) => server!.child.once('exit', resolve));
    server = (await startOnPort(envOf, first.port)).process;
    await markPhase('restart-start', [server.child.pid!]);
    const commandsBeforeRestart = await databaseCommandsOf(server.baseUrl);
    const restart = await measureStorm(fleet, relaysArg, () => [server!.child.pid!], sized(240_000, 30_000));
    const restartCommands = await databaseCommandsOf(server.baseUrl) - commandsBeforeRestart;
    await markPhase('restart', [server.child.pid!]);
    oneInstanceFigures.push({ relays: relaysArg, label: labelArg, cold, restart, coldCommands, restartCommands, idleRssPerRelay: (idleRss - rssBefore) / relaysArg });
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

/** What one resync of an idle fleet costs, by this process's count of the database commands it sent. */
interface IIdleFigure {
  relays: number;
  /** Commands of one resync (an explicit one, its runs awaited), each of three. */
  resyncCommands: number[];
  /** This process's CPU (the instance and its embedded database) over each of those resyncs, ms. */
  resyncCpuMs: number[];
  /** Commands per minute with no resync (the lease heartbeats, the liveness poll, timers), from `windowMs`. */
  quietPerMinute: number;
  windowMs: number;
  /** The resync's period the instance runs with in production (CLOUDLY_RECONCILE_RESYNC_MS's default). */
  resyncMs: number;
  registeredMs: number;
}

/**
 * One instance in this process (embedded database), `relaysArg` clusters each with a relay of the
 * bench's relay process connected and idle (no reports). The periodic resync is off (an hour) so
 * that the window without it and each resync asked for are counted apart: an idle fleet's
 * commands per minute are the window's rate plus one resync per minute (the default period).
 */
const idleBackground = async (relaysArg: number): Promise<IIdleFigure> => {
  const resyncMs = 60_000;
  const bench = await startBenchCloudly('fleet-idle', { reconcileResyncMs: 3_600_000 });
  const { cloudly, admin } = bench;
  const fleet = new FleetProcess();
  const commands = () => cloudly.database.commandsStarted;
  const idle = async (): Promise<void> => {
    // A resync settles once it has queued its keys (main's queued them a moment after it was asked).
    await sleep(200);
    while (cloudly.reconciler.busyKeys > 0) {
      await sleep(20);
    }
  };
  try {
    const benchStarted = performance.now();
    const tokens = await seedClusters(admin, relaysArg, 'idle');
    const started = performance.now();
    if (withoutRelays) {
      // Every cluster past the liveness grace (30 s from the start): none turns unknown while counted.
      await sleep(Math.max(0, 31_000 - (performance.now() - benchStarted)));
    } else {
      fleet.start([cloudly.baseUrl], tokens);
      const storm = await fleet.waitFor((statsArg) => statsArg.registered === relaysArg, sized(900_000, 30_000));
      if (!storm.reached) {
        throw new Error(`only ${storm.stats.registered} of ${relaysArg} relays registered`);
      }
    }
    const registeredMs = withoutRelays ? NaN : performance.now() - started;
    await idle();
    // The storm moved every cluster's inputs (its lease, registration, liveness): one resync takes them in.
    await cloudly.reconciler.resync('bench-settle');
    await idle();
    const windowMs = sized(30_000, 2_000);
    const quietBefore = commands();
    await sleep(windowMs);
    const quietPerMinute = ((commands() - quietBefore) * 60_000) / windowMs;
    const resyncCommands: number[] = [];
    const resyncCpuMs: number[] = [];
    for (let round = 0; round < 3; round++) {
      const before = commands();
      const cpuBefore = process.cpuUsage();
      await cloudly.reconciler.resync('bench');
      await idle();
      const cpu = process.cpuUsage(cpuBefore);
      resyncCommands.push(commands() - before);
      // The wait's own polling is in it too (a few ms).
      resyncCpuMs.push((cpu.user + cpu.system) / 1000);
    }
    return { relays: relaysArg, resyncCommands, resyncCpuMs, quietPerMinute, windowMs, resyncMs, registeredMs };
  } finally {
    await fleet.stop();
    await bench.stop();
  }
};

const describeIdle = (figureArg: IIdleFigure): string => {
  const resync = [...figureArg.resyncCommands].sort((a, b) => a - b)[1] ?? figureArg.resyncCommands[0];
  const perMinute = figureArg.quietPerMinute + (resync * 60_000) / figureArg.resyncMs;
  return `| ${figureArg.relays} | ${figureArg.resyncCommands.join(' / ')} | ${(resync / figureArg.relays).toFixed(3)} | ${figureArg.resyncCpuMs.map((msArg) => msArg.toFixed(0)).join(' / ')} ms | `
    + `${figureArg.quietPerMinute.toFixed(0)} | ${perMinute.toFixed(0)} | **${(perMinute / figureArg.relays).toFixed(3)}** | ${Number.isNaN(figureArg.registeredMs) ? 'no relays' : `${(figureArg.registeredMs / 1000).toFixed(1)} s`} |`;
};

interface IInstance {
  name: string;
  /** 0 until its first start, which lets the kernel pick it; every restart comes back on it. */
  port: number;
  dataDir: string;
  process: ICloudlyProcess | null;
}

/** The step times a log line of an instance carries (`stepsMs`), those of 50 ms or more. */
const slowSteps = (lineArg: string | undefined): string => {
  const steps = lineArg ? (JSON.parse(lineArg) as { stepsMs?: Record<string, number> }).stepsMs ?? {} : {};
  return Object.entries(steps).filter(([, stepMs]) => stepMs >= 50).map(([step, stepMs]) => `${step} ${stepMs} ms`).join(', ') || 'none';
};

/**
 * Starts an instance; answers how long until it said it listens, and where its start went: the
 * steps of its "cloudly is listening" line, the rest being the process's own start (node, modules).
 */
const startFleetInstance = async (databaseArg: IDevDatabaseProcess, instanceArg: IInstance, envArg: Record<string, string>): Promise<{ ms: number; steps: string }> => {
  const started = performance.now();
  const launched = await startOnPort((portArg) => cloudlyProcessEnv(instanceArg.dataDir, {
    MONGODB_URL: databaseArg.mongoDbUrl,
    CLOUDLY_SECRETS_KEY_FILE: databaseArg.secretsKeyFile,
    CLOUDLY_PORT: String(portArg),
    ...instanceEnv(envArg),
  }), instanceArg.port);
  instanceArg.process = launched.process;
  instanceArg.port = launched.port;
  const line = /^.*"cloudly is listening".*$/m.exec(instanceArg.process.output())?.[0];
  const startedMs = performance.now() - started;
  const stepsTotal = line ? Object.values((JSON.parse(line) as { stepsMs?: Record<string, number> }).stepsMs ?? {}).reduce((sum, stepMs) => sum + stepMs, 0) : 0;
  return { ms: startedMs, steps: `${instanceArg.name}: ${ms(startedMs)}, process start ${ms(startedMs - stepsTotal)}, then ${slowSteps(line)}` };
};

/**
 * Stops an instance (SIGKILL after 15 s if a SIGTERM has not ended it); answers how long it took
 * and, for a graceful stop, the step times of its "cloudly stopped" log line.
 */
const stopFleetInstance = async (instanceArg: IInstance, signalArg: NodeJS.Signals): Promise<{ ms: number; forced: boolean; steps: string }> => {
  const started = performance.now();
  const running = instanceArg.process;
  const child = running?.child;
  instanceArg.process = null;
  let forced = false;
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signalArg);
    const forcing = setTimeout(() => {
      forced = true;
      child.kill('SIGKILL');
    }, 15_000);
    await exited;
    clearTimeout(forcing);
  }
  const stopped = running ? /^.*"cloudly stopped".*$/m.exec(running.output())?.[0] : undefined;
  const relaySockets = stopped ? (JSON.parse(stopped) as { relaySockets?: number }).relaySockets : undefined;
  return {
    ms: performance.now() - started,
    forced,
    steps: stopped ? `${relaySockets ?? '?'} relay sockets; steps of 50 ms or more: ${slowSteps(stopped)}` : 'no "cloudly stopped" line',
  };
};

/**
 * Where an instance's memory is, from its /metrics (prom-client's process and Node metrics): the
 * V8 heap (reserved and used), memory outside it that V8 knows of (`external`: buffers, array
 * buffers) and the resident set, in bytes.
 */
const memorySplit = async (instanceArg: IInstance): Promise<{ heapTotal: number; heapUsed: number; external: number; rss: number }> => {
  const text = await metricsOf(instanceArg);
  const value = (nameArg: string): number => Number(new RegExp(`^${nameArg} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
  return {
    heapTotal: value('cloudly_nodejs_heap_size_total_bytes'),
    heapUsed: value('cloudly_nodejs_heap_size_used_bytes'),
    external: value('cloudly_nodejs_external_memory_bytes'),
    rss: value('cloudly_process_resident_memory_bytes'),
  };
};

/** Database commands an instance has sent so far (`cloudly_database_commands_total`). */
const databaseCommands = async (instanceArg: IInstance): Promise<number> => {
  const text = await metricsOf(instanceArg);
  return Number(/^cloudly_database_commands_total (\d+)/m.exec(text)?.[1] ?? NaN);
};

/**
 * Where an administrator's call waited, from the instance's own /metrics: the time its handler took
 * (`cloudly_call_duration_seconds`, from the request's arrival to its answer: the database's part
 * included) per method, and the event loop's delay p99 since the previous scrape (prom-client
 * resets it on every scrape). What the client saw beyond the handler's time waited before the
 * handler ran: in the event loop or on the connection.
 */
const serverSide = async (instanceArg: IInstance): Promise<{ sums: Record<string, { sum: number; count: number }>; loopLagP99Ms: number }> => {
  const text = await metricsOf(instanceArg);
  const sums: Record<string, { sum: number; count: number }> = {};
  for (const method of ['getClusters', 'createCluster']) {
    sums[method] = {
      sum: Number(new RegExp(`^cloudly_call_duration_seconds_sum\\{method="${method}"\\} (\\S+)`, 'm').exec(text)?.[1] ?? 0),
      count: Number(new RegExp(`^cloudly_call_duration_seconds_count\\{method="${method}"\\} (\\S+)`, 'm').exec(text)?.[1] ?? 0),
    };
  }
  const lag = Number(/^cloudly_nodejs_eventloop_lag_p99_seconds (\S+)/m.exec(text)?.[1] ?? NaN);
  return { sums, loopLagP99Ms: lag * 1000 };
};

const aim = (okArg: boolean): string => (okArg ? 'met' : 'NOT met');
const ms = (valueArg: number): string => `${(valueArg / 1000).toFixed(1)} s`;

/**
 * With FLEET_CPU_PROFILE_DIR set, the three instances and the database process record V8 CPU
 * profiles (bench/helpers/cpuprofile.mjs), cut at each phase's start and end (`markPhase`), so each
 * storm's CPU can be summed apart (bench/helpers/profilesummary.ts).
 */
const profileDir = process.env.FLEET_CPU_PROFILE_DIR ? path.resolve(process.env.FLEET_CPU_PROFILE_DIR) : null;
const profileEnv = (nameArg: string): Record<string, string> => (profileDir
  ? {
    NODE_OPTIONS: `--import ${path.join(import.meta.dirname, 'helpers', 'cpuprofile.mjs')}`,
    CLOUDLY_BENCH_PROFILE_DIR: profileDir,
    CLOUDLY_BENCH_PROFILE_NAME: nameArg,
  }
  : {});

/**
 * Ends the profiled processes' current segment, naming it `labelArg` (a no-op unless profiling).
 * Each process reads the name when it handles the signal; phases are seconds apart.
 */
const markPhase = async (labelArg: string, pidsArg: number[]): Promise<void> => {
  if (!profileDir) {
    return;
  }
  await fsp.writeFile(path.join(profileDir, 'phase'), labelArg);
  for (const pid of pidsArg) {
    process.kill(pid, 'SIGUSR2');
  }
};

/** Three instances over one shared database process, the fleet spread over their three addresses. */
const threeInstances = async (relaysArg: number): Promise<void> => {
  if (profileDir && process.env[testServerEnvName]) {
    // The profiles' line numbers are this bundle's; the next run rebuilds it.
    await fsp.copyFile(path.join(path.dirname(process.env[testServerEnvName]), 'cli.cjs'), path.join(profileDir, 'cli.cjs')).catch(() => undefined);
  }
  const workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-fleet-'));
  const database = await startDevDatabase(path.join(workDir, 'database'), profileEnv('database'));
  // The default lease (15 s) in a full run; a smoke run takes a 3 s one, so the kill phase ends in seconds.
  const leaseTtlMs = sized(15_000, 3_000);
  const env = { CLOUDLY_RELAY_LEASE_TTL_MS: String(leaseTtlMs), CLOUDLY_RELAY_LEASE_HEARTBEAT_MS: String(leaseTtlMs / 3) };
  const instances: IInstance[] = [];
  for (const name of ['a', 'b', 'c']) {
    instances.push({ name, port: 0, dataDir: await fsp.mkdtemp(path.join(workDir, `${name}-`)), process: null });
  }
  const fleet = new FleetProcess();
  /** Database commands sent so far by each instance running now (a killed one's count is gone with it). */
  const liveCommands = async (): Promise<Map<string, number>> => new Map(await Promise.all(instances.filter((instance) => instance.process)
    .map(async (instance) => [instance.name, await databaseCommands(instance)] as const)));
  /** Commands sent between two counts, by the instances alive at both. */
  const commandsBetween = (beforeArg: Map<string, number>, afterArg: Map<string, number>): number => [...afterArg]
    .reduce((sum, [name, value]) => sum + (beforeArg.has(name) ? value - beforeArg.get(name)! : 0), 0);
  const pids = (): number[] => instances.flatMap((instance) => (instance.process ? [instance.process.child.pid!] : []));
  try {
    const firstStarts = await Promise.all(instances.map((instance) => startFleetInstance(database, instance, { ...env, ...profileEnv(`instance-${instance.name}`) })));
    say(`- the three instances started (no relays yet): ${firstStarts.map((start) => start.steps).join('; ')}; load ${load()}`);
    const urls = instances.map((instance) => `http://127.0.0.1:${instance.port}`);
    const seeder = await adminSocket(urls[0]);
    const seedStarted = performance.now();
    const tokens = await seedClusters(seeder, relaysArg, 'fleet');
    seeder.close();
    await sleep(allDarkAfterMs);
    say(`- ${relaysArg} relays over 3 instances (ports ${instances.map((instance) => instance.port).join(', ')}), one shared database process; seeded in ${ms(performance.now() - seedStarted - allDarkAfterMs)}, the storm starts ${ms(allDarkAfterMs)} after, every cluster dark; load ${load()}`);
    const idleRss = pids().reduce((sum, pid) => sum + memoryOf(pid).rss, 0);
    const splitOfAll = async (): Promise<{ heapTotal: number; heapUsed: number; external: number; rss: number }> => (await Promise.all(instances.map(memorySplit)))
      .reduce((sum, split) => ({ heapTotal: sum.heapTotal + split.heapTotal, heapUsed: sum.heapUsed + split.heapUsed, external: sum.external + split.external, rss: sum.rss + split.rss }));
    const idleSplit = await splitOfAll();

    // 1. Cold start, with an administrator reading and writing on B meanwhile.
    // `beforeArg` sets the storm off once the administrator is connected (the kill: B's socket is
    // open before A dies, so the storm is not over by the time the administrator has logged in).
    const during = async (
      phaseArg: string,
      stormArg: () => Promise<IStormFigure>,
      beforeArg?: () => Promise<void>,
    ): Promise<IStormFigure & { readP99: number; writeP99: number }> => {
      const admin = await adminSocket(urls[1]);
      const serverBefore = await serverSide(instances[1]);
      const commandsBefore = await liveCommands();
      let stop = false;
      const loadRun = adminLoad(admin, () => stop);
      await beforeArg?.();
      const figure = await stormArg();
      stop = true;
      const { reads, writes } = await loadRun;
      const serverAfter = await serverSide(instances[1]);
      const commandsAfter = await liveCommands();
      admin.close();
      const readP99 = percentile(reads, 0.99);
      const writeP99 = percentile(writes, 0.99);
      const mean = (samplesArg: number[]): number => samplesArg.reduce((sum, value) => sum + value, 0) / Math.max(1, samplesArg.length);
      const handlerMean = (methodArg: string): number => {
        const [was, is] = [serverBefore.sums[methodArg], serverAfter.sums[methodArg]];
        return is.count > was.count ? ((is.sum - was.sum) / (is.count - was.count)) * 1000 : NaN;
      };
      say(`  - ${phaseArg}: ${describeStorm(figure, relaysArg)}; admin reads p99 ${readP99.toFixed(0)} ms (${reads.length}), mutations p99 ${writeP99.toFixed(0)} ms (${writes.length}); `
        + `on the instance: reads' mean ${mean(reads).toFixed(0)} ms as seen by the client, ${handlerMean('getClusters').toFixed(0)} ms in the handler; `
        + `mutations' ${mean(writes).toFixed(0)} ms and ${handlerMean('createCluster').toFixed(0)} ms; event loop delay p99 ${serverAfter.loopLagP99Ms.toFixed(0)} ms; `
        + `database commands of the instances alive throughout ${commandsBetween(commandsBefore, commandsAfter)} (${(commandsBetween(commandsBefore, commandsAfter) / relaysArg).toFixed(1)} per relay, the administrator's and background work included); load ${load()}`);
      return { ...figure, readP99, writeP99 };
    };
    const profiled = (): number[] => [...pids(), database.child.pid!];
    await markPhase('before-cold', profiled());
    fleet.start(urls, tokens);
    const otherPids = { 'database process': database.child.pid!, "relays' process": fleet.pid };
    const cold = await during('cold start', () => measureStorm(fleet, relaysArg, pids, sized(300_000, 60_000), { otherPids }));
    await markPhase('cold', profiled());
    await sleep(sized(3000, 200));
    const connectedRss = pids().reduce((sum, pid) => sum + memoryOf(pid).rss, 0);
    // Per relay connected now: when the cold start did not reach every relay, per relay that did.
    const connectedRelays = Math.max(1, (await fleet.stats()).registered);
    const perRelayKb = (connectedRss - idleRss) / connectedRelays / 1024;
    const connectedSplit = await splitOfAll();
    const grownKb = (keyArg: keyof typeof idleSplit): string => ((connectedSplit[keyArg] - idleSplit[keyArg]) / connectedRelays / 1024).toFixed(1);
    say(`  - memory: the three instances' RSS ${(idleRss / 2 ** 20).toFixed(0)} MiB before, ${(connectedRss / 2 ** 20).toFixed(0)} MiB with ${connectedRelays === relaysArg ? 'every relay' : `${connectedRelays} of ${relaysArg} relays`} connected: ${perRelayKb.toFixed(1)} KB per idle relay (compression ${process.env.CLOUDLY_WEBSOCKET_COMPRESSION ?? 'off'}${process.env.MALLOC_ARENA_MAX ? `, MALLOC_ARENA_MAX=${process.env.MALLOC_ARENA_MAX}` : ''}); `
      + `of the growth per relay, by the instances' /metrics: V8 heap reserved ${grownKb('heapTotal')} KB (used ${grownKb('heapUsed')} KB), external ${grownKb('external')} KB, RSS ${grownKb('rss')} KB`);

    // 2. Steady state: every relay reports an unchanged observed state every 30 s.
    const reportMs = 30_000;
    // Each window is one reconciler resync period (60 s): the pass over every cluster that the
    // reconciling instance makes once a period falls once into each, not into one of them only.
    const windowMs = sized(60_000, 2_000);
    const totals = async (): Promise<{ commands: number; cpu: number; reports: number }> => ({
      commands: (await Promise.all(instances.map(databaseCommands))).reduce((sum, value) => sum + value, 0),
      cpu: pids().reduce((sum, pid) => sum + cpuSecondsOf(pid), 0),
      reports: (await fleet.stats()).reports,
    });
    // The same window without reports first: heartbeats, lease renewals and liveness cost
    // commands and CPU whatever the relays report, and are subtracted per report. It starts once
    // the storm's trailing work is done (no reconcile key and no relay call waiting on any
    // instance, twice a second apart; at most a minute), so that it is the background alone.
    const trailingStarted = performance.now();
    for (let calm = 0; calm < 2 && performance.now() - trailingStarted < sized(60_000, 5_000);) {
      const texts = await Promise.all(instances.map(metricsOf));
      const idle = texts.every((text) => /^cloudly_reconcile_queue_depth 0$/m.test(text) && /^cloudly_relay_calls_queued 0$/m.test(text));
      calm = idle ? calm + 1 : 0;
      await sleep(1000);
    }
    const trailingMs = performance.now() - trailingStarted;
    const quietBefore = await totals();
    await sleep(windowMs);
    const quietAfter = await totals();
    // The same memory once the storm has settled (V8 shrinks its heap when allocation has been
    // low for a while; 3 s after the storm most of the heap's growth was the storm's garbage).
    const settledRss = pids().reduce((sum, pid) => sum + memoryOf(pid).rss, 0);
    const settledSplit = await splitOfAll();
    const settledKb = (keyArg: keyof typeof idleSplit): string => ((settledSplit[keyArg] - idleSplit[keyArg]) / connectedRelays / 1024).toFixed(1);
    const settledPerRelayKb = (settledRss - idleRss) / connectedRelays / 1024;
    say(`  - memory after the storm settled (${ms(3000 + trailingMs + windowMs)} later, no reports meanwhile): RSS ${(settledRss / 2 ** 20).toFixed(0)} MiB, ${settledPerRelayKb.toFixed(1)} KB per idle relay; `
      + `V8 heap reserved ${settledKb('heapTotal')} KB (used ${settledKb('heapUsed')} KB), external ${settledKb('external')} KB per relay`);
    fleet.report(reportMs);
    await sleep(sized(5_000, 500));
    const before = await totals();
    await sleep(windowMs);
    const after = await totals();
    const reports = after.reports - before.reports;
    const commands = after.commands - before.commands;
    const quietCommands = quietAfter.commands - quietBefore.commands;
    const cores = (after.cpu - before.cpu) / (windowMs / 1000);
    const quietCores = (quietAfter.cpu - quietBefore.cpu) / (windowMs / 1000);
    // What a report costs is judged net of the background: the window with reports less the same
    // window without. The background (heartbeats, the shared log's polls, the resync) is printed
    // per second beside it, and every command of the reporting window per report as the bound
    // that holds whatever else ran. After a large storm the work still trailing it can make the
    // window without reports the costlier one (a net below 0): the run says so.
    const perReport = reports > 0 ? commands / reports : NaN;
    const perReportNet = reports > 0 ? (commands - quietCommands) / reports : NaN;
    const backgroundPerSecond = quietCommands / (windowMs / 1000);
    say(`  - steady state (each relay reports every 30 s, ${ms(windowMs)} windows; the storm's trailing work done ${ms(trailingMs)} after the memory figure): ${reports} reports; the three instances ${cores.toFixed(2)} cores (${quietCores.toFixed(2)} without reports); `
      + `${commands} database commands (${quietCommands} without reports, ${backgroundPerSecond.toFixed(1)} per second): ${perReportNet.toFixed(2)} per report net of the window without reports`
      + `${perReportNet < 0 ? ' (which still held the storm\'s trailing work)' : ''}, ${perReport.toFixed(2)} per report with every command of the window counted; load ${load()}`);
    fleet.report(0);
    await markPhase('steady', profiled());

    // 3. All three restart at once (SIGTERM, started again on the same ports).
    const restartStarted = performance.now();
    const stops = await Promise.all(instances.map((instance) => stopFleetInstance(instance, 'SIGTERM')));
    const stoppedMs = performance.now() - restartStarted;
    const gone = await fleet.waitFor((statsArg) => statsArg.registered === 0, 30_000);
    const startStarted = performance.now();
    const starts = await Promise.all(instances.map((instance) => startFleetInstance(database, instance, { ...env, ...profileEnv(`instance-${instance.name}`) })));
    const listeningAt = performance.now();
    const startedMs = listeningAt - startStarted;
    await markPhase('restart-start', profiled());
    // Timed from the moment all three listen again, whatever the administrator's login waits for.
    const restart = await during('all three restarted (from listening again)', () => measureStorm(fleet, relaysArg, pids, sized(300_000, 60_000), { sinceArg: listeningAt, otherPids }));
    say(`    (the instances took ${ms(listeningAt - restartStarted)} to stop and listen again: stopped in ${ms(stoppedMs)} `
      + `[${stops.map((stop, index) => `${instances[index].name}: ${ms(stop.ms)}${stop.forced ? ', killed after 15 s' : ''}, ${stop.steps}`).join('; ')}], `
      + `every relay seen unregistered ${gone.reached ? `${ms(gone.ms)} later` : `not within 30 s (${gone.stats.registered} still registered)`}, `
      + `the three started in ${ms(startedMs)} [${starts.map((start) => start.steps).join('; ')}])`);
    await markPhase('restart', profiled());

    // 4. One of three killed (SIGKILL): its relays go to the other two once its leases run out.
    // Timed from the kill until every relay is registered again and none on the killed address.
    const killedUrl = urls[0];
    let killedAt = 0;
    let killedRelays = 0;
    let noticed = { ms: 0, reached: false };
    const moved = await during('one of three killed', () => measureStorm(fleet, relaysArg, pids, sized(300_000, 60_000), {
      sinceArg: killedAt,
      otherPids,
      alsoArg: (statsArg) => (statsArg.perUrl[killedUrl] ?? 0) === 0,
    }), async () => {
      await markPhase('before-kill', profiled());
      killedRelays = (await fleet.stats()).perUrl[killedUrl] ?? 0;
      killedAt = performance.now();
      await stopFleetInstance(instances[0], 'SIGKILL');
      // The relays learn of the kill when their sockets close.
      noticed = await fleet.waitFor((statsArg) => statsArg.registered < relaysArg, 10_000);
    });
    const movedMs = moved.ms;
    await markPhase('kill', profiled());
    say(`    (every relay registered again ${ms(movedMs)} after the kill: the killed instance held ${killedRelays} relays; `
      + `${noticed.reached ? `the fleet saw its sockets close ${(noticed.ms).toFixed(0)} ms after the kill` : 'no relay saw its socket close within 10 s'}; `
      + 'then waited until every relay was registered and none on the killed address)');

    say('');
    say('| aim | measured | |');
    say('| --- | --- | --- |');
    say(`| ${relaysArg} relays registered from cold start < 15 s | ${ms(cold.ms)} | ${aim(cold.reached && cold.ms < 15_000)} |`);
    say(`| after all three restart < 15 s (from listening again) | ${ms(restart.ms)} | ${aim(restart.reached && restart.ms < 15_000)} |`);
    say(`| after one of three is killed: registered elsewhere < lease ${ms(leaseTtlMs)} + 5 s | ${ms(movedMs)} | ${aim(moved.reached && movedMs < leaseTtlMs + 5_000)} |`);
    const readP99 = Math.max(cold.readP99, restart.readP99, moved.readP99);
    const writeP99 = Math.max(cold.writeP99, restart.writeP99, moved.writeP99);
    say(`| admin reads p99 < 250 ms during each storm | worst ${readP99.toFixed(0)} ms | ${aim(readP99 < 250)} |`);
    say(`| mutations p99 < 1 s during each storm | worst ${writeP99.toFixed(0)} ms | ${aim(writeP99 < 1000)} |`);
    // The aim is judged by the live memory a relay holds (after full collections; the instances
    // here cannot be made to collect, so it is bench/relaymemory.bench.ts's last full run); the
    // RSS growth of these instances holds the storm's garbage and the pages V8 and the allocator
    // kept of it too, and is printed beside it.
    const live = await lastLiveMemoryPerRelay();
    say(`| memory per idle relay < 30 KB, judged by the live memory after full collections (bench/relaymemory.bench.ts, one instance${live ? `, ${live.date}` : ''}) | ${live ? `${live.kb.toFixed(1)} KB` : 'not measured'} | ${live ? aim(live.kb < 30) : 'run bench/relaymemory.bench.ts'} |`);
    say(`| (not judged) the three instances' RSS growth per idle relay over the cold storm, 3 s after it / once settled | ${perRelayKb.toFixed(1)} KB / ${settledPerRelayKb.toFixed(1)} KB | |`);
    say(`| steady state CPU of the three < 1 core | ${cores.toFixed(2)} cores | ${aim(cores < 1)} |`);
    say(`| database commands per unchanged report ≤ 2, judged net of the background (the window with reports less the window without, per report) | ${perReportNet.toFixed(2)} | ${perReportNet < 0 ? 'not judged: the window without reports still held the storm\'s trailing work' : aim(perReportNet <= 2)} |`);
    say(`| (not judged) every command of the reporting window per report, the background included / the background of the three alone | ${perReport.toFixed(2)} / ${backgroundPerSecond.toFixed(1)} per second | |`);
  } finally {
    await fleet.stop();
    await Promise.all(instances.map((instance) => stopFleetInstance(instance, 'SIGTERM')));
    await database.stop();
    await fsp.rm(workDir, { recursive: true, force: true });
  }
};

/** The live memory per idle relay (compression off) of bench/relaymemory.bench.ts's last full run, and when it ran. */
const lastLiveMemoryPerRelay = async (): Promise<{ kb: number; date: string } | null> => {
  const text = await fsp.readFile(path.join(import.meta.dirname, 'results', 'relaymemory.md'), 'utf8').catch(() => '');
  const kb = /^\| off \(the default\) \| ([\d.]+) KB/m.exec(text) ?? /compression off[^\n]*together ([\d.]+) KB per relay/.exec(text);
  const date = /, (\d{4}-\d\d-\d\d)T/.exec(text);
  return kb ? { kb: Number(kb[1]), date: date?.[1] ?? 'undated' } : null;
};

const main = async (): Promise<void> => {
  say('# Fleet benchmark');
  say('');
  say(`\`${passedSettingsText()}node --import tsx bench/fleet.bench.ts ${args.join(' ')}\` on ${os.cpus().length} cores, ${new Date().toISOString()}.`);
  say('');
  if (idleMode) {
    say(`An idle fleet's database commands: one instance in the bench's process (embedded database), ${withoutRelays ? 'clusters without relays (--no-relays; "per relay" below is per cluster)' : 'one cluster per relay, every relay connected and idle (no reports)'}.`
      + ' The resync is counted apart from the rest: three resyncs asked for one after another, each until its runs are done, and a window with no resync.'
      + ' Per minute: the window\'s rate plus one resync (the default period, 60 s).');
    say('');
    say('| relays | commands of one resync (three) | per cluster | CPU of this process over each (not judged) | commands per minute without the resync | per minute with it | per relay per minute | all registered after | load after |');
    say('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const size of sizes.length > 0 ? sizes : [sized(100, 10), sized(1000, 20)]) {
      say(`${describeIdle(await idleBackground(size))} ${load()} |`);
    }
    await reportResults('fleet-idle.md', lines);
    return;
  }
  if (!process.env[testServerEnvName] && !process.argv.includes('--source')) {
    // Production starts built JavaScript (dist/cli.js); through tsx every start transpiles the
    // sources again (23 s of a restart at load 14). The esbuild bundle of the same sources the
    // tests use starts like the built server; `--source` starts as `npm start` does.
    const bundling = performance.now();
    process.env[testServerEnvName] = await buildTestServer();
    say(`The instances run the server bundled with esbuild (scripts/testserver.ts, bundled in ${ms(performance.now() - bundling)}), under bin/cloudly-server's flags.`);
    say('');
  }
  if (oneInstance) {
    const compare = process.env.FLEET_COMPARE_ENV ? JSON.parse(process.env.FLEET_COMPARE_ENV) as Record<string, string> : null;
    for (const size of sizes.length > 0 ? sizes : [sized(1000, 20)]) {
      await oneInstanceStorm(size, {}, 'defaults');
      if (compare) {
        await oneInstanceStorm(size, compare, JSON.stringify(compare));
      }
    }
    sayScaling();
  }
  if (!oneInstance) {
    await threeInstances(sizes[0] ?? sized(10_000, 30));
    // The analysis below the figures is kept by hand: a run rewrites only the list above it.
    const kept = await fsp.readFile(path.join(import.meta.dirname, 'results', 'fleet.md'), 'utf8').catch(() => '');
    const marker = kept.indexOf(keptMarker);
    if (marker >= 0) {
      lines.push('', kept.slice(marker).trimEnd());
    }
  }
  await reportResults(oneInstance ? 'fleet-one.md' : 'fleet.md', lines);
};

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
