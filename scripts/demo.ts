/**
 * `npm run demo`: Cloudly on the embedded database plus a simulated fleet (cloudly-sim), in one
 * command. It honours the environment `npm start` reads (CLOUDLY_PORT, CLOUDLY_HOST,
 * CLOUDLY_DATA_DIR, CLOUDLY_ADMIN_USERNAME, CLOUDLY_ADMIN_PASSWORD, …), waits until every
 * simulated service is converged, runs one backup and restore per cluster, ends its start-up with
 * one line (the dashboard URL, the login, "Ctrl-C stops"), and stops everything on Ctrl-C or SIGTERM.
 *
 *   npm run demo                       # 3 clusters × 2 nodes × 2 services
 *   npm run demo -- --clusters 10 --failure-rate 0.1   # any cloudly-sim option is passed on
 *   npm run demo -- --rollout          # then a rollout over the fleet that halts on purpose
 *
 * Without CLOUDLY_DATA_DIR the data goes to ./.nogit/demo-data (not ./.nogit/data, which
 * `npm start` uses). Without CLOUDLY_ADMIN_PASSWORD the demo makes one up on its first run and
 * keeps it in <data dir>.admin-password (mode 0600), so the next run logs in again.
 *
 * With CLOUDLY_TLS_CERT_FILE and CLOUDLY_TLS_KEY_FILE (a certificate naming the listen address),
 * Cloudly serves https and the demo and the simulator verify it against the system's CAs and
 * CLOUDLY_CA_FILE (docs/tls.md).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { followOperation, outcomeOf } from '../ts/client/operations.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const say = (lineArg: string): void => { process.stdout.write(`[demo] ${lineArg}\n`); };

const dataDir = path.resolve(process.env.CLOUDLY_DATA_DIR ?? path.join(root, '.nogit', 'demo-data'));
const adminUsername = process.env.CLOUDLY_ADMIN_USERNAME ?? 'admin';
const passwordFile = `${dataDir}.admin-password`;
const adminPassword = process.env.CLOUDLY_ADMIN_PASSWORD ?? (() => {
  if (fs.existsSync(passwordFile)) {
    return fs.readFileSync(passwordFile, 'utf8').trim();
  }
  const made = randomBytes(15).toString('base64url');
  fs.mkdirSync(path.dirname(passwordFile), { recursive: true });
  fs.writeFileSync(passwordFile, `${made}\n`, { mode: 0o600 });
  return made;
})();
const prefix = 'demo';
/** `--rollout` is the demo's own option; every other one goes to cloudly-sim. */
const showsRollout = process.argv.slice(2).includes('--rollout');
const simArguments = [
  '--bootstrap', '--name-prefix', prefix, '--clusters', '3', '--nodes', '2', '--services', '2', '--replicas', '2',
  '--address-plan', '--start-delay-ms', '2000',
  // The user's own options come last and win (cloudly-sim takes the last value of an option).
  ...process.argv.slice(2).filter((argArg) => argArg !== '--rollout'),
];

const children: ChildProcess[] = [];
let stopping = false;

/** Stops the simulator first (its relays close normally), then Cloudly; exits with `codeArg`. */
const stopAll = async (codeArg: number): Promise<void> => {
  if (stopping) {
    return;
  }
  stopping = true;
  say('stopping the simulator and Cloudly');
  for (const child of [...children].reverse()) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
    }
  }
  process.exit(codeArg);
};
process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));

/**
 * A child that ends while the demo runs ends the demo. Each child leads a process group of its
 * own (`detached`), so a terminal's Ctrl-C reaches only the demo, which stops the simulator first
 * and then Cloudly with one signal each: from the terminal's group Cloudly got Ctrl-C and then the
 * demo's SIGTERM, and a second signal late in its stop ended it at once, without its final snapshot.
 */
const watch = (childArg: ChildProcess, nameArg: string): void => {
  children.push(childArg);
  childArg.once('exit', (code, signal) => {
    if (!stopping) {
      say(`${nameArg} exited (${code ?? signal}); stopping`);
      void stopAll(1);
    }
  });
};

