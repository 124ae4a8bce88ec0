import { test } from 'node:test';
import assert from 'node:assert/strict';
import { drillMappingsOf, isDrillOwed, receiptOfOperation } from '../ts/manager.backup/drills.js';
import { validateIsolatedRestoreResourceMappings } from '../ts/interfaces/data/isolatedrestore.js';
import type { IServiceBackupDocument } from '../ts/manager.backup/documents.js';
import type { IOperationDocument } from '../ts/manager.operation/documents.js';

/** The drills' pure parts: which backup a schedule's drill is owed, the drill's mappings, the receipt an operation implies. */

test('a drill is owed for the newest backup only, every Nth backup after the last one drilled', () => {
  const newestFirst = ['b5', 'b4', 'b3', 'b2', 'b1'];
  assert.equal(isDrillOwed(newestFirst, new Set(), 'b5', 1), true, 'nothing drilled yet: the newest');
  assert.equal(isDrillOwed(newestFirst, new Set(), 'b4', 1), false, 'an older backup found late is not drilled');
  assert.equal(isDrillOwed(newestFirst, new Set(['b5']), 'b5', 1), false, 'drilled already');
  assert.equal(isDrillOwed(newestFirst, new Set(['b4']), 'b5', 1), true, 'every backup');
  assert.equal(isDrillOwed(newestFirst, new Set(['b4']), 'b5', 2), false, 'one backup since the last drill: not yet for every 2nd');
  assert.equal(isDrillOwed(newestFirst, new Set(['b3']), 'b5', 2), true, 'two since the last drill');
  assert.equal(isDrillOwed(newestFirst, new Set(['b3']), 'b5', 3), false);
  assert.equal(isDrillOwed(newestFirst, new Set(['b2']), 'b5', 3), true);
});

const backupWith = (snapshotsArg: IServiceBackupDocument['snapshots']): IServiceBackupDocument => ({
  id: 'b', generation: 1, clusterId: 'c', nodeId: 'n', serviceId: 's', createdAt: 1, state: 'completed', attemptStartedAt: 1, orderSha256: 'x', snapshots: snapshotsArg,
});

test("a drill's mappings put each database and volume into scratch resources the contract accepts; a backup without snapshots restores its closure", () => {
  const mappings = drillMappingsOf(backupWith([
    { type: 'database', snapshotId: 's1', resourceName: 'db', databaseName: 'app', createdAt: 1, sizeBytes: 1 },
    { type: 'volume', snapshotId: 's2', resourceName: 'data', mountPath: '/var/data', createdAt: 1, sizeBytes: 1 },
    { type: 'bucket', snapshotId: 's3', resourceName: 'files', bucketName: 'files', createdAt: 1, sizeBytes: 1 },
  ]));
  assert.deepEqual(mappings, [
    { type: 'database', source: { resourceName: 'db', databaseName: 'app' }, target: { resourceName: 'drill-db', databaseName: 'drill_app' } },
    { type: 'volume', source: { resourceName: 'data', mountPath: '/var/data' }, target: { resourceName: 'drill-data', mountPath: '/drill/var/data' } },
  ]);
  assert.deepEqual(validateIsolatedRestoreResourceMappings(mappings), []);
  const closureOnly = drillMappingsOf(backupWith([]));
  assert.deepEqual(closureOnly.map((mappingArg) => mappingArg.target.resourceName), ['drill-closure']);
  assert.deepEqual(validateIsolatedRestoreResourceMappings(closureOnly), []);
});

test("the receipt follows the drill's operation: running, ok with its bytes and duration, failed with the reason, interrupted", () => {
  const operation: IOperationDocument = {
    id: 'op-drill-1', generation: 1, kind: 'backup-drill', method: 'drillServiceBackup', state: 'running', clusterId: 'c', serviceId: 's', nodeId: 'node-2', backupId: 'b',
    requestedBy: 'u', requestSha256: 'x', instanceId: 'i', input: { drillId: 'drill-1', restoreId: 'restore-drill-1', scheduleId: 'nightly' }, startedAt: 1_000,
  };
  const running = receiptOfOperation(operation);
  assert.deepEqual([running.outcome, running.bytes, running.scheduleId, running.restoreId, running.finishedAt], ['running', 0, 'nightly', 'restore-drill-1', undefined]);
  const ok = receiptOfOperation({ ...operation, state: 'completed', endedAt: 4_000, result: { backup: {} as never, drillBytes: 300_001 } });
  assert.deepEqual([ok.outcome, ok.bytes, ok.durationMs, ok.reason], ['ok', 300_001, 3_000, undefined]);
  const failed = receiptOfOperation({ ...operation, state: 'failed', endedAt: 2_000, reason: 'isolated-restore-failed', error: { code: 'conflict', retryable: false, reasons: ['isolated-restore-failed'], causes: [{ message: 'disk full' }] } });
  assert.deepEqual([failed.outcome, failed.reason, failed.detail], ['failed', 'isolated-restore-failed', 'disk full']);
  const interrupted = receiptOfOperation({ ...operation, state: 'failed', endedAt: 2_000, reason: 'interrupted' });
  assert.deepEqual([interrupted.outcome, interrupted.reason], ['interrupted', 'interrupted']);
});
