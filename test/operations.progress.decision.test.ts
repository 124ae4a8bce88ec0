import { test } from 'node:test';
import assert from 'node:assert/strict';
import { judgeOperationProgress, type IOperationProgressDocument } from '../ts/manager.operation/documents.js';
import { decideRemoteTransfer } from '../ts/manager.operation/decide.js';

/**
 * The progress a reader sees when the closure's bytes arrive on another instance than the one
 * running the operation: the runner's own phase and bytes, with that instance's bytes filled in.
 */

const runner = (overridesArg: Partial<IOperationProgressDocument> = {}): IOperationProgressDocument => ({
  id: 'op-1', generation: 1, phase: 'relay', bytesDone: 0, bytesTotal: null, updatedAt: 100, heartbeatAt: 100, ...overridesArg,
} as IOperationProgressDocument);
const transfer = { bytesDone: 512, bytesTotal: 1024, updatedAt: 200, instanceId: 'b' };

test('without bytes from another instance the runner\'s own progress is the progress', () => {
  assert.deepEqual(judgeOperationProgress(runner({ phase: 'transfer', bytesDone: 10, bytesTotal: 20 })),
    { phase: 'transfer', bytesDone: 10, bytesTotal: 20, updatedAt: 100 });
});

test('bytes moving on another instance, newer than the runner\'s news: the transfer is the progress', () => {
  assert.deepEqual(judgeOperationProgress(runner({ transfer })), { phase: 'transfer', bytesDone: 512, bytesTotal: 1024, updatedAt: 200 });
});

test('once the runner records the outcome its phase leads, with the bytes the other instance moved', () => {
  assert.deepEqual(judgeOperationProgress(runner({ phase: 'recording', updatedAt: 300, transfer: { ...transfer, bytesDone: 1024 } })),
    { phase: 'recording', bytesDone: 1024, bytesTotal: 1024, updatedAt: 300 });
  assert.deepEqual(judgeOperationProgress(runner({ phase: 'done', updatedAt: 150, transfer: { ...transfer, bytesDone: 1024 } })),
    { phase: 'done', bytesDone: 1024, bytesTotal: 1024, updatedAt: 150 }, 'even when its clock is behind');
});

test('the remote transfer writes only its own member, or creates the document when the runner has not yet', () => {
  assert.deepEqual(decideRemoteTransfer(runner(), 'op-1', transfer, 250), { kind: 'write', change: { set: { transfer } } });
  assert.deepEqual(decideRemoteTransfer(null, 'op-1', transfer, 250), {
    kind: 'create',
    doc: { id: 'op-1', phase: 'transfer', bytesDone: 0, bytesTotal: null, updatedAt: 250, heartbeatAt: 250, transfer },
  });
});
