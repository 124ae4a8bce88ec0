import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as interfaces from '../ts/interfaces/index.js';
import type { IPlatformBinding, TClusterCorestoreLegacyResourceInventory } from '../ts/interfaces/data/index.js';

const { data, platform } = interfaces;

const makeInventory = (): TClusterCorestoreLegacyResourceInventory => ({
  reachable: true,
  nodeId: 'node-1',
  readAt: 1_700_000_000_000,
  services: [
    {
      serviceId: 'svc-a',
      resources: [
        { capability: 'database', databaseName: 'svc_a_db', adoption: { state: 'unadopted', blocker: null } },
        {
          capability: 'objectstorage',
          bucketName: 'svc-a-bucket',
          retention: { mode: 'governance', days: 30 },
          adoption: { state: 'unadopted', blocker: null },
        },
      ],
    },
    {
      serviceId: 'svc-b',
      resources: [
        { capability: 'database', databaseName: 'svc_b_db', adoption: { state: 'unadopted', blocker: 'owned-by-binding' } },
      ],
    },
    {
      serviceId: 'svc-c',
      resources: [
        {
          capability: 'objectstorage',
          bucketName: 'svc-c-bucket',
          retention: null,
          adoption: { state: 'authorized', bindingId: 'binding-c' },
        },
      ],
    },
  ],
});

const makeAdoptingBinding = (
  inventoryArg: TClusterCorestoreLegacyResourceInventory,
  overridesArg: Partial<IPlatformBinding> = {},
): IPlatformBinding => {
  const sha = data.computeClusterCorestoreLegacyResourceInventorySha256(inventoryArg)!;
  return {
    id: 'binding-a-os',
    serviceId: 'svc-a',
    capability: 'objectstorage',
    enabled: true,
    nodeId: 'node-1',
    status: 'pending',
    statusReason: null,
    objectstorageBucketName: 'svc-a-bucket',
    objectstorageRetention: { intent: { mode: 'governance', days: 30 } },
    corestoreLegacyAdoption: { nodeId: 'node-1', resourceName: 'svc-a-bucket', inventorySha256: sha },
    generation: 1,
    ...overridesArg,
  };
};

test('the adoption contract names the inventory path and the plan limit', () => {
  assert.equal(data.corestoreLegacyAdoptionContract.inventoryPath, '/control/legacy-resources');
  assert.equal(data.corestoreLegacyAdoptionContract.maximumPlanEntries, 4096);
  assert.equal(platform.corestoreLegacyAdoptionContract, data.corestoreLegacyAdoptionContract);
});

test('a well-formed cluster inventory validates, reachable or not', () => {
  assert.deepEqual(data.validateClusterCorestoreLegacyResourceInventory(makeInventory()), []);
  for (const errorCode of ['CORESTORE_ENDPOINT_UNKNOWN', 'CORESTORE_UNREACHABLE']) {
    assert.deepEqual(
      data.validateClusterCorestoreLegacyResourceInventory({ reachable: false, nodeId: 'node-1', readAt: 1, errorCode }),
      [],
    );
  }
});

test('an unreachable inventory carries no list and only the two error codes', () => {
  const withList = data.validateClusterCorestoreLegacyResourceInventory({
    reachable: false, nodeId: 'node-1', readAt: 1, errorCode: 'CORESTORE_UNREACHABLE', services: [],
  });
  assert.equal(withList.length, 1);
  const badCode = data.validateClusterCorestoreLegacyResourceInventory({
    reachable: false, nodeId: 'node-1', readAt: 1, errorCode: 'TIMEOUT',
  });
  assert.equal(badCode.length, 1);
  assert.match(badCode[0], /errorCode/);
});

test('inventory services must be sorted and unique, resources database before objectstorage', () => {
  const inventory = makeInventory() as Extract<TClusterCorestoreLegacyResourceInventory, { reachable: true }>;
  const unsorted = { ...inventory, services: [inventory.services[1], inventory.services[0]] };
  assert.ok(data.validateClusterCorestoreLegacyResourceInventory(unsorted).some((reason) => /services\[1\]\.serviceId/.test(reason)));
  const duplicated = { ...inventory, services: [inventory.services[0], inventory.services[0]] };
  assert.ok(data.validateClusterCorestoreLegacyResourceInventory(duplicated).length > 0);
  const swapped = {
    ...inventory,
    services: [{ serviceId: 'svc-a', resources: [inventory.services[0].resources[1], inventory.services[0].resources[0]] }],
  };
  assert.ok(data.validateClusterCorestoreLegacyResourceInventory(swapped).some((reason) => /database before objectstorage/.test(reason)));
});

