import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import * as net from 'node:net';
import { startTestCloudly, testAdminPassword, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { rawEnvelope, type IWireAnswer } from './helpers/rawwire.js';
import { loginFailureLimits } from '../ts/manager.admin/admin.manager.js';

/**
 * Connections that have not completed their headers are bounded in time, per address and in
 * total; idle keep-alive connections are closed; every refusal is counted in /metrics. Real
 * TCP connections from several loopback addresses (127.0.0.0/8 all reach the server).
 */

interface IRawConnection {
  socket: net.Socket;
  closed: () => boolean;
  whenClosed: Promise<void>;
}

/** A TCP connection from `localAddressArg` that sends part of a request's headers and then nothing. */
const slowHeaderSender = async (portArg: number, localAddressArg: string): Promise<IRawConnection> => {
  const socket = net.connect({ host: '127.0.0.1', port: portArg, localAddress: localAddressArg });
  socket.on('error', () => undefined);
  let closed = false;
  const whenClosed = new Promise<void>((resolve) => socket.once('close', () => {
    closed = true;
    resolve();
  }));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.write('GET /livez HTTP/1.1\r\nHost: cloudly\r\nX-Slow: ');
  // Reads (and drops) what the server sends, as any client does: a refusal at accept is a 503
  // followed by the server's close, which a socket that never reads would never see.
  socket.resume();
  return { socket, closed: () => closed, whenClosed };
};

/** GET from a given source address (so the test's own reads are not limited with the connections it tests). */
const getFrom = (portArg: number, pathArg: string, localAddressArg: string, agentArg?: http.Agent): Promise<{ status: number; body: string; socket: net.Socket }> =>
  new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port: portArg, path: pathArg, localAddress: localAddressArg, agent: agentArg ?? false }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => { body += chunk; });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body, socket: request.socket! }));
    });
    request.on('error', reject);
  });

const portOf = (tArg: ITestCloudly): number => Number(new URL(tArg.cloudly.baseUrl).port);

const refusals = async (tArg: ITestCloudly, reasonArg: string): Promise<number> => {
  const { body } = await getFrom(portOf(tArg), '/metrics', '127.0.0.99');
  const match = new RegExp(`cloudly_connections_refused_total\\{reason="${reasonArg}"\\} (\\d+)`).exec(body);
  assert.ok(match, `/metrics has the ${reasonArg} counter`);
  return Number(match[1]);
};

const pending = async (tArg: ITestCloudly): Promise<number> => {
  const { body } = await getFrom(portOf(tArg), '/metrics', '127.0.0.99');
  return Number(/cloudly_connections_pending (\d+)/.exec(body)![1]);
};

