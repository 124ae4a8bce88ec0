/**
 * Foundation benchmark: one real Cloudly (embedded database, temporary data directory, port 0 on
 * loopback) measured through its real clients.
 *
 *   node --import tsx bench/foundation.bench.ts
 *
 * Prints, each as calls per second:
 * - admin calls (`getClusters`) over HTTP, sequential and 32 in flight;
 * - the same over the admin socket, sequential and 100 in flight;
 * - store compare-and-swap writes (`store.swap`) against the raw driver's conditional `updateOne`
 *   on the same database in the same run: one document's chain of generations, and independent
 *   documents in parallel. The ratio store/raw is the figure (absolute numbers depend on the host).
 *   Raw `findOneAndUpdate` (the driver call swap makes) is printed too, to show the store's own cost;
 * - relay round trips (`relays.call` to a `CloudlyRelayClient` handler), sequential and 100 in flight.
 *
 * Every phase is bounded by a count and a time budget, so the whole run stays under about a minute.
 * Every answer is checked (a lost swap or a wrong echo fails the run with a non-zero exit).
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Cloudly } from '../ts/classes.cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { defineDocumentKind } from '../ts/core/store.js';
import type {
  ITypedContract,
  IReq_Any_Cloudly_CreateCluster,
  IReq_Any_Cloudly_GetClusters,
} from '../ts/interfaces/requests/admin.js';
import { benchSocketLimits, sized } from './helpers/smoke.js';

/** Project's own definition: the echo method the bench relay answers. */
type IReq_Bench_Echo = ITypedContract<'benchEcho', { sequence: number }, { sequence: number }>;

/** Project's own definition: the document the store phases write. */
interface IBenchDoc {
  id: string;
  generation: number;
  counter: number;
  note: string;
}

const benchDocKind = defineDocumentKind<IBenchDoc>('CloudlyBenchFoundation');
const rawCollectionName = 'CloudlyBenchFoundationRaw';

/** Per phase: stop after this many operations or this many milliseconds, whichever comes first. */
const phaseMaxOps = sized(20_000, 200);
const phaseMaxMs = sized(2_500, 200);
const warmupOps = sized(200, 20);
const parallelDocuments = 32;

interface IRate {
  ops: number;
  ms: number;
  perSecond: number;
}

/**
 * Runs `fnArg(workerIndex)` from `inFlightArg` workers until the count or the time budget is
 * spent. Each worker awaits its own call before the next, so at most `inFlightArg` are pending.
 */
const measure = async (
  inFlightArg: number,
  fnArg: (workerArg: number) => Promise<void>,
  budgetArg: { maxOps?: number; maxMs?: number } = {},
): Promise<IRate> => {
  const maxOps = budgetArg.maxOps ?? phaseMaxOps;
  const maxMs = budgetArg.maxMs ?? phaseMaxMs;
  let started = 0;
  let done = 0;
  const begin = performance.now();
  const deadline = begin + maxMs;
  const worker = async (workerArg: number) => {
    while (started < maxOps && performance.now() < deadline) {
      started++;
      await fnArg(workerArg);
      done++;
    }
  };
  await Promise.all(Array.from({ length: inFlightArg }, (_, index) => worker(index)));
  const ms = performance.now() - begin;
  return { ops: done, ms, perSecond: (done * 1000) / ms };
};

const warmup = async (inFlightArg: number, fnArg: (workerArg: number) => Promise<void>): Promise<void> => {
  await measure(inFlightArg, fnArg, { maxOps: warmupOps, maxMs: 1_000 });
};

const rows: Array<{ name: string; inFlight: number; rate: IRate; note: string }> = [];
const record = (nameArg: string, inFlightArg: number, rateArg: IRate, noteArg = ''): void => {
  rows.push({ name: nameArg, inFlight: inFlightArg, rate: rateArg, note: noteArg });
  process.stderr.write(`  measured ${nameArg} (${inFlightArg} in flight): ${rateArg.perSecond.toFixed(0)}/s\n`);
};

