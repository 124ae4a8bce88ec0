/**
 * Desired-state benchmark: computing and digesting one cluster's desired state with 1,000
 * services on 64 nodes, and the `unchanged` answer a relay gets when it already has the current
 * revision, next to a plain relay round trip in the same run.
 *
 *   node --import tsx bench/desiredstate.bench.ts [services]
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Cloudly } from '../ts/classes.cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { computeClusterPlatformDesiredStateDigest } from '../ts/interfaces/data/desiredstate.js';
import type { IReq_Any_Cloudly_CreateCluster } from '../ts/interfaces/requests/admin.js';
import type { IReq_Any_Cloudly_CreateService } from '../ts/interfaces/requests/service.js';
import type { IReq_Relay_Cloudly_GetClusterPlatformDesiredState } from '../ts/interfaces/requests/desiredstate.js';
import type { IReq_Relay_Cloudly_GetClusterNodeCorestores } from '../ts/interfaces/requests/cluster.js';

const serviceCount = Number(process.argv[2] ?? 1000);
const nodeCount = 64;

const timeEach = async (countArg: number, fnArg: () => Promise<unknown>): Promise<{ p50: number; mean: number }> => {
  const samples: number[] = [];
  for (let index = 0; index < countArg; index++) {
    const started = performance.now();
    await fnArg();
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return { p50: samples[Math.floor(samples.length / 2)], mean: samples.reduce((sum, value) => sum + value, 0) / samples.length };
};

const main = async (): Promise<void> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-desired-'));
  const cloudly = new Cloudly({ config: { port: 0, mongoDbUrl: null, dataDir, adminPassword: 'bench-admin-password-0123', logLevel: 'silent', socketRequestsPerSecond: 1_000_000 } });
  await cloudly.start();
  const admin = new CloudlyAdminClient(cloudly.baseUrl);
  let relay: CloudlyRelayClient | null = null;
  try {
    await admin.login('admin', 'bench-admin-password-0123');
    await admin.connectSocket();
    const { cluster, relayToken } = await admin.call<IReq_Any_Cloudly_CreateCluster>('createCluster', { name: 'bench' });
    for (let index = 0; index < nodeCount; index++) {
      await admin.call('addClusterNode', { clusterId: cluster.id, name: `n${index}`, nodeId: `n${index}` });
    }
    const seeded = performance.now();
    let next = 0;
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (next < serviceCount) {
        const index = next++;
        await admin.call<IReq_Any_Cloudly_CreateService>('createService', {
          service: {
            name: `svc-${index}`, organizationId: 'org-1', clusterId: cluster.id,
            runtime: {
              image: `registry.example/app-${index}:1`, replicas: 1, profile: { runAs: null }, placement: { nodeIds: [`n${index % nodeCount}`] },
              ports: [{ name: 'http', port: 8080, protocol: 'tcp' }],
              routes: [{ hostname: `app-${index}.example.com`, targetPort: 'http' }],
            },
            volumes: [],
          },
        });
      }
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

    relay = await CloudlyRelayClient.connect(cloudly.baseUrl, relayToken);
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
    admin.close();
    await cloudly.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
};

await main();
