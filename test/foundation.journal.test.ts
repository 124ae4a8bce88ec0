import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { refusalOf, startTestCloudly, waitFor } from './helpers/cloudly.js';
import {
  cloudlyProcessEnv,
  exitOf,
  killHard,
  runCloudlyProcessToExit,
  startCloudlyProcess,
  waitForQuietDataDir,
  type ICloudlyProcess,
} from './helpers/process.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { previousSnapshotFileName, snapshotFileName } from '../ts/core/database.js';
import { readSnapshotFile } from '../ts/core/snapshotfile.js';
import { frameHeaderBytes, listSegments, readJournal } from '../ts/core/journal.js';
import type { ICluster } from '../ts/interfaces/data/cluster.js';

/**
 * Faults of the embedded database's journal, each in a real Cloudly child process that is
 * killed with SIGKILL (kill -9) or started on files damaged on purpose.
 */

const tempDir = () => fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-journal-'));

const loggedIn = async (processArg: ICloudlyProcess): Promise<CloudlyAdminClient> => {
  const admin = new CloudlyAdminClient(processArg.baseUrl);
  await admin.login('admin', 'process-admin-password');
  return admin;
};

const clustersOf = async (adminArg: CloudlyAdminClient): Promise<ICluster[]> =>
  (await adminArg.call('getClusters', {})).clusters;

const createClusters = async (adminArg: CloudlyAdminClient, namesArg: string[]): Promise<ICluster[]> => {
  const created: ICluster[] = [];
  for (const name of namesArg) {
    created.push((await adminArg.call('createCluster', { name })).cluster);
  }
  return created;
};

/**
 * Every data file of a directory with its bytes, to prove a refused start changed nothing. The
 * lock file is left out: a killed process's stale lock is replaced before the files are read.
 */
const filesOf = async (dirArg: string): Promise<Map<string, Buffer>> => {
  const result = new Map<string, Buffer>();
  for (const entry of await fsp.readdir(dirArg, { recursive: true, withFileTypes: true })) {
    if (entry.isFile() && entry.name !== 'cloudly.lock') {
      const full = path.join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name);
      result.set(path.relative(dirArg, full), await fsp.readFile(full));
    }
  }
  return result;
};

const stopGracefully = async (processArg: ICloudlyProcess): Promise<void> => {
  processArg.child.kill('SIGTERM');
  assert.equal(await exitOf(processArg.child), 0);
};

