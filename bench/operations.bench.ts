/**
 * Operations benchmark: what the audit log costs a write, and what an admin call costs end to end
 * with the operation context, in one run on one embedded database.
 *
 *   node --import tsx bench/operations.bench.ts
 *
 * - `store.mutate` increments on an audited kind against the same on an unaudited kind (the only
 *   difference: the stamp in the write and the event appended after it), sequential and 32 in flight;
 * - dry-run `mutate` of the audited kind (reads and decides, writes nothing);
 * - admin `rotateClusterRelayToken` (a real audited mutation) and `getClusters` over the admin socket.
 */
import { ratePerSecond, startBenchCloudly } from './helpers/benchcloudly.js';
import { defineDocumentKind, type IStoredDocument } from '../ts/core/store.js';
import { runInOperation } from '../ts/core/operationcontext.js';
import type { IReq_Any_Cloudly_CreateCluster, IReq_Any_Cloudly_GetClusters, IReq_Any_Cloudly_RotateClusterRelayToken } from '../ts/interfaces/requests/admin.js';
import { sized } from './helpers/smoke.js';

/** Project's own definition: the counters the store phases increment. */
interface IBenchCounter extends IStoredDocument {
  value: number;
}

const auditedKind = defineDocumentKind<IBenchCounter>('CloudlyBenchAudited');
const unauditedKind = defineDocumentKind<IBenchCounter>('CloudlyBenchUnaudited', { audited: false });
const phaseMaxOps = sized(10_000, 100);
const rate = (inFlightArg: number, opArg: (workerArg: number) => Promise<unknown>) => ratePerSecond(inFlightArg, opArg, 2_500, phaseMaxOps);

const main = async (): Promise<void> => {
  const bench = await startBenchCloudly('operations');
  const { cloudly, admin } = bench;
  try {
    const { store } = cloudly;
    const operation = { actor: { kind: 'admin' as const, id: 'bench' }, method: 'bench', dryRun: false };
    for (const kind of [auditedKind, unauditedKind]) {
      for (let worker = 0; worker < 32; worker++) {
        await store.insert(kind, { id: `c-${worker}`, value: 0 });
      }
    }
    const increment = (kindArg: typeof auditedKind, dryRunArg = false) => (workerArg: number) =>
      runInOperation({ ...operation, dryRun: dryRunArg }, async () => {
        await store.mutate(kindArg, `c-${workerArg}`, (current) => ({ kind: 'write', change: { set: { value: current!.value + 1 } } }));
      });
    await rate(1, increment(auditedKind));
    await rate(1, increment(unauditedKind));
    const rows: Array<[string, number, number]> = [];
    for (const inFlight of [1, 32]) {
      const unaudited = await rate(inFlight, increment(unauditedKind));
      const audited = await rate(inFlight, increment(auditedKind));
      rows.push([`mutate, ${inFlight} in flight`, unaudited, audited]);
    }
    const dry = await rate(1, increment(auditedKind, true));
    process.stdout.write('| writes | unaudited ops/s | audited ops/s | audited/unaudited |\n| --- | --- | --- | --- |\n');
    for (const [label, unaudited, audited] of rows) {
      process.stdout.write(`| ${label} | ${unaudited.toFixed(0)} | ${audited.toFixed(0)} | ${(audited / unaudited).toFixed(2)}× |\n`);
    }
    process.stdout.write(`\ndry-run mutate of the audited kind, sequential: ${dry.toFixed(0)} ops/s (${(dry / rows[0][2]).toFixed(2)}× the audited write)\n`);

    const { cluster } = await admin.call<IReq_Any_Cloudly_CreateCluster>('createCluster', { name: 'bench' });
    let generation = cluster.generation;
    const rotations = await rate(1, async () => {
      generation = (await admin.call<IReq_Any_Cloudly_RotateClusterRelayToken>('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: generation })).cluster.generation;
    });
    const reads = await rate(1, async () => {
      await admin.call<IReq_Any_Cloudly_GetClusters>('getClusters', {});
    });
    process.stdout.write(`admin socket, sequential: rotateClusterRelayToken ${rotations.toFixed(0)}/s (audited mutation), getClusters ${reads.toFixed(0)}/s\n`);
  } finally {
    await bench.stop();
  }
};

await main();
