import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { databaseCommandsOf, startSharedDatabase, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { clusterRelayLeaseKind } from '../ts/manager.cluster/relayelection.js';

/**
 * What two idle instances over one database send while relays are connected and nothing changes
 * (docs/multi-instance.md, "Scale of the fleet"): per heartbeat one write renewing every relay
 * lease the instance holds, one compare-and-swap of its registry entry, one read (or, on the
 * reconciling instance, one compare-and-swap) of the reconciler lease; and on the reconciling
 * instance one read of the shared audit log per poll. Counted with the server's
 * `cloudly_database_commands_total`, so a confirming read per beat, a read before each renewal or
 * a poll that reads a storm's last events again (with a getMore after it) cannot creep back.
 */

const registration = { origin: 'http://192.0.2.70:8080', version: '1.0.0', protocol: 'cluster-relay/1' };
const heartbeatMs = 500;
const pollMs = 250;
const windowMs = 4_000;

const electedHere = (instanceArg: ITestCloudly, clusterIdArg: string): boolean =>
  instanceArg.cloudly.relays.sessionsOf(clusterIdArg).some((session) => instanceArg.cloudly.clusterManager.isElected(session));

describe('the database commands of idle instances', () => {
  test('with 40 relays connected and nothing changing, each instance sends a few commands per heartbeat and the reconciling one one more per poll; a lease taken elsewhere and a change made elsewhere are still seen', async (context) => {
    const database = await startSharedDatabase();
    const settings = { ...database.shared, relayLeaseTtlMs: heartbeatMs * 20, relayLeaseHeartbeatMs: heartbeatMs, sharedPollMs: pollMs, reconcileResyncMs: 3_600_000 };
    const a = await startTestCloudly(settings);
    const b = await startTestCloudly(settings);
    try {
      await waitFor(() => a.cloudly.reconciler.isLeader, 'A reconciles');
      assert.equal(b.cloudly.reconciler.isLeader, false, 'B does not reconcile');
      // A burst of changes (clusters, their registrations: well over a hundred audit events), as
      // after a storm, then quiet.
      const clusters: string[] = [];
      for (let index = 0; index < 40; index++) {
        const { cluster, relayToken } = await a.createCluster(`idle-${index}`);
        clusters.push(cluster.id);
        const relay = await (index % 2 === 0 ? a : b).connectRelay(relayToken);
        await relay.fire('registerClusterRelay', { registration });
      }
      await waitFor(() => clusters.every((clusterId, index) => electedHere(index % 2 === 0 ? a : b, clusterId)), 'every relay elected where it connected');
      await waitFor(() => a.cloudly.reconciler.busyKeys === 0, 'the reconciler caught up', 60_000);
      // Past the shared log's lookback (5 s) the burst's events are no longer read by any poll.
      await new Promise((resolve) => setTimeout(resolve, 5_500));

      const before = await Promise.all([databaseCommandsOf(a.baseUrl), databaseCommandsOf(b.baseUrl)]);
      const started = Date.now();
      await new Promise((resolve) => setTimeout(resolve, windowMs));
      const after = await Promise.all([databaseCommandsOf(a.baseUrl), databaseCommandsOf(b.baseUrl)]);
      const elapsed = Date.now() - started;
      const [onA, onB] = [after[0] - before[0], after[1] - before[1]];
      // Upper bounds from the window's length: each timer fires at most once per period (plus one
      // already due); 4 more for the rarer timers (the claims' retry every 5 s, the operations' sweep).
      const beats = Math.ceil(elapsed / heartbeatMs) + 1;
      context.diagnostic(`in ${elapsed} ms A sent ${onA} commands, B ${onB}`);
      const polls = Math.ceil(elapsed / pollMs) + 1;
      assert.ok(onB <= 3 * beats + 4, `B sent ${onB} commands in ${elapsed} ms: at most 3 per heartbeat (${beats}) and 4 more`);
      assert.ok(onA <= 3 * beats + polls + 4, `A sent ${onA} commands in ${elapsed} ms: at most 3 per heartbeat (${beats}), 1 per poll (${polls}) and 4 more`);
      assert.equal(a.cloudly.clusterManager.relayElection.heartbeatConfirmReads + b.cloudly.clusterManager.relayElection.heartbeatConfirmReads, 0,
        'every beat renewed every lease it held with its one write');
      assert.ok(clusters.every((clusterId, index) => electedHere(index % 2 === 0 ? a : b, clusterId)), 'every relay still elected');

      // A lease taken away (as by an instance that found it run out after a stall) is noticed at
      // the next beat: the write renews fewer than held, and the read says which one went.
      const taken = clusters[1];
      await b.cloudly.store.collection(clusterRelayLeaseKind).updateOne({ id: taken }, { $set: { instanceId: 'another-instance' }, $inc: { generation: 1 } });
      await waitFor(() => !electedHere(b, taken), 'B noticed the lease it lost', 10_000);
      assert.ok(b.cloudly.clusterManager.relayElection.heartbeatConfirmReads >= 1, 'the beat that lost a lease read which ones it still holds');
      assert.ok(clusters.filter((_, index) => index % 2 === 1 && index !== 1).every((clusterId) => electedHere(b, clusterId)), 'B kept the others');

      // A change made through B after the quiet window reaches the reconciler on A through the log.
      const judged = a.cloudly.reconciler.sharedInputEvents;
      await b.createCluster('after-the-quiet');
      await waitFor(() => a.cloudly.reconciler.sharedInputEvents > judged, 'A read the change B made', 10_000);
    } finally {
      // Each instance's stop closes the relays connected through it.
      await a.stop();
      await b.stop();
      await database.stop();
    }
  });
});
