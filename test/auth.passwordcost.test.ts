import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError, defaultScryptN, minimumScryptN, readConfig } from '../ts/config.js';
import { adminUserKind } from '../ts/manager.admin/users.js';
import { refusalOf, startTestCloudly, testAdminPassword, testAdminUsername } from './helpers/cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';

/**
 * The cost of password hashing, CLOUDLY_PASSWORD_SCRYPT_N: 16384 unless set, a power of two from
 * 1024 to 65536 otherwise; a stored hash names the N it was made with, so a changed setting hashes
 * new passwords at the new cost and every earlier password still signs in. (The other test files
 * run at 1024, the lowest cost, to spend less CPU: test/helpers/cloudly.ts.)
 */

const costOf = (hashArg: string | undefined): number => Number(/^scrypt\$(\d+)\$8\$1\$/.exec(hashArg ?? '')?.[1]);

test('CLOUDLY_PASSWORD_SCRYPT_N is 16384 unless set; anything but a power of two from 1024 to 65536 stops start-up naming it', () => {
  assert.equal(readConfig({}).passwordScryptN, defaultScryptN);
  assert.equal(defaultScryptN, 16384);
  for (const accepted of ['1024', '2048', '16384', '65536']) {
    assert.equal(readConfig({ CLOUDLY_PASSWORD_SCRYPT_N: accepted }).passwordScryptN, Number(accepted));
  }
  for (const refused of ['512', '1000', '3072', '131072', '0', 'x', '-1024', '16384.0']) {
    assert.throws(
      () => readConfig({ CLOUDLY_PASSWORD_SCRYPT_N: refused }),
      (errorArg) => errorArg instanceof ConfigError && errorArg.variable === 'CLOUDLY_PASSWORD_SCRYPT_N',
      `${refused} is refused`,
    );
  }
});

test('a changed cost hashes new passwords at it; passwords hashed at the earlier cost still sign in, wrong ones do not', async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-passwordcost-'));
  try {
    const t = await startTestCloudly({ dataDir, passwordScryptN: defaultScryptN });
    try {
      const storedHash = async (usernameArg: string) => (await t.cloudly.store.findOne(adminUserKind, { username: usernameArg }))?.passwordHash;
      assert.equal(costOf(await storedHash(testAdminUsername)), 16384, 'the first admin was hashed at the default cost');
      await t.caller.call('createUser', { username: 'early', password: 'early-password-01', role: 'user' });
      assert.equal(costOf(await storedHash('early')), 16384);
    } finally {
      await t.stop();
    }

    const again = await startTestCloudly({ dataDir, passwordScryptN: minimumScryptN });
    try {
      const hashNow = async (usernameArg: string) => (await again.cloudly.store.findOne(adminUserKind, { username: usernameArg }))?.passwordHash;
      // startTestCloudly signed in as the first admin: its 16384 hash verified under the 1024 setting.
      assert.equal(costOf(await hashNow(testAdminUsername)), 16384, 'an existing hash is not rewritten by a restart');
      await new CloudlyAdminClient(again.baseUrl).login('early', 'early-password-01');
      await again.caller.call('createUser', { username: 'late', password: 'late-password-001', role: 'user' });
      assert.equal(costOf(await hashNow('late')), 1024, 'a new account is hashed at the cost set now');
      const late = new CloudlyAdminClient(again.baseUrl);
      await late.login('late', 'late-password-001');
      await late.call('changePassword', { oldPassword: 'late-password-001', newPassword: 'late-password-002' });
      assert.equal(costOf(await hashNow('late')), 1024);
      const wrong = await refusalOf(() => new CloudlyAdminClient(again.baseUrl).login('early', 'not-the-password'));
      assert.equal(wrong.code, 'unauthenticated');
      const unknown = await refusalOf(() => new CloudlyAdminClient(again.baseUrl).login('nobody', testAdminPassword));
      assert.equal(unknown.code, 'unauthenticated');
      await new CloudlyAdminClient(again.baseUrl).login('late', 'late-password-002');
    } finally {
      await again.stop();
    }
  } finally {
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
