import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cliExecutable, createCli } from './cli.fixture.js';
import { startTestCloudly, testAdminPassword } from './helpers/cloudly.js';
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

/** The packages (node_modules/<name>) among the paths a module trace recorded, sorted. */
const packagesIn = (modulesArg: string[]): string[] => [...new Set(modulesArg
  .map((modulePath) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(modulePath)?.[1])
  .filter((name): name is string => name !== undefined))].sort();

test('`clusters list` from the bundle loads commander and no other package (not @api.global/typedrequest, not mongodb, not ws); its answers and refusals are unchanged', async () => {
  const t = await startTestCloudly();
  const cli = await createCli({ binary: true });
  const traceDir = await fsp.mkdtemp(path.join(path.dirname(cacheDir), 'trace-'));
  try {
    const env = { CLOUDLY_CLI_CACHE_DIR: cacheDir };
    const login = await cli.run(['login', '--url', t.baseUrl, '--username', 'admin'], `${testAdminPassword}\n`, { env });
    assert.equal(login.code, 0, login.stderr);
    await t.createCluster('traced');
    let traces = 0;
    const traced = async (argsArg: string[]): Promise<{ run: IProcessRun; modules: string[] }> => {
      const traceFile = path.join(traceDir, `trace-${traces++}.txt`);
      const { CLOUDLY_URL: _url, CLOUDLY_CLI_SOURCE: _source, ...rest } = process.env;
      const run = await runNodeToExit(['--import', fileURLToPath(new URL('./helpers/moduletrace.mjs', import.meta.url)), cliExecutable, ...argsArg],
        { ...rest, ...env, CLOUDLY_CONFIG_DIR: cli.configDir, CLOUDLY_MODULE_TRACE: traceFile });
      return { run, modules: (await fsp.readFile(traceFile, 'utf8')).split('\n').filter(Boolean) };
    };

    const list = await traced(['clusters', 'list', '-o', 'json']);
    assert.equal(list.run.code, 0, list.run.stderr);
    assert.deepEqual(JSON.parse(list.run.stdout), await t.admin.call('getClusters', {}));
    // The trace saw the command run: the bundle's entry and the admin client's chunk.
    const bundled = list.modules.filter((modulePath) => modulePath.startsWith(cacheDir)).map((modulePath) => path.basename(modulePath));
    assert.ok(bundled.includes('main.mjs') && bundled.some((name) => name.startsWith('admin-')), `bundle modules traced: ${bundled.join(', ')}`);
    const packages = packagesIn(list.modules);
    assert.ok(!packages.includes('@api.global/typedrequest'), `typedrequest loaded: ${packages.join(', ')}`);
    assert.deepEqual(packages, ['commander']);

    // A refusal reads as before (code, reasons, exit 1) and loads no more.
    const refused = await traced(['clusters', 'get', '--cluster', 'no-such-cluster']);
    assert.equal(refused.run.code, 1);
    assert.equal(refused.run.stderr, 'refused: not-found\n  cluster-not-found\n  cluster no-such-cluster does not exist\n');
    assert.deepEqual(packagesIn(refused.modules), ['commander']);
  } finally {
    await t.stop();
    await cli.dispose();
    await fsp.rm(traceDir, { recursive: true, force: true });
  }
});
