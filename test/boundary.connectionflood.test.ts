import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { cloudlyProcessEnv, killHard, startCloudlyProcess, type ICloudlyProcess } from './helpers/process.js';
import { fileDescriptorReserve } from '../ts/core/connectionlimits.js';

/**
 * A flood of idle keep-alive connections from one address cannot take the process's file
 * descriptors: a server started under `ulimit -n 1024` holds at most its per-address share of
 * them, refuses the rest 503 with Retry-After at accept, and another address reads and writes as
 * usual, every write acknowledged. Real child process, real TCP from two loopback addresses.
 */

const openFilesLimit = 1024;
const floodConnections = 1100;

interface IFloodConnection {
  socket: net.Socket;
  /** The status line's code of the first answer, once it came. */
  status: Promise<number>;
  retryAfter: () => string | null;
}

/** A keep-alive connection from `localAddressArg` that makes one request and then holds on. */
const holdConnection = (portArg: number, localAddressArg: string): IFloodConnection => {
  const socket = net.connect({ host: '127.0.0.1', port: portArg, localAddress: localAddressArg });
  socket.on('error', () => undefined);
  let received = '';
  const status = new Promise<number>((resolve) => {
    socket.on('data', (chunkArg: Buffer) => {
      received += chunkArg.toString();
      const match = /^HTTP\/1\.1 (\d{3})/.exec(received);
      if (match && received.includes('\r\n\r\n')) {
        resolve(Number(match[1]));
      }
    });
    // Ended without an answer (a reset): 0.
    socket.once('close', () => resolve(0));
  });
  socket.once('connect', () => socket.write('GET /livez HTTP/1.1\r\nHost: cloudly\r\nConnection: keep-alive\r\n\r\n'));
  return { socket, status, retryAfter: () => /\r\nRetry-After: (\d+)\r\n/i.exec(received)?.[1] ?? null };
};

/** One typed request over HTTP from a given source address. */
const postFrom = (portArg: number, localAddressArg: string, methodArg: string, requestArg: unknown): Promise<{ status: number; body: { response?: unknown; error?: unknown } }> =>
  new Promise((resolve, reject) => {
    const body = JSON.stringify({ method: methodArg, request: requestArg, response: null, correlation: { id: `c-${Math.random()}`, phase: 'request' } });
    const request = http.request({
      host: '127.0.0.1', port: portArg, path: '/typedrequest', method: 'POST', localAddress: localAddressArg, agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunkArg: string) => { text += chunkArg; });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) as { response?: unknown; error?: unknown } }));
    });
    request.on('error', reject);
    request.end(body);
  });

const getFrom = (portArg: number, localAddressArg: string, pathArg: string): Promise<string> => new Promise((resolve, reject) => {
  http.get({ host: '127.0.0.1', port: portArg, path: pathArg, localAddress: localAddressArg, agent: false }, (response) => {
    let text = '';
    response.setEncoding('utf8');
    response.on('data', (chunkArg: string) => { text += chunkArg; });
    response.on('end', () => resolve(text));
  }).on('error', reject);
});

test(`under ulimit -n ${openFilesLimit}, ${floodConnections} keep-alive connections from one address are bounded; another address reads and writes, every write acknowledged`, async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-flood-'));
  let server: ICloudlyProcess | null = null;
  const flood: IFloodConnection[] = [];
  try {
    server = await startCloudlyProcess(cloudlyProcessEnv(dataDir, { CLOUDLY_LOG_LEVEL: 'info', CLOUDLY_LOG_FORMAT: 'json' }), { openFilesLimit });
    const port = Number(new URL(server.baseUrl).port);
    // The limits are logged at start, derived from the open-files limit.
    const limitsLine = server.output().split('\n').find((lineArg) => lineArg.includes('"connection limits'));
    assert.ok(limitsLine, 'the connection limits are logged at start');
    const limits = JSON.parse(limitsLine) as { connectionsTotal: number; connectionsPerAddress: number; openFilesLimit: number };
    assert.equal(limits.openFilesLimit, openFilesLimit);
    assert.equal(limits.connectionsTotal, openFilesLimit - fileDescriptorReserve);
    assert.equal(limits.connectionsPerAddress, Math.floor(limits.connectionsTotal / 2));

    // In batches, so the pending bound (256 per address) is not what refuses them.
    for (let batch = 0; batch < floodConnections; batch += 100) {
      const connections = Array.from({ length: Math.min(100, floodConnections - batch) }, () => holdConnection(port, '127.0.0.1'));
      flood.push(...connections);
      await Promise.all(connections.map((connectionArg) => connectionArg.status));
    }
    const statuses = await Promise.all(flood.map((connectionArg) => connectionArg.status));
    const served = statuses.filter((statusArg) => statusArg === 200).length;
    const refused = flood.filter((_connectionArg, indexArg) => statuses[indexArg] === 503);
    // While more than a bounded number of refusals are being written at once, a connection past the
    // bound is reset at accept instead (so refusals cannot hold descriptors either): on a loaded
    // machine some of the rest end without an answer (status 0), never served.
    const reset = statuses.filter((statusArg) => statusArg === 0).length;
    assert.equal(served, limits.connectionsPerAddress, 'the address holds its share and no more');
    assert.equal(refused.length + reset, floodConnections - limits.connectionsPerAddress, 'the rest are refused 503 at accept, or reset there');
    assert.ok(refused.length > 0, 'refusals are answered 503');
    for (const connection of refused) {
      assert.ok(Number(connection.retryAfter()) >= 1, 'a refusal carries Retry-After');
    }
    // The served ones are still open, held by the flood.
    assert.equal(flood.filter((connectionArg, indexArg) => statuses[indexArg] === 200 && !connectionArg.socket.destroyed).length, served);

    // Another address: signs in, writes and reads; every write is acknowledged.
    const login = await postFrom(port, '127.0.0.2', 'adminLoginWithUsernameAndPassword', { username: 'admin', password: 'process-admin-password' });
    assert.equal(login.status, 200, JSON.stringify(login.body));
    const identity = (login.body.response as { identity: unknown }).identity;
    const names: string[] = [];
    for (let index = 0; index < 20; index++) {
      const name = `flood-survivor-${index}`;
      const created = await postFrom(port, '127.0.0.2', 'createCluster', { identity, name });
      assert.equal(created.body.error ?? null, null, `createCluster ${name}: ${JSON.stringify(created.body.error)}`);
      names.push(name);
    }
    const listed = await postFrom(port, '127.0.0.2', 'getClusters', { identity });
    assert.equal(listed.body.error ?? null, null);
    const listedNames = (listed.body.response as { clusters: Array<{ name: string }> }).clusters.map((clusterArg) => clusterArg.name);
    for (const name of names) {
      assert.ok(listedNames.includes(name), `${name} was written`);
    }

    const metrics = await getFrom(port, '127.0.0.3', '/metrics');
    const counted = Number(/cloudly_connections_refused_total\{reason="established-per-address"\} (\d+)/.exec(metrics)?.[1]);
    assert.equal(counted, refused.length + reset, 'every refusal is counted, the 503s and the resets');
    assert.equal(/EMFILE/.test(server.output()), false, 'the server never ran out of file descriptors');
  } finally {
    for (const connection of flood) {
      connection.socket.destroy();
    }
    if (server) {
      await killHard(server.child);
    }
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
