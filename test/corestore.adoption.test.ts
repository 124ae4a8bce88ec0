import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import { platformBindingCreationLedgerKind, platformBindingKind } from '../ts/manager.corestore/corestore.manager.js';
import { derivePlatformBindingId } from '../ts/manager.corestore/adoption.js';
import { armFailpoint } from '../ts/core/failpoints.js';
import type {
  ICorestoreLegacyResourceInventoryService,
  IPlatformBinding,
} from '../ts/interfaces/data/index.js';
import type {
  IReq_Any_Cloudly_AdoptCorestoreLegacyResources,
  IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources,
} from '../ts/interfaces/requests/corestore.js';
import { assertFieldProblems } from './helpers/refusals.js';

/**
 * Adoption of Corestore legacy resources against a real Cloudly, a real relay client answering
 * inventories over its socket, and the embedded database.
 */

interface IWorld {
  clusterId: string;
  otherClusterId: string;
  relay: CloudlyRelayClient;
  relayToken: string;
  /** What each node's Corestore answers; a node missing here is unreachable. */
  corestores: Map<string, ICorestoreLegacyResourceInventoryService[]>;
}

let t: ITestCloudly;
let world: IWorld;
/** Real service ids by the name each test knows its service under. */
const ids: Record<string, string> = {};

const addNode = (clusterIdArg: string, nodeIdArg: string) =>
  t.caller.call('addClusterNode', { clusterId: clusterIdArg, name: nodeIdArg, nodeId: nodeIdArg });

