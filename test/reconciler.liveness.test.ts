import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { reportingCluster } from './helpers/desiredstate.js';
import { openWatcher } from './helpers/watch.js';
import { journalSegmentPrefix } from '../ts/core/journal.js';
import { currentOperation } from '../ts/core/operationcontext.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IRuntimeLiveness } from '../ts/interfaces/data/serviceruntimestatus.js';

/**
 * A dark cluster never shows green (docs/reconciler.md, "Liveness"): over real relay sockets, a
 * cluster whose relay goes away reads `unknown` past the grace on both overviews, in the service's
 * status and in the watch, and comes back by itself when its relay connects again. The grace is
 * short here so the test is quick; the figures it prints are the time from the relay's socket
 * closing to the stored `unknown`, against the grace (measured, not asserted against a clock).
 */

const graceMs = 1_500;

describe('liveness: a cluster whose relay is gone reads unknown, never converged', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly({ relayLivenessGraceMs: graceMs }); });
  after(async () => { await t.stop(); });

  /** A cluster with one service its relay reports ready at the current spec: converged. */
  const convergedCluster = async (nameArg: string) => {
    const world = await reportingCluster(t, nameArg, ['n1']);
    await report(world.relay, world.revision, world.service.id);
    await waitFor(async () => (await status(world.service.id)).status.state === 'converged', 'the service is converged', 10_000);
    return world;
  };
  const report = (relayArg: CloudlyRelayClient, revisionArg: number, serviceIdArg: string) =>
    relayArg.fire('reportClusterPlatformObservedState', {
      desiredRevision: revisionArg,
      services: [{ serviceId: serviceIdArg, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'ready' }],
    });
  const status = (serviceIdArg: string) => t.caller.call('getServiceRuntimeStatus', { serviceId: serviceIdArg });
  const fleetOf = async (clusterIdArg: string) => (await t.caller.call('getFleetOverview', {})).clusters.find((entry) => entry.cluster.id === clusterIdArg)!;
  const overviewOf = async (clusterIdArg: string) => (await t.caller.call('getClusterOverview', { clusterId: clusterIdArg })).overview;

  test('the relay goes away: past the grace every view says unknown with why and since when; it comes back by itself', async () => {
    const { cluster, service, relay, revision, relayToken } = await convergedCluster('dark');
    const { client, events } = await openWatcher(t.baseUrl, { clusterId: cluster.id });
    try {
      const closedAt = Date.now();
      relay.close();
      // Within the grace nothing changes: a relay that reconnects or moves shows no blip.
      await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).length === 0, 'the socket is gone here');
      if (Date.now() - closedAt < graceMs - 200) {
        assert.equal((await status(service.id)).unknown, null, 'still current within the grace');
      }
      await waitFor(async () => (await status(service.id)).unknown !== null, 'the service reads unknown', graceMs + 10_000);
      const darkAfterMs = Date.now() - closedAt;
      console.log(`# relay closed → service unknown after ${darkAfterMs} ms (grace ${graceMs} ms)`);

      const answer = await status(service.id);
      const unknown = answer.unknown as IRuntimeLiveness;
      assert.equal(unknown.state, 'unknown');
      assert.equal(unknown.reason, 'relay-disconnected');
      assert.ok(unknown.since >= closedAt - 50 && unknown.since <= closedAt + 2_000, `since is when the relay went (${unknown.since - closedAt} ms after the close)`);
      // The contract's status stays exactly the last verdict judged, beside it.
      assert.deepEqual(Object.keys(answer.status).sort(), ['changedAt', 'id', 'reason', 'specRevision', 'state']);

      const fleet = await fleetOf(cluster.id);
      assert.equal(fleet.services.byRuntimeState.converged, 0, 'not counted converged on the fleet page');
      assert.equal(fleet.services.byRuntimeState.unknown, 1);
      assert.equal(fleet.unknown?.reason, 'relay-disconnected');
      const overview = await overviewOf(cluster.id);
      assert.equal(overview.services[0].unknown?.reason, 'relay-disconnected');
      assert.equal(overview.services[0].unknown?.since, unknown.since);

      await waitFor(() => events.some((event) => event.kind === 'CloudlyServiceRuntimeStatus' && event.id === service.id
        && (event.document as { unknown?: IRuntimeLiveness | null } | undefined)?.unknown?.reason === 'relay-disconnected'), 'the watcher saw it go unknown');

      const metrics = await (await fetch(`${t.baseUrl}/metrics`)).text();
      assert.match(metrics, /^cloudly_services\{state="unknown"\} [1-9]/m, '/metrics counts unknown services');
      assert.match(metrics, /^cloudly_clusters\{relay="disconnected"\} [1-9]/m, '/metrics counts clusters without a relay');

      // The relay comes back and reports: current again, converged, without anyone asking.
      const back = await t.connectRelay(relayToken);
      try {
        await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).some((session) => t.cloudly.clusterManager.isElected(session)), 'the new relay is elected');
        await report(back, revision, service.id);
        await waitFor(async () => (await status(service.id)).unknown === null, 'current again', 10_000);
        assert.equal((await status(service.id)).status.state, 'converged');
        assert.equal((await fleetOf(cluster.id)).services.byRuntimeState.converged, 1);
        assert.equal((await fleetOf(cluster.id)).unknown, null);
      } finally {
        back.close();
      }
    } finally {
      client.close();
    }
  });

  test('a relay that flaps (connects and drops again and again) turns unknown at most once per grace', async () => {
    const { cluster, service, relay: first, relayToken } = await convergedCluster('flapping');
    first.close();
    const transitions: Array<{ at: number; unknown: boolean }> = [];
    let last: boolean | null = null;
    const watchEnds = Date.now() + 3 * graceMs;
    const sampling = (async () => {
      while (Date.now() < watchEnds) {
        const unknown = (await status(service.id)).unknown !== null;
        if (unknown !== last) {
          transitions.push({ at: Date.now(), unknown });
          last = unknown;
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    // Connect and drop every 300 ms, well inside the grace.
    while (Date.now() < watchEnds - 300) {
      const relay = await t.connectRelay(relayToken);
      await new Promise((resolve) => setTimeout(resolve, 150));
      relay.close();
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    await sampling;
    // Each drop opens a new grace: the verdict can turn unknown only after a whole grace without a
    // relay, so at most once per grace however often the relay flaps (every 300 ms here).
    const flipsToUnknown = transitions.filter((entry) => entry.unknown).length;
    assert.ok(flipsToUnknown <= 3, `turned unknown ${flipsToUnknown} times in ${3 * graceMs} ms of a relay dropping every 300 ms`);
    console.log(`# a relay flapping every 300 ms for ${3 * graceMs} ms: ${flipsToUnknown} turns to unknown (cluster ${cluster.name})`);
    // The last drop's grace runs out here, not in the middle of the next test's count of writes.
    await waitFor(async () => (await status(service.id)).unknown !== null, 'unknown once the last drop\'s grace ran out', graceMs + 10_000);
  });

  test('twenty relay reads of an unchanged desired state and route table add no byte to the journal', async () => {
    const { cluster, relay } = await reportingCluster(t, 'quiet-reads', ['n1']);
    try {
      await t.cloudly.desiredStateManager.settled(cluster.id);
      await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the controllers have nothing owed');
      const journalBytes = async () => {
        let bytes = 0;
        for (const name of await fsp.readdir(t.dataDir)) {
          if (name.startsWith(journalSegmentPrefix)) {
            bytes += (await fsp.stat(path.join(t.dataDir, name))).size;
          }
        }
        return bytes;
      };
      // Cloudly's own timers (a lease heartbeat, another test's grace running out) may write in any
      // window; a read that writes would write in every one. So: no commit is made on behalf of
      // the two reads in any window, and the journal stays the same size over at least one window.
      const readerWrites: string[] = [];
      const stopListening = t.cloudly.store.onCommitted((kindArg) => {
        const { method } = currentOperation();
        if (method === 'getClusterPlatformDesiredState' || method === 'getClusterRouteTable') {
          readerWrites.push(`${method} wrote ${kindArg.collectionName}`);
        }
      });
      const growths: number[] = [];
      try {
        for (let window = 0; window < 5 && !growths.includes(0); window++) {
          const before = await journalBytes();
          for (let index = 0; index < 20; index++) {
            await relay.fire('getClusterPlatformDesiredState', {});
            await relay.fire('getClusterRouteTable', {});
          }
          growths.push((await journalBytes()) - before);
        }
      } finally {
        stopListening();
      }
      assert.deepEqual(readerWrites, [], 'the reads committed nothing');
      assert.ok(growths.includes(0), `the journal grew in every window of twenty reads of each: ${growths.join(', ')} bytes`);
    } finally {
      relay.close();
    }
  });

  test('after a restart with no relay connected, no service is current past the grace', async () => {
    const { service, relay } = await convergedCluster('restarted');
    relay.close();
    await t.restart();
    const restartedAt = Date.now();
    await waitFor(async () => (await t.caller.call('getServiceRuntimeStatus', { serviceId: service.id })).unknown !== null, 'unknown after the restart', graceMs + 10_000);
    console.log(`# restart without relays → service unknown after ${Date.now() - restartedAt} ms (grace ${graceMs} ms)`);
    // Every cluster's grace ends at the same moment (none had a relay since the restart); each is
    // judged on its own key, so the fleet is looked at until all of them have turned.
    const current = async () => (await t.caller.call('getFleetOverview', {})).clusters
      .filter((entry) => entry.services.byRuntimeState.converged + entry.services.byRuntimeState.converging > 0)
      .map((entry) => entry.cluster.name);
    await waitFor(async () => (await current()).length === 0, 'no cluster shows a service as current', 10_000);
    assert.deepEqual(await current(), []);
  });
});

describe('liveness: a connected relay whose reports stop reads observed-state-stale on time, with no resync', () => {
  const observedStaleMs = 2_000;
  let t: ITestCloudly;
  // An hour-long resync: only the liveness controller's own deadline can find the report stale.
  before(async () => { t = await startTestCloudly({ observedStaleMs, observedRefreshMs: 1_000, reconcileResyncMs: 3_600_000 }); });
  after(async () => { await t.stop(); });

  test('the report turns stale at its deadline; the next report makes the cluster current again', async () => {
    const { cluster, service, relay, revision } = await reportingCluster(t, 'quiet', ['n1']);
    try {
      const report = () => relay.fire('reportClusterPlatformObservedState', {
        desiredRevision: revision,
        services: [{ serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'ready' }],
      });
      const status = () => t.caller.call('getServiceRuntimeStatus', { serviceId: service.id });
      await report();
      const reportedAt = Date.now();
      await waitFor(async () => (await status()).status.state === 'converged', 'the service is converged', 10_000);
      await waitFor(async () => (await status()).unknown?.reason === 'observed-state-stale', 'stale once no report came', observedStaleMs + 10_000);
      console.log(`# last report → observed-state-stale after ${Date.now() - reportedAt} ms (bound ${observedStaleMs} ms)`);
      assert.ok(t.cloudly.relays.sessionsOf(cluster.id).length > 0, 'the relay is still connected: stale, not disconnected');
      await report();
      await waitFor(async () => (await status()).unknown === null, 'current again after a report', 10_000);
    } finally {
      relay.close();
    }
  });
});
