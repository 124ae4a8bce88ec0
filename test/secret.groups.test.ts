import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { enrollSecretRecipient, openSealedText } from './helpers/secrets.js';
import { assertFieldProblems } from './helpers/refusals.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import { sealSecretVersion } from '../ts/client/secrets.js';
import { sealSecret, type ISecretRecipientKeyPair } from '../ts/core/sealing.js';
import { serviceSecretBinding } from '../ts/interfaces/data/secret.js';
import type { IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import type { IClusterPlatformDesiredService } from '../ts/interfaces/data/desiredstate.js';
import type { IAuditEvent } from '../ts/interfaces/data/audit.js';

/**
 * Secret groups Cloudly cannot read, end to end over the real server: the value is sealed in the
 * client (ts/client/secrets.ts) to each cluster's enrolled recipient, Cloudly stores and delivers
 * only the sealed copies, the relay opens its copy from the desired state with its private key; a
 * service names a version by reference, with its plain environment beside it; the verdict refuses
 * a missing version and a too-large environment; a value in clear is refused and found nowhere.
 */

interface ICluster {
  clusterId: string;
  relay: CloudlyRelayClient;
  keys: ISecretRecipientKeyPair;
}

let t: ITestCloudly;
let a: ICluster;
let b: ICluster;

const connect = async (nameArg: string): Promise<ICluster> => {
  const { cluster, relayToken } = await t.createCluster(nameArg);
  await t.addNodes(cluster.id, 'n1');
  const relay = await t.connectRelay(relayToken);
  await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).some((session) => t.cloudly.clusterManager.isElected(session)), 'relay elected');
  return { clusterId: cluster.id, relay, keys: await enrollSecretRecipient(relay) };
};

