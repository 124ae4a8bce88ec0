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
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const benchDir = path.dirname(fileURLToPath(import.meta.url));
const projectDir = path.dirname(benchDir);

const args = process.argv.slice(2);
const smoke = args.includes('--smoke');

const runOne = (fileArg: string): Promise<{ code: number | null; signal: NodeJS.Signals | null }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', fileArg], {
      cwd: projectDir,
      env: smoke ? { ...process.env, CLOUDLY_BENCH_SMOKE: '1' } : process.env,
      stdio: 'inherit',
    });
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal }));
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
  const results: Array<{ file: string; ok: boolean; detail: string; seconds: number }> = [];
  for (const file of files) {
    console.log(`\n=== bench/${file}`);
    const started = performance.now();
    let ok = false;
    let detail: string;
    try {
      const { code, signal } = await runOne(path.join('bench', file));
      ok = code === 0;
      detail = signal ? `killed by ${signal}` : `exit ${code}`;
    } catch (error) {
      detail = `could not start: ${(error as Error).message}`;
    }
    results.push({ file, ok, detail, seconds: (performance.now() - started) / 1000 });
  }
  console.log('\n=== summary');
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
