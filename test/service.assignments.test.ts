import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { connectHintedRelay, type TDesiredStateHint } from './helpers/desiredstate.js';
import { createCli, type ICli } from './cli.fixture.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IClusterPlatformObservedService } from '../ts/interfaces/data/desiredstate.js';
import type { IRuntimeNetworkAddressPlan } from '../ts/interfaces/data/runtimenetworkaddressplan.js';
import type { IServiceRuntimeAssignmentView } from '../ts/interfaces/data/serviceruntimeassignmentview.js';

/**
 * The assignment views of `getServiceRuntimeStatus` (docs/api/services.md, "Assignment views"):
 * one per replica slot, derived from the placement, the leases, the node sessions and what the
 * relay reports, over a real relay socket; a dark cluster's slots read `stale`, never running.
 */

const graceMs = 1_500;

/** A projection of a view onto the members a row asserts. */
const summary = (viewArg: IServiceRuntimeAssignmentView) => ({
  replica: viewArg.replica,
  nodeId: viewArg.nodeId,
  condition: viewArg.condition,
});

describe('assignment views through the real server', () => {
  let t: ITestCloudly;
  let cli: ICli;
  before(async () => {
    t = await startTestCloudly({ relayLivenessGraceMs: graceMs });
    cli = await createCli();
    await cli.login(t);
  });
  after(async () => {
    await t.stop();
    await cli.dispose();
  });

  /** The assignment rows of `cloudly services status` (table output), one line a slot. */
  const cliAssignmentRows = async (serviceIdArg: string): Promise<string[]> => {
    const run = await cli.run(['services', 'status', '--service', serviceIdArg]);
    assert.equal(run.code, 0, run.stderr);
    const section = run.stdout.split('assignments:\n')[1]?.split('\n\n')[0] ?? '';
    return section.split('\n').slice(1).filter((line) => line.trim() !== '');
  };

  const viewsOf = async (serviceIdArg: string) =>
    (await t.caller.call('getServiceRuntimeStatus', { serviceId: serviceIdArg })).assignments;

  /** A cluster of n1 and n2 with a three-replica service on every node, and its relay elected. */
  const world = async (nameArg: string) => {
    const { cluster, relayToken } = await t.createCluster(nameArg);
    await t.addNodes(cluster.id, 'n1', 'n2');
    const { service } = await t.caller.call('createService', {
      service: {
        name: 'web',
        organizationId: 'org-1',
        clusterId: cluster.id,
        runtime: { image: 'registry.example/web:1', replicas: 3, profile: { runAs: null }, placement: { nodeIds: [] } },
        ports: [],
        routes: [],
        volumes: [],
      },
    });
    const hints: TDesiredStateHint[] = [];
    const relay = await connectHintedRelay(t, cluster.id, relayToken, hints);
    const answer = await relay.fire('getClusterPlatformDesiredState', {});
    assert.equal(answer.unchanged, false);
    const revision = (answer as Extract<typeof answer, { unchanged: false }>).desiredState.revision;
    return { cluster, service, relay, revision, relayToken };
  };

  const report = (relayArg: CloudlyRelayClient, revisionArg: number, servicesArg: IClusterPlatformObservedService[], nodesArg = {}) =>
    relayArg.fire('reportClusterPlatformObservedState', { desiredRevision: revisionArg, services: servicesArg, ...nodesArg });

  test('each slot shows its node, the node session, the relay\'s report and the node\'s workloads', async () => {
    const { service, relay, revision } = await world('views');
    // Placement round robin over the sorted nodes: slot 0 and 2 on n1, slot 1 on n2; nothing reported yet.
    assert.deepEqual((await viewsOf(service.id)).map(summary), [
      { replica: 0, nodeId: 'n1', condition: 'awaiting-report' },
      { replica: 1, nodeId: 'n2', condition: 'awaiting-report' },
      { replica: 2, nodeId: 'n1', condition: 'awaiting-report' },
    ]);

    await relay.fire('reportRuntimeNodeSession', { nodeId: 'n1', session: { id: 's1', generation: 4 } });
    await report(relay, revision, [
      { serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 2, state: 'ready' },
      { serviceId: service.id, nodeId: 'n2', specRevision: 1, replicas: 1, state: 'starting', reason: 'pulling image' },
    ], {
      nodes: [{
        nodeId: 'n1',
        sessionId: 's1',
        assignments: [
          { assignmentId: 'a1', serviceId: service.id, sessionId: 's1', state: 'ready', secretVersions: [] },
          { assignmentId: 'a2', serviceId: service.id, sessionId: 's1', state: 'ready', secretVersions: [] },
        ],
      }],
    });
    await waitFor(async () => (await viewsOf(service.id))[1].condition === 'starting', 'the report reaches the views');
    const views = await viewsOf(service.id);
    assert.deepEqual(views.map(summary), [
      { replica: 0, nodeId: 'n1', condition: 'running' },
      { replica: 1, nodeId: 'n2', condition: 'starting' },
      { replica: 2, nodeId: 'n1', condition: 'running' },
    ]);
    const [first, second] = views;
    assert.deepEqual(first.session && { id: first.session.id, generation: first.session.generation }, { id: 's1', generation: 4 });
    assert.deepEqual(first.workloads, [
      { assignmentId: 'a1', sessionId: 's1', state: 'ready' },
      { assignmentId: 'a2', sessionId: 's1', state: 'ready' },
    ]);
    assert.equal(first.lease, null, 'no address plan: no lease');
    assert.equal(first.stale, null);
    assert.equal(first.specRevision, 1);
    assert.equal(second.session, null, 'n2 reported no session');
    assert.deepEqual(second.observed && { state: second.observed.state, reason: second.observed.reason, replicas: second.observed.replicas },
      { state: 'starting', reason: 'pulling image', replicas: 1 });

    // n1 now counts one replica: the second slot on n1 is no longer covered by a report.
    await report(relay, revision, [
      { serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'ready' },
      { serviceId: service.id, nodeId: 'n2', specRevision: 1, replicas: 1, state: 'failed', reason: 'exit 1' },
    ]);
    await waitFor(async () => (await viewsOf(service.id))[2].condition === 'awaiting-report', 'the smaller count reaches the views');
    assert.deepEqual((await viewsOf(service.id)).map((view) => view.condition), ['running', 'failed', 'awaiting-report']);
  });

  test('a new spec revision reads outdated until the node reports it; a deleted service has no slots', async () => {
    const { service, relay, revision } = await world('revisions');
    await report(relay, revision, [
      { serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 2, state: 'ready' },
      { serviceId: service.id, nodeId: 'n2', specRevision: 1, replicas: 1, state: 'ready' },
    ]);
    await waitFor(async () => (await viewsOf(service.id)).every((view) => view.condition === 'running'), 'all running');
    const { service: updated } = await t.caller.call('updateService', {
      serviceId: service.id,
      expectedGeneration: service.generation,
      service: {
        name: 'web', organizationId: 'org-1', clusterId: service.clusterId,
        runtime: { image: 'registry.example/web:2', replicas: 3, profile: { runAs: null }, placement: { nodeIds: [] } },
        ports: [], routes: [], volumes: [],
      },
    });
    assert.equal(updated.specRevision, 2);
    const views = await viewsOf(service.id);
    assert.deepEqual(views.map((view) => [view.specRevision, view.condition]), [[2, 'outdated'], [2, 'outdated'], [2, 'outdated']]);
    await t.caller.call('deleteService', { serviceId: service.id, expectedGeneration: updated.generation });
    assert.deepEqual(await viewsOf(service.id), []);
  });

  test('with an address plan each slot holds its lease, confirmed once its node states it', async () => {
    const { service, relay } = await world('leases');
    const plan: IRuntimeNetworkAddressPlan = {
      authorityId: 'authority-1',
      revision: 1,
      prefixes: ['192.0.2.0/24'],
      pools: [{ id: 'pool', prefix: '192.0.2.128/26' }],
      vpn: { hubPrefix: '192.0.2.0/28', peerPrefix: '192.0.2.64/26' },
      hubs: [],
      platformEndpoints: [],
    };
    await t.caller.call('setRuntimeNetworkAddressPlan', { plan });
    await waitFor(async () => (await viewsOf(service.id)).every((view) => view.lease !== null), 'every slot holds a lease');
    const views = await viewsOf(service.id);
    const desired = await relay.fire('getClusterPlatformDesiredState', {});
    assert.equal(desired.unchanged, false);
    const leases = (desired as Extract<typeof desired, { unchanged: false }>).desiredState.leases.filter((lease) => lease.serviceId === service.id);
    // The view names exactly the lease, node and address the relay is given, slot by slot.
    assert.deepEqual(
      views.map((view) => ({ replica: view.replica, nodeId: view.nodeId, id: view.lease!.id, address: view.lease!.address })),
      leases.map((lease) => ({ replica: lease.replica, nodeId: lease.nodeId, id: lease.lease.id, address: lease.address }))
        .sort((left, right) => left.replica - right.replica),
    );
    assert.ok(views.every((view) => view.lease!.confirmed === false));
    const onN1 = leases.filter((lease) => lease.nodeId === 'n1');
    await relay.fire('reportRuntimeNetworkLeases', {
      nodeId: 'n1',
      leases: onN1.map((lease) => ({ lease: lease.lease, serviceId: lease.serviceId, address: lease.address })),
    });
    const confirmed = await viewsOf(service.id);
    assert.deepEqual(confirmed.map((view) => [view.nodeId, view.lease!.confirmed]), [['n1', true], ['n2', false], ['n1', true]]);
  });

  test('a dark cluster\'s slots read stale with the liveness verdict, never running, and current again when the relay returns', async () => {
    const { cluster, service, relay, revision, relayToken } = await world('dark');
    await report(relay, revision, [
      { serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 2, state: 'ready' },
      { serviceId: service.id, nodeId: 'n2', specRevision: 1, replicas: 1, state: 'ready' },
    ]);
    await waitFor(async () => (await viewsOf(service.id)).every((view) => view.condition === 'running'), 'all running');
    const reportedAt = (await viewsOf(service.id))[0].observed!.reportedAt;
    relay.close();
    await waitFor(async () => (await viewsOf(service.id)).every((view) => view.stale !== null), 'the slots read stale', graceMs + 15_000);
    const dark = await viewsOf(service.id);
    for (const view of dark) {
      assert.equal(view.condition, 'stale', `slot ${view.replica}`);
      assert.equal(view.stale!.state, 'unknown');
      assert.equal(view.stale!.reason, 'relay-disconnected');
      // The last report is still shown, as of when it was made.
      assert.equal(view.observed!.state, 'ready');
    }
    assert.equal(dark[0].observed!.reportedAt, reportedAt);
    const { status, unknown } = await t.caller.call('getServiceRuntimeStatus', { serviceId: service.id });
    assert.deepEqual(dark[0].stale, unknown);
    assert.equal(status.id, service.id);
    const darkRows = await cliAssignmentRows(service.id);
    assert.equal(darkRows.length, 3, darkRows.join('\n'));
    for (const row of darkRows) {
      assert.match(row, /\bstale\b/, 'the CLI shows each dark slot stale');
      assert.doesNotMatch(row, /\brunning\b/);
    }

    const back = await connectHintedRelay(t, cluster.id, relayToken, []);
    await report(back, revision, [
      { serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 2, state: 'ready' },
      { serviceId: service.id, nodeId: 'n2', specRevision: 1, replicas: 1, state: 'ready' },
    ]);
    await waitFor(async () => (await viewsOf(service.id)).every((view) => view.stale === null), 'current again', 15_000);
    assert.deepEqual((await viewsOf(service.id)).map((view) => view.condition), ['running', 'running', 'running']);
    const rows = await cliAssignmentRows(service.id);
    assert.deepEqual(rows.map((row) => row.trim().split(/\s+/).slice(0, 3)), [['0', 'n1', 'running'], ['1', 'n2', 'running'], ['2', 'n1', 'running']]);
  });
});
