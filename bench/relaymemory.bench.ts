/**
 * Memory per connected idle relay (issue 36: aim < 30 KB), and where it goes. Writes
 * bench/results/relaymemory.md.
 *
 *   node --import tsx bench/relaymemory.bench.ts [relays]          default 1000
 *   node --import tsx bench/relaymemory.bench.ts [relays] --where  also heap snapshots at 0 and N
 *                                                                  relays: the growth by constructor
 *   npm run bench -- --smoke relaymemory                           tiny sizes, seconds
 *   RELAYMEMORY_SNAPSHOTS=DIR … --where                            keeps the heap snapshots in DIR
 *
 * One Cloudly in this process over a database in a process of its own (scripts/dev-database.ts,
 * as in production: the documents a relay adds are the database's memory, not Cloudly's), seeded
 * with N clusters before the first figure; the relays in a child process
 * (bench/helpers/fleetrelays.ts). Figures after a full garbage collection: the V8 heap, memory
 * outside it (ArrayBuffers: socket and zlib buffers) and the RSS, per relay, with WebSocket
 * compression off and with it on for relay sockets.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { Cloudly } from '../ts/classes.cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { inParallel } from './helpers/benchcloudly.js';
import { FleetProcess, sleep } from './helpers/fleet.js';
import { benchSocketLimits, reportResults, sized } from './helpers/smoke.js';
import { multiInstanceAdminPassword, startDevDatabase } from '../test/helpers/multiinstance.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const args = process.argv.slice(2);
const relays = Number(args.find((arg) => /^\d+$/.test(arg)) ?? sized(1000, 20));
const where = args.includes('--where');
const aimKb = 30;
const password = multiInstanceAdminPassword;

const lines: string[] = [];
const say = (lineArg: string): void => {
  console.error(lineArg);
  lines.push(lineArg);
};
const load = (): string => os.loadavg().map((value) => value.toFixed(1)).join(' ');

interface IMemory { heap: number; outside: number; rss: number }

/** Memory after full collections (twice: finalizers of the first free more in the second). */
const settledMemory = async (): Promise<IMemory> => {
  for (let round = 0; round < 3; round++) {
    gc();
    await sleep(50);
  }
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, outside: usage.external, rss: usage.rss };
};

