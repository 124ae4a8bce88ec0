import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { createCli, jsonOf, type ICli } from './cli.fixture.js';
import { enrollSecretRecipient, openSealedText } from './helpers/secrets.js';
import type { ISecretRecipientKeyPair } from '../ts/core/sealing.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { ISecretGroup } from '../ts/interfaces/data/secret.js';

/**
 * `cloudly secrets create|set|reseal|list|delete` against a real server: the value only on stdin,
 * sealed in the CLI; what the relay receives opens to it with the relay's key, and the value is
 * never printed.
 */

let t: ITestCloudly;
let cli: ICli;
let clusterId: string;
let relay: CloudlyRelayClient;
let keys: ISecretRecipientKeyPair;

before(async () => {
  t = await startTestCloudly();
  const { cluster, relayToken } = await t.createCluster('cli-secrets');
  clusterId = cluster.id;
  relay = await t.connectRelay(relayToken);
  await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).some((session) => t.cloudly.clusterManager.isElected(session)), 'relay elected');
  keys = await enrollSecretRecipient(relay);
  cli = await createCli();
  await cli.login(t);
});

after(async () => {
  await t.stop();
  await cli.dispose();
});

test('secrets create, set from stdin, list, reseal after a new enrollment and delete; the value is never printed', async () => {
  const marker = 'cli-secret-value-5e1d';
  const created = await cli.run(['-o', 'json', 'secrets', 'create', 'cli-token', '--cluster', clusterId, '--environment', 'production', '--tag', 'team:web']);
  assert.equal(created.code, 0, created.stderr);
  assert.equal((jsonOf(created) as { group: ISecretGroup }).group.id, 'cli-token');
  const set = await cli.run(['-o', 'json', 'secrets', 'set', 'cli-token'], `${marker}\n`);
  assert.equal(set.code, 0, set.stderr);
  const group = jsonOf(set) as ISecretGroup;
  assert.equal(group.versions[0].valueBytes, marker.length, 'one trailing newline is dropped');
  assert.equal(`${set.stdout}${set.stderr}`.includes(marker), false, 'the value is never printed');
  const stored = (await t.caller.call('getSecretGroups', {})).groups.find((candidate) => candidate.id === 'cli-token')!;
  const versionId = stored.versions[0].secretVersionId;
  // A service naming it receives the copy the CLI sealed; the relay opens it.
  const service = (await t.caller.call('createService', { service: {
    name: 'cli-user', organizationId: 'org1', clusterId, volumes: [],
    runtime: { image: 'app:1', replicas: 0, profile: { runAs: null }, placement: { nodeIds: [] } },
    secrets: { TOKEN: { secretId: 'cli-token', secretVersionId: versionId } },
  } })).service;
  await t.cloudly.desiredStateManager.settled(clusterId);
  const desired = await relay.fire('getClusterPlatformDesiredState', {});
  assert.equal(desired.unchanged, false);
  const copy = desired.unchanged ? undefined : desired.desiredState.services.find((candidate) => candidate.serviceId === service.id)!.secrets[0];
  assert.equal(await openSealedText(keys, copy!.sealed), marker);

  keys = await enrollSecretRecipient(relay);
  const list = await cli.run(['secrets', 'list']);
  assert.equal(list.code, 0, list.stderr);
  assert.match(list.stdout, /cli-token\s+production\s+\S+\s+v1-\S+ \(v1\)\s+required/);
  const resealed = await cli.run(['-o', 'json', 'secrets', 'reseal', 'cli-token', '--version', versionId], `${marker}\n`);
  assert.equal(resealed.code, 0, resealed.stderr);
  assert.equal((jsonOf(resealed) as ISecretGroup).versions[0].clusters[0].state, 'sealed');
  assert.match((await cli.run(['secrets', 'list'])).stdout, /cli-token\s+production\s+\S+\s+v1-\S+ \(v1\)\s+-/);

  const inUse = await cli.run(['secrets', 'delete', 'cli-token', '--expect-current']);
  assert.notEqual(inUse.code, 0);
  assert.match(inUse.stderr, /secret-group-in-use/);
  const fromArgument = await cli.run(['secrets', 'set', 'cli-token', marker]);
  assert.notEqual(fromArgument.code, 0, 'the value is never an argument');
  const empty = await cli.run(['secrets', 'set', 'cli-token'], '');
  assert.notEqual(empty.code, 0, 'an empty stdin adds no version');
  assert.match(empty.stderr, /no value on stdin/);
  assert.equal((await t.caller.call('getSecretGroups', {})).groups.find((candidate) => candidate.id === 'cli-token')!.versions.length, 1);
});
