import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import { sealSecretVersion } from '../ts/client/secrets.js';
import type { ISealedSecret, ISealedSecretBinding } from '../ts/interfaces/data/secret.js';

/**
 * A relay in the docs' terms: its X25519 key exists only in a Python process written from
 * docs/secrets.md alone (test/helpers/hpke_relay.py: RFC 9180 from X25519, HMAC and AES-GCM
 * primitives, no HPKE library). It enrolls by opening the challenge, and opens the secret version
 * its cluster receives in the desired state with the binding it builds itself from the docs.
 */

const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'helpers', 'hpke_relay.py');

const python = (argsArg: string[], inputArg?: unknown): Promise<Record<string, string>> => new Promise((resolve, reject) => {
  const child = execFile('python3', [script, ...argsArg], (error, stdout, stderr) => {
    if (error) {
      reject(new Error(`${error.message}\n${stderr}`));
      return;
    }
    resolve(JSON.parse(stdout) as Record<string, string>);
  });
  child.stdin!.end(inputArg === undefined ? '' : JSON.stringify(inputArg));
});

const openInPython = async (privateKeyArg: string, sealedArg: ISealedSecret, bindingArg: ISealedSecretBinding): Promise<Buffer> =>
  Buffer.from((await python(['open'], { privateKey: privateKeyArg, sealed: sealedArg, binding: bindingArg })).value, 'base64url');

// The third-party relay needs python3 with the `cryptography` package; without it the test says so and is skipped.
const pythonMissing = spawnSync('python3', ['-c', 'import cryptography.hazmat.primitives.ciphers.aead'], { stdio: 'ignore' }).status !== 0;
const skip = pythonMissing ? 'python3 with the cryptography package is not installed' : false;

let t: ITestCloudly;
let relay: CloudlyRelayClient;
let clusterId: string;

before(async () => {
  if (skip) {
    return;
  }
  t = await startTestCloudly();
  const { cluster, relayToken } = await t.createCluster('python-relay');
  clusterId = cluster.id;
  relay = await t.connectRelay(relayToken);
  await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).some((session) => t.cloudly.clusterManager.isElected(session)), 'relay elected');
});

after(async () => {
  await t?.stop();
});

test('a relay written in Python from docs/secrets.md alone enrolls and opens a secret version sealed in the client', { skip }, async () => {
  const keys = await python(['keygen']);
  const begun = await relay.fire('beginSecretRecipientEnrollment', { recipient: { algorithm: 'x25519', publicKey: keys.publicKey } });
  const challenge = await openInPython(keys.privateKey, begun.challenge, {
    clusterId, nodeId: null, purpose: 'recipient-enrollment-challenge', secretVersion: null, version: 0, enrollmentId: begun.enrollmentId,
  });
  await relay.fire('completeSecretRecipientEnrollment', { enrollmentId: begun.enrollmentId, proof: challenge.toString('base64url') });

  await t.caller.call('createSecretGroup', { group: { key: 'py-secret', tags: [], environment: 'production', clusterIds: [clusterId] } });
  const value = 'opened-in-python: \u00e9\u00e8 \u{1f510}';
  const sealed = await sealSecretVersion(t.caller, 'py-secret', new TextEncoder().encode(value));
  const service = (await t.caller.call('createService', { service: {
    name: 'py-user', organizationId: 'org1', clusterId, volumes: [],
    runtime: { image: 'app:1', replicas: 0, profile: { runAs: null }, placement: { nodeIds: [] } },
    secrets: { PY_SECRET: { secretId: 'py-secret', secretVersionId: sealed.secretVersionId } },
  } })).service;
  await t.cloudly.desiredStateManager.settled(clusterId);
  const desired = await relay.fire('getClusterPlatformDesiredState', {});
  assert.equal(desired.unchanged, false);
  const entry = desired.unchanged ? undefined : desired.desiredState.services.find((candidate) => candidate.serviceId === service.id)!.secrets[0];
  assert.ok(entry);
  // The binding as section 7 says to build it: from the relay's own cluster, the entry's version reference and number.
  const binding: ISealedSecretBinding = {
    clusterId, nodeId: null, purpose: 'service-secret', secretVersion: entry.secretVersion, version: entry.version, enrollmentId: null,
  };
  assert.equal((await openInPython(keys.privateKey, entry.sealed, binding)).toString('utf8'), value);
  // Bound: as another version (or another cluster) the same copy does not open.
  await assert.rejects(openInPython(keys.privateKey, entry.sealed, { ...binding, version: entry.version + 1 }));
  await assert.rejects(openInPython(keys.privateKey, entry.sealed, { ...binding, clusterId: 'another-cluster' }));
});
