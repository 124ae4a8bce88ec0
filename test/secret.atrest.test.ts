import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { enrollSecretRecipient, openSealedText } from './helpers/secrets.js';
import { cloudlyProcessEnv, runCloudlyProcessToExit } from './helpers/process.js';
import { Cloudly } from '../ts/classes.cloudly.js';
import { ConfigError } from '../ts/config.js';
import { generatedKeyFileName } from '../ts/core/secretbox.js';
import { snapshotFileName } from '../ts/core/database.js';
import { signingKeyContext, signingKeysId, signingKeysKind } from '../ts/core/auth.js';
import { corestoreCredentialKind } from '../ts/manager.secret/documents.js';
import { clusterIngressSlotKind } from '../ts/manager.ingress/documents.js';
import { ingressBearerContext } from '../ts/manager.ingress/ingress.manager.js';
import { clusterNodeDocumentId } from '../ts/manager.cluster/clusternodes.js';

/**
 * Encryption at rest: no secret value is found in the data directory (snapshots, journal), the
 * captured log, answers or audit events; a tampered ciphertext is refused and logged without its
 * value; the key-encryption key must be there (or start is refused naming the variable) and can be
 * rotated without losing a secret.
 */

const tempDir = () => fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-secrets-'));

/** Every file under a directory, recursively. */
const filesUnder = async (dirArg: string): Promise<string[]> => {
  const entries = await fsp.readdir(dirArg, { withFileTypes: true, recursive: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name));
};

/** A secret's forms that could leak: its text, and the raw bytes it encodes in base64url with their hex and base64. */
const formsOf = (secretArg: string): Buffer[] => {
  const forms = [Buffer.from(secretArg, 'utf8')];
  const raw = Buffer.from(secretArg, 'base64url');
  if (raw.length >= 16) {
    forms.push(raw, Buffer.from(raw.toString('hex')), Buffer.from(raw.toString('base64')));
  }
  return forms;
};

const setUpCluster = async (tArg: ITestCloudly) => {
  const { cluster, relayToken } = await tArg.createCluster('secret-cluster');
  await tArg.admin.call('addClusterNode', { clusterId: cluster.id, name: 'node-1', nodeId: 'node-1' });
  await tArg.admin.call('addClusterNode', { clusterId: cluster.id, name: 'node-2', nodeId: 'node-2' });
  const relay = await tArg.connectRelay(relayToken);
  await waitFor(() => tArg.cloudly.relays.sessionsOf(cluster.id).some((session) => tArg.cloudly.clusterManager.isElected(session)), 'relay elected');
  const keys = await enrollSecretRecipient(relay);
  const material = (nodeIdArg: string) => relay.fire('getCorestoreControlCredentialMaterial', { nodeId: nodeIdArg });
  return { clusterId: cluster.id, relay, keys, material };
};

