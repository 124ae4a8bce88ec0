/**
 * The production start path: `scripts/build.ts` transpiles ts/ file by file, and the result runs
 * under plain `node` (as `npm run start:prod` and the Dockerfile do) with the production
 * allocator environment: it listens, answers /livez, logs an administrator in, stores a cluster,
 * and stops with exit code 0 on SIGTERM.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { productionAllocatorEnv, projectDir } from '../scripts/build.js';
import { serverLauncher } from './helpers/process.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { snapshotFileName } from '../ts/core/database.js';
import { readSnapshotFile } from '../ts/core/snapshotfile.js';

const execFileAsync = promisify(execFile);

test('the transpiled server starts under plain node, serves an admin, and stops cleanly on SIGTERM', async () => {
  // Inside node_modules so the built files resolve packages exactly as dist/ does.
  const outdir = path.join(projectDir, 'node_modules', '.cache', `cloudly-build-test-${process.pid}-${randomBytes(4).toString('hex')}`);
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-build-test-'));
  const password = randomBytes(12).toString('hex');
  let child: ReturnType<typeof spawn> | null = null;
  try {
    const built = await execFileAsync(process.execPath, ['--import', 'tsx', path.join(projectDir, 'scripts', 'build.ts'), '--outdir', outdir], { cwd: projectDir });
    assert.match(built.stdout, /^transpiled \d+ files into /);
    assert.ok(fs.existsSync(path.join(outdir, 'cli.js')), 'cli.js is built');
    assert.ok(fs.existsSync(path.join(outdir, 'manager.backup')), 'sub-folders keep their layout');
    const cliSource = await fsp.readFile(path.join(outdir, 'cli.js'), 'utf8');
    assert.match(cliSource, /(from |import\()"\.\/classes\.cloudly\.js"/, '.js import specifiers are kept');

    // Through the launcher, as `npm run start:prod` and the Dockerfile start dist/cli.js.
    const spawned = spawn(serverLauncher, ['--node', path.join(outdir, 'cli.js')], {
      cwd: projectDir,
      // No tsx loader anywhere: the built files must run on their own.
      env: {
        PATH: process.env.PATH ?? '',
        ...productionAllocatorEnv,
        MONGOMS_DISABLE_POSTINSTALL: '1',
        CLOUDLY_PORT: '0',
        CLOUDLY_HOST: '127.0.0.1',
        CLOUDLY_DATA_DIR: dataDir,
        CLOUDLY_ADMIN_PASSWORD: password,
        CLOUDLY_LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = spawned;
    let output = '';
    spawned.stderr!.on('data', (chunkArg: Buffer) => {
      output += chunkArg.toString('utf8');
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      spawned.once('exit', (code, signal) => resolve({ code, signal }));
    });
    const baseUrl = await new Promise<string>((resolve, reject) => {
      let stdout = '';
      // Bounded generously: a loaded machine (test files run in parallel) starts a process slowly.
      const timer = setTimeout(() => reject(new Error(`no "listening" line within 60 s:\n${stdout}${output}`)), 60_000);
      spawned.stdout!.on('data', (chunkArg: Buffer) => {
        stdout += chunkArg.toString('utf8');
        const url = /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*"msg":"cloudly is listening"/.exec(stdout)?.[1];
        if (url) {
          clearTimeout(timer);
          resolve(url);
        }
      });
      void exited.then(({ code }) => {
        clearTimeout(timer);
        reject(new Error(`server exited (${code}) before listening:\n${stdout}${output}`));
      });
    });

    const live = await fetch(`${baseUrl}/livez`);
    assert.equal(live.status, 200);
    assert.deepEqual(await live.json(), { status: 'live' });

    const admin = new CloudlyAdminClient(baseUrl);
    const identity = await admin.login('admin', password);
    assert.equal(identity.name, 'admin');
    assert.equal(identity.role, 'admin');
    const { cluster } = await admin.call('createCluster', { name: 'built' });
    const { clusters } = await admin.call('getClusters', {});
    assert.deepEqual(clusters.map((clusterArg) => clusterArg.id), [cluster.id]);

    spawned.kill('SIGTERM');
    const { code, signal } = await exited;
    assert.equal(signal, null, output);
    assert.equal(code, 0, output);
    child = null;
    // A graceful stop compacts the embedded database into its snapshot, so the cluster is in it.
    const snapshot = await readSnapshotFile(path.join(dataDir, snapshotFileName));
    assert.ok(snapshot.collections.find((c) => c.name === 'CloudlyCluster')?.docs.some((doc) => doc.name === 'built'));
  } finally {
    child?.kill('SIGKILL');
    await fsp.rm(outdir, { recursive: true, force: true });
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
