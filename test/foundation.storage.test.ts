import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import { refusalOf, startTestCloudly, waitFor } from './helpers/cloudly.js';
import { cloudlyProcessEnv, exitOf, startCloudlyProcess } from './helpers/process.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { findFreePort, socketFileName } from '../ts/core/database.js';
import { lockFileName } from '../ts/core/datadirlock.js';

const tempDir = () => fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-storage-'));

/** The TCP ports a process listens on: its socket inodes matched against /proc/net/tcp{,6}. */
const listeningTcpPorts = async (pidArg: number): Promise<number[]> => {
  const inodes = new Set<string>();
  for (const fd of await fsp.readdir(`/proc/${pidArg}/fd`)) {
    const target = await fsp.readlink(`/proc/${pidArg}/fd/${fd}`).catch(() => '');
    const match = /^socket:\[(\d+)\]$/.exec(target);
    if (match) {
      inodes.add(match[1]);
    }
  }
  const ports: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const lines = (await fsp.readFile(table, 'utf8').catch(() => '')).split('\n').slice(1);
    for (const line of lines) {
      const fields = line.trim().split(/\s+/);
      if (fields.length > 9 && fields[3] === '0A' && inodes.has(fields[9])) {
        ports.push(parseInt(fields[1].split(':')[1], 16));
      }
    }
  }
  return ports;
};

const modeOf = async (pathArg: string): Promise<number> => (await fsp.stat(pathArg)).mode & 0o777;

describe('storage isolation: nothing but Cloudly reaches the embedded database', () => {
  test('the embedded database listens on no TCP port, only on a 0600 Unix socket in a 0700 data directory; its files are 0600', async () => {
    const dataDir = await tempDir();
    await fsp.chmod(dataDir, 0o755);
    try {
      const started = await startCloudlyProcess(cloudlyProcessEnv(dataDir));
      try {
        const admin = new CloudlyAdminClient(started.baseUrl);
        await admin.login('admin', 'process-admin-password');
        await admin.call('createCluster', { name: 'isolated' });
        assert.deepEqual(await listeningTcpPorts(started.child.pid!), [Number(new URL(started.baseUrl).port)], 'only the HTTP port listens');
        const socketPath = path.join(dataDir, socketFileName);
        assert.ok((await fsp.stat(socketPath)).isSocket());
        assert.equal(await modeOf(socketPath), 0o600);
        assert.equal(await modeOf(dataDir), 0o700, 'the data directory was restricted to its owner');
        for (const name of await fsp.readdir(dataDir, { recursive: true })) {
          const full = path.join(dataDir, name);
          const stat = await fsp.stat(full);
          if (stat.isFile()) {
            assert.equal(stat.mode & 0o077, 0, `${name} is readable by its owner only`);
          }
        }
      } finally {
        started.child.kill('SIGINT');
        assert.equal(await exitOf(started.child), 0, 'SIGINT stops gracefully');
      }
      assert.equal(fs.existsSync(path.join(dataDir, socketFileName)), false, 'the socket is removed on stop');
      assert.equal(fs.existsSync(path.join(dataDir, lockFileName)), false, 'the lock is released on stop');
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('storage isolation with a long data directory path', () => {
  test('a socket path too long for a Unix socket goes to a private 0700 directory, and is removed on stop', async () => {
    const base = await tempDir();
    const dataDir = path.join(base, 'a-data-directory-whose-path-is-much-longer-than-a-unix-socket-path-may-be-for-sure');
    try {
      const t = await startTestCloudly({ dataDir });
      const socketPath = t.cloudly.database.socketPath!;
      try {
        assert.ok(!socketPath.startsWith(dataDir), socketPath);
        assert.ok(Buffer.byteLength(socketPath) < 100);
        assert.equal(await modeOf(socketPath), 0o600);
        assert.equal(await modeOf(path.dirname(socketPath)), 0o700);
        await t.createCluster('long-path');
      } finally {
        await t.stop();
      }
      assert.equal(fs.existsSync(path.dirname(socketPath)), false);
    } finally {
      await fsp.rm(base, { recursive: true, force: true });
    }
  });
});

describe('an external MongoDB that goes away', () => {
  test('/readyz answers 503 and calls answer unavailable (retryable) while it is gone; Cloudly recovers without a restart', async () => {
    // No MongoDB can be installed here: a separately started CongoDB server on TCP stands in.
    const port = await findFreePort();
    const database = new congodb.CongoServer({ port, host: '127.0.0.1', storage: 'memory' });
    await database.start();
    const t = await startTestCloudly({
      mongoDbUrl: `mongodb://127.0.0.1:${port}/?serverMonitoringMode=poll&directConnection=true`,
      databaseTimeoutMs: 1000,
    });
    try {
      await t.createCluster('before-outage');
      assert.equal((await fetch(`${t.baseUrl}/readyz`)).status, 200);
      await database.stop();
      const ready = await fetch(`${t.baseUrl}/readyz`);
      assert.equal(ready.status, 503);
      assert.equal(((await ready.json()) as { database: string }).database, 'unreachable');
      for (const call of [
        () => t.admin.call('getClusters', {}),
        () => t.admin.call('createCluster', { name: 'during-outage' }),
      ]) {
        const refusal = await refusalOf(call);
        assert.equal(refusal.code, 'unavailable');
        assert.equal(refusal.retryable, true);
      }
      await database.start();
      await waitFor(async () => (await fetch(`${t.baseUrl}/readyz`)).status === 200, 'ready again', 15_000);
      await waitFor(async () => {
        try {
          return (await t.admin.call('getClusters', {})).clusters.some((c) => c.name === 'before-outage');
        } catch {
          return false;
        }
      }, 'calls answered again', 15_000);
      await t.createCluster('after-outage');
    } finally {
      await t.stop().catch(() => undefined);
      await database.stop().catch(() => undefined);
    }
  });
});
