import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { WebSocket } from 'ws';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import type { IChangeEvent, IReq_Cloudly_Admin_ChangeEvent } from '../ts/interfaces/requests/watch.js';
import type { IIdentity } from '../ts/interfaces/data/user.js';
import { watchBehindCloseCode } from '../ts/manager.watch/watch.manager.js';
import { cloudlyProcessEnv, killHard, startCloudlyProcess, type ICloudlyProcess } from './helpers/process.js';
import { waitFor } from './helpers/cloudly.js';

/**
 * Watchers that never read cannot grow the server: 50 admin-socket watches whose TCP sockets are
 * paused while 200 changes of about 40 KB each are written. What one socket holds stays within
 * the documented bound (CLOUDLY_WATCH_BUFFER_BYTES plus one event, docs/api-dashboard.md) and the
 * server's RSS within this test's allowance, each stuck socket is closed 4002 with the revision it
 * reached, a watcher that reads sees every change, and for a socket that answered a few events
 * before it stopped, those and a watch resumed from the close's revision are every change. A real
 * child process; its RSS is read from /proc.
 */

const stuckWatches = 50;
/** The writes: `services` services changed in parallel, `rounds` times. */
const services = 10;
const rounds = 20;
const writes = services * rounds;
const ports = 1000;
const watchBufferBytes = 256 * 1024;
const answeredBeforeStuck = 20;

