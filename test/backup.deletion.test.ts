import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';
import type { ISimArchiveSnapshot } from '../ts/sim/cluster.js';
import { closureBlobKey } from '../ts/manager.backup/backup.manager.js';
import { serviceBackupDeletionKind } from '../ts/manager.backup/retentionplan.js';
import type { IServiceBackupRecord } from '../ts/interfaces/requests/backup.js';
import type { IBackupSchedule } from '../ts/interfaces/data/backupschedule.js';

/**
 * Deleting a backup reaches the node: retention removes the stored closures and the backup, then
 * asks the cluster's relay (a simulated cluster, whose node archive holds a snapshot per backup) to
 * prune the node archive with the retention the kept backups imply. With the cluster dark, the
 * prune waits, recorded on the deletion, and is done once the relay is back. On a real server
 * (schedule clock 60 times faster: a minute is one second).
 */

const graceMs = 1_000;
let t: ITestCloudly;
let clusterId: string;
let relayToken: string;
let serviceId: string;
let fleet: SimFleet;
let schedule: IBackupSchedule;

const startFleet = async (archivesArg?: Map<string, ISimArchiveSnapshot[]>): Promise<SimFleet> => {
  const { config } = readSimConfig(['--url', t.baseUrl, '--relay-token', relayToken, '--nodes', '1', '--closure-bytes', String(64 * 1024),
    '--reconnect-base-ms', '100', '--reconnect-cap-ms', '300'], {});
  const started = new SimFleet(config, () => undefined);
  if (archivesArg) {
    // A cluster's relay restarting keeps its node's archive: the simulated one is handed over.
    const original = started.start.bind(started);
    started.start = async () => {
      const starting = original();
      for (const [nodeId, snapshots] of archivesArg) started.clusters[0]!.nodeArchives.set(nodeId, snapshots);
      await starting;
    };
  }
  await started.start();
  return started;
};

before(async () => {
  t = await startTestCloudly({ scheduleClockFactor: 60, relayLivenessGraceMs: graceMs });
  const created = await t.createCluster('pruned');
  clusterId = created.cluster.id;
  relayToken = created.relayToken;
  await t.addNodes(clusterId, 'node-1');
  const { service } = await t.caller.call('createService', {
    service: {
      name: 'db', organizationId: 'org-1', clusterId, ports: [], routes: [], volumes: [],
      runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
    },
  });
  serviceId = service.id;
  fleet = await startFleet();
});

after(async () => {
  await fleet?.stop();
  await t?.stop();
});

const blobFileOf = (backupIdArg: string): string => path.join(t.dataDir, 'blobs', 'objects',
  `${createHash('sha256').update(closureBlobKey(clusterId, backupIdArg), 'utf8').digest('hex')}.blob`);
const scheduledBackups = async (): Promise<IServiceBackupRecord[]> =>
  (await t.caller.call('getServiceBackups', { serviceId })).backups.filter((backupArg) => backupArg.scheduleId === schedule.scheduleId);
const archiveIds = (fleetArg: SimFleet): string[] => (fleetArg.clusters[0]!.nodeArchives.get('node-1') ?? []).map((snapshotArg) => snapshotArg.snapshotId).sort();
const snapshotIdsOf = (backupsArg: IServiceBackupRecord[]): string[] => backupsArg.flatMap((backupArg) => backupArg.snapshots.map((snapshotArg) => snapshotArg.snapshotId)).sort();
const change = async (specArg: Partial<IBackupSchedule>) => {
  ({ schedule } = await t.caller.call('updateBackupSchedule', {
    scheduleId: schedule.scheduleId, expectedGeneration: schedule.generation,
    schedule: { target: { serviceId }, cron: '0 0 1 1 *', ...specArg },
  }));
};

