import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { cliExecutable } from './cli.fixture.js';
import { runNodeToExit, type IProcessRun } from './helpers/process.js';

/**
 * The `cloudly` executable runs the command line from a bundle it builds on first use and builds
 * again when a source it was made from changed; it answers exactly what the sources answer.
 */

// Inside the checkout, as the default is: the bundle loads its packages from the checkout's node_modules.
const cacheParent = path.join(path.dirname(cliExecutable), '..', '.nogit');
await fsp.mkdir(cacheParent, { recursive: true });
const cacheDir = path.join(await fsp.mkdtemp(path.join(cacheParent, 'cli-test-')), 'cli');
const manifestPath = path.join(cacheDir, 'manifest.json');

after(async () => {
  await fsp.rm(path.dirname(cacheDir), { recursive: true, force: true });
});

const cloudly = (argsArg: string[], envArg: Record<string, string> = {}): Promise<IProcessRun> => {
  const { CLOUDLY_URL: _url, CLOUDLY_CLI_SOURCE: _source, ...env } = process.env;
  return runNodeToExit([cliExecutable, ...argsArg], { ...env, CLOUDLY_CLI_CACHE_DIR: cacheDir, ...envArg });
};

test('first use builds the bundle; later runs use it; a changed source builds it again; the answers are the sources\' own', async () => {
  const fromSource = await cloudly(['--help'], { CLOUDLY_CLI_SOURCE: '1' });
  assert.equal(fromSource.code, 0, fromSource.stderr);
  await assert.rejects(fsp.stat(manifestPath), 'the source run builds nothing');

  const first = await cloudly(['--help']);
  assert.equal(first.code, 0, first.stderr);
  assert.equal(first.stdout, fromSource.stdout);
  const manifest = JSON.parse(await fsp.readFile(manifestPath, 'utf8'));
  assert.equal(manifest.entry, 'main.mjs');
  assert.ok(Object.keys(manifest.inputs).includes('ts/cli/main.ts'), 'the inputs name the sources');
  const built = await fsp.stat(manifestPath);

  const second = await cloudly(['--help']);
  assert.equal(second.stdout, fromSource.stdout);
  assert.equal((await fsp.stat(manifestPath)).mtimeMs, built.mtimeMs, 'not built again');

  // A source that no longer matches its stamp (as after an edit) makes the next run build again.
  manifest.inputs['ts/cli/run.ts'].mtimeMs = 1;
  await fsp.writeFile(manifestPath, JSON.stringify(manifest));
  const third = await cloudly(['--help']);
  assert.equal(third.stdout, fromSource.stdout);
  const rebuilt = JSON.parse(await fsp.readFile(manifestPath, 'utf8'));
  assert.notEqual(rebuilt.inputs['ts/cli/run.ts'].mtimeMs, 1, 'built again with the real stamp');

  const usage = await cloudly(['clusters', 'list', '--no-such-flag']);
  assert.equal(usage.code, 2, 'exit codes come through the bundle');
});