const spec = (clusterIdArg: string, overridesArg: Partial<IServiceWritableSpec> = {}): IServiceWritableSpec => ({
  name: 'api',
  organizationId: 'org1',
  clusterId: clusterIdArg,
  runtime: { image: 'api:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['n1'] } },
  volumes: [],
  ...overridesArg,
});

const desiredService = async (clusterArg: ICluster, serviceIdArg: string): Promise<IClusterPlatformDesiredService> => {
  await t.cloudly.desiredStateManager.settled(clusterArg.clusterId);
  const answer = await clusterArg.relay.fire('getClusterPlatformDesiredState', {});
  assert.equal(answer.unchanged, false);
  const found = answer.desiredState!.services.find((service) => service.serviceId === serviceIdArg);
  assert.ok(found, 'the service is in the desired state');
  return found;
};

const statusOf = (serviceIdArg: string) => t.caller.call('getServiceRuntimeStatus', { serviceId: serviceIdArg });

const value = (textArg: string) => new TextEncoder().encode(textArg);

before(async () => {
  t = await startTestCloudly();
  a = await connect('secrets-a');
  b = await connect('secrets-b');
});

after(async () => {
  await t.stop();
});

describe('secret groups', () => {
  test('a version sealed in the client reaches each cluster\'s relay, which alone opens it; rotation, retention, audit without values', async () => {
    const created = await t.caller.call('createSecretGroup', {
      group: { key: 'db-password', tags: ['team:payments'], environment: 'production', clusterIds: [a.clusterId, b.clusterId], retainedVersions: 2 },
    });
    assert.equal(created.group.id, 'db-password');
    assert.deepEqual(created.group.versions, []);
    const first = await sealSecretVersion(t.caller, 'db-password', value('first-value-7f3a'));
    assert.equal(first.version, 1);
    assert.deepEqual(first.group.versions[0].clusters.map((cluster) => [cluster.clusterId, cluster.state]), [[a.clusterId, 'sealed'], [b.clusterId, 'sealed']]);
    assert.equal(first.group.versions[0].valueBytes, 'first-value-7f3a'.length);
    assert.equal(JSON.stringify(first.group).includes('ciphertext'), false, 'metadata only: no sealed copy in the answer');

    // A service in each cluster names the version; each relay gets its own copy and opens it.
    const serviceA = (await t.caller.call('createService', { service: spec(a.clusterId, {
      environment: { LOG_LEVEL: 'info' },
      secrets: { DB_PASSWORD: { secretId: 'db-password', secretVersionId: first.secretVersionId } },
    }) })).service;
    assert.deepEqual(serviceA.environment, { LOG_LEVEL: 'info' });
    const serviceB = (await t.caller.call('createService', { service: spec(b.clusterId, {
      secrets: { DB_PASSWORD: { secretId: 'db-password', secretVersionId: first.secretVersionId } },
    }) })).service;
    const desiredA = await desiredService(a, serviceA.id);
    assert.deepEqual(desiredA.environment, { LOG_LEVEL: 'info' });
    assert.equal(desiredA.secrets.length, 1);
    assert.deepEqual(desiredA.secrets[0].sealed.binding, serviceSecretBinding(a.clusterId, 'db-password', first.secretVersionId, 1));
    assert.equal(await openSealedText(a.keys, desiredA.secrets[0].sealed), 'first-value-7f3a');
    await assert.rejects(openSealedText(b.keys, desiredA.secrets[0].sealed), 'another cluster\'s key does not open it');
    const desiredB = await desiredService(b, serviceB.id);
    assert.equal(await openSealedText(b.keys, desiredB.secrets[0].sealed), 'first-value-7f3a');
    assert.deepEqual((await statusOf(serviceA.id)).missingSecrets, []);

    // Rotation: versions 2 and 3; with two retained, version 1 goes and the service naming it is refused, with the reference.
    const second = await sealSecretVersion(t.caller, 'db-password', value('second-value-91c2'));
    const third = await sealSecretVersion(t.caller, 'db-password', value('third-value-0d44'));
    assert.deepEqual(third.group.versions.map((version) => version.version), [3, 2]);
    assert.equal(second.version, 2);
    await waitFor(async () => (await statusOf(serviceA.id)).status.reason === 'secret-version-missing', 'the verdict names the missing version');
    const status = await statusOf(serviceA.id);
    assert.deepEqual(status.status.state, 'refused');
    assert.deepEqual(status.missingSecrets, [{ name: 'DB_PASSWORD', secretId: 'db-password', secretVersionId: first.secretVersionId, cause: 'version-missing' }]);
    assert.deepEqual((await desiredService(a, serviceA.id)).secrets, [], 'a version that is gone is not delivered');

    // Moving the service to the new version delivers it and lifts the refusal.
    await t.caller.call('updateService', { serviceId: serviceA.id, expectedGeneration: serviceA.generation, service: spec(a.clusterId, {
      environment: { LOG_LEVEL: 'info' },
      secrets: { DB_PASSWORD: { secretId: 'db-password', secretVersionId: third.secretVersionId } },
    }) });
    await waitFor(async () => (await statusOf(serviceA.id)).status.state !== 'refused', 'the refusal lifts');
    assert.equal(await openSealedText(a.keys, (await desiredService(a, serviceA.id)).secrets[0].sealed), 'third-value-0d44');

    // The audit records who changed which version, never a value or a sealed copy.
    const { events } = await t.caller.call('getAuditEvents', { limit: 200 }) as { events: IAuditEvent[] };
    const groupEvents = events.filter((event) => event.target.kind === 'CloudlySecretGroup');
    assert.ok(groupEvents.length >= 4, 'create and three versions are audited');
    assert.ok(groupEvents.every((event) => event.actor.id !== ''), 'each names its actor');
    const auditText = JSON.stringify(groupEvents);
    assert.match(auditText, new RegExp(`${third.secretVersionId}@3`), 'the audit names the version');
    for (const marker of ['first-value-7f3a', 'second-value-91c2', 'third-value-0d44', 'ciphertext']) {
      assert.equal(auditText.includes(marker), false, `the audit holds no ${marker}`);
    }
  });

  test('dry run and expectedGeneration: a dry run stores nothing, a stale generation and a version out of order are refused', async () => {
    const dry = await t.caller.call('createSecretGroup', { group: { key: 'dry-group', tags: [], environment: 'staging', clusterIds: [a.clusterId] }, dryRun: true });
    assert.equal(dry.group.id, 'dry-group');
    assert.deepEqual((await t.caller.call('getSecretGroups', {})).groups.filter((group) => group.id === 'dry-group'), []);
    const { group } = await t.caller.call('createSecretGroup', { group: { key: 'cas-group', tags: [], environment: 'staging', clusterIds: [a.clusterId] } });
    assert.equal((await refusalOf(() => t.caller.call('createSecretGroup', { group: { key: 'cas-group', tags: [], environment: 'x', clusterIds: [a.clusterId] } }))).reasons?.toString(), 'secret-group-exists');
    const previewed = await sealSecretVersion(t.caller, 'cas-group', value('preview'), { dryRun: true });
    assert.equal(previewed.group.versions.length, 1, 'the dry run answers the group as it would be');
    const [stored] = (await t.caller.call('getSecretGroups', {})).groups.filter((candidate) => candidate.id === 'cas-group');
    assert.deepEqual(stored.versions, [], 'nothing was stored');
    const sealed = await sealSecret(
      { recipientId: (await t.caller.call('getSecretRecipients', { clusterId: a.clusterId })).current!.recipientId, publicKey: a.keys.publicKey },
      serviceSecretBinding(a.clusterId, 'cas-group', 'v1-a', 1), value('x'),
    );
    const stale = await refusalOf(() => t.caller.call('addSecretVersion', {
      secretGroupId: 'cas-group', expectedGeneration: group.generation + 1, version: { secretVersionId: 'v1-a', version: 1, sealed: [sealed] },
    }));
    assert.deepEqual([stale.code, stale.reasons], ['conflict', ['generation-mismatch']]);
    const outOfOrder = await refusalOf(() => t.caller.call('addSecretVersion', {
      secretGroupId: 'cas-group', expectedGeneration: group.generation, version: { secretVersionId: 'v1-a', version: 2, sealed: [sealed] },
    }));
    assert.equal(outOfOrder.code, 'invalid-request', 'the binding names version 1, the request 2');
    assert.deepEqual(outOfOrder.reasons, ['secret-binding-mismatch']);
    const deleteDry = await t.caller.call('deleteSecretGroup', { secretGroupId: 'cas-group', expectedGeneration: group.generation, dryRun: true });
    assert.equal(deleteDry.deleted, true);
    assert.equal((await t.caller.call('getSecretGroups', {})).groups.some((candidate) => candidate.id === 'cas-group'), true, 'a dry-run delete keeps it');
    const staleDelete = await refusalOf(() => t.caller.call('deleteSecretGroup', { secretGroupId: 'cas-group', expectedGeneration: group.generation + 5 }));
    assert.deepEqual(staleDelete.reasons, ['generation-mismatch']);
    await t.caller.call('deleteSecretGroup', { secretGroupId: 'cas-group', expectedGeneration: group.generation });
    assert.equal((await t.caller.call('getSecretGroups', {})).groups.some((candidate) => candidate.id === 'cas-group'), false);
  });

  test('a sealed copy for a recipient the cluster does not hold, for another binding or missing a cluster is refused; a group in use is not deleted', async () => {
    const { group } = await t.caller.call('createSecretGroup', { group: { key: 'strict-group', tags: [], environment: 'production', clusterIds: [a.clusterId, b.clusterId] } });
    const recipientA = (await t.caller.call('getSecretRecipients', { clusterId: a.clusterId })).current!;
    const recipientB = (await t.caller.call('getSecretRecipients', { clusterId: b.clusterId })).current!;
    const forA = await sealSecret(recipientA, serviceSecretBinding(a.clusterId, 'strict-group', 'v1-s', 1), value('strict'));
    // Sealed to cluster a's key but stated for cluster b: b does not hold that recipient.
    const wrongRecipient = await sealSecret(recipientA, serviceSecretBinding(b.clusterId, 'strict-group', 'v1-s', 1), value('strict'));
    const refused = await refusalOf(() => t.caller.call('addSecretVersion', {
      secretGroupId: 'strict-group', expectedGeneration: group.generation, version: { secretVersionId: 'v1-s', version: 1, sealed: [forA, wrongRecipient] },
    }));
    assert.deepEqual([refused.code, refused.reasons], ['invalid-request', ['secret-recipient-unknown']]);
    assert.deepEqual((refused.causes as Array<{ path: string }>).map((cause) => cause.path), ['request.version.sealed[1].recipientId']);
    const missing = await refusalOf(() => t.caller.call('addSecretVersion', {
      secretGroupId: 'strict-group', expectedGeneration: group.generation, version: { secretVersionId: 'v1-s', version: 1, sealed: [forA] },
    }));
    assert.deepEqual(missing.reasons, ['secret-binding-mismatch']);
    const forB = await sealSecret(recipientB, serviceSecretBinding(b.clusterId, 'strict-group', 'v1-s', 1), value('strict'));
    const added = await t.caller.call('addSecretVersion', {
      secretGroupId: 'strict-group', expectedGeneration: group.generation, version: { secretVersionId: 'v1-s', version: 1, sealed: [forA, forB] },
    });
    const user = (await t.caller.call('createService', { service: spec(a.clusterId, {
      name: 'strict-user', secrets: { STRICT: { secretId: 'strict-group', secretVersionId: 'v1-s' } },
    }) })).service;
    const inUse = await refusalOf(() => t.caller.call('deleteSecretGroup', { secretGroupId: 'strict-group', expectedGeneration: added.group.generation }));
    assert.deepEqual([inUse.code, inUse.reasons], ['conflict', ['secret-group-in-use']]);
    assert.match(JSON.stringify(inUse.causes), new RegExp(user.id));
  });

  test('a service naming a version that does not exist, or not sealed for its cluster, is refused with the reference', async () => {
    await t.caller.call('createSecretGroup', { group: { key: 'only-b', tags: [], environment: 'production', clusterIds: [b.clusterId] } });
    const onlyB = await sealSecretVersion(t.caller, 'only-b', value('b-only'));
    const refused = await refusalOf(() => t.caller.call('createService', { service: spec(a.clusterId, {
      name: 'bad-refs',
      secrets: {
        GONE: { secretId: 'no-such-group', secretVersionId: 'v1' },
        ELSEWHERE: { secretId: 'only-b', secretVersionId: onlyB.secretVersionId },
      },
    }) }));
    assertFieldProblems(refused, [
      ['request.service.secrets.GONE', 'field-not-found', 'names no secret version: no-such-group/v1'],
      ['request.service.secrets.ELSEWHERE', 'field-not-found', `names no secret version sealed for cluster ${a.clusterId}: only-b/${onlyB.secretVersionId}`],
    ]);
  });

  test('environment and secret names are POSIX names, the plain environment is bounded, every reason named', async () => {
    const refused = await refusalOf(() => t.caller.call('createService', { service: spec(a.clusterId, {
      name: 'bad-env',
      environment: { '1BAD': 'x', 'GOOD': 'ok', 'NUL': 'a\u0000b', 'BIG': 'x'.repeat(40_000) },
      secrets: { GOOD: { secretId: 'db-password', secretVersionId: 'v1' }, 'has-dash': { secretId: 'db-password', secretVersionId: 'v1' } },
    }) }));
    assertFieldProblems(refused, [
      ['request.service.environment.1BAD', 'field-invalid'],
      ['request.service.environment.NUL', 'field-invalid'],
      ['request.service.environment', 'field-too-many', /at most 32768 bytes/],
      ['request.service.secrets.GOOD', 'field-duplicate'],
      ['request.service.secrets.has-dash', 'field-invalid'],
    ]);
  });

  test('a secret value sent in clear is refused secret-value-in-clear and found nowhere: data directory, log, audit, answers, snapshot', async () => {
    const marker = `clear-${randomBytes(12).toString('hex')}`;
    const answers: unknown[] = [];
    const inService = await refusalOf(() => t.caller.call('createService', { service: spec(a.clusterId, {
      name: 'clear', secrets: { TOKEN: marker as never },
    }) }));
    answers.push(inService);
    assert.deepEqual([inService.code, inService.reasons], ['invalid-request', ['secret-value-in-clear']]);
    const asObject = await refusalOf(() => t.caller.call('createService', { service: spec(a.clusterId, {
      name: 'clear', secrets: { TOKEN: { value: marker } as never },
    }) }));
    answers.push(asObject);
    assert.deepEqual(asObject.reasons, ['secret-value-in-clear']);
    const { group } = await t.caller.call('createSecretGroup', { group: { key: 'clear-group', tags: [], environment: 'production', clusterIds: [a.clusterId] } });
    const inVersion = await refusalOf(() => t.caller.call('addSecretVersion', {
      secretGroupId: 'clear-group', expectedGeneration: group.generation, version: { value: marker } as never,
    }));
    answers.push(inVersion);
    assert.deepEqual(inVersion.reasons, ['secret-value-in-clear']);
    const asCopy = await refusalOf(() => t.caller.call('addSecretVersion', {
      secretGroupId: 'clear-group', expectedGeneration: group.generation, version: { secretVersionId: 'v1', version: 1, sealed: [marker] } as never,
    }));
    answers.push(asCopy);
    assert.deepEqual(asCopy.reasons, ['secret-value-in-clear']);
    answers.push(await t.caller.call('getAuditEvents', { limit: 500 }), await t.caller.call('getSecretGroups', {}));
    assert.equal(JSON.stringify(answers).includes(marker), false, 'no refusal or answer repeats the value');
    await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the controllers are idle');
    assert.equal(t.logs.join('\n').includes(marker), false, 'the log never holds it');
    const snapshot = Buffer.from(await (await fetch(`${t.cloudly.baseUrl}/admin/snapshot`, { headers: { authorization: `Bearer ${t.identity.jwt}` } })).arrayBuffer());
    assert.ok(snapshot.length > 0 && snapshot.includes('CloudlySecretGroup'), 'the snapshot holds the groups');
    assert.equal(snapshot.includes(marker), false, 'the snapshot never holds it');
    const files = (await fsp.readdir(t.dataDir, { withFileTypes: true, recursive: true })).filter((entry) => entry.isFile());
    for (const file of files) {
      const bytes = await fsp.readFile(path.join(file.parentPath, file.name));
      assert.equal(bytes.includes(marker), false, `the data directory's ${file.name} never holds it`);
    }
  });

  test('a cluster that enrolls a new recipient shows reseal-required; the relay still opens with the previous key; a re-seal by a person holding the value makes it sealed again', async () => {
    await t.caller.call('createSecretGroup', { group: { key: 'reseal-group', tags: [], environment: 'production', clusterIds: [a.clusterId] } });
    const sealed = await sealSecretVersion(t.caller, 'reseal-group', value('reseal-value'));
    const user = (await t.caller.call('createService', { service: spec(a.clusterId, {
      name: 'reseal-user', secrets: { V: { secretId: 'reseal-group', secretVersionId: sealed.secretVersionId } },
    }) })).service;
    const oldKeys = a.keys;
    a.keys = await enrollSecretRecipient(a.relay);
    const groupOf = async () => (await t.caller.call('getSecretGroups', {})).groups.find((group) => group.id === 'reseal-group')!;
    assert.equal((await groupOf()).versions[0].clusters[0].state, 'reseal-required');
    // Still delivered, sealed to the previous key the relay keeps until its next enrollment.
    const delivered = (await desiredService(a, user.id)).secrets[0];
    assert.equal(await openSealedText(oldKeys, delivered.sealed), 'reseal-value');
    const lengthChanged = await refusalOf(() => sealSecretVersion(t.caller, 'reseal-group', value('another-length'), { reseal: sealed.secretVersionId }));
    assert.deepEqual(lengthChanged.reasons, ['secret-reseal-length-changed']);
    const resealed = await sealSecretVersion(t.caller, 'reseal-group', value('reseal-value'), { reseal: sealed.secretVersionId });
    assert.equal(resealed.version, 1);
    assert.equal(resealed.group.versions[0].clusters[0].state, 'sealed');
    assert.notEqual(resealed.group.versions[0].resealedAt, null);
    await waitFor(async () => (await desiredService(a, user.id)).secrets[0]?.sealed.recipientId !== delivered.sealed.recipientId, 'the re-sealed copy is delivered');
    assert.equal(await openSealedText(a.keys, (await desiredService(a, user.id)).secrets[0].sealed), 'reseal-value');
  });
});

describe('readiness target', () => {
  test('a routed service without a readiness target is refused readiness-target-undeclared until it states one; a bad target names every reason', async () => {
    const ports = [{ name: 'http', port: 8080, protocol: 'tcp' as const }, { name: 'dns', port: 53, protocol: 'udp' as const }];
    const routed = (await t.caller.call('createService', { service: spec(a.clusterId, {
      name: 'routed', ports, routes: [{ hostname: 'routed.example.com', targetPort: 'http' }],
    }) })).service;
    assert.equal(routed.readiness, null);
    await waitFor(async () => (await statusOf(routed.id)).status.reason === 'readiness-target-undeclared', 'refused for the missing target');
    const updated = (await t.caller.call('updateService', { serviceId: routed.id, expectedGeneration: routed.generation, service: spec(a.clusterId, {
      name: 'routed', ports, routes: [{ hostname: 'routed.example.com', targetPort: 'http' }], readiness: { kind: 'http', port: 'http', path: '/healthz' },
    }) })).service;
    assert.equal(updated.specRevision, routed.specRevision + 1, 'a readiness target is what the nodes run: a new spec revision');
    await waitFor(async () => (await statusOf(routed.id)).status.state === 'converging', 'the refusal lifts');
    assert.deepEqual((await desiredService(a, routed.id)).secrets, []);
    const refused = await refusalOf(() => t.caller.call('createService', { service: spec(a.clusterId, {
      name: 'bad-readiness', ports, readiness: { kind: 'http', port: 'dns', path: 'healthz' },
    }) }));
    assertFieldProblems(refused, [['request.service.readiness.port', 'field-invalid', 'must name a tcp port'], ['request.service.readiness.path', 'field-invalid']]);
    const badCommand = await refusalOf(() => t.caller.call('createService', { service: spec(a.clusterId, {
      name: 'bad-command', readiness: { kind: 'command', command: ['pg_isready', ''] },
    }) }));
    assertFieldProblems(badCommand, [['request.service.readiness.command[1]', 'field-invalid']]);
    const command = (await t.caller.call('createService', { service: spec(a.clusterId, {
      name: 'command-ready', readiness: { kind: 'command', command: ['pg_isready', '-q'] },
    }) })).service;
    assert.deepEqual(command.readiness, { kind: 'command', command: ['pg_isready', '-q'] });
  });
});

describe('secret manifest', () => {
  test('the relay reports which secret versions reached the workloads; the verdict waits secrets-pending and getServiceRuntimeStatus names what is missing', async () => {
    await t.caller.call('createSecretGroup', { group: { key: 'manifest-group', tags: [], environment: 'production', clusterIds: [a.clusterId] } });
    const version = await sealSecretVersion(t.caller, 'manifest-group', value('manifest-value'));
    const service = (await t.caller.call('createService', { service: spec(a.clusterId, {
      name: 'manifest-user', secrets: { API_KEY: { secretId: 'manifest-group', secretVersionId: version.secretVersionId } },
    }) })).service;
    const report = async (manifestArg: { secrets: Array<{ name: string; secretVersionId: string }>; bindingIds: string[] }) => {
      await t.cloudly.desiredStateManager.settled(a.clusterId);
      const desired = await a.relay.fire('getClusterPlatformDesiredState', {});
      const revision = desired.unchanged ? desired.revision : desired.desiredState.revision;
      await a.relay.fire('reportClusterPlatformObservedState', {
        desiredRevision: revision,
        services: [{ serviceId: service.id, nodeId: 'n1', specRevision: service.specRevision, replicas: 1, state: 'ready', manifest: manifestArg }],
      });
    };
    await report({ secrets: [{ name: 'API_KEY', secretVersionId: 'an-older-version' }], bindingIds: [] });
    await waitFor(async () => (await statusOf(service.id)).status.reason === 'secrets-pending', 'waits for the secret to reach the workload');
    assert.deepEqual((await statusOf(service.id)).manifestGaps, [{ nodeId: 'n1', secrets: ['API_KEY'], bindingIds: [] }]);
    await report({ secrets: [{ name: 'API_KEY', secretVersionId: version.secretVersionId }], bindingIds: [] });
    await waitFor(async () => (await statusOf(service.id)).status.state === 'converged', 'converged once the manifest lists it');
    assert.deepEqual((await statusOf(service.id)).manifestGaps, []);
    const refused = await refusalOf(() => a.relay.fire('reportClusterPlatformObservedState', {
      desiredRevision: 0,
      services: [{ serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'ready', manifest: { secrets: [{ name: 'API_KEY', value: 'x' }], bindingIds: [] } as never }],
    }));
    assert.equal(refused.code, 'invalid-request', 'a manifest names versions, never values');
  });
});
