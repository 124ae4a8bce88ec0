import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { startTestCloudly, testAdminPassword, waitFor } from './helpers/cloudly.js';
import { startDevDatabase, startInstance, stopInstance } from './helpers/multiinstance.js';
import { reconcilerLeaseKind } from '../ts/manager.reconciler/leadership.js';
import type { IClusterOverviewService } from '../ts/interfaces/requests/overview.js';

/**
 * With several instances one reconciles: changes made through another instance reach it through
 * the shared audit log, and when it dies (kill -9, no lease released) another takes over within
 * the lease time and judges what changed, the clusters' liveness included.
 */

const leaseTtlMs = 2_000;
const heartbeatMs = 500;
const livenessGraceMs = 1_000;

test('one instance reconciles; a change through another is judged by it; after kill -9 the other takes over', async () => {
  const databaseDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-mi-reconciler-'));
  const database = await startDevDatabase(databaseDir);
  const timing = { CLOUDLY_RELAY_LEASE_TTL_MS: String(leaseTtlMs), CLOUDLY_RELAY_LEASE_HEARTBEAT_MS: String(heartbeatMs), CLOUDLY_ADMIN_PASSWORD: testAdminPassword };
  // A starts first and takes the reconciler lease.
  const a = await startInstance(database, 'a', timing);
  const b = await startTestCloudly({
    mongoDbUrl: database.mongoDbUrl,
    secretsKeyFile: database.secretsKeyFile,
    relayLeaseTtlMs: leaseTtlMs,
    relayLeaseHeartbeatMs: heartbeatMs,
    // The cluster below never has a relay: once B reconciles, its full pass judges liveness too.
    relayLivenessGraceMs: livenessGraceMs,
  });
  try {
    const lease = await b.cloudly.store.get(reconcilerLeaseKind, 'reconciler');
    assert.ok(lease && lease.holder !== b.cloudly.clusterManager.relayElection.instanceId, 'A holds the lease');
    assert.equal(b.cloudly.reconciler.isLeader, false, 'B does not reconcile while A does');

    const { cluster } = await b.createCluster('two-instances');
    await b.addNodes(cluster.id, 'n1');
    const { service } = await b.admin.call('createService', {
      service: {
        name: 'app', organizationId: 'org1', clusterId: cluster.id, volumes: [],
        runtime: { image: 'app:1', replicas: 1, profile: { runAs: { user: 1000, group: 1000 } }, placement: { nodeIds: ['n1'] } },
      },
    });
    const verdict = async () => {
      const { overview } = await b.admin.call('getClusterOverview', { clusterId: cluster.id }) as { overview: { services: IClusterOverviewService[] } };
      const status = overview.services[0]?.runtimeStatus;
      return status ? `${status.state}/${status.reason}` : 'unjudged';
    };
    await waitFor(async () => (await verdict()) === 'converging/null', 'judged by A from the shared audit log', 10_000);
    assert.equal(b.cloudly.reconciler.isLeader, false, 'and B still did not reconcile');

    // A dies without letting the lease go; B takes it once it has run out.
    a.child.kill('SIGKILL');
    const killedAt = Date.now();
    await waitFor(() => b.cloudly.reconciler.isLeader, 'B reconciles', 10_000);
    const takeoverMs = Date.now() - killedAt;
    assert.ok(takeoverMs <= leaseTtlMs + heartbeatMs + 1_000, `took over after ${takeoverMs} ms (lease ${leaseTtlMs} ms, heartbeat ${heartbeatMs} ms)`);

    // A change through B is now judged by B: a volume nobody said how to start.
    await b.admin.call('updateService', {
      serviceId: service.id,
      expectedGeneration: service.generation,
      service: {
        name: 'app', organizationId: 'org1', clusterId: cluster.id,
        volumes: [{ mountPath: '/data', readOnly: false, driver: 'local' }],
        runtime: { image: 'app:1', replicas: 1, profile: { runAs: { user: 1000, group: 1000 } }, placement: { nodeIds: ['n1'] } },
      },
    });
    await waitFor(async () => (await verdict()) === 'refused/volume-initialization-unknown', 'judged by B', 10_000);
    // Liveness is part of B's pass: the cluster has had no relay since B took over, so past B's
    // grace its service reads unknown.
    await waitFor(async () => (await b.admin.call('getServiceRuntimeStatus', { serviceId: service.id })).unknown?.reason === 'relay-disconnected',
      'B judged the relayless cluster unknown', 10_000);
  } finally {
    await b.stop();
    await stopInstance(a);
    await database.stop();
    await fsp.rm(databaseDir, { recursive: true, force: true });
  }
});
