import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { accountCheckCacheMs } from '../ts/manager.admin/admin.manager.js';
import { refusalOf, startSharedDatabase, startTestCloudly, testAdminPassword, testAdminUsername, type ITestCloudly } from './helpers/cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import type { IIdentity } from '../ts/interfaces/data/user.js';
import type { IAccount } from '../ts/interfaces/requests/account.js';
import { assertFieldProblems } from './helpers/refusals.js';

/**
 * Accounts against a real Cloudly: roles (a `user` reads, every mutation is refused), disable,
 * delete, role change, password change and logout, each refused on the very next call; passwords
 * and hashes never leave the server (answers, audit events, log lines).
 */

let t: ITestCloudly;
const userPassword = 'viewer-password-0001';

before(async () => {
  t = await startTestCloudly();
});
after(async () => {
  await t.stop();
});

const createUser = (usernameArg: string, roleArg: 'admin' | 'user', passwordArg = userPassword) =>
  t.caller.call('createUser', { username: usernameArg, password: passwordArg, role: roleArg });
const loginAs = async (usernameArg: string, passwordArg = userPassword): Promise<CloudlyAdminClient> => {
  const client = new CloudlyAdminClient(t.baseUrl);
  await client.login(usernameArg, passwordArg);
  return client;
};
const clustersOf = (clientArg: CloudlyAdminClient) => clientArg.call('getClusters', {});
const accountOf = async (userIdArg: string): Promise<IAccount> =>
  (await t.caller.call('getUsers', {})).users.find((userArg) => userArg.userId === userIdArg)!;

test('an admin creates accounts with roles; a name is taken once, even by ten at once; no password or hash is answered', async () => {
  const { user } = await createUser('viewer', 'user');
  assert.deepEqual(Object.keys(user).sort(), ['createdAt', 'disabled', 'generation', 'passwordChangedAt', 'role', 'userId', 'username']);
  assert.equal(user.role, 'user');
  assert.equal(user.disabled, false);
  const racers = await Promise.allSettled(Array.from({ length: 10 }, () => createUser('racer', 'user')));
  assert.equal(racers.filter((result) => result.status === 'fulfilled').length, 1, 'one creation wins');
  for (const result of racers.filter((entry) => entry.status === 'rejected')) {
    assert.deepEqual((result as PromiseRejectedResult).reason.errorData, { code: 'conflict', retryable: true, reasons: ['username-taken'] });
  }
  const { users } = await t.caller.call('getUsers', {});
  assert.deepEqual(users.map((userArg) => userArg.username).sort(), [testAdminUsername, 'racer', 'viewer'].sort());
  const text = JSON.stringify(users);
  assert.ok(!text.includes('scrypt') && !text.includes(userPassword) && !text.includes('passwordHash'));
  const short = await refusalOf(() => createUser('shorty', 'user', 'short'));
  assertFieldProblems(short, [['request.password', 'field-invalid', 'must be a string of 12 to 1024 characters']]);
  const badRole = await refusalOf(() => t.caller.call('createUser', { username: 'x', password: userPassword, role: 'root' as never }));
  assertFieldProblems(badRole, [['request.role', 'field-not-supported', 'must be admin or user']]);
});

test('a user reads, and every mutation (a dry run too) is refused forbidden', async () => {
  const viewer = await loginAs('viewer');
  await t.createCluster('accounts-cluster');
  assert.equal((await clustersOf(viewer)).clusters.length, 1, 'a user reads');
  await viewer.call('getOperations', {});
  const refused = await refusalOf(() => viewer.call('createCluster', { name: 'by-viewer' }));
  assert.deepEqual(refused, { code: 'forbidden', retryable: false, reasons: ['role-not-allowed'], causes: [{ path: 'identity.role', message: 'must be admin' }] });
  const dry = await refusalOf(() => viewer.call('createCluster', { name: 'by-viewer', dryRun: true } as never));
  assert.equal(dry.code, 'forbidden');
  assert.equal((await refusalOf(() => viewer.call('getUsers', {}))).code, 'forbidden', 'the account list is for admins');
  assert.equal((await clustersOf(t.admin)).clusters.length, 1, 'nothing was created');
  // A user may open the admin socket (to watch) and read over it.
  await viewer.connectSocket();
  assert.equal((await clustersOf(viewer)).clusters.length, 1);
  viewer.close();
});

