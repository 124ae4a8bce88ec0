import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { waitFor } from './helpers/cloudly.js';
import { cloudlyProcessEnv, exitOf, processStartBoundMs, serverLauncher, startCloudlyProcess } from './helpers/process.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { DataDirectoryLock, DataDirectoryLockedError, lockFileName, processState } from '../ts/core/datadirlock.js';

/**
 * The data directory lock and a zombie owner: a process that has ended but whose parent has not
 * collected its exit status still has a pid (kill 0 succeeds), yet it holds nothing.
 */

const startTimeOf = async (pidArg: number): Promise<string> => {
  const stat = await fsp.readFile(`/proc/${pidArg}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
};

/**
 * A real zombie to be: a shell starts a child, prints its pid and becomes `sleep`, which never
 * reaps it; once the child is killed it stays a zombie. Returns its pid and the parent to stop,
 * once the parent is `sleep`: a child killed while the shell still ran would be reaped by it.
 */
const makeOrphanedChild = async (): Promise<{ pid: number; parent: ChildProcess }> => {
  const parent = spawn('sh', ['-c', 'sleep 120 & echo $!; exec sleep 120'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const pid = await new Promise<number>((resolve, reject) => {
    parent.stdout!.once('data', (chunkArg: Buffer) => resolve(Number(chunkArg.toString().trim())));
    parent.once('exit', () => reject(new Error('the zombie maker exited early')));
  });
  await waitFor(async () => (await fsp.readFile(`/proc/${parent.pid}/comm`, 'utf8')).trim() === 'sleep', 'the zombie maker became sleep', 10_000);
  return { pid, parent };
};

describe('data directory lock: a zombie owner is no owner', () => {
  test('a lock whose owner is a zombie (state Z in /proc/<pid>/stat) is stale and replaced; a live owner still refuses', async () => {
    if (process.platform !== 'linux') {
      return;
    }
    const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-lock-'));
    const { pid, parent } = await makeOrphanedChild();
    try {
      const startTime = await startTimeOf(pid);
      const lockPath = path.join(dataDir, lockFileName);
      // While the owner runs, its lock holds.
      await fsp.writeFile(lockPath, `${JSON.stringify({ pid, startTime })}\n`);
      await assert.rejects(() => new DataDirectoryLock(dataDir).acquire(), DataDirectoryLockedError);
      // kill -9, and nobody reaps it.
      process.kill(pid, 'SIGKILL');
      await waitFor(() => processState(pid) === 'Z', 'the child ended and is not reaped', 10_000);
      // kill(pid, 0) still succeeds for a zombie: only its state tells it is gone.
      assert.doesNotThrow(() => process.kill(pid, 0));
      const lock = new DataDirectoryLock(dataDir);
      const { replacedStalePid } = await lock.acquire();
      assert.equal(replacedStalePid, pid);
      assert.equal(JSON.parse(await fsp.readFile(lockPath, 'utf8')).pid, process.pid);
      await lock.release();
    } finally {
      parent.kill('SIGKILL');
      await exitOf(parent);
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('a Cloudly killed with kill -9 whose parent does not reap it (a zombie) does not keep the next start out', async () => {
    if (process.platform !== 'linux') {
      return;
    }
    const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-lock-zombie-'));
    const env = cloudlyProcessEnv(dataDir);
    // The shell starts Cloudly in the background, prints its pid and becomes `sleep`, which never reaps it.
    const parent = spawn('sh', ['-c', `"${serverLauncher}" --source & echo "pid=$!"; exec sleep 300`], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    parent.stdout!.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
    parent.stderr!.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
    try {
      await waitFor(() => /cloudly is listening/.test(output), 'the first Cloudly listens', processStartBoundMs);
      const pid = Number(/pid=(\d+)/.exec(output)![1]);
      const baseUrl = /"url":"(http:\/\/[^"]+)"/.exec(output)![1];
      const admin = new CloudlyAdminClient(baseUrl);
      await admin.login('admin', 'process-admin-password');
      await admin.call('createCluster', { name: 'before-the-zombie' });
      admin.close();
      process.kill(pid, 'SIGKILL');
      await waitFor(() => processState(pid) === 'Z', 'the killed Cloudly is a zombie', 10_000);
      const second = await startCloudlyProcess(env);
      try {
        assert.match(second.output(), new RegExp(`"stalePid":${pid}.*replaced the lock of a Cloudly that is no longer running`));
        const admin2 = new CloudlyAdminClient(second.baseUrl);
        await admin2.login('admin', 'process-admin-password');
        const names = (await admin2.call('getClusters', {})).clusters.map((cluster) => cluster.name);
        assert.deepEqual(names, ['before-the-zombie']);
        admin2.close();
      } finally {
        second.child.kill('SIGTERM');
        assert.equal(await exitOf(second.child), 0);
      }
    } finally {
      parent.kill('SIGKILL');
      await exitOf(parent);
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});
