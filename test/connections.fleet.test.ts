import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { WebSocket } from 'ws';
import { startTestCloudly, waitFor } from './helpers/cloudly.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { CloudlyTransportError } from '../ts/client/transport.js';
import { clusterRelayRegistrationKind } from '../ts/manager.cluster/relayregistrations.js';

/**
 * The settings a fleet needs (docs/multi-instance.md, "Fleet scale"), with real sockets: an
 * instance at its relay capacity refuses the next relay `unavailable` with `retryAfterMs` and
 * takes it once there is room; upgrades beyond the per-address number wait in line instead of
 * being refused; a connection refused at accept is told when to come back; compression is
 * negotiated only for the socket kinds configured.
 */

const registration = { origin: 'http://192.0.2.10:8080', version: 'fleet-test/1', protocol: 'cluster-relay/1' as const };

/** A Cloudly whose storm line (CLOUDLY_RELAY_WORK_CONCURRENCY 1) has its one place held until `release`. */
const withTheLineHeld = async () => {
  const t = await startTestCloudly({ relayWorkConcurrency: 1, logLevel: 'silent' });
  let release!: () => void;
  const held = t.cloudly.relayCallGate.run(() => new Promise<void>((resolve) => { release = resolve; }));
  return { t, release: () => release(), held };
};

