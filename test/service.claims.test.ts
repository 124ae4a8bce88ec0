import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { createCli } from './cli.fixture.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type {
  IApplyRuntimeLocalStorageClaimRequest,
  IApplyRuntimeLocalStorageClaimResponse,
  IReq_Controller_Pallet_ApplyRuntimeLocalStorageClaim,
} from '../ts/interfaces/requests/runtimesession.js';
import type { IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import type { TServiceVolumeInitialization } from '../ts/interfaces/data/servicevolume.js';
import {
  getRuntimeLocalStorageClaimReference,
  validateRuntimeLocalStorageClaim,
  type IRuntimeLocalStorageClaimRecord,
} from '../ts/interfaces/data/runtimelocalstorageclaim.js';
import { assertFieldProblems } from './helpers/refusals.js';

let t: ITestCloudly;

before(async () => {
  t = await startTestCloudly();
});

after(async () => {
  await t.stop();
});

type TNodeAnswer = (requestArg: IApplyRuntimeLocalStorageClaimRequest) => IApplyRuntimeLocalStorageClaimResponse;

/** A well-behaved node: it accepts every claim and holds it in the state the claim asks for. */
const honestNode: TNodeAnswer = (requestArg) => ({
  status: 'accepted',
  state: requestArg.claim.lifecycle === 'purge' ? 'purged' : requestArg.claim.initialization === 'import' ? 'import-required' : 'ready',
  claim: getRuntimeLocalStorageClaimReference(requestArg.claim),
});

/** Connects a relay that answers claim pushes with `answerArg` and reports node n1's session. */
const connectRelay = async (relayTokenArg: string, received: IApplyRuntimeLocalStorageClaimRequest[], answerArg: { fn: TNodeAnswer }) => {
  const relay = await t.connectRelay(relayTokenArg);
  relay.addHandler<IReq_Controller_Pallet_ApplyRuntimeLocalStorageClaim>('applyRuntimeLocalStorageClaim', async (request) => {
    received.push(request);
    return answerArg.fn(request);
  });
  return relay;
};

const reportSession = (relayArg: CloudlyRelayClient, generationArg = 1) =>
  relayArg.fire('reportRuntimeNodeSession', {
    nodeId: 'n1', session: { id: 'n1-session', generation: generationArg },
  });

const spec = (clusterIdArg: string, overrides: Partial<IServiceWritableSpec> = {}): IServiceWritableSpec => ({
  name: 'db',
  organizationId: 'org1',
  clusterId: clusterIdArg,
  runtime: { image: 'postgres:16', replicas: 1, profile: { runAs: { user: 999, group: 998 } }, placement: { nodeIds: ['n1'] } },
  volumes: [{ mountPath: '/var/lib/postgresql/data', readOnly: false, driver: 'local' }],
  ...overrides,
});

const claimsOf = async (serviceIdArg: string): Promise<IRuntimeLocalStorageClaimRecord[]> =>
  (await t.caller.call('getRuntimeLocalStorageClaims', { serviceId: serviceIdArg })).claims;

const latestOf = async (serviceIdArg: string) => (await claimsOf(serviceIdArg)).at(-1);

const setInitialization = (serviceIdArg: string, initializationArg: TServiceVolumeInitialization) =>
  t.caller.call('setServiceVolumeInitialization', {
    serviceId: serviceIdArg, mountPath: '/var/lib/postgresql/data', expected: null, initialization: initializationArg,
  });

test('a claim is derived, pushed over the relay and the node answer recorded; later generations keep their ownership', async () => {
  const { cluster, relayToken } = await t.createCluster('claims-a');
  await t.addNodes(cluster.id, 'n1');
  const received: IApplyRuntimeLocalStorageClaimRequest[] = [];
  const relay = await connectRelay(relayToken, received, { fn: honestNode });
  await reportSession(relay);
  const service = (await t.caller.call('createService', { service: spec(cluster.id) })).service;
  assert.deepEqual(await claimsOf(service.id), [], 'no claim without an initialization');

  await setInitialization(service.id, { kind: 'empty', ownership: { kind: 'run-as', mode: 0o700 } });
  await waitFor(async () => (await latestOf(service.id))?.delivery === 'answered', 'first generation answered');
  const first = (await latestOf(service.id))!;
  assert.equal(first.nodeState, 'ready');
  assert.equal(first.answerStatus, 'accepted');
  assert.deepEqual(await validateRuntimeLocalStorageClaim(first.claim), []);
  assert.deepEqual(
    {
      generation: first.claim.generation, previous: first.claim.previous, controller: first.claim.controller,
      organizationId: first.claim.organizationId, clusterId: first.claim.clusterId, nodeId: first.claim.nodeId,
      serviceId: first.claim.serviceId, volumeId: first.claim.volumeId, initialization: first.claim.initialization,
      initialOwnership: first.claim.initialOwnership, mount: first.claim.mount, lifecycle: first.claim.lifecycle,
    },
    {
      generation: 1, previous: null, controller: { kind: 'cloudly', id: 'cloudly' },
      organizationId: 'org1', clusterId: cluster.id, nodeId: 'n1',
      serviceId: service.id, volumeId: service.volumes[0].id, initialization: 'empty',
      initialOwnership: { uid: 999, gid: 998, mode: 0o700 }, mount: { mountPath: '/var/lib/postgresql/data', readOnly: false },
      lifecycle: 'bound',
    },
  );
  assert.deepEqual(received.at(-1), { session: { id: 'n1-session', generation: 1 }, claim: first.claim });

  // runAs goes away and the volume turns read-only: the next generation keeps the claim's owner.
  const current = (await t.cloudly.serviceManager.getService(service.id))!;
  await t.caller.call('updateService', {
    serviceId: service.id,
    expectedGeneration: current.generation,
    service: spec(cluster.id, {
      runtime: { ...current.runtime, profile: { runAs: null } },
      volumes: [{ mountPath: '/var/lib/postgresql/data', readOnly: true, driver: 'local' }],
    }),
  });
  await waitFor(async () => {
    const latest = await latestOf(service.id);
    return latest?.claim.generation === 2 && latest.delivery === 'answered';
  }, 'second generation answered');
  const second = (await latestOf(service.id))!;
  assert.deepEqual(second.claim.previous, getRuntimeLocalStorageClaimReference(first.claim));
  assert.deepEqual(second.claim.initialOwnership, { uid: 999, gid: 998, mode: 0o700 });
  assert.deepEqual(second.claim.mount, { mountPath: '/var/lib/postgresql/data', readOnly: true });
  assert.equal(second.claim.id, first.claim.id);

  // The volume is removed: its claim is ordered purged, after the bound generations.
  const again = (await t.cloudly.serviceManager.getService(service.id))!;
  await t.caller.call('updateService', {
    serviceId: service.id, expectedGeneration: again.generation,
    service: spec(cluster.id, { runtime: again.runtime, volumes: [] }),
  });
  await waitFor(async () => (await latestOf(service.id))?.nodeState === 'purged', 'purge answered');
  const purge = (await latestOf(service.id))!;
  assert.equal(purge.claim.lifecycle, 'purge');
  assert.equal(purge.claim.generation, 3);
  assert.deepEqual(purge.claim.previous, getRuntimeLocalStorageClaimReference(second.claim));
  assert.deepEqual((await claimsOf(service.id)).map((record) => record.claim.generation), [1, 2, 3]);
});

test('an answer that does not match the sent claim is rejected and the claim stays pending', async () => {
  const { cluster, relayToken } = await t.createCluster('claims-b');
  await t.addNodes(cluster.id, 'n1');
  const received: IApplyRuntimeLocalStorageClaimRequest[] = [];
  const answer = {
    fn: ((request) => ({
      status: 'accepted',
      state: 'ready',
      claim: { ...getRuntimeLocalStorageClaimReference(request.claim), digest: '0'.repeat(64) },
    })) as TNodeAnswer,
  };
  const relay = await connectRelay(relayToken, received, answer);
  await reportSession(relay);
  const service = (await t.caller.call('createService', { service: spec(cluster.id) })).service;
  await setInitialization(service.id, { kind: 'empty', ownership: { kind: 'explicit', uid: 70, gid: 70, mode: 0o750 } });
  await waitFor(async () => (await latestOf(service.id))?.lastDeliveryError?.startsWith('answer-rejected') === true, 'mismatch recorded');
  const pending = (await latestOf(service.id))!;
  assert.equal(pending.delivery, 'pending');
  assert.equal(pending.nodeState, null);
  assert.ok(received.length >= 1);

  // A state the claim cannot be in is a mismatch too.
  answer.fn = (request) => ({ status: 'accepted', state: 'purged', claim: getRuntimeLocalStorageClaimReference(request.claim) });
  await t.cloudly.serviceManager.pushPendingClaims(cluster.id);
  await waitFor(async () => (await latestOf(service.id))?.lastDeliveryError?.includes('not a state the sent claim can be in') === true, 'state mismatch recorded');
  assert.equal((await latestOf(service.id))?.delivery, 'pending');

  // The node answers honestly the next time: the same claim is now recorded.
  answer.fn = honestNode;
  await t.cloudly.serviceManager.pushPendingClaims(cluster.id);
  await waitFor(async () => (await latestOf(service.id))?.delivery === 'answered', 'answered after an honest answer');
  const answered = (await latestOf(service.id))!;
  assert.equal(answered.delivery, 'answered');
  assert.equal(answered.nodeState, 'ready');
  assert.equal(answered.lastDeliveryError, null);
  assert.deepEqual(answered.claim, pending.claim);
});

test('an offline relay leaves the claim pending; it is applied when the relay connects again', async () => {
  const { cluster, relayToken } = await t.createCluster('claims-c');
  await t.addNodes(cluster.id, 'n1');
  const received: IApplyRuntimeLocalStorageClaimRequest[] = [];
  const first = await connectRelay(relayToken, received, { fn: honestNode });
  await reportSession(first);
  first.close();
  await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).length === 0, 'relay gone');

  const service = (await t.caller.call('createService', { service: spec(cluster.id) })).service;
  await setInitialization(service.id, { kind: 'import', source: { kind: 'docker-volume', volumeName: 'pg_data' } });
  await waitFor(async () => (await latestOf(service.id))?.lastDeliveryError === 'relay-not-connected', 'offline recorded');
  const pending = (await latestOf(service.id))!;
  assert.equal(pending.delivery, 'pending');
  assert.equal(pending.claim.initialization, 'import');
  assert.equal(pending.claim.initialOwnership, null);
  assert.equal(received.length, 0);

  // A restart of Cloudly loses nothing: the claim is stored, still pending.
  await t.restart();
  assert.equal((await latestOf(service.id))?.delivery, 'pending');

  const second = await connectRelay(relayToken, received, { fn: honestNode });
  await reportSession(second, 2);
  await waitFor(async () => (await latestOf(service.id))?.delivery === 'answered', 'applied after reconnect');
  const applied = (await latestOf(service.id))!;
  assert.equal(applied.nodeState, 'import-required');
  assert.deepEqual(applied.claim, pending.claim);
  assert.deepEqual(received.at(-1)?.session, { id: 'n1-session', generation: 2 });
});

