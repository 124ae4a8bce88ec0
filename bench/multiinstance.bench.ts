/**
 * Several instances over one database: the relay reconnect storm, forwarded relay calls and the
 * admin read path. Writes bench/results/multiinstance.md.
 *
 *   node --import tsx bench/multiinstance.bench.ts [relays]     (default 1000)
 *
 * 1. Storm: one shared database process (scripts/dev-database.ts) and instances A and B as real
 *    processes. N relays (each from its own loopback address, 127.0.0.2 …, as a fleet comes from
 *    many hosts) connect to A and register; then A stops (SIGTERM: it releases its leases) and
 *    every relay reconnects to B. Figures: time until every registration is accepted and
 *    `getClusterRelayRegistrations` on B shows all connected; administrator `getClusters`
 *    (limit 3, admin socket on B) p50/p99 during the storm against the same read on a quiet B;
 *    B's RSS.
 * 2. Forwarding: A started again; the same admin call that reaches a relay
 *    (`getCorestoreLegacyResources`) on B, which holds the relay (local), and on A (forwarded to B).
 * 3. Read path, in one process with the embedded database: admin `getClusters` (limit 3) over the
 *    admin socket against a bare relay round trip (Cloudly → relay → Cloudly, no database).
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import { TypedHandler, TypedRouter } from '@api.global/typedrequest';
import type { ITypedRequest } from '@api.global/typedrequest-interfaces';
import { holdEarlyMessages } from '../ts/core/heldmessages.js';
import { EnvelopePeer } from '../ts/core/envelopepeer.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { readCloudlyErrorData } from '../ts/core/errors.js';
import { inParallel, ratePerSecond, startBenchCloudly, timeEach } from './helpers/benchcloudly.js';
import { multiInstanceAdminPassword, startDevDatabase, startInstance, stopInstance, type IInstanceProcess } from '../test/helpers/multiinstance.js';
import { exitOf } from '../test/helpers/process.js';
import { cpuSecondsOf, memoryOf, ownCpuSeconds } from './helpers/processstats.js';
import { sized, smoke } from './helpers/smoke.js';

const relayCount = Number(process.argv[2] ?? sized(1000, 10));
const instanceEnv = {
  CLOUDLY_SOCKET_REQUESTS_PER_SECOND: '1000000',
  CLOUDLY_RELAY_LEASE_TTL_MS: '15000',
  CLOUDLY_RELAY_LEASE_HEARTBEAT_MS: '5000',
};

const percentile = (samplesArg: number[], pArg: number): number => {
  const sorted = [...samplesArg].sort((x, y) => x - y);
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * pArg))];
};

/** A minimal relay: its own source address, one socket, registers until accepted, answers inventory reads. */
class BenchRelay {
  public peer: EnvelopePeer | null = null;
  public registered = false;
  /** Whether this socket got its desired-state hint (every newly elected socket is owed one). */
  public hinted = false;
  private target = '';
  private closed = false;
  private readonly router = new TypedRouter();

  constructor(private readonly token: string, private readonly localAddress: string) {
    this.router.addTypedHandler(new TypedHandler<ITypedRequest>('getClusterCorestoreLegacyResources', async (requestArg) =>
      ({ reachable: true, nodeId: (requestArg as unknown as { nodeId: string }).nodeId, readAt: Date.now(), services: [] }) as never));
    this.router.addTypedHandler(new TypedHandler<ITypedRequest>('pushClusterPlatformDesiredStateChanged', async () => {
      this.hinted = true;
      return { acknowledged: true } as never;
    }));
  }

  public moveTo(urlArg: string): void {
    this.target = urlArg;
  }

