import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, waitFor } from './helpers/cloudly.js';
import { clusterRelayRegistrationKind } from '../ts/manager.cluster/relayregistrations.js';
import type { IReq_Relay_Cloudly_RegisterClusterRelay } from '../ts/interfaces/requests/cluster.js';

/**
 * A storm's relay call waits for its turn (CLOUDLY_RELAY_WORK_CONCURRENCY). When its relay's socket
 * closed meanwhile (the relay timed out and reconnects), the call is not run when its turn comes:
 * nothing is written for it, it is counted, and the line goes on to the next call.
 */

const registration = { origin: 'http://192.0.2.80:8080', version: 'dropped-test/1', protocol: 'cluster-relay/1' as const };

describe('relay calls whose socket closed while they waited', () => {
  test('a registration queued behind the line is not run once its socket closed; the next relay registers', async () => {
    const t = await startTestCloudly({ relayWorkConcurrency: 1, logLevel: 'silent' });
    let release!: () => void;
    const held = t.cloudly.relayCallGate.run(() => new Promise<void>((resolve) => { release = resolve; }));
    try {
      const { cluster, relayToken } = await t.createCluster();
      const relay = await t.connectRelay(relayToken);
      const waiting = relay.fire<IReq_Relay_Cloudly_RegisterClusterRelay>('registerClusterRelay', { registration }).then(() => 'answered', () => 'failed');
      await waitFor(() => t.cloudly.relayCallGate.queued === 1, 'the registration waits for its turn');
      relay.close();
      await waitFor(() => t.cloudly.relays.socketCount === 0, 'the relay socket closed on the server');
      assert.equal(await waiting, 'failed', 'the relay got no answer on its closed socket');
      release();
      await waitFor(() => t.cloudly.relayCallsDropped === 1, 'the queued registration was dropped at its turn');
      assert.equal(t.cloudly.relayCallGate.queued, 0);
      assert.equal(await t.cloudly.store.get(clusterRelayRegistrationKind, cluster.id), null, 'nothing was registered for the closed socket');
      assert.match(await (await fetch(`${t.cloudly.baseUrl}/metrics`)).text(), /^cloudly_relay_calls_dropped_total 1$/m);

      const again = await t.connectRelay(relayToken);
      const answer = await again.fire<IReq_Relay_Cloudly_RegisterClusterRelay>('registerClusterRelay', { registration });
      assert.equal(answer.registration.connected, true, 'a live relay after it registers');
      assert.equal(t.cloudly.relayCallsDropped, 1);
    } finally {
      release();
      await held;
      await t.stop();
    }
  });
});
