/**
 * The test runner behind `npm test` and its lanes (readme, Development):
 *
 *   npm test                          every lane, in one `node --test` run
 *   npm run test:unit                 pure functions: no server, no socket (enforced, see test/helpers/lane.ts)
 *   npm run test:integration          a real Cloudly in the test's process (in-process calls or its own port)
 *   npm run test:e2e                  child processes, crashes, several instances, the CLI binary, the browser
 *   node --import tsx scripts/test.ts <lane|all> [node test flags, e.g. --test-name-pattern=…, --test-concurrency=2]
 *   node --import tsx scripts/test.ts --list [lane]   the files of a lane, one a line
 *
 * A file lands in a lane by its name: the `unit` and `e2e` patterns below, everything else is
 * `integration`. Files run in parallel, each in its own process, with its own port, data
 * directory and config directory; the slowest files start first so the run does not end on one
 * long file. Each file's output is printed whole when it ends, then a summary.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import type { IFileDone } from '../test/helpers/filereporter.js';
import { buildTestServer, testServerEnvName } from './testserver.js';
import { transpileEnvName, transpileForTests, transpiledPath, transpiledRootEnvName } from './testjs.js';
import { makeSigningKeyPool, signingKeysEnvName } from '../test/helpers/signingkeys.js';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const projectDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const testDir = path.join(projectDir, 'test');

export type TLane = 'unit' | 'integration' | 'e2e';
export const lanes: TLane[] = ['unit', 'integration', 'e2e'];

/**
 * Pure functions: decisions, contracts, validators, parsers, queues, local files. A file named
 * here must open no socket and start no server (the unit lane refuses both at run time).
 */
const unitPatterns: RegExp[] = [
  /^contracts\.(?!methodmap\.)/,
  /decision/,
  /\.judge\./,
  /\.property\.test\.ts$/,
  /^foundation\.(workqueue|logging|memoryrelease|imports)\./,
  /^multiinstance\.config\./,
  /^config\./,
  /^backup\.(grants|hashworker|blobstore)\./,
  /^storage\.queryengine\./,
];
/** unit-named files that are not pure (they start a server): integration despite the name. */
const notUnit: RegExp[] = [/^boundary\.property\./];

/** Real processes, crashes, transport, several instances, the CLI binary, the browser. */
const e2ePatterns: RegExp[] = [
  /^cli\.binary\./,
  /^cli\.completion\./,
  /^dashboard\.browser\./,
  /^multiinstance\.(?!config\.)/,
  /\.reconnect\./,
  /\.restart\./,
  /^foundation\.(launcher|build|durability|journal|storage|http|relay|quietstart|testrunner)\./,
  /^relay\.(liveness|protocol|thirdparty|conformance)\./,
  /^secret\.atrest\./,
  /^boundary\./,
  /^streams\./,
  /^backup\.(s3|relayclosures)\./,
  /^storage\.(crash|lock|shutdown|verify|snapshot)\./,
  /^sim\./,
  /^acme\.pebble\./,
];

export const laneOf = (fileArg: string): TLane => {
  const name = path.basename(fileArg);
  if (unitPatterns.some((patternArg) => patternArg.test(name)) && !notUnit.some((patternArg) => patternArg.test(name))) {
    return 'unit';
  }
  if (e2ePatterns.some((patternArg) => patternArg.test(name))) {
    return 'e2e';
  }
  return 'integration';
};

/**
 * The files measured slowest (seconds each in a whole run with 3 at once on the shared 2-core
 * machine, 2026-12-01: journal 171, multiinstance 88, forwarding 76, durability 73, leases 50,
 * liveness 46, browser 43, …); they start first. A file not named here starts after these, in
 * name order.
 */
