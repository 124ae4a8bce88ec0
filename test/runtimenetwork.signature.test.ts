import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { verifyRuntimeNetworkProjectionSignature } from '../ts/interfaces/data/runtimenetworksignature.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';

/** A node verifies that Cloudly issued its projection, with nothing but the JWKS Cloudly publishes. */
describe('signed runtime network projections', () => {
  let t: ITestCloudly;
  let relay: CloudlyRelayClient;
  before(async () => {
    t = await startTestCloudly();
    const { cluster, relayToken } = await t.createCluster('signed');
    relay = await t.connectRelay(relayToken);
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).some((session) => t.cloudly.clusterManager.isElected(session)), 'relay elected');
    await relay.fire('reportClusterNode', { report: { nodeId: 'node-1', name: 'node-1' } });
  });
  after(async () => { await t.stop(); });

  const jwks = async () => (await fetch(`${t.baseUrl}/.well-known/jwks.json`)).json() as Promise<{ keys: [] }>;
  const read = () => relay.fire('getClusterNodeRuntimeNetworkProjection', { nodeId: 'node-1' });

  test('the relay receives a detached JWS that verifies against the published JWKS, the same each time', async () => {
    const { projection, signature } = await read();
    assert.match(signature, /^[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]+$/);
    const check = await verifyRuntimeNetworkProjectionSignature(projection, signature, await jwks());
    assert.deepEqual(check, { ok: true, kid: t.cloudly.auth.keyId });
    assert.equal((await read()).signature, signature, 'one projection under one key keeps its exact signature');
  });

  test('a projection altered on the way, or a signature moved to another projection, fails verification', async () => {
    const { projection, signature } = await read();
    const keys = await jwks();
    const tampered = { ...projection, nodeId: 'node-2' };
    assert.deepEqual(await verifyRuntimeNetworkProjectionSignature(tampered, signature, keys), { ok: false, reason: 'signature does not verify' });
    const moreEndpoints = { ...projection, endpoints: [...projection.endpoints, { lease: { id: 'x', generation: 1 }, address: '192.0.2.200' }] };
    assert.equal((await verifyRuntimeNetworkProjectionSignature(moreEndpoints as typeof projection, signature, keys)).ok, false);
    assert.equal((await verifyRuntimeNetworkProjectionSignature(projection, 'not-a-jws', keys)).ok, false);
    const attached = `${signature.split('.')[0]}.eyJ4IjoxfQ.${signature.split('.')[2]}`;
    assert.equal((await verifyRuntimeNetworkProjectionSignature(projection, attached, keys)).ok, false);
  });

  test('a signature by a key the JWKS does not hold is refused by name', async () => {
    const other = await startTestCloudly();
    try {
      const { projection, signature } = await read();
      const foreign = await (await fetch(`${other.baseUrl}/.well-known/jwks.json`)).json() as { keys: [] };
      assert.deepEqual(await verifyRuntimeNetworkProjectionSignature(projection, signature, foreign), { ok: false, reason: 'signature names no key of the JWKS' });
    } finally {
      await other.stop();
    }
  });
});
