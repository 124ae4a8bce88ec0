import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, waitFor } from './helpers/cloudly.js';
import { clusterRelayLeaseKind } from '../ts/manager.cluster/relayelection.js';

/**
 * On the embedded database no other instance can exist, so at start every relay lease a previous
 * run left (a process killed while it held them) names a socket that is gone: the start frees them
 * all, in one write, and a relay that connects is elected at once instead of waiting for the old
 * lease to run out.
 */

const registration = { origin: 'http://192.0.2.80:8080', version: '1.0.0', protocol: 'cluster-relay/1' };

describe('relay leases a previous run left', () => {
  test('are freed at start (generation bumped), every one of them, and a relay is elected at once', async () => {
    const t = await startTestCloudly({ relayLeaseTtlMs: 600_000, relayLeaseHeartbeatMs: 5_000 });
    try {
      const clusters: { id: string; relayToken: string }[] = [];
      for (let index = 0; index < 3; index++) {
        const { cluster, relayToken } = await t.createCluster(`stale-${index}`);
        const relay = await t.connectRelay(relayToken);
        await relay.fire('registerClusterRelay', { registration });
        clusters.push({ id: cluster.id, relayToken });
      }
      // As a killed process leaves them: held by an instance and sockets that no longer exist, for ten minutes.
      const raw = t.cloudly.store.collection(clusterRelayLeaseKind);
      await raw.updateMany({ id: { $in: clusters.map((cluster) => cluster.id) } },
        { $set: { instanceId: 'killed-instance', sessionId: 'gone-socket', expiresAt: Date.now() + 600_000 } });
      const generations = new Map((await t.cloudly.store.findIn(clusterRelayLeaseKind, 'id', clusters.map((cluster) => cluster.id))).map((lease) => [lease.id, lease.generation]));

      await t.restart();
      for (const lease of await t.cloudly.store.findIn(clusterRelayLeaseKind, 'id', clusters.map((cluster) => cluster.id))) {
        assert.equal(lease.sessionId, null, `${lease.id} freed`);
        assert.equal(lease.instanceId, null);
        assert.ok(lease.generation > generations.get(lease.id)!, 'a write a racing compare-and-swap would lose to');
      }
      const relay = await t.connectRelay(clusters[0].relayToken);
      // Refused `relay-not-elected` (for ten minutes) if the old lease still held.
      await relay.fire('registerClusterRelay', { registration });
      await waitFor(() => t.cloudly.relays.sessionsOf(clusters[0].id).some((session) => t.cloudly.clusterManager.isElected(session)), 'elected', 5_000);
    } finally {
      await t.stop();
    }
  });
});
