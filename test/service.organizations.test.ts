import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import { organizationKind, organizationRegistryStep, upgradeStepKind } from '../ts/manager.service/organizations.js';

/**
 * The organization registry keeps what was acknowledged: a deletion is refused `conflict` while
 * services name the organization, and an organization deleted stays deleted across a restart
 * (Cloudly registers the organizations of stored services once, on the first start of a database
 * from before the registry, and never again).
 */

describe('organization deletion', () => {
  let t: ITestCloudly;
  let clusterId: string;
  before(async () => {
    t = await startTestCloudly();
    clusterId = (await t.createCluster('organizations')).cluster.id;
  });
  after(async () => { await t.stop(); });

  const spec = (nameArg: string, organizationIdArg: string): IServiceWritableSpec => ({
    name: nameArg,
    organizationId: organizationIdArg,
    clusterId,
    runtime: { image: 'registry.example/app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
    volumes: [],
  });

  const organizationOf = async (idArg: string) =>
    (await t.caller.call('getOrganizations', {})).organizations.find((organization) => organization.id === idArg) ?? null;

  test('refused conflict organization-has-services while services name it, each service listed; nothing changes', async () => {
    const first = (await t.caller.call('createService', { service: spec('first', 'org-busy') })).service;
    const second = (await t.caller.call('createService', { service: spec('second', 'org-busy') })).service;
    const registered = (await organizationOf('org-busy'))!;
    const refusal = await refusalOf(() => t.caller.call('deleteOrganization', { organizationId: 'org-busy', expectedGeneration: registered.generation }));
    assert.equal(refusal.code, 'conflict');
    assert.deepEqual(refusal.reasons, ['organization-has-services']);
    assert.deepEqual(
      (refusal.causes as Array<{ path: string; message: string }>).slice().sort((a, b) => a.message.localeCompare(b.message)),
      [{ path: 'request.organizationId', message: `named by service ${first.id} (first)` }, { path: 'request.organizationId', message: `named by service ${second.id} (second)` }]
        .sort((a, b) => a.message.localeCompare(b.message)),
    );
    assert.deepEqual(await organizationOf('org-busy'), registered);
    // Once its services are gone, the organization may go.
    for (const service of [first, second]) {
      assert.equal((await t.caller.call('deleteService', { serviceId: service.id, expectedGeneration: service.generation, force: true })).deleted, true);
    }
    assert.deepEqual(await t.caller.call('deleteOrganization', { organizationId: 'org-busy', expectedGeneration: registered.generation }), { organizationId: 'org-busy', deleted: true });
    assert.equal(await organizationOf('org-busy'), null);
  });

  test('an acknowledged deleteOrganization holds across a restart, also while a service still names the organization', async () => {
    // The organization of the issue: its service went, then the organization was deleted.
    const service = (await t.caller.call('createService', { service: spec('gone', 'org-1') })).service;
    await t.caller.call('deleteService', { serviceId: service.id, expectedGeneration: service.generation, force: true });
    const org1 = (await organizationOf('org-1'))!;
    assert.deepEqual(await t.caller.call('deleteOrganization', { organizationId: 'org-1', expectedGeneration: org1.generation }), { organizationId: 'org-1', deleted: true });
    // A service that names an organization deleted under it (a deletion acknowledged before they
    // were refused, or one that raced the service's creation): the registry without its organization.
    const orphan = (await t.caller.call('createService', { service: spec('orphan', 'org-2') })).service;
    const org2 = (await organizationOf('org-2'))!;
    assert.ok(await t.cloudly.store.remove(organizationKind, 'org-2', org2.generation));
    await t.restart();
    assert.deepEqual((await t.caller.call('getOrganizations', {})).organizations.map((organization) => organization.id).filter((id) => id === 'org-1' || id === 'org-2'), []);
    await waitFor(async () => {
      const { status } = await t.caller.call('getServiceRuntimeStatus', { serviceId: orphan.id });
      return status.state === 'refused' && status.reason === 'organization-missing';
    }, 'the orphaned service refused organization-missing', 10_000);
    // And a second restart brings nothing back either.
    await t.restart();
    assert.equal(await organizationOf('org-2'), null);
  });

  test('a database from before the registry: the first start registers the organizations its services name, once', async () => {
    const service = (await t.caller.call('createService', { service: spec('older', 'org-older') })).service;
    // As such a database is: services, no organization registered, no record of the step.
    for (const organization of await t.cloudly.store.find(organizationKind, {})) {
      assert.ok(await t.cloudly.store.remove(organizationKind, organization.id, organization.generation));
    }
    const step = (await t.cloudly.store.get(upgradeStepKind, organizationRegistryStep))!;
    assert.ok(await t.cloudly.store.remove(upgradeStepKind, organizationRegistryStep, step.generation));
    await t.restart();
    const registered = (await organizationOf('org-older'))!;
    assert.equal(registered.name, 'org-older');
    assert.ok(await t.cloudly.store.get(upgradeStepKind, organizationRegistryStep), 'the step is recorded');
    // Deleted once its service is gone, it stays deleted from then on.
    await t.caller.call('deleteService', { serviceId: service.id, expectedGeneration: service.generation, force: true });
    await t.caller.call('deleteOrganization', { organizationId: 'org-older', expectedGeneration: registered.generation });
    await t.restart();
    assert.equal(await organizationOf('org-older'), null);
  });
});
