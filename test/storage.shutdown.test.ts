import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Socket } from 'node:net';
import { WebSocket } from 'ws';
import { cloudlyProcessEnv, exitOf, startCloudlyProcess, waitForOutput, type ICloudlyProcess } from './helpers/process.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { snapshotFileName } from '../ts/core/database.js';
import { readJournal } from '../ts/core/journal.js';
import { readSnapshotFile } from '../ts/core/snapshotfile.js';

/**
 * SIGTERM to a real Cloudly process with relay sockets open, one of which has stopped reading
 * (it never answers the close handshake): the stop is bounded by the grace, then ends what is
 * left, writes the final snapshot and exits 0; a second SIGTERM stops at once.
 */

const tempDir = () => fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-shutdown-'));

const loggedIn = async (processArg: ICloudlyProcess): Promise<CloudlyAdminClient> => {
  const admin = new CloudlyAdminClient(processArg.baseUrl);
  await admin.login('admin', 'process-admin-password');
  return admin;
};

/** A relay socket; `stopReading` pauses its TCP socket, so nothing sent to it is ever read. */
const openRelaySocket = async (baseUrlArg: string, relayTokenArg: string): Promise<{ socket: WebSocket; closeCode: Promise<number> }> => {
  const socket = new WebSocket(`${baseUrlArg.replace(/^http/, 'ws')}/typedsocket`, { headers: { authorization: `Bearer ${relayTokenArg}` } });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  const closeCode = new Promise<number>((resolve) => socket.once('close', (codeArg) => resolve(codeArg)));
  socket.on('error', () => undefined);
  return { socket, closeCode };
};

const stopReading = (socketArg: WebSocket): void => {
  ((socketArg as unknown as { _socket: Socket })._socket).pause();
};

describe('bounded shutdown', () => {
  test('SIGTERM with a relay socket that stopped reading: 1001 to the others, the stuck one ended after the grace, final snapshot, exit 0', async () => {
    const dataDir = await tempDir();
    let stuck: WebSocket | null = null;
    try {
      const running = await startCloudlyProcess(cloudlyProcessEnv(dataDir, { CLOUDLY_SHUTDOWN_GRACE_MS: '1000' }));
      const admin = await loggedIn(running);
      const { relayToken } = await admin.call('createCluster', { name: 'reads' });
      const { relayToken: stuckToken } = await admin.call('createCluster', { name: 'stuck' });
      const reading = await openRelaySocket(running.baseUrl, relayToken);
      const stuckRelay = await openRelaySocket(running.baseUrl, stuckToken);
      stuck = stuckRelay.socket;
      stopReading(stuck);
      // Written after the last snapshot: the final snapshot must cover it.
      await admin.call('createCluster', { name: 'last-write' });
      admin.close();
      running.child.kill('SIGTERM');
      assert.equal(await reading.closeCode, 1001, 'a reading socket is closed with 1001 (going away)');
      assert.equal(await exitOf(running.child), 0);
      assert.match(running.output(), /"terminatedSockets":1[,}].*shutdown grace elapsed: ended the sockets and requests still open/);
      assert.match(running.output(), /"graceMs":1000/);
      const snapshot = await readSnapshotFile(path.join(dataDir, snapshotFileName));
      const journal = await readJournal(dataDir, snapshot.lsn);
      assert.equal(journal.records.length, 0, 'the final snapshot covers every journaled write');
      assert.ok(snapshot.collections.find((collection) => collection.name === 'CloudlyCluster')!.docs.some((doc) => doc.name === 'last-write'));
    } finally {
      stuck?.terminate();
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('a second SIGTERM while the grace runs stops at once, and the next start has every acknowledged write', async () => {
    const dataDir = await tempDir();
    let stuck: WebSocket | null = null;
    try {
      const env = cloudlyProcessEnv(dataDir, { CLOUDLY_SHUTDOWN_GRACE_MS: '600000' });
      const running = await startCloudlyProcess(env);
      const admin = await loggedIn(running);
      const { relayToken } = await admin.call('createCluster', { name: 'stuck' });
      stuck = (await openRelaySocket(running.baseUrl, relayToken)).socket;
      stopReading(stuck);
      await admin.call('createCluster', { name: 'acknowledged' });
      admin.close();
      running.child.kill('SIGTERM');
      await waitForOutput(running, /"msg":"stopping"/);
      running.child.kill('SIGTERM');
      assert.equal(await exitOf(running.child), 143, 'the second SIGTERM ends the process (128 + 15)');
      assert.match(running.output(), /second SIGTERM while stopping: stopping at once/);
      stuck.terminate();
      stuck = null;
      const again = await startCloudlyProcess(env);
      try {
        const names = (await (await loggedIn(again)).call('getClusters', {})).clusters.map((cluster) => cluster.name).sort();
        assert.deepEqual(names, ['acknowledged', 'stuck']);
      } finally {
        again.child.kill('SIGTERM');
        assert.equal(await exitOf(again.child), 0);
      }
    } finally {
      stuck?.terminate();
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});
