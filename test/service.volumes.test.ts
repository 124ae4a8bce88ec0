import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import type { IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import type { TServiceVolumeInitialization } from '../ts/interfaces/data/servicevolume.js';
import { assertFieldProblems } from './helpers/refusals.js';

let t: ITestCloudly;
let clusterId: string;

before(async () => {
  t = await startTestCloudly();
  clusterId = (await t.createCluster('volumes')).cluster.id;
  await t.addNodes(clusterId, 'n1');
});

after(async () => {
  await t.stop();
});

/** Two replicas keep the volume unclaimable, so initialization stays writable. */
const create = async (replicas = 2, overrides: Partial<IServiceWritableSpec> = {}) =>
  (await t.caller.call('createService', {
    service: {
      name: 'app',
      organizationId: 'org1',
      clusterId,
      runtime: { image: 'app:1', replicas, profile: { runAs: { user: 1000, group: 1000 } }, placement: { nodeIds: ['n1'] } },
      volumes: [{ mountPath: '/data', readOnly: false, driver: 'local' }],
      ...overrides,
    },
  })).service;

const setInitialization = (
  serviceId: string,
  mountPath: string,
  expected: TServiceVolumeInitialization | null,
  initialization: TServiceVolumeInitialization | null,
) => t.caller.call('setServiceVolumeInitialization', {
  serviceId, mountPath, expected, initialization,
});

const empty = (mode: number): TServiceVolumeInitialization => ({ kind: 'empty', ownership: { kind: 'run-as', mode } });

test('setServiceVolumeInitialization writes the value and answers the service', async () => {
  const service = await create();
  const answer = await setInitialization(service.id, '/data', null, empty(0o750));
  assert.deepEqual(answer.service.volumes[0].initialization, empty(0o750));
  assert.equal(answer.service.generation, service.generation + 1);
  const replaced = await setInitialization(service.id, '/data', empty(0o750), {
    kind: 'import', source: { kind: 'docker-volume', volumeName: 'app_data' },
  });
  assert.equal(replaced.service.volumes[0].initialization?.kind, 'import');
  const cleared = await setInitialization(service.id, '/data', replaced.service.volumes[0].initialization ?? null, null);
  assert.equal(cleared.service.volumes[0].initialization, undefined);
});

test('volume-not-found: an unknown service, an unknown or inexact mount path', async () => {
  const service = await create();
  for (const [serviceId, mountPath] of [['svc-none', '/data'], [service.id, '/other'], [service.id, '/data/']]) {
    const refusal = await refusalOf(() => setInitialization(serviceId, mountPath, null, empty(0o700)));
    assert.equal(refusal.code, 'volume-not-found');
    assert.equal(refusal.retryable, false);
  }
});

test('volume-initialization-invalid carries every reason and stores nothing', async () => {
  const service = await create();
  const refusal = await refusalOf(() => setInitialization(
    service.id,
    '/data',
    { kind: 'empty', ownership: { kind: 'run-as', mode: -1 } },
    { kind: 'empty', ownership: { kind: 'explicit', uid: -5, gid: 0, mode: 0o4777 } },
  ));
  assert.deepEqual(refusal, {
    code: 'volume-initialization-invalid',
    retryable: false,
    reasons: [
      'request.expected.ownership.mode must be a non-negative integer',
      'request.initialization.ownership.uid must be an integer from 0 to 4294967294',
      'request.initialization.ownership.mode must not set the setuid bit (0o4000)',
    ],
  });
  assert.equal((await t.cloudly.serviceManager.getService(service.id))?.generation, service.generation);
});

test('conflict: any stored value other than expected refuses', async () => {
  const service = await create();
  await setInitialization(service.id, '/data', null, empty(0o700));
  const stale = await refusalOf(() => setInitialization(service.id, '/data', null, empty(0o750)));
  assert.deepEqual(stale, { code: 'conflict', retryable: false, reasons: ['the stored initialization is not the expected one'] });
  const wrong = await refusalOf(() => setInitialization(service.id, '/data', empty(0o755), empty(0o750)));
  assert.equal(wrong.code, 'conflict');
  assert.deepEqual((await t.cloudly.serviceManager.getService(service.id))?.volumes[0].initialization, empty(0o700));
});

test('volume-initialization-bound: no change once a claim of the volume is decided', async () => {
  const service = await create(1);
  await setInitialization(service.id, '/data', null, empty(0o700));
  const refusal = await refusalOf(() => setInitialization(service.id, '/data', empty(0o700), empty(0o750)));
  assert.equal(refusal.code, 'volume-initialization-bound');
  assert.equal(refusal.retryable, false);
  const clear = await refusalOf(() => setInitialization(service.id, '/data', empty(0o700), null));
  assert.equal(clear.code, 'volume-initialization-bound');
  assert.deepEqual((await t.cloudly.serviceManager.getService(service.id))?.volumes[0].initialization, empty(0o700));
});

test('50 concurrent writes with the same expected value: one wins, the rest conflict', async () => {
  const service = await create();
  const attempts = Array.from({ length: 50 }, (_, index) =>
    setInitialization(service.id, '/data', null, empty(0o700 + index)).then(
      (answer) => ({ won: true as const, mode: index, answer }),
      (error: { errorData?: { code?: string } }) => ({ won: false as const, mode: index, code: error.errorData?.code }),
    ));
  const outcomes = await Promise.all(attempts);
  const winners = outcomes.filter((outcome) => outcome.won);
  assert.equal(winners.length, 1);
  assert.deepEqual(outcomes.filter((outcome) => !outcome.won).map((outcome) => outcome.code), Array(49).fill('conflict'));
  const stored = await t.cloudly.serviceManager.getService(service.id);
  assert.deepEqual(stored?.volumes[0].initialization, empty(0o700 + winners[0].mode));
  assert.equal(stored?.generation, service.generation + 1);
});

test('a request of the wrong shape is refused before anything is read', async () => {
  const refusal = await refusalOf(() => t.caller.call(
    'setServiceVolumeInitialization',
    { serviceId: 'svc-x', mountPath: '/data', initialization: null } as never,
  ));
  assert.equal(refusal.code, 'invalid-request');
  assertFieldProblems(refusal, [['request.expected', 'field-required', 'is required']]);
});

test('a non-admin identity is refused', async () => {
  const service = await create();
  const user = await t.cloudly.auth.issueIdentity({ id: 'u1', username: 'user', role: 'user' });
  const refusal = await refusalOf(() => t.admin.fire('setServiceVolumeInitialization', {
    identity: user, serviceId: service.id, mountPath: '/data', expected: null, initialization: empty(0o700),
  }));
  assert.deepEqual(refusal, { code: 'forbidden', retryable: false, reasons: ['role-not-allowed'], causes: [{ path: 'identity.role', message: 'must be admin' }] });
  assert.equal((await t.cloudly.serviceManager.getService(service.id))?.volumes[0].initialization, undefined);
});
