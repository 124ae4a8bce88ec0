import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { refusalOf, waitFor } from './helpers/cloudly.js';
import { cloudlyProcessEnv, exitOf, killHard, startCloudlyProcess, waitForQuietDataDir, type ICloudlyProcess } from './helpers/process.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';

/**
 * A real Cloudly child process meets a fault at each storage step (injected through the fault
 * file, storagefaults.ts, or a really full file system), is killed with SIGKILL, and is started
 * again: every write it acknowledged is there, none it refused is.
 */

const tempDir = (prefixArg: string) => fsp.mkdtemp(path.join(os.tmpdir(), prefixArg));

const loggedIn = async (processArg: ICloudlyProcess): Promise<CloudlyAdminClient> => {
  const admin = new CloudlyAdminClient(processArg.baseUrl);
  await admin.login('admin', 'process-admin-password');
  return admin;
};

const namesOf = async (adminArg: CloudlyAdminClient): Promise<string[]> =>
  (await adminArg.call('getClusters', {})).clusters.map((cluster) => cluster.name).sort();

const countOf = (textArg: string, patternArg: RegExp): number => (textArg.match(new RegExp(patternArg.source, 'g')) ?? []).length;

/** Creates a cluster; true when acknowledged, false when refused `unavailable` (anything else fails the test). */
const tryCreate = async (adminArg: CloudlyAdminClient, nameArg: string): Promise<boolean> => {
  try {
    await adminArg.call('createCluster', { name: nameArg });
    return true;
  } catch (error) {
    const data = (error as { errorData?: { code?: string } }).errorData;
    assert.equal(data?.code, 'unavailable', `${nameArg} was refused with ${JSON.stringify(data) ?? String(error)}`);
    return false;
  }
};

interface IChainCase {
  fault: string;
  /** What the fault makes visible: a refused write, or a failed / completed compaction. */
  shows: 'refusal' | 'acknowledged' | 'compactionFailed' | 'compacted';
}

const chain: IChainCase[] = [
  { fault: 'journal.write=ENOSPC', shows: 'refusal' },
  { fault: 'journal.write=EIO', shows: 'refusal' },
  { fault: 'journal.write=SHORT', shows: 'acknowledged' },
  { fault: 'journal.sync=EIO', shows: 'refusal' },
  { fault: 'snapshot.write=ENOSPC', shows: 'compactionFailed' },
  { fault: 'snapshot.write=EIO', shows: 'compactionFailed' },
  { fault: 'snapshot.write=SHORT', shows: 'compacted' },
  { fault: 'snapshot.write=SILENT', shows: 'compactionFailed' },
  { fault: 'snapshot.sync=EIO', shows: 'compactionFailed' },
  { fault: 'snapshot.link=ENOSPC', shows: 'compactionFailed' },
  { fault: 'snapshot.rename=EIO', shows: 'compactionFailed' },
  { fault: 'journal.unlink=EIO', shows: 'compacted' },
];

describe('kill -9 after a fault at each storage step loses no acknowledged write', () => {
  test('one data directory through every fault in turn, each followed by kill -9 and a restart', async () => {
    const dataDir = await tempDir('cloudly-crash-chain-');
    const faultDir = await tempDir('cloudly-faults-');
    const faultFile = path.join(faultDir, 'faults');
    const env = cloudlyProcessEnv(dataDir, {
      CLOUDLY_TEST_JOURNAL_FAILPOINT: faultFile,
      CLOUDLY_JOURNAL_COMPACT_BYTES: '4096',
      CLOUDLY_COMPACT_RETRY_MS: '200',
    });
    const acknowledged: string[] = [];
    const refused: string[] = [];
    let running = await startCloudlyProcess(env);
    try {
      let serial = 0;
      const create = async (adminArg: CloudlyAdminClient): Promise<boolean> => {
        const name = `c-${++serial}`;
        const ok = await tryCreate(adminArg, name);
        (ok ? acknowledged : refused).push(name);
        return ok;
      };
      for (const { fault, shows } of chain) {
        const admin = await loggedIn(running);
        await create(admin);
        await fsp.writeFile(faultFile, fault);
        if (shows === 'refusal') {
          assert.equal(await create(admin), false, `${fault}: the write is refused`);
        } else if (shows === 'acknowledged') {
          assert.equal(await create(admin), true, `${fault}: the short write is continued and the write answered`);
        } else {
          const pattern = shows === 'compacted' ? /embedded database compacted/ : /embedded database compaction failed/;
          const before = countOf(running.output(), pattern);
          for (let attempt = 0; countOf(running.output(), pattern) === before; attempt++) {
            assert.ok(attempt < 300, `${fault}: a compaction ${shows === 'compacted' ? 'completed' : 'failed'}`);
            await create(admin);
          }
          // Writes are still answered while compaction fails.
          assert.equal(await create(admin), true, `${fault}: writes go on`);
        }
        admin.close();
        await killHard(running.child);
        await fsp.rm(faultFile, { force: true });
        running = await startCloudlyProcess(env);
        const names = await namesOf(await loggedIn(running));
        for (const name of acknowledged) {
          assert.ok(names.includes(name), `${fault}: acknowledged ${name} survived kill -9`);
        }
        for (const name of refused) {
          assert.ok(!names.includes(name), `${fault}: refused ${name} did not come back`);
        }
      }
    } finally {
      running.child.kill('SIGTERM');
      await exitOf(running.child);
      await fsp.rm(dataDir, { recursive: true, force: true });
      await fsp.rm(faultDir, { recursive: true, force: true });
    }
  });
});