const slowFirst = [
  'contracts.schema',
  'storage.crash',
  'connections.fleet',
  'sim.fleet',
  'foundation.journal',
  'multiinstance',
  'multiinstance.forwarding',
  'foundation.durability',
  'runtimenetwork.leases',
  'relay.liveness',
  'dashboard.browser',
  'dashboard.browser.daily',
  'dashboard.watch',
  'backup.s3',
  'secret.atrest',
  'foundation.launcher',
  'multiinstance.reconciler',
  'multiinstance.backupprogress',
  'runtimenetwork.restart',
  'cli.binary',
  'operations.audit',
  'relay.thirdparty',
  'dashboard.operations',
  'backup.closures',
  'boundary.property',
  'foundation.storage',
  'relay.conformance',
  'desiredstate.loop',
  'foundation.batching',
  'runtimenetwork.manager',
  'runtimenetwork.allocation.robustness',
  'relay.reconnect',
  // 21-60 s at load 20-28 on 2026-12-01 (waits for verdicts the reconciler judges after each change).
  'service.runtimereasons',
];

export const testFiles = (laneArg: TLane | 'all'): string[] => {
  const rank = (nameArg: string): number => {
    const at = slowFirst.indexOf(nameArg.replace(/\.test\.ts$/, ''));
    return at < 0 ? slowFirst.length : at;
  };
  return fs.readdirSync(testDir)
    .filter((nameArg) => nameArg.endsWith('.test.ts'))
    .filter((nameArg) => laneArg === 'all' || laneOf(nameArg) === laneArg)
    .sort((aArg, bArg) => rank(aArg) - rank(bArg) || aArg.localeCompare(bArg))
    .map((nameArg) => path.join('test', nameArg));
};

/**
 * Files at once. Measured on the 2-core machine (readme, Development): most of a file's time is
 * process start-up, module import and waiting on loopback I/O, so a little more than one file
 * per core keeps both cores busy. CLOUDLY_TEST_CONCURRENCY overrides.
 */
export const defaultConcurrency = (): number => {
  const given = Number(process.env.CLOUDLY_TEST_CONCURRENCY);
  if (Number.isInteger(given) && given > 0) {
    return given;
  }
  const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  return Math.max(2, Math.ceil(cores * 1.5));
};

interface IFileRun {
  file: string;
  code: number;
  seconds: number;
  /** CPU seconds of the file's process and the children it reaped (Linux; shared processes only). */
  cpuSeconds?: number;
  output: string;
  counts: Record<string, number>;
}

/**
 * Files that run alone, each in its own process: they measure the process itself (heap growth,
 * array buffers) or change process-wide state, so a shared process would blur what they prove.
 */
const isolatedPatterns: RegExp[] = [
  /^boundary\.property\./,
  /^foundation\.memoryrelease\./,
  /^foundation\.launcher\./,
];
export const runsIsolated = (fileArg: string): boolean => isolatedPatterns.some((patternArg) => patternArg.test(path.basename(fileArg)));

/** A file may hang (a lost wakeup, a handle never closed); past this it fails and its process is killed. */
const fileTimeoutMs = Number(process.env.CLOUDLY_TEST_FILE_TIMEOUT_MS) || 10 * 60_000;

const running = new Set<ChildProcess>();

/**
 * CPU seconds a process has used, with the children it has reaped (utime, stime, cutime and
 * cstime in /proc/<pid>/stat), or undefined where there is no /proc.
 */
const cpuSecondsOf = (pidArg: number | undefined): number | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pidArg}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    return ticks / 100;
  } catch {
    return undefined;
  }
};

/**
 * Node's arguments for a test process; `preloadsArg` load before the lane guard. With `rootArg`
 * (the run's transpiled sources, scripts/testjs.ts) the process loads JavaScript from there on
 * plain Node; without, TypeScript through tsx.
 */
