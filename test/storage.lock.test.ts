import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { waitFor } from './helpers/cloudly.js';
import { exitOf } from './helpers/process.js';
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
 * reaps it; once the child is killed it stays a zombie. Returns its pid and the parent to stop.
 */
const makeOrphanedChild = async (): Promise<{ pid: number; parent: ChildProcess }> => {
  const parent = spawn('sh', ['-c', 'sleep 120 & echo $!; exec sleep 120'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const pid = await new Promise<number>((resolve, reject) => {
    parent.stdout!.once('data', (chunkArg: Buffer) => resolve(Number(chunkArg.toString().trim())));
    parent.once('exit', () => reject(new Error('the zombie maker exited early')));
  });
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
});
