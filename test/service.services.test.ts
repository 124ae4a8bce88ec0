import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import type { IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import { getServiceVolumeId } from '../ts/interfaces/data/servicevolume.js';
import { assertFieldProblems } from './helpers/refusals.js';

let t: ITestCloudly;
let clusterId: string;

before(async () => {
  t = await startTestCloudly();
  clusterId = (await t.createCluster('services')).cluster.id;
  await t.addNodes(clusterId, 'n1');
});

after(async () => {
  await t.stop();
});

const spec = (overrides: Partial<IServiceWritableSpec> = {}): IServiceWritableSpec => ({
  name: 'db',
  organizationId: 'org1',
  clusterId,
  runtime: { image: 'postgres:16', replicas: 1, profile: { runAs: { user: 999, group: 999 } }, placement: { nodeIds: ['n1'] } },
  volumes: [
    { mountPath: '/var/lib/postgresql/data', readOnly: false, driver: 'local' },
    { mountPath: '/etc/extra', readOnly: true, driver: 'local' },
  ],
  ...overrides,
});

const create = async (overrides: Partial<IServiceWritableSpec> = {}) =>
  (await t.caller.call('createService', { service: spec(overrides) })).service;

test('createService stores the service; getServiceById and getServices read it back', async () => {
  const service = await create();
  assert.equal(service.generation, 1);
  assert.equal(service.specRevision, 1);
  assert.deepEqual(service.volumes[0], {
    id: getServiceVolumeId('/var/lib/postgresql/data'),
    mountPath: '/var/lib/postgresql/data',
    readOnly: false,
    driver: 'local',
  });
  const read = await t.caller.call('getServiceById', { serviceId: service.id });
  assert.deepEqual(read.service, service);
  const all = await t.caller.call('getServices', {});
  assert.ok(all.services.some((candidate) => candidate.id === service.id));
  assert.deepEqual(await t.cloudly.serviceManager.getService(service.id), service);
  assert.equal(await t.cloudly.serviceManager.getService('svc-none'), null);
});

test('createService stating a volume initialization is refused naming the path and stores nothing', async () => {
  const before = (await t.caller.call('getServices', {})).services.length;
  const refusal = await refusalOf(() => t.caller.call('createService', {
    service: spec({
      volumes: [{
        mountPath: '/data', readOnly: false, driver: 'local',
        initialization: { kind: 'empty', ownership: { kind: 'run-as', mode: 0o700 } },
      } as never],
    }),
  }));
  assert.equal(refusal.code, 'invalid-request');
  assertFieldProblems(refusal, [
    ['request.service.volumes[0].initialization', 'field-invalid', 'is server-managed: set it with setServiceVolumeInitialization'],
  ]);
  const afterCount = (await t.caller.call('getServices', {})).services.length;
  assert.equal(afterCount, before);
});

test('updateService stating a volume initialization is refused and changes nothing', async () => {
  const service = await create({ runtime: { image: 'x', replicas: 2, profile: { runAs: null }, placement: { nodeIds: [] } } });
  const refusal = await refusalOf(() => t.caller.call('updateService', {
    serviceId: service.id,
    expectedGeneration: service.generation,
    service: spec({
      runtime: { image: 'y', replicas: 2, profile: { runAs: null }, placement: { nodeIds: [] } },
      volumes: [{
        mountPath: '/etc/extra', readOnly: true, driver: 'local',
        initialization: { kind: 'import', source: { kind: 'docker-volume', volumeName: 'extra' } },
      } as never],
    }),
  }));
  assert.equal(refusal.code, 'invalid-request');
  assertFieldProblems(refusal, [
    ['request.service.volumes[0].initialization', 'field-invalid', 'is server-managed: set it with setServiceVolumeInitialization'],
  ]);
  assert.deepEqual(await t.cloudly.serviceManager.getService(service.id), service);
});

test('updateService is compare-and-swap on the generation; the spec revision bumps only with the runtime', async () => {
  // Two replicas keep the volumes unclaimable, so no claim freezes anything here.
  const runtime = { image: 'app:1', replicas: 2, profile: { runAs: null }, placement: { nodeIds: ['n1'] } };
  const service = await create({ runtime });
  const renamed = (await t.caller.call('updateService', {
    serviceId: service.id, expectedGeneration: 1, service: spec({ name: 'renamed', runtime }),
  })).service;
  assert.equal(renamed.generation, 2);
  assert.equal(renamed.specRevision, 1);
  assert.equal(renamed.name, 'renamed');
  const stale = await refusalOf(() => t.caller.call('updateService', {
    serviceId: service.id, expectedGeneration: 1, service: spec({ runtime }),
  }));
  assert.equal(stale.code, 'conflict');
  const upgraded = (await t.caller.call('updateService', {
    serviceId: service.id, expectedGeneration: 2, service: spec({ name: 'renamed', runtime: { ...runtime, image: 'app:2' } }),
  })).service;
  assert.equal(upgraded.specRevision, 2);
  assert.equal(upgraded.runtime.image, 'app:2');
  const missing = await refusalOf(() => t.caller.call('updateService', {
    serviceId: 'svc-missing', expectedGeneration: 1, service: spec(),
  }));
  assert.equal(missing.code, 'not-found');
});

test('a stored initialization stays with its mount path across updates and goes with a removed volume', async () => {
  const runtime = { image: 'app:1', replicas: 2, profile: { runAs: null }, placement: { nodeIds: ['n1'] } };
  const service = await create({ runtime });
  const initialization = { kind: 'import', source: { kind: 'docker-volume', volumeName: 'legacy_extra' } } as const;
  const set = (await t.caller.call('setServiceVolumeInitialization', {
    serviceId: service.id, mountPath: '/etc/extra', expected: null, initialization,
  })).service;
  // Reordered and with another volume added: the initialization follows the mount path.
  const reordered = (await t.caller.call('updateService', {
    serviceId: service.id,
    expectedGeneration: set.generation,
    service: spec({
      runtime,
      volumes: [
        { mountPath: '/new', readOnly: false, driver: 'local' },
        { mountPath: '/etc/extra', readOnly: false, driver: 'local' },
      ],
    }),
  })).service;
  assert.deepEqual(reordered.volumes.map((volume) => volume.initialization), [undefined, initialization]);
  const removed = (await t.caller.call('updateService', {
    serviceId: service.id,
    expectedGeneration: reordered.generation,
    service: spec({ runtime, volumes: [{ mountPath: '/new', readOnly: false, driver: 'local' }] }),
  })).service;
  assert.equal(removed.volumes.length, 1);
  const readded = (await t.caller.call('updateService', {
    serviceId: service.id,
    expectedGeneration: removed.generation,
    service: spec({ runtime, volumes: [{ mountPath: '/etc/extra', readOnly: false, driver: 'local' }] }),
  })).service;
  assert.equal(readded.volumes[0].initialization, undefined);
});

test('createService refuses an invalid spec with every reason', async () => {
  const refusal = await refusalOf(() => t.caller.call('createService', {
    service: { ...spec(), name: '', volumes: [{ mountPath: 'data', readOnly: false, driver: 'local' }] },
  }));
  assert.equal(refusal.code, 'invalid-request');
  assertFieldProblems(refusal, [
    ['request.service.name', 'field-invalid', 'must be a string of 1-63 characters'],
    ['request.service.volumes[0].mountPath', 'field-invalid', 'must be an absolute path'],
  ]);
});

test('createService refuses a name that is not a DNS label and an image that is not an image reference, by path; nothing is stored', async () => {
  const before = (await t.caller.call('getServices', {})).services.length;
  const refusal = await refusalOf(() => t.caller.call('createService', {
    service: { ...spec(), name: 'Bad Name!', runtime: { ...spec().runtime, image: 'registry.example.com/<b>x</b>:1' } },
  }));
  assert.equal(refusal.code, 'invalid-request');
  assertFieldProblems(refusal, [
    ['request.service.name', 'field-invalid', "must be lowercase letters, digits and '-', starting and ending with a letter or digit (a DNS label)"],
    ['request.service.runtime.image', 'field-invalid', 'must be an image reference: [registry[:port]/]lowercase/path[:tag][@digest]'],
  ]);
  assert.equal((await t.caller.call('getServices', {})).services.length, before);
});
