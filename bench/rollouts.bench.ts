/**
 * Rollout benchmark: one service (`web`) on each of N simulated clusters (1,000 by default; 6
 * under `--smoke`), all labelled `env=bench`, relays from `cloudly-sim` in a process of its own;
 * Cloudly in this process. A rollout of a new image in 3 waves (10 %, 40 %, the rest; every cluster
 * at once within a wave) is timed from `createRollout` to `completed`. Reported:
 *   - Cloudly's CPU per changed service: this process's CPU over the rollout, divided by N. The
 *     bench follows the rollout by its operation (`getOperation` every 250 ms: two small reads, the
 *     operation and its progress), so its own reads are a small part of it;
 *   - database commands per changed service (`cloudly.database.commandsStarted`, the counter behind
 *     `cloudly_database_commands_total`), everything the instance sent meanwhile: the rollout
 *     controller's, the verdicts', and the simulated relays' reports of the new revision (not split
 *     by who sent them: a read the read batcher merged, or a command that waited for a pooled
 *     connection, runs in the async context of another operation, so a split would misattribute);
 *   - from a wave's last convergence to the next wave's first update: the last verdict write of the
 *     wave's services (store commits of `CloudlyServiceRuntimeStatus`) before the next wave's first
 *     service write (commits of `CloudlyService`).
 * Writes bench/results/rollouts.md (not under `--smoke`).
 *
 *   node --import tsx bench/rollouts.bench.ts [clusters]
 */
import { spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { inParallel, startBenchCloudly } from './helpers/benchcloudly.js';
import { reportResults, sized, smoke } from './helpers/smoke.js';
import { serviceKind, serviceRuntimeStatusKind } from '../ts/manager.service/service.manager.js';
import type { IRollout } from '../ts/interfaces/data/rollout.js';
import type { IOperation } from '../ts/interfaces/requests/operation.js';

const clusterCount = Number(process.argv.slice(2).find((argArg) => !argArg.startsWith('--')) ?? sized(1_000, 6));
const image = (tagArg: string) => `registry.example/bench/web:${tagArg}`;
const sleep = (msArg: number) => new Promise((resolve) => setTimeout(resolve, msArg));
const say = (lineArg: string) => process.stdout.write(`[rollouts] ${lineArg}\n`);

const main = async (): Promise<void> => {
  const bench = await startBenchCloudly('rollouts');
  const { cloudly, admin } = bench;
  const workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-rollouts-'));
  let sim: ReturnType<typeof spawn> | null = null;
  try {
    const seeded = performance.now();
    const tokens: Array<{ name: string; token: string }> = new Array(clusterCount);
    const serviceIds: string[] = new Array(clusterCount);
    await inParallel(clusterCount, 16, async (indexArg) => {
      const name = `bench-${String(indexArg).padStart(5, '0')}`;
      const { cluster, relayToken } = await admin.call('createCluster', { name });
      await admin.call('setClusterLabels', { clusterId: cluster.id, labels: { env: 'bench' }, expectedGeneration: cluster.generation });
      await admin.call('addClusterNode', { clusterId: cluster.id, name: 'node-1', nodeId: 'node-1' });
      const { service } = await admin.call('createService', {
        service: {
          name: 'web', organizationId: 'org-1', clusterId: cluster.id, ports: [], routes: [], volumes: [],
          runtime: { image: image('1'), replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
        },
      });
      tokens[indexArg] = { name, token: relayToken };
      serviceIds[indexArg] = service.id;
    });
    const tokensFile = path.join(workDir, 'tokens.json');
    await fsp.writeFile(tokensFile, JSON.stringify(tokens));
    sim = spawn(process.execPath, [path.join(import.meta.dirname, '..', 'bin', 'cloudly-sim.js'),
      '--url', cloudly.baseUrl, '--tokens', tokensFile, '--nodes', '1', '--start-delay-ms', '100', '--ramp-ms', String(sized(10_000, 0)), '--log-format', 'json'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    // Every service converged, as the fleet overview counts them (one read per 200 clusters).
    const convergedCount = async (): Promise<number> => {
      let total = 0;
      let cursor: string | undefined;
      do {
        const page = await admin.call('getFleetOverview', { selector: 'env=bench', limit: 200, ...(cursor ? { cursor } : {}) });
        total += page.clusters.reduce((sum, summary) => sum + (summary.services.byRuntimeState.converged ?? 0), 0);
        cursor = page.nextCursor;
      } while (cursor);
      return total;
    };
    for (let converged = 0; converged < clusterCount;) {
      await sleep(1_000);
      converged = await convergedCount();
    }
    const seedSeconds = (performance.now() - seeded) / 1000;
    say(`${clusterCount} clusters seeded and converged in ${seedSeconds.toFixed(1)} s`);

    const firstWave = Math.max(1, Math.round(clusterCount * 0.1));
    const secondWave = Math.max(1, Math.round(clusterCount * 0.4));
    const waves = [{ clusters: firstWave }, { clusters: secondWave }, { clusters: clusterCount - firstWave - secondWave }];
    const serviceWrites = new Map<string, number>();
    const verdictWrites = new Map<string, number[]>();
    const stopListening = cloudly.store.onCommitted((kindArg, idArg) => {
      const now = performance.now();
      if (kindArg === serviceKind && !serviceWrites.has(idArg)) {
        serviceWrites.set(idArg, now);
      } else if (kindArg === serviceRuntimeStatusKind) {
        const writes = verdictWrites.get(idArg) ?? [];
        writes.push(now);
        verdictWrites.set(idArg, writes);
      }
    });
    // Time in reconcile runs by scope (every controller by its name; the verdict's by service, cluster, all), from /metrics.
    const reconcileSeconds = async (): Promise<Map<string, number>> => {
      const text = await (await fetch(`${cloudly.baseUrl}/metrics?name=cloudly_reconcile_duration_seconds`)).text();
      return new Map([...text.matchAll(/^cloudly_reconcile_duration_seconds_sum\{scope="([^"]+)"\} ([0-9.e+-]+)$/gm)].map((match) => [match[1], Number(match[2])]));
    };
    const reconcileBefore = await reconcileSeconds();
    const commandsBefore = cloudly.database.commandsStarted;
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const { rollout } = await admin.call('createRollout', {
      selector: 'env=bench', serviceName: 'web', change: { image: image('2') }, waves,
      gate: { timeoutMs: 600_000 }, maxConcurrent: clusterCount,
    });
    let operation: IOperation | null = null;
    while (!operation || operation.state === 'running') {
      await sleep(250);
      operation = (await admin.call('getOperation', { operationId: rollout.id })).operation;
    }
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    const commands = cloudly.database.commandsStarted - commandsBefore;
    stopListening();
    const reconcileAfter = await reconcileSeconds();
    const reconcileSpent = [...reconcileAfter].map(([scope, seconds]) => [scope, seconds - (reconcileBefore.get(scope) ?? 0)] as const)
      .filter(([, seconds]) => seconds > 0).sort((left, right) => right[1] - left[1]);
    const done: IRollout = (await admin.call('getRollout', { rolloutId: rollout.id })).rollout;
    if (done.state !== 'completed') {
      throw new Error(`the rollout ended ${done.state}: ${JSON.stringify(done.targets.filter((target) => target.state !== 'converged').slice(0, 5))}`);
    }
    const cpuMsPerService = (cpu.user + cpu.system) / 1000 / clusterCount;
    const commandsPerService = commands / clusterCount;
    const waveOf = new Map(done.targets.map((target) => [target.serviceId, target.wave]));
    const gaps: string[] = [];
    for (let wave = 0; wave + 1 < done.waves.length; wave++) {
      const nextFirstUpdate = Math.min(...[...serviceWrites].filter(([id]) => waveOf.get(id) === wave + 1).map(([, at]) => at));
      const lastConvergence = Math.max(...[...verdictWrites].filter(([id]) => waveOf.get(id) === wave)
        .map(([, writes]) => Math.max(...writes.filter((at) => at <= nextFirstUpdate))));
      gaps.push(`${(nextFirstUpdate - lastConvergence).toFixed(0)} ms`);
    }
    const load = os.loadavg().map((value) => value.toFixed(1)).join(' / ');
    const lines = [
      '# Rollouts over a simulated fleet',
      '',
      `${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), load (1/5/15 min) at the end ${load}; \`node --import tsx bench/rollouts.bench.ts ${clusterCount}\`.`,
      `${clusterCount} clusters labelled \`env=bench\`, one service \`web\` each, relays simulated by \`cloudly-sim\` in its own process (start delay 100 ms);`,
      `Cloudly in the bench's process on the embedded database. One rollout of a new image in 3 waves of ${waves.map((wave) => wave.clusters).join(', ')} clusters, every cluster of a wave at once (\`maxConcurrent\` ${clusterCount}).`,
      '',
      '| figure | value |',
      '| --- | --- |',
      `| rollout, \`createRollout\` to \`completed\` | ${seconds.toFixed(1)} s |`,
      `| Cloudly's CPU per changed service (the bench process: Cloudly, and its \`getOperation\` every 250 ms) | ${cpuMsPerService.toFixed(2)} ms |`,
      `| database commands per changed service (all the instance sent meanwhile, the relays' reports included) | ${commandsPerService.toFixed(1)} |`,
      `| from a wave's last convergence (its services' last verdict write) to the next wave's first service update | ${gaps.join(', ')} (waves 1→2, 2→3) |`,
      '',
      'Time in reconcile runs per changed service, by scope (`cloudly_reconcile_duration_seconds`: wall time of each run, its waits for the database included):',
      '',
      '| scope | ms per changed service |',
      '| --- | --- |',
      ...reconcileSpent.slice(0, 8).map(([scope, seconds]) => `| \`${scope}\` | ${(seconds * 1000 / clusterCount).toFixed(2)} |`),
      '',
      smoke ? '' : 'Seeding (creating the clusters and services, connecting the relays, first convergence) is not measured.',
    ];
    await reportResults('rollouts.md', lines);
  } finally {
    sim?.kill('SIGTERM');
    if (sim && sim.exitCode === null) {
      await new Promise((resolve) => sim!.once('exit', resolve));
    }
    await bench.stop();
    await fsp.rm(workDir, { recursive: true, force: true });
  }
};

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
