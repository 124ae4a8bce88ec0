import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createLocalJWKSet, type JSONWebKeySet } from 'jose';
import { refusalOf } from './helpers/cloudly.js';
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import { chunked, collect, descriptorOf, sha256Of, startBackupWorld, type IBackupWorld } from './backup.fixture.js';
import { receiveStagedArchiveObject, sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { RestoreGrantRefusedError, verifyRestoreGrant, type IRestoreGrantBinding } from '../ts/manager.backup/restoregrants.js';
import { identityIssuer } from '../ts/core/auth.js';
import { serviceBackupKind } from '../ts/manager.backup/backup.manager.js';
import {
  computeIsolatedRestoreArchiveManifestSha256,
  computeIsolatedRestoreResourceMappingsSha256,
  type IIsolatedRestoreNodeState,
} from '../ts/interfaces/data/isolatedrestore.js';
import type { TIsolatedRestoreResourceMapping } from '../ts/interfaces/data/backup.js';
import type {
  IReq_Cloudly_Coreflow_CleanupIsolatedRestore,
  IReq_Cloudly_Coreflow_ExecuteIsolatedRestore,
  IReq_Cloudly_Coreflow_GetIsolatedRestoreStatus,
  IReq_Cloudly_Coreflow_PrepareIsolatedRestore,
  IReq_Cloudly_Relay_BackupClusterService,
  IReq_Cloudly_Relay_PruneClusterNodeArchive,
  IReq_Cloudly_Relay_RestoreClusterService,
  IReq_Cloudly_Relay_StageIsolatedRestoreArchive,
} from '../ts/interfaces/requests/backup.js';
import { assertFieldProblems } from './helpers/refusals.js';

let world: IBackupWorld;
const closureBytes = randomBytes(1024 * 1024 + 7);
const seen: Record<string, unknown[]> = {};
const note = (methodArg: string, requestArg: unknown): void => {
  (seen[methodArg] ??= []).push(requestArg);
};
const grants: string[] = [];
let jwks: ReturnType<typeof createLocalJWKSet>;

/** The relay side of an isolated restore, verifying every grant as Corestore would. */
const nodeState = (requestArg: { clusterId: string; targetNodeName: string; restoreId: string }, revisionArg: number, phaseArg: IIsolatedRestoreNodeState['phase']): IIsolatedRestoreNodeState => ({
  clusterId: requestArg.clusterId, targetNodeName: requestArg.targetNodeName, restoreId: requestArg.restoreId,
  revision: revisionArg, phase: phaseArg, stagedObjects: [],
});

const restoreBindings = new Map<string, Omit<IRestoreGrantBinding, 'operation'>>();

before(async () => {
  world = await startBackupWorld();
  const { relay } = world;
  jwks = createLocalJWKSet(await (await fetch(`${world.t.baseUrl}/.well-known/jwks.json`)).json() as JSONWebKeySet);
  relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    note('backupClusterService', request);
    if (request.tags?.vanish === 'while-running') {
      // The backup document disappears while the relay works (as if removed behind Cloudly's back).
      const doc = (await world.t.cloudly.store.get(serviceBackupKind, request.backupId))!;
      await world.t.cloudly.store.remove(serviceBackupKind, doc.id, doc.generation);
    }
    await sendServiceDatabaseClosure(relay, {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closureBytes),
    }, chunked(closureBytes));
    return { snapshots: [{ type: 'database', snapshotId: 's1', resourceName: 'db', databaseName: 'app', createdAt: 1, sizeBytes: closureBytes.byteLength }] };
  });
  relay.addHandler<IReq_Cloudly_Relay_RestoreClusterService>('restoreClusterService', async (request) => {
    note('restoreClusterService', request);
    return { restored: request.snapshots };
  });
  relay.addHandler<IReq_Cloudly_Relay_PruneClusterNodeArchive>('pruneClusterNodeArchive', async (request) => {
    note('pruneClusterNodeArchive', request);
    return request.nodeId === world.nodeId
      ? { found: true, result: { dryRun: request.dryRun ?? false, keptSnapshotIds: ['s1'], removedSnapshotIds: [], reclaimedBytes: 0 } }
      : { found: false };
  });
  const verify = async (grantArg: string, operationArg: IRestoreGrantBinding['operation'], restoreIdArg: string, objectArg?: IRestoreGrantBinding['object']) => {
    grants.push(grantArg);
    await verifyRestoreGrant(grantArg, jwks, identityIssuer, { ...restoreBindings.get(restoreIdArg)!, operation: operationArg, ...(objectArg ? { object: objectArg } : {}) });
  };
  relay.addHandler<IReq_Cloudly_Coreflow_PrepareIsolatedRestore>('coreflowPrepareIsolatedRestore', async (request) => {
    note('coreflowPrepareIsolatedRestore', request);
    restoreBindings.set(request.restoreId, {
      clusterId: request.clusterId, targetNodeName: request.targetNodeName, restoreId: request.restoreId,
      mappingsSha256: computeIsolatedRestoreResourceMappingsSha256(request.mappings),
      manifestSha256: computeIsolatedRestoreArchiveManifestSha256(request.manifest),
    });
    await verify(request.restoreGrant, 'prepare', request.restoreId);
    return { state: nodeState(request, 1, 'prepared') };
  });
  relay.addHandler<IReq_Cloudly_Relay_StageIsolatedRestoreArchive>('stageIsolatedRestoreArchive', async (request) => {
    note('stageIsolatedRestoreArchive', { ...request, restoreGrant: '(seen)' });
    await verify(request.restoreGrant, 'write-object', request.restoreId, request.object);
    const bytes = await collect(receiveStagedArchiveObject(relay, request.archive, request.object));
    note('stagedBytes', sha256Of(bytes));
    return { state: { ...nodeState(request, request.expectedRevision + 1, 'ready'), stagedObjects: [request.object] } };
  });
  relay.addHandler<IReq_Cloudly_Coreflow_GetIsolatedRestoreStatus>('coreflowGetIsolatedRestoreStatus', async (request) => {
    await verify(request.restoreGrant, 'status', request.restoreId);
    return { state: nodeState(request, 2, 'ready') };
  });
  relay.addHandler<IReq_Cloudly_Coreflow_ExecuteIsolatedRestore>('coreflowExecuteIsolatedRestore', async (request) => {
    await verify(request.restoreGrant, 'execute', request.restoreId);
    return { state: nodeState(request, request.expectedRevision + 1, 'executed') };
  });
  relay.addHandler<IReq_Cloudly_Coreflow_CleanupIsolatedRestore>('coreflowCleanupIsolatedRestore', async (request) => {
    await verify(request.restoreGrant, 'cleanup', request.restoreId);
    return { state: nodeState(request, request.expectedRevision + 1, 'cleaned-up') };
  });
});
after(async () => {
  await world.t.stop();
});

