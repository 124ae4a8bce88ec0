import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { openWorkerSha256 } from '../ts/core/hashworker.js';

/** A buffer of its own (transferable), holding `bytesArg` at `offsetArg`. */
const ownBuffer = (bytesArg: Buffer, offsetArg: number): ArrayBuffer => {
  const memory = Buffer.allocUnsafeSlow(offsetArg + bytesArg.byteLength + 7);
  bytesArg.copy(memory, offsetArg);
  return memory.buffer as ArrayBuffer;
};

test('the worker digest equals sha256 of the ranges in order, and each buffer comes back intact and usable', async () => {
  const parts = [randomBytes(1), randomBytes(70_000), randomBytes(0), randomBytes(2 * 1024 * 1024 + 5)];
  const hash = openWorkerSha256();
  for (const [index, part] of parts.entries()) {
    const memory = ownBuffer(part, index * 3);
    const back = await hash.update(memory, index * 3, part.byteLength);
    assert.equal(memory.byteLength, 0, 'the buffer was transferred away while it was hashed');
    assert.ok(Buffer.from(back, index * 3, part.byteLength).equals(part));
  }
  assert.equal(await hash.digest(), createHash('sha256').update(Buffer.concat(parts)).digest('hex'));
});

test('interleaved hashes are kept apart', async () => {
  const a = randomBytes(300_000);
  const b = randomBytes(300_000);
  const hashA = openWorkerSha256();
  const hashB = openWorkerSha256();
  const halves = (bytesArg: Buffer): Buffer[] => [bytesArg.subarray(0, 150_000), bytesArg.subarray(150_000)];
  const [a1, a2] = halves(a);
  const [b1, b2] = halves(b);
  await Promise.all([
    hashA.update(ownBuffer(a1, 0), 0, a1.byteLength),
    hashB.update(ownBuffer(b1, 0), 0, b1.byteLength),
    hashA.update(ownBuffer(a2, 0), 0, a2.byteLength),
    hashB.update(ownBuffer(b2, 0), 0, b2.byteLength),
  ]);
  assert.equal(await hashB.digest(), createHash('sha256').update(b).digest('hex'));
  assert.equal(await hashA.digest(), createHash('sha256').update(a).digest('hex'));
});

test('a discarded hash refuses further use and does not disturb the next one', async () => {
  const hash = openWorkerSha256();
  const bytes = randomBytes(1000);
  await hash.update(ownBuffer(bytes, 0), 0, bytes.byteLength);
  hash.discard();
  await assert.rejects(hash.update(ownBuffer(bytes, 0), 0, bytes.byteLength), /closed/);
  await assert.rejects(hash.digest(), /closed/);
  const next = openWorkerSha256();
  await next.update(ownBuffer(bytes, 0), 0, bytes.byteLength);
  assert.equal(await next.digest(), createHash('sha256').update(bytes).digest('hex'));
});
