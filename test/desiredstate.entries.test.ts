import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { seededRandom } from './helpers/embedded.js';
import { computeClusterPlatformDesiredStateDigest } from '../ts/interfaces/data/desiredstate.js';
import type { IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import type { IReq_Any_Cloudly_UpsertPlatformBinding } from '../ts/interfaces/requests/corestore.js';

/**
 * A cluster's desired state keeps each service's entry between computations while the service's
 * document and the entry's other inputs stay (ts/manager.desiredstate/serviceentries.ts). What it
 * computes must be what a computation from nothing computes, after every kind of change.
 */

let t: ITestCloudly;
let clusterId: string;

before(async () => {
  t = await startTestCloudly({ reconcileResyncMs: 3_600_000 });
  clusterId = (await t.createCluster('entries')).cluster.id;
  await t.addNodes(clusterId, 'n1', 'n2');
});

after(async () => {
  await t.stop();
});

const spec = (nameArg: string, imageArg: string, replicasArg: number): IServiceWritableSpec => ({
  name: nameArg,
  organizationId: 'org1',
  clusterId,
  runtime: { image: imageArg, replicas: replicasArg, profile: { runAs: null }, placement: { nodeIds: ['n1', 'n2'] } },
  ports: [{ name: 'http', port: 8080, protocol: 'tcp' }],
  routes: [{ hostname: `${nameArg}.example.test`, targetPort: 'http' }],
  volumes: [],
});

/** The content and digest as computed now (remembered entries), then from nothing: they must agree. */
const assertSameAsFromNothing = async (labelArg: string): Promise<void> => {
  const manager = t.cloudly.desiredStateManager;
  const remembered = await manager.computeContent(clusterId);
  const rememberedDigest = computeClusterPlatformDesiredStateDigest(remembered, manager.knownTexts);
  manager.forgetEntries();
  const fromNothing = await manager.computeContent(clusterId);
  assert.deepStrictEqual(JSON.parse(JSON.stringify(remembered)), JSON.parse(JSON.stringify(fromNothing)), `${labelArg}: the content`);
  assert.equal(rememberedDigest, computeClusterPlatformDesiredStateDigest(fromNothing), `${labelArg}: the digest`);
  assert.equal(rememberedDigest, computeClusterPlatformDesiredStateDigest(remembered), `${labelArg}: the digest without the kept texts`);
};

test('after 40 random changes (images, replicas, bindings, deletions, new services) each computation is the one from nothing', async () => {
  const random = seededRandom(51);
  const names: string[] = [];
  for (let index = 0; index < 5; index++) {
    names.push(`svc-${index}`);
    await t.caller.call('createService', { service: spec(`svc-${index}`, 'app:1', 1) });
  }
  await assertSameAsFromNothing('created');
  for (let step = 0; step < 40; step++) {
    const { services } = await t.caller.call('getServices', { clusterId }) as { services: Array<{ id: string; name: string; generation: number; runtime: IServiceWritableSpec['runtime']; deletionRequestedAt?: number }> };
    const live = services.filter((service) => service.deletionRequestedAt === undefined);
    const service = random.pick(live);
    const roll = random.next();
    let label: string;
    if (roll < 0.35) {
      label = `image of ${service.name}`;
      await t.caller.call('updateService', { serviceId: service.id, expectedGeneration: service.generation, service: spec(service.name, `app:${step}`, service.runtime.replicas) });
    } else if (roll < 0.55) {
      label = `replicas of ${service.name}`;
      await t.caller.call('updateService', { serviceId: service.id, expectedGeneration: service.generation, service: spec(service.name, service.runtime.image, 1 + (step % 3)) });
    } else if (roll < 0.75) {
      label = `a binding of ${service.name}`;
      await t.caller.call('upsertPlatformBinding', {
        platformBinding: { serviceId: service.id, capability: 'database', enabled: random.next() < 0.5, nodeId: 'n1' } as unknown as IReq_Any_Cloudly_UpsertPlatformBinding['request']['platformBinding'],
        expectedGeneration: null,
      }).catch(() => undefined);
    } else if (roll < 0.85 && live.length > 2) {
      label = `${service.name} deleted`;
      await t.caller.call('deleteService', { serviceId: service.id, expectedGeneration: service.generation, force: true });
    } else {
      label = `svc-${step + 10} created`;
      await t.caller.call('createService', { service: spec(`svc-${step + 10}`, 'app:1', 1) });
    }
    await assertSameAsFromNothing(`step ${step}, ${label}`);
  }
});

test('a new image of one service builds that one entry again; the others are remembered', async () => {
  const manager = t.cloudly.desiredStateManager;
  await manager.computeContent(clusterId);
  const { services } = await t.caller.call('getServices', { clusterId }) as { services: Array<{ id: string; name: string; generation: number; runtime: IServiceWritableSpec['runtime']; deletionRequestedAt?: number }> };
  const live = services.filter((service) => service.deletionRequestedAt === undefined);
  assert.ok(live.length >= 3, `several services to remember: ${live.length}`);
  await manager.computeContent(clusterId);
  const before = manager.entriesBuilt;
  await manager.computeContent(clusterId);
  assert.equal(manager.entriesBuilt - before, 0, 'nothing changed: nothing built');
  const [first] = live;
  const computations = manager.computations;
  await t.caller.call('updateService', { serviceId: first.id, expectedGeneration: first.generation, service: spec(first.name, 'app:new', first.runtime.replicas) });
  // The desired-state controller computes the cluster again for the change.
  await waitFor(() => manager.computations > computations && t.cloudly.reconciler.busyKeys === 0, 'the controller computed the change', 10_000);
  assert.equal(manager.entriesBuilt - before, 1, 'only the changed service was built again');
  const content = await manager.computeContent(clusterId);
  assert.equal(manager.entriesBuilt - before, 1, 'and is remembered as built');
  assert.equal(content.services.find((entry) => entry.serviceId === first.id)?.runtime.image, 'app:new');
});
