import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { readConfig } from '../ts/config.js';
import { defaultSocketLivenessTiming, longestDeadSocketMs } from '../ts/core/socketliveness.js';
import { defaultRelayElectionTiming } from '../ts/manager.cluster/relayelection.js';
import type { ITypedContract } from '../ts/interfaces/requests/admin.js';

/**
 * Liveness: Cloudly pings every socket and terminates one that stops answering, so a frozen relay
 * (a hung process, a half-open connection) loses its cluster's election to a live socket.
 */

type IReq_WhoAmI = ITypedContract<'testWhoAmI', Record<string, never>, { relay: string }>;

/** Stops reading the socket, as a hung relay process would: pings are no longer answered. */
const freeze = (socketArg: WebSocket): void => {
  (socketArg as unknown as { _socket: Socket })._socket.pause();
};

const timing = { intervalMs: 100, missedPongsAllowed: 2 };
const deadWithin = longestDeadSocketMs(timing) + 2_000;

describe('socket liveness: pings, missed pongs, and the election', () => {
  let t: ITestCloudly;
  const clients: Array<{ terminate(): void }> = [];
  before(async () => {
    t = await startTestCloudly({ socketPingIntervalMs: timing.intervalMs, socketMissedPongsAllowed: timing.missedPongsAllowed });
  });
  after(async () => {
    for (const client of clients) {
      client.terminate();
    }
    await t.stop();
  });

  const connect = async (tokenArg: string, nameArg: string): Promise<CloudlyRelayClient> => {
    // The relay pings slowly here, so only Cloudly's heartbeat decides.
    const relay = await CloudlyRelayClient.connect(t.baseUrl, tokenArg, { liveness: { intervalMs: 60_000, missedPongsAllowed: 2 }, reconnect: false });
    clients.push(relay);
    relay.addHandler<IReq_WhoAmI>('testWhoAmI', async () => ({ relay: nameArg }));
    return relay;
  };
  const connected = async (clusterIdArg: string): Promise<boolean | undefined> =>
    (await t.admin.call('getClusterRelayRegistrations', { clusterIds: [clusterIdArg] }))
      .registrations[0]?.connected;
  const register = (relayArg: CloudlyRelayClient, originArg: string) =>
    relayArg.fire('registerClusterRelay', {
      registration: { origin: originArg, version: '1.0.0', protocol: 'cluster-relay/1' },
    });

  test('by default a frozen socket is gone within the lease time, so its election runs out no later', () => {
    const config = readConfig({});
    const defaults = { intervalMs: config.socketPingIntervalMs, missedPongsAllowed: config.socketMissedPongsAllowed };
    assert.deepEqual(defaults, { ...defaultSocketLivenessTiming });
    assert.ok(longestDeadSocketMs(defaults) <= defaultRelayElectionTiming.leaseTtlMs);
  });

  test('an idle relay that answers pings keeps its socket and its election', async () => {
    const { cluster, relayToken } = await t.createCluster('idle');
    const relay = await connect(relayToken, 'idle');
    await register(relay, 'http://192.0.2.1:8080');
    let pings = 0;
    relay.peer.socket.on('ping', () => { pings++; });
    await waitFor(() => pings >= 5, 'five pings answered');
    assert.equal(relay.isOpen, true);
    assert.equal(await connected(cluster.id), true);
    relay.close();
  });

  test('a frozen elected relay is terminated; the second live relay of the cluster is elected and carries the calls', async () => {
    const { cluster, relayToken } = await t.createCluster('frozen');
    const first = await connect(relayToken, 'first');
    await register(first, 'http://192.0.2.10:8080');
    const second = await connect(relayToken, 'second');
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).length === 2, 'both sockets registered');
    assert.deepEqual((await refusalOf(() => register(second, 'http://192.0.2.20:8080'))).reasons, ['relay-not-elected']);
    assert.equal((await t.cloudly.relays.call<{ relay: string }>(cluster.id, 'testWhoAmI', {})).relay, 'first');

    freeze(first.peer.socket);
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).length === 1, 'the frozen socket terminated', deadWithin);
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).some((session) => t.cloudly.clusterManager.isElected(session)), 'the live socket elected');
    const accepted = await register(second, 'http://192.0.2.20:8080');
    assert.equal(accepted.registration.origin, 'http://192.0.2.20:8080');
    assert.equal(accepted.registration.connected, true);
    assert.equal((await t.cloudly.relays.call<{ relay: string }>(cluster.id, 'testWhoAmI', {})).relay, 'second');
    assert.ok(t.logs.some((line) => line.includes('socket missed its pongs')));
    second.close();
  });

  test('a lone frozen relay: registrations stop saying connected, and calls end at once as relay-not-connected', async () => {
    const { cluster, relayToken } = await t.createCluster('lone');
    const relay = await connect(relayToken, 'lone');
    await register(relay, 'http://192.0.2.30:8080');
    assert.equal(await connected(cluster.id), true);
    freeze(relay.peer.socket);
    await waitFor(async () => (await connected(cluster.id)) === false, 'connected false', deadWithin);
    assert.deepEqual((await refusalOf(() => t.cloudly.relays.call(cluster.id, 'testWhoAmI', {}))).reasons, ['relay-not-connected']);
  });

  test('any frame counts as a sign of life: a relay that never pongs but keeps sending stays, and goes once it falls silent', async () => {
    const { cluster, relayToken } = await t.createCluster('no-pongs');
    const socket = new WebSocket(`${t.baseUrl.replace('http', 'ws')}/typedsocket`, { headers: { authorization: `Bearer ${relayToken}` }, autoPong: false });
    await new Promise<void>((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject); });
    clients.push(socket);
    let pings = 0;
    socket.on('ping', () => { pings++; });
    let sent = 0;
    const chatter = setInterval(() => {
      sent++;
      socket.send(JSON.stringify({ method: 'getClusterNodeCorestores', request: {}, response: null, correlation: { id: `c-${sent}`, phase: 'request' } }));
    }, timing.intervalMs / 2);
    await waitFor(() => pings >= 6, 'six pings left unanswered');
    clearInterval(chatter);
    assert.equal(socket.readyState, socket.OPEN);
    assert.equal(t.cloudly.relays.sessionsOf(cluster.id).length, 1);
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.id).length === 0, 'the silent socket terminated', deadWithin);
  });

  test('a frozen admin socket is terminated too', async () => {
    const admin = new CloudlyAdminClient(t.baseUrl, { liveness: false });
    await admin.login('admin', 'test-admin-password-0123');
    await admin.connectSocket();
    await waitFor(() => t.cloudly.openSockets.size >= 1, 'admin socket open');
    const before = t.cloudly.openSockets.size;
    freeze((admin as unknown as { peer: { socket: WebSocket } }).peer.socket);
    await waitFor(() => t.cloudly.openSockets.size === before - 1, 'admin socket terminated', deadWithin);
    clients.push({ terminate: () => admin.close() });
  });

  test('the relay client pings Cloudly and drops a Cloudly that stopped answering', async () => {
    // A server that never answers pings stands in for a frozen Cloudly.
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0, autoPong: false });
    await new Promise<void>((resolve) => server.once('listening', resolve));
    let pingsSeen = 0;
    server.on('connection', (socketArg) => socketArg.on('ping', () => { pingsSeen++; }));
    try {
      const relay = await CloudlyRelayClient.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'szrelay_x', {
        liveness: { intervalMs: 50, missedPongsAllowed: 2 },
        reconnect: false,
      });
      const closed = new Promise<void>((resolve) => relay.onClose(resolve));
      await closed;
      assert.equal(relay.isOpen, false);
      assert.equal(pingsSeen, 2);
    } finally {
      for (const client of server.clients) {
        client.terminate();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
