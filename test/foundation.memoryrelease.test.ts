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
