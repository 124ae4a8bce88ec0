import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type {
  IReq_Any_Cloudly_UpsertPlatformBinding,
  IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources,
  IReq_Relay_Cloudly_UpdatePlatformBindingStatus,
} from '../ts/interfaces/requests/corestore.js';
import type { IPlatformBinding } from '../ts/interfaces/data/index.js';
import { assertFieldProblems } from './helpers/refusals.js';

/**
 * Platform bindings: the administrator's upsert (server-managed fields refused, compare-and-swap
 * on the generation) and the relay's status reports (reasons paired with their status, cleared by
 * a report without one, only for bindings on the relay's own cluster).
 */

let t: ITestCloudly;
let clusterId: string;
let relay: CloudlyRelayClient;
let otherRelay: CloudlyRelayClient;
/** Real service ids by the name each test knows its service under. */
const ids: Record<string, string> = {};

const upsert = (platformBindingArg: Record<string, unknown>, expectedGenerationArg: number | null) =>
  t.caller.call('upsertPlatformBinding', {
    platformBinding: platformBindingArg as unknown as IReq_Any_Cloudly_UpsertPlatformBinding['request']['platformBinding'],
    expectedGeneration: expectedGenerationArg,
  });

const report = (relayArg: CloudlyRelayClient, requestArg: Record<string, unknown>) =>
  relayArg.fire(
    'updatePlatformBindingStatus',
    requestArg as unknown as IReq_Relay_Cloudly_UpdatePlatformBindingStatus['request'],
  );

const stored = async (serviceIdArg: string): Promise<IPlatformBinding[]> =>
  (await t.caller.call('getPlatformBindings', { serviceId: serviceIdArg })).platformBindings;

