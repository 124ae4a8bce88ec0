import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { serviceKind, serviceRuntimeStatusKind } from '../ts/manager.service/service.manager.js';
import { assertFieldProblems } from './helpers/refusals.js';

/**
 * Services stored while `ports` and `routes` sat inside the runtime spec are moved beside it at
 * start: the document is written in the old shape directly into the store (as an older version left
 * it), Cloudly restarts, and the service reads back in the new shape with its spec revision, its
 * stored verdict and its routes intact.
 */

let t: ITestCloudly;
before(async () => { t = await startTestCloudly(); });
after(async () => { await t.stop(); });

const ports = [{ name: 'http', port: 8080, protocol: 'tcp' as const }];
const routes = [{ hostname: 'old.example.com', targetPort: 'http' }];

test('an old-shaped service is moved at start, keeps its spec revision and verdict, and the next update judges revisions on the new shape', async () => {
  const { cluster } = await t.createCluster('shape-migration');
  await t.addNodes(cluster.id, 'n1');
  const created = (await t.caller.call('createService', {
    service: {
      name: 'legacy', organizationId: 'org-1', clusterId: cluster.id,
      runtime: { image: 'registry.example/legacy:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['n1'] } },
      volumes: [],
    },
  })).service;
  // Rewrite it as an older version stored it: ports and routes inside the runtime spec, none beside
  // it, at spec revision 3.
  const stored = (await t.cloudly.store.get(serviceKind, created.id))!;
  const swapped = await t.cloudly.store.swap(serviceKind, created.id, stored.generation, {
    set: { runtime: { ...stored.runtime, ports, routes } as typeof stored.runtime, specRevision: 3 },
    unset: ['ports', 'routes'],
  });
  assert.ok(swapped, 'the old shape was written');
  // The verdict an older version stored on that revision.
  await waitFor(async () => (await t.cloudly.store.get(serviceRuntimeStatusKind, created.id)) !== null, 'a first verdict');
  const verdict = (await t.cloudly.store.get(serviceRuntimeStatusKind, created.id))!;
  await t.cloudly.store.swap(serviceRuntimeStatusKind, created.id, verdict.generation, { set: { specRevision: 3 } });

  await t.restart();

  const raw = (await t.cloudly.store.get(serviceKind, created.id))!;
  assert.deepEqual(Object.keys(raw.runtime).sort(), ['image', 'placement', 'profile', 'replicas'], 'nothing but execution policy is left in the runtime spec');
  assert.deepEqual(raw.ports, ports);
  assert.deepEqual(raw.routes, routes);
  assert.equal(raw.specRevision, 3, 'the move is not a new spec revision');
  assert.ok(t.logs.some((line) => line.includes('moved service ports and routes out of the runtime spec')));

  const { service } = await t.caller.call('getServiceById', { serviceId: created.id });
  assert.deepEqual(service.ports, ports);
  assert.deepEqual(service.routes, routes);
  assert.equal(service.specRevision, 3);
  assert.equal((await t.cloudly.store.get(serviceRuntimeStatusKind, created.id))!.specRevision, 3, 'the stored verdict still names the revision');

  // The hostname the moved service declares is still its own: another service cannot take it.
  const taken = await t.caller.call('createService', {
    service: {
      name: 'thief', organizationId: 'org-1', clusterId: cluster.id,
      runtime: { image: 'registry.example/thief:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
      ports, routes,
      volumes: [],
    },
  }).then(() => null, (error: { errorData?: Record<string, unknown> }) => error.errorData ?? {});
  assertFieldProblems(taken ?? {}, [['request.service.routes[0].hostname', 'field-duplicate', `repeats the hostname of a route of service ${created.id}`]]);

  // Writing the same spec back in the new shape is no new revision; changing a route is one.
  const writable = { name: service.name, organizationId: service.organizationId, clusterId: service.clusterId, runtime: service.runtime, ports, routes, volumes: [] };
  const same = (await t.caller.call('updateService', { serviceId: created.id, expectedGeneration: service.generation, service: writable })).service;
  assert.equal(same.specRevision, 3);
  const moved = (await t.caller.call('updateService', {
    serviceId: created.id,
    expectedGeneration: same.generation,
    service: { ...writable, routes: [{ hostname: 'new.example.com', targetPort: 'http' }] },
  })).service;
  assert.equal(moved.specRevision, 4);

  // A second start finds nothing left to move.
  const before = (await t.cloudly.store.get(serviceKind, created.id))!.generation;
  await t.restart();
  assert.equal((await t.cloudly.store.get(serviceKind, created.id))!.generation, before);
});

test('the runtime spec refuses ports and routes inside it, by path', async () => {
  const { cluster } = await t.createCluster('shape-refusal');
  const refused = await t.caller.call('createService', {
    service: {
      name: 'inside', organizationId: 'org-1', clusterId: cluster.id,
      runtime: { image: 'registry.example/x:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] }, ports, routes } as never,
      volumes: [],
    },
  }).then(() => null, (error: { errorData?: { code?: string; reasons?: string[] } }) => error.errorData);
  assert.equal(refused?.code, 'invalid-request');
  assertFieldProblems((refused ?? {}) as Record<string, unknown>, [
    ['request.service.runtime.ports', 'field-unknown', 'is not a known member'],
    ['request.service.runtime.routes', 'field-unknown', 'is not a known member'],
  ]);
});
