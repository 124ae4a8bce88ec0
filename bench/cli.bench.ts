/**
 * What a `cloudly` command costs in wall time, as an administrator feels it: the executable
 * (bin/cloudly.js) started as a child process against a real Cloudly on loopback holding a few
 * clusters, run from its bundle (built once before timing, as its first use does), through
 * `npx cloudly` from the checkout, and from the sources under tsx (CLOUDLY_CLI_SOURCE=1), one after
 * the other in the same run. The aims (issue 35): `cloudly clusters list` under 0.4 s and
 * `cloudly --help` under 0.5 s. Baselines from the same run: a bare `node -e ''`, `npx --version`
 * (npm's own start) and `node --import tsx -e ''` (the loader alone). Results: bench/results/cli.md.
 *
 *   node --import tsx bench/cli.bench.ts          CLI_BENCH_RUNS=9 for more samples
 */
import { spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Cloudly } from '../ts/classes.cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { reportResults, sized } from './helpers/smoke.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const executable = path.join(root, 'bin', 'cloudly.js');
const runs = Number(process.env.CLI_BENCH_RUNS ?? sized(5, 1));
const password = 'bench-cli-password-0123';

/** Runs `node <args>` (or `npx <args>` when `commandArg` says so) from the checkout to its end; answers the wall time. */
const timeChild = (argsArg: string[], envArg: NodeJS.ProcessEnv, inputArg = '', commandArg = process.execPath): Promise<number> => new Promise((resolve, reject) => {
  const started = performance.now();
  const child = spawn(commandArg, argsArg, { env: envArg, cwd: root, stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
  child.on('error', reject);
  child.on('close', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`${argsArg.join(' ')}: exit ${code}: ${stderr}`))));
  child.stdin.end(inputArg);
});