test('a disabled account is refused on its next call and cannot log in; enabled again, its old identity stays refused', async () => {
  const viewer = await loginAs('viewer');
  await clustersOf(viewer);
  const before = await accountOf(viewer.identity!.userId);
  const { user } = await t.caller.call('setUserDisabled', { userId: before.userId, disabled: true, expectedGeneration: before.generation });
  assert.equal(user.disabled, true);
  assert.deepEqual(await refusalOf(() => clustersOf(viewer)), { code: 'unauthenticated', retryable: false, reasons: ['account-disabled'], causes: [{ path: 'identity', message: 'belongs to a disabled account' }] });
  assert.equal((await refusalOf(() => loginAs('viewer'))).code, 'unauthenticated');
  const stale = await refusalOf(() => t.caller.call('setUserDisabled', { userId: before.userId, disabled: false, expectedGeneration: before.generation }));
  assert.equal(stale.code, 'conflict');
  await t.caller.call('setUserDisabled', { userId: before.userId, disabled: false, expectedGeneration: user.generation });
  assert.equal((await refusalOf(() => clustersOf(viewer))).code, 'unauthenticated');
  await clustersOf(await loginAs('viewer'));
});

test('a deleted account is refused on its next call; one re-created under the name does not bring its identities back', async () => {
  await createUser('leaver', 'user');
  const leaver = await loginAs('leaver');
  await clustersOf(leaver);
  const account = await accountOf(leaver.identity!.userId);
  const { user } = await t.caller.call('deleteUser', { userId: account.userId, expectedGeneration: account.generation });
  assert.equal(user.username, 'leaver');
  assert.deepEqual((await refusalOf(() => clustersOf(leaver))).reasons, ['account-deleted']);
  await createUser('leaver', 'user', 'another-password-0002');
  assert.equal((await refusalOf(() => clustersOf(leaver))).code, 'unauthenticated', 'the same name is a new account');
  const missing = await refusalOf(() => t.caller.call('deleteUser', { userId: 'admin-none', expectedGeneration: 1 }));
  assert.deepEqual([missing.code, missing.reasons], ['not-found', ['user-not-found']]);
});

test('a password change needs the old password, revokes every identity of the account and answers a fresh one', async () => {
  const first = await loginAs('viewer');
  const second = await loginAs('viewer');
  const wrong = await refusalOf(() => first.call('changePassword', { oldPassword: 'not-the-password', newPassword: 'viewer-password-0002' }));
  assert.deepEqual(wrong.reasons, ['old-password-wrong']);
  const { identity } = await first.call('changePassword', { oldPassword: userPassword, newPassword: 'viewer-password-0002' });
  assert.equal((await refusalOf(() => clustersOf(first))).code, 'unauthenticated', 'the identity that changed it');
  assert.equal((await refusalOf(() => clustersOf(second))).code, 'unauthenticated', 'and every other one');
  first.identity = identity;
  await clustersOf(first);
  assert.equal((await refusalOf(() => loginAs('viewer'))).code, 'unauthenticated', 'the old password no longer logs in');
  await clustersOf(await loginAs('viewer', 'viewer-password-0002'));
  // The audit log names the change, without the password or the hash.
  const events = JSON.stringify(await t.caller.call('getAuditEvents', { limit: 1000 }));
  assert.ok(events.includes('changePassword'));
  assert.ok(!events.includes('viewer-password-000') && !events.includes('scrypt'));
  const logs = t.logs.join('');
  assert.ok(!logs.includes('viewer-password-000') && !logs.includes('scrypt$'), 'no password or hash in a log line');
});

test('logout revokes that identity at once, on HTTP and on the socket; logout of all sessions revokes every one', async () => {
  const a = await loginAs('viewer', 'viewer-password-0002');
  const b = await loginAs('viewer', 'viewer-password-0002');
  await b.connectSocket();
  assert.deepEqual(await a.call('logout', {}), { revoked: 'session' });
  assert.deepEqual((await refusalOf(() => clustersOf(a))).reasons, ['session-revoked']);
  await clustersOf(b);
  const socketJwt = b.identity!.jwt;
  assert.deepEqual(await b.call('logout', { allSessions: true }), { revoked: 'all-sessions' });
  assert.equal((await refusalOf(() => clustersOf(b))).code, 'unauthenticated', 'refused on the open socket');
  b.close();
  const reopened = new CloudlyAdminClient(t.baseUrl);
  reopened.identity = { ...b.identity! , jwt: socketJwt } as IIdentity;
  await assert.rejects(reopened.connectSocket(), 'a revoked identity opens no socket');
});

