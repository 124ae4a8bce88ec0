/**
 * What a relay's observed-state report costs Cloudly, by the pace reports arrive at, against a bare
 * WebSocket server answering the same number of messages at the same pace (issue 58's "a steady
 * fleet reporting every 30 s: Cloudly's CPU per report ≤ 0.2 ms"). Writes bench/results/report.md.
 *
 *   node --import tsx bench/report.bench.ts
 *   npm run bench -- --smoke report          tiny sizes, seconds; no results file
 *
 * A fleet of N relays each reporting every 30 s sends N / 30 reports a second: 67 a second for
 * 2,000 relays, 333 for 10,000, 1,000 for 30,000. The bench sends reports at each pace, round robin
 * over 20 relay sockets (the project's relay client), and reads the server process's CPU (user
 * and system, from /proc) over the window, net of a window of the same server with its sockets
 * open and nothing sent. Then as fast as 20 sockets go (one report in flight per socket).
 *
 * Three servers, one after the other, each started as production starts it (bin/cloudly-server):
 * - Cloudly as configured by default: a relay's unchanged report is answered from what this
 *   instance stored last (docs/desired-state.md), and stored whole again once per
 *   CLOUDLY_OBSERVED_REFRESH_MS (300 s);
 * - Cloudly with CLOUDLY_OBSERVED_REFRESH_MS=0: every report stored whole (the desired state's
 *   accepted revision, the observations);
 * - the baseline: a bare WebSocket server in Node (bench/helpers/wsecho.ts) that parses each
 *   message's JSON and answers one JSON message, the least any Node WebSocket server spends on a
 *   request. On a small shared machine the cost of a message grows as messages come further apart
 *   (each wakes an idle process whose caches went cold), for the baseline as much as for Cloudly;
 *   the baseline at the same pace shows how much of a figure is that.
 *
 * A steady fleet reporting every 30 s with the default refresh stores one report in ten whole:
 * the "steady mix" column is 0.9 × the first column + 0.1 × the second.
 */
import { fork } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IReq_Relay_Cloudly_ReportClusterPlatformObservedState } from '../ts/interfaces/requests/desiredstate.js';
import { cloudlyProcessEnv, startCloudlyProcess, type ICloudlyProcess } from '../test/helpers/process.js';
import { cpuSecondsOf } from './helpers/processstats.js';
import { sleep } from './helpers/fleet.js';
import { reportResults, sized } from './helpers/smoke.js';

/** Fleets of these many relays, each reporting every 30 s: their reports a second are the paces. */
const fleets = sized([2_000, 10_000, 30_000], [3_000]);
const windowMs = sized(15_000, 400);
const quietMs = sized(5_000, 300);
const saturatedReports = sized(10_000, 200);
const socketCount = 20;
/** A relay's report period and the default refresh of an unchanged report (CLOUDLY_OBSERVED_REFRESH_MS). */
const reportPeriodMs = 30_000;
const defaultRefreshMs = 300_000;
const paces = fleets.map((relaysArg) => (relaysArg * 1000) / reportPeriodMs);

const lines: string[] = [];
const say = (lineArg: string): void => {
  console.error(lineArg);
  lines.push(lineArg);
};
const load = (): string => os.loadavg().map((value) => value.toFixed(1)).join(' ');

/** One message to the server under test, answered (a report, or the baseline's echo). */
type TSend = (socketIndexArg: number) => Promise<unknown>;

interface ITarget {
  pid: number;
  send: TSend;
}

interface IPacedFigure {
  pace: number;
  sent: number;
  cpuMsPerMessage: number;
}