describe('fleet settings', () => {
  test('beyond CLOUDLY_MAX_RELAYS_PER_INSTANCE a relay is refused 503 unavailable with retryAfterMs, and admitted once a relay left', async () => {
    const t = await startTestCloudly({ maxRelaysPerInstance: 2, relayCapacityRetryMs: 7000, logLevel: 'silent' });
    const relays: CloudlyRelayClient[] = [];
    try {
      const clusters = [await t.createCluster(), await t.createCluster(), await t.createCluster()];
      for (const { relayToken } of clusters.slice(0, 2)) {
        relays.push(await CloudlyRelayClient.connect(t.cloudly.baseUrl, relayToken, { reconnect: false, registration }));
      }
      const refused = await CloudlyRelayClient.connect(t.cloudly.baseUrl, clusters[2].relayToken, { reconnect: false, registration })
        .then(() => null, (error: unknown) => error);
      assert.ok(refused instanceof CloudlyTransportError, `refused at the upgrade, got ${String(refused)}`);
      assert.equal(refused.status, 503);
      // The header carries the advice for any HTTP client; the body the contract's error data.
      assert.equal(refused.retryAfterMs, 7000);
      const body = JSON.parse(refused.body) as { error: { data: { code: string; retryable: boolean; reasons: string[]; retryAfterMs: number } } };
      assert.deepEqual(body.error.data, { code: 'unavailable', retryable: true, reasons: ['instance-relay-capacity'], retryAfterMs: 7000 });
      const metrics = await (await fetch(`${t.cloudly.baseUrl}/metrics`)).text();
      assert.match(metrics, /cloudly_connections_refused_total\{reason="relay-capacity"\} 1/);
      // An admin socket is not a relay: the capacity does not apply to it.
      await t.admin.connectSocket();
      relays[0].close();
      await waitFor(() => t.cloudly.relays.socketCount === 1, 'the closed relay left the instance');
      const third = await CloudlyRelayClient.connect(t.cloudly.baseUrl, clusters[2].relayToken, { reconnect: false, registration });
      relays.push(third);
      assert.equal(third.isOpen, true);
      assert.equal(t.cloudly.relays.socketCount, 2);
    } finally {
      relays.forEach((relay) => relay.close());
      await t.stop();
    }
  });

  test('upgrades beyond CLOUDLY_SOCKET_UPGRADES_PER_ADDRESS wait in line: 24 relays from one address at once all connect, none refused', async () => {
    const t = await startTestCloudly({ socketUpgradesPerAddress: 1, logLevel: 'silent' });
    const relays: CloudlyRelayClient[] = [];
    try {
      const tokens: string[] = [];
      for (let index = 0; index < 24; index++) {
        tokens.push((await t.createCluster()).relayToken);
      }
      const outcomes = await Promise.allSettled(tokens.map((token) =>
        CloudlyRelayClient.connect(t.cloudly.baseUrl, token, { reconnect: false, registration })));
      for (const outcome of outcomes) {
        if (outcome.status === 'fulfilled') {
          relays.push(outcome.value);
        }
      }
      const refusals = outcomes.filter((outcome) => outcome.status === 'rejected').map((outcome) => String((outcome as PromiseRejectedResult).reason));
      assert.deepEqual(refusals, []);
      assert.equal(t.cloudly.relays.socketCount, 24);
    } finally {
      relays.forEach((relay) => relay.close());
      await t.stop();
    }
  });

  test('a connection refused at accept is answered 503 with a Retry-After, not reset', async () => {
    const t = await startTestCloudly({ pendingConnectionsPerAddress: 1, headersTimeoutMs: 60_000, logLevel: 'silent' });
    const sockets: net.Socket[] = [];
    try {
      const port = Number(new URL(t.cloudly.baseUrl).port);
      const holder = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.7' });
      sockets.push(holder);
      await new Promise<void>((resolve, reject) => holder.once('connect', resolve).once('error', reject));
      // Half a request: the connection stays pending and fills the address's one place.
      holder.write('GET /livez HTTP/1.1\r\nHost: cloudly\r\n');
      await waitFor(async () => /cloudly_connections_pending 1/.test(await (await fetch(`${t.cloudly.baseUrl}/metrics`)).text()), 'the first connection is pending');
      const refused = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.7' });
      sockets.push(refused);
      let answer = '';
      refused.on('data', (chunkArg: Buffer) => { answer += chunkArg.toString(); });
      refused.on('error', () => undefined);
      await new Promise<void>((resolve) => refused.once('close', () => resolve()));
      assert.match(answer, /^HTTP\/1\.1 503 Service Unavailable\r\n/);
      const retryAfter = Number(/\r\nRetry-After: (\d+)\r\n/.exec(answer)?.[1]);
      assert.ok(retryAfter >= 1 && retryAfter <= 30, `Retry-After in 1..30 s, got ${retryAfter}`);
    } finally {
      sockets.forEach((socket) => socket.destroy());
      await t.stop();
    }
  });

  test('CLOUDLY_WEBSOCKET_COMPRESSION=admin: admin sockets negotiate permessage-deflate, relay sockets do not', async () => {
    const t = await startTestCloudly({ webSocketCompression: ['admin'], logLevel: 'silent' });
    const sockets: WebSocket[] = [];
    try {
      const { relayToken } = await t.createCluster();
      const open = (bearerArg: string): Promise<WebSocket> => new Promise((resolve, reject) => {
        // ws offers permessage-deflate by default, as a browser does.
        const socket = new WebSocket(`${t.cloudly.baseUrl.replace(/^http/, 'ws')}/typedsocket`, { headers: { authorization: `Bearer ${bearerArg}` } });
        sockets.push(socket);
        socket.once('open', () => resolve(socket));
        socket.once('error', reject);
      });
      const relay = await open(relayToken);
      const admin = await open(t.identity.jwt);
      assert.equal(relay.extensions, '');
      assert.match(admin.extensions, /^permessage-deflate/);
    } finally {
      sockets.forEach((socket) => socket.terminate());
      await t.stop();
    }
  });
  test('with CLOUDLY_RELAY_WORK_CONCURRENCY 1 a relay registration waits its turn while an administrator\'s reads and writes do not', async () => {
    const { t, release, held } = await withTheLineHeld();
    try {
      const { cluster, relayToken } = await t.createCluster();
      const relay = await t.connectRelay(relayToken);
      // The one slot is taken: the registration waits in line.
      const registered = relay.fire('registerClusterRelay', { registration });
      await waitFor(() => t.cloudly.relayCallGate.queued === 1, 'the registration waits for its turn');
      // An administrator's calls go past the line, over HTTP.
      const { clusters } = await t.admin.call('getClusters', {});
      assert.ok(clusters.some((listed) => listed.id === cluster.id));
      const created = await t.admin.call('createCluster', { name: 'made-while-relays-wait' });
      assert.equal(created.cluster.name, 'made-while-relays-wait');
      assert.equal(t.cloudly.relayCallGate.queued, 1, 'the registration still waits');
      const metrics = await (await fetch(`${t.cloudly.baseUrl}/metrics`)).text();
      assert.match(metrics, /^cloudly_relay_calls_queued 1$/m);
      release();
      const answer = await registered;
      assert.equal(answer.registration.clusterId, cluster.id);
      assert.equal(answer.registration.connected, true);
      assert.equal(t.cloudly.relayCallGate.queued, 0);
      assert.match(await (await fetch(`${t.cloudly.baseUrl}/metrics`)).text(), /^cloudly_relay_calls_queued_total 1$/m);
    } finally {
      release();
      await held;
      await t.stop();
    }
  });

  test('a registration waiting in the line is not run once its socket closed; the next relay registers', async () => {
    const { t, release, held } = await withTheLineHeld();
    try {
      const { cluster, relayToken } = await t.createCluster();
      const relay = await t.connectRelay(relayToken);
      const waiting = relay.fire('registerClusterRelay', { registration }).then(() => 'answered', () => 'failed');
      await waitFor(() => t.cloudly.relayCallGate.queued === 1, 'the registration waits for its turn');
      relay.close();
      await waitFor(() => t.cloudly.relays.socketCount === 0, 'the relay socket closed on the server');
      assert.equal(await waiting, 'failed', 'the relay got no answer on its closed socket');
      release();
      await waitFor(() => t.cloudly.relayCallsDropped === 1, 'the queued registration was dropped at its turn');
      assert.equal(t.cloudly.relayCallGate.queued, 0);
      assert.equal(await t.cloudly.store.get(clusterRelayRegistrationKind, cluster.id), null, 'nothing was registered for the closed socket');
      assert.match(await (await fetch(`${t.cloudly.baseUrl}/metrics`)).text(), /^cloudly_relay_calls_dropped_total 1$/m);

      const again = await t.connectRelay(relayToken);
      const answer = await again.fire('registerClusterRelay', { registration });
      assert.equal(answer.registration.connected, true, 'a live relay after it registers');
      assert.equal(t.cloudly.relayCallsDropped, 1);
    } finally {
      release();
      await held;
      await t.stop();
    }
  });
});