test('a backup removed by retention leaves the blob store, the backup list and the node archive; the kept ones stay in all three', async () => {
  ({ schedule } = await t.caller.call('createBackupSchedule', { schedule: { target: { serviceId }, cron: '* * * * *' } }));
  await waitFor(async () => (await scheduledBackups()).length >= 5, 'five scheduled backups', 30_000);
  // No more occurrences; every backup completes before retention is set, so the node holds each one's snapshot.
  await change({});
  await waitFor(async () => (await scheduledBackups()).every((backupArg) => backupArg.state === 'completed'), 'every backup completed', 30_000);
  const all = await scheduledBackups();
  assert.deepEqual(archiveIds(fleet), snapshotIdsOf(all), 'the node archive holds one snapshot per backup');

  await change({ retention: { keepLast: 2 } });
  await waitFor(async () => (await scheduledBackups()).length === 2
    && (await t.caller.call('getBackupRetentionPlan', { scheduleId: schedule.scheduleId })).deleting.length === 0, 'the deletions finished', 30_000);
  const kept = await scheduledBackups();
  const removed = all.filter((backupArg) => !kept.some((keptArg) => keptArg.backupId === backupArg.backupId));
  assert.equal(removed.length, all.length - 2);
  assert.deepEqual(archiveIds(fleet), snapshotIdsOf(kept), 'the node archive keeps exactly the kept backups');
  for (const backup of removed) {
    assert.equal(fs.existsSync(blobFileOf(backup.backupId)), false, `${backup.backupId}'s closure left the blob store`);
  }
  for (const backup of kept) {
    assert.equal(fs.existsSync(blobFileOf(backup.backupId)), true, `${backup.backupId}'s closure stays`);
  }
});

test('with the cluster dark the node prune waits, recorded on the deletion, and is done when the relay is back', async () => {
  const before = await scheduledBackups();
  assert.equal(before.length, 2);
  const archives = new Map(fleet.clusters[0]!.nodeArchives);
  await fleet.stop();
  await waitFor(async () => (await t.caller.call('getServiceRuntimeStatus', { serviceId })).unknown !== null, 'the cluster reads unknown', graceMs + 20_000);

  await change({ retention: { keepLast: 1 } });
  const [older, newer] = [...before].sort((x, y) => x.createdAt - y.createdAt);
  await waitFor(async () => (await t.caller.call('getBackupRetentionPlan', { scheduleId: schedule.scheduleId })).deleting.some((deletionArg) => deletionArg.nodePruneWaiting !== undefined),
    'the deletion records that its prune waits', 30_000);
  const { deleting } = await t.caller.call('getBackupRetentionPlan', { scheduleId: schedule.scheduleId });
  assert.equal(deleting.length, 1);
  assert.equal(deleting[0]!.backupId, older!.backupId);
  assert.equal(deleting[0]!.nodeId, 'node-1');
  assert.equal(deleting[0]!.closuresRemoved, true);
  assert.equal(deleting[0]!.nodePruneWaiting!.reason, 'cluster-unknown');
  assert.equal(deleting[0]!.nodePruneWaiting!.detail, 'relay-disconnected');
  // The closure and the backup are gone; the node still holds the snapshot, and nothing dropped the prune.
  assert.equal(fs.existsSync(blobFileOf(older!.backupId)), false);
  assert.deepEqual((await scheduledBackups()).map((backupArg) => backupArg.backupId), [newer!.backupId]);
  assert.deepEqual((archives.get('node-1') ?? []).map((snapshotArg) => snapshotArg.snapshotId).sort(), snapshotIdsOf(before));

  fleet = await startFleet(archives);
  await waitFor(async () => (await t.caller.call('getBackupRetentionPlan', { scheduleId: schedule.scheduleId })).deleting.length === 0, 'the waiting prune ran once the relay was back', 30_000);
  assert.deepEqual(archiveIds(fleet), snapshotIdsOf([newer!]), 'the node archive keeps only the kept backup');
  assert.equal(fs.existsSync(blobFileOf(newer!.backupId)), true);
});

test('a deletion whose cluster no longer exists is finished at the next full pass: there is no node left to prune', async () => {
  // As a deletion recorded before its cluster was deleted leaves it (the cluster's nodes went with it).
  await t.cloudly.store.insert(serviceBackupDeletionKind, {
    id: 'of-a-gone-cluster', backupId: 'of-a-gone-cluster', clusterId: 'gone-cluster', serviceId, scheduleId: schedule.scheduleId,
    blobKeys: [], startedAt: Date.now(), nodeId: 'node-1', closuresRemovedAt: Date.now(),
  });
  assert.deepEqual((await t.caller.call('getBackupRetentionPlan', { scheduleId: schedule.scheduleId })).deleting.map((deletionArg) => deletionArg.backupId), ['of-a-gone-cluster']);
  await t.restart({ samePort: true });
  await waitFor(async () => (await t.caller.call('getBackupRetentionPlan', { scheduleId: schedule.scheduleId })).deleting.length === 0, 'the deletion finished', 30_000);
});
