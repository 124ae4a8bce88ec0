/**
 * Image version benchmark: a relay pushes a service's image (one tar stream) into Cloudly's blob store
 * and pulls it back, against a baseline measured in the same run on the same Cloudly: the same bytes
 * written straight into the same blob store from memory (sha256 proven, fsynced, renamed), the work a
 * push cannot avoid. The ratio printed is the push's median against the baseline's median; the pull
 * is printed beside it (the relay proves length and sha256 as it reads).
 *
 *   node --import tsx bench/imageversion.bench.ts [sizeMiB]     (default 128 MiB, 3 rounds)
 *   IMAGE_BENCH_ROUNDS=5                                         rounds
 *
 * Cloudly runs in this process (as the test helpers start it), so the figures include the relay's
 * own work in the same process: compare the ratio, not the absolute speed, across machines.
 */
import { randomBytes, createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import * as os from 'node:os';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { pullImageVersion, pushImageVersion } from '../ts/client/relayimages.js';
import type { IReq_Any_Cloudly_CreateService } from '../ts/interfaces/requests/service.js';
import { startBenchCloudly } from './helpers/benchcloudly.js';
import { reportResults, sized, smoke } from './helpers/smoke.js';

const mebibyte = 1024 * 1024;
const sizeMiB = sized(Number(process.argv[2] ?? 128), 1);
const rounds = sized(Number(process.env.IMAGE_BENCH_ROUNDS ?? 3), 1);
const chunkBytes = 256 * 1024;

async function* chunksOf(bytesArg: Buffer): AsyncIterable<Buffer> {
  for (let offset = 0; offset < bytesArg.byteLength; offset += chunkBytes) {
    yield bytesArg.subarray(offset, offset + chunkBytes);
  }
}

const median = (valuesArg: number[]): number => {
  const sorted = [...valuesArg].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

const mibPerSecond = (bytesArg: number, msArg: number): number => (bytesArg / mebibyte) / (msArg / 1000);

const main = async (): Promise<void> => {
  const bench = await startBenchCloudly('imageversion');
  const { cloudly, admin } = bench;
  try {
    const { cluster, relayToken } = await admin.call('createCluster', { name: 'image-bench' });
    const relay = await CloudlyRelayClient.connect(cloudly.baseUrl, relayToken, { reconnect: false });
    const baseline: number[] = [];
    const pushes: number[] = [];
    const pulls: number[] = [];
    // One warm-up round (not counted outside a smoke run): the first write of a process pays for
    // directories, the JIT and the first fsyncs, which would flatter whichever phase runs second.
    const warmup = smoke ? 0 : 1;
    for (let round = 0; round < rounds + warmup; round++) {
      const counted = round >= warmup;
      // A fresh service per round: every push stores a new version.
      const { service } = await admin.call<IReq_Any_Cloudly_CreateService>('createService', {
        service: {
          name: `image-bench-${round}`, organizationId: 'org-bench', clusterId: cluster.id,
          runtime: { image: 'registry.example/app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
          volumes: [],
        },
      });
      const bytes = randomBytes(sizeMiB * mebibyte);
      const digest = createHash('sha256').update(bytes).digest('hex');

      const runBaseline = async (): Promise<void> => {
        const at = performance.now();
        await cloudly.backupManager.blobStore.put(`bench/${round}`, { byteLength: bytes.byteLength, sha256: digest }, chunksOf(bytes));
        if (counted) baseline.push(performance.now() - at);
      };
      const runPush = async (): Promise<void> => {
        const at = performance.now();
        const pushed = await pushImageVersion(relay, { serviceId: service.id, digest, byteLength: bytes.byteLength }, chunksOf(bytes));
        if (counted) pushes.push(performance.now() - at);
        if (pushed.outcome !== 'stored') {
          throw new Error('the bench image was already held');
        }
      };
      // Alternate which runs first, so neither always finds the disk's cache warmer.
      if (round % 2 === 0) {
        await runBaseline();
        await runPush();
      } else {
        await runPush();
        await runBaseline();
      }

      const started = performance.now();
      const pulled = await pullImageVersion(relay, { serviceId: service.id, digest }, { transientChunks: true });
      let received = 0;
      for await (const chunk of pulled.bytes) {
        received += chunk.byteLength;
      }
      if (counted) pulls.push(performance.now() - started);
      if (received !== bytes.byteLength) {
        throw new Error(`pulled ${received} of ${bytes.byteLength} bytes`);
      }
    }
    relay.close();
    const bytes = sizeMiB * mebibyte;
    const lines = [
      `# Image versions: push and pull (${sizeMiB} MiB, ${rounds} round${rounds === 1 ? '' : 's'}${smoke ? ', smoke' : ''})`,
      '',
      `Machine: ${os.cpus().length} cores, load average ${os.loadavg().map((value) => value.toFixed(1)).join(' / ')} at the end.`,
      '',
      '| phase | median MiB/s | rounds (MiB/s) |',
      '| --- | --- | --- |',
      `| baseline: blob store put from memory | ${mibPerSecond(bytes, median(baseline)).toFixed(0)} | ${baseline.map((ms) => mibPerSecond(bytes, ms).toFixed(0)).join(', ')} |`,
      `| push (relay → Cloudly, receipt once durable) | ${mibPerSecond(bytes, median(pushes)).toFixed(0)} | ${pushes.map((ms) => mibPerSecond(bytes, ms).toFixed(0)).join(', ')} |`,
      `| pull (Cloudly → relay, verified) | ${mibPerSecond(bytes, median(pulls)).toFixed(0)} | ${pulls.map((ms) => mibPerSecond(bytes, ms).toFixed(0)).join(', ')} |`,
      '',
      `Push against the baseline (median time): ${(median(pushes) / median(baseline)).toFixed(2)}× the time of the unavoidable work.`,
      '',
    ];
    await reportResults('imageversion.md', lines);
  } finally {
    await bench.stop();
  }
};

await main();
