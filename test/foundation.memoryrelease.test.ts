import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canReleaseMemory, releaseMemory } from '../ts/core/memoryrelease.js';

test('releasing an ArrayBuffer detaches it: its views read as empty and V8 no longer counts its bytes', () => {
  assert.equal(canReleaseMemory(), true);
  const before = process.memoryUsage().arrayBuffers;
  const memory = new ArrayBuffer(32 * 1024 * 1024);
  const view = new Uint8Array(memory);
  view.fill(7);
  assert.ok(process.memoryUsage().arrayBuffers >= before + memory.byteLength);
  assert.equal(releaseMemory(memory), true);
  assert.equal(memory.byteLength, 0);
  assert.equal(view.byteLength, 0);
  // Freed now, not at some later collection: the count is back below what the buffer added.
  assert.ok(process.memoryUsage().arrayBuffers < before + memory.byteLength / 2 + 1024 * 1024);
});

test('memory that cannot be detached is left as it was, and releasing twice is harmless', () => {
  const shared = new SharedArrayBuffer(1024);
  assert.equal(releaseMemory(shared as unknown as ArrayBuffer), false);
  assert.equal(shared.byteLength, 1024);
  const memory = new ArrayBuffer(1024);
  assert.equal(releaseMemory(memory), true);
  assert.equal(releaseMemory(memory), false);
});

test('the flag borrowed to reach the builtin does not stay on for new contexts', async () => {
  const vm = await import('node:vm');
  canReleaseMemory();
  const native = typeof (ArrayBuffer.prototype as { transfer?: unknown }).transfer === 'function';
  // On a runtime with the native builtin every context has it; otherwise none made later does.
  assert.equal(typeof vm.runInNewContext('ArrayBuffer.prototype.transfer') === 'function', native);
});

test('own memory is freed only when it holds the leading bytes and the view and nothing else', async () => {
  const { releaseOwnMemory } = await import('../ts/core/memoryrelease.js');
  const frame = Buffer.allocUnsafe(18 + 100_000);
  // More bytes after the view, or a view that starts elsewhere: shared, left alone.
  assert.equal(releaseOwnMemory(frame.subarray(18, 18 + 99_999), 18), false);
  assert.equal(releaseOwnMemory(frame.subarray(17), 18), false);
  assert.equal(frame.byteLength, 18 + 100_000);
  // Node's small-buffer pool holds other Buffers' bytes too.
  const pooled = Buffer.allocUnsafe(64);
  assert.equal(pooled.buffer.byteLength, Buffer.poolSize);
  assert.equal(releaseOwnMemory(Buffer.from(pooled.buffer)), false);
  assert.equal(pooled.byteLength, 64);
  // Exactly the leading bytes and the view: freed.
  const payload = frame.subarray(18);
  assert.equal(releaseOwnMemory(payload, 18), true);
  assert.equal(payload.byteLength, 0);
  assert.equal(frame.byteLength, 0);
});
