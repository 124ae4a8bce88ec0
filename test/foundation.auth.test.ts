import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as jose from 'jose';
import { refusalOf, startTestCloudly, testAdminPassword, type ITestCloudly } from './helpers/cloudly.js';
import { adminAudience } from '../ts/core/auth.js';
import type { IIdentity } from '../ts/interfaces/data/user.js';
import type { TUntypedContract } from '../ts/client/admin.js';

const base64url = (valueArg: unknown) => Buffer.from(JSON.stringify(valueArg)).toString('base64url');

describe('admin identities: every forged or stale identity is refused by name', () => {
  let t: ITestCloudly;
  before(async () => {
    t = await startTestCloudly();
    await t.createCluster('existing');
  });
  after(async () => { await t.stop(); });

  const clustersWith = (identityArg: unknown) =>
    t.admin.fire('getClusters', { identity: identityArg as IIdentity });

  const withJwt = (jwtArg: string): IIdentity => ({ ...t.identity, jwt: jwtArg });

  test('login answers an identity whose JWT verifies against the published JWKS', async () => {
    const jwks = await (await fetch(`${t.baseUrl}/.well-known/jwks.json`)).json() as jose.JSONWebKeySet;
    const { payload, protectedHeader } = await jose.jwtVerify(t.identity.jwt, jose.createLocalJWKSet(jwks), {
      algorithms: ['RS256'],
      audience: adminAudience,
    });
    assert.equal(protectedHeader.alg, 'RS256');
    assert.equal(protectedHeader.kid, jwks.keys[0].kid);
    assert.equal(payload.sub, t.identity.userId);
    assert.equal(t.identity.role, 'admin');
    assert.ok(t.identity.expiresAt > Date.now());
    assert.equal((await clustersWith(t.identity)).clusters.length, 1);
  });

  test('a wrong password and an unknown user get the same refusal', async () => {
    const wrong = await refusalOf(() => t.admin.fire('adminLoginWithUsernameAndPassword', { username: 'admin', password: 'not-the-password' }));
    const unknown = await refusalOf(() => t.admin.fire('adminLoginWithUsernameAndPassword', { username: 'nobody', password: 'x' }));
    assert.deepEqual(wrong, { code: 'unauthenticated', retryable: false, reasons: ['credentials-wrong'], causes: [{ message: 'username or password is wrong' }] });
    assert.deepEqual(unknown, wrong);
  });

  test('a request without identity is unauthenticated', async () => {
    const data = await refusalOf(() => t.admin.fire<TUntypedContract>('getClusters', {}));
    assert.equal(data.code, 'unauthenticated');
  });

  test('an expired JWT is refused as expired', async () => {
    const jwt = await t.cloudly.auth.signJwt(
      { name: 'admin', role: 'admin', type: 'user' },
      { audience: adminAudience, subject: t.identity.userId, expiresAtMs: Date.now() - 60_000 },
    );
    const data = await refusalOf(() => clustersWith(withJwt(jwt)));
    assert.deepEqual(data, { code: 'unauthenticated', retryable: false, reasons: ['identity-expired'], causes: [{ path: 'identity.jwt', message: 'has expired; log in again' }] });
  });

  test('a tampered payload fails verification', async () => {
    const userIdentity = await t.cloudly.auth.issueIdentity({ id: 'user-1', username: 'someone', role: 'user' });
    const [header, payload, signature] = userIdentity.jwt.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
    const forged = [header, base64url({ ...claims, role: 'admin' }), signature].join('.');
    const data = await refusalOf(() => clustersWith({ ...userIdentity, role: 'admin', jwt: forged }));
    assert.deepEqual(data.reasons, ['identity-invalid']);
    assert.deepEqual(data.causes, [{ path: 'identity.jwt', message: 'failed verification (signature, issuer or audience)' }]);
  });

  test('alg none is refused', async () => {
    const claims = JSON.parse(Buffer.from(t.identity.jwt.split('.')[1], 'base64url').toString()) as object;
    const unsigned = `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url(claims)}.`;
    const data = await refusalOf(() => clustersWith(withJwt(unsigned)));
    assert.deepEqual(data.reasons, ['identity-invalid']);
    assert.deepEqual(data.causes, [{ path: 'identity.jwt', message: 'failed verification (signature, issuer or audience)' }]);
  });

  /** An admin-looking JWT signed with a key and header Cloudly did not choose. */
  const foreignAdminJwt = (headerArg: jose.JWTHeaderParameters, keyArg: jose.CryptoKey | Uint8Array) =>
    new jose.SignJWT({ name: 'admin', role: 'admin', type: 'user' })
      .setProtectedHeader(headerArg)
      .setIssuer('serve.zone/cloudly')
      .setAudience(adminAudience)
      .setSubject(t.identity.userId)
      .setExpirationTime('1h')
      .sign(keyArg);

  test('a JWT signed by another key with the same kid is refused', async () => {
    const { privateKey } = await jose.generateKeyPair('RS256');
    const jwt = await foreignAdminJwt({ alg: 'RS256', kid: t.cloudly.auth.keyId }, privateKey);
    const data = await refusalOf(() => clustersWith(withJwt(jwt)));
    assert.deepEqual(data.reasons, ['identity-invalid']);
    assert.deepEqual(data.causes, [{ path: 'identity.jwt', message: 'failed verification (signature, issuer or audience)' }]);
  });

  test('HS256 keyed with the public key is refused', async () => {
    const secret = new TextEncoder().encode(JSON.stringify(t.cloudly.auth.publicJwk));
    const jwt = await foreignAdminJwt({ alg: 'HS256' }, secret);
    const data = await refusalOf(() => clustersWith(withJwt(jwt)));
    assert.deepEqual(data.reasons, ['identity-invalid']);
    assert.deepEqual(data.causes, [{ path: 'identity.jwt', message: 'failed verification (signature, issuer or audience)' }]);
  });

  test('a user identity on an admin method is forbidden and changes nothing', async () => {
    const userIdentity = await t.cloudly.auth.issueIdentity({ id: 'user-2', username: 'viewer', role: 'user' });
    const data = await refusalOf(() => t.admin.fire('createCluster', { identity: userIdentity, name: 'sneaky' }));
    assert.deepEqual(data, { code: 'forbidden', retryable: false, reasons: ['role-not-allowed'], causes: [{ path: 'identity.role', message: 'must be admin' }] });
    assert.equal((await clustersWith(t.identity)).clusters.length, 1);
  });

  test('visible identity fields that disagree with the signed claims are refused', async () => {
    const userIdentity = await t.cloudly.auth.issueIdentity({ id: 'user-3', username: 'viewer', role: 'user' });
    const data = await refusalOf(() => clustersWith({ ...userIdentity, role: 'admin' }));
    assert.deepEqual(data.reasons, ['identity-invalid']);
    assert.deepEqual(data.causes, [{ path: 'identity.role', message: 'disagrees with its signed claims' }]);
  });

  test('every visible identity field is checked against the signed claims, and all disagreements are named', async () => {
    const changed = { ...t.identity, name: 'someone-else', userId: 'admin-other', expiresAt: t.identity.expiresAt + 3_600_000, type: 'service' };
    const data = await refusalOf(() => clustersWith(changed as typeof t.identity));
    assert.equal(data.code, 'unauthenticated');
    assert.deepEqual(data.reasons, ['identity-invalid']);
    assert.deepEqual(data.causes, ['userId', 'name', 'type', 'expiresAt'].map((fieldArg) => ({ path: `identity.${fieldArg}`, message: 'disagrees with its signed claims' })));
    for (const field of ['name', 'type', 'expiresAt'] as const) {
      const { [field]: _dropped, ...without } = t.identity;
      const missing = await refusalOf(() => clustersWith(without as typeof t.identity));
      assert.deepEqual(missing.causes, [{ path: `identity.${field}`, message: 'disagrees with its signed claims' }]);
    }
    assert.equal((await clustersWith(t.identity)).clusters.length, 1);
  });

  test('the server keeps serving after every refusal, and no password or JWT reached the log', async () => {
    assert.equal((await clustersWith(t.identity)).clusters.length, 1);
    const log = t.logs.join('');
    assert.equal(log.includes(testAdminPassword), false);
    assert.equal(log.includes(t.identity.jwt), false);
    assert.ok(log.includes('administrator logged in'));
  });
});
