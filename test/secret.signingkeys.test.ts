import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import * as jose from 'jose';
import { refusalOf, startSharedDatabase, startTestCloudly, waitFor } from './helpers/cloudly.js';
import { legacySigningKeyFileName, signingKeysId, signingKeysKind } from '../ts/core/auth.js';
import type { IIdentity } from '../ts/interfaces/data/user.js';

/**
 * Identity signing keys live in the database, encrypted: every instance sharing it verifies every
 * other's identities; the JWKS publishes the current and the previous key; rotation is an admin
 * operation (compare-and-swap on the key id) after which identities of the replaced key still verify.
 */

const tempDir = () => fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-signing-'));

const jwksOf = async (baseUrlArg: string) => (await (await fetch(`${baseUrlArg}/.well-known/jwks.json`)).json()) as jose.JSONWebKeySet;

describe('identity signing keys', () => {
  test('rotation: compare-and-swap, a dry run changes nothing, the JWKS carries current and previous, the replaced key verifies until the next rotation', async () => {
    // The key this server starts with is its own, made at its first start as on a new installation.
    const t = await startTestCloudly({}, { generateSigningKey: true });
    try {
      const clustersWith = (identityArg: IIdentity) => t.admin.fire('getClusters', { identity: identityArg });
      const first = t.cloudly.auth.keyId;
      const identityOfFirst = t.identity;
      assert.deepEqual((await jwksOf(t.baseUrl)).keys.map((key) => key.kid), [first]);
      const stale = await refusalOf(() => t.caller.call('rotateIdentitySigningKey', { expectedKeyId: 'not-the-key' }));
      assert.equal(stale.code, 'conflict');
      const dry = await t.caller.call('rotateIdentitySigningKey', { expectedKeyId: first, dryRun: true } as never);
      assert.equal(dry.previousKeyId, first);
      assert.equal(t.cloudly.auth.keyId, first, 'a dry run rotates nothing');
      assert.deepEqual((await jwksOf(t.baseUrl)).keys.map((key) => key.kid), [first]);

      const rotated = await t.caller.call('rotateIdentitySigningKey', { expectedKeyId: first });
      assert.equal(rotated.previousKeyId, first);
      assert.notEqual(rotated.currentKeyId, first);
      assert.equal(t.cloudly.auth.keyId, rotated.currentKeyId);
      const jwks = await jwksOf(t.baseUrl);
      assert.deepEqual(jwks.keys.map((key) => key.kid), [rotated.currentKeyId, first]);
      assert.ok(jwks.keys.every((key) => key.d === undefined && key.p === undefined), 'the JWKS holds public keys only');
      // Identities of the replaced key still verify; new ones are signed by the new key.
      assert.equal((await clustersWith(identityOfFirst)).clusters.length, 0);
      const identityOfSecond = await t.admin.login('admin', 'test-admin-password-0123');
      assert.equal(jose.decodeProtectedHeader(identityOfSecond.jwt).kid, rotated.currentKeyId);
      await jose.jwtVerify(identityOfSecond.jwt, jose.createLocalJWKSet(jwks), { algorithms: ['RS256'] });

      // A second rotation drops the first key: its identities are refused, the second key's still verify.
      const again = await t.caller.call('rotateIdentitySigningKey', { expectedKeyId: rotated.currentKeyId });
      assert.deepEqual((await jwksOf(t.baseUrl)).keys.map((key) => key.kid), [again.currentKeyId, rotated.currentKeyId]);
      const refused = await refusalOf(() => clustersWith(identityOfFirst));
      assert.equal(refused.code, 'unauthenticated');
      assert.equal((await clustersWith(identityOfSecond)).clusters.length, 0);
      // Stored encrypted: the document holds no private JWK member in clear.
      const stored = await t.cloudly.store.get(signingKeysKind, signingKeysId);
      assert.equal(JSON.stringify(stored).includes('"d":'), false);
      // The keys survive a restart: identities of the current and previous key still verify.
      await t.restart();
      assert.equal(t.cloudly.auth.keyId, again.currentKeyId);
      assert.equal((await t.admin.fire('getClusters', { identity: identityOfSecond })).clusters.length, 0);
    } finally {
      await t.stop();
    }
  });

  test('a signing key file of an earlier version is moved into the database and deleted; its identities keep verifying', async () => {
    const dataDir = await tempDir();
    const pair = await jose.generateKeyPair('RS256', { extractable: true, modulusLength: 2048 });
    const privateJwk = await jose.exportJWK(pair.privateKey);
    const kid = await jose.calculateJwkThumbprint(privateJwk);
    await fsp.mkdir(path.join(dataDir, 'keys'), { recursive: true });
    const legacyFile = path.join(dataDir, 'keys', legacySigningKeyFileName);
    await fsp.writeFile(legacyFile, JSON.stringify({ ...privateJwk, kid, alg: 'RS256' }), { mode: 0o600 });
    const t = await startTestCloudly({ dataDir });
    try {
      assert.equal(t.cloudly.auth.keyId, kid);
      await assert.rejects(() => fsp.stat(legacyFile), 'the clear key file is gone');
      // An identity signed with that key (as the earlier version signed it) verifies.
      assert.equal(jose.decodeProtectedHeader(t.identity.jwt).kid, kid);
      await jose.jwtVerify(t.identity.jwt, pair.publicKey, { algorithms: ['RS256'] });
    } finally {
      await t.stop();
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('two instances sharing a database verify each other\'s identities, also after one of them rotates', async () => {
    const { shared, stop: stopDatabase } = await startSharedDatabase();
    const a = await startTestCloudly(shared);
    const b = await startTestCloudly(shared);
    try {
      assert.equal(a.cloudly.auth.keyId, b.cloudly.auth.keyId, 'one key for both');
      assert.equal((await b.admin.fire('getClusters', { identity: a.identity })).clusters.length, 0);
      assert.equal((await a.admin.fire('getClusters', { identity: b.identity })).clusters.length, 0);
      const rotated = await a.admin.call('rotateIdentitySigningKey', { expectedKeyId: a.cloudly.auth.keyId });
      const fresh = await a.admin.login('admin', 'test-admin-password-0123');
      assert.equal(jose.decodeProtectedHeader(fresh.jwt).kid, rotated.currentKeyId);
      // b learns of the new key when it meets its kid (it reads the keys again, at most once a second).
      await waitFor(async () => {
        try {
          await b.admin.fire('getClusters', { identity: fresh });
          return true;
        } catch {
          return false;
        }
      }, 'b verifies an identity signed with the key a rotated to');
      assert.deepEqual((await jwksOf(b.baseUrl)).keys.map((key) => key.kid), [rotated.currentKeyId, rotated.previousKeyId]);
      // b's identity from before the rotation still verifies on a.
      assert.equal((await a.admin.fire('getClusters', { identity: b.identity })).clusters.length, 0);
    } finally {
      await a.stop();
      await b.stop();
      await stopDatabase();
    }
  });
});