/**
 * Orders a backup (answered at once with its operation), follows the operation until it ends and
 * answers what it ended with: the finished backup, or the refusal it recorded, thrown.
 */
const toCompletion = async <T extends { operation?: { operationId: string } }>(answerArg: Promise<T>) => {
  const answer = await answerArg;
  return outcomeOf(await followOperation(world.t.admin, answer.operation!.operationId, { timeoutMs: 20_000 }));
};

const backUp = (backupIdArg: string, nodeIdArg = world.nodeId) => toCompletion(world.t.caller.call('createServiceBackup', {
  clusterId: world.clusterId, nodeId: nodeIdArg, serviceId: world.service.id, backupId: backupIdArg, tags: { reason: 'nightly' },
}));

test('a backup is ordered on the exact node, with the authoritative service, and recorded', async () => {
  const { backup } = await backUp('ops-1');
  const request = seen.backupClusterService.at(-1) as IReq_Cloudly_Relay_BackupClusterService['request'];
  assert.equal(request.nodeId, world.nodeId);
  assert.equal(request.backupId, 'ops-1');
  assert.deepEqual(request.service, world.service);
  assert.deepEqual(request.tags, { reason: 'nightly' });
  assert.equal(backup.snapshots[0].snapshotId, 's1');
  assert.equal(backup.closure?.descriptor.sha256, sha256Of(closureBytes));
  const again = await backUp('ops-1');
  assert.deepEqual(again.backup, backup, 'repeating a completed order answers the same backup');
  assert.equal(backup.state, 'completed');
  assert.equal(seen.backupClusterService.length, 1, 'and does not back up twice');
});

