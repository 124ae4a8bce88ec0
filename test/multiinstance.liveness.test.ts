import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startSharedDatabase, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { reportingCluster } from './helpers/desiredstate.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';

/**
 * Liveness with several instances (docs/reconciler.md, "Liveness"): a relay lease is written by the
 * instance holding the socket and is not audited, so the instance that reconciles learns of another
 * instance's relay going away from its liveness poll. A relay that moves between instances is back
 * long before the grace ends and never shows `unknown`; one that goes away on an instance that does
 * not reconcile is `unknown` past the grace all the same.
 */

const graceMs = 5_000;
const timing = { relayLivenessGraceMs: graceMs, relayLeaseTtlMs: 2_000, relayLeaseHeartbeatMs: 500 };

const report = (relayArg: CloudlyRelayClient, serviceIdArg: string) => (async () => {
  const answer = await relayArg.fire('getClusterPlatformDesiredState', {});
  const revision = answer.unchanged ? answer.revision : answer.desiredState.revision;
  return relayArg.fire('reportClusterPlatformObservedState', {
    desiredRevision: revision,
    services: [{ serviceId: serviceIdArg, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'ready' }],
  });
})();

const unknownOf = async (tArg: ITestCloudly, serviceIdArg: string) => (await tArg.admin.call('getServiceRuntimeStatus', { serviceId: serviceIdArg })).unknown;
const connectElected = async (tArg: ITestCloudly, clusterIdArg: string, tokenArg: string): Promise<CloudlyRelayClient> => {
  const relay = await tArg.connectRelay(tokenArg);
  await waitFor(() => tArg.cloudly.relays.sessionsOf(clusterIdArg).some((session) => tArg.cloudly.clusterManager.isElected(session)), 'the relay is elected', 15_000);
  return relay;
};

describe('liveness across instances', () => {
  test('a relay that moves to another instance shows no unknown; one gone from the instance that does not reconcile reads unknown past the grace', async () => {
    const database = await startSharedDatabase();
    const a = await startTestCloudly({ ...database.shared, ...timing });
    const b = await startTestCloudly({ ...database.shared, ...timing });
    try {
      await waitFor(() => a.cloudly.reconciler.isLeader, 'A reconciles');
      const { cluster, service, relay, relayToken } = await reportingCluster(a, 'moving', ['n1']);
      await report(relay, service.id);
      await waitFor(async () => (await a.admin.call('getServiceRuntimeStatus', { serviceId: service.id })).status.state === 'converged', 'converged', 15_000);

      // Sample the verdict as the relay moves from A to B, and for a grace and a half after.
      let sawUnknown = false;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          sawUnknown ||= (await unknownOf(a, service.id)) !== null;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      })();
      relay.close();
      const onB = await connectElected(b, cluster.id, relayToken);
      await report(onB, service.id);
      await new Promise((resolve) => setTimeout(resolve, graceMs * 1.5));
      sampling = false;
      await sampler;
      assert.equal(sawUnknown, false, 'no unknown while the relay moved between instances');
      assert.equal(b.cloudly.reconciler.isLeader, false, 'B does not reconcile');

      // Gone from B, which does not reconcile: A's liveness poll finds the lease released there.
      const closedAt = Date.now();
      onB.close();
      await waitFor(async () => (await unknownOf(a, service.id)) !== null, 'unknown on the instance that reconciles', graceMs + 15_000);
      console.log(`# relay closed on the other instance → unknown after ${Date.now() - closedAt} ms (grace ${graceMs} ms)`);
      const unknown = (await unknownOf(b, service.id))!;
      assert.equal(unknown.reason, 'relay-disconnected', 'B answers the same stored liveness');
      const fleet = (await b.admin.call('getFleetOverview', {})).clusters.find((entry) => entry.cluster.id === cluster.id)!;
      assert.equal(fleet.services.byRuntimeState.unknown, 1);
      assert.equal(fleet.services.byRuntimeState.converged, 0);
    } finally {
      await a.stop();
      await b.stop();
      await database.stop();
    }
  });
});