/** A real service in Cloudly; its id is Cloudly's own. */
const createService = async (nameArg: string, clusterIdArg = world.clusterId): Promise<string> =>
  (await t.caller.call('createService', {
    service: {
      name: nameArg,
      organizationId: 'org1',
      clusterId: clusterIdArg,
      runtime: { image: `${nameArg}:1`, replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
      volumes: [],
    },
  })).service.id;

const createServices = async (countArg: number, prefixArg: string): Promise<string[]> => {
  const ids: string[] = [];
  for (let index = 0; index < countArg; index++) {
    ids.push(await createService(`${prefixArg}-${index}`));
  }
  return ids.sort();
};

const connectRelay = async (relayTokenArg: string, clusterIdArg: string) => {
  const relay = await t.connectRelay(relayTokenArg);
  relay.addHandler<IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources>('getClusterCorestoreLegacyResources', async ({ nodeId }) => {
    const services = world.corestores.get(nodeId);
    const readAt = Date.now();
    if (!services) {
      return { reachable: false, nodeId, readAt, errorCode: 'CORESTORE_UNREACHABLE' };
    }
    return { reachable: true, nodeId, readAt, services: structuredClone(services) };
  });
  await waitFor(() => t.cloudly.relays.activeSession(clusterIdArg) !== null, 'relay session');
  return relay;
};

/** A service with a database and a bucket on one node, nothing blocking. */
const legacyService = (serviceIdArg: string, retentionDaysArg: number | null = 14): ICorestoreLegacyResourceInventoryService => ({
  serviceId: serviceIdArg,
  resources: [
    { capability: 'database', databaseName: `${serviceIdArg}_db`, adoption: { state: 'unadopted', blocker: null } },
    {
      capability: 'objectstorage',
      bucketName: `${serviceIdArg}-bucket`,
      retention: retentionDaysArg === null ? null : { mode: 'governance', days: retentionDaysArg },
      adoption: { state: 'unadopted', blocker: null },
    },
  ],
});

/** Puts services on a node's Corestore, sorted by id as Corestore lists them. */
const placeServices = (nodeIdArg: string, servicesArg: ICorestoreLegacyResourceInventoryService[]) => {
  const list = [...(world.corestores.get(nodeIdArg) ?? []), ...servicesArg]
    .sort((left, right) => (left.serviceId < right.serviceId ? -1 : 1));
  world.corestores.set(nodeIdArg, list);
};

const readInventory = (nodeIdArg: string, clusterIdArg = world.clusterId) =>
  t.caller.call('getCorestoreLegacyResources', { clusterId: clusterIdArg, nodeId: nodeIdArg });

const adopt = (
  nodeIdArg: string,
  shaArg: string,
  resourcesArg: IReq_Any_Cloudly_AdoptCorestoreLegacyResources['request']['resources'],
  clusterIdArg = world.clusterId,
) =>
  t.caller.call('adoptCorestoreLegacyResources', {
    clusterId: clusterIdArg,
    nodeId: nodeIdArg,
    expectedInventorySha256: shaArg,
    resources: resourcesArg,
  });

const bindingsOf = async (serviceIdArg: string): Promise<IPlatformBinding[]> =>
  (await t.caller.call('getPlatformBindings', { serviceId: serviceIdArg })).platformBindings;

/** Counts stored bindings straight from the collection, past every reader's roll-forward. */
const storedBindingCount = async (filterArg: Record<string, unknown> = {}) =>
  t.cloudly.store.collection(platformBindingKind).countDocuments(filterArg);

const both = (serviceIdArg: string) => [
  { serviceId: serviceIdArg, capability: 'database' as const },
  { serviceId: serviceIdArg, capability: 'objectstorage' as const },
];

describe('corestore legacy resource adoption', () => {
  before(async () => {
    t = await startTestCloudly();
    const { cluster, relayToken } = await t.createCluster('adoption-cluster');
    const other = await t.createCluster('other-cluster');
    await t.addNodes(other.cluster.id, 'node-1');
    world = {
      clusterId: cluster.id,
      otherClusterId: other.cluster.id,
      relay: undefined as unknown as CloudlyRelayClient,
      relayToken,
      corestores: new Map(),
    };
    for (const nodeId of ['node-1', 'node-2', 'node-dark']) {
      await addNode(cluster.id, nodeId);
    }
    await addNode(other.cluster.id, 'node-foreign');
    for (const name of ['svc-read', 'svc-adopt', 'svc-noretention', 'svc-again', 'svc-changed-new', 'svc-changed', 'svc-foreign', 'svc-onlydb', 'svc-blocked', 'svc-elsewhere', 'svc-bound']) {
      ids[name] = await createService(name);
    }
    world.relay = await connectRelay(relayToken, cluster.id);
  });
  after(async () => { await t.stop(); });

  test('the inventory read answers the relay inventory with a digest over node and services', async () => {
    placeServices('node-1', [legacyService(ids['svc-read'])]);
    const first = await readInventory('node-1');
    assert.equal(first.inventory.reachable, true);
    assert.equal(first.inventory.nodeId, 'node-1');
    assert.match(first.inventorySha256!, /^[0-9a-f]{64}$/);
    const second = await readInventory('node-1');
    assert.equal(second.inventorySha256, first.inventorySha256, 'a re-read at another time has the same digest');
  });

  test('an unreachable node is answered reachable:false with no digest', async () => {
    const answer = await readInventory('node-dark');
    assert.deepEqual({ ...answer.inventory, readAt: 0 }, { reachable: false, nodeId: 'node-dark', readAt: 0, errorCode: 'CORESTORE_UNREACHABLE' });
    assert.equal(answer.inventorySha256, null);
  });

  test('a node of another cluster is not found', async () => {
    const refusal = await refusalOf(() => readInventory('node-foreign'));
    assert.equal(refusal.code, 'not-found');
  });

  test('an adoption creates every selected binding, exactly as the inventory has it, and the plan', async () => {
    placeServices('node-1', [legacyService(ids['svc-adopt'], 30)]);
    const { inventorySha256 } = await readInventory('node-1');
    const answer = await adopt('node-1', inventorySha256!, both(ids['svc-adopt']));
    assert.equal(answer.platformBindings.length, 2);
    const [database, bucket] = answer.platformBindings;
    assert.deepEqual(database, {
      id: derivePlatformBindingId(ids['svc-adopt'], 'database'),
      serviceId: ids['svc-adopt'],
      capability: 'database',
      enabled: true,
      nodeId: 'node-1',
      status: 'pending',
      statusReason: null,
      corestoreLegacyAdoption: { nodeId: 'node-1', resourceName: `${ids['svc-adopt']}_db`, inventorySha256 },
      generation: 1,
    });
    assert.equal(bucket.objectstorageBucketName, `${ids['svc-adopt']}-bucket`);
    assert.deepEqual(bucket.objectstorageRetention, { intent: { mode: 'governance', days: 30 } });
    assert.deepEqual(bucket.corestoreLegacyAdoption, { nodeId: 'node-1', resourceName: `${ids['svc-adopt']}-bucket`, inventorySha256 });
    assert.deepEqual(answer.plan, [
      { serviceId: ids['svc-adopt'], capability: 'database', bindingId: database.id },
      { serviceId: ids['svc-adopt'], capability: 'objectstorage', bindingId: bucket.id },
    ]);
    assert.deepEqual(await bindingsOf(ids['svc-adopt']), answer.platformBindings);
  });

  test('a bucket without retention intent is adopted with retention absent', async () => {
    placeServices('node-1', [legacyService(ids['svc-noretention'], null)]);
    const { inventorySha256 } = await readInventory('node-1');
    const answer = await adopt('node-1', inventorySha256!, [{ serviceId: ids['svc-noretention'], capability: 'objectstorage' }]);
    assert.equal(answer.platformBindings.length, 1);
    assert.equal(Object.hasOwn(answer.platformBindings[0], 'objectstorageRetention'), false);
  });

  test('adopting again answers the existing bindings unchanged', async () => {
    placeServices('node-1', [legacyService(ids['svc-again'])]);
    const firstRead = await readInventory('node-1');
    const first = await adopt('node-1', firstRead.inventorySha256!, both(ids['svc-again']));
    // Corestore now lists the resources as authorized for these bindings: the inventory changed.
    const listed = world.corestores.get('node-1')!.find((service) => service.serviceId === ids['svc-again'])!;
    listed.resources.forEach((resource, index) => {
      resource.adoption = { state: 'authorized', bindingId: first.platformBindings[index].id };
    });
    const secondRead = await readInventory('node-1');
    assert.notEqual(secondRead.inventorySha256, firstRead.inventorySha256);
    const second = await adopt('node-1', secondRead.inventorySha256!, both(ids['svc-again']));
    assert.deepEqual(second.platformBindings, first.platformBindings);
    assert.deepEqual(second.plan, first.plan);
    assert.equal(await storedBindingCount({ serviceId: ids['svc-again'] }), 2);
  });

  test('an inventory changed between read and adopt is refused and creates nothing', async () => {
    placeServices('node-1', [legacyService(ids['svc-changed'])]);
    const { inventorySha256 } = await readInventory('node-1');
    placeServices('node-1', [legacyService(ids['svc-changed-new'])]);
    const refusal = await refusalOf(() => adopt('node-1', inventorySha256!, both(ids['svc-changed'])));
    assert.deepEqual(refusal, { code: 'legacy-inventory-changed', retryable: false });
    assert.equal(await storedBindingCount({ serviceId: ids['svc-changed'] }), 0);
  });

  test('an unreachable Corestore is a retryable refusal', async () => {
    const refusal = await refusalOf(() => adopt('node-dark', 'a'.repeat(64), both('svc-x')));
    assert.deepEqual(refusal, { code: 'legacy-inventory-unreachable', retryable: true });
  });

  test('a cluster whose relay is not connected is a retryable refusal too', async () => {
    world.corestores.set('node-foreign', [legacyService(ids['svc-foreign'])]);
    const read = await refusalOf(() => readInventory('node-foreign', world.otherClusterId));
    assert.deepEqual(read, { code: 'unavailable', retryable: true, reasons: ['relay-not-connected'] });
    const refusal = await refusalOf(() => adopt('node-foreign', 'a'.repeat(64), both(ids['svc-foreign']), world.otherClusterId));
    assert.deepEqual(refusal, { code: 'legacy-inventory-unreachable', retryable: true });
    assert.equal(await storedBindingCount({ serviceId: ids['svc-foreign'] }), 0);
  });

  test('an absent resource is refused, and the valid selection beside it is not created either', async () => {
    placeServices('node-1', [{ serviceId: ids['svc-onlydb'], resources: [legacyService(ids['svc-onlydb']).resources[0]] }]);
    const { inventorySha256 } = await readInventory('node-1');
    const refusal = await refusalOf(() => adopt('node-1', inventorySha256!, both(ids['svc-onlydb'])));
    assert.deepEqual(refusal, { code: 'legacy-resource-absent', retryable: false });
    assert.equal(await storedBindingCount({ serviceId: ids['svc-onlydb'] }), 0);
  });

  test('a blocked resource is refused', async () => {
    const blocked = legacyService(ids['svc-blocked']);
    blocked.resources[1].adoption = { state: 'unadopted', blocker: 'ordinary-credentials-rotated' };
    placeServices('node-1', [blocked]);
    const { inventorySha256 } = await readInventory('node-1');
    const refusal = await refusalOf(() => adopt('node-1', inventorySha256!, both(ids['svc-blocked'])));
    assert.deepEqual(refusal, { code: 'legacy-resource-blocked', retryable: false });
    assert.equal(await storedBindingCount({ serviceId: ids['svc-blocked'] }), 0);
  });

  test('a resource authorized for another binding is refused', async () => {
    const elsewhere = legacyService(ids['svc-elsewhere']);
    elsewhere.resources[0].adoption = { state: 'authorized', bindingId: 'binding-of-someone-else' };
    placeServices('node-1', [elsewhere]);
    const { inventorySha256 } = await readInventory('node-1');
    const refusal = await refusalOf(() => adopt('node-1', inventorySha256!, both(ids['svc-elsewhere'])));
    assert.deepEqual(refusal, { code: 'legacy-resource-authorized-elsewhere', retryable: false });
    assert.equal(await storedBindingCount({ serviceId: ids['svc-elsewhere'] }), 0);
  });

  test('a service Cloudly does not know is refused', async () => {
    placeServices('node-1', [legacyService('svc-unknown')]);
    const { inventorySha256 } = await readInventory('node-1');
    const refusal = await refusalOf(() => adopt('node-1', inventorySha256!, both('svc-unknown')));
    assert.deepEqual(refusal, { code: 'service-absent', retryable: false });
    assert.equal(await storedBindingCount({ serviceId: 'svc-unknown' }), 0);
  });

  test('a service that runs on another cluster is absent for this cluster', async () => {
    const foreignService = await createService('foreign-service', world.otherClusterId);
    placeServices('node-1', [legacyService(foreignService)]);
    const { inventorySha256 } = await readInventory('node-1');
    const refusal = await refusalOf(() => adopt('node-1', inventorySha256!, both(foreignService)));
    assert.deepEqual(refusal, { code: 'service-absent', retryable: false });
    assert.equal(await storedBindingCount({ serviceId: foreignService }), 0);
  });

  test('a service capability that already has a binding of its own is refused', async () => {
    placeServices('node-1', [legacyService(ids['svc-bound'])]);
    await t.caller.call('upsertPlatformBinding', {
      platformBinding: { serviceId: ids['svc-bound'], capability: 'objectstorage', enabled: true, nodeId: 'node-1' },
      expectedGeneration: null,
    });
    const { inventorySha256 } = await readInventory('node-1');
    const refusal = await refusalOf(() => adopt('node-1', inventorySha256!, both(ids['svc-bound'])));
    assert.deepEqual(refusal, { code: 'binding-exists', retryable: false });
    const stored = await bindingsOf(ids['svc-bound']);
    assert.deepEqual(stored.map((binding) => [binding.capability, binding.corestoreLegacyAdoption]), [['objectstorage', undefined]]);
  });

  test('a malformed selection is an invalid request naming each reason', async () => {
    const refusal = await refusalOf(() => adopt('node-1', 'a'.repeat(64), [
      { serviceId: 'svc-b', capability: 'database' },
      { serviceId: 'svc-a', capability: 'database' },
    ]));
    assert.equal(refusal.code, 'invalid-request');
    assertFieldProblems(refusal, [
      ['request.resources[1]', 'field-invalid', 'must sort after service svc-b capability database'],
    ]);
  });

  test('racing adoptions of the same inventory create exactly one set of bindings', async () => {
    const serviceIds = await createServices(3, 'race');
    placeServices('node-2', serviceIds.map((serviceId) => legacyService(serviceId)));
    const { inventorySha256 } = await readInventory('node-2');
    const selection = serviceIds.flatMap(both);
    const outcomes = await Promise.allSettled(Array.from({ length: 6 }, () => adopt('node-2', inventorySha256!, selection)));
    const answers = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
    assert.ok(answers.length >= 1);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') {
        assert.equal((outcome.reason as { errorData?: { code?: string } }).errorData?.code, 'conflict');
      }
    }
    for (const answer of answers) {
      assert.deepEqual(answer, answers[0], 'every successful racer answers the same bindings');
    }
    for (const serviceId of serviceIds) {
      assert.equal(await storedBindingCount({ serviceId }), 2);
    }
    assert.equal(answers[0].platformBindings.every((binding) => binding.generation === 1), true);
  });

  test('racing adoptions with overlapping selections share the one binding of the common resource', async () => {
    const [first, shared, last] = await createServices(3, 'overlap');
    placeServices('node-2', [first, shared, last].map((serviceId) => legacyService(serviceId)));
    const { inventorySha256 } = await readInventory('node-2');
    const [left, right] = await Promise.all([
      adopt('node-2', inventorySha256!, [...both(first), ...both(shared)]),
      adopt('node-2', inventorySha256!, [...both(shared), ...both(last)]),
    ]);
    assert.deepEqual(left.platformBindings.slice(2), right.platformBindings.slice(0, 2), 'both answer the same shared bindings');
    for (const serviceId of [first, shared, last]) {
      assert.equal(await storedBindingCount({ serviceId }), 2);
    }
  });

  test('readers racing an adoption see none or all of its bindings', async () => {
    const serviceIds = await createServices(12, 'watched');
    placeServices('node-2', serviceIds.map((serviceId) => legacyService(serviceId)));
    const { inventorySha256 } = await readInventory('node-2');
    const watched = new Set(serviceIds);
    const seenCounts = new Set<number>();
    let done = false;
    const reader = async () => {
      while (!done) {
        const bindings = await t.cloudly.corestoreManager.getPlatformBindings();
        seenCounts.add(bindings.filter((binding) => watched.has(binding.serviceId)).length);
      }
    };
    const readers = Array.from({ length: 3 }, reader);
    const answer = await adopt('node-2', inventorySha256!, serviceIds.flatMap(both)).finally(() => { done = true; });
    await Promise.all(readers);
    assert.equal(answer.platformBindings.length, 24);
    assert.deepEqual([...seenCounts].filter((count) => count !== 0 && count !== 24), [], 'no reader saw part of the adoption');
    assert.equal(await storedBindingCount({ serviceId: { $in: serviceIds } }), 24);
  });

  test('an upsert racing an adoption of the same service capability: one wins whole, the other is refused', async () => {
    for (let round = 0; round < 4; round++) {
      const serviceId = await createService(`mixed-${round}`);
      placeServices('node-2', [legacyService(serviceId)]);
      const { inventorySha256 } = await readInventory('node-2');
      const [adoption, upsert] = await Promise.allSettled([
        adopt('node-2', inventorySha256!, both(serviceId)),
        t.caller.call('upsertPlatformBinding', {
          platformBinding: { serviceId, capability: 'database', enabled: true, nodeId: 'node-2' },
          expectedGeneration: null,
        }),
      ]);
      const stored = await t.cloudly.store.find(platformBindingKind, { serviceId });
      if (adoption.status === 'fulfilled') {
        assert.equal(upsert.status, 'rejected');
        assert.equal((upsert as PromiseRejectedResult).reason.errorData.code, 'conflict');
        assert.equal(stored.length, 2);
        assert.ok(stored.every((binding) => binding.corestoreLegacyAdoption !== undefined));
      } else {
        assert.equal(upsert.status, 'fulfilled');
        assert.deepEqual((adoption.reason as { errorData: unknown }).errorData, { code: 'binding-exists', retryable: false });
        assert.equal(stored.length, 1, 'the adoption created nothing, not even the bucket binding');
        assert.equal(stored[0].corestoreLegacyAdoption, undefined);
      }
    }
  });

  test('a creation committed but not applied by its writer is applied exactly once, by the ledger controller and across a restart', async () => {
    const serviceIds = await createServices(2, 'crash');
    placeServices('node-2', serviceIds.map((serviceId) => legacyService(serviceId)));
    const { inventorySha256 } = await readInventory('node-2');
    // As a writer that failed right after committing the creation, before rolling it forward.
    armFailpoint('corestore.afterCreationCommit', { kind: 'throw' }, { times: 1 });
    const refusal = await refusalOf(() => adopt('node-2', inventorySha256!, serviceIds.flatMap(both)));
    assert.equal(refusal.code, 'internal');
    // The binding ledger controller applies the committed creation without anyone reading it.
    await waitFor(async () => (await storedBindingCount({ serviceId: { $in: serviceIds } })) === 4, 'the ledger controller applied the creation', 10_000);
    await waitFor(async () => (await t.cloudly.store.get(platformBindingCreationLedgerKind, 'platform-binding-creations'))?.pending === null, 'the ledger is cleared', 10_000);
    const applied = await t.cloudly.store.get(platformBindingCreationLedgerKind, 'platform-binding-creations');
    assert.ok(applied?.lastAppliedOperationId, 'the ledger names the applied creation');

    await t.restart();
    assert.equal(await storedBindingCount({ serviceId: { $in: serviceIds } }), 4, 'the restart applied nothing twice');
    const stored = await t.cloudly.store.find(platformBindingKind, { serviceId: { $in: serviceIds } });
    for (const binding of stored) {
      assert.equal(await storedBindingCount({ id: binding.id }), 1);
    }
    const after = await t.cloudly.store.get(platformBindingCreationLedgerKind, 'platform-binding-creations');
    assert.equal(after?.pending, null);
    assert.equal(after?.lastAppliedOperationId, applied?.lastAppliedOperationId);

    // The adopter retrying after the failure is answered with the same bindings, unchanged.
    world.relay = await connectRelay(world.relayToken, world.clusterId);
    const retried = await adopt('node-2', inventorySha256!, serviceIds.flatMap(both));
    assert.deepEqual(retried.platformBindings.map((binding) => binding.id).sort(), stored.map((binding) => binding.id).sort());
    assert.equal(await storedBindingCount({ serviceId: { $in: serviceIds } }), 4);
  });

  test('a reader sees a committed creation whole before it is applied, and its read writes nothing', async () => {
    const serviceIds = await createServices(2, 'partial');
    placeServices('node-2', serviceIds.map((serviceId) => legacyService(serviceId)));
    const { inventorySha256 } = await readInventory('node-2');
    // The ledger controller is held before it applies the creation, so the creation stays pending.
    let release: () => void = () => undefined;
    armFailpoint('corestore.beforeApplyCreation', { kind: 'pause', until: new Promise<void>((resolve) => { release = resolve; }) }, { times: 1 });
    armFailpoint('corestore.afterCreationCommit', { kind: 'throw' }, { times: 1 });
    try {
      await refusalOf(() => adopt('node-2', inventorySha256!, serviceIds.flatMap(both)));
      // As if the process died in the middle of rolling forward: one binding of four is stored.
      const ledger = await t.cloudly.store.get(platformBindingCreationLedgerKind, 'platform-binding-creations');
      assert.equal(ledger?.pending?.bindings.length, 4, 'the creation is pending');
      await t.cloudly.store.insert(platformBindingKind, ledger!.pending!.bindings[0]);
      assert.equal(await storedBindingCount({ serviceId: { $in: serviceIds } }), 1);
      const seen = [...await bindingsOf(serviceIds[0]), ...await bindingsOf(serviceIds[1])];
      assert.deepEqual(seen.map((bindingArg) => bindingArg.id).sort(), ledger!.pending!.bindings.map((bindingArg) => bindingArg.id).sort(),
        'the pending creation is read whole: the binding stored of it and the three not stored yet');
      assert.equal(await storedBindingCount({ serviceId: { $in: serviceIds } }), 1, 'the reads applied nothing');
      const after = await t.cloudly.store.get(platformBindingCreationLedgerKind, 'platform-binding-creations');
      assert.equal(after?.generation, ledger?.generation, 'nor moved the ledger');
    } finally {
      release();
    }
    await waitFor(async () => (await storedBindingCount({ serviceId: { $in: serviceIds } })) === 4, 'the ledger controller applied the creation', 10_000);
    assert.equal([...await bindingsOf(serviceIds[0]), ...await bindingsOf(serviceIds[1])].length, 4, 'once applied, the reader sees all four');
  });
});
