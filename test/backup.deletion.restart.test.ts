import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { cloudlyProcessEnv, killHard, processAdminLogins, startCloudlyProcess, type ICloudlyProcess } from './helpers/process.js';
import { waitFor } from './helpers/cloudly.js';
import { startTestS3Server, type ITestS3Server } from './helpers/s3server.js';
import { findFreePort } from '../ts/core/database.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';
import { closureBlobKey } from '../ts/manager.backup/documents.js';
import type { IServiceBackupRecord } from '../ts/interfaces/requests/backup.js';
import type { IBackupSchedule } from '../ts/interfaces/data/backupschedule.js';

/**
 * kill -9 of the Cloudly process in the middle of a retention deletion: a schedule over a cluster
 * of two nodes (one service on each) made eight backups of each, each closure stored in the blob
 * store (the filesystem's, then S3 through a real S3-protocol server). Retention keeping two per
 * service deletes node by node; the simulated relay holds back its answer to node-1's prune, so
 * the process dies with node-1's closures gone and its prune asked, and node-2's deletions
 * recorded with their closures still stored. Started again on the same data directory and port,
 * it rolls every deletion forward: no closure of a removed backup is left, every closure of a kept
 * one is there, both node archives hold exactly the kept backups' snapshots, and no deletion is
 * still recorded. The schedule clock runs 60 times faster (a minute is a second).
 */

const backupsPerService = 8;
const keepLast = 2;
let s3: ITestS3Server;

before(async () => {
  s3 = await startTestS3Server();
});

after(async () => {
  await s3?.destroy();
});

interface IStoreUnderTest {
  name: string;
  env: () => Record<string, string>;
  /** Whether the closure of a backup is stored. */
  holds: (dataDirArg: string, clusterIdArg: string, backupIdArg: string) => Promise<boolean>;
}

const stores: IStoreUnderTest[] = [
  {
    name: 'the filesystem blob store',
    env: () => ({}),
    holds: async (dataDirArg, clusterIdArg, backupIdArg) => fs.existsSync(path.join(dataDirArg, 'blobs', 'objects',
      `${createHash('sha256').update(closureBlobKey(clusterIdArg, backupIdArg), 'utf8').digest('hex')}.blob`)),
  },
  {
    name: 'the S3 blob store',
    env: () => s3.env('deletion-restart'),
    holds: async (_dataDirArg, clusterIdArg, backupIdArg) => (await s3.objectKeys()).includes(`deletion-restart/${closureBlobKey(clusterIdArg, backupIdArg)}`),
  },
];