/** CPU per message at each pace and back to back, net of the target's quiet CPU. */
const measure = async (targetArg: ITarget): Promise<{ paced: IPacedFigure[]; saturated: IPacedFigure }> => {
  // Warm-up: every socket's first messages (a relay's first report is stored whole), the compiler's.
  for (let round = 0; round < 20; round++) {
    await Promise.all(Array.from({ length: socketCount }, (_unused, indexArg) => targetArg.send(indexArg)));
  }
  await sleep(sized(2_000, 100));
  let cpuBefore = cpuSecondsOf(targetArg.pid);
  let started = performance.now();
  await sleep(quietMs);
  const quietCpuPerMs = (cpuSecondsOf(targetArg.pid) - cpuBefore) / (performance.now() - started);
  const net = (cpuSecondsArg: number, elapsedMsArg: number, sentArg: number): number =>
    ((cpuSecondsArg - quietCpuPerMs * elapsedMsArg) * 1000) / sentArg;
  const paced: IPacedFigure[] = [];
  for (const pace of paces) {
    const count = Math.round((pace * windowMs) / 1000);
    const answers: Array<Promise<unknown>> = [];
    cpuBefore = cpuSecondsOf(targetArg.pid);
    started = performance.now();
    for (let index = 0; index < count; index++) {
      const wait = started + (index * 1000) / pace - performance.now();
      if (wait > 0) {
        await sleep(wait);
      }
      answers.push(targetArg.send(index % socketCount));
    }
    await Promise.all(answers);
    paced.push({ pace, sent: count, cpuMsPerMessage: net(cpuSecondsOf(targetArg.pid) - cpuBefore, performance.now() - started, count) });
    await sleep(sized(1_000, 50));
  }
  cpuBefore = cpuSecondsOf(targetArg.pid);
  started = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: socketCount }, async (_unused, indexArg) => {
    while (next < saturatedReports) {
      next++;
      await targetArg.send(indexArg);
    }
  }));
  const elapsed = performance.now() - started;
  const saturated = { pace: Math.round((saturatedReports * 1000) / elapsed), sent: saturatedReports, cpuMsPerMessage: net(cpuSecondsOf(targetArg.pid) - cpuBefore, elapsed, saturatedReports) };
  return { paced, saturated };
};

/** One Cloudly process with `socketCount` relays connected, each its own cluster's. */
const withCloudly = async <T>(envArg: Record<string, string>, runArg: (targetArg: ITarget) => Promise<T>): Promise<T> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-report-'));
  let server: ICloudlyProcess | null = null;
  const relays: CloudlyRelayClient[] = [];
  try {
    server = await startCloudlyProcess(cloudlyProcessEnv(dataDir, {
      CLOUDLY_LOG_LEVEL: 'info',
      // A relay socket's own request limit (1,000 a second) guards against a flooding relay; the
      // back-to-back phase sends more than that on each socket.
      CLOUDLY_SOCKET_REQUESTS_PER_SECOND: '100000',
      ...envArg,
    }));
    const admin = new CloudlyAdminClient(server.baseUrl);
    await admin.login('admin', 'process-admin-password');
    for (let index = 0; index < socketCount; index++) {
      const { relayToken } = await admin.call('createCluster', { name: `report-bench-${index}` });
      relays.push(await CloudlyRelayClient.connect(server.baseUrl, relayToken, {
        reconnect: false,
        registration: { origin: 'http://192.0.2.10:8080', version: 'report-bench/1', protocol: 'cluster-relay/1' },
      }));
    }
    admin.close();
    // The relays' registrations settle (each cluster's desired state computed and published).
    await sleep(sized(3_000, 300));
    return await runArg({
      pid: server.child.pid!,
      send: (indexArg) => relays[indexArg].fire<IReq_Relay_Cloudly_ReportClusterPlatformObservedState>('reportClusterPlatformObservedState', { desiredRevision: 0, services: [] }),
    });
  } finally {
    for (const relay of relays) {
      relay.close();
    }
    if (server) {
      server.child.kill('SIGTERM');
      await new Promise((resolve) => server!.child.once('exit', resolve));
    }
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
};

