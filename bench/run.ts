/**
 * Runs every `bench/*.bench.ts` one after another, each as its own child process
 * (`node --import tsx <file>`), with this process's environment (CLOSURE_BENCH_MIB and friends
 * pass through) and its output passed straight through. Exits non-zero if any benchmark failed,
 * after running the rest.
 *
 *   npm run bench
 *   node --import tsx bench/run.ts [name-filter]     e.g. `bench/run.ts foundation`
 *   npm run bench -- --smoke [name-filter]            tiny sizes: each bench runs to its end in seconds
 *                                                     (CI runs this; figures mean nothing, no results file is written)
 */
import { spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const benchDir = path.dirname(fileURLToPath(import.meta.url));
const projectDir = path.dirname(benchDir);

const args = process.argv.slice(2);
const smoke = args.includes('--smoke');

/**
 * A full run: one bench at a time, its output passed straight through (figures need the machine
 * to themselves). A smoke run: as many at once as there are cores, each one's output printed
 * whole when it ends (smoke figures mean nothing, so sharing the machine costs nothing).
 */
const runOne = (fileArg: string): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', fileArg], {
      cwd: projectDir,
      env: smoke ? { ...process.env, CLOUDLY_BENCH_SMOKE: '1' } : process.env,
      stdio: smoke ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    });
    let output = '';
    child.stdout?.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
    child.stderr?.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, output }));
  });

const main = async (): Promise<number> => {
  const filter = args.find((argArg) => !argArg.startsWith('--'));
  const files = (await fsp.readdir(benchDir))
    .filter((name) => name.endsWith('.bench.ts'))
    .filter((name) => !filter || name.includes(filter))
    .sort();
  if (files.length === 0) {
    console.error(`no benchmark in ${benchDir}${filter ? ` matches "${filter}"` : ''}`);
    return 1;
  }
  const runStarted = performance.now();
  const results: Array<{ file: string; ok: boolean; detail: string; seconds: number }> = [];
  const queue = [...files];
  const lanes = smoke ? Math.max(1, os.availableParallelism()) : 1;
  await Promise.all(Array.from({ length: lanes }, async () => {
    for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
      if (!smoke) {
        console.log(`\n=== bench/${file}`);
      }
      const started = performance.now();
      let ok = false;
      let detail: string;
      let output = '';
      try {
        const run = await runOne(path.join('bench', file));
        ok = run.code === 0;
        detail = run.signal ? `killed by ${run.signal}` : `exit ${run.code}`;
        output = run.output;
      } catch (error) {
        detail = `could not start: ${(error as Error).message}`;
      }
      if (smoke) {
        console.log(`\n=== bench/${file} (smoke)\n${output}`);
      }
      results.push({ file, ok, detail, seconds: (performance.now() - started) / 1000 });
    }
  }));
  results.sort((a, b) => a.file.localeCompare(b.file));
  console.log(`\n=== summary${smoke ? ' (smoke)' : ''}: ${((performance.now() - runStarted) / 1000).toFixed(1)} s`);
  for (const result of results) {
    console.log(`${result.ok ? 'ok  ' : 'FAIL'} bench/${result.file.padEnd(28)} ${result.detail.padEnd(10)} ${result.seconds.toFixed(1)} s`);
  }
  return results.every((result) => result.ok) ? 0 : 1;
};

main().then(
  (codeArg) => process.exit(codeArg),
  (error: unknown) => {
    console.error('bench runner failed:', error);
    process.exit(1);
  },
);