describe('kill -9 during a backup deletion', () => {
  for (const store of stores) {
    test(`${store.name}: started again, the deletion rolls forward; nothing removed is left, nothing kept is gone`, { timeout: 240_000 }, async () => {
      const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-deletion-restart-'));
      const port = await findFreePort();
      const env = cloudlyProcessEnv(dataDir, { CLOUDLY_PORT: String(port), CLOUDLY_SCHEDULE_CLOCK_FACTOR: '60', ...store.env() });
      let child: ICloudlyProcess | null = null;
      let fleet: SimFleet | null = null;
      const { login, closeAll: closeAdmins } = processAdminLogins();
      let releaseHeldPrune = () => undefined as void;
      try {
        child = await startCloudlyProcess(env);
        let admin = await login(child.baseUrl);
        const { cluster, relayToken } = await admin.call('createCluster', { name: 'deleting' });
        for (const nodeId of ['node-1', 'node-2']) {
          await admin.call('addClusterNode', { clusterId: cluster.id, name: nodeId, nodeId });
          await admin.call('createService', {
            service: {
              name: `db-${nodeId}`, organizationId: 'org-1', clusterId: cluster.id, ports: [], routes: [], volumes: [],
              runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [nodeId] } },
            },
          });
        }
        const { config } = readSimConfig(['--url', child.baseUrl, '--relay-token', relayToken, '--nodes', '2', '--closure-bytes', String(128 * 1024),
          '--reconnect-base-ms', '100', '--reconnect-cap-ms', '500'], {});
        fleet = new SimFleet(config, () => undefined);
        await fleet.start();
        const sim = fleet.clusters[0]!;

        let { schedule } = await admin.call('createBackupSchedule', { schedule: { target: { clusterId: cluster.id }, cron: '* * * * *' } });
        const scheduled = async (adminArg: CloudlyAdminClient): Promise<IServiceBackupRecord[]> =>
          (await adminArg.call('getServiceBackups', { clusterId: cluster.id, limit: 100 })).backups.filter((backupArg) => backupArg.scheduleId === schedule.scheduleId);
        const change = async (adminArg: CloudlyAdminClient, specArg: Partial<IBackupSchedule>) => {
          ({ schedule } = await adminArg.call('updateBackupSchedule', {
            scheduleId: schedule.scheduleId, expectedGeneration: schedule.generation,
            schedule: { target: { clusterId: cluster.id }, cron: '0 0 1 1 *', ...specArg },
          }));
        };
        await waitFor(async () => (await scheduled(admin)).length >= 2 * backupsPerService, 'the scheduled backups', 90_000);
        await change(admin, {});
        await waitFor(async () => (await scheduled(admin)).every((backupArg) => backupArg.state === 'completed'), 'every backup completed', 60_000);
        const all = await scheduled(admin);
        const newestFirst = (nodeIdArg: string) => all.filter((backupArg) => backupArg.nodeId === nodeIdArg).sort((x, y) => y.createdAt - x.createdAt);
        const kept = [...newestFirst('node-1').slice(0, keepLast), ...newestFirst('node-2').slice(0, keepLast)];
        const removed = all.filter((backupArg) => !kept.includes(backupArg));
        for (const backup of all) {
          assert.equal(await store.holds(dataDir, cluster.id, backup.backupId), true, `${backup.backupId}'s closure is stored`);
        }

        // node-1's prune is held back: the process is killed while the deletion waits for it.
        const pruneAsked = new Promise<void>((resolve) => {
          sim.beforePrune = async (requestArg) => {
            if (requestArg.nodeId === 'node-1') {
              resolve();
              await new Promise<void>((release) => { releaseHeldPrune = release; });
            }
          };
        });
        await change(admin, { retention: { keepLast } });
        await pruneAsked;
        await killHard(child.child);
        sim.beforePrune = null;
        // The window: node-1's closures are gone, node-2's deletions are recorded with their closures still stored.
        const removedOn = (nodeIdArg: string) => removed.filter((backupArg) => backupArg.nodeId === nodeIdArg);
        for (const backup of removedOn('node-1')) {
          assert.equal(await store.holds(dataDir, cluster.id, backup.backupId), false, `${backup.backupId} (node-1) left the store before the prune`);
        }
        assert.ok((await Promise.all(removedOn('node-2').map((backupArg) => store.holds(dataDir, cluster.id, backupArg.backupId)))).every(Boolean),
          'node-2\'s removed closures are still stored when the process dies');
        assert.equal(sim.nodeArchives.get('node-1')!.length, newestFirst('node-1').length, 'node-1 was not pruned before the kill');

        child = await startCloudlyProcess(env);
        admin = await login(child.baseUrl);
        await waitFor(async () => (await admin.call('getBackupRetentionPlan', { scheduleId: schedule.scheduleId })).deleting.length === 0,
          'every deletion rolled forward', 90_000);
        assert.deepEqual((await scheduled(admin)).map((backupArg) => backupArg.backupId).sort(), kept.map((backupArg) => backupArg.backupId).sort());
        for (const backup of removed) {
          assert.equal(await store.holds(dataDir, cluster.id, backup.backupId), false, `no closure of ${backup.backupId} is left`);
        }
        for (const backup of kept) {
          assert.equal(await store.holds(dataDir, cluster.id, backup.backupId), true, `the closure of ${backup.backupId} (kept) is there`);
        }
        for (const nodeId of ['node-1', 'node-2']) {
          const snapshotsKept = kept.filter((backupArg) => backupArg.nodeId === nodeId).flatMap((backupArg) => backupArg.snapshots.map((snapshotArg) => snapshotArg.snapshotId)).sort();
          assert.deepEqual(sim.nodeArchives.get(nodeId)!.map((snapshotArg) => snapshotArg.snapshotId).sort(), snapshotsKept, `${nodeId}'s archive holds exactly the kept backups`);
        }
      } finally {
        releaseHeldPrune();
        closeAdmins();
        await fleet?.stop();
        if (child) await killHard(child.child);
        await fsp.rm(dataDir, { recursive: true, force: true });
      }
    });
  }
});
