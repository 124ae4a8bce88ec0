import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { cloudlyProcessEnv, killHard, processAdminLogins, startCloudlyProcess, type ICloudlyProcess } from './helpers/process.js';
import { waitFor } from './helpers/cloudly.js';
import { findFreePort } from '../ts/core/database.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';
import type { IRollout } from '../ts/interfaces/data/rollout.js';

/**
 * kill -9 of the Cloudly process driving a rollout, the moment it logs that it is changing a
 * service of the second wave (so the process dies just before or just after that service's
 * compare-and-swap). Started again on the same data directory, it goes on from the stored
 * progress: every service is changed exactly once (generation 2, one audit event naming the
 * rollout), none is skipped, and the rollout completes. Its operation, which holds the lifecycle,
 * is not taken for an interrupted one at the restart (that is the rule of backups, whose instance
 * runs them): it reads running before the kill and completed after. The simulated relays (in this
 * process) reconnect to the same port.
 */

const clusterCount = 6;

/** Kills the child synchronously at the `countArg`-th "rollout changing a service" line after `fromArg` characters of output. */
const killOnChange = (processArg: ICloudlyProcess, fromArg: number, countArg: number): Promise<string> => new Promise((resolve) => {
  const stdout = processArg.child.stdout!;
  const onData = () => {
    const lines = processArg.output().slice(fromArg).split('\n').filter((line) => line.includes('"msg":"rollout changing a service"'));
    if (lines.length >= countArg) {
      processArg.child.kill('SIGKILL');
      stdout.off('data', onData);
      resolve(lines[countArg - 1]);
    }
  };
  stdout.on('data', onData);
});

test('kill -9 of the instance driving a rollout: started again, it goes on with no service changed twice and none skipped', { timeout: 240_000 }, async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-rollout-restart-'));
  const port = await findFreePort();
  const env = cloudlyProcessEnv(dataDir, { CLOUDLY_PORT: String(port), CLOUDLY_LOG_LEVEL: 'info' });
  let child: ICloudlyProcess | null = null;
  let fleet: SimFleet | null = null;
  const { login, closeAll: closeAdmins } = processAdminLogins();
  try {
    child = await startCloudlyProcess(env);
    let admin = await login(child.baseUrl);
    const tokens: Array<{ name: string; token: string }> = [];
    const serviceIds: string[] = [];
    for (let index = 0; index < clusterCount; index += 1) {
      const { cluster, relayToken } = await admin.call('createCluster', { name: `restart-${index + 1}` });
      await admin.call('setClusterLabels', { clusterId: cluster.id, labels: { tier: 'web' }, expectedGeneration: cluster.generation });
      await admin.call('addClusterNode', { clusterId: cluster.id, name: 'node-1', nodeId: 'node-1' });
      const { service } = await admin.call('createService', {
        service: {
          name: 'web', organizationId: 'org-1', clusterId: cluster.id, ports: [], routes: [], volumes: [],
          runtime: { image: 'registry.example/app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
        },
      });
      serviceIds.push(service.id);
      tokens.push({ name: cluster.name, token: relayToken });
    }
    const { config } = readSimConfig(['--url', child.baseUrl, '--relay-token', tokens[0].token, '--nodes', '1', '--start-delay-ms', '20', '--reconnect-base-ms', '100', '--reconnect-cap-ms', '500'], {});
    config.tokens = tokens;
    fleet = new SimFleet(config, () => undefined);
    await fleet.start();
    const states = async (adminArg: CloudlyAdminClient) =>
      Promise.all(serviceIds.map(async (serviceId) => (await adminArg.call('getServiceRuntimeStatus', { serviceId })).status));
    await waitFor(async () => (await states(admin)).every((status) => status.state === 'converged'), 'the fleet converged', 60_000);

    const killed = killOnChange(child, child.output().length, 3);
    const { rollout, operation } = await admin.call('createRollout', {
      selector: 'tier=web', serviceName: 'web', change: { image: 'registry.example/app:2' },
      waves: [{ clusters: 1 }, { percent: 100 }], gate: { timeoutMs: 120_000 }, maxConcurrent: 1,
    });
    assert.deepEqual([operation.operationId, operation.kind, operation.state, operation.rollout?.rolloutId], [rollout.id, 'rollout', 'running', rollout.id]);
    const line = JSON.parse(await killed) as { serviceId: string; wave: number };
    assert.equal(line.wave, 1, 'killed in the middle of the second wave');
    await killHard(child.child);
    admin.close();

    child = await startCloudlyProcess(env);
    admin = await login(child.baseUrl);
    let done: IRollout | null = null;
    await waitFor(async () => {
      done = (await admin.call('getRollout', { rolloutId: rollout.id })).rollout;
      return done.state === 'completed';
    }, 'the rollout completed after the restart', 120_000);
    assert.ok(done!.targets.every((target) => target.state === 'converged'), JSON.stringify(done!.targets));
    const { operation: ended } = await admin.call('getOperation', { operationId: rollout.id });
    assert.deepEqual([ended.state, ended.reason, ended.rollout?.state, ended.rollout?.targets], ['completed', undefined, 'completed', { converged: clusterCount }]);
    assert.equal(ended.endedAt, done!.endedAt, "the rollout's end is its operation's");
    for (const serviceId of serviceIds) {
      const { service } = await admin.call('getServiceById', { serviceId });
      assert.equal(service.runtime.image, 'registry.example/app:2');
      assert.equal(service.generation, 2, `service ${serviceId} was changed exactly once`);
      const { events } = await admin.call('getAuditEvents', { filter: { targetId: serviceId, method: 'rollout' } });
      assert.equal(events.length, 1, `one audited change of ${serviceId} by the rollout`);
    }
  } finally {
    await fleet?.stop().catch(() => undefined);
    closeAdmins();
    if (child) {
      await killHard(child.child).catch(() => undefined);
    }
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