const testProcessArgs = (nodeFlagsArg: string[], preloadsArg: string[] = [], rootArg?: string): string[] => rootArg
  ? ['--enable-source-maps', ...[...preloadsArg, './test/helpers/lane.ts'].flatMap((preloadArg) => ['--import', pathToFileURL(transpiledPath(rootArg, preloadArg)).href]), ...nodeFlagsArg]
  : ['--import', 'tsx', ...preloadsArg.flatMap((preloadArg) => ['--import', preloadArg]), '--import', './test/helpers/lane.ts', ...nodeFlagsArg];

/** One test file in its own process (node:test runs it in process and exits non-zero on a failure). */
const runFile = (fileArg: string, nodeFlagsArg: string[], rootArg?: string): Promise<IFileRun> => new Promise((resolve) => {
  const started = Date.now();
  const child = spawn(process.execPath, [...testProcessArgs(nodeFlagsArg, [], rootArg), rootArg ? transpiledPath(rootArg, fileArg) : fileArg], {
    cwd: projectDir,
    // The lane guard knows a unit file by its `.test.ts` name, which the transpiled file no longer has.
    env: rootArg && laneOf(fileArg) === 'unit' ? { ...process.env, CLOUDLY_TEST_LANE: 'unit' } : process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let output = '';
  child.stdout!.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  child.stderr!.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  const timer = setTimeout(() => {
    output += `\nstill running after ${fileTimeoutMs} ms: killed\n`;
    child.kill('SIGKILL');
  }, fileTimeoutMs);
  const finish = (codeArg: number, extraArg = '') => {
    clearTimeout(timer);
    running.delete(child);
    const text = output + extraArg;
    resolve({ file: fileArg, code: codeArg, seconds: (Date.now() - started) / 1000, output: text, counts: countsOf(text) });
  };
  child.once('error', (errorArg) => finish(1, `\ncould not start: ${errorArg.message}\n`));
  child.once('close', (codeArg, signalArg) => finish(codeArg ?? 1, signalArg ? `\nended by ${signalArg}\n` : ''));
});

/**
 * A long-lived test process that runs the files it is sent one after another
 * (test/helpers/worker.ts): most files pay their start-up once per worker instead of once each.
 * The unit lane has workers of its own, where sockets are refused.
 */
export class SharedWorker {
  private child: ChildProcess;
  private loose = '';
  private current: { file: string; started: number; cpuAtStart?: number; resolve: (runArg: IFileRun) => void; timer: NodeJS.Timeout } | null = null;
  private exited = false;
  private readyPromise: Promise<void>;

  /** `rootArg`: the run's transpiled sources (scripts/testjs.ts); without it the process runs TypeScript through tsx. */
  constructor(public kind: 'unit' | 'shared', nodeFlagsArg: string[], rootArg?: string) {
    const own = (fileArg: string): string => (rootArg ? transpiledPath(rootArg, fileArg) : path.join(projectDir, fileArg));
    this.child = fork(own('test/helpers/worker.ts'), [], {
      cwd: projectDir,
      execArgv: [
        // Before node:test loads: the harness's process-wide async hook is switched while tests run (see the file).
        ...testProcessArgs(nodeFlagsArg, ['./test/helpers/harnesshook.ts'], rootArg),
        `--test-reporter=${rootArg ? pathToFileURL(own('test/helpers/filereporter.ts')).href : './test/helpers/filereporter.ts'}`, '--test-reporter-destination=stdout',
      ],
      // NODE_TEST_CONTEXT is set when the runner itself runs under `node --test` (its own test):
      // a process that inherits it reports to a parent runner instead of through its reporter.
      env: {
        ...process.env,
        NODE_TEST_CONTEXT: undefined,
        ...(kind === 'unit' ? { CLOUDLY_TEST_LANE: 'unit' } : {}),
        // The worker imports each file's transpiled counterpart from here (test/helpers/worker.ts);
        // unset (undefined is left out) when this worker runs TypeScript through tsx.
        [transpiledRootEnvName]: rootArg,
      },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    running.add(this.child);
    // What the tests print themselves (and anything the process prints on its way out) is kept
    // and handed out with the file that was running.
    this.child.stdout!.on('data', (chunkArg: Buffer) => { this.loose += chunkArg.toString(); });
    this.child.stderr!.on('data', (chunkArg: Buffer) => { this.loose += chunkArg.toString(); });
    let markReady: () => void;
    this.readyPromise = new Promise<void>((resolve) => { markReady = resolve; });
    this.child.on('message', (messageArg: { ready?: boolean } & Partial<IFileDone>) => {
      if (messageArg.ready) {
        markReady();
        return;
      }
      if (this.current && messageArg.done === this.current.file) {
        this.settle(messageArg.ok ? 0 : 1, messageArg.output ?? '', { ...messageArg.counts });
      }
    });
    this.child.once('exit', (codeArg, signalArg) => {
      this.exited = true;
      running.delete(this.child);
      markReady();
      if (this.current) {
        // The process died under a file (a crash, an exit): that file failed.
        this.settle(1, `\nthe shared test process ended (${signalArg ?? `exit ${codeArg}`}) while this file ran\n`, {});
      }
    });
  }

  get alive(): boolean {
    return !this.exited;
  }

  private settle(codeArg: number, outputArg: string, countsArg: Record<string, number>): void {
    const current = this.current!;
    this.current = null;
    const cpuNow = cpuSecondsOf(this.child.pid);
    const cpuSeconds = cpuNow !== undefined && current.cpuAtStart !== undefined ? cpuNow - current.cpuAtStart : undefined;
    clearTimeout(current.timer);
    const output = this.loose + outputArg;
    this.loose = '';
    current.resolve({ file: current.file, code: codeArg, seconds: (Date.now() - current.started) / 1000, cpuSeconds, output, counts: countsArg });
  }

  async run(fileArg: string): Promise<IFileRun> {
    await this.readyPromise;
    const started = Date.now();
    if (this.exited) {
      return { file: fileArg, code: 1, seconds: 0, output: `the shared test process had ended before this file\n${this.loose}`, counts: {} };
    }
    return new Promise<IFileRun>((resolve) => {
      const timer = setTimeout(() => {
        this.loose += `\nstill running after ${fileTimeoutMs} ms: its process was killed\n`;
        this.child.kill('SIGKILL');
      }, fileTimeoutMs);
      this.current = { file: fileArg, started, cpuAtStart: cpuSecondsOf(this.child.pid), resolve, timer };
      this.child.send({ file: fileArg });
    });
  }

  /** Asks the process to end once its event loop is empty; kills it if it keeps a handle open. */
  async finish(): Promise<string> {
    if (this.exited) {
      return '';
    }
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.send({ finish: true });
    const graceMs = 15_000;
    const lingered = await Promise.race([exited.then(() => false), new Promise<boolean>((resolve) => setTimeout(() => resolve(true), graceMs).unref())]);
    if (lingered) {
      this.child.kill('SIGKILL');
      await exited;
      return `# warning: a shared test process still held open handles ${graceMs / 1000} s after its last file; killed\n${this.loose}`;
    }
    return '';
  }
}

/** Sums node:test's own closing counts (spec `ℹ pass 3` or TAP `# pass 3`) in one file's output. */
const countsOf = (outputArg: string): Record<string, number> => {
  const counts: Record<string, number> = {};
  for (const match of outputArg.matchAll(/^(?:ℹ|#) (tests|pass|fail|cancelled|skipped|todo) (\d+)$/gm)) {
    counts[match[1]] = Number(match[2]);
  }
  return counts;
};

/** Keys made for the run's fresh servers (about 2.5 CPU-s for 16): consecutive servers of a test process get different ones. */
const signingKeyPoolSize = 16;
let removeKeyPool = async (): Promise<void> => {};
let removeTranspiled = async (): Promise<void> => {};

const main = async (): Promise<number> => {
  const args = process.argv.slice(2);
  if (args[0] === '--list') {
    const lane = (args[1] ?? 'all') as TLane | 'all';
    for (const file of testFiles(lane)) {
      console.log(`${laneOf(file).padEnd(12)} ${file}`);
    }
    return 0;
  }
  const lane = (args[0] ?? 'all') as TLane | 'all';
  if (lane !== 'all' && !lanes.includes(lane)) {
    console.error(`usage: scripts/test.ts <${lanes.join('|')}|all> [node test flags, e.g. --test-name-pattern=…]`);
    return 2;
  }
  // The files are scheduled here (slowest first, a fixed number at once) rather than by
  // `node --test`, which sorts its files by name and starts a process for every file.
  const flags = args.slice(1);
  const concurrencyFlag = flags.find((argArg) => argArg.startsWith('--test-concurrency='));
  const concurrency = concurrencyFlag ? Math.max(1, Number(concurrencyFlag.split('=')[1]) || 1) : defaultConcurrency();
  // `--isolate` (or CLOUDLY_TEST_ISOLATE=1) runs every file in its own process, as before workers.
  const isolateAll = flags.includes('--isolate') || process.env.CLOUDLY_TEST_ISOLATE === '1';
  const nodeFlags = flags.filter((argArg) => !argArg.startsWith('--test-concurrency') && argArg !== '--isolate');
  // A shared process reports through test/helpers/filereporter.ts (spec output, per file).
  const workerFlags = nodeFlags.filter((argArg) => !argArg.startsWith('--test-reporter'));
  if (!nodeFlags.some((argArg) => argArg.startsWith('--test-reporter'))) {
    nodeFlags.push('--test-reporter=spec');
  }
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      for (const child of running) {
        child.kill(signal);
      }
      Promise.allSettled([removeKeyPool(), removeTranspiled()]).finally(() => process.exit(1));
    });
  }
  const files = testFiles(lane);
  const started = Date.now();
  // Before the first test process: the sources they load, as JavaScript (scripts/testjs.ts).
  let transpiledRoot: string | undefined;
  if (process.env[transpileEnvName] !== '0') {
    const transpiling = Date.now();
    try {
      const transpiled = await transpileForTests();
      transpiledRoot = transpiled.root;
      removeTranspiled = transpiled.remove;
      console.log(`# transpiled ${transpiled.files} source files for the test processes in ${((Date.now() - transpiling) / 1000).toFixed(1)} s`);
    } catch (error) {
      console.log(`# warning: could not transpile the sources (${(error as Error).message}); test processes load them through tsx`);
    }
  }
  let prepared = false;
  const preparing = (async () => {
    if (files.some((fileArg) => laneOf(fileArg) !== 'unit') && !process.env[testServerEnvName]) {
      // Crash and start-up tests start the server as a child dozens of times: bundled once here,
      // each start costs a fraction of one through tsx (scripts/testserver.ts).
      const bundling = Date.now();
      // Meanwhile (crypto's thread pool) the signing keys the run's fresh servers take (test/helpers/signingkeys.ts).
      const keyPool = makeSigningKeyPool(signingKeyPoolSize).catch((errorArg: Error) => errorArg);
      try {
        process.env[testServerEnvName] = await buildTestServer();
        console.log(`# bundled the test server in ${((Date.now() - bundling) / 1000).toFixed(1)} s`);
      } catch (error) {
        console.log(`# warning: could not bundle the test server (${(error as Error).message}); child servers start through tsx`);
      }
      const pool = await keyPool;
      if (pool instanceof Error) {
        console.log(`# warning: could not make the signing key pool (${pool.message}); every fresh server makes its own key`);
      } else {
        process.env[signingKeysEnvName] = pool.file;
        removeKeyPool = pool.remove;
      }
    }
    prepared = true;
  })();
  const queue = [...files];
  /**
   * The next file to run. While the bundle and the keys are being made (a few seconds, about one
   * core), unit files run: they need neither, and the cores would otherwise wait.
   */
  const nextFile = async (): Promise<string | undefined> => {
    if (!prepared) {
      const unitAt = queue.findIndex((fileArg) => laneOf(fileArg) === 'unit');
      if (unitAt >= 0) {
        return queue.splice(unitAt, 1)[0];
      }
      await preparing;
    }
    return queue.shift();
  };
  const results: IFileRun[] = [];
  const notes: string[] = [];
  console.log(`# lane ${lane}: ${files.length} files, ${concurrency} at once${isolateAll ? ', each in its own process' : ', in shared processes'}`);
  await Promise.all(Array.from({ length: Math.min(concurrency, files.length) }, async () => {
    // Each slot keeps at most one shared process of each kind and reuses it for its next files.
    const workers = new Map<'unit' | 'shared', SharedWorker>();
    const workerFor = (kindArg: 'unit' | 'shared'): SharedWorker => {
      let worker = workers.get(kindArg);
      if (!worker || !worker.alive) {
        worker = new SharedWorker(kindArg, workerFlags, transpiledRoot);
        workers.set(kindArg, worker);
      }
      return worker;
    };
    for (let file = await nextFile(); file !== undefined; file = await nextFile()) {
      const result = isolateAll || runsIsolated(file)
        ? await runFile(file, nodeFlags, transpiledRoot)
        : await workerFor(laneOf(file) === 'unit' ? 'unit' : 'shared').run(file);
      results.push(result);
      const cpu = result.cpuSeconds === undefined ? '' : `, ${result.cpuSeconds.toFixed(1)} s CPU`;
      process.stdout.write(`\n# ${result.code === 0 ? 'ok    ' : 'FAILED'} ${result.file} (${result.seconds.toFixed(1)} s${cpu})\n${result.output}`);
    }
    for (const worker of workers.values()) {
      const note = await worker.finish();
      if (note) {
        notes.push(note);
      }
    }
  }));
  await preparing;
  for (const note of notes) {
    process.stdout.write(`\n${note}`);
  }
  const totals: Record<string, number> = {};
  for (const result of results) {
    for (const [key, value] of Object.entries(result.counts)) {
      totals[key] = (totals[key] ?? 0) + value;
    }
  }
  const failed = results.filter((result) => result.code !== 0);
  console.log(`\n# lane ${lane}: ${files.length} files, ${concurrency} at once, ${((Date.now() - started) / 1000).toFixed(1)} s`);
  console.log(`# tests ${totals.tests ?? 0}, pass ${totals.pass ?? 0}, fail ${totals.fail ?? 0}, cancelled ${totals.cancelled ?? 0}, skipped ${totals.skipped ?? 0}, todo ${totals.todo ?? 0}`);
  console.log(`# slowest: ${[...results].sort((a, b) => b.seconds - a.seconds).slice(0, 8).map((result) => `${path.basename(result.file, '.test.ts')} ${result.seconds.toFixed(0)} s`).join(', ')}`);
  const measured = results.filter((result) => result.cpuSeconds !== undefined);
  if (measured.length > 0) {
    const cpuTotal = measured.reduce((sumArg, result) => sumArg + result.cpuSeconds!, 0);
    console.log(`# CPU of the files in shared processes: ${cpuTotal.toFixed(0)} s; most: ${[...measured].sort((a, b) => b.cpuSeconds! - a.cpuSeconds!).slice(0, 8).map((result) => `${path.basename(result.file, '.test.ts')} ${result.cpuSeconds!.toFixed(0)} s`).join(', ')}`);
  }
  for (const result of failed) {
    console.log(`# FAILED ${result.file} (exit ${result.code})`);
  }
  await removeKeyPool();
  await removeTranspiled();
  return failed.length === 0 ? 0 : 1;
};

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main();
}