test('a backup that is gone when the relay answers is not found, not in progress', async () => {
  const refusal = await refusalOf(() => toCompletion(world.t.caller.call('createServiceBackup', {
    clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, backupId: 'ops-vanished', tags: { vanish: 'while-running' },
  })));
  assert.equal(refusal.code, 'not-found');
  assert.deepEqual(refusal.reasons, ['backup-not-found']);
  assert.equal(await world.t.cloudly.store.get(serviceBackupKind, 'ops-vanished'), null, 'settling it did not bring it back');
});

test('a backup on a node Cloudly does not know, or of a missing service, is refused before the relay is called', async () => {
  const before = seen.backupClusterService.length;
  const unknownNode = await refusalOf(() => backUp('ops-x', 'node-missing'));
  assert.equal(unknownNode.code, 'not-found');
  assert.deepEqual(unknownNode.reasons, ['node-not-found']);
  const missingService = await refusalOf(() => world.t.caller.call('createServiceBackup', {
    clusterId: world.clusterId, nodeId: world.nodeId, serviceId: 'svc-missing',
  }));
  assert.deepEqual(missingService.reasons, ['service-not-found']);
  const badShape = await refusalOf(() => world.t.caller.call('createServiceBackup', {
    clusterId: world.clusterId, nodeId: '', serviceId: world.service.id, replication: { enabled: 'yes' } as never,
  }));
  assert.equal(badShape.code, 'invalid-request');
  assertFieldProblems(badShape, [
    ['request.nodeId', 'field-invalid', 'must be a string of 1 to 128 characters'],
    ['request.replication', 'field-invalid', 'must be exactly { enabled: boolean }'],
  ]);
  assert.equal(seen.backupClusterService.length, before);
});

test('a restore goes to the exact node with the recorded snapshots', async () => {
  const { restored, backup } = await toCompletion(world.t.caller.call('restoreServiceBackup', {
    backupId: 'ops-1', clear: true, resourceTypes: ['database'],
  }));
  const request = seen.restoreClusterService.at(-1) as IReq_Cloudly_Relay_RestoreClusterService['request'];
  assert.equal(request.nodeId, world.nodeId);
  assert.equal(request.clear, true);
  assert.deepEqual(request.snapshots, backup.snapshots);
  assert.deepEqual(restored, backup.snapshots);
});

test('prune names the exact node; found: false is answered as a fact, not a failure', async () => {
  const pruned = await world.t.caller.call('adminPruneClusterNodeArchive', {
    clusterId: world.clusterId, nodeId: world.nodeId, retention: { keepLast: 3 }, dryRun: true,
  });
  assert.deepEqual(pruned, { found: true, result: { dryRun: true, keptSnapshotIds: ['s1'], removedSnapshotIds: [], reclaimedBytes: 0 } });
  await world.t.caller.call('addClusterNode', { clusterId: world.clusterId, name: 'node-b', nodeId: 'node-b' });
  const empty = await world.t.caller.call('adminPruneClusterNodeArchive', {
    clusterId: world.clusterId, nodeId: 'node-b', retention: { keepLast: 3 },
  });
  assert.deepEqual(empty, { found: false });
  assert.deepEqual((seen.pruneClusterNodeArchive.at(-1) as { nodeId: string }).nodeId, 'node-b');
  const badRetention = await refusalOf(() => world.t.caller.call('adminPruneClusterNodeArchive', {
    clusterId: world.clusterId, nodeId: world.nodeId, retention: {},
  }));
  assertFieldProblems(badRetention, [
    ['request.retention', 'field-invalid', 'must set at least one of keepLast, keepDaily, keepWeekly, keepMonthly'],
  ]);
});

const mappings: TIsolatedRestoreResourceMapping[] = [{
  type: 'database',
  source: { resourceName: 'db', databaseName: 'app' },
  target: {
    resourceName: 'scratch', databaseName: 'app_rehearsal',
    databaseAllocation: {
      purpose: 'scratch-rehearsal', rehearsalId: 'rehearsal-1', allocationId: 'a'.repeat(64), generation: 1,
      bindingSha256: 'b'.repeat(64), receiptSha256: 'c'.repeat(64),
    },
  },
}];

