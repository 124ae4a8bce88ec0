import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { findFreePort } from '../ts/core/database.js';
import { CloudlyRelayClient, reconnectDelayMs, retryAfterMsOf, type IRelayRegistrationRetry } from '../ts/client/relay.js';
import { startSharedDatabase, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';

/**
 * The project's relay client as a relay author uses it: reconnect is on without asking, it
 * survives a Cloudly restart and registers again, and it follows Cloudly's retry advice instead
 * of its own growing window.
 */

const registration = { origin: 'http://192.0.2.61:8080', version: '1.0.0', protocol: 'cluster-relay/1' };

const registrationOf = async (tArg: ITestCloudly, clusterIdArg: string) =>
  (await tArg.caller.call('getClusterRelayRegistrations', { clusterIds: [clusterIdArg] })).registrations[0];

describe('the relay client\'s retry delay', () => {
  test('Cloudly\'s advice replaces the growing window: at least the advice, plus at most one base window of jitter, whatever the attempt', () => {
    const policy = { baseMs: 200, capMs: 30_000 };
    for (const attempt of [0, 3, 8, 40]) {
      assert.equal(reconnectDelayMs(attempt, policy, () => 0, 1_100), 1_100);
      assert.equal(reconnectDelayMs(attempt, policy, () => 0.999_999, 1_100), 1_299);
    }
    // A fractional advice is rounded up, never down: asking early is refused again.
    assert.equal(reconnectDelayMs(0, policy, () => 0, 10.2), 11);
    // An advice longer than the cap is still honoured (a 429's Retry-After names its window).
    assert.equal(reconnectDelayMs(0, policy, () => 0, 60_000), 60_000);
    // The jitter spreads relays told the same advice at once.
    const samples = Array.from({ length: 2000 }, () => reconnectDelayMs(5, policy, Math.random, 1_000));
    assert.ok(samples.every((delayArg) => delayArg >= 1_000 && delayArg < 1_200));
    assert.ok(samples.some((delayArg) => delayArg < 1_020) && samples.some((delayArg) => delayArg > 1_180));
  });

  test('no usable advice (absent, negative, not a number) falls back to full jitter over the growing window', () => {
    const policy = { baseMs: 100, capMs: 3000 };
    for (const advice of [null, -5, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.equal(reconnectDelayMs(3, policy, () => 0.999_999, advice), 799);
    }
    assert.equal(retryAfterMsOf({ errorData: { code: 'unavailable', retryAfterMs: 900 } }), 900);
    assert.equal(retryAfterMsOf({ errorData: { code: 'unavailable' } }), null);
    assert.equal(retryAfterMsOf({ errorData: { retryAfterMs: '900' } }), null);
    assert.equal(retryAfterMsOf(new Error('plain')), null);
    assert.equal(retryAfterMsOf(null), null);
  });
});

describe('the relay client against a real Cloudly', () => {
  test('reconnect is on by default: Cloudly restarted on its port, the relay reconnects and registers again by itself; reconnect: false stays down', async () => {
    const port = await findFreePort();
    const t = await startTestCloudly({ port });
    const relays: CloudlyRelayClient[] = [];
    try {
      const { cluster, relayToken } = await t.createCluster('survives-restart');
      const { cluster: other, relayToken: otherToken } = await t.createCluster('does-not-reconnect');
      // Only the defaults plus a registration: what the readme's snippet does.
      const relay = await CloudlyRelayClient.connect(t.baseUrl, relayToken, { registration });
      relays.push(relay);
      const calls: string[] = [];
      relay.addHandler('getClusterTrafficStatistics', async () => {
        calls.push('traffic');
        return { statistics: [] };
      });
      const off = await CloudlyRelayClient.connect(t.baseUrl, otherToken, { registration, reconnect: false });
      relays.push(off);
      assert.equal(relay.reconnects, true);
      assert.equal(off.reconnects, false);
      const before = await registrationOf(t, cluster.id);
      assert.equal(before?.connected, true);
      const reconnected = new Promise<number>((resolve) => relay.onReconnected(resolve));

      await t.restart();
      assert.equal(new URL(t.baseUrl).port, String(port));
      assert.equal(await reconnected, 2);
      await waitFor(async () => (await registrationOf(t, cluster.id))?.connected === true, 'registered again on the restarted Cloudly', 15_000);
      const again = await registrationOf(t, cluster.id);
      assert.ok(again!.acceptedAt > before!.acceptedAt, 'a new registration, not the old one');
      assert.equal(again!.origin, registration.origin);
      // Cloudly's calls reach the same handler on the new socket.
      await t.cloudly.relays.call(cluster.id, 'getClusterTrafficStatistics', { fromDayUtc: '2026-01-01', toDayUtc: '2026-01-01', limit: 10 });
      assert.deepEqual(calls, ['traffic']);
      // The relay with reconnect off did not come back while the other one did.
      assert.equal(off.isOpen, false);
      assert.equal(off.connectionCount, 1);
      assert.equal((await registrationOf(t, other.id))?.connected, false);
    } finally {
      for (const relay of relays) {
        relay.close();
      }
      await t.stop();
    }
  });

  test('relay-not-elected with retryAfterMs: the client waits what Cloudly advised (not its own window) and is elected once the holder lets go', async () => {
    const database = await startSharedDatabase();
    const a = await startTestCloudly({ ...database.shared, relayLeaseTtlMs: 15_000, relayLeaseHeartbeatMs: 5_000 });
    const b = await startTestCloudly({ ...database.shared, relayLeaseTtlMs: 15_000, relayLeaseHeartbeatMs: 5_000 });
    const relays: CloudlyRelayClient[] = [];
    try {
      const { cluster, relayToken } = await a.createCluster('advised');
      const holder = await CloudlyRelayClient.connect(a.baseUrl, relayToken, { registration: { ...registration, origin: 'http://192.0.2.62:8080' } });
      relays.push(holder);
      // A base window of 50 ms: a client that ignored the ~1 s advice would ask again within 50 ms.
      const retries: IRelayRegistrationRetry[] = [];
      const connecting = CloudlyRelayClient.connect(b.baseUrl, relayToken, {
        registration,
        reconnect: { baseMs: 50, capMs: 60_000 },
        onRegistrationRetry: (retryArg) => retries.push(retryArg),
      });
      await waitFor(() => retries.length >= 2, 'two registration refusals on B', 10_000);
      for (const retry of retries) {
        assert.equal(retry.reason, 'relay-not-elected');
        assert.ok(retry.retryAfterMs !== null && retry.retryAfterMs > 0, 'Cloudly advised a wait');
        assert.ok(retry.delayMs > retry.retryAfterMs! && retry.delayMs <= retry.retryAfterMs! + 51, `waited ${retry.delayMs} ms for an advice of ${retry.retryAfterMs} ms`);
      }
      holder.close();
      let bound: NodeJS.Timeout | undefined;
      const elected = await Promise.race([connecting, new Promise<null>((resolve) => { bound = setTimeout(() => resolve(null), 15_000); })]);
      clearTimeout(bound);
      assert.ok(elected, 'registered on B within the bound once A let go');
      relays.push(elected);
      const shown = (await b.admin.call('getClusterRelayRegistrations', { clusterIds: [cluster.id] })).registrations[0];
      assert.equal(shown.connected, true);
      assert.equal(shown.origin, registration.origin);
    } finally {
      for (const relay of relays) {
        relay.close();
      }
      await a.stop();
      await b.stop();
      await database.stop();
    }
  });
});
