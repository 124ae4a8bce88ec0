import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { serverHeapGrowingPercent, serverNodeFlags } from '../ts/core/runtimetuning.js';

const projectRoot = path.resolve(import.meta.dirname, '..');

/** Runs a script under tsx in a child with `--expose-gc`; resolves with its stdout. */
const runChild = (scriptArg: string): Promise<string> => new Promise((resolve, reject) => {
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', scriptArg], {
    cwd: projectRoot, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  child.stderr.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  child.once('error', reject);
  child.once('exit', (code) => (code === 0 ? resolve(output) : reject(new Error(`child exited ${code}: ${output}`))));
});

/** V8's own report of the growing factor it applied at the full collections the script forces. */
const factorScript = (tuneArg: boolean): string => `
  import * as v8 from 'node:v8';
  ${tuneArg ? "const { tuneServerRuntime } = await import('./ts/core/runtimetuning.ts'); tuneServerRuntime();" : ''}
  v8.setFlagsFromString('--trace-gc-verbose');
  globalThis.gc();
  const kept = Array.from({ length: 200000 }, (_, i) => ({ i, text: 'x' + i }));
  globalThis.gc();
  console.log('kept', kept.length);
`;

test('the server tuning makes V8 grow the heap by the configured factor after a full collection; untuned it does not', async () => {
  const expected = (1 + serverHeapGrowingPercent / 100).toFixed(1);
  const tuned = await runChild(factorScript(true));
  const untuned = await runChild(factorScript(false));
  // "[HeapController] Limit: old size: … KB, new limit: … KB (2.0)": the factor the new limit used.
  const factors = (outputArg: string): string[] =>
    [...outputArg.matchAll(/\[HeapController\] Limit: .*\(([0-9.]+)\)/g)].map((matchArg) => matchArg[1]);
  assert.ok(factors(tuned).length > 0, `V8 reported no growing factor:\n${tuned}`);
  assert.ok(factors(tuned).every((factorArg) => factorArg === expected), `tuned factors ${factors(tuned).join(', ')}`);
  // The control: a fresh process without the tuning gets V8's own dynamic factor (4.0 for a
  // young, small heap), so the check above is not passing for a reason of V8's own.
  assert.ok(factors(untuned).length > 0);
  assert.ok(factors(untuned).every((factorArg) => factorArg !== expected), `untuned factors ${factors(untuned).join(', ')}`);
});

test('npm start, npm run start:prod and the Dockerfile pass every node flag of serverNodeFlags', async () => {
  const scripts = (JSON.parse(await fs.readFile(path.join(projectRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const dockerfile = await fs.readFile(path.join(projectRoot, 'Dockerfile'), 'utf8');
  const command = /^CMD (\[.*\])$/m.exec(dockerfile)?.[1];
  assert.ok(command, 'the Dockerfile has an exec-form CMD');
  const dockerArguments = JSON.parse(command) as string[];
  assert.ok(serverNodeFlags.length > 0);
  for (const flag of serverNodeFlags) {
    for (const name of ['start', 'start:prod']) {
      const words = scripts[name].split(/\s+/);
      assert.equal(words[0], 'node', `${name} runs node`);
      // Node options must come before the script (or the loader) to reach node at all.
      const scriptIndex = words.findIndex((wordArg) => wordArg === '--import' || wordArg.endsWith('.js') || wordArg.endsWith('.ts'));
      assert.ok(words.indexOf(flag) > 0 && words.indexOf(flag) < scriptIndex, `${name} passes ${flag} to node: ${scripts[name]}`);
    }
    assert.equal(dockerArguments[0], 'node');
    assert.ok(dockerArguments.indexOf(flag) > 0 && dockerArguments.indexOf(flag) < dockerArguments.indexOf('dist/cli.js'), `the Dockerfile CMD passes ${flag}`);
  }
});