const startCloudly = (): Promise<string> => new Promise((resolve, reject) => {
  fs.mkdirSync(dataDir, { recursive: true });
  const logFile = `${dataDir}.cloudly.log`;
  const log = fs.createWriteStream(logFile, { flags: 'a' });
  const child = spawn(path.join(root, 'bin', 'cloudly-server'), ['--source'], {
    cwd: root,
    env: { ...process.env, CLOUDLY_DATA_DIR: dataDir, CLOUDLY_ADMIN_USERNAME: adminUsername, CLOUDLY_ADMIN_PASSWORD: adminPassword },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  watch(child, 'Cloudly');
  let seen = '';
  child.stdout!.on('data', (chunkArg: Buffer) => {
    log.write(chunkArg);
    if (seen !== null) {
      seen += chunkArg.toString();
      const match = /"url":"(https?:\/\/[^"]+)".*cloudly is listening/.exec(seen);
      if (match) {
        seen = null as unknown as string;
        say(`Cloudly's log: ${logFile}`);
        resolve(match[1]);
      }
    }
  });
  child.stderr!.on('data', (chunkArg: Buffer) => { log.write(chunkArg); process.stderr.write(chunkArg); });
  child.once('exit', (code) => reject(new Error(`Cloudly exited with ${code} before listening (see ${logFile})`)));
});

const startSimulator = (urlArg: string): void => {
  const child = spawn(process.execPath, [path.join(root, 'bin', 'cloudly-sim.js'), '--url', urlArg, ...simArguments], {
    cwd: root,
    env: { ...process.env, CLOUDLY_ADMIN_USERNAME: adminUsername, CLOUDLY_ADMIN_PASSWORD: adminPassword },
    stdio: ['ignore', 'inherit', 'inherit'],
    detached: true,
  });
  watch(child, 'cloudly-sim');
};