test('an adoptable bucket must have a canonical S3 name; a blocked one need not', () => {
  const resource = (bucketName: string, blocker: string | null) => ({
    services: [{
      serviceId: 'svc-x',
      resources: [{ capability: 'objectstorage', bucketName, retention: null, adoption: { state: 'unadopted', blocker } }],
    }],
  });
  assert.equal(platform.validateCorestoreLegacyResourceInventory(resource('Not_Canonical', null)).length, 1);
  assert.deepEqual(platform.validateCorestoreLegacyResourceInventory(resource('Not_Canonical', 'not-adoptable')), []);
  assert.deepEqual(platform.validateCorestoreLegacyResourceInventory(resource('good-bucket', null)), []);
});

test('inventory validation never throws on hostile input', () => {
  const hostile: unknown[] = [
    null, undefined, 0, 'x', [], new Date(), { services: null },
    { get services() { throw new Error('boom'); } },
    new Proxy({}, { getPrototypeOf() { throw new Error('boom'); } }),
    { services: Array.from({ length: 5000 }, () => ({})) },
  ];
  for (const value of hostile) {
    const reasons = data.validateClusterCorestoreLegacyResourceInventory(value);
    assert.ok(reasons.length > 0);
    assert.ok(platform.validateCorestoreLegacyResourceInventory(value).length > 0);
  }
});

test('the inventory digest covers node and services, not the read time', () => {
  const inventory = makeInventory();
  const sha = data.computeClusterCorestoreLegacyResourceInventorySha256(inventory);
  assert.match(sha!, /^[0-9a-f]{64}$/);
  assert.equal(data.computeClusterCorestoreLegacyResourceInventorySha256({ ...inventory, readAt: 5 }), sha);
  assert.notEqual(data.computeClusterCorestoreLegacyResourceInventorySha256({ ...inventory, nodeId: 'node-2' }), sha);
  const changed = makeInventory() as Extract<TClusterCorestoreLegacyResourceInventory, { reachable: true }>;
  changed.services[0].resources[0] = { capability: 'database', databaseName: 'svc_a_db', adoption: { state: 'unadopted', blocker: 'not-adoptable' } };
  assert.notEqual(data.computeClusterCorestoreLegacyResourceInventorySha256(changed), sha);
  assert.equal(
    data.computeClusterCorestoreLegacyResourceInventorySha256({ reachable: false, nodeId: 'node-1', readAt: 1, errorCode: 'CORESTORE_UNREACHABLE' }),
    null,
  );
});

test('selections must be sorted by service then capability, unique, exact', () => {
  assert.deepEqual(data.validateCorestoreLegacyResourceSelections([
    { serviceId: 'svc-a', capability: 'database' },
    { serviceId: 'svc-a', capability: 'objectstorage' },
    { serviceId: 'svc-b', capability: 'database' },
  ]), []);
  const unsorted = data.validateCorestoreLegacyResourceSelections([
    { serviceId: 'svc-a', capability: 'objectstorage' },
    { serviceId: 'svc-a', capability: 'database' },
  ]);
  assert.equal(unsorted.length, 1);
  assert.match(unsorted[0], /resources\[1\] must sort after/);
  const duplicate = data.validateCorestoreLegacyResourceSelections([
    { serviceId: 'svc-a', capability: 'database' },
    { serviceId: 'svc-a', capability: 'database' },
  ]);
  assert.equal(duplicate.length, 1);
  assert.match(duplicate[0], /second time/);
  const bad = data.validateCorestoreLegacyResourceSelections([
    { serviceId: '', capability: 'disk' },
    { serviceId: 'svc-a', capability: 'database', extra: 1 },
  ]);
  assert.deepEqual(bad.map((reason) => reason.split(' ')[0]), ['resources[0].serviceId', 'resources[0].capability', 'resources[1]']);
  assert.equal(data.validateCorestoreLegacyResourceSelections([]).length, 1);
  assert.equal(data.validateCorestoreLegacyResourceSelections(null).length, 1);
  assert.equal(data.validateCorestoreLegacyResourceSelections(
    Array.from({ length: 4097 }, (_, index) => ({ serviceId: `s${String(index).padStart(5, '0')}`, capability: 'database' })),
  ).length, 1);
});

