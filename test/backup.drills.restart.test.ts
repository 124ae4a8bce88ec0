import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { cloudlyProcessEnv, killHard, processAdminLogins, startCloudlyProcess, type ICloudlyProcess } from './helpers/process.js';
import { waitFor } from './helpers/cloudly.js';
import { findFreePort } from '../ts/core/database.js';
import { followOperation } from '../ts/client/operations.js';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';
import type { IBackupDrillReceipt } from '../ts/interfaces/requests/backup.js';

/**
 * kill -9 of the Cloudly process running a restore drill, while the simulated node holds the
 * drill's status answer (the closure is staged on it). Started again on the same data directory,
 * the drill is recorded `interrupted` (never left running), and its scratch restore is cleaned up
 * on the node once the relay (in this process) has reconnected to the new process.
 */

test('kill -9 during a drill: started again, the drill is recorded interrupted and its scratch restore cleaned up', { timeout: 180_000 }, async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-drill-restart-'));
  const port = await findFreePort();
  const env = cloudlyProcessEnv(dataDir, { CLOUDLY_PORT: String(port) });
  let child: ICloudlyProcess | null = null;
  let fleet: SimFleet | null = null;
  const { login, closeAll: closeAdmins } = processAdminLogins();
  try {
    child = await startCloudlyProcess(env);
    let admin = await login(child.baseUrl);
    const { cluster, relayToken } = await admin.call('createCluster', { name: 'drill-restart' });
    const { service } = await admin.call('createService', {
      service: {
        name: 'db', organizationId: 'org-1', clusterId: cluster.id, ports: [], routes: [], volumes: [],
        runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
      },
    });
    // The node holds its status answer for a staged restore long enough for the kill to land meanwhile.
    const { config } = readSimConfig(['--url', child.baseUrl, '--relay-token', relayToken, '--nodes', '2', '--start-delay-ms', '20',
      '--fault-drill-stall-ms', '10000', '--reconnect-base-ms', '100', '--reconnect-cap-ms', '500'], {});
    fleet = new SimFleet(config, () => undefined);
    await fleet.start();
    const sim = fleet.clusters[0]!;
    await waitFor(async () => (await admin.call('getClusterNodes', { clusterId: cluster.id })).nodes.length === 2, 'the simulated nodes reported', 30_000);

    const { operation: backupOperation } = await admin.call('createServiceBackup', { clusterId: cluster.id, nodeId: 'node-1', serviceId: service.id, backupId: 'drilled' });
    assert.equal((await followOperation(admin, backupOperation!.operationId, { timeoutMs: 30_000, pollMs: 50 })).state, 'completed');
    const { drillId, operation } = await admin.call('drillServiceBackup', { backupId: 'drilled', nodeId: 'node-2' });
    const restoreId = `restore-${drillId}`;
    await waitFor(() => sim.isolatedRestores.get(restoreId)?.state.phase === 'ready', 'the closure staged on the drill node', 30_000);
    await killHard(child.child);
    admin.close();
    fleet.config.faultDrillStallMs = 0;

    child = await startCloudlyProcess(env);
    admin = await login(child.baseUrl);
    let receipt: IBackupDrillReceipt | undefined;
    await waitFor(async () => {
      receipt = (await admin.call('getServiceBackups', { serviceId: service.id })).backups.find((backupArg) => backupArg.backupId === 'drilled')?.drill;
      return receipt?.outcome === 'interrupted' && receipt.cleanedUp;
    }, 'the drill recorded interrupted and cleaned up after the restart', 90_000).catch((error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify(receipt)}`);
    });
    assert.equal(receipt!.reason, 'interrupted');
    assert.equal(receipt!.operationId, operation.operationId);
    assert.equal((await admin.call('getOperation', { operationId: operation.operationId })).operation.state, 'failed');
    assert.equal(sim.isolatedRestores.get(restoreId)!.state.phase, 'cleaned-up', 'nothing of the drill is left on the node');
  } finally {
    await fleet?.stop().catch(() => undefined);
    closeAdmins();
    if (child) {
      await killHard(child.child).catch(() => undefined);
    }
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
