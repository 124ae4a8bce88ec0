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
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

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
  /^backup\.(grants|hashworker|blobstore)\./,
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
  /^foundation\.(launcher|build|durability|journal|storage|http|relay)\./,
  /^relay\.(liveness|protocol|thirdparty|conformance)\./,
  /^secret\.atrest\./,
  /^boundary\./,
  /^streams\./,
  /^backup\.(s3|relayclosures)\./,
  /^storage\.(crash|lock|shutdown|verify|snapshot)\./,
  /^sim\./,
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
  'dashboard.watch',
  'backup.s3',
  'secret.atrest',
  'foundation.launcher',
  'multiinstance.reconciler',
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
  output: string;
}

/** One test file in its own process (node:test runs it in process and exits non-zero on a failure). */
const runFile = (fileArg: string, nodeFlagsArg: string[]): Promise<IFileRun> => new Promise((resolve) => {
  const started = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', './test/helpers/lane.ts', ...nodeFlagsArg, fileArg], {
    cwd: projectDir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let output = '';
  child.stdout.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  child.stderr.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  const finish = (codeArg: number, extraArg = '') => {
    running.delete(child);
    resolve({ file: fileArg, code: codeArg, seconds: (Date.now() - started) / 1000, output: output + extraArg });
  };
  child.once('error', (errorArg) => finish(1, `\ncould not start: ${errorArg.message}\n`));
  child.once('close', (codeArg, signalArg) => finish(codeArg ?? 1, signalArg ? `\nended by ${signalArg}\n` : ''));
});

const running = new Set<ReturnType<typeof spawn>>();

/** Sums node:test's own closing counts (spec `ℹ pass 3` or TAP `# pass 3`) over the files. */
const countsOf = (outputArg: string): Record<string, number> => {
  const counts: Record<string, number> = {};
  for (const match of outputArg.matchAll(/^(?:ℹ|#) (tests|pass|fail|cancelled|skipped|todo) (\d+)$/gm)) {
    counts[match[1]] = Number(match[2]);
  }
  return counts;
};

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
  // `node --test`, which sorts its files by name; each file still runs in its own process.
  const concurrencyFlag = args.slice(1).find((argArg) => argArg.startsWith('--test-concurrency='));
  const concurrency = concurrencyFlag ? Math.max(1, Number(concurrencyFlag.split('=')[1]) || 1) : defaultConcurrency();
  const nodeFlags = args.slice(1).filter((argArg) => !argArg.startsWith('--test-concurrency'));
  if (!nodeFlags.some((argArg) => argArg.startsWith('--test-reporter'))) {
    nodeFlags.push('--test-reporter=spec');
  }
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      for (const child of running) {
        child.kill(signal);
      }
      process.exit(1);
    });
  }
  const files = testFiles(lane);
  const queue = [...files];
  const results: IFileRun[] = [];
  const started = Date.now();
  console.log(`# lane ${lane}: ${files.length} files, ${concurrency} at once`);
  await Promise.all(Array.from({ length: Math.min(concurrency, files.length) }, async () => {
    for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
      const result = await runFile(file, nodeFlags);
      results.push(result);
      process.stdout.write(`\n# ${result.code === 0 ? 'ok    ' : 'FAILED'} ${result.file} (${result.seconds.toFixed(1)} s)\n${result.output}`);
    }
  }));
  const totals: Record<string, number> = {};
  for (const result of results) {
    for (const [key, value] of Object.entries(countsOf(result.output))) {
      totals[key] = (totals[key] ?? 0) + value;
    }
  }
  const failed = results.filter((result) => result.code !== 0);
  console.log(`\n# lane ${lane}: ${files.length} files, ${concurrency} at once, ${((Date.now() - started) / 1000).toFixed(1)} s`);
  console.log(`# tests ${totals.tests ?? 0}, pass ${totals.pass ?? 0}, fail ${totals.fail ?? 0}, cancelled ${totals.cancelled ?? 0}, skipped ${totals.skipped ?? 0}, todo ${totals.todo ?? 0}`);
  console.log(`# slowest: ${[...results].sort((a, b) => b.seconds - a.seconds).slice(0, 8).map((result) => `${path.basename(result.file, '.test.ts')} ${result.seconds.toFixed(0)} s`).join(', ')}`);
  for (const result of failed) {
    console.log(`# FAILED ${result.file} (exit ${result.code})`);
  }
  return failed.length === 0 ? 0 : 1;
};

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main();
}
