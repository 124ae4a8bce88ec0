import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { decideCorestoreLegacyAdoption, derivePlatformBindingId } from '../ts/manager.corestore/adoption.js';
import * as data from '../ts/interfaces/data/index.js';
import * as platform from '../ts/interfaces/platform/index.js';
import type { IPlatformBinding, TClusterCorestoreLegacyResourceInventory } from '../ts/interfaces/data/index.js';

/** The pure adoption decision, and the validators' promise never to throw. */

type TReachable = Extract<TClusterCorestoreLegacyResourceInventory, { reachable: true }>;

const inventory: TReachable = {
  reachable: true,
  nodeId: 'node-1',
  readAt: 1,
  services: [
    {
      serviceId: 'a',
      resources: [
        { capability: 'database', databaseName: 'a_db', adoption: { state: 'unadopted', blocker: null } },
        { capability: 'objectstorage', bucketName: 'a-bucket', retention: null, adoption: { state: 'unadopted', blocker: 'owned-by-binding' } },
      ],
    },
    {
      serviceId: 'b',
      resources: [
        { capability: 'database', databaseName: 'b_db', adoption: { state: 'authorized', bindingId: 'someone-else' } },
        {
          capability: 'objectstorage',
          bucketName: 'b-bucket',
          retention: { mode: 'compliance', days: 9 },
          adoption: { state: 'authorized', bindingId: derivePlatformBindingId('b', 'objectstorage') },
        },
      ],
    },
  ],
};
const sha = data.computeClusterCorestoreLegacyResourceInventorySha256(inventory)!;

const decide = (
  selectionsArg: data.ICorestoreLegacyResourceSelection[],
  existingArg: IPlatformBinding[] = [],
  knownArg = ['a', 'b', 'c'],
) => decideCorestoreLegacyAdoption({
  nodeId: 'node-1',
  inventory,
  inventorySha256: sha,
  selections: selectionsArg,
  knownServiceIds: new Set(knownArg),
  existingBindings: new Map(existingArg.map((binding) => [binding.id, binding])),
});

test('an unblocked resource, or one authorized for the binding to be created, is adopted', () => {
  const decision = decide([{ serviceId: 'a', capability: 'database' }, { serviceId: 'b', capability: 'objectstorage' }]);
  assert.equal(decision.kind, 'accepted');
  if (decision.kind !== 'accepted') return;
  assert.equal(decision.toCreate.length, 2);
  assert.deepEqual(decision.toCreate[1].objectstorageRetention, { intent: { mode: 'compliance', days: 9 } });
  for (const binding of decision.toCreate) {
    assert.deepEqual(data.validatePlatformBindingCorestoreLegacyAdoption(binding, inventory, sha), []);
  }
});

test('each selection earns its own code; the answer is the first in contract order', () => {
  const decision = decide([
    { serviceId: 'a', capability: 'objectstorage' },
    { serviceId: 'b', capability: 'database' },
    { serviceId: 'c', capability: 'database' },
    { serviceId: 'z', capability: 'database' },
  ]);
  assert.equal(decision.kind, 'refused');
  if (decision.kind !== 'refused') return;
  assert.deepEqual(decision.details.map((detail) => detail.code), [
    'legacy-resource-blocked',
    'legacy-resource-authorized-elsewhere',
    'legacy-resource-absent',
    'service-absent',
  ]);
  assert.equal(decision.code, 'legacy-resource-absent');
});

test('an existing adopting binding is answered unchanged, any other binding refuses', () => {
  const first = decide([{ serviceId: 'a', capability: 'database' }]);
  assert.equal(first.kind, 'accepted');
  if (first.kind !== 'accepted') return;
  const adopted = { ...first.toCreate[0], generation: 3, status: 'ready' as const };
  const again = decide([{ serviceId: 'a', capability: 'database' }], [adopted]);
  assert.deepEqual(again, { kind: 'accepted', bindings: [adopted], toCreate: [] });
  const plain: IPlatformBinding = { ...adopted };
  delete plain.corestoreLegacyAdoption;
  const refused = decide([{ serviceId: 'a', capability: 'database' }], [plain]);
  assert.equal(refused.kind === 'refused' && refused.code, 'binding-exists');
});

test('binding ids are canonical identifiers, one per service capability', () => {
  const ids = new Set(['a', 'b'].flatMap((serviceId) => data.platformBindingCapabilities.map((capability) => derivePlatformBindingId(serviceId, capability))));
  assert.equal(ids.size, 4);
  for (const id of ids) {
    assert.match(id, /^pb-[0-9a-f]{32}$/);
  }
});

test('validators answer arrays of reasons for any JSON value and never throw', () => {
  fc.assert(fc.property(fc.jsonValue(), (value) => {
    for (const reasons of [
      data.validateClusterCorestoreLegacyResourceInventory(value),
      platform.validateCorestoreLegacyResourceInventory(value),
      platform.validateCorestoreLegacyResourceAdoptionPlan(value),
      data.validateCorestoreLegacyResourceSelections(value),
      data.validatePlatformBinding(value),
      data.validatePlatformBindingUpsert(value),
      data.validatePlatformBindingCorestoreLegacyAdoption(value, inventory, sha),
      data.validatePlatformBindingCorestoreLegacyAdoption(value, value, value),
      data.validatePlatformBindingStatusReason(value, value),
    ]) {
      assert.ok(Array.isArray(reasons) && reasons.every((reason) => typeof reason === 'string'));
    }
    assert.ok(data.readCorestoreLegacyAdoptionRefusal(409, value) === null || typeof data.readCorestoreLegacyAdoptionRefusal(409, value) === 'string');
  }), { numRuns: 300 });
});
