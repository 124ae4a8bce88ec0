/**
 * What a `cloudly` command costs in wall time, as an administrator feels it: the executable
 * (bin/cloudly.js) started as a child process against a real Cloudly on loopback, run from its
 * bundle (built once before timing, as its first use does) and from the sources under tsx
 * (CLOUDLY_CLI_SOURCE=1), one after the other in the same run. Baselines from the same run: a
 * bare `node -e ''` and `node --import tsx -e ''` (the loader alone). Results: bench/results/cli.md.
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
import { reportResults, sized } from './helpers/smoke.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const executable = path.join(root, 'bin', 'cloudly.js');
const runs = Number(process.env.CLI_BENCH_RUNS ?? sized(5, 1));
const password = 'bench-cli-password-0123';

const timeChild = (argsArg: string[], envArg: NodeJS.ProcessEnv, inputArg = ''): Promise<number> => new Promise((resolve, reject) => {
  const started = performance.now();
  const child = spawn(process.execPath, argsArg, { env: envArg, stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
  child.on('error', reject);
  child.on('close', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`${argsArg.join(' ')}: exit ${code}: ${stderr}`))));
  child.stdin.end(inputArg);
});

const median = async (argsArg: string[], envArg: NodeJS.ProcessEnv): Promise<number> => {
  const samples: number[] = [];
  for (let index = 0; index < runs; index++) {
    samples.push(await timeChild(argsArg, envArg));
  }
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
    // The first use builds the bundle; its cost is measured once, then every run uses it.
    const firstUse = await timeChild([executable, '--help'], built);
    const node = await median(['-e', ''], built);
    const tsx = await median(['--import', 'tsx', '-e', ''], built);
    const rows: Array<[string, number, number]> = [
      ['cloudly --help', await median([executable, '--help'], built), await median([executable, '--help'], source)],
      ['cloudly clusters list -o json', await median([executable, 'clusters', 'list', '-o', 'json'], built), await median([executable, 'clusters', 'list', '-o', 'json'], source)],
      ['cloudly clusters create --dry-run', await median([executable, 'clusters', 'create', '--name', `bench-${Date.now()}`, '--dry-run', '-o', 'json'], built),
        await median([executable, 'clusters', 'create', '--name', `bench-${Date.now()}`, '--dry-run', '-o', 'json'], source)],
    ];
    const load = os.loadavg()[0].toFixed(1);
    await reportResults('cli.md', [
      '# `cloudly` command cost (bench/cli.bench.ts)',
      '',
      `Median of ${runs} runs each, ${os.cpus().length} cores, load average ${load} when the run ended; the ratios are the figures to`,
      'read when the load is high. "built": bin/cloudly.js running its bundle of ts/cli; "source": the',
      'same executable with CLOUDLY_CLI_SOURCE=1 (TypeScript through tsx, as before the bundle).',
      '',
      `Baselines: \`node -e ''\` ${node.toFixed(0)} ms, \`node --import tsx -e ''\` ${tsx.toFixed(0)} ms. The first use (building the bundle, then \`--help\`): ${firstUse.toFixed(0)} ms.`,
      '',
      '| command | built | source | source / built | built / node |',
      '| --- | --- | --- | --- | --- |',
      ...rows.map(([name, builtMs, sourceMs]) => `| \`${name}\` | ${builtMs.toFixed(0)} ms | ${sourceMs.toFixed(0)} ms | ${(sourceMs / builtMs).toFixed(2)} | ${(builtMs / node).toFixed(2)} |`),
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
