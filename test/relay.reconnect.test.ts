import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyRelayClient, reconnectDelayMs } from '../ts/client/relay.js';
import type { IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources } from '../ts/interfaces/requests/corestore.js';
import type { ICluster } from '../ts/interfaces/data/cluster.js';
import { waitFor } from './helpers/cloudly.js';
import { cloudlyProcessEnv, killHard, startCloudlyProcess, type ICloudlyProcess } from './helpers/process.js';

/** The relay client reconnects by itself after Cloudly dies, registers again and answers Cloudly's calls again. */

const adminPassword = 'process-admin-password';
const children: ICloudlyProcess[] = [];
const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const child of children) {
    await killHard(child.child);
  }
  for (const cleanup of cleanups) {
    await cleanup();
  }
});

test('the reconnect wait is full jitter over an exponentially growing window, capped', () => {
  const policy = { baseMs: 100, capMs: 3000 };
  assert.equal(reconnectDelayMs(0, policy, () => 0), 0);
  assert.equal(reconnectDelayMs(0, policy, () => 0.999_999), 99);
  assert.equal(reconnectDelayMs(3, policy, () => 0.999_999), 799);
  assert.equal(reconnectDelayMs(5, policy, () => 0.999_999), 2999, 'capped');
  assert.equal(reconnectDelayMs(10_000, policy, () => 0.5), 1500, 'no overflow for long outages');
  // Spread over the whole window, not bunched at its end.
  const samples = Array.from({ length: 2000 }, () => reconnectDelayMs(4, policy));
  assert.ok(samples.every((delayArg) => delayArg >= 0 && delayArg < 1600));
  assert.ok(samples.some((delayArg) => delayArg < 160) && samples.some((delayArg) => delayArg > 1440));
});

test('Cloudly killed and started again: the relay reconnects with backoff, registers again, answers calls again; a rotated token ends it', async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-reconnect-'));
  cleanups.push(() => fsp.rm(dataDir, { recursive: true, force: true }));
  const first = await startCloudlyProcess(cloudlyProcessEnv(dataDir));
  children.push(first);
  const port = new URL(first.baseUrl).port;
  const admin = new CloudlyAdminClient(first.baseUrl);
  await admin.login('admin', adminPassword);
  const { cluster, relayToken } = await admin.call('createCluster', { name: 'reconnecting' }) as { cluster: ICluster; relayToken: string };
  await admin.call('addClusterNode', { clusterId: cluster.id, name: 'node-1', nodeId: 'node-1' });

  const registration = { origin: 'http://192.0.2.7:8080', version: '1.2.3', protocol: 'cluster-relay/1' };
  const relay = await CloudlyRelayClient.connect(first.baseUrl, relayToken, { reconnect: { baseMs: 50, capMs: 400 }, registration });
  cleanups.push(async () => relay.close());
  const inventoryCalls: string[] = [];
  relay.addHandler<IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources>('getClusterCorestoreLegacyResources', async ({ nodeId }) => {
    inventoryCalls.push(nodeId);
    return { reachable: false, nodeId, readAt: Date.now(), errorCode: 'CORESTORE_UNREACHABLE' };
  });
  const attempts: Array<{ attempt: number; delayMs: number }> = [];
  relay.onReconnecting((attemptArg, delayMsArg) => attempts.push({ attempt: attemptArg, delayMs: delayMsArg }));
  const reconnected: number[] = [];
  relay.onReconnected((countArg) => reconnected.push(countArg));

  const registrationOf = async (adminArg: CloudlyAdminClient) =>
    (await adminArg.call('getClusterRelayRegistrations', { clusterIds: [cluster.id] })).registrations[0];
  const readInventory = (adminArg: CloudlyAdminClient) =>
    adminArg.call('getCorestoreLegacyResources', { clusterId: cluster.id, nodeId: 'node-1' });

  const before = await registrationOf(admin);
  assert.equal(before?.connected, true);
  assert.equal(before?.origin, registration.origin);
  assert.equal((await readInventory(admin)).inventory.reachable, false);
  assert.equal(inventoryCalls.length, 1);

  // kill -9: the socket drops; the relay keeps trying while nothing listens.
  admin.close();
  await killHard(first.child);
  children.splice(children.indexOf(first), 1);
  await waitFor(() => attempts.length >= 3, 'several reconnect attempts while Cloudly is down', 15_000);
  assert.equal(relay.connectionCount, 1);
  assert.deepEqual(attempts.slice(0, 3).map((entryArg) => entryArg.attempt), [0, 1, 2]);
  assert.ok(attempts.every((entryArg) => entryArg.delayMs >= 0 && entryArg.delayMs < Math.min(400, 50 * 2 ** entryArg.attempt)));

  const second = await startCloudlyProcess(cloudlyProcessEnv(dataDir, { CLOUDLY_PORT: port }));
  children.push(second);
  await waitFor(() => reconnected.length === 1, 'the relay reconnected and registered by itself', 20_000);
  assert.equal(relay.connectionCount, 2);
  assert.ok(relay.isOpen);

  const admin2 = new CloudlyAdminClient(second.baseUrl);
  await admin2.login('admin', adminPassword);
  const afterRestart = await registrationOf(admin2);
  assert.equal(afterRestart?.connected, true);
  assert.equal(afterRestart?.origin, registration.origin);
  assert.ok((afterRestart?.acceptedAt ?? 0) > (before?.acceptedAt ?? 0), 'registered again on the new process');
  // Cloudly's calls reach the relay again, on the new socket, through the same handler.
  assert.equal((await readInventory(admin2)).inventory.reachable, false);
  assert.equal(inventoryCalls.length, 2);

  // A rotated token closes the socket (4001); the reconnect is refused with 401 and the client stops for good.
  const gaveUp = new Promise((resolve) => relay.onGiveUp(resolve));
  const { cluster: current } = await admin2.call('getClusterById', { clusterId: cluster.id }) as { cluster: ICluster };
  await admin2.call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: current.generation });
  assert.deepEqual(await gaveUp, { reason: 'token-refused', status: 401 });
  assert.deepEqual(relay.gaveUp, { reason: 'token-refused', status: 401 });
  assert.equal(relay.isOpen, false);
  const attemptsAtGiveUp = attempts.length;
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(attempts.length, attemptsAtGiveUp, 'no attempt after the token was refused');
  admin2.close();
});
