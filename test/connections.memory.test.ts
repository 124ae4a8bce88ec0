import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage, Server } from 'node:http';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';

/**
 * What an open socket keeps of its upgrade (issue 36, memory per idle relay): nothing. The
 * WebSocket plugin routed the upgrade with a stand-in response attached to the connection and an
 * 'error' listener that closed over the framework's request and reply, so every idle relay kept
 * its upgrade request, headers included, for its whole life (bench/relaymemory.bench.ts).
 */

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

describe('an open relay socket and its upgrade request', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly(); });
  after(async () => { await t.stop(); });

  test('the upgrade request is collected while the socket stays open and answers; an error on the socket still ends it', async () => {
    const upgrades: Array<WeakRef<IncomingMessage>> = [];
    const server = (t.cloudly as unknown as { httpServer: { server: Server } }).httpServer.server;
    const onUpgrade = (requestArg: IncomingMessage): void => {
      upgrades.push(new WeakRef(requestArg));
    };
    server.on('upgrade', onUpgrade);
    const { cluster, relayToken } = await t.createCluster('memory');
    const relay = await t.connectRelay(relayToken);
    server.off('upgrade', onUpgrade);
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).some((session) => t.cloudly.clusterManager.isElected(session)), 'relay elected');
    assert.equal(upgrades.length, 1);

    // Full collections until the request is gone (bounded: a kept request never goes).
    let collected = false;
    for (let round = 0; round < 20 && !collected; round++) {
      await new Promise((resolve) => setImmediate(resolve));
      gc();
      collected = upgrades[0].deref() === undefined;
    }
    assert.equal(collected, true, 'the upgrade request of an open socket was collected');

    // The socket is as it was: open, elected, answering.
    const [session] = t.cloudly.relays.sessionsOf(cluster.id);
    assert.equal(session.peer.isOpen, true);
    const answer = await relay.fire('getClusterPlatformDesiredState', {});
    assert.equal(typeof (answer as { unchanged?: unknown }).unchanged, 'boolean');

    // An error on the server's side of the socket ends it, as the plugin's own listener did.
    const closed = new Promise<void>((resolve) => relay.onClose(() => resolve()));
    session.peer.socket.emit('error', new Error('a failure of the connection'));
    await closed;
    assert.equal(session.peer.isOpen, false);
  });
});