test('an adopting bucket binding that follows the inventory exactly is valid', () => {
  const inventory = makeInventory();
  const sha = data.computeClusterCorestoreLegacyResourceInventorySha256(inventory);
  assert.deepEqual(data.validatePlatformBindingCorestoreLegacyAdoption(makeAdoptingBinding(inventory), inventory, sha), []);
});

test('an adopting binding is refused for every deviation from the inventory', () => {
  const inventory = makeInventory();
  const sha = data.computeClusterCorestoreLegacyResourceInventorySha256(inventory)!;
  const check = (binding: IPlatformBinding, shaArg: string = sha) =>
    data.validatePlatformBindingCorestoreLegacyAdoption(binding, inventory, shaArg);
  assert.ok(check(makeAdoptingBinding(inventory), 'f'.repeat(64)).some((reason) => /inventorySha256/.test(reason)));
  assert.ok(check(makeAdoptingBinding(inventory, { enabled: false })).some((reason) => /enabled/.test(reason)));
  assert.ok(check(makeAdoptingBinding(inventory, { nodeId: 'node-2' })).some((reason) => /nodeId/.test(reason)));
  assert.ok(check(makeAdoptingBinding(inventory, { objectstorageBucketName: 'other-bucket' })).some((reason) => /objectstorageBucketName/.test(reason)));
  assert.ok(check(makeAdoptingBinding(inventory, { objectstorageRetention: { intent: { mode: 'governance', days: 31 } } }))
    .some((reason) => /retention/.test(reason)));
  const withoutRetention = makeAdoptingBinding(inventory);
  delete withoutRetention.objectstorageRetention;
  assert.ok(check(withoutRetention).some((reason) => /retention/.test(reason)));
  const withoutAdoption = makeAdoptingBinding(inventory);
  delete withoutAdoption.corestoreLegacyAdoption;
  assert.ok(check(withoutAdoption).some((reason) => /corestoreLegacyAdoption/.test(reason)));
  assert.ok(check(makeAdoptingBinding(inventory, { serviceId: 'svc-z' })).some((reason) => /does not list/.test(reason)));
});

test('a bucket without retention intent is adopted with retention absent; a blocked or foreign-authorized one is refused', () => {
  const inventory = makeInventory();
  const sha = data.computeClusterCorestoreLegacyResourceInventorySha256(inventory)!;
  const bucketC: IPlatformBinding = {
    id: 'binding-c', serviceId: 'svc-c', capability: 'objectstorage', enabled: true, nodeId: 'node-1',
    status: 'pending', statusReason: null, objectstorageBucketName: 'svc-c-bucket',
    corestoreLegacyAdoption: { nodeId: 'node-1', resourceName: 'svc-c-bucket', inventorySha256: sha }, generation: 1,
  };
  assert.deepEqual(data.validatePlatformBindingCorestoreLegacyAdoption(bucketC, inventory, sha), []);
  assert.ok(data.validatePlatformBindingCorestoreLegacyAdoption({ ...bucketC, id: 'binding-other' }, inventory, sha)
    .some((reason) => /authorized for binding binding-c/.test(reason)));
  assert.ok(data.validatePlatformBindingCorestoreLegacyAdoption(
    { ...bucketC, objectstorageRetention: { intent: { mode: 'compliance', days: 1 } } }, inventory, sha,
  ).some((reason) => /must be absent/.test(reason)));
  const databaseB: IPlatformBinding = {
    id: 'binding-b', serviceId: 'svc-b', capability: 'database', enabled: true, nodeId: 'node-1',
    status: 'pending', statusReason: null,
    corestoreLegacyAdoption: { nodeId: 'node-1', resourceName: 'svc_b_db', inventorySha256: sha }, generation: 1,
  };
  assert.ok(data.validatePlatformBindingCorestoreLegacyAdoption(databaseB, inventory, sha)
    .some((reason) => /blocked as owned-by-binding/.test(reason)));
});

test('adoption rule refuses an unreachable inventory and hostile values without throwing', () => {
  const unreachable = { reachable: false, nodeId: 'node-1', readAt: 1, errorCode: 'CORESTORE_UNREACHABLE' };
  assert.equal(data.validatePlatformBindingCorestoreLegacyAdoption(makeAdoptingBinding(makeInventory()), unreachable, null).length, 1);
  assert.ok(data.validatePlatformBindingCorestoreLegacyAdoption(null, makeInventory(), 'x').length > 0);
  assert.ok(data.validatePlatformBindingCorestoreLegacyAdoption([], [], []).length > 0);
});