  public async connect(): Promise<void> {
    while (!this.closed) {
      try {
        const socket = await new Promise<WebSocket>((resolve, reject) => {
          const candidate = new WebSocket(`${this.target.replace(/^http/, 'ws')}/typedsocket`, {
            headers: { authorization: `Bearer ${this.token}` },
            localAddress: this.localAddress,
          });
          // Cloudly hints an elected socket at once: frames before the peer exists wait for it.
          holdEarlyMessages(candidate);
          candidate.once('open', () => resolve(candidate));
          candidate.once('error', reject);
          candidate.once('unexpected-response', (_request, response) => {
            candidate.terminate();
            reject(new Error(`HTTP ${response.statusCode}`));
          });
        });
        this.registered = false;
        this.hinted = false;
        const peer = new EnvelopePeer(socket, { router: this.router });
        this.peer = peer;
        peer.onClose(() => {
          if (this.peer === peer) {
            this.peer = null;
            this.registered = false;
          }
          if (!this.closed) {
            setTimeout(() => void this.connect(), Math.floor(Math.random() * 100));
          }
        });
        void this.register(peer);
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 50 + Math.floor(Math.random() * 200)));
      }
    }
  }

  private async register(peerArg: EnvelopePeer): Promise<void> {
    while (!this.closed && this.peer === peerArg && peerArg.isOpen) {
      try {
        await peerArg.call('registerClusterRelay', { registration: { origin: 'http://192.0.2.10:8080', version: '1.0.0', protocol: 'cluster-relay/1' } }, 30_000);
        this.registered = true;
        return;
      } catch (error) {
        const data = readCloudlyErrorData((error as { errorData?: unknown }).errorData);
        await new Promise((resolve) => setTimeout(resolve, data?.retryAfterMs ?? 100 + Math.floor(Math.random() * 200)));
      }
    }
  }

  public close(): void {
    this.closed = true;
    this.peer?.close();
  }
}

const loginSocket = async (urlArg: string): Promise<CloudlyAdminClient> => {
  const client = new CloudlyAdminClient(urlArg, { liveness: false });
  await client.login('admin', multiInstanceAdminPassword);
  await client.connectSocket();
  return client;
};