describe('secrets at rest', () => {
  test('no secret value is in the data directory, the log, an answer or an audit event', async () => {
    const dataDir = await tempDir();
    const t = await startTestCloudly({ dataDir });
    const secrets: string[] = [];
    const answers: unknown[] = [];
    let liveContents: Array<{ file: string; bytes: Buffer }> = [];
    try {
      const world = await setUpCluster(t);
      for (const nodeId of ['node-1', 'node-2']) {
        const answer = await world.material(nodeId);
        answers.push(answer);
        secrets.push(await openSealedText(world.keys, answer.material));
      }
      const rotated = await t.admin.call('rotateCorestoreControlCredential', {
        clusterId: world.clusterId, nodeId: 'node-1', expectedVersion: 1,
      });
      answers.push(rotated);
      const afterRotation = await world.material('node-1');
      answers.push(afterRotation);
      secrets.push(await openSealedText(world.keys, afterRotation.material));
      // Both identity signing keys' private parts, as Cloudly decrypts them.
      answers.push(await t.admin.call('rotateIdentitySigningKey', { expectedKeyId: t.cloudly.auth.keyId }));
      const keysDoc = await t.cloudly.store.get(signingKeysKind, signingKeysId);
      for (const key of [keysDoc!.current, keysDoc!.previous!]) {
        const jwk = JSON.parse(t.cloudly.secrets.decryptText(key.privateJwk, signingKeyContext(key.kid))) as Record<string, string>;
        secrets.push(jwk.d, jwk.p, jwk.q);
      }
      answers.push(await t.admin.call('getAuditEvents', { limit: 1000 }));
      assert.equal(new Set(secrets).size, secrets.length, 'every secret is distinct');
      assert.ok(secrets.length >= 9);
      const answerText = JSON.stringify(answers);
      for (const secret of secrets) {
        assert.equal(answerText.includes(secret), false, 'no answer or audit event carries a secret');
      }
      // While running: the journal holds every write since the last snapshot.
      const live = (await filesUnder(dataDir)).filter((file) => path.basename(file) !== generatedKeyFileName && !file.endsWith('.sock'));
      assert.ok(live.some((file) => file.includes('journal')), `a journal is written: ${live.map((file) => path.relative(dataDir, file)).join(', ')}`);
      liveContents = await Promise.all(live.map(async (file) => ({ file, bytes: await fsp.readFile(file) })));
    } finally {
      await t.stop();
    }
    // After a graceful stop: the final snapshot and whatever journal is left, every file but the KEK's own.
    const files = (await filesUnder(dataDir)).filter((file) => path.basename(file) !== generatedKeyFileName);
    assert.ok(files.some((file) => path.basename(file) === snapshotFileName), 'a snapshot was written');
    const contents = [...liveContents, ...await Promise.all(files.map(async (file) => ({ file, bytes: await fsp.readFile(file) })))];
    assert.ok(contents.some(({ bytes }) => bytes.includes('CloudlyCorestoreCredential')), 'the credentials are in the data directory (encrypted)');
    const logText = Buffer.from(t.logs.join('\n'));
    for (const secret of secrets) {
      for (const form of formsOf(secret)) {
        for (const { file, bytes } of contents) {
          assert.equal(bytes.includes(form), false, `a secret was found in ${path.relative(dataDir, file)}`);
        }
        assert.equal(logText.includes(form), false, 'a secret was found in the log');
      }
    }
    const kek = await fsp.readFile(path.join(dataDir, 'keys', generatedKeyFileName), 'utf8');
    for (const { bytes } of contents) {
      assert.equal(bytes.includes(kek.trim()), false, 'the key-encryption key is never stored beside what it protects');
    }
    assert.equal((await fsp.stat(path.join(dataDir, 'keys', generatedKeyFileName))).mode & 0o777, 0o600);
    await fsp.rm(dataDir, { recursive: true, force: true });
  });

  test('a tampered ciphertext is detected and refused, and logged without the value; a ciphertext moved to another node does not decrypt', async () => {
    const t = await startTestCloudly();
    try {
      const world = await setUpCluster(t);
      const first = await openSealedText(world.keys, (await world.material('node-1')).material);
      await world.material('node-2');
      const raw = t.cloudly.store.collection(corestoreCredentialKind);
      const stored = await t.cloudly.store.get(corestoreCredentialKind, clusterNodeDocumentId(world.clusterId, 'node-1'));
      const original = stored!.current.value;
      const flipped = Buffer.from(original.ciphertext, 'base64');
      flipped[0] ^= 0x01;
      await raw.updateOne({ id: stored!.id }, { $set: { 'current.value.ciphertext': flipped.toString('base64') } });
      const refused = await refusalOf(() => world.material('node-1'));
      assert.equal(refused.code, 'internal');
      const line = t.logs.find((entry) => entry.includes('failed authentication'));
      assert.ok(line, 'the failure is logged');
      assert.match(line, /CloudlyCorestoreCredential/);
      assert.equal(t.logs.join('\n').includes(first), false, 'the log never holds the value');
      // node-1's genuine ciphertext copied into node-2's document does not decrypt there.
      await raw.updateOne({ id: stored!.id }, { $set: { 'current.value': original } });
      assert.equal(await openSealedText(world.keys, (await world.material('node-1')).material), first, 'restored, it decrypts again');
      await raw.updateOne({ id: clusterNodeDocumentId(world.clusterId, 'node-2') }, { $set: { 'current.value': original } });
      assert.equal((await refusalOf(() => world.material('node-2'))).code, 'internal');
    } finally {
      await t.stop();
    }
  });

  test('an ingress bearer an earlier version stored in clear is encrypted in place at the next start', async () => {
    const t = await startTestCloudly();
    try {
      const clear = randomBytes(32).toString('base64url');
      await t.cloudly.store.insert(clusterIngressSlotKind, {
        id: 'legacy-cluster', clusterId: 'legacy-cluster', kind: 'pallet', designation: null, fleetCutover: null,
        bearer: { secretId: 'ingress-bearer-legacy', secretVersionId: 'ingress-bearer-legacy-1', value: clear },
        runtime: { phase: 'pallet', generation: 1 },
      });
      await t.restart();
      const slot = await t.cloudly.store.get(clusterIngressSlotKind, 'legacy-cluster');
      assert.equal(slot?.bearer?.value, undefined);
      assert.equal(JSON.stringify(slot).includes(clear), false);
      assert.equal(t.cloudly.secrets.decryptText(slot!.bearer!.encryptedValue!, ingressBearerContext('legacy-cluster', 'ingress-bearer-legacy-1')), clear);
    } finally {
      await t.stop();
    }
  });

  test('a missing or unreadable key-encryption key refuses start (non-zero exit) naming CLOUDLY_SECRETS_KEY_FILE', async () => {
    const dataDir = await tempDir();
    try {
      const missing = await runCloudlyProcessToExit(cloudlyProcessEnv(dataDir, { CLOUDLY_SECRETS_KEY_FILE: path.join(dataDir, 'no-such-key') }));
      assert.notEqual(missing.code, 0);
      assert.match(missing.output, /CLOUDLY_SECRETS_KEY_FILE/);
      const directory = await runCloudlyProcessToExit(cloudlyProcessEnv(dataDir, { CLOUDLY_SECRETS_KEY_FILE: dataDir }));
      assert.notEqual(directory.code, 0);
      assert.match(directory.output, /CLOUDLY_SECRETS_KEY_FILE/);
      const short = path.join(dataDir, 'short-key');
      await fsp.writeFile(short, 'not a key', { mode: 0o600 });
      const malformed = await runCloudlyProcessToExit(cloudlyProcessEnv(dataDir, { CLOUDLY_SECRETS_KEY_FILE: short }));
      assert.notEqual(malformed.code, 0);
      assert.match(malformed.output, /CLOUDLY_SECRETS_KEY_FILE: the key-encryption key file .* must hold 32 bytes/);
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('the key-encryption key rotates by re-wrapping at start; the wrong key alone refuses start', async () => {
    const dataDir = await tempDir();
    const keyA = path.join(dataDir, 'kek-a');
    const keyB = path.join(dataDir, 'kek-b');
    await fsp.writeFile(keyA, randomBytes(32).toString('hex'), { mode: 0o600 });
    await fsp.writeFile(keyB, randomBytes(32).toString('base64'), { mode: 0o600 });
    const t = await startTestCloudly({ dataDir, secretsKeyFile: keyA });
    let credential: string;
    const identity = t.identity;
    try {
      const world = await setUpCluster(t);
      credential = await openSealedText(world.keys, (await world.material('node-1')).material);
    } finally {
      await t.stop();
    }
    const refusedStart = async (configArg: Record<string, unknown>) => {
      const cloudly = new Cloudly({ config: { dataDir, port: 0, mongoDbUrl: null, logLevel: 'silent', ...configArg } });
      try {
        await cloudly.start();
        assert.fail('start should have been refused');
      } catch (error) {
        assert.ok(error instanceof ConfigError, String(error));
        return error;
      } finally {
        await cloudly.stop();
      }
    };
    const wrong = await refusedStart({ secretsKeyFile: keyB });
    assert.equal(wrong.variable, 'CLOUDLY_SECRETS_KEY_FILE');
    assert.match(wrong.message, /CLOUDLY_SECRETS_PREVIOUS_KEY_FILE/);
    // New key with the old one named as previous: re-wrapped, everything still there.
    const rotated = await startTestCloudly({ dataDir, secretsKeyFile: keyB, secretsPreviousKeyFile: keyA });
    try {
      assert.equal((await rotated.admin.fire('getClusters', { identity })).clusters.length, 1, 'an identity signed before still verifies');
    } finally {
      await rotated.stop();
    }
    // From now on the new key alone is enough, and the old one alone is not.
    const after = await startTestCloudly({ dataDir, secretsKeyFile: keyB });
    try {
      const [cluster] = (await after.admin.call('getClusters', {})).clusters;
      const stored = await after.cloudly.store.get(corestoreCredentialKind, clusterNodeDocumentId(cluster.id, 'node-1'));
      assert.equal(after.cloudly.secrets.decryptText(stored!.current.value, `CloudlyCorestoreCredential/${stored!.id}/${stored!.current.secretVersionId}`), credential!);
    } finally {
      await after.stop();
    }
    assert.equal((await refusedStart({ secretsKeyFile: keyA })).variable, 'CLOUDLY_SECRETS_KEY_FILE');
    await fsp.rm(dataDir, { recursive: true, force: true });
  });
});
