/**
 * Memory per connected idle relay (issue 36: aim < 30 KB), and where it goes. Writes
 * bench/results/relaymemory.md.
 *
 *   node --import tsx bench/relaymemory.bench.ts [relays]          default 1000
 *   node --import tsx bench/relaymemory.bench.ts [relays] --where  also heap snapshots at 0 and N
 *                                                                  relays: the growth by constructor
 *   npm run bench -- --smoke relaymemory                           tiny sizes, seconds
 *   RELAYMEMORY_SNAPSHOTS=DIR … --where                            keeps the heap snapshots in DIR
 *   node --import tsx bench/relaymemory.bench.ts [relays] --off    compression off only (for runs
 *                                                                  compared under another setting,
 *                                                                  e.g. MALLOC_ARENA_MAX=2)
 *
 * One Cloudly in this process over a database in a process of its own (scripts/dev-database.ts,
 * as in production: the documents a relay adds are the database's memory, not Cloudly's). The N
 * clusters are created beforehand through another Cloudly, in a child process, so this process's
 * RSS has not been grown by the seeding (its freed pages would hide what the relays take); the
 * relays in a child process (bench/helpers/fleetrelays.ts). Figures after full garbage
 * collections: the V8 heap (the live memory), memory outside it (ArrayBuffers: socket and zlib
 * buffers), per relay, with WebSocket compression off and with it on for relay sockets; and the
 * process's RSS once the storm has settled, per relay, which also holds what V8 and the allocator
 * keep of the storm's pages.
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
import { cloudlyProcessEnv, startCloudlyProcess } from '../test/helpers/process.js';
import { buildTestServer, testServerEnvName } from '../scripts/testserver.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const args = process.argv.slice(2);
const relays = Number(args.find((arg) => /^\d+$/.test(arg)) ?? sized(1000, 20));
const where = args.includes('--where');
const offOnly = args.includes('--off');
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

/** Creates the clusters through a Cloudly in a child process (stopped afterwards); answers their relay tokens. */
const seedElsewhere = async (dataDirArg: string, databaseArg: { mongoDbUrl: string; secretsKeyFile: string }): Promise<string[]> => {
  const seeder = await startCloudlyProcess(cloudlyProcessEnv(path.join(dataDirArg, 'seeder'), {
    MONGODB_URL: databaseArg.mongoDbUrl, CLOUDLY_SECRETS_KEY_FILE: databaseArg.secretsKeyFile,
  }));
  try {
    const admin = new CloudlyAdminClient(seeder.baseUrl, { liveness: false });
    await admin.login('admin', password);
    await admin.connectSocket();
    const tokens: string[] = new Array(relays);
    await inParallel(relays, 16, async (indexArg) => {
      tokens[indexArg] = (await admin.call('createCluster', { name: `memory-${indexArg}` })).relayToken;
    });
    admin.close();
    return tokens;
  } finally {
    const exited = new Promise((resolve) => seeder.child.once('exit', resolve));
    seeder.child.kill('SIGTERM');
    await exited;
  }
};

const measure = async (labelArg: string, compressionArg: string): Promise<number> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-relaymemory-'));
  const database = await startDevDatabase(path.join(dataDir, 'database'));
  await fsp.mkdir(path.join(dataDir, 'seeder'));
  const tokens = await seedElsewhere(dataDir, database);
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
    // The RSS once the storm is 30 s behind (as the fleet bench's "settled" figure), after full
    // collections: what V8 and the allocator (glibc malloc's arenas) kept of the storm's pages.
    await sleep(sized(25_000, 200));
    const settled = await settledMemory();
    const perRelay = (valueArg: number): string => `${(valueArg / relays / 1024).toFixed(1)} KB`;
    const total = (after.heap - before.heap) + (after.outside - before.outside);
    say(`- ${labelArg}${process.env.MALLOC_ARENA_MAX ? `, MALLOC_ARENA_MAX=${process.env.MALLOC_ARENA_MAX}` : ''}: ${relays} relays connected and idle (load ${load()}): `
      + `live memory after full collections: V8 heap +${perRelay(after.heap - before.heap)}, outside the heap +${perRelay(after.outside - before.outside)}, `
      + `together ${perRelay(total)} per relay; settled RSS (once the storm is 30 s behind, after full collections) +${perRelay(settled.rss - before.rss)} per relay`);
    settledRssKb.push((settled.rss - before.rss) / relays / 1024);
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

/** The settled RSS per relay of each measurement, in KB, in order. */
const settledRssKb: number[] = [];

const main = async (): Promise<void> => {
  say('# Memory per connected idle relay');
  say('');
  say(`\`${process.env.MALLOC_ARENA_MAX ? `MALLOC_ARENA_MAX=${process.env.MALLOC_ARENA_MAX} ` : ''}node --import tsx bench/relaymemory.bench.ts ${args.join(' ')}\` on ${os.cpus().length} cores, ${new Date().toISOString()}.`);
  say('');
  if (!process.env[testServerEnvName]) {
    // The seeding Cloudly starts from the esbuild bundle, as the fleet bench's instances do.
    process.env[testServerEnvName] = await buildTestServer();
  }
  const off = await measure('compression off (the default)', '');
  const on = offOnly ? null : await measure('compression on for relay sockets (CLOUDLY_WEBSOCKET_COMPRESSION=relay)', 'relay');
  say('');
  say('| compression | live memory per relay after full collections (aim < 30 KB) | settled RSS per relay |');
  say('| --- | --- | --- |');
  say(`| off (the default) | ${off.toFixed(1)} KB (${off < aimKb ? 'met' : 'NOT met'}) | ${settledRssKb[0].toFixed(1)} KB |`);
  if (on !== null) {
    say(`| on for relay sockets | ${on.toFixed(1)} KB (${(on / off).toFixed(1)}× as much) | ${settledRssKb[1].toFixed(1)} KB |`);
  }
  say('');
  say(`The aim is judged by the live memory: what each idle relay holds. The settled RSS also holds what V8 and the allocator kept of the storm's pages, which the next storm reuses.`);
  if (offOnly) {
    // A comparison run: printed, bench/results/relaymemory.md keeps the full run.
    process.stdout.write(`${lines.join('\n')}\n`);
  } else {
    await reportResults('relaymemory.md', lines);
  }
};

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
