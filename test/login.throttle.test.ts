import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, testAdminPassword, testAdminUsername, type ITestCloudly } from './helpers/cloudly.js';
import { rawEnvelope, type IWireAnswer } from './helpers/rawwire.js';
import { loginFailureLimits } from '../ts/manager.admin/admin.manager.js';

/**
 * Failed logins are throttled per address and per address and account, never per account: an
 * attacker from many addresses cannot lock the administrator out. The server trusts 127.0.0.1 as
 * a proxy, so each login names its client address in X-Forwarded-For (documentation addresses).
 */

describe('login throttling without lockout', () => {
  let t: ITestCloudly;
  before(async () => {
    t = await startTestCloudly({ trustedProxies: ['127.0.0.1'], logLevel: 'silent' });
  });
  after(async () => { await t.stop(); });

  const login = async (clientArg: string, usernameArg: string, passwordArg: string): Promise<IWireAnswer> => {
    const response = await fetch(`${t.baseUrl}/typedrequest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': clientArg },
      body: rawEnvelope('adminLoginWithUsernameAndPassword', JSON.stringify({ username: usernameArg, password: passwordArg })),
    });
    return (await response.json()) as IWireAnswer;
  };

  const assertThrottled = (answerArg: IWireAnswer): void => {
    assert.deepEqual(answerArg.error?.data.reasons, ['login-rate-limited'], JSON.stringify(answerArg.error?.data));
    assert.equal(answerArg.error?.data.code, 'unavailable');
    assert.ok((answerArg.error?.data.retryAfterMs ?? 0) > 0);
  };

  test('wrong admin passwords from 10 addresses (20 and more), then the right one from a new address signs in; the attacker\'s address is still throttled', async () => {
    const attackers = Array.from({ length: 10 }, (_unused, index) => `198.51.100.${index + 1}`);
    const { freeFailures } = loginFailureLimits.perAddressAndAccount;
    let wrong = 0;
    // Two rounds over every address first: 20 wrong passwords, twice the old per-account limit.
    for (let round = 0; round < 2; round++) {
      for (const attacker of attackers) {
        assert.equal((await login(attacker, testAdminUsername, `wrong-password-${wrong++}`)).error?.data.code, 'unauthenticated');
      }
    }
    // Twice what once locked the account out: the right password from an address with no failures signs in.
    const afterTwenty = await login('203.0.113.49', testAdminUsername, testAdminPassword);
    assert.equal(afterTwenty.error ?? null, null, JSON.stringify(afterTwenty.error));
    // Then each address goes on until it is throttled: its free failures, and the one that starts its wait.
    for (const attacker of attackers) {
      for (let index = 2; index <= freeFailures; index++) {
        assert.equal((await login(attacker, testAdminUsername, `wrong-password-${wrong++}`)).error?.data.code, 'unauthenticated');
      }
      assertThrottled(await login(attacker, testAdminUsername, `wrong-password-${wrong++}`));
    }
    assert.ok(wrong >= 20);
    const signedIn = await login('203.0.113.50', testAdminUsername, testAdminPassword);
    assert.equal(signedIn.error ?? null, null, JSON.stringify(signedIn.error));
    assert.equal((signedIn.response as { identity: { name: string } }).identity.name, testAdminUsername);
    // The attacker's last address is refused even with the right password, without a look at it.
    assertThrottled(await login(attackers.at(-1)!, testAdminUsername, testAdminPassword));
  });

  test('a throttled address for one account is still judged on its password for another account, and other addresses for the same account are not delayed', async () => {
    const attacker = '198.51.100.77';
    for (let index = 0; index <= loginFailureLimits.perAddressAndAccount.freeFailures; index++) {
      assert.equal((await login(attacker, testAdminUsername, `wrong-${index}`)).error?.data.code, 'unauthenticated');
    }
    assertThrottled(await login(attacker, testAdminUsername, testAdminPassword));
    assert.deepEqual((await login(attacker, 'someone-else', 'wrong-password')).error?.data.reasons, ['credentials-wrong']);
    const other = await login('203.0.113.51', testAdminUsername, testAdminPassword);
    assert.equal(other.error ?? null, null, JSON.stringify(other.error));
  });

  test('an address that fails across many accounts is throttled for every account, while other addresses sign in', async () => {
    const sprayer = '198.51.100.200';
    // Distinct accounts: only the per-address count grows.
    for (let index = 0; index <= loginFailureLimits.perAddress.freeFailures; index++) {
      assert.equal((await login(sprayer, `nobody-${index}`, 'wrong-password')).error?.data.code, 'unauthenticated');
    }
    assertThrottled(await login(sprayer, testAdminUsername, testAdminPassword));
    const other = await login('203.0.113.52', testAdminUsername, testAdminPassword);
    assert.equal(other.error ?? null, null, JSON.stringify(other.error));
  });
});
