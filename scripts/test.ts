/**
 * The test runner behind `npm test` and its lanes (readme, Development):
 *
 *   npm test                          every lane, in one `node --test` run
 *   npm run test:unit                 pure functions: no server, no socket (enforced, see test/helpers/lane.ts)
 *   npm run test:integration          a real Cloudly in the test's process (in-process calls or its own port)
 *   npm run test:e2e                  child processes, crashes, several instances, the CLI binary, the browser
 *   node --import tsx scripts/test.ts <lane|all> [more node --test flags, e.g. --test-name-pattern=…]
 *   node --import tsx scripts/test.ts --list [lane]   the files of a lane, one a line
 *
 * A file lands in a lane by its name: the `unit` and `e2e` patterns below, everything else is
 * `integration`. Files run in parallel, each in its own process (node:test's isolation), with
 * its own port, data directory and config directory; the slowest files start first so the run
 * does not end on one long file.
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
 * The files measured slowest (seconds on a busy 2-core machine); they start first. A file not
 * named here starts after these, in name order.
 */
const slowFirst = [
  'dashboard.browser',
  'multiinstance.forwarding',
  'multiinstance.test',
  'foundation.durability',
  'backup.s3',
  'secret.atrest',
  'foundation.journal',
  'multiinstance.election',
  'cli.binary',
  'foundation.launcher',
  'relay.reconnect',
  'runtimenetwork.restart',
  'foundation.storage',
  'cli.backups',
  'cli.commands',
  'cli.operations',
  'cli.users',
  'cli.completion',
  'foundation.build',
];

export const testFiles = (laneArg: TLane | 'all'): string[] => {
  const rank = (nameArg: string): number => {
    const at = slowFirst.findIndex((prefixArg) => nameArg.startsWith(`${prefixArg}.`) || nameArg === `${prefixArg}.ts`);
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
    console.error(`usage: scripts/test.ts <${lanes.join('|')}|all> [node --test flags]`);
    return 2;
  }
  const files = testFiles(lane);
  const hasConcurrency = args.some((argArg) => argArg.startsWith('--test-concurrency'));
  const nodeArgs = [
    '--import', 'tsx',
    '--import', './test/helpers/lane.ts',
    '--test',
    ...(hasConcurrency ? [] : [`--test-concurrency=${defaultConcurrency()}`]),
    ...args.slice(1),
    ...files,
  ];
  const started = Date.now();
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn(process.execPath, nodeArgs, { cwd: projectDir, stdio: 'inherit' });
    // Ctrl-C reaches the runner's child (which ends its test files) instead of orphaning it.
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.on(signal, () => child.kill(signal));
    }
    child.once('error', reject);
    child.once('exit', (codeArg, signalArg) => resolve(codeArg ?? (signalArg ? 1 : 0)));
  });
  console.log(`# lane ${lane}: ${files.length} files in ${((Date.now() - started) / 1000).toFixed(1)} s (exit ${code})`);
  return code;
};

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main();
}
