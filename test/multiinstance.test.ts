import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { generateKeyPair, SignJWT } from 'jose';
import { TypedResponseError } from '@api.global/typedrequest';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources } from '../ts/interfaces/requests/corestore.js';
import type { IChangeEvent, IReq_Cloudly_Admin_ChangeEvent } from '../ts/interfaces/requests/watch.js';
import type { IIdentity } from '../ts/interfaces/data/user.js';
import { internalAudience, internalRelayCallPath } from '../ts/core/instances.js';
import { identityIssuer } from '../ts/core/auth.js';
import { killHard } from './helpers/process.js';
import { startTestS3Server, type ITestS3Server } from './helpers/s3server.js';
import { fetchServiceDatabaseClosure, sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import type { IReq_Cloudly_Relay_BackupClusterService } from '../ts/interfaces/requests/backup.js';
import { chunked, collect, descriptorOf, sha256Of } from './backup.fixture.js';
import { randomBytes } from 'node:crypto';
import { refusalOf, waitFor } from './helpers/cloudly.js';
import {
  FailoverRelay,
  multiInstanceAdminPassword,
  startDevDatabase,
  startInstance,
  stopInstance,
  type IDevDatabaseProcess,
  type IInstanceProcess,
} from './helpers/multiinstance.js';

/**
 * Three real Cloudly processes over one shared database process (scripts/dev-database.ts): calls
 * for a cluster reach its relay whichever instance they land on, identities of one instance are
 * accepted by the others, a watcher sees changes made elsewhere, and the instance holding 100
 * relay sockets is killed with SIGKILL while calls and writes keep coming.
 */

const leaseTtlMs = 3_000;
const heartbeatMs = 1_000;
const instanceEnv = {
  CLOUDLY_RELAY_LEASE_TTL_MS: String(leaseTtlMs),
  CLOUDLY_RELAY_LEASE_HEARTBEAT_MS: String(heartbeatMs),
  CLOUDLY_SHARED_POLL_MS: '100',
  CLOUDLY_SOCKET_REQUESTS_PER_SECOND: '100000',
  // The kill test reads when each cluster's socket opened and was elected from the instances' own
  // lines; past a budget per window those are written at debug only (ts/core/relayactivity.ts).
  CLOUDLY_LOG_LEVEL: 'debug',
};

let workDir: string;
let s3: ITestS3Server;
let database: IDevDatabaseProcess;
let a: IInstanceProcess;
let b: IInstanceProcess;
let c: IInstanceProcess;
let identity: IIdentity;
const admins = new Map<string, CloudlyAdminClient>();
const relays: FailoverRelay[] = [];

/** An admin client of the instance, carrying the identity instance A issued. */
const adminOf = (instanceArg: IInstanceProcess): CloudlyAdminClient => {
  let client = admins.get(instanceArg.name);
  if (!client) {
    client = new CloudlyAdminClient(instanceArg.baseUrl);
    client.identity = identity;
    admins.set(instanceArg.name, client);
  }
  return client;
};

/** Relay calls each cluster's relay answered, by cluster. */
const relayCalls = new Map<string, number>();

const answerInventory = (clusterIdArg: string) => (clientArg: CloudlyRelayClient) => {
  clientArg.addHandler<IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources>('getClusterCorestoreLegacyResources', async ({ nodeId }) => {
    relayCalls.set(clusterIdArg, (relayCalls.get(clusterIdArg) ?? 0) + 1);
    if (nodeId === 'refused-node') {
      throw new TypedResponseError('the relay refuses', { code: 'not-found', retryable: false, reasons: ['refused-node is not on this relay'] });
    }
    return { reachable: true, nodeId, readAt: Date.now(), services: [] };
  });
};

const inventoryOf = (instanceArg: IInstanceProcess, clusterIdArg: string, nodeIdArg = 'n1') =>
  adminOf(instanceArg).call('getCorestoreLegacyResources', { clusterId: clusterIdArg, nodeId: nodeIdArg });

const createClusterWithNode = async (instanceArg: IInstanceProcess, nameArg: string, nodeIdsArg = ['n1']) => {
  const created = await adminOf(instanceArg).call('createCluster', { name: nameArg });
  for (const nodeId of nodeIdsArg) {
    await adminOf(instanceArg).call('addClusterNode', { clusterId: created.cluster.id, name: nodeId, nodeId });
  }
  return created;
};

let alive: string[] = [];
const progress = (textArg: string): void => {
  if (process.env.MULTIINSTANCE_TEST_PROGRESS) {
    process.stderr.write(`${new Date().toISOString()} ${textArg}\n`);
  }
};

describe('several Cloudly instances over one database', () => {
  before(async () => {
    workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-multiinstance-'));
    database = await startDevDatabase(path.join(workDir, 'database'));
    // One bucket every instance keeps closures in.
    s3 = await startTestS3Server('cloudly-multi');
    const env = { ...instanceEnv, ...s3.env('multi/') };
    // A first: it creates the shared keys and the first administrator; B and C find them.
    a = await startInstance(database, 'a', env);
    [b, c] = await Promise.all([startInstance(database, 'b', env), startInstance(database, 'c', env)]);
    alive = [a.baseUrl, b.baseUrl, c.baseUrl];
    const login = new CloudlyAdminClient(a.baseUrl);
    identity = await login.login('admin', multiInstanceAdminPassword);
  });

  after(async () => {
    for (const relay of relays) {
      relay.close();
    }
    for (const client of admins.values()) {
      client.close();
    }
    await Promise.all([a, b, c].filter(Boolean).map((instance) => stopInstance(instance)));
    await database?.stop();
    await s3?.destroy();
    await fsp.rm(workDir, { recursive: true, force: true });
  });

  test('identities issued by instance A are accepted by B and C, over HTTP and the admin socket', async () => {
    for (const instance of [b, c]) {
      const answer = await adminOf(instance).call('getClusters', {});
      assert.ok(Array.isArray(answer.clusters), `${instance.name} answers getClusters with A's identity`);
    }
    const socketClient = new CloudlyAdminClient(c.baseUrl, { liveness: false });
    socketClient.identity = identity;
    await socketClient.connectSocket();
    assert.ok(Array.isArray((await socketClient.call('getClusters', {})).clusters));
    socketClient.close();
  });

  test('an admin call on B reaches the relay connected to A; the relay\'s answer and refusal come back unchanged', async () => {
    const { cluster, relayToken } = await createClusterWithNode(a, 'forwarded', ['n1', 'refused-node']);
    const relay = new FailoverRelay(cluster.id, relayToken, () => [a.baseUrl], 0, answerInventory(cluster.id));
    relays.push(relay);
    await relay.connect();
    await waitFor(async () => (await inventoryOf(a, cluster.id).then(() => true, () => false)), 'relay elected on A', 10_000);
    const before = relayCalls.get(cluster.id) ?? 0;
    const viaB = await inventoryOf(b, cluster.id);
    const viaC = await inventoryOf(c, cluster.id);
    assert.equal(viaB.inventory.nodeId, 'n1');
    assert.equal(viaC.inventory.nodeId, 'n1');
    assert.equal(relayCalls.get(cluster.id), before + 2, 'both calls reached the relay on A');
    assert.equal(relay.connectedTo, a.baseUrl);
    const refusedOnA = await refusalOf(() => inventoryOf(a, cluster.id, 'refused-node'));
    const refusedViaB = await refusalOf(() => inventoryOf(b, cluster.id, 'refused-node'));
    assert.equal(refusedViaB.code, 'unavailable');
    assert.deepEqual(refusedViaB, refusedOnA, 'the relay\'s refusal forwarded from A is what A itself answers');
    assert.deepEqual((refusedViaB.relayError as { reasons: string[] }).reasons, ['refused-node is not on this relay']);
  });

  test('the internal endpoint refuses everyone but another instance: no token, an admin identity, a foreign key, alg none', async () => {
    const body = JSON.stringify({ clusterId: 'cluster-x', method: 'getClusterCorestoreLegacyResources', request: { nodeId: 'n1' }, timeoutMs: 1000 });
    const post = async (authorizationArg: string | null) => {
      const response = await fetch(`${a.baseUrl}${internalRelayCallPath}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(authorizationArg ? { authorization: authorizationArg } : {}) },
        body,
      });
      return { status: response.status, answer: await response.json() as { error?: { data?: { code?: string } } } };
    };
    const { privateKey } = await generateKeyPair('RS256');
    const foreign = await new SignJWT({ target: 'any' }).setProtectedHeader({ alg: 'RS256' }).setIssuer(identityIssuer)
      .setAudience(internalAudience).setSubject('instance:forged').setExpirationTime('1m').sign(privateKey);
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify({
      iss: identityIssuer, aud: internalAudience, sub: 'instance:forged', exp: Math.floor(Date.now() / 1000) + 60,
    })).toString('base64url')}.`;
    for (const authorization of [null, `Bearer ${identity.jwt}`, `Bearer ${foreign}`, `Bearer ${none}`]) {
      const { status, answer } = await post(authorization);
      assert.equal(status, 401, `refused: ${authorization?.slice(0, 20)}`);
      assert.equal(answer.error?.data?.code, 'unauthenticated');
    }
  });

  test('a watcher on B sees an update, node creations and a cluster deletion made on A and C', async () => {
    const { cluster } = await createClusterWithNode(a, 'watched', ['w1']);
    const watcher = new CloudlyAdminClient(b.baseUrl, { liveness: false });
    watcher.identity = identity;
    await watcher.connectSocket();
    const events: IChangeEvent[] = [];
    watcher.handleCall<IReq_Cloudly_Admin_ChangeEvent>('changeEvent', (eventArg) => { events.push(eventArg); });
    await watcher.call('watchChanges', { clusterId: cluster.id });
    const rotated = await adminOf(a).call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: cluster.generation });
    await adminOf(c).call('addClusterNode', { clusterId: cluster.id, name: 'w2', nodeId: 'w2' });
    await adminOf(c).call('deleteCluster', { clusterId: cluster.id, expectedGeneration: rotated.cluster.generation });
    const seen = () => events.map((eventArg) => `${eventArg.kind} ${eventArg.id} ${eventArg.change}`);
    await waitFor(() => seen().includes(`CloudlyCluster ${cluster.id} removed`), `the deletion on C reaches the watcher on B: ${seen().join(', ')}`, 10_000);
    await waitFor(() => seen().filter((line) => line.startsWith('CloudlyClusterNode') && line.endsWith('removed')).length === 2, 'both node removals', 5_000);
    assert.ok(seen().includes(`CloudlyCluster ${cluster.id} updated`), 'the update made on A');
    assert.ok(seen().includes(`CloudlyClusterNode ${cluster.id}/w2 created`), 'the node created on C');
    assert.ok(seen().includes(`CloudlyClusterNode ${cluster.id}/w1 removed`), 'the node created before the watch, removed by the cascade');
    const revisions = events.map((eventArg) => eventArg.revision);
    assert.deepEqual(revisions, [...revisions].sort((x, y) => x - y), 'revisions ascend');
    assert.ok(events.every((eventArg) => eventArg.id === cluster.id || eventArg.id.startsWith(`${cluster.id}/`)), 'only the watched cluster');
    watcher.close();
  });

  test('a backup written through A is restored through C (one S3 bucket for every instance)', async () => {
    const { cluster, relayToken } = await createClusterWithNode(a, 'backups', ['node-a']);
    const { service } = await adminOf(a).call('createService', {
      service: {
        name: 'backups-db',
        organizationId: 'org-1',
        clusterId: cluster.id,
        runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
        volumes: [],
      },
    });
    const bytes = randomBytes(3 * 1024 * 1024 + 5);
    let receipt: unknown = null;
    const onA = new FailoverRelay(cluster.id, relayToken, () => [a.baseUrl], 0, (clientArg) => {
      clientArg.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
        const sent = await sendServiceDatabaseClosure(clientArg, {
          backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(bytes),
        }, chunked(bytes));
        receipt = sent.receipt;
        return { snapshots: [{ type: 'database', snapshotId: 'snap-multi', resourceName: 'db', databaseName: 'app', createdAt: Date.now(), sizeBytes: bytes.byteLength }] };
      });
    }, { register: true });
    relays.push(onA);
    await onA.connect();
    await waitFor(() => onA.registered, 'the relay is elected on A', 20_000);
    await adminOf(a).call('createServiceBackup', { clusterId: cluster.id, nodeId: 'node-a', serviceId: service.id, backupId: 'b-multi' });
    await waitFor(() => receipt !== null, 'the closure is stored through A', 30_000);
    assert.equal((receipt as { sha256?: string }).sha256, sha256Of(bytes));
    assert.ok((await s3.objectKeys()).some((key) => key.endsWith(`closures/${cluster.id}/b-multi`)), 'the closure is in the shared bucket');
    // The relay moves to C; A releases the lease as its socket closes.
    onA.close();
    const onC = new FailoverRelay(cluster.id, relayToken, () => [c.baseUrl], 0, () => undefined, { register: true });
    relays.push(onC);
    await onC.connect();
    await waitFor(() => onC.registered, 'the relay is elected on C', 20_000);
    const fetched = await fetchServiceDatabaseClosure(onC.client!, { backupId: 'b-multi', serviceId: service.id, nodeId: 'node-a' }, { transientChunks: false });
    assert.equal(fetched.descriptor.sha256, sha256Of(bytes));
    assert.ok((await collect(fetched.bytes)).equals(bytes), 'C restores exactly the closure A stored');
  });

  test('kill -9 of the instance holding 100 relay sockets: relays move, every cluster is elected again within the lease time, no call hangs, no acknowledged write is lost', async () => {
    const clusterCount = 100;
    const clusters: Array<{ id: string; relayToken: string }> = [];
    let index = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (index < clusterCount) {
        const name = `fleet-${index++}`;
        const { cluster, relayToken } = await createClusterWithNode(index % 2 ? b : c, name);
        clusters.push({ id: cluster.id, relayToken });
      }
    }));
    // Every relay starts on A, and moves along the list of live instances when its socket closes.
    alive = [a.baseUrl];
    // Ten of them register (a registration is two more writes per connect); the calls prove the rest.
    clusters.forEach((cluster, clusterIndex) => {
      relays.push(new FailoverRelay(cluster.id, cluster.relayToken, () => alive, 0, answerInventory(cluster.id), { register: clusterIndex < 10 }));
    });
    const fleet = relays.slice(-clusterCount);
    progress('clusters created');
    await Promise.all(fleet.map((relay) => relay.connect()));
    progress('relays connected');
    // Every cluster's relay elected on A: a call through A reaches it.
    let checked = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (checked < clusters.length) {
        const cluster = clusters[checked++];
        await waitFor(async () => (await inventoryOf(a, cluster.id).then(() => true, () => false)), `relay of ${cluster.id} elected on A`, 60_000);
      }
    }));
    await waitFor(() => fleet.filter((relay) => relay.registered).length === 10, 'ten relays registered on A', 30_000);
    progress('relays elected on A');
    assert.ok(fleet.every((relay) => relay.connectedTo === a.baseUrl));

    // Writes keep coming through B and C while A dies; every acknowledged one must survive.
    const ledger = await createClusterWithNode(b, 'ledger', []);
    const acknowledged: string[] = [];
    let writing = true;
    const writers = [b, c].map(async (instanceArg, writerIndex) => {
      for (let sequence = 0; writing; sequence++) {
        const nodeId = `w${writerIndex}-${sequence}`;
        try {
          await adminOf(instanceArg).call('addClusterNode', { clusterId: ledger.cluster.id, name: nodeId, nodeId });
          acknowledged.push(nodeId);
        } catch {
          // Not acknowledged: may or may not exist.
        }
      }
    });

    alive = [b.baseUrl, c.baseUrl];
    const killedAt = Date.now();
    await killHard(a.child);

    // Calls through B for every cluster until each has succeeded once, eight at a time in rounds;
    // none may hang (the ordinary relay-call timeout is 15 s; a call still open after twice that counts as
    // hung: on a loaded machine a forwarded call that ends in its own timeout may pass 15 s a little).
    const unavailableReasons = new Map<string, number>();
    let longestCallMs = 0;
    const electedAgainAfterMs = new Map<string, number>();
    while (electedAgainAfterMs.size < clusters.length && Date.now() - killedAt < 60_000) {
      const round = Date.now();
      const pending = clusters.filter((cluster) => !electedAgainAfterMs.has(cluster.id));
      let next = 0;
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (next < pending.length) {
          const cluster = pending[next++];
          const started = Date.now();
          let hung: NodeJS.Timeout | undefined;
          const call = inventoryOf(b, cluster.id).then(() => 'ok' as const, (error: unknown) => error);
          const outcome = await Promise.race([
            call,
            new Promise((resolve) => { hung = setTimeout(() => resolve('hung'), 30_000); }),
          ]);
          clearTimeout(hung);
          longestCallMs = Math.max(longestCallMs, Date.now() - started);
          if (outcome === 'hung') {
            const late = await call;
            const relay = fleet.find((candidate) => candidate.clusterId === cluster.id);
            progress(`hung call for ${cluster.id}: ended after ${Date.now() - started} ms with ${JSON.stringify((late as { errorData?: unknown }).errorData ?? late)}; `
              + `started ${started - killedAt} ms after the kill; relay on ${relay?.connectedTo} (b ${b.baseUrl}, c ${c.baseUrl})`);
          }
          assert.notEqual(outcome, 'hung', `a call for ${cluster.id} hung`);
          if (outcome === 'ok') {
            electedAgainAfterMs.set(cluster.id, Date.now() - killedAt);
            continue;
          }
          const data = (outcome as { errorData?: { code?: string; reasons?: string[]; retryAfterMs?: number } }).errorData;
          assert.equal(data?.code, 'unavailable', `a call in between answers unavailable: ${JSON.stringify(data)}`);
          const reason = data?.reasons?.[0] ?? '?';
          unavailableReasons.set(reason, (unavailableReasons.get(reason) ?? 0) + 1);
          if (reason === 'relay-holder-unreachable' || reason === 'relay-holder-gone') {
            assert.ok((data?.retryAfterMs ?? 0) > 0, 'the holder is gone: retryAfterMs says when its lease runs out');
          }
        }
      }));
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, 250 - (Date.now() - round))));
    }
    writing = false;
    await Promise.all(writers);

    // When each cluster's relay socket opened on B or C, and when it was elected, from the instances' own log lines.
    const firstAfterKill = (messageArg: string): Map<string, number> => {
      const times = new Map<string, number>();
      for (const line of `${b.output()}\n${c.output()}`.split('\n')) {
        if (!line.includes(`"msg":"${messageArg}"`)) {
          continue;
        }
        const entry = JSON.parse(line) as { time: number; clusterId: string };
        if (entry.time >= killedAt && entry.time < (times.get(entry.clusterId) ?? Infinity)) {
          times.set(entry.clusterId, entry.time);
        }
      }
      return times;
    };
    const opened = firstAfterKill('relay socket opened');
    const elected = firstAfterKill('relay socket elected');
    const lateness = clusters.map((cluster) => {
      const openedAfter = (opened.get(cluster.id) ?? Infinity) - killedAt;
      const electedAfter = (elected.get(cluster.id) ?? Infinity) - killedAt;
      // A socket that opened before A's lease ran out is elected when it runs out; one that opened later, at once.
      return { cluster: cluster.id, openedAfter, electedAfter, late: electedAfter - Math.max(openedAfter, leaseTtlMs) };
    });
    const latest = lateness.reduce((worst, entry) => (entry.late > worst.late ? entry : worst));
    console.log(`kill -9: every relay reconnected within ${Math.max(...lateness.map((entry) => entry.openedAfter))} ms; `
      + `every cluster elected again within ${Math.max(...lateness.map((entry) => entry.electedAfter))} ms (lease ${leaseTtlMs} ms), `
      + `at most ${latest.late} ms after its socket opened or the lease ran out; `
      + `every cluster callable through B after ${Math.max(...electedAgainAfterMs.values())} ms; longest call ${longestCallMs} ms; `
      + `answers in between: ${JSON.stringify(Object.fromEntries(unavailableReasons))}; ${acknowledged.length} writes acknowledged`);
    assert.equal(electedAgainAfterMs.size, clusterCount, 'every cluster answers through B again');
    assert.ok(lateness.every((entry) => Number.isFinite(entry.electedAfter)), 'every cluster elected again on B or C');
    // The election itself: no socket waits for more than its retry at the lease's run-out, or failing
    // that the next heartbeat's, and the line of a hundred elections on a busy machine (2,003 ms
    // late was seen once at load 8, against a bound of one heartbeat plus a second). A socket the
    // election forgot would wait for its relay's next reconnect, far beyond this.
    assert.ok(latest.late <= 2 * heartbeatMs + 1_000, `elected within the lease time: ${JSON.stringify(latest)}`);
    assert.ok(fleet.every((relay) => relay.connectedTo === b.baseUrl || relay.connectedTo === c.baseUrl), 'every relay reconnected to B or C');
    await waitFor(() => fleet.filter((relay) => relay.registered).length === 10, 'the ten registering relays registered again', 30_000);
    const registrations = (await adminOf(c).call('getClusterRelayRegistrations', { clusterIds: clusters.slice(0, 10).map((cluster) => cluster.id) })).registrations;
    assert.equal(registrations.filter((registration: { connected: boolean }) => registration.connected).length, 10, 'their registrations show connected');

    const stored = new Set((await adminOf(c).call('getClusterNodes', { clusterId: ledger.cluster.id })).nodes.map((node: { id: string }) => node.id));
    assert.ok(acknowledged.length > 0);
    assert.deepEqual(acknowledged.filter((nodeId) => !stored.has(nodeId)), [], 'no acknowledged write lost');
  });
});
