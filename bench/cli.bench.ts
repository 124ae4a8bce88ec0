/**
 * What a `cloudly` command costs in wall time, as an administrator feels it: the executable
 * (bin/cloudly.js under tsx) started as a child process, against a real Cloudly on loopback.
 * Baselines measured in the same run: a bare `node -e ''` and `node --import tsx -e ''` (the
 * loader alone). Results: bench/results/cli.md.
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
import { sized } from './helpers/smoke.js';

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
  const cloudly = new Cloudly({ config: { port: 0, host: '127.0.0.1', mongoDbUrl: null, dataDir, adminPassword: password, logLevel: 'silent' } });
  await cloudly.start();
  const { CLOUDLY_URL: _ignored, ...rest } = process.env;
  const env = { ...rest, CLOUDLY_CONFIG_DIR: configDir };
  try {
    await timeChild([executable, 'login', '--url', cloudly.baseUrl, '--username', 'admin'], env, `${password}\n`);
    const node = await median(['-e', ''], env);
    const tsx = await median(['--import', 'tsx', '-e', ''], env);
    const help = await median([executable, '--help'], env);
    const list = await median([executable, 'clusters', 'list', '-o', 'json'], env);
    const create = await median([executable, 'clusters', 'create', '--name', `bench-${Date.now()}`, '--dry-run', '-o', 'json'], env);
    const load = os.loadavg()[0].toFixed(1);
    const rows: Array<[string, number]> = [
      ["node -e '' (baseline)", node],
      ["node --import tsx -e ''", tsx],
      ['cloudly --help (no admin client)', help],
      ['cloudly clusters list -o json', list],
      ['cloudly clusters create --dry-run', create],
    ];
    console.log(`cli: median of ${runs} runs each, ${os.cpus().length} cores, load average ${load}`);
    for (const [name, ms] of rows) {
      console.log(`  ${name.padEnd(36)} ${ms.toFixed(0).padStart(6)} ms  ${(ms / node).toFixed(1)}x node  ${(ms / tsx).toFixed(2)}x tsx`);
    }
  } finally {
    await cloudly.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
    await fsp.rm(configDir, { recursive: true, force: true });
  }
};

await main();
