import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { armFailpoint } from '../ts/core/failpoints.js';
import { designationRequest, prepareIngressCluster, relayOrigin, type IIngressCluster } from './ingress.fixture.js';
import { data } from '../ts/interfaces/index.js';
import type { IReq_Any_Cloudly_DesignateClusterIngress } from '../ts/interfaces/requests/ingress.js';
import { clusterIngressSlotKind, type IClusterIngressSlotDocument } from '../ts/manager.ingress/documents.js';
import { ingressBearerContext } from '../ts/manager.ingress/ingress.manager.js';
import { assertFieldProblems } from './helpers/refusals.js';

describe('designateClusterIngress and getClusterIngressDesignation', () => {
  let t: ITestCloudly;
  /** Every answer and refusal seen, to prove no bearer ever left the server. */
  const seen: unknown[] = [];

  before(async () => {
    t = await startTestCloudly();
  });
  after(async () => {
    await t.stop();
  });

  const designate = async (requestArg: data.IClusterIngressDesignationRequest) => {
    const answer = await t.caller.call('designateClusterIngress', { designation: requestArg });
    seen.push(answer);
    return answer;
  };
  const refusedDesignation = async (requestArg: unknown) => {
    const refusal = await refusalOf(() => t.caller.call(
      'designateClusterIngress', { designation: requestArg as data.IClusterIngressDesignationRequest }));
    seen.push(refusal);
    return refusal;
  };
  const current = async (clusterIdArg: string) => {
    const answer = await t.caller.call('getClusterIngressDesignation', { clusterId: clusterIdArg });
    seen.push(answer);
    return answer.designation;
  };
  /** The stored bearer, decrypted as Cloudly does; it is stored only encrypted. */
  const decryptBearer = (slotArg: IClusterIngressSlotDocument): string | undefined => {
    const bearer = slotArg.bearer;
    assert.equal(bearer?.value, undefined, 'no bearer is stored in clear');
    return bearer?.encryptedValue
      ? t.cloudly.secrets.decryptText(bearer.encryptedValue, ingressBearerContext(slotArg.clusterId, bearer.secretVersionId))
      : undefined;
  };
  const storedBearer = async (clusterIdArg: string) => {
    const slot = await t.cloudly.store.get(clusterIngressSlotKind, clusterIdArg);
    return slot ? decryptBearer(slot) : undefined;
  };

  test('a cluster without a designation answers null', async () => {
    const cluster = await prepareIngressCluster(t, 'empty');
    assert.equal(await current(cluster.clusterId), null);
    const missing = await refusalOf(() => t.caller.call(
      'getClusterIngressDesignation', { clusterId: 'cluster-missing' }));
    assert.equal(missing.code, 'not-found');
  });

  test('creation seals a valid designation and prepares the spec with the three environment names', async () => {
    const cluster = await prepareIngressCluster(t, 'create');
    const request = designationRequest(cluster);
    const { designation, spec, replayed } = await designate(request);
    assert.equal(replayed, false);
    assert.deepEqual(await data.validateClusterIngressDesignation(designation), []);
    assert.equal(designation.id, cluster.clusterId);
    assert.equal(designation.generation, 1);
    assert.equal(designation.previous, null);
    assert.deepEqual(designation.runtime, cluster.runtime);
    assert.equal(designation.ingressServiceId, cluster.service.id);
    assert.equal(designation.preparedSpecRevision, cluster.service.specRevision);
    assert.equal(designation.actorId, t.identity.userId);
    assert.equal(designation.credential.generation, 1);

    assert.equal(spec.serviceId, cluster.service.id);
    assert.equal(spec.specRevision, cluster.service.specRevision);
    assert.deepEqual(spec.runtime, cluster.service.runtime);
    assert.deepEqual(spec.nodes.map((node) => node.nodeId), ['node-1', 'node-2']);
    for (const node of spec.nodes) {
      assert.deepEqual(node.environment, {
        SERVEZONE_CLUSTER_INGRESS_BEARER: { secret: designation.credential.secretVersion },
        SERVEZONE_CLUSTER_RELAY_ORIGIN: { value: relayOrigin },
        SERVEZONE_CLUSTER_NODE_ID: { value: node.nodeId },
      });
    }
    assert.deepEqual(await current(cluster.clusterId), designation);
    const bearer = await storedBearer(cluster.clusterId);
    assert.ok(bearer && bearer.length >= 43, 'a 256-bit bearer is stored server-side');
  });

  test('rotation names the exact current designation and mints a new credential generation', async () => {
    const cluster = await prepareIngressCluster(t, 'rotate');
    const first = (await designate(designationRequest(cluster))).designation;
    const firstBearer = await storedBearer(cluster.clusterId);
    const reference = data.referenceClusterIngressDesignation(first);
    const second = (await designate(designationRequest(cluster, { expectedDesignation: reference }))).designation;
    assert.deepEqual(await data.validateClusterIngressDesignation(second), []);
    assert.equal(second.generation, 2);
    assert.deepEqual(second.previous, reference);
    assert.equal(second.credential.generation, 2);
    assert.equal(second.credential.credentialId, first.credential.credentialId);
    assert.notEqual(second.credential.secretVersion.secretVersionId, first.credential.secretVersion.secretVersionId);
    assert.notEqual(await storedBearer(cluster.clusterId), firstBearer);

    // The superseded reference, and null, are both stale now.
    for (const expectedDesignation of [reference, null]) {
      const refusal = await refusedDesignation(designationRequest(cluster, { expectedDesignation }));
      assert.equal(refusal.code, 'conflict');
    }
    assert.deepEqual(await current(cluster.clusterId), second);
  });

  test('a stale runtime or spec revision is a conflict and stores nothing', async () => {
    const cluster = await prepareIngressCluster(t, 'stale');
    const staleRuntime = await refusedDesignation(designationRequest(cluster, {
      currentRuntime: { ...cluster.runtime, generation: cluster.runtime.generation + 1 },
    }));
    assert.equal(staleRuntime.code, 'conflict');
    assert.deepEqual(staleRuntime.reasons, ['runtime-changed']);
    assert.deepEqual((staleRuntime.causes as Array<{ path?: string }>).map((causeArg) => causeArg.path), ['request.designation.currentRuntime']);

    const moved = await t.cloudly.ingressManager.changeClusterRuntimePhase(cluster.clusterId, cluster.runtime.generation, 'pallet');
    assert.equal(moved?.generation, cluster.runtime.generation + 1);
    assert.equal((await refusedDesignation(designationRequest(cluster))).code, 'conflict');

    const fresh = { ...cluster, runtime: moved as IIngressCluster['runtime'] };
    const staleSpec = await refusedDesignation(designationRequest(fresh, { expectedSpecRevision: cluster.service.specRevision + 1 }));
    assert.equal(staleSpec.code, 'conflict');
    assert.deepEqual(staleSpec.reasons, ['spec-revision-changed']);
    assert.deepEqual((staleSpec.causes as Array<{ path?: string }>).map((causeArg) => causeArg.path), ['request.designation.expectedSpecRevision']);
    const { service: updated } = await t.caller.call('updateService', {
      serviceId: cluster.service.id,
      expectedGeneration: cluster.service.generation,
      service: {
        name: cluster.service.name, organizationId: cluster.service.organizationId, clusterId: cluster.clusterId,
        runtime: { ...cluster.service.runtime, image: 'registry.example.com/serve.zone/ingress:2' }, volumes: [],
      },
    });
    assert.ok(updated.specRevision > cluster.service.specRevision);
    assert.equal((await refusedDesignation(designationRequest(fresh))).code, 'conflict');

    assert.equal(await current(cluster.clusterId), null);
    const slot = await t.cloudly.store.get(clusterIngressSlotKind, cluster.clusterId);
    assert.deepEqual([slot?.kind, slot?.designation, slot?.bearer], ['none', null, null], 'refusals stored nothing');
    const accepted = await designate(designationRequest(fresh, { expectedSpecRevision: updated.specRevision }));
    assert.equal(accepted.designation.preparedSpecRevision, updated.specRevision);
  });

  test('a runtime change that lands while the designation is decided makes it lose: conflict, nothing stored', async () => {
    const cluster = await prepareIngressCluster(t, 'runtime-race');
    const manager = t.cloudly.ingressManager;
    // After the runtime was checked and before the designation is written, a migration step moves
    // the cluster's runtime on.
    let release!: () => void;
    const point = armFailpoint('ingress.designation.beforeServiceRead', { kind: 'pause', until: new Promise<void>((resolve) => { release = resolve; }) }, { times: 1 });
    try {
      const refused = refusedDesignation(designationRequest(cluster));
      await waitFor(async () => point.hits() === 1, 'the designation reached the service read');
      assert.ok(await manager.changeClusterRuntimePhase(cluster.clusterId, cluster.runtime.generation, 'cutover'));
      release();
      assert.equal((await refused).code, 'conflict');
    } finally {
      release();
      point.disarm();
    }
    assert.equal(await current(cluster.clusterId), null);
    const slot = await t.cloudly.store.get(clusterIngressSlotKind, cluster.clusterId);
    assert.deepEqual([slot?.kind, slot?.bearer, slot?.runtime.phase], ['none', null, 'cutover']);
    const moved = await manager.readClusterRuntime(cluster.clusterId);
    assert.deepEqual(moved, { id: cluster.clusterId, phase: 'cutover', generation: cluster.runtime.generation + 1 });
    const notPallet = await refusedDesignation(designationRequest(cluster, {
      currentRuntime: { id: cluster.clusterId, phase: 'pallet', generation: moved.generation },
    }));
    assert.equal(notPallet.code, 'conflict', 'a cluster that is not on Pallet takes no Pallet designation');
  });

  test('a cluster whose relay never registered is unavailable: its relay origin is unknown', async () => {
    const { cluster } = await t.createCluster('no-relay');
    await t.addNodes(cluster.id, 'node-1');
    const { service } = await t.caller.call('createService', {
      service: {
        name: 'no-relay-ingress', organizationId: 'org-1', clusterId: cluster.id,
        runtime: { image: 'registry.example.com/serve.zone/ingress:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
        volumes: [],
      },
    });
    const runtime = await t.cloudly.ingressManager.readClusterRuntime(cluster.id);
    const refusal = await refusedDesignation({
      mutationId: 'no-relay-1', clusterId: cluster.id, ingressServiceId: service.id,
      currentRuntime: runtime, expectedSpecRevision: service.specRevision, expectedDesignation: null,
    });
    assert.equal(refusal.code, 'unavailable');
    assert.equal(await current(cluster.id), null);
  });

  test('bad requests are refused with every reason; unknown cluster or service is not-found', async () => {
    const cluster = await prepareIngressCluster(t, 'invalid');
    const invalid = await refusedDesignation({
      mutationId: '', clusterId: cluster.clusterId, ingressServiceId: cluster.service.id,
      currentRuntime: { ...cluster.runtime, phase: 'swarm' }, expectedSpecRevision: -1, expectedDesignation: 'x', extra: 1,
    });
    assert.equal(invalid.code, 'invalid-request');
    assertFieldProblems(invalid, [
      ['request.designation.extra', 'field-unknown', 'is not a member of a designation request'],
      ['request.designation.mutationId', 'field-invalid', 'must be an id'],
      ['request.designation.currentRuntime', 'field-invalid'],
      ['request.designation.expectedSpecRevision', 'field-invalid', 'must be a non-negative integer'],
      ['request.designation.expectedDesignation', 'field-invalid', 'must be null or { id, generation, digest }'],
    ]);
    const unknownCluster = await refusedDesignation(designationRequest(cluster, {
      clusterId: 'cluster-unknown', currentRuntime: { id: 'cluster-unknown', phase: 'pallet', generation: 1 },
    }));
    assert.equal(unknownCluster.code, 'not-found');
    assert.equal((await refusedDesignation(designationRequest(cluster, { ingressServiceId: 'svc-unknown' }))).code, 'not-found');
    const other = await prepareIngressCluster(t, 'other');
    assert.equal((await refusedDesignation(designationRequest(cluster, { ingressServiceId: other.service.id }))).code, 'not-found');
    assert.equal(await current(cluster.clusterId), null);
  });

  test('50 concurrent creations with the same expectation: exactly one is accepted', async () => {
    const cluster = await prepareIngressCluster(t, 'race');
    const outcomes = await Promise.allSettled(Array.from({ length: 50 }, () => designate(designationRequest(cluster))));
    const accepted = outcomes.filter((outcome) => outcome.status === 'fulfilled');
    assert.equal(accepted.length, 1);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') {
        const errorData = (outcome.reason as { errorData?: { code?: string } }).errorData;
        seen.push(errorData);
        assert.equal(errorData?.code, 'conflict');
      }
    }
    const winner = (accepted[0] as PromiseFulfilledResult<IReq_Any_Cloudly_DesignateClusterIngress['response']>).value;
    assert.deepEqual(await current(cluster.clusterId), winner.designation);
  });

  test('the same mutationId replays the stored answer, also after a restart', async () => {
    const cluster = await prepareIngressCluster(t, 'replay');
    const request = designationRequest(cluster);
    const first = await designate(request);
    const again = await designate(request);
    assert.equal(again.replayed, true);
    assert.deepEqual({ ...again, replayed: false }, first);

    await t.restart();
    const afterRestart = await designate(request);
    assert.equal(afterRestart.replayed, true);
    assert.deepEqual(afterRestart.designation, first.designation);
    assert.deepEqual(afterRestart.spec, first.spec);
    assert.equal((await current(cluster.clusterId))?.generation, 1, 'a replay stores nothing new');

    const reused = await refusedDesignation({ ...request, expectedSpecRevision: request.expectedSpecRevision + 1 });
    assert.equal(reused.code, 'invalid-request');
    assert.deepEqual(reused.reasons, ['mutation-id-reused']);
    assert.deepEqual(reused.causes, [{ path: 'request.designation.mutationId', message: 'was already used for a different request' }]);
  });

  test('a cluster holding a fleet-cutover designation is refused, and the reverse', async () => {
    const cutover = await prepareIngressCluster(t, 'cutover');
    assert.ok(await t.cloudly.ingressManager.recordFleetCutoverIngressDesignation(cutover.clusterId, cutover.service.id));
    const refusal = await refusedDesignation(designationRequest(cutover));
    assert.equal(refusal.code, 'conflict');
    assert.equal(refusal.retryable, false);
    assert.deepEqual(refusal.reasons, ['fleet-cutover-designated']);
    assert.equal(await current(cutover.clusterId), null);

    const pallet = await prepareIngressCluster(t, 'pallet');
    await designate(designationRequest(pallet));
    assert.equal(await t.cloudly.ingressManager.recordFleetCutoverIngressDesignation(pallet.clusterId, pallet.service.id), null);
  });

  test('the bearer never appears in an answer, a refusal or a log line', async () => {
    const slots = await t.cloudly.store.find(clusterIngressSlotKind, {});
    const bearers = slots.map((slot) => decryptBearer(slot)).filter((value): value is string => typeof value === 'string');
    assert.ok(bearers.length >= 5, 'several bearers were minted by the tests above');
    const answers = JSON.stringify(seen);
    const logs = t.logs.join('\n');
    for (const bearer of bearers) {
      assert.equal(answers.includes(bearer), false);
      assert.equal(logs.includes(bearer), false);
    }
    assert.ok(t.logs.some((line) => line.includes('cluster ingress designated')), 'the log was captured');
  });
});
