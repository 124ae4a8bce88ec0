import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { startTestCloudly, testAdminPassword, type ITestCloudly } from './helpers/cloudly.js';
import { createCli, jsonOf, type ICli } from './cli.fixture.js';

/**
 * Named contexts (kubectl's): logins to two real servers as two accounts, kept side by side in one
 * config directory, one current, each switchable (`config get-contexts`, `use-context`,
 * `--context`); a login never replaces another account's identity; a file from before contexts
 * is read as one context per server.
 */

let first: ITestCloudly;
let second: ITestCloudly;
let cli: ICli;
const viewerPassword = 'contexts-viewer-password-0';
const hostOf = (urlArg: string): string => new URL(urlArg).host;

before(async () => {
  [first, second] = await Promise.all([startTestCloudly(), startTestCloudly()]);
  await first.caller.call('createUser', { username: 'viewer', password: viewerPassword, role: 'user' });
  cli = await createCli();
});

after(async () => {
  await Promise.all([first.stop(), second.stop()]);
  await cli.dispose();
});

const contexts = async () => jsonOf(await cli.run(['config', 'get-contexts', '-o', 'json']));

test('a second login to the same server as another account keeps the first as its own context', async () => {
  await cli.login(first);
  const viewerLogin = await cli.run(['login', '--url', first.baseUrl, '--username', 'viewer'], `${viewerPassword}\n`);
  assert.equal(viewerLogin.code, 0, viewerLogin.stderr);
  const admin = `admin@${hostOf(first.baseUrl)}`;
  const viewer = `viewer@${hostOf(first.baseUrl)}`;
  assert.match(viewerLogin.stderr, new RegExp(`identity kept as context ${viewer} \\(current\\)`));
  const listed = await contexts();
  assert.equal(listed.currentContext, viewer);
  assert.deepEqual(listed.contexts.map((c: any) => [c.name, c.current, c.server, c.username]), [
    [admin, false, first.baseUrl, 'admin'],
    [viewer, true, first.baseUrl, 'viewer'],
  ]);
  assert.ok(!JSON.stringify(listed).includes('identity') && !/eyJ/.test(JSON.stringify(listed)), 'no identity is printed');

  // The current context's identity is the one used: the read-only account may not list accounts.
  const asViewer = await cli.run(['users', 'list']);
  assert.equal(asViewer.code, 1);
  assert.match(asViewer.stderr, /^refused: forbidden/m);
  // --context picks another for one command; the current one stays.
  assert.equal((await cli.run(['--context', admin, 'users', 'list'])).code, 0);
  assert.equal((await contexts()).currentContext, viewer);

  const switched = await cli.run(['config', 'use-context', admin]);
  assert.equal(switched.code, 0, switched.stderr);
  assert.match(switched.stderr, new RegExp(`switched to context ${admin} \\(admin at ${first.baseUrl.replace(/[.]/g, '\\.')}\\)`));
  assert.equal((await cli.run(['users', 'list'])).code, 0);
  assert.equal((await cli.run(['config', 'current-context'])).stdout, `${admin}\n`);
  const table = await cli.run(['config', 'get-contexts']);
  assert.match(table.stdout, new RegExp(`^\\*\\s+${admin}\\s+${first.baseUrl.replace(/[.]/g, '\\.')}\\s+admin\\s`, 'm'));
});

test('contexts of two servers side by side: --context names one, --url picks that server\'s context, an unknown name is a usage error', async () => {
  const login = await cli.run(['login', '--url', second.baseUrl, '--username', 'admin', '--context', 'staging'], `${testAdminPassword}\n`);
  assert.equal(login.code, 0, login.stderr);
  assert.equal((await contexts()).currentContext, 'staging');
  await second.createCluster('only-on-staging');
  const onStaging = jsonOf(await cli.run(['clusters', 'list', '-o', 'json']));
  assert.deepEqual(onStaging.clusters.map((c: any) => c.name), ['only-on-staging']);
  // The first server by URL: its most recent login (viewer), whose identity it accepts.
  const byUrl = jsonOf(await cli.run(['--url', first.baseUrl, 'clusters', 'list', '-o', 'json']));
  assert.deepEqual(byUrl.clusters, (await first.caller.call('getClusters', {})).clusters);
  const byName = jsonOf(await cli.run(['--context', `admin@${hostOf(first.baseUrl)}`, 'clusters', 'list', '-o', 'json']));
  assert.deepEqual(byName.clusters, (await first.caller.call('getClusters', {})).clusters);

  const unknown = await cli.run(['config', 'use-context', 'nowhere']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /no context "nowhere": the kept ones are admin@\S+, staging, viewer@\S+/);
  assert.equal((await cli.run(['--context', 'nowhere', 'clusters', 'list'])).code, 2);

  // Logging out of one context forgets it alone.
  const out = await cli.run(['logout', '--context', 'staging']);
  assert.equal(out.code, 0, out.stderr);
  assert.deepEqual((await contexts()).contexts.map((c: any) => c.name), [`admin@${hostOf(first.baseUrl)}`, `viewer@${hostOf(first.baseUrl)}`]);
});

test('a credentials file from before contexts is read as one context per server', async () => {
  const old = await createCli();
  try {
    const identity = first.identity;
    await fsp.writeFile(path.join(old.configDir, 'credentials.json'), JSON.stringify({
      current: first.baseUrl,
      servers: { [first.baseUrl]: { username: 'admin', identity, loggedInAt: 1 } },
    }), { mode: 0o600 });
    const listed = jsonOf(await old.run(['config', 'get-contexts', '-o', 'json']));
    assert.equal(listed.currentContext, `admin@${hostOf(first.baseUrl)}`);
    assert.deepEqual(listed.contexts.map((c: any) => [c.name, c.server]), [[`admin@${hostOf(first.baseUrl)}`, first.baseUrl]]);
    await old.login(first);
    assert.equal(jsonOf(await old.run(['clusters', 'list', '-o', 'json'])).clusters.length, (await first.caller.call('getClusters', {})).clusters.length);
    const rewritten = JSON.parse(await fsp.readFile(path.join(old.configDir, 'credentials.json'), 'utf8'));
    assert.deepEqual(Object.keys(rewritten).sort(), ['contexts', 'currentContext'], 'the next write keeps contexts only');
  } finally {
    await old.dispose();
  }
});
