import * as v8 from 'node:v8';
import * as vm from 'node:vm';

/**
 * Frees an ArrayBuffer's memory now instead of at the collector's next full collection.
 *
 * Why: a stream's data frames arrive in buffers ws allocates per frame. The stream consumer
 * copies each one out at once, yet the memory stays allocated until V8 finds the buffer dead,
 * and V8 starts full collections when such external memory piles up (see bin/cloudly-server).
 * Detaching the buffer releases its memory and takes it off V8's external-memory account on
 * the spot, so frames the consumer is done with no longer drive full collections.
 *
 * How: `ArrayBuffer.prototype.transfer(0)` detaches its receiver. Node 22 and later have it.
 * Node 20's V8 has it behind `--harmony-rab-gsab-transfer`, which only affects contexts
 * created while the flag is set: the flag is set for the moment it takes to create one vm
 * context, whose builtin works on ArrayBuffers of any context. Without either, nothing is
 * freed early and the collector frees the memory as before.
 */
type TTransfer = (this: ArrayBuffer, newLengthArg?: number) => ArrayBuffer;

const findTransfer = (): TTransfer | null => {
  const own = (ArrayBuffer.prototype as { transfer?: TTransfer }).transfer;
  if (typeof own === 'function') {
    return own;
  }
  try {
    v8.setFlagsFromString('--harmony-rab-gsab-transfer');
    const borrowed: unknown = vm.runInNewContext('ArrayBuffer.prototype.transfer');
    return typeof borrowed === 'function' ? (borrowed as TTransfer) : null;
  } catch {
    return null;
  } finally {
    v8.setFlagsFromString('--no-harmony-rab-gsab-transfer');
  }
};

let transfer: TTransfer | null | undefined;

/** Whether this runtime can free an ArrayBuffer early. */
export const canReleaseMemory = (): boolean => {
  transfer ??= findTransfer();
  return transfer !== null;
};

/**
 * Detaches `memoryArg`, freeing its bytes; every view of it reads as empty afterwards. The
 * caller must own the whole ArrayBuffer: never pass a pooled one (small `Buffer`s share node's
 * pool) or one another party still reads. Answers whether the memory was freed.
 */
export const releaseMemory = (memoryArg: ArrayBuffer): boolean => {
  if (!canReleaseMemory() || memoryArg.byteLength === 0) {
    return false;
  }
  try {
    transfer!.call(memoryArg, 0);
    return true;
  } catch {
    // Not detachable (a key guards it, or it is a SharedArrayBuffer's or WebAssembly's memory).
    return false;
  }
};

/**
 * Frees the memory behind `viewArg` when that memory holds `leadingBytesArg` bytes and then the
 * view, and nothing else: a buffer made for this one message (ws assembles each frame that spans
 * socket reads in one of its own), so nobody else can still be reading it. Memory shared with
 * other bytes, node's small-buffer pool, or shared memory is left to the collector. Answers
 * whether the memory was freed; the view reads as empty if so.
 */
export const releaseOwnMemory = (viewArg: Uint8Array, leadingBytesArg = 0): boolean => {
  const memory = viewArg.buffer;
  return (
    viewArg.byteOffset === leadingBytesArg &&
    memory.byteLength === leadingBytesArg + viewArg.byteLength &&
    memory.byteLength > Buffer.poolSize &&
    memory instanceof ArrayBuffer &&
    releaseMemory(memory)
  );
};