test('roles change with compare-and-swap; the last enabled admin and one\'s own account are kept', async () => {
  const self = await accountOf(t.identity.userId);
  const lastAdmin = await refusalOf(() => t.caller.call('setUserRole', { userId: self.userId, role: 'user', expectedGeneration: self.generation }));
  assert.deepEqual(lastAdmin.reasons, ['last-enabled-admin']);
  assert.deepEqual((await refusalOf(() => t.caller.call('setUserDisabled', { userId: self.userId, disabled: true, expectedGeneration: self.generation }))).reasons, ['own-account']);
  assert.deepEqual((await refusalOf(() => t.caller.call('deleteUser', { userId: self.userId, expectedGeneration: self.generation }))).reasons, ['own-account']);
  const viewer = await loginAs('viewer', 'viewer-password-0002');
  const account = await accountOf(viewer.identity!.userId);
  await t.caller.call('setUserRole', { userId: account.userId, role: 'admin', expectedGeneration: account.generation });
  assert.equal((await refusalOf(() => clustersOf(viewer))).code, 'unauthenticated', 'an identity of the old role must log in again');
  const promoted = await loginAs('viewer', 'viewer-password-0002');
  assert.equal(promoted.identity!.role, 'admin');
  await promoted.call('createCluster', { name: 'by-promoted' });
  // Now there is another admin: the bootstrap admin may be demoted by it, and still logs in as a user.
  const bootstrap = await accountOf(t.identity.userId);
  await promoted.call('setUserRole', { userId: bootstrap.userId, role: 'user', expectedGeneration: bootstrap.generation });
  const demoted = await loginAs(testAdminUsername, testAdminPassword);
  assert.equal(demoted.identity!.role, 'user');
  assert.equal((await refusalOf(() => demoted.call('createCluster', { name: 'x' }))).code, 'forbidden');
});

/** Calls until refused; answers the refusal and how long after `sinceArg` it came. */
const refusedWithin = async (callArg: () => Promise<unknown>, sinceArg: number): Promise<{ reasons: unknown; afterMs: number }> => {
  for (;;) {
    try {
      await callArg();
    } catch (error) {
      return { reasons: (error as { errorData?: { reasons?: unknown } }).errorData?.reasons, afterMs: Date.now() - sinceArg };
    }
    assert.ok(Date.now() - sinceArg < 5_000, 'never refused');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

test('two instances sharing a database: a disable or logout made through one is refused on the other within the stated bound', async () => {
  const { shared, stop: stopDatabase } = await startSharedDatabase();
  const a = await startTestCloudly(shared);
  const b = await startTestCloudly(shared);
  try {
    await a.admin.call('createUser', { username: 'roaming', password: userPassword, role: 'user' });
    const onA = new CloudlyAdminClient(a.baseUrl);
    const identity = await onA.login('roaming', userPassword);
    const onB = new CloudlyAdminClient(b.baseUrl);
    onB.identity = identity;
    await onB.call('getClusters', {});
    await onA.call('logout', {});
    const loggedOutAt = Date.now();
    assert.deepEqual((await refusalOf(() => onA.call('getClusters', {}))).reasons, ['session-revoked'], 'at once where it happened');
    // The other instance may reuse its read of the account for accountCheckCacheMs.
    const onOther = await refusedWithin(() => onB.call('getClusters', {}), loggedOutAt);
    assert.deepEqual(onOther.reasons, ['session-revoked']);
    assert.ok(onOther.afterMs <= accountCheckCacheMs + 500, `refused on the other instance after ${onOther.afterMs} ms`);
    onB.identity = await onB.login('roaming', userPassword);
    await onB.call('getClusters', {});
    const account = (await b.admin.call('getUsers', {})).users.find((userArg) => userArg.username === 'roaming')!;
    onA.identity = onB.identity;
    await onA.call('getClusters', {});
    await b.admin.call('setUserDisabled', { userId: account.userId, disabled: true, expectedGeneration: account.generation });
    const disabledAt = Date.now();
    const disabledOnA = await refusedWithin(() => onA.call('getClusters', {}), disabledAt);
    assert.deepEqual(disabledOnA.reasons, ['account-disabled']);
    assert.ok(disabledOnA.afterMs <= accountCheckCacheMs + 500, `refused on the other instance after ${disabledOnA.afterMs} ms`);
  } finally {
    await a.stop();
    await b.stop();
    await stopDatabase();
  }
});
