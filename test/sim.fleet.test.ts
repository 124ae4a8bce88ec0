import { describe, test } from 'node:test';
import { sealSecretVersion } from '../ts/client/secrets.js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { findFreePort } from '../ts/core/database.js';
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import type { EnvelopePeer } from '../ts/core/envelopepeer.js';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';
import { generatedClosureSha256 } from '../ts/sim/generate.js';
import { startTestCloudly, testAdminPassword, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { processStartBoundMs } from './helpers/process.js';

/**
 * cloudly-sim against a real Cloudly (real port, embedded database): a few simulated clusters
 * bootstrap themselves, converge, back up and restore byte for byte, survive a Cloudly restart;
 * faults reach Cloudly as named failures; the executable refuses nonsense and stops cleanly.
 */

const projectRoot = path.resolve(import.meta.dirname, '..');

const simLines = () => {
  const lines: string[] = [];
  return { lines, log: (fieldsArg: Record<string, unknown>, messageArg: string) => { lines.push(`${messageArg} ${JSON.stringify(fieldsArg)}`); } };
};

/** Every service of the given clusters, with its runtime status (read now: the verdict may be computed on read). */
const statusesOf = async (tArg: ITestCloudly, clusterIdsArg: Set<string>) => {
  const { services } = await tArg.admin.call('getServices', {});
  const mine = services.filter((serviceArg) => clusterIdsArg.has(serviceArg.clusterId));
  return Promise.all(mine.map(async (serviceArg) => {
    const answer = await tArg.admin.call('getServiceRuntimeStatus', { serviceId: serviceArg.id });
    return { service: serviceArg, state: answer.status.state, reason: answer.status.reason, observed: answer.observed.placements.map((placementArg) => placementArg.state) };
  }));
};

const clusterIdsOf = async (tArg: ITestCloudly, prefixArg: string): Promise<Set<string>> =>
  new Set((await tArg.admin.call('getClusters', {})).clusters.filter((clusterArg) => clusterArg.name.startsWith(`${prefixArg}-`)).map((clusterArg) => clusterArg.id));

const backUp = async (tArg: ITestCloudly, serviceArg: { id: string; clusterId: string }, backupIdArg: string) => {
  const { operation } = await tArg.admin.call('createServiceBackup', { clusterId: serviceArg.clusterId, nodeId: 'node-1', serviceId: serviceArg.id, backupId: backupIdArg });
  return followOperation(tArg.admin, operation!.operationId, { timeoutMs: 30_000, pollMs: 50 });
};

describe('cloudly-sim against a real Cloudly', () => {
  test('three bootstrapped clusters register, converge, back up and restore byte for byte, and all come back after a Cloudly restart', async () => {
    const port = await findFreePort();
    const t = await startTestCloudly({ port });
    const { lines, log } = simLines();
    const { config } = readSimConfig([
      '--bootstrap', '--url', t.baseUrl, '--admin-password', testAdminPassword, '--name-prefix', 'fleet',
      '--clusters', '3', '--nodes', '2', '--services', '2', '--replicas', '2', '--address-plan',
      '--start-delay-ms', '100', '--closure-bytes', '300001', '--seed', '7',
      '--reconnect-base-ms', '100', '--reconnect-cap-ms', '1000',
    ], {});
    const fleet = new SimFleet(config, log);
    try {
      await fleet.start();
      assert.equal(fleet.clusters.length, 3);
      const clusterIds = await clusterIdsOf(t, 'fleet');
      assert.equal(clusterIds.size, 3);

      // Convergence as Cloudly judges it, polled with a bound.
      let last: unknown = null;
      await waitFor(async () => {
        const statuses = await statusesOf(t, clusterIds);
        last = statuses.map((entryArg) => [entryArg.service.name, entryArg.state, entryArg.observed]);
        return statuses.length === 6 && statuses.every((entryArg) => entryArg.state === 'converged');
      }, 'every simulated service converged', 30_000).catch((error: Error) => {
        throw new Error(`${error.message}: ${JSON.stringify(last)}\n${lines.join('\n')}`);
      });
      await waitFor(() => fleet.states().converged === 3, 'every simulated cluster says converged');
      for (const name of ['fleet-1', 'fleet-2', 'fleet-3']) {
        assert.ok(lines.some((lineArg) => lineArg.startsWith(`cluster ${name}: connecting -> registered`)), `${name} logged its registration`);
        // From converging, or straight from registered when the start delay ended before the first report.
        assert.ok(lines.some((lineArg) => new RegExp(`^cluster ${name}: (converging|registered) -> converged `).test(lineArg)), `${name} logged its convergence`);
      }
      // The relay-side work besides the desired state: every node's sealed credential opened,
      // the leases of the address plan confirmed, the signed projections verified.
      await waitFor(() => fleet.counters.credentialsOpened === 6, `every node's credential opened: ${JSON.stringify(fleet.counters)}`, 60_000);
      assert.ok(fleet.counters.leaseConfirmations >= 3, `${fleet.counters.leaseConfirmations} lease confirmations`);
      assert.ok(fleet.counters.projectionsVerified >= 6, `${fleet.counters.projectionsVerified} projections verified`);
      assert.equal(fleet.counters.projectionsRejected, 0);
      assert.equal(fleet.counters.errors, 0, lines.filter((lineArg) => lineArg.includes('failed')).join('\n'));

      // A backup stores exactly the bytes the seed generates; the restore brings them back byte for byte.
      const [first] = (await statusesOf(t, clusterIds)).map((entryArg) => entryArg.service);
      const backupId = 'fleet-backup-1';
      const { backup } = outcomeOf<{ backup: { closure?: { descriptor: { byteLength: number; sha256: string } } } }>(await backUp(t, first, backupId));
      assert.equal(backup.closure?.descriptor.byteLength, 300_001);
      assert.equal(backup.closure?.descriptor.sha256, await generatedClosureSha256(7, first.id, backupId, 300_001));
      const { operation: restore } = await t.admin.call('restoreServiceBackup', { backupId });
      outcomeOf(await followOperation(t.admin, restore!.operationId, { timeoutMs: 30_000, pollMs: 50 }));
      assert.equal(fleet.counters.restoresVerified, 1);
      assert.equal(fleet.counters.restoresMismatched, 0);

      // Cloudly restarts on its port: every relay reconnects, registers again, and its cluster converges again.
      const before = new Map((await t.admin.call('getClusterRelayRegistrations', { clusterIds: [...clusterIds] })).registrations.map((entryArg) => [entryArg.clusterId, entryArg.acceptedAt]));
      await t.restart();
      await waitFor(async () => {
        const { registrations } = await t.admin.call('getClusterRelayRegistrations', { clusterIds: [...clusterIds] });
        return registrations.length === 3 && registrations.every((entryArg) => entryArg.connected && entryArg.acceptedAt > before.get(entryArg.clusterId)!);
      }, 'every relay registered again on the restarted Cloudly', 20_000);
      // The client counts a reconnect once its onConnected work (node reports) is done too.
      await waitFor(() => fleet.counters.reconnects === 3, 'three reconnects counted', 10_000);
      await waitFor(() => fleet.states().converged === 3, 'no simulated cluster left stuck', 10_000);
      assert.ok(lines.filter((lineArg) => / -> disconnected /.test(lineArg)).length >= 3, 'each cluster logged its disconnection');
      const statuses = await statusesOf(t, clusterIds);
      assert.deepEqual([...new Set(statuses.map((entryArg) => entryArg.state))], ['converged']);
    } finally {
      await fleet.stop();
      await t.stop();
    }
  });

  test('a simulated relay opens the sealed secrets its services name and reports them in its secret manifest', async () => {
    const t = await startTestCloudly();
    const { lines, log } = simLines();
    const { config } = readSimConfig([
      '--bootstrap', '--url', t.baseUrl, '--admin-password', testAdminPassword, '--name-prefix', 'sealed',
      '--clusters', '1', '--nodes', '1', '--services', '1', '--replicas', '1', '--start-delay-ms', '50', '--seed', '3',
    ], {});
    const fleet = new SimFleet(config, log);
    try {
      await fleet.start();
      const [clusterId] = await clusterIdsOf(t, 'sealed');
      await waitFor(async () => (await t.admin.call('getSecretRecipients', { clusterId })).current !== null, 'the simulated relay enrolled its recipient');
      await t.admin.call('createSecretGroup', { group: { key: 'sim-secret', tags: [], environment: 'production', clusterIds: [clusterId] } });
      const sealed = await sealSecretVersion(t.admin, 'sim-secret', new TextEncoder().encode('sim-secret-value'));
      const [service] = (await t.admin.call('getServices', { clusterId })).services;
      const { id: _id, generation, specRevision: _specRevision, createdAt: _createdAt, updatedAt: _updatedAt, volumes, ...writable } = service;
      await t.admin.call('updateService', { serviceId: service.id, expectedGeneration: generation, service: {
        ...writable, volumes: volumes.map(({ id: _volumeId, initialization: _initialization, ...volume }) => volume),
        secrets: { SIM_SECRET: { secretId: 'sim-secret', secretVersionId: sealed.secretVersionId } },
      } });
      let last: unknown = null;
      await waitFor(async () => {
        const answer = await t.admin.call('getServiceRuntimeStatus', { serviceId: service.id });
        last = answer;
        return answer.status.state === 'converged' && answer.observed.placements.some((placement) =>
          placement.manifest?.secrets.some((secret) => secret.name === 'SIM_SECRET' && secret.secretVersionId === sealed.secretVersionId) === true);
      }, 'converged with the secret in the manifest', 30_000).catch((error: Error) => {
        throw new Error(`${error.message}: ${JSON.stringify(last)}\n${lines.join('\n')}`);
      });
      assert.ok(fleet.counters.secretsOpened >= 1, `${fleet.counters.secretsOpened} secrets opened`);
      assert.equal(fleet.counters.errors, 0, lines.filter((lineArg) => lineArg.includes('failed')).join('\n'));
    } finally {
      await fleet.stop();
      await t.stop();
    }
  });

  test('faults: an aborted upload and a wrong digest fail the backup with their reasons; a failure rate marks services failed', async () => {
    const t = await startTestCloudly();
    const fleets: SimFleet[] = [];
    try {
      const run = async (prefixArg: string, flagsArg: string[]) => {
        const { config } = readSimConfig([
          '--bootstrap', '--url', t.baseUrl, '--admin-password', testAdminPassword, '--name-prefix', prefixArg,
          '--clusters', '1', '--nodes', '1', '--services', '1', '--start-delay-ms', '0', '--closure-bytes', '200000', ...flagsArg,
        ], {});
        const fleet = new SimFleet(config, simLines().log);
        fleets.push(fleet);
        await fleet.start();
        const clusterIds = await clusterIdsOf(t, prefixArg);
        const statuses = await statusesOf(t, clusterIds);
        return { fleet, service: statuses[0].service, clusterIds };
      };
      const aborting = await run('aborts', ['--fault-abort-rate', '1']);
      const aborted = await backUp(t, aborting.service, 'aborted-1');
      assert.equal(aborted.state, 'failed');
      assert.match(JSON.stringify(aborted), /closure-upload-failed/);
      assert.equal(aborting.fleet.counters.backupsFailed, 1);

      const lying = await run('lies', ['--fault-wrong-digest-rate', '1']);
      const refused = await backUp(t, lying.service, 'wrong-digest-1');
      assert.equal(refused.state, 'failed');
      assert.match(JSON.stringify(refused), /closure-blob-sha256-mismatch/);

      const failing = await run('fails', ['--failure-rate', '1']);
      // A failed start keeps the service from converging; the observation says failed.
      await waitFor(async () => (await statusesOf(t, failing.clusterIds)).every((entryArg) => entryArg.observed.includes('failed')), 'the service reported failed', 15_000);
      // The verdict follows the observation asynchronously (the reconciler): a failed start at the
      // current revision waits failure-backoff while the relay retries.
      await waitFor(async () => (await statusesOf(t, failing.clusterIds)).every((entryArg) => entryArg.state === 'waiting'), 'the failure judged', 15_000);
      assert.deepEqual((await statusesOf(t, failing.clusterIds)).map((entryArg) => [entryArg.state, entryArg.reason]), [['waiting', 'failure-backoff']]);
      await waitFor(() => failing.fleet.states().degraded === 1, 'the cluster says degraded');
    } finally {
      for (const fleet of fleets) {
        await fleet.stop();
      }
      await t.stop();
    }
  });
});

describe('the cloudly-sim executable', () => {
  const runSim = (argsArg: string[], envArg: NodeJS.ProcessEnv = {}) => {
    const child = spawn(process.execPath, [path.join(projectRoot, 'bin', 'cloudly-sim.js'), ...argsArg], {
      cwd: projectRoot, env: { PATH: process.env.PATH, HOME: process.env.HOME, ...envArg }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
    child.stderr.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    return { child, exited, output: () => output };
  };

  test('nonsense is refused with every reason and exit code 2, before anything connects', async () => {
    const scratch = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-sim-'));
    try {
      const configFile = path.join(scratch, 'sim.json');
      await fsp.writeFile(configFile, JSON.stringify({ nodes: 0, colour: 'blue' }));
      const run = runSim(['--bootstrap', '--admin-password', 'x'.repeat(12), '--clusters', '0', '--start-delay-ms', '-5', '--failure-rate', '1.5', '--frobnicate', '--config', configFile]);
      assert.equal(await run.exited, 2);
      for (const reason of [
        'unknown option --frobnicate', '--clusters must be at least 1, not 0', '--start-delay-ms must not be negative, not -5',
        '--failure-rate must be a fraction from 0 to 1, not 1.5', '--nodes must be at least 1, not 0', 'unknown key "colour"',
      ]) {
        assert.ok(run.output().includes(reason), `names "${reason}":\n${run.output()}`);
      }
      const nothing = runSim([]);
      assert.equal(await nothing.exited, 2);
      assert.match(nothing.output(), /no clusters to simulate/);
      const mixed = runSim(['--relay-token', 'szrelay_x', '--clusters', '4']);
      assert.equal(await mixed.exited, 2);
      assert.match(mixed.output(), /--clusters only apply with --bootstrap/);
    } finally {
      await fsp.rm(scratch, { recursive: true, force: true });
    }
  });

  test('run with a relay token from the environment, as the conformance kit starts a relay; SIGTERM closes its socket with 1000 and exits 0', async () => {
    const t = await startTestCloudly();
    let run: ReturnType<typeof runSim> | undefined;
    try {
      const { cluster, relayToken } = await t.createCluster('sim-process');
      run = runSim(['--nodes', '1'], { CLOUDLY_URL: t.baseUrl, CLOUDLY_RELAY_TOKEN: relayToken });
      // The bound includes the child's own start-up, which a loaded machine stretches.
      await waitFor(async () => (await t.admin.call('getClusterRelayRegistrations', { clusterIds: [cluster.id] })).registrations[0]?.connected === true, 'the simulated relay registered', processStartBoundMs);
      const session = t.cloudly.relays.sessionsOf(cluster.id)[0];
      assert.ok(session);
      const codes: number[] = [];
      for (const peer of t.cloudly.openSockets as Set<EnvelopePeer>) {
        peer.socket.once('close', (codeArg: number) => codes.push(codeArg));
      }
      run.child.kill('SIGTERM');
      assert.equal(await run.exited, 0);
      await waitFor(() => codes.length > 0, 'the relay socket closed on Cloudly\'s side');
      assert.deepEqual([...new Set(codes)], [1000]);
      assert.match(run.output(), /cluster cluster-1: connecting -> registered/);
      assert.match(run.output(), /cluster cluster-1: \S+ -> stopped/);
    } finally {
      // A failed assertion must not leave the simulator running past the test.
      if (run && run.child.exitCode === null && run.child.signalCode === null) {
        run.child.kill('SIGKILL');
      }
      await t.stop();
    }
  });
});
