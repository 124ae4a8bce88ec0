import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { assertRefusedLikeApi, createCli, jsonOf, type ICli } from './cli.fixture.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';

/**
 * `cloudly users list|create|disable|enable|set-role|delete|passwd` and `cloudly logout` against a
 * real server: the administrator's CLI and a second CLI (its own config directory) logged in as
 * the account it creates. Passwords only ever on stdin.
 */

let t: ITestCloudly;
let admin: ICli;
let operator: ICli;
const operatorPassword = 'operator-password-0123';
const newOperatorPassword = 'operator-password-4567';

type TLooseContract = { method: string; request: any; response: any };
const api = (methodArg: string, requestArg: Record<string, unknown>): Promise<any> => t.caller.call<TLooseContract>(methodArg, requestArg);

const storedIdentity = async (cliArg: ICli): Promise<any> => {
  const file = JSON.parse(await fsp.readFile(path.join(cliArg.configDir, 'credentials.json'), 'utf8'));
  return file.contexts[file.currentContext].identity;
};

/** A call with exactly this identity, past any CLI. */
const callAs = async (identityArg: any, methodArg: string): Promise<unknown> => {
  const client = new CloudlyAdminClient(t.baseUrl);
  client.identity = identityArg;
  return client.call<TLooseContract>(methodArg, {});
};

before(async () => {
  t = await startTestCloudly();
  admin = await createCli();
  operator = await createCli();
  await admin.login(t);
});

after(async () => {
  await t.stop();
  await admin.dispose();
  await operator.dispose();
});

test('users create: the password only on stdin; a dry run creates nothing; the account is the API answer and never shows a password', async () => {
  const asArgument = await admin.run(['users', 'create', '--username', 'operator', '--password', operatorPassword]);
  assert.equal(asArgument.code, 2, 'a password is never an argument');
  const before = await api('getUsers', {});

  const dry = await admin.run(['users', 'create', '--username', 'operator', '--role', 'user', '--dry-run', '-o', 'json'], `${operatorPassword}\n`);
  assert.equal(jsonOf(dry).dryRun, true);
  assert.match(dry.stderr, /dry run: every check passed/);
  assert.deepEqual(await api('getUsers', {}), before);

  const created = await admin.run(['users', 'create', '--username', 'operator', '--role', 'user', '-o', 'json'], `${operatorPassword}\n`);
  const answer = jsonOf(created);
  assert.equal(answer.user.username, 'operator');
  assert.equal(answer.user.role, 'user');
  assert.equal(answer.user.disabled, false);
  assert.ok(!created.stdout.includes(operatorPassword) && !created.stderr.includes(operatorPassword));
  assert.deepEqual((await api('getUsers', {})).users.find((userArg: any) => userArg.userId === answer.user.userId), answer.user);

  const taken = await admin.run(['users', 'create', '--username', 'operator'], 'another-password-0000\n');
  assertRefusedLikeApi(taken, await refusalOf(() => api('createUser', { username: 'operator', password: 'another-password-0000', role: 'user' })));
  const badRole = await admin.run(['users', 'create', '--username', 'x', '--role', 'root'], 'x\n');
  assert.equal(badRole.code, 2);
  assert.equal(badRole.stderr, 'cloudly: --role must be one of admin, user, not "root"\n', 'the contract\'s roles are named; nothing is sent');
  const noPassword = await admin.run(['users', 'create', '--username', 'y'], '');
  assert.equal(noPassword.code, 2);
  assert.match(noPassword.stderr, /no password given/);
});

test('users list: JSON is exactly the API answer; the table fits an 80-column terminal', async () => {
  const listed = jsonOf(await admin.run(['users', 'list', '-o', 'json']));
  assert.deepEqual(listed, await api('getUsers', {}));
  assert.deepEqual(listed.users.map((userArg: any) => userArg.username).sort(), ['admin', 'operator']);
  const table = await admin.run(['users', 'list'], '', { terminalColumns: 80 });
  assert.equal(table.code, 0, table.stderr);
  const lines = table.stdout.trimEnd().split('\n');
  assert.match(lines[0], /^USER\s+NAME\s+ROLE\s+DISABLED\s+GEN\s+CREATED$/);
  assert.ok(lines.every((lineArg) => lineArg.length <= 80), table.stdout);
});

test('a read-only user logs in with the CLI, reads, and is refused every change (exit 1)', async () => {
  const login = await operator.run(['login', '--url', t.baseUrl, '--username', 'operator'], `${operatorPassword}\n`);
  assert.equal(login.code, 0, login.stderr);
  const listed = jsonOf(await operator.run(['clusters', 'list', '-o', 'json']));
  assert.deepEqual(listed, await api('getClusters', {}));
  const change = await operator.run(['clusters', 'create', '--name', 'not-allowed']);
  assert.equal(change.code, 1, change.stderr);
  assert.match(change.stderr, /^refused: forbidden/m);
  assert.deepEqual((await api('getClusters', {})).clusters, []);
  const users = await operator.run(['users', 'list']);
  assert.equal(users.code, 1, 'listing accounts is for admins');
});

