/**
 * A quick load figure for cloudly-sim (docs/simulator.md, "For load"): starts Cloudly as a child
 * process (bin/cloudly-server --source, temporary data directory), bootstraps N clusters of 2 nodes
 * and 1 service with the simulator in this process, and prints one JSON line: time to bootstrap
 * and register, time until every cluster says converged, and this process's heap and RSS growth.
 *
 *   node --expose-gc --import tsx scripts/sim-load.ts 300
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const clusters = Number(process.argv[2] ?? 300);
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cloudly-sim-load-'));
const child = spawn(path.join(root, 'bin', 'cloudly-server'), ['--source'], {
  env: { ...process.env, CLOUDLY_PORT: '0', CLOUDLY_HOST: '127.0.0.1', CLOUDLY_DATA_DIR: dataDir, CLOUDLY_ADMIN_PASSWORD: 'load-admin-password' },
  stdio: ['ignore', 'pipe', 'ignore'],
});
try {
  const url = await new Promise<string>((resolve, reject) => {
    let output = '';
    const onData = (chunkArg: Buffer) => {
      output += chunkArg.toString();
      const match = /"url":"(http:[^"]+)".*cloudly is listening/.exec(output);
      if (match) {
        // Keep draining Cloudly's log, but stop collecting it.
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        resolve(match[1]);
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (codeArg) => reject(new Error(`cloudly exited with ${codeArg}`)));
  });
  const { config } = readSimConfig(['--bootstrap', '--url', url, '--admin-password', 'load-admin-password', '--name-prefix', 'load',
    '--clusters', String(clusters), '--nodes', '2', '--services', '1', '--start-delay-ms', '0'], {});
  gc();
  const before = process.memoryUsage();
  const fleet = new SimFleet(config, () => undefined);
  const started = Date.now();
  await fleet.start();
  const registered = Date.now();
  while ((fleet.states().converged ?? 0) < clusters && Date.now() - registered < 300_000) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const converged = Date.now();
  gc();
  const after = process.memoryUsage();
  process.stdout.write(`${JSON.stringify({
    clusters,
    bootstrapAndRegisterMs: registered - started,
    convergedAfterMs: converged - registered,
    states: fleet.states(),
    heapMbGrowth: Math.round((after.heapUsed - before.heapUsed) / 1e5) / 10,
    rssMbGrowth: Math.round((after.rss - before.rss) / 1e5) / 10,
    heapKbPerCluster: Math.round((after.heapUsed - before.heapUsed) / clusters / 1024),
    rssKbPerCluster: Math.round((after.rss - before.rss) / clusters / 1024),
    errors: fleet.counters.errors,
  })}\n`);
  await fleet.stop();
} finally {
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  fs.rmSync(dataDir, { recursive: true, force: true });
}