test('the plan is built from adopting bindings, sorted by service then capability', () => {
  const inventory = makeInventory();
  const bucket = makeAdoptingBinding(inventory);
  const database = makeAdoptingBinding(inventory, {
    id: 'binding-a-db', capability: 'database', objectstorageBucketName: undefined, objectstorageRetention: undefined,
  });
  const other = makeAdoptingBinding(inventory, { id: 'binding-0', serviceId: 'svc-0' });
  const plan = data.createCorestoreLegacyResourceAdoptionPlan([bucket, database, other]);
  assert.deepEqual(plan, [
    { serviceId: 'svc-0', capability: 'objectstorage', bindingId: 'binding-0' },
    { serviceId: 'svc-a', capability: 'database', bindingId: 'binding-a-db' },
    { serviceId: 'svc-a', capability: 'objectstorage', bindingId: 'binding-a-os' },
  ]);
  assert.deepEqual(data.validateCorestoreLegacyResourceAdoptionPlan(plan), []);
  const plain = { ...bucket };
  delete plain.corestoreLegacyAdoption;
  assert.throws(() => data.createCorestoreLegacyResourceAdoptionPlan([plain]));
});

test('plan validation follows the migration rules in any order', () => {
  assert.deepEqual(platform.validateCorestoreLegacyResourceAdoptionPlan([
    { serviceId: 'b', capability: 'database', bindingId: 'x2' },
    { serviceId: 'a', capability: 'database', bindingId: 'x1' },
  ]), []);
  assert.equal(platform.validateCorestoreLegacyResourceAdoptionPlan([]).length, 1);
  assert.equal(platform.validateCorestoreLegacyResourceAdoptionPlan({}).length, 1);
  const repeated = platform.validateCorestoreLegacyResourceAdoptionPlan([
    { serviceId: 'a', capability: 'database', bindingId: 'x1' },
    { serviceId: 'a', capability: 'database', bindingId: 'x2' },
    { serviceId: 'b', capability: 'database', bindingId: 'x1' },
  ]);
  assert.equal(repeated.length, 2);
  assert.match(repeated[0], /\[1\] names service a capability database a second time/);
  assert.match(repeated[1], /\[2\]\.bindingId x1 appears a second time/);
  const inexact = platform.validateCorestoreLegacyResourceAdoptionPlan([
    { serviceId: 'a', capability: 'database', bindingId: 'x1', bucketName: 'b' },
    { serviceId: 'a b', capability: 'disk', bindingId: '' },
  ]);
  assert.equal(inexact.length, 4);
  const tooMany = Array.from({ length: 4097 }, (_, index) => ({ serviceId: `s${index}`, capability: 'database', bindingId: `b${index}` }));
  assert.equal(platform.validateCorestoreLegacyResourceAdoptionPlan(tooMany).length, 1);
  assert.deepEqual(platform.validateCorestoreLegacyResourceAdoptionPlan(tooMany.slice(0, 4096)), []);
});

test('Corestore refusals are read only from a 409 with the exact body and a known code', () => {
  const body = { ok: false, error: 'waiting for adoption', code: 'legacy-adoption-pending' };
  assert.equal(data.readCorestoreLegacyAdoptionRefusal(409, body), 'legacy-adoption-pending');
  assert.equal(data.readCorestoreLegacyAdoptionRefusal(409, JSON.stringify({ ...body, code: 'legacy-adoption-mismatch' })), 'legacy-adoption-mismatch');
  assert.equal(data.readCorestoreLegacyAdoptionRefusal(409, { ...body, code: 'legacy-adoption-conflict' }), 'legacy-adoption-conflict');
  assert.equal(data.readCorestoreLegacyAdoptionRefusal(400, body), null);
  assert.equal(data.readCorestoreLegacyAdoptionRefusal(409, { ...body, ok: true }), null);
  assert.equal(data.readCorestoreLegacyAdoptionRefusal(409, { ...body, code: 'other' }), null);
  assert.equal(data.readCorestoreLegacyAdoptionRefusal(409, { ...body, extra: 1 }), null);
  assert.equal(data.readCorestoreLegacyAdoptionRefusal(409, '{not json'), null);
  assert.equal(data.readCorestoreLegacyAdoptionRefusal(409, null), null);
  assert.equal(data.readCorestoreLegacyAdoptionRefusal(409, { get ok() { throw new Error('boom'); }, error: '', code: '' }), null);
});

