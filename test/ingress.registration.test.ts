import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { armFailpoint } from '../ts/core/failpoints.js';
import { connectElectedRelay, designationRequest, prepareIngressCluster, type IIngressCluster } from './ingress.fixture.js';
import { data, protocol } from '../ts/interfaces/index.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import { enrollSecretRecipient, openSealedText } from './helpers/secrets.js';
import type { ISecretRecipientKeyPair } from '../ts/core/sealing.js';
import type { IReq_Relay_Cloudly_ReportClusterPlatformObservedState } from '../ts/interfaces/requests/desiredstate.js';
import { clusterIngressRouteTableKind } from '../ts/manager.ingress/documents.js';
import { assertFieldProblems, assertHasFieldProblem } from './helpers/refusals.js';

interface IDesignatedCluster extends IIngressCluster {
  designation: data.IClusterIngressDesignation;
  bearer: string;
}

describe('registerClusterIngress through the cluster relay', () => {
  let t: ITestCloudly;
  let cluster: IDesignatedCluster;
  /** Every refusal seen; none may quote a bearer. */
  const refusals: unknown[] = [];
  /** The recipient each relay enrolled: the bearer reaches a relay only sealed to it. */
  const recipients = new Map<CloudlyRelayClient, ISecretRecipientKeyPair>();

  const resolveBearer = async (relayArg: CloudlyRelayClient, secretVersionArg: data.ISecretVersionReference): Promise<string> => {
    let keys = recipients.get(relayArg);
    if (!keys) {
      keys = await enrollSecretRecipient(relayArg);
      recipients.set(relayArg, keys);
    }
    const { material } = await relayArg.fire(
      'resolveClusterIngressBearer', { secretVersion: secretVersionArg });
    assert.equal(material.binding.purpose, 'cluster-ingress-bearer');
    assert.deepEqual(material.binding.secretVersion, secretVersionArg);
    return openSealedText(keys, material);
  };

  const report = (relayArg: CloudlyRelayClient, nodeIdArg: string, sessionIdArg: string, optionsArg: {
    serviceId?: string; state?: 'ready' | 'pending'; secretVersion?: data.ISecretVersionReference;
  } = {}) => relayArg.fire('reportClusterNodeRuntimeAssignments', {
    nodeId: nodeIdArg,
    sessionId: sessionIdArg,
    assignments: [{
      assignmentId: `${nodeIdArg}-ingress`,
      serviceId: optionsArg.serviceId ?? cluster.service.id,
      sessionId: sessionIdArg,
      state: optionsArg.state ?? 'ready',
      secretVersions: [optionsArg.secretVersion ?? cluster.designation.credential.secretVersion],
    }],
  });

  const designateCluster = async (nameArg: string): Promise<IDesignatedCluster> => {
    const prepared = await prepareIngressCluster(t, nameArg);
    const { designation } = await t.caller.call(
      'designateClusterIngress', { designation: designationRequest(prepared) });
    // The relay's node resolves the secret reference of the spec into the value it hands the ingress.
    const bearer = await resolveBearer(prepared.relay, designation.credential.secretVersion);
    return { ...prepared, designation, bearer };
  };

  const body = (overridesArg: Record<string, unknown> = {}) => ({
    bearer: cluster.bearer,
    version: '1.4.0',
    nodeId: 'node-1',
    capabilities: ['http2'],
    protocol: { ...data.clusterIngressProtocolOffer },
    ...overridesArg,
  });

  const register = (relayArg: CloudlyRelayClient, bodyArg: unknown) =>
    relayArg.fire('registerClusterIngress', bodyArg as data.IClusterIngressRegistration);

  /** The named refusal a registration gets; fails when it is anything else. */
  const refusedWith = async (relayArg: CloudlyRelayClient, bodyArg: unknown) => {
    const errorData = await refusalOf(() => register(relayArg, bodyArg));
    refusals.push(errorData);
    const refusal = data.readClusterIngressRegistrationRefusal(errorData);
    assert.ok(refusal, `a named registration refusal, got ${JSON.stringify(errorData)}`);
    assert.ok(refusal.retryAfterMs >= 1000 && refusal.retryAfterMs <= 300000);
    return refusal.reason;
  };

  before(async () => {
    t = await startTestCloudly();
    cluster = await designateCluster('edge');
    await report(cluster.relay, 'node-1', 'session-1');
  });
  after(async () => {
    await t.stop();
  });

  test('a registration with every fact in place is accepted with the current revision and Cloudly\'s offer', async () => {
    // The designation's desired-state computation records the route table (empty: no service
    // declares a route); its revision is the one an accepted registration answers.
    await waitFor(async () => (await t.cloudly.ingressManager.getRouteTable(cluster.clusterId)) !== null, 'the route table computed');
    const table = (await t.cloudly.ingressManager.getRouteTable(cluster.clusterId))!;
    const accepted = await register(cluster.relay, body());
    assert.deepEqual(accepted, { accepted: true, revision: table.revision, protocol: data.clusterIngressProtocolOffer });
  });

  test('concurrent reports of one node are all recorded, none answered conflict', async () => {
    // Each lost race re-reads and replaces the report that won it, so every report is one generation.
    // Every loss is another report committing, so 8 reports fit the store's default of 8 rounds.
    // A report names one of the relay's cluster's nodes (another node is refused not-found).
    await t.addNodes(cluster.clusterId, 'node-raced');
    const answers = await Promise.all(Array.from({ length: 8 }, (_, index) => report(cluster.relay, 'node-raced', `session-raced-${index}`)));
    assert.deepEqual(answers.map((answer) => answer.generation).sort((a, b) => a - b), Array.from({ length: 8 }, (_, index) => index + 1));
  });

  test('the observed-state report\'s nodes member writes the one assignment observation the judge reads; all or nothing', async () => {
    const folded = await designateCluster('folded');
    const bodyOf = { ...body(), bearer: folded.bearer };
    const before = await refusalOf(() => register(folded.relay, bodyOf));
    assert.equal(data.readClusterIngressRegistrationRefusal(before)?.reason, 'assignment-not-running');
    const assignment = (stateArg: 'ready' | 'pending') => ({
      assignmentId: 'node-1-ingress', serviceId: folded.service.id, sessionId: 'session-folded', state: stateArg,
      secretVersions: [folded.designation.credential.secretVersion],
    });
    const observe = (nodesArg: unknown) => folded.relay.fire('reportClusterPlatformObservedState', {
      desiredRevision: 0, services: [], nodes: nodesArg as IReq_Relay_Cloudly_ReportClusterPlatformObservedState['request']['nodes'],
    });
    assert.deepEqual(await observe([{ nodeId: 'node-1', sessionId: 'session-folded', assignments: [assignment('ready')] }]), { accepted: 0, removed: [] });
    assert.equal((await register(folded.relay, bodyOf)).accepted, true, 'the judge reads what the observed-state report stored');
    // One bad entry refuses the whole report: node-1's pending state is not stored either.
    const refused = await refusalOf(() => observe([
      { nodeId: 'node-1', sessionId: 'session-folded', assignments: [assignment('pending')] },
      { nodeId: 'node-of-nobody', sessionId: 'session-x', assignments: [] },
      { nodeId: 'node-2', sessionId: 'session-y', assignments: [{ assignmentId: 'a' }], extra: 1 },
    ]));
    assert.equal(refused.code, 'invalid-request');
    assertHasFieldProblem(refused, ['request.nodes[2].extra', 'field-unknown', 'is not a field of an observed node']);
    const unknownNode = await refusalOf(() => observe([
      { nodeId: 'node-1', sessionId: 'session-folded', assignments: [assignment('pending')] },
      { nodeId: 'node-of-nobody', sessionId: 'session-x', assignments: [] },
    ]));
    assertFieldProblems(unknownNode, [['request.nodes[1].nodeId', 'field-not-found', 'names no node of this cluster']]);
    assert.equal((await register(folded.relay, bodyOf)).accepted, true, 'nothing of a refused report was stored');
    // The separate method writes the same observation: a pending assignment refuses the registration.
    await report(folded.relay, 'node-1', 'session-folded', { state: 'pending', serviceId: folded.service.id, secretVersion: folded.designation.credential.secretVersion });
    assert.equal(data.readClusterIngressRegistrationRefusal(await refusalOf(() => register(folded.relay, bodyOf)))?.reason, 'assignment-not-running');
  });

  test('a protocol mismatch is refused first, as a protocol refusal, even with every other fact wrong', async () => {
    const second = await t.connectRelay(cluster.relayToken);
    const errorData = await refusalOf(() => register(second, body({
      protocol: { name: 'serve.zone/cluster-ingress', minimumVersion: 2, maximumVersion: 2 },
      bearer: 'x'.repeat(40), nodeId: 'node-9',
    })));
    refusals.push(errorData);
    const refusal = protocol.readProtocolRefusal(errorData);
    assert.equal(refusal?.reason, 'version-unsupported');
    assert.deepEqual(refusal?.supported, data.clusterIngressProtocolOffer);
    assert.equal(data.readClusterIngressRegistrationRefusal(errorData), null);
    second.close();
  });

  test('not-ready while the ingress manager is stopped', async () => {
    await t.cloudly.ingressManager.stop();
    try {
      assert.equal(await refusedWith(cluster.relay, body({ version: '' })), 'not-ready');
    } finally {
      await t.cloudly.ingressManager.start();
    }
    assert.equal((await register(cluster.relay, body())).accepted, true);
  });

  test('registration-invalid names no bearer and wins over a relay that is not elected', async () => {
    assert.equal(await refusedWith(cluster.relay, body({ version: '', extra: true })), 'registration-invalid');
    const second = await t.connectRelay(cluster.relayToken);
    assert.equal(await refusedWith(second, body({ bearer: 'short' })), 'registration-invalid');
    second.close();
  });

  test('relay-not-connected when another socket of the cluster forwards the registration', async () => {
    const second = await t.connectRelay(cluster.relayToken);
    assert.equal(await refusedWith(second, body()), 'relay-not-connected');
    second.close();
  });

  test('ingress-not-designated for a cluster without a designation, before node and bearer', async () => {
    const bare = await prepareIngressCluster(t, 'bare');
    assert.equal(await refusedWith(bare.relay, body({ nodeId: 'node-9', bearer: 'y'.repeat(43) })), 'ingress-not-designated');
  });

  test('node-mismatch for a node outside the ingress service placement', async () => {
    assert.equal(await refusedWith(cluster.relay, body({ nodeId: 'node-9', bearer: 'y'.repeat(43) })), 'node-mismatch');
  });

  test('assignment-not-running without a ready assignment under the current session carrying the current credential', async () => {
    assert.equal(await refusedWith(cluster.relay, body({ nodeId: 'node-2' })), 'assignment-not-running');
    await report(cluster.relay, 'node-2', 'session-2', { state: 'pending' });
    assert.equal(await refusedWith(cluster.relay, body({ nodeId: 'node-2' })), 'assignment-not-running');
    await report(cluster.relay, 'node-2', 'session-2', {
      secretVersion: { secretId: cluster.designation.credential.secretVersion.secretId, secretVersionId: 'an-older-version' },
    });
    assert.equal(await refusedWith(cluster.relay, body({ nodeId: 'node-2' })), 'assignment-not-running');
    await report(cluster.relay, 'node-2', 'session-2');
    assert.equal((await register(cluster.relay, body({ nodeId: 'node-2' }))).accepted, true);
  });

  test('bearer-refused for a well-formed bearer that is not the current credential', async () => {
    assert.equal(await refusedWith(cluster.relay, body({ bearer: 'z'.repeat(43) })), 'bearer-refused');
    assert.equal(await refusedWith(cluster.relay, body({ bearer: `${cluster.bearer}A` })), 'bearer-refused');
  });

  test('conflict when the node session changes while the registration is judged', async () => {
    // After the facts were read and before they are re-read, the node restarts under a new session.
    let release!: () => void;
    const point = armFailpoint('ingress.registration.beforeReread', { kind: 'pause', until: new Promise<void>((resolve) => { release = resolve; }) }, { times: 1 });
    try {
      const refused = refusedWith(cluster.relay, body());
      await waitFor(async () => point.hits() === 1, 'the registration read its facts');
      await report(cluster.relay, 'node-1', 'session-1b');
      release();
      assert.equal(await refused, 'conflict');
    } finally {
      release();
      point.disarm();
    }
    assert.equal((await register(cluster.relay, body())).accepted, true, 'the retry judges the new session');
  });

  test('a rotated designation refuses the old bearer until the assignment carries the new credential', async () => {
    const rotated = await designateCluster('rotation');
    await report(rotated.relay, 'node-1', 'session-r', {
      serviceId: rotated.service.id, secretVersion: rotated.designation.credential.secretVersion,
    });
    const localBody = { ...body(), bearer: rotated.bearer };
    assert.equal((await register(rotated.relay, localBody)).accepted, true);
    const { designation: next } = await t.caller.call('designateClusterIngress', {
      designation: designationRequest(rotated, { expectedDesignation: data.referenceClusterIngressDesignation(rotated.designation) }),
    });
    assert.equal(await refusedWith(rotated.relay, localBody), 'assignment-not-running');
    await rotated.relay.fire('reportClusterNodeRuntimeAssignments', {
      nodeId: 'node-1', sessionId: 'session-r',
      assignments: [{ assignmentId: 'a', serviceId: rotated.service.id, sessionId: 'session-r', state: 'ready', secretVersions: [next.credential.secretVersion] }],
    });
    assert.equal(await refusedWith(rotated.relay, localBody), 'bearer-refused');
    const bearer = await resolveBearer(rotated.relay, next.credential.secretVersion);
    assert.equal((await register(rotated.relay, { ...localBody, bearer })).accepted, true);
    const stale = await refusalOf(() => rotated.relay.fire(
      'resolveClusterIngressBearer', { secretVersion: rotated.designation.credential.secretVersion }));
    assert.equal(stale.code, 'not-found');
  });

  test('a relay that is not elected can neither report assignments nor resolve the bearer', async () => {
    const second = await t.connectRelay(cluster.relayToken);
    const reportRefusal = await refusalOf(() => report(second, 'node-1', 'session-x'));
    assert.equal(reportRefusal.code, 'unavailable');
    assert.deepEqual(reportRefusal.reasons, ['relay-not-elected']);
    const resolveRefusal = await refusalOf(() => second.fire(
      'resolveClusterIngressBearer', { secretVersion: cluster.designation.credential.secretVersion }));
    assert.equal(resolveRefusal.code, 'unavailable');
    assert.deepEqual(resolveRefusal.reasons, ['relay-not-elected']);
    refusals.push(reportRefusal, resolveRefusal);
    second.close();
  });

  test('the bearer is resolved only for the relay\'s own cluster and only from a well-formed reference', async () => {
    // An elected relay of another designated cluster names this cluster's current secret version.
    const other = await designateCluster('other-cluster');
    const foreign = await refusalOf(() => other.relay.fire(
      'resolveClusterIngressBearer', { secretVersion: cluster.designation.credential.secretVersion }));
    assert.equal(foreign.code, 'not-found');
    // A relay of a cluster without any designation gets nothing either.
    const bare = await prepareIngressCluster(t, 'bare-resolve');
    const undesignated = await refusalOf(() => bare.relay.fire(
      'resolveClusterIngressBearer', { secretVersion: cluster.designation.credential.secretVersion }));
    assert.equal(undesignated.code, 'not-found');
    const malformed = await refusalOf(() => cluster.relay.fire(
      'resolveClusterIngressBearer', { secretVersion: { ...cluster.designation.credential.secretVersion, extra: 1 } as never }));
    assert.equal(malformed.code, 'invalid-request');
    assertFieldProblems(malformed, [['request.secretVersion', 'field-invalid', 'must be exactly { secretId, secretVersionId } with two ids']]);
    refusals.push(foreign, undesignated, malformed);
    // The cluster's own elected relay still gets its own current bearer.
    assert.equal(await resolveBearer(cluster.relay, cluster.designation.credential.secretVersion), cluster.bearer);
    assert.notEqual(other.bearer, cluster.bearer);
  });

  test('a cluster holding a fleet-cutover designation has its registrations judged like any designation, never ingress-not-designated', async () => {
    const cutover = await prepareIngressCluster(t, 'cutover-registration');
    const fleet = await t.cloudly.ingressManager.recordFleetCutoverIngressDesignation(cutover.clusterId, cutover.service.id);
    assert.ok(fleet?.credential, 'Cloudly minted the credential the cut-over ingress registers with');
    // The relay's node resolves it as it resolves a Pallet designation's: sealed to its recipient.
    const bearer = await resolveBearer(cutover.relay, fleet.credential.secretVersion);
    const cutoverBody = (overridesArg: Record<string, unknown> = {}) => body({ bearer, ...overridesArg });
    assert.equal(await refusedWith(cutover.relay, cutoverBody({ nodeId: 'node-9' })), 'node-mismatch');
    assert.equal(await refusedWith(cutover.relay, cutoverBody()), 'assignment-not-running');
    await report(cutover.relay, 'node-1', 'session-cutover', { serviceId: cutover.service.id, secretVersion: fleet.credential.secretVersion });
    assert.equal(await refusedWith(cutover.relay, cutoverBody({ bearer: 'w'.repeat(43) })), 'bearer-refused');
    const accepted = await register(cutover.relay, cutoverBody());
    assert.equal(accepted.accepted, true);
    assert.equal(accepted.revision, (await t.cloudly.ingressManager.getRouteTable(cutover.clusterId))?.revision ?? null);
  });

  let tableRevision = 0;

  test('route table: one table computed from the services, never served without targets, its revision hinted to the relay', async () => {
    const read = (knownRevisionArg: number | null) => cluster.relay.fire(
      'getClusterIngressRouteTable', { knownRevision: knownRevisionArg });
    // The desired-state computation records the table: no service declares a route, so it is empty, not null.
    await t.cloudly.desiredStateManager.currentDesiredState(cluster.clusterId);
    const computed = (await read(null)).table;
    assert.ok(computed, 'a computed table exists');
    assert.deepEqual(computed.routes, []);
    // A table an administrator wrote with the retired setClusterIngressRoutes has routes without
    // targets: it is not served as if the ingress could route them.
    const stored = (await t.cloudly.store.get(clusterIngressRouteTableKind, cluster.clusterId))!;
    await t.cloudly.store.swap(clusterIngressRouteTableKind, cluster.clusterId, stored.generation, {
      set: { routes: [{ hostname: 'legacy.example.com', serviceId: cluster.service.id, port: 8080 }] as never },
    });
    assert.deepEqual(await read(null), { table: null });
    // The desired-state controller's next run replaces it; the revision keeps growing from the legacy one's.
    await t.cloudly.controllers.desiredState.reconcile(cluster.clusterId);
    const { table } = await read(computed.revision);
    assert.deepEqual(table, { clusterId: cluster.clusterId, revision: computed.revision + 2, routes: [] });
    await waitFor(() => cluster.hints.includes(table!.revision), 'the relay got the hint for the new revision');
    assert.equal((await register(cluster.relay, body())).revision, table!.revision);
    // The relay's own read answers the same table, at the same revision.
    const relayTable = await cluster.relay.fire('getClusterRouteTable', {});
    assert.deepEqual(relayTable.table, table);
    // A run that changes nothing keeps the revision.
    await t.cloudly.controllers.desiredState.reconcile(cluster.clusterId);
    assert.deepEqual((await read(table!.revision)).table, table);
    assert.deepEqual(cluster.hints.map((revision) => data.validateClusterIngressRouteTableChange({ revision })).flat(), []);
    tableRevision = table!.revision;
  });

  test('routes have no administrator write: setClusterIngressRoutes is retired', async () => {
    const retired = await refusalOf(() => t.caller.call('setClusterIngressRoutes' as never, {
      clusterId: cluster.clusterId, expectedRevision: null, routes: [{ hostname: 'app.example.com', serviceId: 'svc-missing', port: 8080 }],
    } as never));
    assert.notEqual(retired.code, undefined);
    assert.equal((await t.cloudly.ingressManager.getRouteTable(cluster.clusterId))!.revision, tableRevision, 'nothing was written');
  });

  test('a relay that connects again is told the current revision', async () => {
    cluster.relay.close();
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.clusterId).length === 0, 'old relay gone');
    const hints: number[] = [];
    cluster.relay = await connectElectedRelay(t, cluster.clusterId, cluster.relayToken, hints);
    await waitFor(() => hints.includes(tableRevision), 'the reconnected relay got the current revision');
  });

  test('no refusal and no log line quotes a bearer', () => {
    const text = JSON.stringify(refusals);
    const logs = t.logs.join('\n');
    assert.ok(refusals.length >= 10);
    assert.equal(text.includes(cluster.bearer), false);
    assert.equal(logs.includes(cluster.bearer), false);
    assert.ok(logs.includes('cluster ingress registration refused'), 'the log was captured');
  });
});
