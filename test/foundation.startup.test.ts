import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { Cloudly } from '../ts/classes.cloudly.js';
import { ConfigError } from '../ts/config.js';

/**
 * What an operator meets first: the base URL the start log prints leads to the dashboard, and a
 * CLOUDLY_HOST Cloudly cannot listen on is refused before the database starts.
 */

let t: ITestCloudly;

before(async () => {
  t = await startTestCloudly();
});

after(async () => {
  await t.stop();
});

test('GET / redirects to the dashboard', async () => {
  const answer = await fetch(`${t.baseUrl}/`, { redirect: 'manual' });
  assert.equal(answer.status, 302);
  assert.equal(answer.headers.get('location'), '/dashboard/');
  const followed = await fetch(`${t.baseUrl}/`);
  assert.equal(new URL(followed.url).pathname, '/dashboard/');
});

for (const [host, code] of [['no-such-host.invalid', 'ENOTFOUND'], ['192.0.2.1', 'EADDRNOTAVAIL']] as const) {
  test(`CLOUDLY_HOST=${host} is refused by name before the database starts (${code})`, async () => {
    const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-host-'));
    const logs: string[] = [];
    const cloudly = new Cloudly({
      config: { host, port: 0, dataDir, mongoDbUrl: null },
      logDestination: new Writable({ write(chunkArg, _encodingArg, callbackArg) { logs.push(chunkArg.toString()); callbackArg(); } }),
    });
    try {
      await assert.rejects(() => cloudly.start(), (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.variable, 'CLOUDLY_HOST');
        assert.match(error.message, new RegExp(`cannot listen on "${host.replaceAll('.', '\\.')}": .*\\(${code}\\)`));
        return true;
      });
      assert.deepEqual(await fsp.readdir(dataDir), [], 'the database never started: nothing in the data directory');
      assert.ok(!logs.some((lineArg) => /embedded database/.test(lineArg)), 'no database line in the log');
    } finally {
      await cloudly.stop().catch(() => undefined);
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
}
