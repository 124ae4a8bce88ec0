import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { startTestCloudly, testAdminPassword, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { createCli, jsonOf, type ICli } from './cli.fixture.js';

/**
 * The real `cloudly` executable (bin/cloudly.js, as `npx cloudly` runs it) as a child process
 * against a real server: what only a process shows. The exit code as the shell sees it, the
 * password from the process's stdin, the identity file, Ctrl-C as a real SIGINT, an unreachable
 * server. The commands themselves are tested in process (test/cli.commands.test.ts and friends).
 */

let t: ITestCloudly;
let cli: ICli;

before(async () => {
  t = await startTestCloudly();
  cli = await createCli({ binary: true });
});

after(async () => {
  await t.stop().catch(() => undefined);
  await cli.dispose();
});

test('the binary: login from stdin keeps a 0600 identity; list is the API answer; usage exits 2, a refusal 1, help 0', async () => {
  const login = await cli.run(['login', '--url', t.baseUrl, '--username', 'admin'], `${testAdminPassword}\n`);
  assert.equal(login.code, 0, login.stderr);
  assert.equal(login.stdout, '');
  assert.equal((await fsp.stat(path.join(cli.configDir, 'credentials.json'))).mode & 0o777, 0o600);

  await t.createCluster('binary-listed');
  assert.deepEqual(jsonOf(await cli.run(['clusters', 'list', '-o', 'json'])), await t.admin.call('getClusters', {}));

  const usage = await cli.run(['clusters', 'create']);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /--name/);

  const refused = await cli.run(['login', '--url', t.baseUrl], 'not-the-password-at-all\n');
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^refused: unauthenticated/m);

  const help = await cli.run(['--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /Exit codes: 0 ok, 1 refused, 2 usage error, 3 server unavailable/);
});

test('the binary: watch prints a change as a JSON line and a real SIGINT ends it with exit 0', async () => {
  const running = cli.start(['watch', '--kind', 'CloudlyCluster', '-o', 'json']);
  running.child.stdin.end();
  try {
    await waitFor(() => /watching from revision \d+/.test(running.stderr), `watch started (${running.stderr})`, 30_000);
    await t.createCluster('binary-watched');
    await waitFor(() => running.stdout.includes('\n'), 'a change printed', 10_000);
  } finally {
    running.child.kill('SIGINT');
  }
  const { code, stdout, stderr } = await running.closed;
  assert.equal(code, 0, stderr);
  const event = JSON.parse(stdout.trimEnd().split('\n')[0]);
  assert.equal(event.kind, 'CloudlyCluster');
  assert.equal(event.change, 'created');
  assert.equal(event.document.name, 'binary-watched');
});

test('the binary: a stopped server is unavailable, exit 3', async () => {
  await t.stop();
  const run = await cli.run(['clusters', 'list']);
  assert.equal(run.code, 3);
  assert.match(run.stderr, /^cloudly: unavailable: cannot reach http:\/\/127\.0\.0\.1:\d+/);
});