const main = async (): Promise<void> => {
  const wallStart = performance.now();
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-foundation-bench-'));
  const password = randomBytes(16).toString('hex');
  const cloudly = new Cloudly({
    config: {
      port: 0,
      host: '127.0.0.1',
      mongoDbUrl: null,
      dataDir,
      adminUsername: 'admin',
      adminPassword: password,
      logLevel: 'warn',
      ...benchSocketLimits,
    },
    logDestination: process.stderr,
  });
  let admin: CloudlyAdminClient | null = null;
  let socketAdmin: CloudlyAdminClient | null = null;
  let relay: CloudlyRelayClient | null = null;
  try {
    await cloudly.start();
    admin = new CloudlyAdminClient(cloudly.baseUrl);
    await admin.login('admin', password);
    const httpAdmin = admin;
    let relayToken = '';
    let clusterId = '';
    for (const name of ['bench-a', 'bench-b', 'bench-c']) {
      const created = await httpAdmin.call<IReq_Any_Cloudly_CreateCluster>('createCluster', { name });
      relayToken = created.relayToken;
      clusterId = created.cluster.id;
    }
    const expectedClusters = 3;
    process.stderr.write(`foundation bench: cloudly at ${cloudly.baseUrl} (embedded database, ${os.cpus().length} cpus)\n`);

    // ------------------------------------------------------------ admin calls over HTTP
    const getClusters = async (clientArg: CloudlyAdminClient) => {
      const answer = await clientArg.call<IReq_Any_Cloudly_GetClusters>('getClusters', {});
      if (answer.clusters.length !== expectedClusters) {
        throw new Error(`getClusters answered ${answer.clusters.length} clusters, expected ${expectedClusters}`);
      }
    };
    await warmup(8, () => getClusters(httpAdmin));
    record('admin getClusters over HTTP', 1, await measure(1, () => getClusters(httpAdmin)));
    record('admin getClusters over HTTP', 32, await measure(32, () => getClusters(httpAdmin)));

    // ------------------------------------------------------------ admin calls over the socket
    socketAdmin = new CloudlyAdminClient(cloudly.baseUrl);
    socketAdmin.identity = httpAdmin.identity;
    await socketAdmin.connectSocket();
    const wsAdmin = socketAdmin;
    if (!wsAdmin.socketOpen) {
      throw new Error('admin socket did not open');
    }
    await warmup(8, () => getClusters(wsAdmin));
    record('admin getClusters over socket', 1, await measure(1, () => getClusters(wsAdmin)));
    record('admin getClusters over socket', 100, await measure(100, () => getClusters(wsAdmin)));

    // ------------------------------------------------------------ store swap vs raw updateOne
    // Both sides do the same logical work: a write conditional on the generation read, bumping it.
    // The store's swap is findOneAndUpdate (it returns the new document) and marks the snapshot
    // dirty; the raw side is the driver's updateOne and is not snapshotted. Neither collection has
    // an index beyond _id (the store creates none), so both filters do the same lookup.
    const store = cloudly.store;
    const raw = cloudly.database.mongoDb.collection<{ id: string; generation: number; counter: number; note: string }>(rawCollectionName);
    const docIds = Array.from({ length: parallelDocuments }, (_, index) => `bench-doc-${String(index).padStart(3, '0')}`);
    const storeGenerations: number[] = [];
    const rawGenerations: number[] = [];
    for (const id of docIds) {
      const inserted = await store.insert(benchDocKind, { id, counter: 0, note: 'start' });
      if (!inserted) {
        throw new Error(`store insert of ${id} lost`);
      }
      storeGenerations.push(1);
      await raw.insertOne({ id, generation: 1, counter: 0, note: 'start' });
      rawGenerations.push(1);
    }
    const storeSwap = async (workerArg: number) => {
      const expected = storeGenerations[workerArg];
      const after = await store.swap(benchDocKind, docIds[workerArg], expected, { set: { counter: expected, note: 'swapped' } });
      if (!after || after.generation !== expected + 1) {
        throw new Error(`store swap on ${docIds[workerArg]} at generation ${expected} lost`);
      }
      storeGenerations[workerArg] = after.generation;
    };
    const rawUpdate = async (workerArg: number) => {
      const expected = rawGenerations[workerArg];
      const result = await raw.updateOne(
        { id: docIds[workerArg], generation: expected },
        { $set: { counter: expected, note: 'swapped', generation: expected + 1 } },
      );
      if (result.modifiedCount !== 1) {
        throw new Error(`raw updateOne on ${docIds[workerArg]} at generation ${expected} matched nothing`);
      }
      rawGenerations[workerArg] = expected + 1;
    };
    // The driver operation swap itself uses, on the raw collection: separates the store's own
    // overhead from the choice of driver operation.
    const rawFindAndUpdate = async (workerArg: number) => {
      const expected = rawGenerations[workerArg];
      const after = await raw.findOneAndUpdate(
        { id: docIds[workerArg], generation: expected },
        { $set: { counter: expected, note: 'swapped', generation: expected + 1 } },
        { returnDocument: 'after' },
      );
      if (!after || after.generation !== expected + 1) {
        throw new Error(`raw findOneAndUpdate on ${docIds[workerArg]} at generation ${expected} matched nothing`);
      }
      rawGenerations[workerArg] = expected + 1;
    };
    const snapshotsBefore = cloudly.database.snapshotsWritten;
    // Two alternating rounds per side (order rotated), so no side always runs first.
    const storeVsRaw = async (inFlightArg: number) => {
      const sides = { store: storeSwap, raw: rawUpdate, rawFind: rawFindAndUpdate };
      type TSide = keyof typeof sides;
      const total: Record<TSide, { ops: number; ms: number }> = {
        store: { ops: 0, ms: 0 }, raw: { ops: 0, ms: 0 }, rawFind: { ops: 0, ms: 0 },
      };
      for (const fn of Object.values(sides)) {
        await warmup(inFlightArg, fn);
      }
      await cloudly.database.flushSnapshot();
      const orders: TSide[][] = [['raw', 'store', 'rawFind'], ['store', 'rawFind', 'raw']];
      for (const order of orders) {
        for (const side of order) {
          const rate = await measure(inFlightArg, sides[side], { maxMs: phaseMaxMs / 2 });
          // Write the snapshot a store phase asked for now, so it does not run into the next phase.
          await cloudly.database.flushSnapshot();
          total[side].ops += rate.ops;
          total[side].ms += rate.ms;
        }
      }
      const asRate = (partArg: { ops: number; ms: number }): IRate => ({ ...partArg, perSecond: (partArg.ops * 1000) / partArg.ms });
      return { store: asRate(total.store), raw: asRate(total.raw), rawFind: asRate(total.rawFind) };
    };
    const sequential = await storeVsRaw(1);
    record('store.swap, one document chain', 1, sequential.store);
    record('raw updateOne, one document chain', 1, sequential.raw);
    record('raw findOneAndUpdate, one document chain', 1, sequential.rawFind);
    const parallel = await storeVsRaw(parallelDocuments);
    record(`store.swap, ${parallelDocuments} documents`, parallelDocuments, parallel.store);
    record(`raw updateOne, ${parallelDocuments} documents`, parallelDocuments, parallel.raw);
    record(`raw findOneAndUpdate, ${parallelDocuments} documents`, parallelDocuments, parallel.rawFind);
    const snapshotsDuringStore = cloudly.database.snapshotsWritten - snapshotsBefore;
    // Stored state must agree with what the writers saw.
    for (const [index, id] of docIds.entries()) {
      const doc = await store.get(benchDocKind, id);
      const rawDoc = await raw.findOne({ id });
      if (doc?.generation !== storeGenerations[index] || rawDoc?.generation !== rawGenerations[index]) {
        throw new Error(`stored generation of ${id} does not match the writes`);
      }
    }

    // ------------------------------------------------------------ relay round trips
    relay = await CloudlyRelayClient.connect(cloudly.baseUrl, relayToken, { reconnect: false });
    relay.addHandler<IReq_Bench_Echo>('benchEcho', async (requestArg) => ({ sequence: requestArg.sequence }));
    const openDeadline = Date.now() + 5_000;
    while (!cloudly.relays.activeSession(clusterId)) {
      if (Date.now() > openDeadline) {
        throw new Error('relay session did not register');
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    let sequence = 0;
    const relayCall = async () => {
      const sent = sequence++;
      const answer = await cloudly.relays.call<IReq_Bench_Echo['response']>(clusterId, 'benchEcho', { sequence: sent }, { timeoutMs: 10_000 });
      if (answer.sequence !== sent) {
        throw new Error(`relay echoed ${answer.sequence}, expected ${sent}`);
      }
    };
    await warmup(8, relayCall);
    record('relay round trip', 1, await measure(1, relayCall));
    record('relay round trip', 100, await measure(100, relayCall));

    // ------------------------------------------------------------ table
    const figure = (rateArg: IRate) => rateArg.perSecond.toFixed(0).padStart(9);
    const rowOf = (nameArg: string, inFlightArg: number) => rows.find((row) => row.name === nameArg && row.inFlight === inFlightArg)!;
    const ratio = (aArg: IRate, bArg: IRate) => `${(aArg.perSecond / bArg.perSecond).toFixed(2)}×`;
    console.log('');
    console.log(`Cloudly foundation benchmark (embedded database, loopback, ${os.cpus().length} cpus, node ${process.version})`);
    console.log('measurement                                 in flight      ops/s      ops     ms');
    for (const row of rows) {
      console.log(`${row.name.padEnd(44)}${String(row.inFlight).padStart(9)}  ${figure(row.rate)} ${String(row.rate.ops).padStart(8)} ${row.rate.ms.toFixed(0).padStart(6)}`);
    }
    console.log('');
    console.log('ratios');
    const ratioLine = (labelArg: string, valueArg: string) => console.log(`  ${labelArg.padEnd(46)}${valueArg.padStart(7)}`);
    ratioLine('store.swap / raw updateOne, sequential', ratio(sequential.store, sequential.raw));
    ratioLine(`store.swap / raw updateOne, ${parallelDocuments} in parallel`, ratio(parallel.store, parallel.raw));
    ratioLine('store.swap / raw findOneAndUpdate, sequential', ratio(sequential.store, sequential.rawFind));
    ratioLine(`store.swap / raw findOneAndUpdate, ${parallelDocuments} parallel`, ratio(parallel.store, parallel.rawFind));
    ratioLine('admin socket / HTTP, sequential', ratio(rowOf('admin getClusters over socket', 1).rate, rowOf('admin getClusters over HTTP', 1).rate));
    ratioLine('admin socket (100) / HTTP (32) in flight', ratio(rowOf('admin getClusters over socket', 100).rate, rowOf('admin getClusters over HTTP', 32).rate));
    ratioLine('relay 100 in flight / sequential', ratio(rowOf('relay round trip', 100).rate, rowOf('relay round trip', 1).rate));
    console.log(`  (embedded snapshots written during the store phases: ${snapshotsDuringStore})`);
    console.log(`total ${((performance.now() - wallStart) / 1000).toFixed(1)} s`);
  } finally {
    relay?.close();
    socketAdmin?.close();
    admin?.close();
    await cloudly.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
};

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error('foundation bench failed:', error);
    process.exit(1);
  },
);