const canMountTmpfs = (): string | null => {
  if (process.platform !== 'linux') {
    return 'needs Linux tmpfs';
  }
  if (process.getuid?.() !== 0) {
    return 'needs root to mount a small tmpfs (run as root to include the real full-disk test)';
  }
  return null;
};

describe('a really full file system', () => {
  const skip = canMountTmpfs();
  test('a 6 MiB tmpfs filled to 40 KiB free: writes are refused or kept, compaction never replaces a good snapshot with a short one, and kill -9 loses nothing', { skip: skip ?? false }, async (t) => {
    const mountPoint = await tempDir('cloudly-fulldisk-');
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=6m,mode=0700', 'tmpfs', mountPoint]);
    } catch (error) {
      t.skip(`could not mount a tmpfs here: ${(error as Error).message}`);
      await fsp.rm(mountPoint, { recursive: true, force: true });
      return;
    }
    const dataDir = path.join(mountPoint, 'data');
    const filler = path.join(mountPoint, 'filler');
    // Compactions often enough that one falls into the full phase (each write now brings what the
    // controllers derive for it, so the journal passes a larger threshold before the disk fills).
    const env = cloudlyProcessEnv(dataDir, { CLOUDLY_JOURNAL_COMPACT_BYTES: '16384', CLOUDLY_COMPACT_RETRY_MS: '200' });
    let running: ICloudlyProcess | null = null;
    try {
      running = await startCloudlyProcess(env);
      const acknowledged: string[] = [];
      const refused: string[] = [];
      let admin = await loggedIn(running);
      for (let index = 0; index < 50; index++) {
        assert.equal(await tryCreate(admin, `before-${index}`), true);
        acknowledged.push(`before-${index}`);
      }
      await waitForQuietDataDir(dataDir);
      const free = () => {
        const stats = fs.statfsSync(mountPoint);
        return stats.bavail * stats.bsize;
      };
      fs.writeFileSync(filler, Buffer.alloc(Math.max(0, free() - 40 * 1024)));
      const compactionsFailedBefore = countOf(running.output(), /embedded database compaction failed/);
      for (let index = 0; index < 200; index++) {
        const name = `full-${index}`;
        (await tryCreate(admin, name) ? acknowledged : refused).push(name);
      }
      assert.ok(refused.length > 0, 'the full disk refused some writes');
      assert.ok(countOf(running.output(), /embedded database compaction failed/) > compactionsFailedBefore, 'a compaction met the full disk and failed');
      assert.equal((await fetch(`${running.baseUrl}/livez`)).status, 200);
      assert.ok((await namesOf(admin)).length >= 50, 'reads are served while the disk is full');
      admin.close();
      await killHard(running.child);
      running = null;
      await fsp.rm(filler);
      running = await startCloudlyProcess(env);
      admin = await loggedIn(running);
      const names = await namesOf(admin);
      for (const name of acknowledged) {
        assert.ok(names.includes(name), `acknowledged ${name} survived the full disk and kill -9`);
      }
      // A refused createCluster is not asserted absent here: on a really full disk its first
      // document (the name reservation) may have been kept and its second refused, and the
      // reservation's crash rules then finish it on the next start, as for any answer lost.
      assert.ok(names.every((name) => acknowledged.includes(name) || refused.includes(name)), 'nothing else appeared');
      assert.equal(await tryCreate(admin, 'after-space-returned'), true);
      admin.close();
    } finally {
      if (running) {
        running.child.kill('SIGTERM');
        await exitOf(running.child);
      }
      execFileSync('umount', [mountPoint]);
      await fsp.rm(mountPoint, { recursive: true, force: true });
    }
  });
  test('kill -9 on a full disk, restart while still full: starts read-only (reads answered, writes refused storage-full), also after a graceful stop, and takes writes again once space returns, without a restart', { skip: skip ?? false }, async (t) => {
    const mountPoint = await tempDir('cloudly-fullstart-');
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=6m,mode=0700', 'tmpfs', mountPoint]);
    } catch (error) {
      t.skip(`could not mount a tmpfs here: ${(error as Error).message}`);
      await fsp.rm(mountPoint, { recursive: true, force: true });
      return;
    }
    const dataDir = path.join(mountPoint, 'data');
    const filler = path.join(mountPoint, 'filler');
    const env = cloudlyProcessEnv(dataDir, { CLOUDLY_STORAGE_PROBE_MS: '200' });
    const readiness = async (processArg: ICloudlyProcess) => {
      const response = await fetch(`${processArg.baseUrl}/readyz`);
      return { status: response.status, body: await response.json() as { status: string; storage?: string; reasons?: string[] } };
    };
    const readOnlyGauge = async (processArg: ICloudlyProcess): Promise<number> => {
      const text = await (await fetch(`${processArg.baseUrl}/metrics`)).text();
      const line = /^cloudly_storage_read_only (\d+)$/m.exec(text);
      assert.ok(line, 'the metrics hold cloudly_storage_read_only');
      return Number(line[1]);
    };
    let running: ICloudlyProcess | null = null;
    try {
      running = await startCloudlyProcess(env);
      let admin = await loggedIn(running);
      const acknowledged: string[] = [];
      for (let index = 0; index < 20; index++) {
        assert.equal(await tryCreate(admin, `kept-${index}`), true);
        acknowledged.push(`kept-${index}`);
      }
      assert.equal(await readOnlyGauge(running), 0);
      await waitForQuietDataDir(dataDir);
      // Filled to the last block: written in pieces until the file system refuses one.
      const fd = fs.openSync(filler, 'w');
      try {
        for (let piece = 1024 * 1024; piece >= 4096;) {
          try {
            fs.writeSync(fd, Buffer.alloc(piece));
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') {
              throw error;
            }
            piece /= 2;
          }
        }
      } finally {
        fs.closeSync(fd);
      }
      assert.equal(fs.statfsSync(mountPoint).bavail, 0, 'the file system is full');
      // The journal's last page may still take a few records; the disk refuses once it is used up.
      let refused = false;
      for (let index = 0; index < 300 && !refused; index++) {
        const name = `filling-${index}`;
        if (await tryCreate(admin, name)) {
          acknowledged.push(name);
        } else {
          refused = true;
        }
      }
      assert.ok(refused, 'the full disk refused a write');
      admin.close();
      await killHard(running.child);
      running = null;

      // Started again with the disk still full.
      running = await startCloudlyProcess(env);
      assert.match(running.output(), /started read-only: the disk is full/);
      // No block for a new lock file: the killed process's stale lock was taken over in place.
      assert.match(running.output(), /replaced the lock of a Cloudly that is no longer running/);
      const readOnly = await readiness(running);
      assert.equal(readOnly.status, 200, 'reads are served, so the instance stays ready');
      assert.equal(readOnly.body.storage, 'read-only');
      assert.deepEqual(readOnly.body.reasons, ['storage-full']);
      assert.equal(await readOnlyGauge(running), 1);
      admin = await loggedIn(running);
      const names = await namesOf(admin);
      for (const name of acknowledged) {
        assert.ok(names.includes(name), `acknowledged ${name} is read back from the read-only server`);
      }
      const refusal = await refusalOf(() => admin.call('createCluster', { name: 'while-full' }));
      assert.equal(refusal.code, 'unavailable');
      assert.equal(refusal.retryable, true);
      assert.deepEqual(refusal.reasons, ['storage-full']);
      assert.equal(refusal.retryAfterMs, 200);
      assert.ok(!(await namesOf(admin)).includes('while-full'), 'the refused write is not shown');
      admin.close();

      // A graceful stop and a start while still full: the block the stop kept of the lock is reused.
      running.child.kill('SIGTERM');
      assert.equal(await exitOf(running.child), 0);
      running = null;
      assert.equal(fs.statfsSync(mountPoint).bavail, 0, 'the disk is still full');
      running = await startCloudlyProcess(env);
      assert.match(running.output(), /started read-only: the disk is full/);
      assert.equal((await readiness(running)).body.storage, 'read-only');
      admin = await loggedIn(running);
      const namesAfterStop = await namesOf(admin);
      for (const name of acknowledged) {
        assert.ok(namesAfterStop.includes(name), `acknowledged ${name} is read back after a graceful restart on the full disk`);
      }

      // Space returns: the probe ends the read-only state by itself, before any write.
      await fsp.rm(filler);
      await waitFor(async () => (await readiness(running!)).body.storage === undefined, 'the probe finds space and ends the read-only state', 60_000);
      assert.equal(await readOnlyGauge(running), 0);
      // A start-up step that met the full disk (finishing a name reservation the crash left) runs
      // again now, once.
      const deferred = [...running.output().matchAll(/"step":"(\w+)".*it runs again once the disk takes writes/g)].map((match) => match[1]);
      await waitFor(() => deferred.every((step) => running!.output().includes(`"step":"${step}","msg":"a deferred start-up step ran`)), 'every deferred start-up step ran', 60_000);
      assert.equal(await tryCreate(admin, 'after-space-returned'), true);
      assert.ok((await namesOf(admin)).includes('after-space-returned'));
      admin.close();
    } finally {
      if (running) {
        running.child.kill('SIGTERM');
        await exitOf(running.child);
      }
      execFileSync('umount', [mountPoint]);
      await fsp.rm(mountPoint, { recursive: true, force: true });
    }
  });
});