test('an isolated restore carries a verifiable grant per operation and stages the closure bytes exactly', async () => {
  const started = world.t.caller.call('createIsolatedRestore', {
    backupId: 'ops-1', targetNodeName: world.nodeId, restoreId: 'restore-1', mappings,
  });
  assert.equal((await started).restoreId, 'restore-1');
  const created = await toCompletion(started);
  assert.equal(created.restoreId, 'restore-1');
  assert.equal(created.state!.phase, 'ready');
  const prepare = seen.coreflowPrepareIsolatedRestore.at(-1) as IReq_Cloudly_Coreflow_PrepareIsolatedRestore['request'];
  assert.deepEqual(prepare.mappings, mappings);
  assert.deepEqual(prepare.manifest, [{ path: 'closure/database.closure', size: closureBytes.byteLength, sha256: sha256Of(closureBytes) }]);
  assert.deepEqual(seen.stagedBytes, [sha256Of(closureBytes)]);
  const status = await world.t.caller.call('stepIsolatedRestore', { restoreId: 'restore-1', operation: 'status' });
  const executed = await world.t.caller.call('stepIsolatedRestore', {
    restoreId: 'restore-1', operation: 'execute', expectedRevision: status.state.revision,
  });
  assert.equal(executed.state.phase, 'executed');
  const cleaned = await world.t.caller.call('stepIsolatedRestore', {
    restoreId: 'restore-1', operation: 'cleanup', expectedRevision: executed.state.revision,
  });
  assert.equal(cleaned.state.phase, 'cleaned-up');
  assert.equal(grants.length, 5, 'prepare, write-object, status, execute, cleanup');
  assert.equal(new Set(grants).size, 5, 'one grant per operation');
  const logText = world.t.logs.join('');
  for (const grant of grants) {
    assert.ok(!logText.includes(grant), 'a grant never reaches the log');
    assert.ok(!logText.includes(grant.split('.')[2]), 'not even its signature');
  }
});

test('a tampered or expired grant fails verification with the published key; another operation is refused', async () => {
  const [grant] = grants;
  const binding = { ...restoreBindings.get('restore-1')!, operation: 'prepare' as const };
  const [header, payload, signature] = grant.split('.');
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
  const tampered = [header, Buffer.from(JSON.stringify({ ...claims, node: 'node-b' })).toString('base64url'), signature].join('.');
  await assert.rejects(verifyRestoreGrant(tampered, jwks, identityIssuer, { ...binding, targetNodeName: 'node-b' }),
    (error: unknown) => error instanceof RestoreGrantRefusedError && error.reason === 'grant-signature-invalid');
  const widened = [header, Buffer.from(JSON.stringify({ ...claims, exp: (claims.exp as number) + 3600 })).toString('base64url'), signature].join('.');
  await assert.rejects(verifyRestoreGrant(widened, jwks, identityIssuer, binding),
    (error: unknown) => error instanceof RestoreGrantRefusedError && error.reason === 'grant-signature-invalid');
  await assert.rejects(verifyRestoreGrant(grant, jwks, identityIssuer, { ...binding, operation: 'execute' }),
    (error: unknown) => error instanceof RestoreGrantRefusedError && error.reason === 'grant-operation-mismatch');
  const expiredGrant = await world.t.cloudly.auth.signJwt(
    { op: 'prepare', cluster: binding.clusterId, node: binding.targetNodeName, restore: binding.restoreId, mappings_sha256: binding.mappingsSha256, manifest_sha256: binding.manifestSha256 },
    { audience: 'serve.zone/corestore-isolated-restore', subject: 'x', expiresAtMs: Date.now() - 60_000 },
  );
  await assert.rejects(verifyRestoreGrant(expiredGrant, jwks, identityIssuer, binding),
    (error: unknown) => error instanceof RestoreGrantRefusedError && error.reason === 'grant-expired');
  assert.ok((await verifyRestoreGrant(grant, jwks, identityIssuer, binding)).expiresAt * 1000 > Date.now());
});

test('an isolated restore with a mistyped allocation reference is refused naming the path', async () => {
  const bad = structuredClone(mappings) as unknown as Array<{ target: { databaseAllocation: Record<string, unknown> } }>;
  bad[0].target.databaseAllocation.generation = 0;
  const refusal = await refusalOf(() => world.t.caller.call('createIsolatedRestore', {
    backupId: 'ops-1', targetNodeName: world.nodeId, mappings: bad as never,
  }));
  assert.equal(refusal.code, 'invalid-request');
  assertFieldProblems(refusal, [
    ['request.mappings[0].target.databaseAllocation.generation', 'field-invalid', 'must be a safe integer of at least 1'],
  ]);
});
