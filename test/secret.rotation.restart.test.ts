import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { sealSecretVersion } from '../ts/client/secrets.js';
import type { ISecretRecipientKeyPair } from '../ts/core/sealing.js';
import { cloudlyProcessEnv, killHard, startCloudlyProcess, type ICloudlyProcess } from './helpers/process.js';
import { enrollSecretRecipient, openSealedText } from './helpers/secrets.js';
import { waitFor } from './helpers/cloudly.js';

/**
 * kill -9 during rotations: a version is one compare-and-swap write of its group, so what a
 * restart finds is each version whole (one sealed copy per cluster, each opening to that
 * version's value) or absent, never a half-sealed set, and every acknowledged rotation is there.
 */

const adminPassword = 'process-admin-password';

const login = async (processArg: ICloudlyProcess): Promise<CloudlyAdminClient> => {
  const admin = new CloudlyAdminClient(processArg.baseUrl);
  await admin.login('admin', adminPassword);
  return admin;
};

/** A relay of the cluster, enrolled once it is elected (an unelected relay's enrollment is refused `unavailable`). */
const enrolledRelay = async (baseUrlArg: string, tokenArg: string): Promise<{ relay: CloudlyRelayClient; keys: ISecretRecipientKeyPair }> => {
  const relay = await CloudlyRelayClient.connect(baseUrlArg, tokenArg, { reconnect: false });
  let keys: ISecretRecipientKeyPair | null = null;
  await waitFor(async () => {
    try {
      keys = await enrollSecretRecipient(relay);
      return true;
    } catch {
      return false;
    }
  }, 'the relay is elected and enrolled');
  return { relay, keys: keys! };
};

test('kill -9 during rotations leaves each version whole or absent, and keeps every acknowledged one', async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-rotation-'));
  const env = cloudlyProcessEnv(dataDir);
  let server = await startCloudlyProcess(env);
  const relays: CloudlyRelayClient[] = [];
  try {
    const admin = await login(server);
    const clusters: Array<{ id: string; keys: ISecretRecipientKeyPair; relayToken: string }> = [];
    for (const name of ['rot-a', 'rot-b']) {
      const { cluster, relayToken } = await admin.call('createCluster', { name });
      const { relay, keys } = await enrolledRelay(server.baseUrl, relayToken);
      relays.push(relay);
      clusters.push({ id: cluster.id, keys, relayToken });
    }
    await admin.call('createSecretGroup', { group: { key: 'rotated', tags: [], environment: 'production', clusterIds: clusters.map((cluster) => cluster.id), retainedVersions: 100 } });
    // Rotations one after another, each value naming its version; the kill lands while one is in flight.
    const acknowledged: number[] = [];
    const rotating = (async () => {
      for (let index = 1; index <= 1000; index++) {
        const sealed = await sealSecretVersion(admin, 'rotated', new TextEncoder().encode(`value-of-${index}`));
        acknowledged.push(sealed.version);
      }
    })().catch(() => undefined);
    await waitFor(() => acknowledged.length >= 5, 'several rotations acknowledged');
    await killHard(server.child);
    await rotating;
    for (const relay of relays.splice(0)) {
      relay.close();
    }
    admin.close();

    server = await startCloudlyProcess(env);
    const after = await login(server);
    const { groups } = await after.call('getSecretGroups', {});
    const group = groups.find((candidate) => candidate.id === 'rotated')!;
    const versions = group.versions.map((version) => version.version);
    const lastAcknowledged = acknowledged[acknowledged.length - 1];
    assert.ok(versions[0] >= lastAcknowledged, `every acknowledged rotation survived (last ${lastAcknowledged}, kept ${versions[0]})`);
    assert.deepEqual(versions, Array.from({ length: versions[0] }, (_, index) => versions[0] - index), 'no version is missing between them');
    for (const version of group.versions) {
      assert.deepEqual(version.clusters.map((cluster) => cluster.clusterId).sort(), clusters.map((cluster) => cluster.id).sort(), `version ${version.version} is sealed for every cluster`);
    }
    // Each cluster's copy of the newest version opens, with that cluster's key, to that version's value.
    for (const [index, cluster] of clusters.entries()) {
      const relay = await CloudlyRelayClient.connect(server.baseUrl, cluster.relayToken, { reconnect: false });
      relays.push(relay);
      const service = (await after.call('createService', { service: {
        name: `reader-${index}`, organizationId: 'org1', clusterId: cluster.id,
        runtime: { image: 'reader:1', replicas: 0, profile: { runAs: null }, placement: { nodeIds: [] } }, volumes: [],
        secrets: { ROTATED: { secretId: 'rotated', secretVersionId: group.versions[0].secretVersionId } },
      } })).service;
      let opened: string | null = null;
      await waitFor(async () => {
        try {
          const answer = await relay.fire('getClusterPlatformDesiredState', {});
          const delivered = answer.unchanged ? undefined : answer.desiredState.services.find((candidate) => candidate.serviceId === service.id)?.secrets[0];
          opened = delivered ? await openSealedText(cluster.keys, delivered.sealed) : null;
          return opened !== null;
        } catch {
          return false;
        }
      }, 'the relay reads the newest version');
      assert.equal(opened, `value-of-${versions[0]}`);
    }
    after.close();
  } finally {
    for (const relay of relays) {
      relay.close();
    }
    await killHard(server.child);
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
