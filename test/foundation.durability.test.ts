import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { BSON } from 'mongodb';
import { refusalOf, startTestCloudly, waitFor } from './helpers/cloudly.js';
import { cloudlyProcessEnv, exitOf, killHard, runCloudlyProcessToExit, startCloudlyProcess } from './helpers/process.js';
import { Cloudly } from '../ts/classes.cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { previousSnapshotFileName, snapshotFileName, StorageDamagedError } from '../ts/core/database.js';
import { readSnapshotFile } from '../ts/core/snapshotfile.js';
import { legacySigningKeyFileName, signingKeysId, signingKeysKind } from '../ts/core/auth.js';

const tempDir = () => fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-durability-'));

describe('embedded durability: journal and snapshots', () => {
  test('a graceful restart on the same data directory keeps clusters, admins, relay tokens and the signing key', async () => {
    const t = await startTestCloudly();
    try {
      const { cluster, relayToken } = await t.createCluster('survives');
      const kid = t.cloudly.auth.keyId;
      const oldIdentity = t.identity;
      await t.restart();
      const clusters = (await t.admin.call('getClusters', {})).clusters;
      assert.deepEqual(clusters.map((c) => c.id), [cluster.id]);
      assert.equal(t.cloudly.auth.keyId, kid);
      // The key survives in the database (encrypted), not as a file of the data directory.
      assert.ok(await t.cloudly.store.get(signingKeysKind, signingKeysId));
      await assert.rejects(() => fsp.stat(path.join(t.dataDir, 'keys', legacySigningKeyFileName)));
      // An identity issued before the restart still verifies: same key, same admin.
      const again = await t.admin.fire('getClusters', { identity: oldIdentity });
      assert.equal(again.clusters.length, 1);
      const relay = await t.connectRelay(relayToken);
      assert.equal(relay.isOpen, true);
    } finally {
      await t.stop();
    }
  });

  test('types survive the journal and the snapshot, and the previous snapshot is kept beside the current one', async () => {
    const t = await startTestCloudly();
    try {
      const raw = t.cloudly.database.mongoDb.collection('TypeProbe');
      await raw.insertOne({ at: new Date(1_700_000_000_000), bytes: new BSON.Binary(Buffer.from([1, 2, 3])), big: BSON.Long.fromString('9007199254740993') });
      await t.createCluster('first');
      await t.cloudly.database.compact();
      await t.createCluster('second');
      await t.cloudly.database.compact();
      const current = await readSnapshotFile(path.join(t.dataDir, snapshotFileName));
      const previous = await readSnapshotFile(path.join(t.dataDir, previousSnapshotFileName));
      const probe = current.collections.find((c) => c.name === 'TypeProbe')!.docs[0];
      assert.ok(probe.at instanceof Date);
      assert.ok(probe.bytes instanceof BSON.Binary);
      assert.equal((probe.big as BSON.Long).toString(), '9007199254740993');
      assert.equal(previous.collections.find((c) => c.name === 'CloudlyCluster')!.docs.length, 1);
      assert.equal(current.collections.find((c) => c.name === 'CloudlyCluster')!.docs.length, 2);
      assert.ok(current.lsn > previous.lsn, 'each snapshot records the journal position it covers');
      // Written after the last snapshot: only the journal has it. A copy of the data directory
      // taken now is what a crash would leave; replaying it keeps the types too.
      await raw.insertOne({ late: true, at: new Date(1_800_000_000_000), big: BSON.Long.fromString('-9007199254740995') });
      const crashDir = await tempDir();
      await fsp.cp(t.dataDir, crashDir, { recursive: true, filter: (source) => !source.endsWith('.sock') });
      const recovered = await startTestCloudly({ dataDir: crashDir });
      try {
        const probes = recovered.cloudly.database.mongoDb.collection('TypeProbe');
        const restored = await probes.findOne({ bytes: { $exists: true } });
        assert.ok(restored?.at instanceof Date);
        assert.ok(restored?.bytes instanceof BSON.Binary);
        const late = await probes.findOne({ late: true }, { promoteLongs: false });
        assert.equal(late?.at.getTime(), 1_800_000_000_000);
        assert.equal(String(late?.big), '-9007199254740995');
      } finally {
        await recovered.stop();
        await fsp.rm(crashDir, { recursive: true, force: true });
      }
    } finally {
      await t.stop();
    }
  });

  test('a damaged snapshot stops start-up, names the file and offset, and leaves every file untouched', async () => {
    const dataDir = await tempDir();
    try {
      const snapshotPath = path.join(dataDir, snapshotFileName);
      const previousPath = path.join(dataDir, previousSnapshotFileName);
      await fsp.writeFile(snapshotPath, 'CLJ1 this is not a snapshot');
      await fsp.writeFile(previousPath, 'previous bytes');
      const before = await fsp.readFile(snapshotPath);
      const { code, output } = await runCloudlyProcessToExit(cloudlyProcessEnv(dataDir));
      assert.equal(code, 1);
      assert.ok(output.includes(snapshotPath), 'the message names the file');
      assert.match(output, /damaged at byte offset 0/);
      assert.deepEqual(await fsp.readFile(snapshotPath), before);
      assert.equal(await fsp.readFile(previousPath, 'utf8'), 'previous bytes');
      // In-process, start() refuses the same way.
      const cloudly = new Cloudly({ config: { dataDir, port: 0, mongoDbUrl: null, logLevel: 'silent' } });
      await assert.rejects(() => cloudly.start(), StorageDamagedError);
      await cloudly.stop();
      assert.deepEqual(await fsp.readFile(snapshotPath), before);
      assert.deepEqual((await fsp.readdir(dataDir)).sort(), [previousSnapshotFileName, snapshotFileName].sort());
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('a bad configuration value stops start-up with a message naming the variable', async () => {
    const dataDir = await tempDir();
    try {
      const { code, output } = await runCloudlyProcessToExit(cloudlyProcessEnv(dataDir, { CLOUDLY_PORT: 'eighty' }));
      assert.equal(code, 2);
      assert.match(output, /CLOUDLY_PORT: must be an integer/);
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('an acknowledged write survives a SIGKILL sent right after the answer', async () => {
    const dataDir = await tempDir();
    try {
      const env = cloudlyProcessEnv(dataDir);
      const first = await startCloudlyProcess(env);
      const admin = new CloudlyAdminClient(first.baseUrl);
      await admin.login('admin', 'process-admin-password');
      const { cluster, relayToken } = await admin.call('createCluster', { name: 'crash-proof' });
      await killHard(first.child);
      const second = await startCloudlyProcess(env);
      try {
        const admin2 = new CloudlyAdminClient(second.baseUrl);
        await admin2.login('admin', 'process-admin-password');
        const clusters = (await admin2.call('getClusters', {})).clusters;
        assert.deepEqual(clusters.map((c) => c.id), [cluster.id]);
        const relay = await CloudlyRelayClient.connect(second.baseUrl, relayToken, { reconnect: false });
        assert.equal(relay.isOpen, true);
        relay.close();
      } finally {
        second.child.kill('SIGTERM');
        assert.equal(await exitOf(second.child), 0, 'SIGTERM stops gracefully with exit 0');
      }
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('a generated first-admin password is printed once and works; the log never carries it', async () => {
    const dataDir = await tempDir();
    try {
      const env = cloudlyProcessEnv(dataDir);
      delete env.CLOUDLY_ADMIN_PASSWORD;
      const started = await startCloudlyProcess(env);
      try {
        await waitFor(() => /password "([^"]+)"/.test(started.output()), 'password line');
        const password = /password "([^"]+)"/.exec(started.output())![1];
        const admin = new CloudlyAdminClient(started.baseUrl);
        const identity = await admin.login('admin', password);
        assert.equal(identity.role, 'admin');
        const logLines = started.output().split('\n').filter((line) => line.startsWith('{'));
        assert.equal(logLines.some((line) => line.includes(password)), false);
        const wrong = await refusalOf(() => admin.login('admin', 'guess-guess-guess'));
        assert.equal(wrong.code, 'unauthenticated');
      } finally {
        started.child.kill('SIGTERM');
        await exitOf(started.child);
      }
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});