test('users passwd: current and new password from stdin; the CLI keeps the fresh identity; the old password no longer logs in', async () => {
  const before = await storedIdentity(operator);
  const wrong = await operator.run(['users', 'passwd'], `not-the-password\n${newOperatorPassword}\n`);
  assert.equal(wrong.code, 1, wrong.stderr);
  assert.match(wrong.stderr, /^refused: /m);

  const changed = await operator.run(['users', 'passwd'], `${operatorPassword}\n${newOperatorPassword}\n`);
  assert.equal(changed.code, 0, changed.stderr);
  assert.equal(changed.stdout, '', 'the fresh identity is a credential: not printed');
  assert.match(changed.stderr, /password changed for operator/);
  const after = await storedIdentity(operator);
  assert.notEqual(after.jwt ?? JSON.stringify(after), before.jwt ?? JSON.stringify(before));
  assert.equal((await operator.run(['clusters', 'list'])).code, 0, 'the kept fresh identity works');
  assert.equal((await refusalOf(() => callAs(before, 'getClusters'))).code, 'unauthenticated', 'the identity before the change is revoked');

  const oldLogin = await operator.run(['login', '--url', t.baseUrl, '--username', 'operator'], `${operatorPassword}\n`);
  assert.equal(oldLogin.code, 1);
  const newLogin = await operator.run(['login', '--url', t.baseUrl, '--username', 'operator'], `${newOperatorPassword}\n`);
  assert.equal(newLogin.code, 0, newLogin.stderr);
});

test('users disable (dry run first) refuses the account at its next call; enable lets it log in again; set-role', async () => {
  const { users } = await api('getUsers', {});
  const account = users.find((userArg: any) => userArg.username === 'operator');
  const dry = await admin.run(['users', 'disable', '--user', 'operator', '--expect-current', '--dry-run', '-o', 'json']);
  assert.equal(jsonOf(dry).dryRun, true);
  assert.match(dry.stderr, new RegExp(`--expect-current: read account operator at generation ${account.generation}`));
  assert.equal((await operator.run(['clusters', 'list'])).code, 0, 'still enabled after the dry run');

  const disabled = jsonOf(await admin.run(['users', 'disable', '--user', account.userId, '--expect', String(account.generation), '-o', 'json']));
  assert.equal(disabled.user.disabled, true);
  assert.deepEqual((await api('getUsers', {})).users.find((userArg: any) => userArg.userId === account.userId), disabled.user);
  const refused = await operator.run(['clusters', 'list']);
  assert.equal(refused.code, 1, refused.stderr);
  assert.match(refused.stderr, /^refused: unauthenticated/m);
  assert.equal((await operator.run(['login', '--url', t.baseUrl, '--username', 'operator'], `${newOperatorPassword}\n`)).code, 1);

  const enabled = jsonOf(await admin.run(['users', 'enable', '--user', 'operator', '--expect-current', '-o', 'json']));
  assert.equal(enabled.user.disabled, false);
  assert.equal((await operator.run(['login', '--url', t.baseUrl, '--username', 'operator'], `${newOperatorPassword}\n`)).code, 0);

  const promoted = jsonOf(await admin.run(['users', 'set-role', '--user', 'operator', '--role', 'admin', '--expect-current', '-o', 'json']));
  assert.equal(promoted.user.role, 'admin');
});

test('users delete: a stale expectation is refused with its reasons (exit 1); then the account is gone', async () => {
  const account = (await api('getUsers', {})).users.find((userArg: any) => userArg.username === 'operator');
  const stale = await admin.run(['users', 'delete', '--user', account.userId, '--expect', '1']);
  assertRefusedLikeApi(stale, await refusalOf(() => api('deleteUser', { userId: account.userId, expectedGeneration: 1 })));
  const deleted = jsonOf(await admin.run(['users', 'delete', '--user', 'operator', '--expect-current', '-o', 'json']));
  assert.equal(deleted.user.userId, account.userId);
  assert.equal((await api('getUsers', {})).users.some((userArg: any) => userArg.userId === account.userId), false);
  const unknown = await admin.run(['users', 'delete', '--user', 'operator', '--expect-current']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /no account "operator"/);
});

test('logout revokes the session on the server, then forgets it', async () => {
  const identity = await storedIdentity(admin);
  assert.deepEqual(await callAs(identity, 'getClusters'), await api('getClusters', {}));
  const out = await admin.run(['logout']);
  assert.equal(out.code, 0, out.stderr);
  assert.match(out.stderr, /^revoked this session at http:\/\/127\.0\.0\.1:\d+$/m);
  assert.equal((await refusalOf(() => callAs(identity, 'getClusters'))).code, 'unauthenticated', 'the kept identity is revoked');
  const file = JSON.parse(await fsp.readFile(path.join(admin.configDir, 'credentials.json'), 'utf8'));
  assert.deepEqual(file.contexts, {});
  const after = await admin.run(['clusters', 'list']);
  assert.equal(after.code, 2, 'not logged in: usage');
});