describe('bounded connections', () => {
  test('pending connections are capped per address and ended after the headers timeout; both counted in /metrics', async () => {
    const t = await startTestCloudly({ pendingConnectionsPerAddress: 4, headersTimeoutMs: 3000, logLevel: 'silent' });
    const connections: IRawConnection[] = [];
    try {
      const port = portOf(t);
      for (let index = 0; index < 4; index++) {
        connections.push(await slowHeaderSender(port, '127.0.0.1'));
      }
      const fifth = await slowHeaderSender(port, '127.0.0.1');
      connections.push(fifth);
      await waitFor(() => fifth.closed(), 'the fifth pending connection of one address is refused', 10_000);
      assert.equal(await refusals(t, 'pending-per-address'), 1);
      // Another address is not affected by this one's pending connections.
      assert.equal((await getFrom(port, '/livez', '127.0.0.2')).status, 200);
      await Promise.all(connections.slice(0, 4).map((one) => one.whenClosed));
      assert.equal(await refusals(t, 'headers-timeout'), 4);
      assert.equal(await pending(t), 0);
      // Once they are gone, the address is served again.
      assert.equal((await getFrom(port, '/livez', '127.0.0.1')).status, 200);
    } finally {
      connections.forEach((one) => one.socket.destroy());
      await t.stop();
    }
  });

  test('pending connections are capped in total across addresses, counted in /metrics', async () => {
    const t = await startTestCloudly({ pendingConnectionsPerAddress: 3, pendingConnectionsTotal: 4, headersTimeoutMs: 60_000, logLevel: 'silent' });
    const connections: IRawConnection[] = [];
    try {
      const port = portOf(t);
      for (const address of ['127.0.0.1', '127.0.0.1', '127.0.0.1', '127.0.0.2']) {
        connections.push(await slowHeaderSender(port, address));
      }
      const over = await slowHeaderSender(port, '127.0.0.3');
      connections.push(over);
      await waitFor(() => over.closed(), 'the connection over the total is refused', 10_000);
      connections.pop();
      connections.forEach((one) => one.socket.destroy());
      await Promise.all(connections.map((one) => one.whenClosed));
      // Watched in this process, not over HTTP: until the server has seen the four close, a scrape
      // would be a fifth pending connection, refused by the very limit under test (and counted).
      await waitFor(() => t.cloudly.metrics.pendingConnections() === 0, 'the ended connections are no longer pending', 10_000);
      assert.equal(await pending(t), 0);
      assert.equal(await refusals(t, 'pending-total'), 1);
      assert.equal(await refusals(t, 'pending-per-address'), 0);
    } finally {
      connections.forEach((one) => one.socket.destroy());
      await t.stop();
    }
  });

  test('an idle keep-alive connection is closed by the server after the keep-alive timeout', async () => {
    const t = await startTestCloudly({ keepAliveTimeoutMs: 300, logLevel: 'silent' });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const { status, socket } = await getFrom(portOf(t), '/livez', '127.0.0.4', agent);
      assert.equal(status, 200);
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      await closed;
      // The agent kept it for reuse; only the server can have ended it.
      assert.equal(socket.destroyed, true);
    } finally {
      agent.destroy();
      await t.stop();
    }
  });

  test('connections from a trusted proxy are not limited per address (its clients share its address)', async () => {
    const t = await startTestCloudly({ pendingConnectionsPerAddress: 2, trustedProxies: ['127.0.0.1'], headersTimeoutMs: 60_000, logLevel: 'silent' });
    const connections: IRawConnection[] = [];
    try {
      const port = portOf(t);
      for (let index = 0; index < 3; index++) {
        connections.push(await slowHeaderSender(port, '127.0.0.1'));
      }
      // Refusal happens at accept, before the later /metrics connection is served.
      assert.equal(await pending(t), 3);
      assert.equal(await refusals(t, 'pending-per-address'), 0);
      assert.ok(connections.every((one) => !one.closed()));
      // An address not listed is limited as before.
      const others = [await slowHeaderSender(port, '127.0.0.5'), await slowHeaderSender(port, '127.0.0.5')];
      connections.push(...others);
      const third = await slowHeaderSender(port, '127.0.0.5');
      connections.push(third);
      await waitFor(() => third.closed(), 'a third pending connection of an unlisted address is refused', 10_000);
      assert.equal(await refusals(t, 'pending-per-address'), 1);
    } finally {
      connections.forEach((one) => one.socket.destroy());
      await t.stop();
    }
  });

  test('behind a trusted proxy, per-address limits count the client named in X-Forwarded-For; from anyone else the header is ignored', async () => {
    const login = async (tArg: ITestCloudly, clientArg: string, usernameArg: string, passwordArg: string): Promise<IWireAnswer> => {
      const response = await fetch(`${tArg.cloudly.baseUrl}/typedrequest`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': clientArg },
        body: rawEnvelope('adminLoginWithUsernameAndPassword', JSON.stringify({ username: usernameArg, password: passwordArg })),
      });
      return (await response.json()) as IWireAnswer;
    };
    const exhaust = async (tArg: ITestCloudly, clientArg: string) => {
      // Distinct usernames: only the per-address limit is reached.
      for (let index = 0; index <= loginFailureLimits.perAddress.freeFailures; index++) {
        assert.equal((await login(tArg, clientArg, `nobody-${index}`, 'wrong-password-000')).error?.data.code, 'unauthenticated');
      }
      assert.deepEqual((await login(tArg, clientArg, 'nobody-else', 'wrong-password-000')).error?.data.reasons, ['login-rate-limited']);
    };
    const behindProxy = await startTestCloudly({ trustedProxies: ['127.0.0.1'], logLevel: 'silent' });
    try {
      await exhaust(behindProxy, '203.0.113.7');
      // Another client behind the same proxy is not limited by the first one's failures.
      const other = await login(behindProxy, '203.0.113.8', 'admin', testAdminPassword);
      assert.equal(other.error ?? null, null, JSON.stringify(other.error));
    } finally {
      await behindProxy.stop();
    }
    const direct = await startTestCloudly({ logLevel: 'silent' });
    try {
      await exhaust(direct, '203.0.113.7');
      // Not a trusted proxy: the header is the client's own claim and changes nothing.
      assert.deepEqual((await login(direct, '203.0.113.8', 'admin', testAdminPassword)).error?.data.reasons, ['login-rate-limited']);
    } finally {
      await direct.stop();
    }
  });
});