test('an uncertain volume is neither purged nor remounted until an administrator releases it', async () => {
  const { cluster, relayToken } = await t.createCluster('claims-e');
  await t.addNodes(cluster.id, 'n1');
  const received: IApplyRuntimeLocalStorageClaimRequest[] = [];
  const answer: { fn: TNodeAnswer } = {
    fn: (request) => ({ status: 'accepted', state: 'uncertain', claim: getRuntimeLocalStorageClaimReference(request.claim) }),
  };
  const relay = await connectRelay(relayToken, received, answer);
  await reportSession(relay);
  const service = (await t.caller.call('createService', { service: spec(cluster.id) })).service;
  await setInitialization(service.id, { kind: 'empty', ownership: { kind: 'explicit', uid: 5, gid: 5, mode: 0o700 } });
  await waitFor(async () => (await latestOf(service.id))?.nodeState === 'uncertain', 'uncertain recorded');
  const held = (await latestOf(service.id))!;
  answer.fn = honestNode;

  // The administrator removes the volume: the uncertain claim is held, no purge goes out.
  const current = (await t.cloudly.serviceManager.getService(service.id))!;
  await t.caller.call('updateService', {
    serviceId: service.id, expectedGeneration: current.generation,
    service: spec(cluster.id, { runtime: current.runtime, volumes: [] }),
  });
  await t.cloudly.serviceManager.rollClaimsForward(service.id);
  await t.cloudly.serviceManager.pushPendingClaims(cluster.id);
  assert.deepEqual((await claimsOf(service.id)).map((record) => [record.claim.generation, record.claim.lifecycle]), [[1, 'bound']]);
  assert.deepEqual(received.map((request) => request.claim.lifecycle), received.map(() => 'bound'), 'no purge was sent');

  // Release refusals name what is wrong and change nothing.
  const release = (claimId: string, generation: number) =>
    t.caller.call('releaseUncertainRuntimeLocalStorageClaim', { claimId, generation });
  assert.equal((await refusalOf(() => release('lsc-none', 1))).code, 'not-found');
  const stale = await refusalOf(() => release(held.claim.id, 2));
  assert.equal(stale.code, 'conflict');
  assert.deepEqual((await claimsOf(service.id)).map((record) => record.claim.generation), [1]);

  // Released: the held purge is issued, pushed and answered.
  const released = await release(held.claim.id, 1);
  assert.deepEqual(released.claim, held);
  await waitFor(async () => (await latestOf(service.id))?.nodeState === 'purged', 'purge answered after release');
  const purge = (await latestOf(service.id))!;
  assert.equal(purge.claim.generation, 2);
  assert.equal(purge.claim.lifecycle, 'purge');
  assert.deepEqual(purge.claim.previous, getRuntimeLocalStorageClaimReference(held.claim));
  assert.equal((await refusalOf(() => release(held.claim.id, 1))).code, 'conflict', 'a generation is released once');
});

