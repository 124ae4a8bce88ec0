import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SignJWT, createLocalJWKSet, decodeJwt, exportJWK, generateKeyPair } from 'jose';
import {
  RestoreGrantRefusedError,
  restoreGrantAudience,
  signRestoreGrant,
  verifyRestoreGrant,
  type IRestoreGrantBinding,
} from '../ts/manager.backup/restoregrants.js';

const issuer = 'https://cloudly.test';

const keys = async () => {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  return { signing: { privateKey, kid: 'k1', issuer }, publicKey, jwks: createLocalJWKSet({ keys: [jwk] }) };
};

const binding = (): IRestoreGrantBinding => ({
  operation: 'prepare',
  clusterId: 'cluster-1',
  targetNodeName: 'node-a',
  restoreId: 'restore-1',
  mappingsSha256: 'a'.repeat(64),
  manifestSha256: 'b'.repeat(64),
});

const refusedWith = (reasonArg: string) => (error: unknown): boolean =>
  error instanceof RestoreGrantRefusedError && error.reason === reasonArg;

test('a grant verifies with the published key and names exactly what it binds', async () => {
  const { signing, jwks } = await keys();
  const grant = await signRestoreGrant(signing, binding());
  assert.equal(grant.split('.').length, 3, 'compact JWS');
  const claims = await verifyRestoreGrant(grant, jwks, issuer, binding());
  assert.equal(claims.operation, 'prepare');
  assert.ok(claims.expiresAt - claims.issuedAt <= 300);
  const payload = decodeJwt(grant);
  assert.equal(payload.aud, restoreGrantAudience);
  assert.equal(payload.cluster, 'cluster-1');
  assert.equal(payload.mappings_sha256, 'a'.repeat(64));
});

test('a grant for one operation does not authorize another, nor another node, restore or manifest', async () => {
  const { signing, publicKey } = await keys();
  const grant = await signRestoreGrant(signing, binding());
  await assert.rejects(verifyRestoreGrant(grant, publicKey, issuer, { ...binding(), operation: 'execute' }), refusedWith('grant-operation-mismatch'));
  await assert.rejects(verifyRestoreGrant(grant, publicKey, issuer, { ...binding(), clusterId: 'cluster-2' }), refusedWith('grant-cluster-mismatch'));
  await assert.rejects(verifyRestoreGrant(grant, publicKey, issuer, { ...binding(), targetNodeName: 'node-b' }), refusedWith('grant-node-mismatch'));
  await assert.rejects(verifyRestoreGrant(grant, publicKey, issuer, { ...binding(), restoreId: 'restore-2' }), refusedWith('grant-restore-mismatch'));
  await assert.rejects(verifyRestoreGrant(grant, publicKey, issuer, { ...binding(), mappingsSha256: 'c'.repeat(64) }), refusedWith('grant-mappings-mismatch'));
  await assert.rejects(verifyRestoreGrant(grant, publicKey, issuer, { ...binding(), manifestSha256: 'c'.repeat(64) }), refusedWith('grant-manifest-mismatch'));
});

test('a write-object grant binds its one object', async () => {
  const { signing, publicKey } = await keys();
  const object = { path: 'data/1.pack', size: 10, sha256: 'd'.repeat(64) };
  const writeBinding: IRestoreGrantBinding = { ...binding(), operation: 'write-object', object };
  const grant = await signRestoreGrant(signing, writeBinding);
  assert.equal((await verifyRestoreGrant(grant, publicKey, issuer, writeBinding)).object?.path, 'data/1.pack');
  await assert.rejects(
    verifyRestoreGrant(grant, publicKey, issuer, { ...writeBinding, object: { ...object, size: 11 } }),
    refusedWith('grant-object-mismatch'),
  );
  await assert.rejects(signRestoreGrant(signing, { ...binding(), object }), /write-object/);
});

test('a tampered grant fails verification', async () => {
  const { signing, jwks } = await keys();
  const grant = await signRestoreGrant(signing, binding());
  const [header, payload, signature] = grant.split('.');
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  claims.node = 'node-b';
  const forged = [header, Buffer.from(JSON.stringify(claims)).toString('base64url'), signature].join('.');
  await assert.rejects(verifyRestoreGrant(forged, jwks, issuer, { ...binding(), targetNodeName: 'node-b' }), refusedWith('grant-signature-invalid'));
  const flipped = `${grant.slice(0, -2)}${grant.endsWith('AA') ? 'BB' : 'AA'}`;
  await assert.rejects(verifyRestoreGrant(flipped, jwks, issuer, binding()), refusedWith('grant-signature-invalid'));
});

test('a grant signed by another key, for another audience, or unsigned fails verification', async () => {
  const { jwks } = await keys();
  const other = await keys();
  const foreign = await signRestoreGrant(other.signing, binding());
  await assert.rejects(verifyRestoreGrant(foreign, jwks, issuer, binding()), refusedWith('grant-signature-invalid'));
  const wrongAudience = await new SignJWT({ op: 'prepare' }).setProtectedHeader({ alg: 'RS256', kid: 'k1' })
    .setIssuer(issuer).setAudience('someone-else').setIssuedAt().setExpirationTime('1m').sign(other.signing.privateKey);
  await assert.rejects(verifyRestoreGrant(wrongAudience, other.publicKey, issuer, binding()), refusedWith('grant-claim-invalid:aud'));
  const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none' })).toString('base64url')}.${Buffer.from('{}').toString('base64url')}.`;
  await assert.rejects(verifyRestoreGrant(unsigned, jwks, issuer, binding()), refusedWith('grant-signature-invalid'));
});

test('an expired grant fails verification', async () => {
  const { signing, jwks } = await keys();
  const tenMinutesAgo = Math.floor(Date.now() / 1000) - 600;
  const grant = await signRestoreGrant(signing, binding(), tenMinutesAgo);
  await assert.rejects(verifyRestoreGrant(grant, jwks, issuer, binding()), refusedWith('grant-expired'));
});
