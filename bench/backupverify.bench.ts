/**
 * Backup verification benchmark: `verifyServiceBackup` over a backup whose stored closure is
 * `sizeMiB` MiB (filesystem blob store, embedded database), against the one-core sha256 limit
 * measured in the same run: node:crypto hashing the same bytes from memory on this one thread.
 * The aim (issue 56) is a verification at ≥ 0.8× that limit: reading the closure back should cost
 * little beside the hash every byte needs anyway.
 *
 * The closure is put into the blob store directly (as a completed upload leaves it) and the backup
 * recorded with its receipt, so only the verification is timed: the admin call over the socket,
 * the read back, the hash, the compare-and-swap recording the outcome. Each round runs the
 * baseline and the verification back to back (alternating which goes first); medians are compared.
 *
 *   node --import tsx bench/backupverify.bench.ts [sizeMiB]       (default 256)
 *   BACKUPVERIFY_BENCH_ROUNDS=5                                    (default 3)
 *   npm run bench -- --smoke backupverify                          (tiny sizes; no results file)
 */
import { createHash, randomFillSync } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import * as os from 'node:os';
import { performance } from 'node:perf_hooks';
import { startBenchCloudly } from './helpers/benchcloudly.js';
import { reportResults, sized } from './helpers/smoke.js';
import { closureBlobKey, serviceBackupKind } from '../ts/manager.backup/documents.js';
import type { IReq_Any_Cloudly_CreateCluster } from '../ts/interfaces/requests/admin.js';
import type { IReq_Admin_VerifyServiceBackup } from '../ts/interfaces/requests/backup.js';

const mebibyte = 1024 * 1024;
const sizeMiB = Number(process.argv.slice(2).find((argArg) => /^\d+$/.test(argArg)) ?? sized(256, 4));
const rounds = Number(process.env.BACKUPVERIFY_BENCH_ROUNDS ?? sized(3, 1));
/** The chunk size the baseline hashes in: the blob store's read buffers are 2 MiB too. */
const baselineChunkBytes = 2 * mebibyte;

const median = (valuesArg: number[]): number => [...valuesArg].sort((x, y) => x - y)[Math.floor(valuesArg.length / 2)]!;

async function* chunksOf(bytesArg: Buffer, sizeArg: number): AsyncIterable<Buffer> {
  for (let offset = 0; offset < bytesArg.byteLength; offset += sizeArg) {
    yield bytesArg.subarray(offset, offset + sizeArg);
  }
}

const main = async (): Promise<void> => {
  const bench = await startBenchCloudly('backupverify');
  const { cloudly } = bench;
  try {
    const bytes = Buffer.allocUnsafe(sizeMiB * mebibyte);
    randomFillSync(bytes);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const { cluster } = await bench.admin.call<IReq_Any_Cloudly_CreateCluster>('createCluster', { name: 'bench-verify' });
    const backupId = 'bench-verify-backup';
    const blobKey = closureBlobKey(cluster.id, backupId);
    await cloudly.backupManager.blobStore.put(blobKey, { byteLength: bytes.byteLength, sha256 }, chunksOf(bytes, 256 * 1024));
    const now = Date.now();
    await cloudly.store.insert(serviceBackupKind, {
      id: backupId, clusterId: cluster.id, nodeId: 'node-1', serviceId: 'bench-service', createdAt: now, state: 'completed',
      attemptStartedAt: now, orderSha256: 'b'.repeat(64), snapshots: [],
      closure: {
        blobKey, storedAt: now,
        descriptor: {
          format: 'corestore-database-closure-v1', byteLength: bytes.byteLength, sha256,
          receipt: { receiptId: 'bench-receipt', receiptSha256: 'c'.repeat(64) },
        },
      },
    });

    const baselineMiBs: number[] = [];
    const baselineCpuMsPerMiB: number[] = [];
    const verifyMiBs: number[] = [];
    const verifyCpuMsPerMiB: number[] = [];
    const baseline = () => {
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      const hash = createHash('sha256');
      for (let offset = 0; offset < bytes.byteLength; offset += baselineChunkBytes) {
        hash.update(bytes.subarray(offset, offset + baselineChunkBytes));
      }
      if (hash.digest('hex') !== sha256) throw new Error('baseline hash differs');
      baselineMiBs.push(sizeMiB / ((performance.now() - started) / 1000));
      const cpu = process.cpuUsage(cpuBefore);
      baselineCpuMsPerMiB.push((cpu.user + cpu.system) / 1000 / sizeMiB);
    };
    const verify = async () => {
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      const { backup } = await bench.admin.call<IReq_Admin_VerifyServiceBackup>('verifyServiceBackup', { backupId });
      const seconds = (performance.now() - started) / 1000;
      const cpu = process.cpuUsage(cpuBefore);
      if (backup.verification?.outcome !== 'ok') throw new Error(`verification answered ${JSON.stringify(backup.verification)}`);
      verifyMiBs.push(sizeMiB / seconds);
      verifyCpuMsPerMiB.push((cpu.user + cpu.system) / 1000 / sizeMiB);
    };
    // One unmeasured round of each: the code paths compiled, the file read once.
    baseline();
    await verify();
    baselineMiBs.length = 0;
    baselineCpuMsPerMiB.length = 0;
    verifyMiBs.length = 0;
    verifyCpuMsPerMiB.length = 0;
    for (let round = 0; round < rounds; round++) {
      if (round % 2 === 0) {
        baseline();
        await verify();
      } else {
        await verify();
        baseline();
      }
    }
    const ratio = median(verifyMiBs) / median(baselineMiBs);
    // On a shared machine wall time waits for cores; CPU time per MiB moves much less.
    const cpuRatio = median(baselineCpuMsPerMiB) / median(verifyCpuMsPerMiB);
    const load = execFileSync('uptime', { encoding: 'utf8' }).trim();
    const lines = [
      '# Backup verification: verifyServiceBackup against the one-core sha256 limit',
      '',
      `Run: ${new Date().toISOString()}, ${os.cpus().length} cores (\`uptime\`: ${load}), a ${sizeMiB} MiB closure in the filesystem blob store ` +
        `(${cloudly.config.dataDir}), embedded database, ${rounds} rounds after one unmeasured round of each.`,
      '',
      '| figure | median | rounds |',
      '| --- | --- | --- |',
      `| sha256 from memory, one thread (the limit) | ${median(baselineMiBs).toFixed(0)} MiB/s | ${baselineMiBs.map((valueArg) => valueArg.toFixed(0)).join(', ')} |`,
      `| verifyServiceBackup | ${median(verifyMiBs).toFixed(0)} MiB/s | ${verifyMiBs.map((valueArg) => valueArg.toFixed(0)).join(', ')} |`,
      `| process CPU per MiB, sha256 from memory | ${median(baselineCpuMsPerMiB).toFixed(2)} ms | ${baselineCpuMsPerMiB.map((valueArg) => valueArg.toFixed(2)).join(', ')} |`,
      `| process CPU per MiB verified (all threads) | ${median(verifyCpuMsPerMiB).toFixed(2)} ms | ${verifyCpuMsPerMiB.map((valueArg) => valueArg.toFixed(2)).join(', ')} |`,
      `| ratio of MiB/s, verification to the limit (aim ≥ 0.8×) | ${ratio.toFixed(2)}× | ${ratio >= 0.8 ? 'met' : 'missed'} |`,
      `| ratio of CPU per MiB, the limit's to the verification's | ${cpuRatio.toFixed(2)}× | |`,
    ];
    await reportResults('backupverify.md', lines);
  } finally {
    await bench.stop();
  }
};

await main();
