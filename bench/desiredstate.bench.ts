/**
 * Desired-state benchmark: computing and digesting one cluster's desired state with 1,000
 * services on 64 nodes, and the `unchanged` answer a relay gets when it already has the current
 * revision, next to a plain relay round trip in the same run.
 *
 *   node --import tsx bench/desiredstate.bench.ts [services]
 */
import { performance } from 'node:perf_hooks';
import { inParallel, startBenchCloudly, timeEach } from './helpers/benchcloudly.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { computeClusterPlatformDesiredStateDigest } from '../ts/interfaces/data/desiredstate.js';
import type { IReq_Any_Cloudly_CreateCluster } from '../ts/interfaces/requests/admin.js';
import type { IReq_Any_Cloudly_CreateService } from '../ts/interfaces/requests/service.js';
import type { IReq_Relay_Cloudly_GetClusterPlatformDesiredState } from '../ts/interfaces/requests/desiredstate.js';
import type { IReq_Relay_Cloudly_GetClusterNodeCorestores } from '../ts/interfaces/requests/cluster.js';
import { sized } from './helpers/smoke.js';

const serviceCount = Number(process.argv[2] ?? sized(1000, 20));
const nodeCount = sized(64, 4);

const main = async (): Promise<void> => {
  const bench = await startBenchCloudly('desired');
  const { cloudly, admin } = bench;
  let relay: CloudlyRelayClient | null = null;
  try {
    const { cluster, relayToken } = await admin.call<IReq_Any_Cloudly_CreateCluster>('createCluster', { name: 'bench' });
    for (let index = 0; index < nodeCount; index++) {
      await admin.call('addClusterNode', { clusterId: cluster.id, name: `n${index}`, nodeId: `n${index}` });
    }
    const seeded = performance.now();
    await inParallel(serviceCount, 32, (index) => admin.call<IReq_Any_Cloudly_CreateService>('createService', {
      service: {
        name: `svc-${index}`, organizationId: 'org-1', clusterId: cluster.id,
        runtime: {
          image: `registry.example/app-${index}:1`, replicas: 1, profile: { runAs: null }, placement: { nodeIds: [`n${index % nodeCount}`] },
        },
        ports: [{ name: 'http', port: 8080, protocol: 'tcp' }],
        routes: [{ hostname: `app-${index}.example.com`, targetPort: 'http' }],
        volumes: [],
      },
    }));
    process.stdout.write(`seeded ${serviceCount} services on ${nodeCount} nodes in ${((performance.now() - seeded) / 1000).toFixed(1)} s\n`);

    const manager = cloudly.desiredStateManager;
    const content = await manager.computeContent(cluster.id);
    const compute = await timeEach(20, () => manager.computeContent(cluster.id));
    const digest = await timeEach(20, async () => computeClusterPlatformDesiredStateDigest(content));
    const publish = await timeEach(20, () => manager.currentDesiredState(cluster.id));
    process.stdout.write(`| step | p50 | mean |\n| --- | --- | --- |\n`);
    process.stdout.write(`| compute (reads + assembly) | ${compute.p50.toFixed(1)} ms | ${compute.mean.toFixed(1)} ms |\n`);
    process.stdout.write(`| digest (canonical JSON + sha256) | ${digest.p50.toFixed(1)} ms | ${digest.mean.toFixed(1)} ms |\n`);
    process.stdout.write(`| compute + digest + publish check | ${publish.p50.toFixed(1)} ms | ${publish.mean.toFixed(1)} ms |\n`);

    relay = await CloudlyRelayClient.connect(cloudly.baseUrl, relayToken, { reconnect: false });
    const deadline = Date.now() + 5_000;
    while (!cloudly.relays.sessionsOf(cluster.id).some((session) => cloudly.clusterManager.isElected(session)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const full = await relay.fire<IReq_Relay_Cloudly_GetClusterPlatformDesiredState>('getClusterPlatformDesiredState', {});
    const revision = full.unchanged ? full.revision : full.desiredState.revision;
    const unchanged = await timeEach(500, async () => {
      const answer = await relay!.fire<IReq_Relay_Cloudly_GetClusterPlatformDesiredState>('getClusterPlatformDesiredState', { knownRevision: revision });
      if (!answer.unchanged) {
        throw new Error('expected unchanged');
      }
    });
    const fullRead = await timeEach(10, () => relay!.fire<IReq_Relay_Cloudly_GetClusterPlatformDesiredState>('getClusterPlatformDesiredState', {}));
    const baseline = await timeEach(500, () => relay!.fire<IReq_Relay_Cloudly_GetClusterNodeCorestores>('getClusterNodeCorestores', { nodeIds: [] }));
    process.stdout.write(`\nover the relay socket (round trip): unchanged answer p50 ${unchanged.p50.toFixed(2)} ms, `
      + `full answer p50 ${fullRead.p50.toFixed(1)} ms, baseline getClusterNodeCorestores p50 ${baseline.p50.toFixed(2)} ms `
      + `(unchanged/baseline ${(unchanged.p50 / baseline.p50).toFixed(2)}×)\n`);
  } finally {
    relay?.close();
    await bench.stop();
  }
};

await main();