const rssOf = (pidArg: number): number => {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pidArg}/status`, 'utf8'));
  assert.ok(match, 'the server\'s RSS is readable');
  return Number(match[1]) * 1024;
};

interface IStuckWatch {
  socket: WebSocket;
  close: { code: number; reason: string } | null;
  /** The events it answered before it stopped reading. */
  answered: IChangeEvent[];
}

/**
 * A raw admin socket that watches services, answers its first `answerFirstArg` events and then
 * stops reading its TCP socket.
 */
const openStuckWatch = (baseUrlArg: string, identityArg: IIdentity, answerFirstArg = 0): Promise<IStuckWatch> => new Promise((resolve, reject) => {
  const socket = new WebSocket(`${baseUrlArg.replace(/^http/, 'ws')}/typedsocket`, { headers: { authorization: `Bearer ${identityArg.jwt}` } });
  const watch: IStuckWatch = { socket, close: null, answered: [] };
  socket.on('close', (codeArg, reasonArg) => {
    watch.close = { code: codeArg, reason: reasonArg.toString() };
  });
  socket.once('error', reject);
  socket.once('open', () => {
    socket.on('message', (dataArg) => {
      const envelope = JSON.parse(dataArg.toString()) as { method: string; request?: IChangeEvent; correlation?: { id: string; phase: string }; error?: unknown };
      if (envelope.correlation?.id === 'watch') {
        assert.equal(envelope.error ?? null, null, JSON.stringify(envelope.error));
        if (answerFirstArg === 0) {
          // Answered: from now on nothing is read (ws stops reading the TCP socket).
          socket.pause();
        }
        resolve(watch);
      } else if (envelope.method === 'changeEvent' && envelope.correlation?.phase === 'request' && watch.answered.length < answerFirstArg) {
        watch.answered.push(envelope.request!);
        socket.send(JSON.stringify({ method: 'changeEvent', response: {}, correlation: { id: envelope.correlation.id, phase: 'response' } }));
        if (watch.answered.length === answerFirstArg) {
          socket.pause();
        }
      }
    });
    socket.send(JSON.stringify({ method: 'watchChanges', request: { identity: identityArg, kinds: ['CloudlyService'] }, correlation: { id: 'watch', phase: 'request' } }));
  });
});

const portList = (roundArg: number) => Array.from({ length: ports }, (_unused, indexArg) => ({ name: `p${indexArg}`, port: 1000 + indexArg, protocol: roundArg % 2 === 0 ? 'tcp' as const : 'udp' as const }));

test(`${stuckWatches} watches that never read, ${writes} large changes: memory bounded, stuck sockets closed ${watchBehindCloseCode} with their revision, no event missed by a reader or a resumed watch`, async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-slowwatch-'));
  let server: ICloudlyProcess | null = null;
  const stuck: IStuckWatch[] = [];
  const clients: CloudlyAdminClient[] = [];
  try {
    server = await startCloudlyProcess(cloudlyProcessEnv(dataDir, {
      CLOUDLY_WATCH_BUFFER_BYTES: String(watchBufferBytes),
      CLOUDLY_WATCH_STALL_MS: '1000',
      CLOUDLY_WATCHES_PER_ACCOUNT: String(stuckWatches + 2),
    }));
    const pid = server.child.pid!;
    const admin = new CloudlyAdminClient(server.baseUrl);
    clients.push(admin);
    const identity = await admin.login('admin', 'process-admin-password');
    const { cluster } = await admin.call('createCluster', { name: 'watched' });
    const spec = (nameArg: string, roundArg: number) => ({
      name: nameArg, organizationId: 'org1', clusterId: cluster.id,
      runtime: { image: `wide:${roundArg}`, replicas: 0, profile: { runAs: null }, placement: { nodeIds: [] } },
      ports: portList(roundArg), volumes: [],
    });
    const created = [];
    for (let index = 0; index < services; index++) {
      created.push((await admin.call('createService', { service: spec(`wide-${index}`, 0) })).service);
    }
    const serviceIds = new Set(created.map((serviceArg) => serviceArg.id));
    const firstGeneration = created[0].generation + 1;
    const lastGeneration = created[0].generation + rounds;
    /** Every change the writes make, as `<service id> <generation>`. */
    const written = new Set(created.flatMap((serviceArg) => Array.from({ length: rounds }, (_unused, indexArg) => `${serviceArg.id} ${firstGeneration + indexArg}`)));
    const changeOf = (eventArg: IChangeEvent): string => `${eventArg.id} ${eventArg.generation}`;

    // A reader: answers every event as it comes.
    const reader = new CloudlyAdminClient(server.baseUrl, { liveness: false });
    clients.push(reader);
    await reader.login('admin', 'process-admin-password');
    await reader.connectSocket();
    const read: IChangeEvent[] = [];
    reader.handleCall<IReq_Cloudly_Admin_ChangeEvent>('changeEvent', (eventArg) => {
      read.push(eventArg);
    });
    await reader.call('watchChanges', { kinds: ['CloudlyService'] });

    for (let index = 0; index < stuckWatches; index++) {
      // The first one reads and answers a few events before it stops.
      stuck.push(await openStuckWatch(server.baseUrl, identity, index === 0 ? answeredBeforeStuck : 0));
    }
    const rssBefore = rssOf(pid);

    let current = created;
    for (let round = 1; round <= rounds; round++) {
      current = await Promise.all(current.map(async (serviceArg, indexArg) => (await admin.call('updateService', {
        serviceId: serviceArg.id, expectedGeneration: serviceArg.generation, service: spec(`wide-${indexArg}`, round),
      })).service));
    }
    assert.ok(current.every((serviceArg) => serviceArg.generation === lastGeneration));

    // Every stuck socket is closed by the server (seen in its count, as the sockets themselves read nothing).
    await waitFor(async () => {
      const metrics = await (await fetch(`${server!.baseUrl}/metrics`)).text();
      return Number(/cloudly_sockets_closed_total\{reason="watch-behind"\} (\d+)/.exec(metrics)?.[1]) === stuckWatches;
    }, 'every stuck socket is closed', 60_000);
    const rssAfter = rssOf(pid);
    const metrics = await (await fetch(`${server.baseUrl}/metrics`)).text();
    // The bound of docs/api-dashboard.md: CLOUDLY_WATCH_BUFFER_BYTES plus one event per socket.
    // Unbounded, each stuck socket was sent all 200 events, about 8 MB.
    const eventBytes = JSON.stringify(portList(0)).length + 2048;
    const socketBytesMax = Number(/^cloudly_watch_socket_bytes_max (\d+)/m.exec(metrics)?.[1]);
    assert.ok(socketBytesMax > 0 && socketBytesMax <= watchBufferBytes + eventBytes, `one socket held at most ${socketBytesMax} bytes`);
    // RSS: the sockets' bound (50 × ~300 KB, 15 MB) and the writes' own memory (heap the
    // collector has not given back, which the same writes cost without any watcher).
    const growth = rssAfter - rssBefore;
    assert.ok(growth < 192 * 1024 * 1024, `RSS grew by ${Math.round(growth / 1024 / 1024)} MiB`);

    // Reading again, each stuck socket finds the close code and the revision it reached.
    for (const watch of stuck) {
      watch.socket.resume();
    }
    await waitFor(() => stuck.every((watchArg) => watchArg.close !== null), 'each stuck socket reads its close', 60_000);
    const revisions = stuck.map((watchArg) => {
      assert.equal(watchArg.close!.code, watchBehindCloseCode);
      const match = /^watch-behind revision=(\d+)$/.exec(watchArg.close!.reason);
      assert.ok(match, `close reason ${watchArg.close!.reason}`);
      return Number(match[1]);
    });

    // The reader saw every change, once, each service's in order, and was never closed.
    const readChanges = () => read.filter((eventArg) => serviceIds.has(eventArg.id) && eventArg.generation >= firstGeneration);
    await waitFor(() => readChanges().length >= writes, 'the reader sees every change', 60_000);
    assert.deepEqual(new Set(readChanges().map(changeOf)), written);
    assert.equal(readChanges().length, writes, 'each change once');
    for (const id of serviceIds) {
      const generations = readChanges().filter((eventArg) => eventArg.id === id).map((eventArg) => eventArg.generation);
      assert.deepEqual(generations, [...generations].sort((leftArg, rightArg) => leftArg - rightArg));
    }
    assert.equal(reader.socketOpen, true);

    // The socket that answered some events before it stopped: its revision counts every answered
    // event as reached, and a watch resumed from there, with what it answered, misses nothing.
    const slow = stuck[0];
    assert.equal(slow.answered.length, answeredBeforeStuck);
    const slowRevision = revisions[0];
    assert.ok(slow.answered.every((eventArg) => eventArg.revision <= slowRevision), 'every answered event is within the revision reached');
    const resumed = new CloudlyAdminClient(server.baseUrl, { liveness: false });
    clients.push(resumed);
    await resumed.login('admin', 'process-admin-password');
    await resumed.connectSocket();
    const replayed: IChangeEvent[] = [];
    resumed.handleCall<IReq_Cloudly_Admin_ChangeEvent>('changeEvent', (eventArg) => {
      replayed.push(eventArg);
    });
    await resumed.call('watchChanges', { kinds: ['CloudlyService'], sinceRevision: slowRevision });
    const seen = () => new Set([...slow.answered, ...replayed].map(changeOf));
    await waitFor(() => [...written].every((changeArg) => seen().has(changeArg)), 'what the slow watch answered and its resumed watch replays are every change', 60_000);
    assert.ok(replayed.every((eventArg) => eventArg.revision > slowRevision));
  } finally {
    for (const watch of stuck) {
      watch.socket.terminate();
    }
    for (const client of clients) {
      client.close();
    }
    if (server) {
      await killHard(server.child);
    }
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
