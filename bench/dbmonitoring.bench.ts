/**
 * What the MongoDB driver's command monitoring (`monitorCommands`) costs a read. Cloudly counts
 * its database commands for /metrics (cloudly_database_commands_total); it used to do that with
 * the driver's command events, and counts connection checkouts now (ts/core/database.ts). With
 * monitoring on, the driver decodes every reply once more, into a plain object for the
 * `commandSucceeded` event, a reply the caller reads lazily on its own.
 *
 * One real Cloudly on the embedded database, seeded with clusters; two driver clients on its
 * database socket, one with `monitorCommands=true` and a listener (as Cloudly had it), one
 * without. Rounds alternate between them; each round reads the cluster collection whole, again
 * and again (the whole collection, and one document), and the process's CPU for the round is measured (the embedded database answers in
 * this process too, the same work for both sides). Figures are printed; nothing is asserted.
 *
 *   node --import tsx bench/dbmonitoring.bench.ts
 */
import { MongoClient, type Collection } from 'mongodb';
import { startBenchCloudly } from './helpers/benchcloudly.js';
import { sized } from './helpers/smoke.js';

const clusters = sized(200, 5);
const readsPerRound = sized(300, 3);
const rounds = sized(6, 1);

const cpuSeconds = (): number => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
};

const median = (valuesArg: number[]): number => [...valuesArg].sort((a, b) => a - b)[Math.floor(valuesArg.length / 2)];

const main = async (): Promise<void> => {
  const bench = await startBenchCloudly('dbmonitoring');
  const clients: MongoClient[] = [];
  try {
    for (let index = 0; index < clusters; index++) {
      await bench.admin.call('createCluster', { name: `bench-monitoring-${index}` });
    }
    const database = bench.cloudly.database as unknown as { socketPath: string | null; options: { mongoDbName: string } };
    const base = `mongodb://${encodeURIComponent(database.socketPath!)}/?serverMonitoringMode=poll&directConnection=true`;
    const monitored = new MongoClient(`${base}&monitorCommands=true`);
    let commandsSeen = 0;
    monitored.on('commandStarted', () => {
      commandsSeen++;
    });
    const plain = new MongoClient(base);
    let checkouts = 0;
    plain.on('connectionCheckedOut', () => {
      checkouts++;
    });
    clients.push(monitored, plain);
    const sides = [
      { name: 'monitorCommands on', client: monitored },
      { name: 'monitorCommands off (checkouts counted)', client: plain },
    ];
    const workloads = [
      { name: `whole collection (${clusters} documents)`, read: (collectionArg: Collection) => collectionArg.find({}).toArray(), least: clusters },
      { name: 'one document', read: (collectionArg: Collection) => collectionArg.find({}).limit(1).toArray(), least: 1 },
    ];
    const readRound = async (clientArg: MongoClient, workloadArg: typeof workloads[number]): Promise<number> => {
      const collection = clientArg.db(database.options.mongoDbName).collection('CloudlyCluster');
      const before = cpuSeconds();
      for (let read = 0; read < readsPerRound; read++) {
        const docs = await workloadArg.read(collection);
        if (docs.length < workloadArg.least) {
          throw new Error(`read ${docs.length} clusters, expected at least ${workloadArg.least}`);
        }
      }
      return cpuSeconds() - before;
    };
    console.log(`dbmonitoring bench: ${clusters} clusters, ${rounds} alternating rounds of ${readsPerRound} reads per workload and side`);
    for (const workload of workloads) {
      const cpu = sides.map(() => [] as number[]);
      // One unmeasured round each: the side measured first must not pay the warm-up.
      for (const side of sides) {
        await readRound(side.client, workload);
      }
      commandsSeen = checkouts = 0;
      for (let round = 0; round < rounds; round++) {
        const order = round % 2 === 0 ? [0, 1] : [1, 0];
        for (const index of order) {
          cpu[index].push(await readRound(sides[index].client, workload));
        }
      }
      console.log(`  ${workload.name}:`);
      sides.forEach((side, index) => {
        const perRead = (median(cpu[index]) / readsPerRound) * 1000;
        console.log(`    ${side.name}: ${perRead.toFixed(3)} ms CPU per read (median round; rounds ${cpu[index].map((value) => value.toFixed(2)).join(', ')} CPU-s)`);
      });
      const ratio = median(cpu[0]) / median(cpu[1]);
      console.log(`    ratio on/off: ${ratio.toFixed(2)}; commands counted, monitored: ${commandsSeen}, checkouts: ${checkouts} (${rounds * readsPerRound} reads each)`);
    }
  } finally {
    for (const client of clients) {
      await client.close();
    }
    await bench.stop();
  }
};

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