/** Self sizes summed by constructor (node name) from a heap snapshot. */
const sizesByConstructor = async (fileArg: string): Promise<Map<string, { size: number; count: number }>> => {
  const snapshot = JSON.parse(await fsp.readFile(fileArg, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = snapshot.snapshot.meta.node_types[0];
  const sizes = new Map<string, { size: number; count: number }>();
  for (let index = 0; index < snapshot.nodes.length; index += width) {
    const type = types[snapshot.nodes[index + typeAt]];
    const name = type === 'object' || type === 'native' || type === 'closure'
      ? `${type}:${snapshot.strings[snapshot.nodes[index + nameAt]]}`
      : type;
    const entry = sizes.get(name) ?? { size: 0, count: 0 };
    entry.size += snapshot.nodes[index + sizeAt];
    entry.count++;
    sizes.set(name, entry);
  }
  return sizes;
};

/** Waits (bounded) until the reconciler has no key owed a run: the storm's follow-up work is done, only the connections remain. */
const quiet = async (cloudlyArg: Cloudly): Promise<void> => {
  const bound = Date.now() + sized(180_000, 20_000);
  while (Date.now() < bound) {
    const text = await cloudlyArg.metrics.registry.getSingleMetricAsString('cloudly_reconcile_queue_depth');
    if (/^cloudly_reconcile_queue_depth 0$/m.test(text)) {
      return;
    }
    await sleep(250);
  }
  throw new Error('the reconciler did not catch up within its bound');
};

const measure = async (labelArg: string, compressionArg: string): Promise<number> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-relaymemory-'));
  const database = await startDevDatabase(path.join(dataDir, 'database'));
  const cloudly = new Cloudly({
    config: {
      port: 0, mongoDbUrl: database.mongoDbUrl, secretsKeyFile: database.secretsKeyFile, dataDir, adminPassword: password, logLevel: 'silent', ...benchSocketLimits,
      pendingConnectionsPerAddress: 4096, socketUpgradesPerAddress: 256,
      webSocketCompression: compressionArg === '' ? [] : [compressionArg as 'relay'],
    },
  });
  await cloudly.start();
  const fleet = new FleetProcess();
  try {
    const admin = new CloudlyAdminClient(cloudly.baseUrl, { liveness: false });
    await admin.login('admin', password);
    await admin.connectSocket();
    const tokens: string[] = new Array(relays);
    await inParallel(relays, 16, async (indexArg) => {
      tokens[indexArg] = (await admin.call('createCluster', { name: `memory-${indexArg}` })).relayToken;
    });
    admin.close();
    await quiet(cloudly);
    await sleep(sized(2000, 100));
    // RELAYMEMORY_SNAPSHOTS=DIR keeps the snapshots there (for a look at their retainers).
    const snapshots = process.env.RELAYMEMORY_SNAPSHOTS ? path.join(process.env.RELAYMEMORY_SNAPSHOTS, compressionArg || 'off') : path.join(dataDir, 'snapshots');
    await fsp.mkdir(snapshots, { recursive: true });
    const before = await settledMemory();
    const beforeFile = where ? v8.writeHeapSnapshot(path.join(snapshots, 'before.heapsnapshot')) : '';
    fleet.start([cloudly.baseUrl], tokens);
    const done = await fleet.waitFor((statsArg) => statsArg.registered === relays, sized(300_000, 60_000));
    if (!done.reached) {
      throw new Error(`only ${done.stats.registered} of ${relays} relays registered`);
    }
    // The storm's follow-ups (reconciles, desired-state hints, registrations' refreshes) end, then it is idle.
    await quiet(cloudly);
    await sleep(sized(5000, 200));
    const after = await settledMemory();
    const perRelay = (valueArg: number): string => `${(valueArg / relays / 1024).toFixed(1)} KB`;
    const total = (after.heap - before.heap) + (after.outside - before.outside);
    say(`- ${labelArg}: ${relays} relays connected and idle (load ${load()}): V8 heap +${perRelay(after.heap - before.heap)}, outside the heap +${perRelay(after.outside - before.outside)}, `
      + `together ${perRelay(total)} per relay; RSS +${perRelay(after.rss - before.rss)} per relay`);
    if (where) {
      const afterFile = v8.writeHeapSnapshot(path.join(snapshots, 'after.heapsnapshot'));
      const [was, is] = [await sizesByConstructor(beforeFile), await sizesByConstructor(afterFile)];
      const growth = [...is.entries()]
        .map(([name, entry]) => ({ name, size: entry.size - (was.get(name)?.size ?? 0), count: entry.count - (was.get(name)?.count ?? 0) }))
        .filter((entry) => entry.size > 0)
        .sort((a, b) => b.size - a.size)
        .slice(0, 25);
      say('');
      say('  | what (heap snapshot: type and constructor) | bytes per relay | objects per relay |');
      say('  | --- | --- | --- |');
      for (const entry of growth) {
        say(`  | ${entry.name.replace(/\|/g, '\\|').slice(0, 80)} | ${(entry.size / relays).toFixed(0)} | ${(entry.count / relays).toFixed(1)} |`);
      }
      say('');
    }
    return total / relays / 1024;
  } finally {
    await fleet.stop();
    await cloudly.stop();
    await database.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
};

const main = async (): Promise<void> => {
  say('# Memory per connected idle relay');
  say('');
  say(`\`node --import tsx bench/relaymemory.bench.ts ${args.join(' ')}\` on ${os.cpus().length} cores, ${new Date().toISOString()}.`);
  say('');
  const off = await measure('compression off (the default)', '');
  const on = await measure('compression on for relay sockets (CLOUDLY_WEBSOCKET_COMPRESSION=relay)', 'relay');
  say('');
  say(`Against the aim of ${aimKb} KB per idle relay: ${off.toFixed(1)} KB with compression off (${off < aimKb ? 'met' : 'NOT met'}), `
    + `${on.toFixed(1)} KB with it on (${(on / off).toFixed(1)}× as much).`);
  await reportResults('relaymemory.md', lines);
};

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