describe('embedded journal: every acknowledged write survives kill -9', () => {
  test('kill -9 during a burst of concurrent writes: every acknowledged write is there after restart, none half-applied', async () => {
    const dataDir = await tempDir();
    try {
      const env = cloudlyProcessEnv(dataDir);
      const first = await startCloudlyProcess(env);
      const admin = await loggedIn(first);
      const acknowledged: Array<{ cluster: ICluster; relayToken: string }> = [];
      let killed = false;
      const burst = Array.from({ length: 40 }, (_, index) => admin
        .call('createCluster', { name: `burst-${index}` })
        .then(async (answer) => {
          if (!killed) {
            acknowledged.push(answer);
            if (acknowledged.length === 15) {
              killed = true;
              first.child.kill('SIGKILL');
            }
          }
        }, () => undefined));
      await Promise.all(burst);
      if (!killed) {
        first.child.kill('SIGKILL');
      }
      await exitOf(first.child);
      assert.ok(acknowledged.length >= 15);
      const second = await startCloudlyProcess(env);
      try {
        const admin2 = await loggedIn(second);
        const clusters = await clustersOf(admin2);
        const ids = new Set(clusters.map((cluster) => cluster.id));
        for (const { cluster } of acknowledged) {
          assert.ok(ids.has(cluster.id), `acknowledged cluster ${cluster.name} survived`);
        }
        // Whatever is there is whole: the stored cluster equals what its creator was told.
        for (const { cluster } of acknowledged) {
          assert.deepEqual(clusters.find((stored) => stored.id === cluster.id), cluster);
        }
        for (const cluster of clusters) {
          assert.match(cluster.name, /^burst-\d+$/);
          assert.equal(cluster.generation, 1);
        }
        // A relay token handed out before the crash still opens a socket.
        const relay = await CloudlyRelayClient.connect(second.baseUrl, acknowledged[0].relayToken, { reconnect: false });
        relay.close();
      } finally {
        await stopGracefully(second);
      }
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('200 concurrent compare-and-swaps from one generation: exactly one winner, also after kill -9 and restart', async () => {
    const dataDir = await tempDir();
    try {
      const env = cloudlyProcessEnv(dataDir);
      const first = await startCloudlyProcess(env);
      const admin = await loggedIn(first);
      const { cluster, relayToken: originalToken } = await admin.call('createCluster', { name: 'cas' });
      const outcomes = await Promise.all(Array.from({ length: 200 }, () => admin
        .call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: cluster.generation })
        .then((answer) => ({ won: answer }), (error: { errorData?: { code?: string } }) => ({ refused: error.errorData?.code }))));
      const winners = outcomes.filter((outcome) => 'won' in outcome);
      const refusals = [...new Set(outcomes.filter((outcome) => !('won' in outcome)).map((outcome) => String((outcome as { refused?: string }).refused)))];
      if (winners.length !== 1 || refusals.some((code) => code !== 'conflict')) {
        // A failed assertion must not leave the server running (it would keep this file's process alive).
        await killHard(first.child);
      }
      assert.equal(winners.length, 1);
      assert.deepEqual(refusals, ['conflict'], 'every loser is refused conflict');
      const winner = (winners[0] as { won: { cluster: ICluster; relayToken: string } }).won;
      await killHard(first.child);
      const second = await startCloudlyProcess(env);
      try {
        const admin2 = await loggedIn(second);
        const [stored] = await clustersOf(admin2);
        assert.deepEqual(stored, winner.cluster);
        assert.equal(stored.generation, cluster.generation + 1);
        const relay = await CloudlyRelayClient.connect(second.baseUrl, winner.relayToken, { reconnect: false });
        relay.close();
        await assert.rejects(() => CloudlyRelayClient.connect(second.baseUrl, originalToken, { reconnect: false }));
        // The race is still decided once after the restart.
        const again = await Promise.all(Array.from({ length: 50 }, () => admin2
          .call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: stored.generation })
          .then(() => 1, () => 0)));
        assert.equal(again.reduce((sum: number, one: number) => sum + one, 0), 1);
      } finally {
        await stopGracefully(second);
      }
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('kill -9 in the middle of a compaction: the snapshot before it and the journal still hold every write', async () => {
    const dataDir = await tempDir();
    const failpoint = path.join(await tempDir(), 'failpoint');
    try {
      const env = cloudlyProcessEnv(dataDir, { CLOUDLY_TEST_JOURNAL_FAILPOINT: failpoint, CLOUDLY_JOURNAL_COMPACT_BYTES: '4096' });
      const first = await startCloudlyProcess(env);
      const early: ICluster[] = [];
      const late: ICluster[] = [];
      try {
        const admin = await loggedIn(first);
        for (let index = 0; !/embedded database compacted/.test(first.output()); index++) {
          early.push(...await createClusters(admin, [`before-${index}`]));
          assert.ok(index < 200, 'a first compaction ran');
        }
        await fsp.writeFile(failpoint, 'PAUSE-COMPACTION');
        for (let index = 0; !/compaction paused by the test failpoint/.test(first.output()); index++) {
          late.push(...await createClusters(admin, [`during-${index}`]));
          assert.ok(index < 200, 'a compaction started');
        }
        // Writes keep being journaled and answered while the compaction is held.
        late.push(...await createClusters(admin, ['while-paused']));
      } finally {
        await killHard(first.child);
      }
      const leftovers = (await fsp.readdir(dataDir)).filter((name) => name.endsWith('.tmp'));
      assert.equal(leftovers.length, 1, 'the killed compaction left its temporary snapshot');
      await fsp.rm(failpoint);
      const second = await startCloudlyProcess(env);
      try {
        const ids = new Set((await clustersOf(await loggedIn(second))).map((cluster) => cluster.id));
        for (const cluster of [...early, ...late]) {
          assert.ok(ids.has(cluster.id), `${cluster.name} survived`);
        }
        // The killed compaction's file is gone; the restarted server (compacting every 4 KiB) may be
        // writing a temporary snapshot of its own at this moment, which is its own and named by its pid.
        assert.ok(!(await fsp.readdir(dataDir)).includes(leftovers[0]), `the killed compaction's ${leftovers[0]} is removed at start`);
      } finally {
        await stopGracefully(second);
      }
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
      await fsp.rm(path.dirname(failpoint), { recursive: true, force: true });
    }
  });
});

describe('embedded journal: compaction keeps exactly the journal the previous snapshot needs', () => {
  test('after each compaction, segments wholly older than the previous snapshot are gone and the rest replays from it', async () => {
    const t = await startTestCloudly();
    try {
      const positions: number[] = [];
      for (const name of ['one', 'two', 'three']) {
        await t.createCluster(name);
        // What the controllers derive for the cluster is written first, so each snapshot's position is the journal's end.
        await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the controllers have nothing owed');
        await t.cloudly.database.compact();
        positions.push(t.cloudly.database.snapshotLsn);
      }
      const previousLsn = positions[1];
      const segments = await listSegments(t.dataDir);
      assert.ok(segments[0].firstLsn <= previousLsn + 1, 'the journal still reaches back to the previous snapshot');
      assert.ok(segments.length === 1 || segments[1].firstLsn > previousLsn + 1, 'nothing wholly older than it is kept');
      const fromPrevious = await readJournal(t.dataDir, previousLsn);
      assert.equal(fromPrevious.records[0]?.lsn, previousLsn + 1);
      assert.equal(fromPrevious.lastLsn, t.cloudly.database.journal!.lastAppendedLsn);
      const previous = await readSnapshotFile(path.join(t.dataDir, previousSnapshotFileName));
      assert.equal(previous.lsn, previousLsn);
    } finally {
      await t.stop();
    }
  });
});

describe('embedded journal: damaged files', () => {
  test('a torn final record is discarded and logged; every acknowledged write stays', async () => {
    const dataDir = await tempDir();
    try {
      const env = cloudlyProcessEnv(dataDir);
      const first = await startCloudlyProcess(env);
      const created = await createClusters(await loggedIn(first), ['torn-1', 'torn-2']);
      await killHard(first.child);
      const segments = await listSegments(dataDir);
      const last = segments.at(-1)!.path;
      const goodLength = (await fsp.stat(last)).size;
      // What a crash in the middle of an append leaves: a frame header promising more than follows.
      const torn = Buffer.alloc(40, 0x5a);
      torn.writeUInt32LE(0x314a4c43, 0);
      torn.writeUInt32LE(1000, 8);
      await fsp.appendFile(last, torn);
      const second = await startCloudlyProcess(env);
      try {
        assert.match(second.output(), /torn record/);
        assert.ok(second.output().includes(last), 'the log names the file');
        assert.equal((await fsp.stat(last)).size, goodLength, 'only the torn bytes were cut off');
        const admin2 = await loggedIn(second);
        const more = await createClusters(admin2, ['torn-3']);
        const ids = (await clustersOf(admin2)).map((cluster) => cluster.id).sort();
        assert.deepEqual(ids, [...created, ...more].map((cluster) => cluster.id).sort());
      } finally {
        await killHard(second.child);
      }
      const third = await startCloudlyProcess(env);
      try {
        assert.equal((await clustersOf(await loggedIn(third))).length, 3);
      } finally {
        await stopGracefully(third);
      }
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('a damaged record with valid records after it refuses start, names file and offset, and changes no file', async () => {
    const dataDir = await tempDir();
    try {
      const env = cloudlyProcessEnv(dataDir);
      const first = await startCloudlyProcess(env);
      await createClusters(await loggedIn(first), ['mid-1', 'mid-2', 'mid-3']);
      await killHard(first.child);
      const segment = (await listSegments(dataDir)).at(-1)!.path;
      const bytes = await fsp.readFile(segment);
      const firstRecordLength = bytes.readUInt32LE(8);
      const secondRecord = frameHeaderBytes + firstRecordLength;
      bytes[secondRecord + 20] ^= 0xff;
      await fsp.writeFile(segment, bytes);
      const before = await filesOf(dataDir);
      const { code, output } = await runCloudlyProcessToExit(env);
      assert.equal(code, 1);
      assert.ok(output.includes(segment), 'names the file');
      assert.ok(output.includes(`byte offset ${secondRecord}`), `names the offset ${secondRecord}: ${output}`);
      assert.match(output, /checksum mismatch, and valid records follow it/);
      assert.deepEqual(await filesOf(dataDir), before);
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('a damaged snapshot with a good journal refuses start; moving it away (docs/storage.md) recovers every write', async () => {
    const dataDir = await tempDir();
    try {
      const env = cloudlyProcessEnv(dataDir);
      const first = await startCloudlyProcess(env);
      const before = await createClusters(await loggedIn(first), ['snap-1', 'snap-2']);
      await stopGracefully(first);
      const second = await startCloudlyProcess(env);
      const after = await createClusters(await loggedIn(second), ['journal-1']);
      await killHard(second.child);
      const snapshotPath = path.join(dataDir, snapshotFileName);
      const bytes = await fsp.readFile(snapshotPath);
      bytes[bytes.length - 30] ^= 0x01;
      await fsp.writeFile(snapshotPath, bytes);
      const files = await filesOf(dataDir);
      const { code, output } = await runCloudlyProcessToExit(env);
      assert.equal(code, 1);
      assert.ok(output.includes(snapshotPath), 'names the snapshot');
      assert.match(output, /damaged at byte offset \d+ \(checksum mismatch\)/);
      assert.deepEqual(await filesOf(dataDir), files);
      // The documented recovery: move the damaged snapshot aside; the journal since the snapshot
      // before it (here: since the beginning) rebuilds everything.
      await fsp.rename(snapshotPath, path.join(os.tmpdir(), `damaged-${path.basename(dataDir)}`));
      const third = await startCloudlyProcess(env);
      try {
        const ids = (await clustersOf(await loggedIn(third))).map((cluster) => cluster.id).sort();
        assert.deepEqual(ids, [...before, ...after].map((cluster) => cluster.id).sort());
      } finally {
        await stopGracefully(third);
        await fsp.rm(path.join(os.tmpdir(), `damaged-${path.basename(dataDir)}`), { force: true });
      }
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('embedded journal: a disk that refuses writes', () => {
  test('a failed append (disk full, injected) refuses the write unavailable, acknowledges nothing, and the server stays up', async () => {
    const dataDir = await tempDir();
    const failpoint = path.join(await tempDir(), 'failpoint');
    try {
      const env = cloudlyProcessEnv(dataDir, { CLOUDLY_TEST_JOURNAL_FAILPOINT: failpoint });
      const first = await startCloudlyProcess(env);
      const admin = await loggedIn(first);
      const [kept] = await createClusters(admin, ['kept']);
      await fsp.writeFile(failpoint, 'ENOSPC');
      const refusal = await refusalOf(() => admin.call('createCluster', { name: 'refused' }));
      assert.equal(refusal.code, 'unavailable');
      assert.equal(refusal.retryable, true);
      // Rolled back: nobody can see it, and reads keep working while the disk is full.
      assert.deepEqual((await clustersOf(admin)).map((cluster) => cluster.name), ['kept']);
      await fsp.rm(failpoint);
      const [later] = await createClusters(admin, ['after-space-was-freed']);
      assert.equal((await fetch(`${first.baseUrl}/readyz`)).status, 200);
      // A failed sync leaves the device state unknown: writes stop until a restart.
      await fsp.writeFile(failpoint, 'EIO-SYNC');
      assert.equal((await refusalOf(() => admin.call('createCluster', { name: 'lost-sync' }))).code, 'unavailable');
      await fsp.rm(failpoint);
      assert.equal((await refusalOf(() => admin.call('createCluster', { name: 'after-eio' }))).code, 'unavailable');
      assert.equal((await fetch(`${first.baseUrl}/readyz`)).status, 503);
      assert.equal((await fetch(`${first.baseUrl}/livez`)).status, 200);
      await killHard(first.child);
      const second = await startCloudlyProcess(env);
      try {
        const names = (await clustersOf(await loggedIn(second))).map((cluster) => cluster.name).sort();
        assert.deepEqual(names, [kept.name, later.name].sort());
      } finally {
        await stopGracefully(second);
      }
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
      await fsp.rm(path.dirname(failpoint), { recursive: true, force: true });
    }
  });
});

describe('embedded journal: one Cloudly per data directory', () => {
  test('a second Cloudly on the same data directory is refused with a clear message; a killed one leaves no lasting lock', async () => {
    const dataDir = await tempDir();
    try {
      const env = cloudlyProcessEnv(dataDir);
      const first = await startCloudlyProcess(env);
      let cluster: ICluster;
      try {
        [cluster] = await createClusters(await loggedIn(first), ['locked']);
        await waitForQuietDataDir(dataDir);
        const files = await filesOf(dataDir);
        const refused = await runCloudlyProcessToExit(env);
        assert.equal(refused.code, 1);
        assert.match(refused.output, new RegExp(`data directory ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use by another Cloudly \\(pid ${first.child.pid}`));
        assert.deepEqual(await filesOf(dataDir), files, 'the refused start changed nothing');
      } finally {
        // Also when an assertion failed: a server left running would keep this file's process alive.
        await killHard(first.child);
      }
      const second = await startCloudlyProcess(env);
      try {
        assert.match(second.output(), /replaced the lock of a Cloudly that is no longer running/);
        assert.deepEqual((await clustersOf(await loggedIn(second))).map((one) => one.id), [cluster.id]);
      } finally {
        await stopGracefully(second);
      }
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});
