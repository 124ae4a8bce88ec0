import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { BSON } from 'mongodb';
import { startTestCloudly, testAdminPassword, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { createCli, jsonOf } from './cli.fixture.js';
import { snapshotFileName } from '../ts/core/database.js';

/**
 * `cloudly snapshot save` against a real Cloudly, `cloudly snapshot restore` into an empty data
 * directory, and a real Cloudly started there: every collection is identical (a digest of each),
 * secrets stay sealed, and the restored Cloudly serves at once (login, relay token).
 */

/**
 * SHA-256 of every collection's documents (sorted by _id, canonical Extended JSON), leases aside:
 * a running Cloudly renews those on its own clock (the reconciler's lease is taken at every start).
 */
const digestOf = async (tArg: ITestCloudly): Promise<Record<string, string>> => {
  const db = tArg.cloudly.database.mongoDb;
  const result: Record<string, string> = {};
  for (const { name } of await db.listCollections().toArray()) {
    if (/Lease$/.test(name)) {
      continue;
    }
    const docs = await db.collection(name).find({}).sort({ _id: 1 }).toArray();
    result[name] = createHash('sha256').update(BSON.EJSON.stringify(docs, { relaxed: false })).digest('hex');
  }
  return result;
};

describe('control-plane snapshot: save and restore', () => {
  test('a download without an administrator is refused in the refusal shape, with the identity\'s own token', async () => {
    const t = await startTestCloudly({ logLevel: 'silent' });
    try {
      const refusalOf = async (authorizationArg: string | null) => {
        const response = await fetch(`${t.baseUrl}/admin/snapshot`, { headers: authorizationArg ? { authorization: authorizationArg } : {} });
        const { error } = await response.json() as { error: { data: { code: string; reasons: string[] } } };
        return [response.status, error.data.code, error.data.reasons];
      };
      assert.deepEqual(await refusalOf(null), [401, 'unauthenticated', ['identity-missing']]);
      assert.deepEqual(await refusalOf(`Bearer ${t.identity.jwt.slice(0, -8)}AAAAAAAA`), [401, 'unauthenticated', ['identity-invalid']]);
      // An identity whose account does not exist: the account check's own token.
      const orphan = await t.cloudly.auth.issueIdentity({ id: 'viewer-1', username: 'viewer', role: 'user' });
      assert.deepEqual(await refusalOf(`Bearer ${orphan.jwt}`), [401, 'unauthenticated', ['account-deleted']]);
      await t.caller.call('createUser', { username: 'snapshot-viewer', password: 'snapshot-viewer-password', role: 'user' });
      const viewer = await t.admin.fire('adminLoginWithUsernameAndPassword', { username: 'snapshot-viewer', password: 'snapshot-viewer-password' });
      assert.deepEqual(await refusalOf(`Bearer ${viewer.identity.jwt}`), [403, 'forbidden', ['role-not-allowed']]);
    } finally {
      await t.stop();
    }
  });

  test('save online through the API, restore into an empty data directory: identical collections, sealed secrets, serves at once', async () => {
    const t = await startTestCloudly({ logLevel: 'silent' });
    const cli = await createCli();
    const work = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-snapshot-'));
    const restoredDir = path.join(work, 'restored');
    try {
      const { relayToken } = await t.createCluster('saved-1');
      await t.createCluster('saved-2');
      await cli.login(t);
      // What the controllers derive for the new clusters is written before the state is taken.
      await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the controllers have nothing owed');
      const before = await digestOf(t);
      const file = path.join(work, 'control-plane.snapshot');
      const saved = jsonOf(await cli.run(['-o', 'json', 'snapshot', 'save', file]));
      assert.equal(saved.file, file);
      assert.ok(saved.documents > 0);
      // Written after the save: not in it.
      await t.createCluster('after-save');
      const bytes = await fsp.readFile(file);
      assert.equal(bytes.includes(Buffer.from(relayToken)), false, 'the relay token is not in the file (only its hash)');
      assert.equal(bytes.includes(Buffer.from(testAdminPassword)), false, 'the admin password is not in the file');
      // Refusals change nothing: a file that exists, a damaged snapshot, a data directory in use.
      assert.equal((await cli.run(['snapshot', 'save', file])).code, 2);
      const damaged = path.join(work, 'damaged.snapshot');
      await fsp.writeFile(damaged, bytes.subarray(0, bytes.length - 10));
      const refusedDamaged = await cli.run(['snapshot', 'restore', damaged, '--data-dir', restoredDir]);
      assert.equal(refusedDamaged.code, 1);
      assert.match(refusedDamaged.stderr, /is not an intact snapshot/);
      const refusedNonEmpty = await cli.run(['snapshot', 'restore', file, '--data-dir', t.dataDir]);
      assert.equal(refusedNonEmpty.code, 1);
      assert.match(refusedNonEmpty.stderr, /is not empty/);
      // The key-encryption key travels separately (docs/storage.md): the secrets are sealed under it.
      await fsp.mkdir(path.join(restoredDir, 'keys'), { recursive: true, mode: 0o700 });
      await fsp.copyFile(path.join(t.dataDir, 'keys', 'secrets-key-encryption-key'), path.join(restoredDir, 'keys', 'secrets-key-encryption-key'));
      const restored = jsonOf(await cli.run(['-o', 'json', 'snapshot', 'restore', file, '--data-dir', restoredDir]));
      assert.equal(restored.documents, saved.documents);
      assert.equal(restored.keyEncryptionKey, 'present in the data directory');
      assert.deepEqual(await fsp.readFile(path.join(restoredDir, snapshotFileName)), bytes);
      const second = await startTestCloudly({ dataDir: restoredDir, logLevel: 'silent' });
      try {
        assert.deepEqual(await digestOf(second), before, 'every collection is identical to the moment of the save');
        const names = (await second.admin.call('getClusters', {})).clusters.map((cluster) => cluster.name).sort();
        assert.deepEqual(names, ['saved-1', 'saved-2']);
        const relay = await second.connectRelay(relayToken);
        assert.equal(relay.isOpen, true);
      } finally {
        await second.stop();
      }
    } finally {
      await cli.dispose();
      await t.stop();
      await fsp.rm(work, { recursive: true, force: true });
    }
  });
});
