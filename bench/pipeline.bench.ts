/**
 * The cost of the declared-operation pipeline (ts/core/operations.ts) against the same work
 * registered as a hand-written handler, in one run on one server: `getClusterById` (an
 * adminQuery) and `removeClusterNode`-style one-document writes (`setClusterNodeCorestore`, an
 * adminMutation) against handlers that do exactly the same reads and writes directly.
 * Aim (issue 15): within 5%. Figures are printed; nothing is asserted.
 * First, the contract schema's cost on the largest value it checks (a projection with 1,024
 * grants) against the hand validator (issue 32: under 10 ms).
 *
 *   node --import tsx bench/pipeline.bench.ts
 */
import { refuse } from '../ts/core/errors.js';
import { isIdString, requireRequestShape } from '../ts/core/validation.js';
import { clusterKind, toPublicCluster } from '../ts/manager.cluster/documents.js';
import { clusterNodeDocumentId, clusterNodeKind, toPublicClusterNode } from '../ts/manager.cluster/clusternodes.js';
import { decideNodeCorestore } from '../ts/manager.cluster/decide.js';
import type { TUntypedContract } from '../ts/client/admin.js';
import { ratePerSecond, startBenchCloudly, timeEach } from './helpers/benchcloudly.js';
import { sized } from './helpers/smoke.js';
import { measureSchemaValidation } from './helpers/schemavalidation.js';

const rounds = Number(process.env.PIPELINE_BENCH_ROUNDS ?? sized(3, 1));

const main = async (): Promise<void> => {
  // Before the server starts, so its work does not share the cores with the validators.
  for (const line of measureSchemaValidation(sized(101, 3), sized(1_024, 8))) {
    console.log(line);
  }
  const bench = await startBenchCloudly('pipeline');
  const { cloudly, admin } = bench;
  try {
    // The hand-written baselines: the handler bodies the methods had before they were declared.
    cloudly.addAdminHandler<TUntypedContract>('benchDirectGetClusterById', async (requestArg) => {
      const request = requireRequestShape(requestArg as { clusterId: string }, { required: { clusterId: isIdString } });
      const doc = await cloudly.store.get(clusterKind, request.clusterId);
      if (!doc) {
        throw refuse('not-found', [`cluster ${request.clusterId} does not exist`]);
      }
      return { cluster: toPublicCluster(doc) };
    }, { access: 'read' });
    cloudly.addAdminHandler<TUntypedContract>('benchDirectSetClusterNodeCorestore', async (requestArg) => {
      const request = requestArg as { clusterId: string; nodeId: string; expected: { endpoint: string } | null; corestore: { endpoint: string } | null };
      if (!(await cloudly.store.get(clusterKind, request.clusterId))) {
        throw refuse('not-found', [`cluster ${request.clusterId} does not exist`]);
      }
      const { doc } = await cloudly.store.mutate(clusterNodeKind, clusterNodeDocumentId(request.clusterId, request.nodeId), (current) =>
        decideNodeCorestore(current, request.clusterId, request.nodeId, request.expected, request.corestore));
      return { node: toPublicClusterNode(doc!) };
    }, { access: 'write' });

    const { cluster } = await admin.call('createCluster', { name: 'pipeline' });
    await admin.call('addClusterNode', { clusterId: cluster.id, name: 'declared', nodeId: 'declared' });
    await admin.call('addClusterNode', { clusterId: cluster.id, name: 'direct', nodeId: 'direct' });
    const endpoints = ['https://corestore-a.example:7443', 'https://corestore-b.example:7443'];
    const flip = (stateArg: { next: number }) => {
      const expected = stateArg.next === 0 ? null : { endpoint: endpoints[(stateArg.next - 1) % 2] };
      const corestore = { endpoint: endpoints[stateArg.next % 2] };
      stateArg.next++;
      return { expected, corestore };
    };
    const declaredState = { next: 0 };
    const directState = { next: 0 };

    console.log(`pipeline bench: ${rounds} alternating rounds, admin socket, embedded database`);
    const reads = { declared: [] as number[], direct: [] as number[] };
    const writes = { declared: [] as number[], direct: [] as number[] };
    // One unmeasured round first: the side measured first would otherwise pay the warm-up of the
    // whole call path (JIT, caches). Without it, the first rounds of three quiet runs gave the
    // declared read 0.74-0.83x and every later round 0.91-1.02x (bench/results/pipeline.md).
    await ratePerSecond(8, () => admin.call('getClusterById', { clusterId: cluster.id }), sized(1_000, 100));
    await ratePerSecond(8, () => admin.call<TUntypedContract>('benchDirectGetClusterById', { clusterId: cluster.id }), sized(1_000, 100));
    await timeEach(sized(100, 5), () => admin.call('setClusterNodeCorestore', { clusterId: cluster.id, nodeId: 'declared', ...flip(declaredState) }));
    await timeEach(sized(100, 5), () => admin.call<TUntypedContract>('benchDirectSetClusterNodeCorestore', { clusterId: cluster.id, nodeId: 'direct', ...flip(directState) }));
    for (let round = 0; round < rounds; round++) {
      // Odd rounds run the hand-written side first, so neither side always follows the other's garbage.
      const pair = async (firstArg: () => Promise<void>, secondArg: () => Promise<void>) => {
        if (round % 2 === 0) {
          await firstArg();
          await secondArg();
        } else {
          await secondArg();
          await firstArg();
        }
      };
      await pair(
        async () => { reads.declared.push(await ratePerSecond(8, () => admin.call('getClusterById', { clusterId: cluster.id }), 2_000)); },
        async () => { reads.direct.push(await ratePerSecond(8, () => admin.call<TUntypedContract>('benchDirectGetClusterById', { clusterId: cluster.id }), 2_000)); },
      );
      await pair(
        async () => {
          writes.declared.push(1000 / (await timeEach(300, () =>
            admin.call('setClusterNodeCorestore', { clusterId: cluster.id, nodeId: 'declared', ...flip(declaredState) }))).mean);
        },
        async () => {
          writes.direct.push(1000 / (await timeEach(300, () =>
            admin.call<TUntypedContract>('benchDirectSetClusterNodeCorestore', { clusterId: cluster.id, nodeId: 'direct', ...flip(directState) }))).mean);
        },
      );
    }
    const median = (valuesArg: number[]) => [...valuesArg].sort((a, b) => a - b)[Math.floor(valuesArg.length / 2)];
    const line = (nameArg: string, pairArg: { declared: number[]; direct: number[] }) => {
      const declared = median(pairArg.declared);
      const direct = median(pairArg.direct);
      console.log(`${nameArg}: declared ${declared.toFixed(0)}/s, hand-written ${direct.toFixed(0)}/s, ratio ${(declared / direct).toFixed(3)} `
        + `(rounds: ${pairArg.declared.map((value, index) => (value / pairArg.direct[index]).toFixed(3)).join(', ')})`);
    };
    line('getClusterById, 8 in flight', reads);
    line('setClusterNodeCorestore, sequential (audited write)', writes);
  } finally {
    await bench.stop();
  }
};

await main();
