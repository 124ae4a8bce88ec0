import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import type { IReq_Cloudly_Relay_BackupClusterService } from '../ts/interfaces/requests/backup.js';
import type { IOperation } from '../ts/interfaces/requests/operation.js';
import { chunked, descriptorOf } from './backup.fixture.js';
import { waitFor } from './helpers/cloudly.js';
import { startTestS3Server, type ITestS3Server } from './helpers/s3server.js';
import {
  FailoverRelay,
  multiInstanceAdminPassword,
  startDevDatabase,
  startInstance,
  stopInstance,
  type IDevDatabaseProcess,
  type IInstanceProcess,
} from './helpers/multiinstance.js';

/**
 * A backup ordered through one instance while the cluster's relay sits on another: the operation
 * runs on the first (A), the relay call is forwarded to the second (B), and the closure's bytes
 * arrive on B's socket. Whoever asks A sees those bytes move and the operation end with all of
 * them, as a backup through the relay's own instance does.
 */

let workDir: string;
let s3: ITestS3Server;
let database: IDevDatabaseProcess;
let a: IInstanceProcess;
let b: IInstanceProcess;
let admin: CloudlyAdminClient;
let relay: FailoverRelay | null = null;
let openGate: () => void = () => undefined;
const gate = new Promise<void>((resolve) => { openGate = resolve; });
const closureBytes = randomBytes(4 * 1024 * 1024);

type TLooseContract = { method: string; request: any; response: any };
const api = (methodArg: string, requestArg: Record<string, unknown>): Promise<any> => admin.call<TLooseContract>(methodArg, requestArg);

async function* heldHalfway(): AsyncIterable<Buffer> {
  const half = closureBytes.byteLength / 2;
  yield* chunked(closureBytes.subarray(0, half), 64 * 1024);
  await gate;
  yield* chunked(closureBytes.subarray(half), 64 * 1024);
}

before(async () => {
  workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-mi-progress-'));
  database = await startDevDatabase(path.join(workDir, 'database'));
  s3 = await startTestS3Server('cloudly-progress');
  const env = { CLOUDLY_SHARED_POLL_MS: '100', ...s3.env('progress/') };
  a = await startInstance(database, 'a', env);
  b = await startInstance(database, 'b', env);
  admin = new CloudlyAdminClient(a.baseUrl);
  await admin.login('admin', multiInstanceAdminPassword);
});

after(async () => {
  openGate();
  relay?.close();
  admin?.close();
  await Promise.all([a, b].filter(Boolean).map((instance) => stopInstance(instance)));
  await database?.stop();
  await s3?.destroy();
  await fsp.rm(workDir, { recursive: true, force: true });
});

test('a backup ordered through A whose relay is on B: A reports the bytes while they move and all of them at the end', async () => {
  const { cluster, relayToken } = await api('createCluster', { name: 'progress' });
  await api('addClusterNode', { clusterId: cluster.id, name: 'node-a', nodeId: 'node-a' });
  const { service } = await api('createService', {
    service: {
      name: 'progress-db',
      organizationId: 'org-1',
      clusterId: cluster.id,
      runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
      volumes: [],
    },
  });
  relay = new FailoverRelay(cluster.id, relayToken, () => [b.baseUrl], 0, (clientArg) => {
    clientArg.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
      await sendServiceDatabaseClosure(clientArg, {
        backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closureBytes),
      }, heldHalfway());
      return { snapshots: [{ type: 'database', snapshotId: 'snap-progress', resourceName: 'db', databaseName: 'app', createdAt: Date.now(), sizeBytes: closureBytes.byteLength }] };
    });
  }, { register: true });
  await relay.connect();
  await waitFor(() => relay!.registered, 'the relay is elected on B', 20_000);

  const ordered = await api('createServiceBackup', { clusterId: cluster.id, nodeId: 'node-a', serviceId: service.id, backupId: 'b-progress' });
  const operationId: string = ordered.operation.operationId;
  const operation = async (): Promise<IOperation> => (await api('getOperation', { operationId })).operation;

  // Halfway: the relay holds the second half, so A must show the first half moving.
  let seen: IOperation | null = null;
  await waitFor(async () => {
    seen = await operation();
    return seen.progress.bytesDone >= closureBytes.byteLength / 2;
  }, 'A reports the bytes B receives', 30_000);
  assert.equal(seen!.state, 'running');
  assert.equal(seen!.progress.phase, 'transfer');
  assert.equal(seen!.progress.bytesTotal, closureBytes.byteLength);

  openGate();
  let ended: IOperation | null = null;
  await waitFor(async () => {
    ended = await operation();
    return ended.state !== 'running';
  }, 'the backup ends', 30_000);
  assert.equal(ended!.state, 'completed', JSON.stringify(ended));
  assert.equal(ended!.progress.phase, 'done');
  assert.equal(ended!.progress.bytesDone, closureBytes.byteLength);
  assert.equal(ended!.progress.bytesTotal, closureBytes.byteLength);
});