describe('platform bindings', () => {
  before(async () => {
    t = await startTestCloudly();
    const created = await t.createCluster('bindings-cluster');
    const other = await t.createCluster('bindings-other');
    clusterId = created.cluster.id;
    await t.caller.call('addClusterNode', { clusterId, name: 'node-a', nodeId: 'node-a' });
    await t.caller.call('addClusterNode', { clusterId: other.cluster.id, name: 'node-b', nodeId: 'node-b' });
    for (const name of ['svc-1', 'svc-2', 'svc-3', 'svc-adopted', 'svc-race']) {
      ids[name] = (await t.caller.call('createService', {
        service: {
          name,
          organizationId: 'org1',
          clusterId,
          runtime: { image: `${name}:1`, replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-a'] } },
          volumes: [],
        },
      })).service.id;
    }
    relay = await t.connectRelay(created.relayToken);
    otherRelay = await t.connectRelay(other.relayToken);
    await waitFor(() => t.cloudly.relays.activeSession(clusterId) !== null && t.cloudly.relays.activeSession(other.cluster.id) !== null, 'relays');
  });
  after(async () => { await t.stop(); });

  test('upsert refuses objectstorageBucketName, corestoreLegacyAdoption and statusReason, by name', async () => {
    const refusal = await refusalOf(() => upsert({
      serviceId: ids['svc-1'],
      capability: 'objectstorage',
      enabled: true,
      nodeId: 'node-a',
      objectstorageBucketName: 'legacy-bucket',
      corestoreLegacyAdoption: { nodeId: 'node-a', resourceName: 'legacy-bucket', inventorySha256: 'a'.repeat(64) },
      statusReason: 'legacy-adoption-pending',
    }, null));
    assert.equal(refusal.code, 'invalid-request');
    assertFieldProblems(refusal, [
      ['request.platformBinding.objectstorageBucketName', 'field-invalid', 'is server-managed and cannot be written'],
      ['request.platformBinding.corestoreLegacyAdoption', 'field-invalid', 'is server-managed and cannot be written'],
      ['request.platformBinding.statusReason', 'field-invalid', 'is server-managed and cannot be written'],
    ]);
    assert.deepEqual(await stored(ids['svc-1']), []);
  });

  test('upsert creates once, then changes only at the generation the caller read', async () => {
    const created = await upsert({
      serviceId: ids['svc-1'], capability: 'objectstorage', enabled: false, nodeId: 'node-a',
      objectstorageRetention: { intent: { mode: 'compliance', days: 7 } },
    }, null);
    assert.equal(created.platformBinding.generation, 1);
    assert.equal(created.platformBinding.status, 'pending');
    assert.equal(Object.hasOwn(created.platformBinding, 'objectstorageBucketName'), false);

    const again = await refusalOf(() => upsert({ serviceId: ids['svc-1'], capability: 'objectstorage', enabled: true, nodeId: 'node-a' }, null));
    assert.equal(again.code, 'conflict');

    const changed = await upsert({ serviceId: ids['svc-1'], capability: 'objectstorage', enabled: true, nodeId: 'node-a' }, 1);
    assert.equal(changed.platformBinding.generation, 2);
    assert.equal(changed.platformBinding.enabled, true);
    assert.equal(Object.hasOwn(changed.platformBinding, 'objectstorageRetention'), false, 'an upsert without retention removes it');

    const stale = await refusalOf(() => upsert({ serviceId: ids['svc-1'], capability: 'objectstorage', enabled: false, nodeId: 'node-a' }, 1));
    assert.equal(stale.code, 'conflict');
    assert.deepEqual((await stored(ids['svc-1'])).map((binding) => [binding.generation, binding.enabled]), [[2, true]]);
  });

  test('racing first upserts of one service capability create exactly one binding', async () => {
    const outcomes = await Promise.allSettled(Array.from({ length: 8 }, (_, index) =>
      upsert({ serviceId: ids['svc-race'], capability: 'database', enabled: index % 2 === 0, nodeId: 'node-a' }, null)));
    assert.equal(outcomes.filter((outcome) => outcome.status === 'fulfilled').length, 1);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') {
        assert.equal((outcome.reason as { errorData?: { code?: string } }).errorData?.code, 'conflict');
      }
    }
    assert.equal((await stored(ids['svc-race'])).length, 1);
  });

  test('upsert names an unknown service or node as not found', async () => {
    assert.equal((await refusalOf(() => upsert({ serviceId: 'svc-nope', capability: 'database', enabled: true, nodeId: null }, null))).code, 'not-found');
    assert.equal((await refusalOf(() => upsert({ serviceId: ids['svc-2'], capability: 'database', enabled: true, nodeId: 'node-nope' }, null))).code, 'not-found');
    const foreignNode = await refusalOf(() => upsert({ serviceId: ids['svc-2'], capability: 'database', enabled: true, nodeId: 'node-b' }, null));
    assert.equal(foreignNode.code, 'not-found', 'a node of another cluster is not a node of the service');
  });

  test('the relay reports a status with its paired reason, and a report without one clears it', async () => {
    const { platformBinding } = await upsert({ serviceId: ids['svc-2'], capability: 'database', enabled: true, nodeId: 'node-a' }, null);
    const pending = await report(relay, { platformBindingId: platformBinding.id, status: 'provisioning', statusReason: 'legacy-adoption-pending' });
    assert.equal(pending.platformBinding.statusReason, 'legacy-adoption-pending');
    assert.equal(pending.platformBinding.generation, 2);
    assert.equal(await t.cloudly.corestoreManager.isLegacyAdoptionPending(ids['svc-2']), true);
    // The relay's report is an input of the verdict: the reconciler judges it again, the read only reads.
    const { status: waiting } = await t.caller.call('getServiceRuntimeStatus', { serviceId: ids['svc-2'] });
    assert.deepEqual([waiting.state, waiting.reason], ['waiting', 'legacy-adoption-pending'], 'the service waits on the adoption, not on bindings');

    const mismatched = await refusalOf(() => report(relay, { platformBindingId: platformBinding.id, status: 'ready', statusReason: 'legacy-adoption-mismatch' }));
    assert.equal(mismatched.code, 'invalid-request');
    assertFieldProblems(mismatched, [
      ['request.statusReason', 'field-invalid', 'legacy-adoption-mismatch is only reported with status failed'],
    ]);

    const failed = await report(relay, { platformBindingId: platformBinding.id, status: 'failed', statusReason: 'legacy-adoption-conflict' });
    assert.equal(failed.platformBinding.statusReason, 'legacy-adoption-conflict');

    const ready = await report(relay, { platformBindingId: platformBinding.id, status: 'ready' });
    assert.equal(ready.platformBinding.status, 'ready');
    assert.equal(ready.platformBinding.statusReason, null);
    assert.equal(await t.cloudly.corestoreManager.isLegacyAdoptionPending(ids['svc-2']), false);
    assert.deepEqual((await stored(ids['svc-2'])).map((binding) => [binding.status, binding.statusReason]), [['ready', null]]);
  });

  test('a relay may not report on a binding placed on another cluster, nor on an unknown one', async () => {
    const { platformBinding } = await upsert({ serviceId: ids['svc-3'], capability: 'database', enabled: true, nodeId: 'node-a' }, null);
    const foreign = await refusalOf(() => report(otherRelay, { platformBindingId: platformBinding.id, status: 'ready' }));
    assert.equal(foreign.code, 'forbidden');
    assert.deepEqual((await stored(ids['svc-3'])).map((binding) => binding.status), ['pending']);
    const unknown = await refusalOf(() => report(relay, { platformBindingId: 'pb-unknown', status: 'ready' }));
    assert.equal(unknown.code, 'not-found');
  });

  test('status reports are served only on a relay socket', async () => {
    const refusal = await refusalOf(() => t.caller.call(
      'updatePlatformBindingStatus', { platformBindingId: 'pb-x', status: 'ready' },
    ));
    assert.equal(refusal.code, 'forbidden');
  });

  test('an adopting binding keeps its node and retention through upserts', async () => {
    relay.addHandler<IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources>('getClusterCorestoreLegacyResources', async ({ nodeId }) => ({
      reachable: true,
      nodeId,
      readAt: Date.now(),
      services: [{
        serviceId: ids['svc-adopted'],
        resources: [{ capability: 'objectstorage', bucketName: 'adopted-bucket', retention: { mode: 'governance', days: 3 }, adoption: { state: 'unadopted', blocker: null } }],
      }],
    }));
    const { inventorySha256 } = await t.caller.call('getCorestoreLegacyResources', { clusterId, nodeId: 'node-a' });
    const adopted = await t.caller.call('adoptCorestoreLegacyResources', {
      clusterId, nodeId: 'node-a', expectedInventorySha256: inventorySha256!, resources: [{ serviceId: ids['svc-adopted'], capability: 'objectstorage' }],
    });
    const binding = adopted.platformBindings[0];
    const moved = await refusalOf(() => upsert({
      serviceId: ids['svc-adopted'], capability: 'objectstorage', enabled: true, nodeId: null,
    }, binding.generation));
    assertFieldProblems(moved, [
      ['request.platformBinding.nodeId', 'field-invalid', 'must stay node-a: the binding adopts a legacy resource there'],
      ['request.platformBinding.objectstorageRetention', 'field-invalid', 'must stay as adopted from the legacy bucket'],
    ]);
    const disabled = await upsert({
      serviceId: ids['svc-adopted'], capability: 'objectstorage', enabled: false, nodeId: 'node-a',
      objectstorageRetention: { intent: { mode: 'governance', days: 3 } },
    }, binding.generation);
    assert.equal(disabled.platformBinding.enabled, false);
    assert.equal(disabled.platformBinding.objectstorageBucketName, 'adopted-bucket');
    assert.deepEqual(disabled.platformBinding.corestoreLegacyAdoption, binding.corestoreLegacyAdoption);
  });
});
