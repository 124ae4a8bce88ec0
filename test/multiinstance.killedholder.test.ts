import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { startSharedDatabase, startTestCloudly, waitFor } from './helpers/cloudly.js';
import { cloudlyProcessEnv, exitOf, startCloudlyProcess } from './helpers/process.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { clusterRelayLeaseKind } from '../ts/manager.cluster/relayelection.js';

/**
 * A relay whose instance was killed (kill -9) reconnects to another while the dead instance's
 * lease still runs. The dead instance will not let the lease go early, and the instance the relay
 * reached finds that out (its internal URL refuses connections): the relay is told to register
 * again when the lease runs out, not every second until then (in a fleet's kill storm that was
 * about nine refused registrations per moved relay, and an election round per second for each of
 * its clusters). Its socket is still elected as soon as the lease runs out.
 */

const leaseTtlMs = 9_000;
const heartbeatMs = 3_000;
const registration = { origin: 'http://192.0.2.61:8080', version: '1.0.0', protocol: 'cluster-relay/1' };

test('after its holder is killed, a relay is told to register again when the lease runs out, and is elected then', async () => {
  const database = await startSharedDatabase();
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-killedholder-'));
  const b = await startTestCloudly({ ...database.shared, relayLeaseTtlMs: leaseTtlMs, relayLeaseHeartbeatMs: heartbeatMs });
  const a = await startCloudlyProcess(cloudlyProcessEnv(dataDir, {
    MONGODB_URL: database.shared.mongoDbUrl!,
    CLOUDLY_SECRETS_KEY_FILE: database.shared.secretsKeyFile!,
    CLOUDLY_RELAY_LEASE_TTL_MS: String(leaseTtlMs),
    CLOUDLY_RELAY_LEASE_HEARTBEAT_MS: String(heartbeatMs),
  }));
  try {
    const { cluster, relayToken } = await b.createCluster('killed-holder');
    const onA = await CloudlyRelayClient.connect(a.baseUrl, relayToken, { reconnect: false, liveness: false, registration });
    await waitFor(async () => (await b.cloudly.store.get(clusterRelayLeaseKind, cluster.id))?.sessionId != null, 'elected on A');

    a.child.kill('SIGKILL');
    await exitOf(a.child);
    await waitFor(() => !onA.isOpen, 'the relay saw its socket to A close');
    const heldUntil = (await b.cloudly.store.get(clusterRelayLeaseKind, cluster.id))!.expiresAt;

    const onB = await b.connectRelay(relayToken);
    const advice: number[] = [];
    let refusedWithoutForwarding: boolean | null = null;
    let accepted = false;
    while (!accepted) {
      try {
        const answer = await onB.fire('registerClusterRelay', { registration });
        assert.equal(answer.registration.connected, true);
        accepted = true;
      } catch (error) {
        const data = (error as { errorData?: { reasons?: string[]; retryAfterMs?: number } }).errorData;
        assert.deepEqual(data?.reasons, ['relay-not-elected'], 'refused only while the dead instance\'s lease runs');
        advice.push(data!.retryAfterMs!);
        if (data!.retryAfterMs! > 1_100 && refusedWithoutForwarding === null) {
          // The holder is known down: a call for the cluster is refused as the forward would be, unsent.
          const forwardedBefore = b.cloudly.clusterManager.relayElection.instances.forwardedCalls;
          const refusal = await b.cloudly.relays.call(cluster.id, 'getClusterRelayInventory', {}).then(() => null, (errorArg: unknown) => errorArg);
          const reasons = (refusal as { errorData?: { reasons?: string[] } } | null)?.errorData?.reasons;
          assert.deepEqual(reasons, ['relay-holder-unreachable'], 'refused as the dead holder would be');
          assert.equal(b.cloudly.clusterManager.relayElection.instances.forwardedCalls, forwardedBefore, 'nothing forwarded to the dead instance');
          refusedWithoutForwarding = true;
        }
        assert.ok(advice.length <= 5, `registered within a few attempts: advised ${advice.join(', ')} ms`);
        await new Promise((resolve) => setTimeout(resolve, data!.retryAfterMs!));
      }
    }
    const acceptedAt = Date.now();
    // While the dead instance's lease ran, a call for the cluster through B was refused without
    // trying to forward it to the dead instance (checked before the lease ran out, below).
    assert.ok(refusedWithoutForwarding !== null, 'a call was made while the lease ran');
    console.log(`refused ${advice.length} time(s) (advised ${advice.join(', ')} ms); accepted ${acceptedAt - heldUntil} ms after the lease ran out`);
    // Following the advice a relay asked about once a second before: five or more times for a lease with 6–9 s left.
    assert.ok(advice.some((waitMs) => waitMs > 1_100), `told to wait for the lease once its holder was known down: ${advice.join(', ')}`);
    assert.ok(acceptedAt >= heldUntil, 'not before the lease ran out');
    assert.ok(acceptedAt - heldUntil <= 2_000, `elected soon after the lease ran out (${acceptedAt - heldUntil} ms)`);
    const lease = await b.cloudly.store.get(clusterRelayLeaseKind, cluster.id);
    assert.equal(lease!.instanceId, b.cloudly.clusterManager.relayElection.instanceId);
    onB.close();
  } finally {
    if (a.child.exitCode === null && a.child.signalCode === null) {
      a.child.kill('SIGKILL');
      await exitOf(a.child);
    }
    await b.stop();
    await database.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
