import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startSharedDatabase, startTestCloudly, waitFor } from './helpers/cloudly.js';
import { clusterRelayLeaseKind } from '../ts/manager.cluster/relayelection.js';

/**
 * A relay whose socket landed on an instance while another instance's socket holds the cluster's
 * lease is refused `relay-not-elected` with `retryAfterMs`. That advice must be when its instance
 * looks at the lease again (within a second, since a holder may let go early, as a stopping
 * instance does), not when the lease would run out: a relay that follows it is elected soon after
 * the holder lets go, long before the old lease would have expired.
 */

const registration = { origin: 'http://192.0.2.60:8080', version: '1.0.0', protocol: 'cluster-relay/1' };

describe('relay election across instances', () => {
  test('a socket whose lease another instance holds is told to look again within a second, and following that advice it is elected once the holder lets go', async () => {
    const database = await startSharedDatabase();
    const a = await startTestCloudly({ ...database.shared, relayLeaseTtlMs: 15_000, relayLeaseHeartbeatMs: 5_000 });
    const b = await startTestCloudly({ ...database.shared, relayLeaseTtlMs: 15_000, relayLeaseHeartbeatMs: 5_000 });
    try {
      const { cluster, relayToken } = await a.createCluster('held-elsewhere');
      const onA = await a.connectRelay(relayToken);
      await waitFor(() => a.cloudly.relays.sessionsOf(cluster.id).some((session) => a.cloudly.clusterManager.isElected(session)), 'elected on A');
      const heldUntil = (await a.cloudly.store.get(clusterRelayLeaseKind, cluster.id))!.expiresAt;

      const onB = await b.connectRelay(relayToken);
      const register = () => onB.fire('registerClusterRelay', { registration });
      const refusal = await refusalOf(register);
      assert.equal(refusal.code, 'unavailable');
      assert.deepEqual(refusal.reasons, ['relay-not-elected']);
      const advised = refusal.retryAfterMs as number;
      assert.ok(advised > 0 && advised <= 1_100, `retryAfterMs ${advised}: when B looks again, not when A's lease (15 s) runs out`);

      // A's socket closes: A releases the lease at once. The relay on B follows the advice.
      onA.close();
      let answer: Awaited<ReturnType<typeof register>> | null = null;
      while (answer === null) {
        await new Promise((resolve) => setTimeout(resolve, advised));
        answer = await register().catch(async (error: unknown) => {
          const again = (error as { errorData?: { reasons?: string[]; retryAfterMs?: number } }).errorData;
          assert.deepEqual(again?.reasons, ['relay-not-elected']);
          assert.ok((again?.retryAfterMs ?? 0) <= 1_100);
          return null;
        });
      }
      assert.equal(answer.registration.connected, true);
      assert.ok(Date.now() < heldUntil, 'accepted while the lease A held would still have been valid');
      const lease = await b.cloudly.store.get(clusterRelayLeaseKind, cluster.id);
      assert.equal(lease!.instanceId, b.cloudly.clusterManager.relayElection.instanceId);
      onB.close();
    } finally {
      await a.stop();
      await b.stop();
      await database.stop();
    }
  });
});