/** Waits until every service of the demo clusters is converged (or 3 minutes), then backs one up per cluster and restores it. */
const showBackups = async (urlArg: string): Promise<void> => {
  const admin = new CloudlyAdminClient(urlArg);
  await admin.login(adminUsername, adminPassword);
  const deadline = Date.now() + 180_000;
  let services: Array<{ id: string; clusterId: string; name: string }> = [];
  let converged = false;
  while (!stopping && Date.now() < deadline) {
    const clusters = (await admin.call('getClusters', { limit: 500 })).clusters.filter((clusterArg) => clusterArg.name.startsWith(`${prefix}-`));
    const ids = new Set(clusters.map((clusterArg) => clusterArg.id));
    services = (await admin.call('getServices', { limit: 500 })).services.filter((serviceArg) => ids.has(serviceArg.clusterId));
    // Converged and current: a verdict kept from an earlier run while its relay is not back yet
    // reads `unknown` past the grace, and a cluster whose relay is not connected now is not counted.
    const relays = new Map((await admin.call('getFleetOverview', { limit: 500 })).clusters.map((entryArg) => [entryArg.cluster.id, entryArg.relay.state]));
    const states = await Promise.all(services.map(async (serviceArg) => {
      const answer = await admin.call('getServiceRuntimeStatus', { serviceId: serviceArg.id });
      return answer.unknown === null && relays.get(serviceArg.clusterId) === 'connected' ? answer.status.state : 'unknown';
    }));
    if (services.length > 0 && states.every((stateArg) => stateArg === 'converged')) {
      converged = true;
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  if (stopping) {
    return;
  }
  say(converged ? `all ${services.length} services converged` : 'not every service converged within 3 minutes (see the dashboard)');
  const firstPerCluster = new Map<string, { id: string; clusterId: string; name: string }>();
  for (const service of services) {
    if (!firstPerCluster.has(service.clusterId)) {
      firstPerCluster.set(service.clusterId, service);
    }
  }
  for (const service of firstPerCluster.values()) {
    if (stopping) {
      return;
    }
    try {
      const backupId = `demo-${randomBytes(8).toString('hex')}`;
      const { operation } = await admin.call('createServiceBackup', { clusterId: service.clusterId, nodeId: 'node-1', serviceId: service.id, backupId });
      if (!operation) {
        throw new Error('createServiceBackup answered no operation');
      }
      const { backup } = outcomeOf<{ backup: { closure?: { descriptor: { byteLength: number } } } }>(await followOperation(admin, operation.operationId, { timeoutMs: 120_000, pollMs: 250 }));
      const restore = await admin.call('restoreServiceBackup', { backupId });
      outcomeOf(await followOperation(admin, restore.operation.operationId, { timeoutMs: 120_000, pollMs: 250 }));
      say(`backup ${backupId} of ${service.name}: ${backup.closure?.descriptor.byteLength ?? 0} closure bytes stored and restored byte for byte`);
    } catch (error) {
      const data = (error as { errorData?: unknown }).errorData;
      say(`backup of ${service.name} failed: ${data ? JSON.stringify(data) : (error as Error).message}`);
    }
  }
  admin.close();
};

/**
 * `--rollout`: labels the demo clusters `demo=rollout`, makes the last one fail on purpose (its
 * service is placed on a node that then leaves the cluster, so Cloudly's judge refuses it
 * `no-eligible-node`), plans a new image for that service over the selection, prints the plan, and
 * starts a rollout in two waves (the first cluster as the canary, then the rest) that halts when
 * the last cluster fails; each wave's state is printed as it changes.
 */
const showRollout = async (urlArg: string): Promise<void> => {
  const admin = new CloudlyAdminClient(urlArg);
  await admin.login(adminUsername, adminPassword);
  try {
    // In the plan's own order (creation, then id): the last of them is the one made to fail, so the
    // canary is never it, whichever order the simulator's concurrent registrations left them in.
    const clusters = (await admin.call('getClusters', { limit: 500 })).clusters
      .filter((clusterArg) => clusterArg.name.startsWith(`${prefix}-`))
      .sort((left, right) => left.createdAt - right.createdAt || left.id.localeCompare(right.id));
    if (clusters.length < 2) {
      say('rollout: needs at least 2 clusters (--clusters 2 or more); skipped');
      return;
    }
    for (const cluster of clusters) {
      if (cluster.labels?.demo !== 'rollout') {
        await admin.call('setClusterLabels', { clusterId: cluster.id, labels: { ...cluster.labels, demo: 'rollout' }, expectedGeneration: cluster.generation });
      }
    }
    const selector = 'demo=rollout';
    // One service of the same name on every demo cluster (the fleet's own services are named per cluster).
    const serviceName = 'rollout-demo';
    const serviceIds: string[] = [];
    for (const cluster of clusters) {
      const existing = (await admin.call('getServices', { clusterId: cluster.id, limit: 500 })).services;
      const mine = existing.find((serviceArg) => serviceArg.name === serviceName);
      serviceIds.push(mine ? mine.id : (await admin.call('createService', {
        service: {
          name: serviceName, organizationId: existing[0]?.organizationId ?? 'demo', clusterId: cluster.id, ports: [], routes: [], volumes: [],
          runtime: { image: 'registry.example/sim/rollout-demo:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
        },
      })).service.id);
    }
    const failing = clusters.at(-1)!;
    const failingService = (await admin.call('getServiceById', { serviceId: serviceIds.at(-1)! })).service;
    const sabotaged = failingService.runtime.placement.nodeIds.some((nodeIdArg) => nodeIdArg.startsWith('retired-'));
    const convergedBy = Date.now() + 120_000;
    while (!stopping && Date.now() < convergedBy) {
      const states = await Promise.all(serviceIds.slice(0, sabotaged ? -1 : undefined)
        .map(async (serviceIdArg) => (await admin.call('getServiceRuntimeStatus', { serviceId: serviceIdArg })).status.state));
      if (states.every((stateArg) => stateArg === 'converged')) {
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    say(`rollout: ${serviceName} runs on ${clusters.length} clusters labelled ${selector}`);
    if (!sabotaged) {
      // A node that leaves the cluster right after the service was placed on it: nowhere to run.
      const retired = `retired-${randomBytes(4).toString('hex')}`;
      await admin.call('addClusterNode', { clusterId: failing.id, name: retired, nodeId: retired });
      await admin.call('updateService', {
        serviceId: failingService.id,
        expectedGeneration: failingService.generation,
        service: {
          name: failingService.name, organizationId: failingService.organizationId, clusterId: failingService.clusterId,
          runtime: { ...failingService.runtime, placement: { nodeIds: [retired] } },
          ports: failingService.ports ?? [], routes: failingService.routes ?? [],
          volumes: failingService.volumes.map(({ id: _id, initialization: _initialization, ...volume }) => volume),
          ...(failingService.environment ? { environment: failingService.environment } : {}),
        },
      });
      await admin.call('removeClusterNode', { clusterId: failing.id, nodeId: retired });
    }
    say(`rollout: ${serviceName} on ${failing.name} is placed on a node that left the cluster, on purpose: it cannot run anywhere`);
    const image = `registry.example/sim/rollout-demo:${Date.now().toString(36)}`;
    const { plan } = await admin.call('planRollout', { selector, serviceName, change: { image } });
    say(`rollout: plan of image ${image} for ${serviceName} over ${selector}:`);
    for (const target of plan.targets) {
      say(`  ${target.clusterName}: spec revision ${target.specRevision} -> ${target.newSpecRevision}, predicted ${target.predicted.state}${target.predicted.reason ? ` ${target.predicted.reason}` : ''}`);
    }
    for (const skip of plan.skipped) {
      say(`  ${skip.clusterName}: skipped (${skip.reason})`);
    }
    const { rollout } = await admin.call('createRollout', {
      selector, serviceName, change: { image },
      waves: [{ clusters: 1 }, { clusters: plan.targets.length - 1 }], gate: { timeoutMs: 60_000 }, onFailure: 'halt',
    });
    say(`rollout ${rollout.id} started: the canary ${plan.targets[0].clusterName}, then ${plan.targets.length - 1} cluster(s); follow it at ${urlArg}/dashboard/#/rollouts`);
    let seen = '';
    const deadline = Date.now() + 180_000;
    while (!stopping && Date.now() < deadline) {
      const current = (await admin.call('getRollout', { rolloutId: rollout.id })).rollout;
      const line = current.waves.map((wave) => `wave ${wave.index + 1} ${wave.state}`).join(', ');
      if (line !== seen) {
        seen = line;
        say(`rollout ${rollout.id}: ${current.state}; ${line}`);
      }
      if (['completed', 'halted', 'aborted'].includes(current.state)) {
        for (const target of current.targets.filter((targetArg) => targetArg.state === 'failed' || targetArg.state === 'conflict')) {
          say(`rollout ${rollout.id}: ${target.clusterName} ${target.state}${target.reason ? ` (${target.reason})` : ''}`);
        }
        say(`rollout ${rollout.id} ${current.state}`);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  } catch (error) {
    const data = (error as { errorData?: unknown }).errorData;
    say(`rollout failed: ${data ? JSON.stringify(data) : (error as Error).message}`);
  } finally {
    admin.close();
  }
};

/** The start-up's last line: where to go, how to log in, how to stop. */
const readyLine = (urlArg: string, usernameArg: string, passwordArg: string): string =>
  `ready: ${urlArg}/dashboard/ (log in as ${usernameArg} / ${passwordArg}); Ctrl-C stops`;

const main = async (): Promise<void> => {
  say(`starting Cloudly (data: ${dataDir})`);
  const url = await startCloudly();
  say(`Cloudly listens on ${url}; starting the simulated fleet`);
  startSimulator(url);
  await showBackups(url);
  if (showsRollout && !stopping) {
    await showRollout(url);
  }
  if (!stopping) {
    // After the fleet's own lines, so it is the last one on the screen.
    say(readyLine(url, adminUsername, adminPassword));
  }
};

main().catch((error: unknown) => {
  say(`failed: ${(error as Error).message}`);
  void stopAll(1);
});