const median = async (argsArg: string[], envArg: NodeJS.ProcessEnv, commandArg = process.execPath): Promise<number> => {
  const samples: number[] = [];
  for (let index = 0; index < runs; index++) {
    samples.push(await timeChild(argsArg, envArg, '', commandArg));
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
};

/**
 * The CPU time (user + system) a `node <args>` child used, median of the runs, through
 * /usr/bin/time; null where that is missing. On a loaded machine the wall time is mostly waiting
 * for a core; the CPU time is what the command itself costs.
 */
const timeBinary = '/usr/bin/time';
const medianCpu = async (argsArg: string[], envArg: NodeJS.ProcessEnv): Promise<number | null> => {
  try {
    await fsp.access(timeBinary);
  } catch {
    return null;
  }
  const report = path.join(os.tmpdir(), `cloudly-bench-cli-cpu-${process.pid}.txt`);
  const samples: number[] = [];
  for (let index = 0; index < runs; index++) {
    await timeChild(['-f', '%U %S', '-o', report, process.execPath, ...argsArg], envArg, '', timeBinary);
    const [user, system] = (await fsp.readFile(report, 'utf8')).trim().split('\n').pop()!.split(' ').map(Number);
    samples.push((user + system) * 1000);
  }
  await fsp.rm(report, { force: true });
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
};

const main = async (): Promise<void> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-cli-'));
  const configDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-cli-config-'));
  // The bundle's own directory, inside the checkout (its packages load from node_modules).
  const cacheDir = path.join(root, '.nogit', `cli-bench-${process.pid}`);
  const cloudly = new Cloudly({ config: { port: 0, host: '127.0.0.1', mongoDbUrl: null, dataDir, adminPassword: password, logLevel: 'silent' } });
  await cloudly.start();
  const { CLOUDLY_URL: _ignored, CLOUDLY_CLI_SOURCE: _source, ...rest } = process.env;
  const built = { ...rest, CLOUDLY_CONFIG_DIR: configDir, CLOUDLY_CLI_CACHE_DIR: cacheDir };
  const source = { ...built, CLOUDLY_CLI_SOURCE: '1' };
  try {
    await timeChild([executable, 'login', '--url', cloudly.baseUrl, '--username', 'admin'], source, `${password}\n`);
    const admin = new CloudlyAdminClient(cloudly.baseUrl);
    await admin.login('admin', password);
    for (let index = 0; index < sized(20, 2); index++) {
      await admin.call('createCluster', { name: `bench-listed-${index}` });
    }
    admin.close();
    // The first use builds the bundle; its cost is measured once, then every run uses it.
    const firstUse = await timeChild([executable, '--help'], built);
    const node = await median(['-e', ''], built);
    const nodeCpu = await medianCpu(['-e', ''], built);
    const npx = await median(['--version'], built, 'npx');
    const tsx = await median(['--import', 'tsx', '-e', ''], built);
    const commands: Array<{ name: string; args: string[]; aimMs?: number }> = [
      { name: 'cloudly --help', args: ['--help'], aimMs: 500 },
      { name: 'cloudly clusters list', args: ['clusters', 'list'], aimMs: 400 },
      { name: 'cloudly clusters list -o json', args: ['clusters', 'list', '-o', 'json'] },
      { name: 'cloudly clusters create --dry-run', args: ['clusters', 'create', '--name', `bench-${Date.now()}`, '--dry-run', '-o', 'json'] },
    ];
    const rows: Array<{ name: string; aimMs?: number; builtMs: number; builtCpuMs: number | null; npxMs: number; sourceMs: number }> = [];
    for (const command of commands) {
      rows.push({
        name: command.name,
        aimMs: command.aimMs,
        builtMs: await median([executable, ...command.args], built),
        builtCpuMs: await medianCpu([executable, ...command.args], built),
        npxMs: await median(['cloudly', ...command.args], built, 'npx'),
        sourceMs: await median([executable, ...command.args], source),
      });
    }
    const load = os.loadavg().map((value) => value.toFixed(1)).join(' / ');
    const verdict = (msArg: number, aimArg?: number): string => (aimArg === undefined ? '' : msArg < aimArg ? ` (aim < ${aimArg} ms: met)` : ` (aim < ${aimArg} ms: **not met**)`);
    await reportResults('cli.md', [
      '# `cloudly` command cost (bench/cli.bench.ts)',
      '',
      `Median of ${runs} runs each, ${os.cpus().length} cores, load average ${load} (1 / 5 / 15 min) when the run ended, ${new Date().toISOString().slice(0, 16)} UTC.`,
      'The ratios to `node -e \'\'` are the figures to read when the load is high. "bin": bin/cloudly.js (the package\'s',
      '`cloudly` bin) running its bundle of ts/cli; "npx": `npx cloudly …` from the checkout (npm\'s own start and its',
      'look-up of the package come first, then the same bin); "source": the bin with CLOUDLY_CLI_SOURCE=1',
      '(TypeScript through tsx, as before the bundle). The server holds ' + sized(20, 2) + ' clusters.',
      '',
      `Baselines: \`node -e ''\` ${node.toFixed(0)} ms (CPU ${nodeCpu === null ? '–' : `${nodeCpu.toFixed(0)} ms`}), \`npx --version\` ${npx.toFixed(0)} ms, \`node --import tsx -e ''\` ${tsx.toFixed(0)} ms. The first use (building the bundle, then \`--help\`): ${firstUse.toFixed(0)} ms.`,
      '',
      '"bin CPU": user + system time of the bin\'s process (/usr/bin/time), what the command costs whatever the load.',
      '',
      '| command | bin | bin / node | bin CPU | npx | npx − npx --version | source |',
      '| --- | --- | --- | --- | --- | --- | --- |',
      ...rows.map((row) => `| \`${row.name}\` | ${row.builtMs.toFixed(0)} ms${verdict(row.builtMs, row.aimMs)} | ${(row.builtMs / node).toFixed(2)} | ${row.builtCpuMs === null ? '–' : `${row.builtCpuMs.toFixed(0)} ms`} | ${row.npxMs.toFixed(0)} ms${verdict(row.npxMs, row.aimMs)} | ${(row.npxMs - npx).toFixed(0)} ms | ${row.sourceMs.toFixed(0)} ms |`),
      '',
    ]);
  } finally {
    await cloudly.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
    await fsp.rm(configDir, { recursive: true, force: true });
    await fsp.rm(cacheDir, { recursive: true, force: true });
  }
};

await main();