/** Polls a read on `adminArg` while `untilArg` is false; answers the latencies. */
const readWhile = (adminArg: CloudlyAdminClient, stopArg: () => boolean): Promise<number[]> => (async () => {
  const samples: number[] = [];
  while (!stopArg()) {
    const started = performance.now();
    await adminArg.call('getClusters', { limit: 3 });
    samples.push(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return samples;
})();

const storm = async (relaysArg: BenchRelay[], targetArg: string, adminArg: CloudlyAdminClient, clusterIdsArg: string[]) => {
  const started = performance.now();
  let done = false;
  const reads = readWhile(adminArg, () => done);
  let registeredMs = 0;
  for (;;) {
    if (!registeredMs && relaysArg.every((relay) => relay.registered)) {
      registeredMs = performance.now() - started;
    }
    if (registeredMs) {
      const { registrations } = await adminArg.call('getClusterRelayRegistrations', { clusterIds: clusterIdsArg });
      if (registrations.filter((registration: { connected: boolean }) => registration.connected).length === clusterIdsArg.length) {
        break;
      }
    }
    if (performance.now() - started > 180_000) {
      throw new Error(`storm to ${targetArg} did not finish: ${relaysArg.filter((relay) => relay.registered).length} registered`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const connectedMs = performance.now() - started;
  done = true;
  const samples = await reads;
  while (!relaysArg.every((relay) => relay.hinted)) {
    if (performance.now() - started > 180_000) {
      throw new Error(`storm to ${targetArg}: ${relaysArg.filter((relay) => relay.hinted).length} relays hinted`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const hintedMs = performance.now() - started;
  return { registeredMs, connectedMs, hintedMs, readP50: percentile(samples, 0.5), readP99: percentile(samples, 0.99), reads: samples.length };
};

const main = async (): Promise<void> => {
  const lines: string[] = [];
  const say = (lineArg: string): void => {
    console.log(lineArg);
    lines.push(lineArg);
  };
  const workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-multi-'));
  const database = await startDevDatabase(path.join(workDir, 'database'));
  let a: IInstanceProcess | null = await startInstance(database, 'a', instanceEnv);
  const b = await startInstance(database, 'b', instanceEnv);
  const relays: BenchRelay[] = [];
  const admins: CloudlyAdminClient[] = [];
  try {
    const adminB = await loginSocket(b.baseUrl);
    admins.push(adminB);
    const quiet = await timeEach(200, () => adminB.call('getClusters', { limit: 3 }));
    const created: Array<{ id: string; token: string }> = [];
    const seedStarted = performance.now();
    await inParallel(relayCount, 8, async (indexArg) => {
      const { cluster, relayToken } = await adminB.call('createCluster', { name: `storm-${indexArg}` });
      created.push({ id: cluster.id, token: relayToken });
    });
    say(`seeded ${relayCount} clusters in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s; load average ${os.loadavg().map((value) => value.toFixed(1)).join(' ')}`);
    const clusterIds = created.map((cluster) => cluster.id);
    created.forEach((cluster, index) => relays.push(new BenchRelay(cluster.token, `127.0.${2 + Math.floor(index / 250)}.${1 + (index % 250)}`)));

    // First connect: every relay to A.
    for (const relay of relays) {
      relay.moveTo(a.baseUrl);
    }
    const firstConnects = Promise.all(relays.map((relay) => relay.connect()));
    const first = await storm(relays, 'A', adminB, clusterIds);
    await firstConnects;
    say(`first connect, ${relayCount} relays to A: all registered ${(first.registeredMs / 1000).toFixed(2)} s, all shown connected ${(first.connectedMs / 1000).toFixed(2)} s; `
      + `getClusters on B during it p50 ${first.readP50.toFixed(1)} ms p99 ${first.readP99.toFixed(1)} ms (${first.reads} reads)`);

    // A stops; every relay reconnects to B (a load balancer's choice).
    for (const relay of relays) {
      relay.moveTo(b.baseUrl);
    }
    const cpuBefore = { b: cpuSecondsOf(b.child.pid!), database: cpuSecondsOf(database.child.pid!), bench: ownCpuSeconds() };
    const stopping = performance.now();
    a.child.kill('SIGTERM');
    await exitOf(a.child);
    await stopInstance(a);
    a = null;
    const second = await storm(relays, 'B', adminB, clusterIds);
    const rss = memoryOf(b.child.pid!).rss / 1024 / 1024;
    const cpu = {
      b: cpuSecondsOf(b.child.pid!) - cpuBefore.b,
      database: cpuSecondsOf(database.child.pid!) - cpuBefore.database,
      bench: ownCpuSeconds() - cpuBefore.bench,
    };
    say(`restart storm, ${relayCount} relays from A (stopped) to B: all registered ${(second.registeredMs / 1000).toFixed(2)} s, all shown connected ${(second.connectedMs / 1000).toFixed(2)} s, all hinted their desired state ${(second.hintedMs / 1000).toFixed(2)} s `
      + `(A's stop included: ${((performance.now() - stopping) / 1000).toFixed(2)} s until measured); `
      + `getClusters on B during it p50 ${second.readP50.toFixed(1)} ms p99 ${second.readP99.toFixed(1)} ms against quiet p50 ${quiet.p50.toFixed(1)} ms p90 ${quiet.p90.toFixed(1)} ms; B's RSS ${rss.toFixed(0)} MiB; `
      + `CPU from A's stop until measured: B ${cpu.b.toFixed(2)} s (${(cpu.b * 1000 / relayCount).toFixed(2)} ms per relay), the database process ${cpu.database.toFixed(2)} s, the bench process (relays, admin reader) ${cpu.bench.toFixed(2)} s`);

    // Forwarding: A again; B holds every relay.
    a = await startInstance(database, 'a2', instanceEnv);
    const adminA = await loginSocket(a.baseUrl);
    admins.push(adminA);
    const forwardedCluster = clusterIds[0];
    await adminB.call('addClusterNode', { clusterId: forwardedCluster, name: 'n1', nodeId: 'n1' });
    const read = (clientArg: CloudlyAdminClient) => () => clientArg.call('getCorestoreLegacyResources', { clusterId: forwardedCluster, nodeId: 'n1' });
    await timeEach(50, read(adminB));
    await timeEach(50, read(adminA));
    const local = await timeEach(300, read(adminB));
    const forwarded = await timeEach(300, read(adminA));
    say(`relay call through the admin socket: local on B p50 ${local.p50.toFixed(2)} ms p90 ${local.p90.toFixed(2)} ms; forwarded from A to B p50 ${forwarded.p50.toFixed(2)} ms p90 ${forwarded.p90.toFixed(2)} ms; `
      + `added at p50 ${(forwarded.p50 - local.p50).toFixed(2)} ms (ratio ${(forwarded.p50 / local.p50).toFixed(2)})`);
  } catch (error) {
    const tail = (textArg: string) => textArg.split('\n').filter((line) => !line.includes('"level":30')).slice(-40).join('\n');
    console.error(`failed; A's last lines:\n${a ? tail(a.output()) : '(stopped)'}\nB's last lines (exit ${b.child.exitCode} ${b.child.signalCode}):\n${tail(b.output())}`);
    throw error;
  } finally {
    for (const relay of relays) {
      relay.close();
    }
    for (const admin of admins) {
      admin.close();
    }
    await Promise.all([a, b].filter((instance): instance is IInstanceProcess => instance !== null).map((instance) => stopInstance(instance)));
    await database.stop();
    await fsp.rm(workDir, { recursive: true, force: true });
  }

  // Read path in one process: admin read against a bare relay round trip on the same stack.
  const bench = await startBenchCloudly('multiinstance');
  try {
    const { cloudly, admin } = bench;
    let relayToken = '';
    let clusterId = '';
    for (let index = 0; index < 3; index++) {
      const created = await admin.call('createCluster', { name: `read-${index}` });
      relayToken = created.relayToken;
      clusterId = created.cluster.id;
    }
    const socket = await new Promise<WebSocket>((resolve, reject) => {
      const candidate = new WebSocket(`${cloudly.baseUrl.replace(/^http/, 'ws')}/typedsocket`, { headers: { authorization: `Bearer ${relayToken}` } });
      candidate.once('open', () => resolve(candidate));
      candidate.once('error', reject);
    });
    const router = new TypedRouter();
    router.addTypedHandler(new TypedHandler<ITypedRequest>('benchEcho', async () => ({ ok: true }) as never));
    const relayPeer = new EnvelopePeer(socket, { router });
    while (!cloudly.relays.activeSession(clusterId)) {
      await cloudly.clusterManager.electedSession(clusterId);
    }
    await ratePerSecond(8, () => admin.call('getClusters', { limit: 3 }), 500);
    await ratePerSecond(8, () => cloudly.relays.call(clusterId, 'benchEcho', {}), 500);
    const adminRate = await ratePerSecond(8, () => admin.call('getClusters', { limit: 3 }));
    const relayRate = await ratePerSecond(8, () => cloudly.relays.call(clusterId, 'benchEcho', {}));
    say(`admin getClusters (limit 3) over the socket ${adminRate.toFixed(0)}/s against a bare relay round trip ${relayRate.toFixed(0)}/s in the same process: ratio ${(adminRate / relayRate).toFixed(2)} (aim >= 0.5)`);
    relayPeer.close();
  } finally {
    await bench.stop();
  }

  if (smoke) {
    return;
  }
  // The list of this run replaces the previous run's; what follows it in the file is kept by hand.
  const resultsPath = path.join(import.meta.dirname, 'results', 'multiinstance.md');
  const keptMarker = 'The bench overwrites the list above on each run.';
  const previous = await fsp.readFile(resultsPath, 'utf8').catch(() => '');
  const kept = previous.includes(keptMarker) ? previous.slice(previous.indexOf(keptMarker)) : `${keptMarker} The rest of this file is kept by hand.\n`;
  const results = [
    '# Multi-instance benchmark',
    '',
    `\`node --import tsx bench/multiinstance.bench.ts ${relayCount}\` on ${os.cpus().length} cores, ${new Date().toISOString()}.`,
    'Shared database: scripts/dev-database.ts (embedded CongoDB, journaled) as its own process; instances are real Cloudly processes.',
    '',
    ...lines.map((line) => `- ${line}`),
    '',
    kept,
  ].join('\n');
  await fsp.mkdir(path.dirname(resultsPath), { recursive: true });
  await fsp.writeFile(resultsPath, results);
};

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