test('each status reason pairs with exactly one status', () => {
  assert.equal(data.getPlatformBindingStatusOfReason('legacy-adoption-pending'), 'provisioning');
  assert.equal(data.getPlatformBindingStatusOfReason('legacy-adoption-conflict'), 'failed');
  assert.equal(data.getPlatformBindingStatusOfReason('legacy-adoption-mismatch'), 'failed');
  for (const reason of data.platformBindingStatusReasons) {
    for (const status of data.platformBindingStatuses) {
      const reasons = data.validatePlatformBindingStatusReason(status, reason);
      assert.equal(reasons.length === 0, status === data.getPlatformBindingStatusOfReason(reason), `${status}/${reason}`);
    }
  }
  for (const status of data.platformBindingStatuses) {
    assert.deepEqual(data.validatePlatformBindingStatusReason(status, null), []);
    assert.deepEqual(data.validatePlatformBindingStatusReason(status, undefined), []);
  }
  assert.deepEqual(data.validatePlatformBindingStatusReason('sleeping', 'legacy-adoption-x').length, 2);
});

test('adoption error data: seven codes in order, only the unreachable inventory is retryable', () => {
  assert.deepEqual([...data.corestoreLegacyAdoptionErrorCodes], [
    'legacy-inventory-unreachable',
    'legacy-inventory-changed',
    'legacy-resource-absent',
    'legacy-resource-blocked',
    'legacy-resource-authorized-elsewhere',
    'service-absent',
    'binding-exists',
  ]);
  for (const code of data.corestoreLegacyAdoptionErrorCodes) {
    const errorData = data.createCorestoreLegacyAdoptionErrorData(code);
    assert.deepEqual(errorData, { code, retryable: code === 'legacy-inventory-unreachable' });
    assert.ok(data.isCorestoreLegacyAdoptionErrorData(errorData));
  }
  assert.equal(data.isCorestoreLegacyAdoptionErrorData({ code: 'binding-exists', retryable: true }), false);
});

test('a platform binding upsert refuses every server-managed field by name', () => {
  assert.deepEqual(data.validatePlatformBindingUpsert({ serviceId: 'svc-a', capability: 'database', enabled: true, nodeId: 'node-1' }), []);
  assert.deepEqual(data.validatePlatformBindingUpsert({
    serviceId: 'svc-a', capability: 'objectstorage', enabled: false, nodeId: null,
    objectstorageRetention: { intent: { mode: 'compliance', days: 7 } },
  }), []);
  const refused = data.validatePlatformBindingUpsert({
    serviceId: 'svc-a', capability: 'objectstorage', enabled: true, nodeId: 'node-1',
    objectstorageBucketName: 'x-bucket',
    corestoreLegacyAdoption: { nodeId: 'node-1', resourceName: 'x', inventorySha256: 'a'.repeat(64) },
    statusReason: 'legacy-adoption-pending',
  });
  assert.deepEqual(refused.map((reason) => reason.split(' ')[0]), [
    'platformBinding.objectstorageBucketName',
    'platformBinding.corestoreLegacyAdoption',
    'platformBinding.statusReason',
  ]);
  assert.ok(data.validatePlatformBindingUpsert({ serviceId: 'svc-a', capability: 'database', enabled: true, nodeId: 'n', objectstorageRetention: { intent: { mode: 'compliance', days: 7 } } })
    .some((reason) => /only carried by an objectstorage binding/.test(reason)));
  assert.ok(data.validatePlatformBindingUpsert(null).length > 0);
});

test('canonical S3 bucket names', () => {
  for (const name of ['abc', 'my-bucket.data', 'a1b']) {
    assert.ok(data.isCanonicalObjectStorageBucketName(name), name);
  }
  for (const name of ['ab', 'Upper', '-lead', 'trail-', 'a..b', '192.168.0.1', 'xn--abc', 'x'.repeat(64), 'bad_name']) {
    assert.ok(!data.isCanonicalObjectStorageBucketName(name), name);
  }
});

test('a whole platform binding validates; a reason with the wrong status does not', () => {
  const binding = makeAdoptingBinding(makeInventory());
  assert.deepEqual(data.validatePlatformBinding(binding), []);
  assert.ok(data.validatePlatformBinding({ ...binding, statusReason: 'legacy-adoption-pending' }).some((reason) => /provisioning/.test(reason)));
  assert.deepEqual(data.validatePlatformBinding({ ...binding, status: 'provisioning', statusReason: 'legacy-adoption-pending' }), []);
  assert.ok(data.validatePlatformBinding({ ...binding, capability: 'database' }).some((reason) => /only carried by an objectstorage/.test(reason)));
});
