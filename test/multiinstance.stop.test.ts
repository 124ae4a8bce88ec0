import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startSharedDatabase, startTestCloudly, waitFor } from './helpers/cloudly.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { clusterRelayLeaseKind } from '../ts/manager.cluster/relayelection.js';
import { cloudlyInstanceKind } from '../ts/core/instances.js';

/**
 * The graceful stop of an instance holding many relays (docs/multi-instance.md, "Failover"): every
 * relay socket it holds is closed, every lease it holds goes back, and it leaves the instance
 * registry, so the relays' next sockets on another instance are elected at once instead of after
 * the leases would have run out.
 */

const registration = { origin: 'http://192.0.2.70:8080', version: '1.0.0', protocol: 'cluster-relay/1' as const };
const relayCount = 40;

describe('graceful stop of an instance with many relays', () => {
  test(`a stop with ${relayCount} elected relays closes every socket, releases every lease and deregisters; another instance elects them at once`, async () => {
    const database = await startSharedDatabase();
    // Leases far longer than the test, so that B electing the relays can only be A's release, never their running out.
    const timing = { relayLeaseTtlMs: 600_000, relayLeaseHeartbeatMs: 60_000, logLevel: 'silent' as const };
    const a = await startTestCloudly({ ...database.shared, ...timing });
    const b = await startTestCloudly({ ...database.shared, ...timing });
    const relays: CloudlyRelayClient[] = [];
    try {
      const clusters: Array<Awaited<ReturnType<typeof a.createCluster>>> = [];
      for (let index = 0; index < relayCount; index++) {
        clusters.push(await a.createCluster(`stopping-${index}`));
      }
      let closed = 0;
      for (const { relayToken } of clusters) {
        const relay = await CloudlyRelayClient.connect(a.cloudly.baseUrl, relayToken, { reconnect: false, registration });
        relay.onClose(() => {
          closed++;
        });
        relays.push(relay);
      }
      const electedOnA = () => clusters.filter(({ cluster }) =>
        a.cloudly.relays.sessionsOf(cluster.id).some((session) => a.cloudly.clusterManager.isElected(session))).length;
      await waitFor(() => electedOnA() === relayCount, `all ${relayCount} relays elected on A`);
      const leasesBefore = await Promise.all(clusters.map(({ cluster }) => b.cloudly.store.get(clusterRelayLeaseKind, cluster.id)));
      const aInstanceId = a.cloudly.clusterManager.relayElection.instanceId;
      assert.ok(leasesBefore.every((lease) => lease?.instanceId === aInstanceId), 'A holds every lease before its stop');
      const heldUntil = Math.min(...leasesBefore.map((lease) => lease!.expiresAt));

      await a.cloudly.stop();

      assert.equal(a.cloudly.relays.socketCount, 0, 'A holds no relay socket after its stop');
      await waitFor(() => closed === relayCount, 'every relay saw its socket close');
      assert.ok(relays.every((relay) => !relay.isOpen));
      const leasesAfter = await Promise.all(clusters.map(({ cluster }) => b.cloudly.store.get(clusterRelayLeaseKind, cluster.id)));
      const stillHeld = leasesAfter.filter((lease) => lease?.instanceId !== null || lease?.sessionId !== null);
      assert.deepEqual(stillHeld.map((lease) => lease?.clusterId), [], 'every lease A held is released');
      assert.equal(await b.cloudly.store.get(cloudlyInstanceKind, aInstanceId), null, 'A left the instance registry');

      // The relays come back on B: each is elected and registered as it connects, long before
      // the leases A held would have run out.
      const onB: CloudlyRelayClient[] = [];
      for (const { relayToken } of clusters) {
        onB.push(await CloudlyRelayClient.connect(b.cloudly.baseUrl, relayToken, { reconnect: false, registration }));
      }
      relays.push(...onB);
      const bInstanceId = b.cloudly.clusterManager.relayElection.instanceId;
      const leasesOnB = await Promise.all(clusters.map(({ cluster }) => b.cloudly.store.get(clusterRelayLeaseKind, cluster.id)));
      assert.ok(leasesOnB.every((lease) => lease?.instanceId === bInstanceId), 'B holds every lease');
      assert.ok(Date.now() < heldUntil, 'all elected on B while the leases A held would still have been valid');
    } finally {
      relays.forEach((relay) => relay.close());
      await a.stop();
      await b.stop();
      await database.stop();
    }
  });
});
