/**
 * Overview benchmark: `getClusterOverview` for one cluster with 64 nodes and 500 services (each
 * with a stored runtime status and one backup record), over the admin socket, next to a plain
 * `getClusterById` round trip in the same run. Writes bench/results/overview.md.
 *
 *   node --import tsx bench/overview.bench.ts [services]
 */
import { performance } from 'node:perf_hooks';
import { inParallel, startBenchCloudly, timeEach } from './helpers/benchcloudly.js';
import type { IReq_Any_Cloudly_CreateCluster } from '../ts/interfaces/requests/admin.js';
import type { IReq_Any_Cloudly_CreateService } from '../ts/interfaces/requests/service.js';
import type { IReq_Admin_GetClusterOverview } from '../ts/interfaces/requests/overview.js';
import { serviceBackupKind } from '../ts/manager.backup/backup.manager.js';
import { runInOperation } from '../ts/core/operationcontext.js';
import { serviceKind, serviceRuntimeStatusKind } from '../ts/manager.service/service.manager.js';
import { clusterNodeKind } from '../ts/manager.cluster/clusternodes.js';
import { reportResults, sized } from './helpers/smoke.js';

const serviceCount = Number(process.argv[2] ?? sized(500, 20));
const nodeCount = sized(64, 4);
const rounds = sized(50, 2);

const main = async (): Promise<void> => {
  const bench = await startBenchCloudly('overview');
  const { cloudly, admin } = bench;
  try {
    const { cluster } = await admin.call<IReq_Any_Cloudly_CreateCluster>('createCluster', { name: 'bench' });
    const seeded = performance.now();
    await inParallel(nodeCount, 16, (indexArg) => admin.call('addClusterNode', { clusterId: cluster.id, name: `n${indexArg}`, nodeId: `n${indexArg}` }));
    const serviceIds: string[] = [];
    await inParallel(serviceCount, 32, async (indexArg) => {
      const { service } = await admin.call<IReq_Any_Cloudly_CreateService>('createService', {
        service: {
          name: `svc-${indexArg}`,
          organizationId: 'org1',
          clusterId: cluster.id,
          runtime: { image: 'nginx:1', replicas: 1, profile: { runAs: { user: 101, group: 101 } }, placement: { nodeIds: [`n${indexArg % nodeCount}`] } },
          volumes: [],
        },
      });
      serviceIds.push(service.id);
    });
    // A stored runtime status per service (judged once) and one backup record each.
    await inParallel(serviceIds.length, 32, (indexArg) => admin.call('getServiceRuntimeStatus', { serviceId: serviceIds[indexArg] }));
    await inParallel(serviceIds.length, 32, (indexArg) => runInOperation({ actor: { kind: 'cloudly', id: 'cloudly' }, method: 'bench', dryRun: false }, () =>
      cloudly.store.insert(serviceBackupKind, {
        id: `backup-${indexArg}`,
        clusterId: cluster.id,
        nodeId: `n${indexArg % nodeCount}`,
        serviceId: serviceIds[indexArg],
        createdAt: Date.now(),
        state: 'completed',
        attemptStartedAt: Date.now(),
        orderSha256: '0'.repeat(64),
        snapshots: [],
      } as never)));
    const seedSeconds = (performance.now() - seeded) / 1000;
    // Background work the seeding started (desired-state refreshes) ends before anything is timed.
    for (let quiet = 0, writes = -1; quiet < 5;) {
      quiet = cloudly.store.committedWrites === writes ? quiet + 1 : 0;
      writes = cloudly.store.committedWrites;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const reads = {
      services: await timeEach(10, () => cloudly.store.find(serviceKind, { clusterId: cluster.id }, { sort: { createdAt: 1 } })),
      statuses: await timeEach(10, () => cloudly.store.find(serviceRuntimeStatusKind, { id: { $in: serviceIds } })),
      backups: await timeEach(10, () => cloudly.store.find(serviceBackupKind, { clusterId: cluster.id })),
      nodes: await timeEach(10, () => cloudly.store.find(clusterNodeKind, { clusterId: cluster.id })),
    };

    const first = await admin.call<IReq_Admin_GetClusterOverview>('getClusterOverview', { clusterId: cluster.id });
    const answerBytes = Buffer.byteLength(JSON.stringify(first));
    const baseline = await timeEach(rounds, () => admin.call('getClusterById', { clusterId: cluster.id }));
    const overview = await timeEach(rounds, () => admin.call<IReq_Admin_GetClusterOverview>('getClusterOverview', { clusterId: cluster.id }));
    const lines = [
      '# getClusterOverview',
      '',
      `Run \`node --import tsx bench/overview.bench.ts\` (${new Date().toISOString().slice(0, 10)}, shared 2-core machine, embedded database, admin socket).`,
      `One cluster, ${nodeCount} nodes, ${first.overview.services.length} services, each with a stored runtime status and one backup record;`,
      `seeding took ${seedSeconds.toFixed(1)} s (32 calls in flight). Answer: ${(answerBytes / 1024).toFixed(0)} KiB.`,
      '',
      '| call | p50 | p90 | mean |',
      '| --- | --- | --- | --- |',
      `| getClusterById (round-trip baseline) | ${baseline.p50.toFixed(2)} ms | ${baseline.p90.toFixed(2)} ms | ${baseline.mean.toFixed(2)} ms |`,
      `| getClusterOverview | ${overview.p50.toFixed(2)} ms | ${overview.p90.toFixed(2)} ms | ${overview.mean.toFixed(2)} ms |`,
      '',
      'The reads it makes, timed in the process (no transport):',
      '',
      '| read | p50 |',
      '| --- | --- |',
      ...Object.entries(reads).map(([name, timing]) => `| ${name} | ${timing.p50.toFixed(2)} ms |`),
      '',
      `Aim: p50 under 50 ms — ${overview.p50 < 50 ? 'met' : 'missed'}.`,
      '',
    ];
    await reportResults('overview.md', lines);
  } finally {
    await bench.stop();
  }
};

await main();