test('a node holding a newer claim generation than Cloudly issued is flagged: the record, the status and the audit log name it, the verdict waits on conflict, a warning is logged, pushes stop, and an administrator supersedes it', async () => {
  const { cluster, relayToken } = await t.createCluster('claims-h');
  await t.addNodes(cluster.id, 'n1');
  const received: IApplyRuntimeLocalStorageClaimRequest[] = [];
  const nodeHolds = (request: IApplyRuntimeLocalStorageClaimRequest) => ({ id: request.claim.id, generation: 5, digest: 'ab'.repeat(32) });
  const answer: { fn: TNodeAnswer } = {
    fn: (request) => ({ status: 'historical', state: 'ready', claim: nodeHolds(request) }),
  };
  const relay = await connectRelay(relayToken, received, answer);
  await reportSession(relay);
  const service = (await t.caller.call('createService', { service: spec(cluster.id) })).service;
  await setInitialization(service.id, { kind: 'empty', ownership: { kind: 'explicit', uid: 5, gid: 5, mode: 0o700 } });
  await waitFor(async () => (await latestOf(service.id))?.answerStatus === 'historical', 'historical answer recorded');
  const held = (await latestOf(service.id))!;
  assert.equal(held.claim.generation, 1);
  assert.deepEqual(held.nodeClaim, { id: held.claim.id, generation: 5, digest: 'ab'.repeat(32) });
  // The record is Cloudly's generation 1, answered; its nodeState is what the node said of its own generation 5.
  assert.deepEqual([held.delivery, held.nodeState, held.lastDeliveryError], ['answered', 'ready', null]);

  // Operator-visible: the verdict, the status naming which claim it stands for, and a warning naming the way out.
  const statusOf = () => t.caller.call('getServiceRuntimeStatus', { serviceId: service.id });
  const verdict = async () => (await statusOf()).status;
  await waitFor(async () => (await verdict()).reason === 'conflict', 'the verdict waits on conflict', 10_000);
  assert.equal((await verdict()).state, 'waiting');
  assert.deepEqual((await statusOf()).historicalClaims, [{
    claimId: held.claim.id, nodeId: 'n1', mountPath: '/var/lib/postgresql/data', generation: 1,
    nodeClaim: { id: held.claim.id, generation: 5, digest: 'ab'.repeat(32) }, answeredAt: held.answeredAt,
  }]);
  assert.ok(t.logs.some((line) => line.includes('node holds a newer local storage claim generation') && line.includes(held.claim.id)), 'a warning names the claim');
  const cli = await createCli();
  try {
    await cli.login(t);
    const printed = await cli.run(['services', 'status', '--service', service.id]);
    assert.equal(printed.code, 0, printed.stderr);
    const table = printed.stdout.slice(printed.stdout.indexOf('claims held historical'));
    assert.ok(table.startsWith('claims held historical'), printed.stdout);
    assert.match(table, new RegExp(`${held.claim.id}\\s+n1\\s+1\\s+5`), 'the CLI names the claim, its node, the issued and the node\'s generation');
  } finally {
    await cli.dispose();
  }
  // Audited: the write that recorded the answer is Cloudly's, under the call whose answer it records.
  const answerEvents = async () => (await t.caller.call('getAuditEvents', {
    filter: { targetId: held.claim.id, method: 'applyRuntimeLocalStorageClaim' },
  })).events;
  await waitFor(async () => (await answerEvents()).length > 0, 'the answer\'s write is in the audit log');
  assert.deepEqual((await answerEvents()).map((event) => [event.actor.kind, event.target.kind, event.outcome]),
    [['cloudly', 'CloudlyRuntimeLocalStorageClaim', 'updated']]);

  // Nothing more is pushed for the claim, whatever triggers a push.
  const pushedBefore = received.length;
  await t.cloudly.serviceManager.rollClaimsForward(service.id);
  await t.cloudly.serviceManager.pushPendingClaims(cluster.id);
  assert.equal(received.length, pushedBefore);

  // The way out, refused when it names the wrong thing.
  const supersede = (claimId: string, generation: number) =>
    t.caller.call('supersedeHistoricalRuntimeLocalStorageClaim', { claimId, generation });
  assert.equal((await refusalOf(() => supersede('lsc-none', 1))).code, 'not-found');
  assert.equal((await refusalOf(() => supersede(held.claim.id, 2))).code, 'conflict');

  // Superseded: Cloudly's claim is issued as generation 6, chained to the node's generation 5, and pushed.
  answer.fn = honestNode;
  const superseded = await supersede(held.claim.id, 1);
  assert.equal(superseded.claim.claim.generation, 6);
  assert.deepEqual(superseded.claim.claim.previous, { id: held.claim.id, generation: 5, digest: 'ab'.repeat(32) });
  assert.deepEqual(await validateRuntimeLocalStorageClaim(superseded.claim.claim), []);
  await waitFor(async () => (await latestOf(service.id))?.answerStatus === 'accepted', 'the superseding generation answered');
  assert.equal(received.at(-1)?.claim.generation, 6);
  await waitFor(async () => (await verdict()).reason !== 'conflict', 'the verdict leaves conflict', 10_000);
  assert.deepEqual((await statusOf()).historicalClaims, [], 'no claim is held historical any more');
  assert.equal((await refusalOf(() => supersede(held.claim.id, 1))).code, 'conflict', 'a historical generation is superseded once');
});

test('a relay may not report sessions of another shape', async () => {
  const { relayToken } = await t.createCluster('claims-d');
  const relay = await t.connectRelay(relayToken);
  await assert.rejects(
    relay.fire('reportRuntimeNodeSession', {
      nodeId: 'n1', session: { id: '', generation: 0 },
    }),
    (error: { errorData?: { code?: string; reasons?: string[] } }) => {
      assert.equal(error.errorData?.code, 'invalid-request');
      assertFieldProblems((error.errorData ?? {}) as Record<string, unknown>, [
        ['request.session.id', 'field-invalid', "must be an id of 1-128 letters, digits, '.', '_' or '-' starting with a letter or digit"],
        ['request.session.generation', 'field-invalid', 'must be a positive integer'],
      ]);
      return true;
    },
  );
});