/** The bare WebSocket server (bench/helpers/wsecho.ts) with `socketCount` sockets open to it. */
const withEcho = async <T>(runArg: (targetArg: ITarget) => Promise<T>): Promise<T> => {
  const child = fork(path.join(import.meta.dirname, 'helpers', 'wsecho.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const sockets: WebSocket[] = [];
  try {
    const { port } = await new Promise<{ port: number }>((resolve) => child.once('message', (messageArg) => resolve(messageArg as { port: number })));
    const waiting = new Map<string, () => void>();
    for (let index = 0; index < socketCount; index++) {
      const socket = new WebSocket(`ws://127.0.0.1:${port}`);
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      socket.on('message', (dataArg) => {
        const id = (JSON.parse(String(dataArg)) as { correlation: { id: string } }).correlation.id;
        waiting.get(id)?.();
        waiting.delete(id);
      });
      sockets.push(socket);
    }
    let sequence = 0;
    return await runArg({
      pid: child.pid!,
      send: (indexArg) => new Promise<void>((resolve) => {
        const id = `echo-${sequence++}`;
        waiting.set(id, resolve);
        sockets[indexArg].send(JSON.stringify({
          method: 'reportClusterPlatformObservedState',
          request: { desiredRevision: 0, services: [] },
          correlation: { id, phase: 'request' },
        }));
      }),
    });
  } finally {
    for (const socket of sockets) {
      socket.close();
    }
    child.disconnect();
    if (child.exitCode === null) {
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
};

const main = async (): Promise<void> => {
  const loadAtStart = load();
  const remembered = await withCloudly({}, measure);
  const whole = await withCloudly({ CLOUDLY_OBSERVED_REFRESH_MS: '0' }, measure);
  const echo = await withEcho(measure);
  const storedShare = reportPeriodMs / defaultRefreshMs;
  const ms = (valueArg: number): string => `${valueArg.toFixed(3)} ms`;
  say(`# What a relay's report costs (bench/report.bench.ts), ${new Date().toISOString()}, ${os.cpus().length} cores, load ${loadAtStart} at the start, ${load()} at the end`);
  say('');
  say(`Server CPU (user and system, /proc) per report, net of the same server's CPU with its ${socketCount} sockets open and nothing sent; ${windowMs / 1000} s at each pace, round robin over ${socketCount} relay sockets; then ${saturatedReports} back to back (one in flight per socket). Each server is started as production starts it.`);
  say('');
  say('| reports a second (relays reporting every 30 s) | Cloudly, unchanged report (answered from what it stored last) | Cloudly, every report stored whole (CLOUDLY_OBSERVED_REFRESH_MS=0) | Cloudly, a steady fleet\'s mix (one report in ten stored whole) | bare WebSocket server, one JSON message | Cloudly\'s mix / bare | aim ≤ 0.2 ms |');
  say('| --- | --- | --- | --- | --- | --- | --- |');
  const rows = [...remembered.paced.map((figureArg, indexArg) => ({ label: `${Math.round(figureArg.pace)} (${fleets[indexArg].toLocaleString('en-US')} relays)`, hit: figureArg, stored: whole.paced[indexArg], bare: echo.paced[indexArg] })),
    { label: `back to back (Cloudly about ${remembered.saturated.pace} a second, the bare server ${echo.saturated.pace})`, hit: remembered.saturated, stored: whole.saturated, bare: echo.saturated }];
  for (const row of rows) {
    const mix = row.hit.cpuMsPerMessage * (1 - storedShare) + row.stored.cpuMsPerMessage * storedShare;
    say(`| ${row.label} | ${ms(row.hit.cpuMsPerMessage)} | ${ms(row.stored.cpuMsPerMessage)} | ${ms(mix)} | ${ms(row.bare.cpuMsPerMessage)} | ${(mix / row.bare.cpuMsPerMessage).toFixed(1)}× | ${mix <= 0.2 ? 'met' : 'missed'} |`);
  }
  say('');
  await reportResults('report.md', lines);
};

await main();
