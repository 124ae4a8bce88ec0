import { Worker } from 'node:worker_threads';

/**
 * sha256 off the main thread.
 *
 * Hashing is the largest single cost of storing a streamed closure (about 0.5 CPU s/GiB with
 * SHA-NI, half of the server's main thread on the closure benchmark). The blob store stages
 * received bytes in a few buffers anyway (aligned, for direct writes), so one worker thread
 * can hash each full buffer while the main thread goes on receiving. A buffer is transferred
 * to the worker and back, never copied. (Shared memory would save the transfers but cost a
 * copy into it: V8 copies into a SharedArrayBuffer with relaxed atomic moves, which took the
 * main thread longer than the hashing it saved.)
 *
 * One worker per process, started on first use and shared by every running hash, which it
 * keeps apart by session number. Ranges of one session are hashed in the order they were
 * posted. The worker does not keep the process alive while no hash is running.
 */

/** An incremental sha256 computed by the hash worker. */
export interface IWorkerSha256 {
  /**
   * Adds bytes `offsetArg` to `offsetArg + lengthArg` of `bufferArg`, in call order. The buffer
   * is transferred to the worker (detached here) and comes back as the answer: a new
   * ArrayBuffer over the same memory, usable again.
   */
  update(bufferArg: ArrayBuffer, offsetArg: number, lengthArg: number): Promise<ArrayBuffer>;
  /** Lowercase hex digest of everything added; the hash is finished afterwards. */
  digest(): Promise<string>;
  /** Gives the hash up (nothing is awaited); further calls are refused. */
  discard(): void;
}

type TWorkerRequest =
  | { kind: 'update'; session: number; buffer: ArrayBuffer; offset: number; length: number }
  | { kind: 'digest'; session: number }
  | { kind: 'discard'; session: number };
type TWorkerReply =
  | { kind: 'updated'; session: number; buffer: ArrayBuffer }
  | { kind: 'digest'; session: number; hex: string };

/** The worker's whole program, run as CommonJS source so no loader or build step is involved. */
const workerSource = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const hashes = new Map();
parentPort.on('message', (request) => {
  if (request.kind === 'update') {
    let hash = hashes.get(request.session);
    if (!hash) {
      hash = createHash('sha256');
      hashes.set(request.session, hash);
    }
    hash.update(new Uint8Array(request.buffer, request.offset, request.length));
    parentPort.postMessage({ kind: 'updated', session: request.session, buffer: request.buffer }, [request.buffer]);
  } else if (request.kind === 'digest') {
    const hash = hashes.get(request.session) ?? createHash('sha256');
    hashes.delete(request.session);
    parentPort.postMessage({ kind: 'digest', session: request.session, hex: hash.digest('hex') });
  } else if (request.kind === 'discard') {
    hashes.delete(request.session);
  }
});
`;

interface IPendingReply {
  resolve: (valueArg: string | ArrayBuffer) => void;
  reject: (errorArg: Error) => void;
}

class Sha256Worker {
  private worker: Worker | null = null;
  private nextSession = 1;
  /** Replies each session still waits for, oldest first (the worker answers in order). */
  private readonly waiting = new Map<number, IPendingReply[]>();
  private openSessions = 0;

  open(): IWorkerSha256 {
    const worker = this.started();
    const session = this.nextSession++;
    this.waiting.set(session, []);
    this.openSessions++;
    worker.ref();
    let finished = false;
    const close = (): void => {
      if (finished) {
        return;
      }
      finished = true;
      this.openSessions--;
      if (this.openSessions === 0) {
        this.worker?.unref();
      }
    };
    const request = (messageArg: TWorkerRequest, transferArg: ArrayBuffer[] = []): Promise<string | ArrayBuffer> => {
      const queue = this.waiting.get(session);
      if (finished || !queue || this.worker !== worker) {
        return Promise.reject(new Error('the sha256 session is closed'));
      }
      return new Promise((resolve, reject) => {
        queue.push({ resolve, reject });
        worker.postMessage(messageArg, transferArg);
      });
    };
    return {
      update: async (bufferArg, offsetArg, lengthArg) =>
        (await request({ kind: 'update', session, buffer: bufferArg, offset: offsetArg, length: lengthArg }, [bufferArg])) as ArrayBuffer,
      digest: async () => {
        try {
          return (await request({ kind: 'digest', session })) as string;
        } finally {
          this.waiting.delete(session);
          close();
        }
      },
      discard: () => {
        if (!finished && this.worker === worker) {
          worker.postMessage({ kind: 'discard', session } satisfies TWorkerRequest);
        }
        // Whoever still waits is told; replies still on their way are dropped when they arrive.
        for (const pending of this.waiting.get(session)?.splice(0) ?? []) {
          pending.reject(new Error('the sha256 session was discarded'));
        }
        this.waiting.delete(session);
        close();
      },
    };
  }

  /** Ends the worker now: every hash still running fails; the next one starts a new worker. */
  async terminate(): Promise<void> {
    const worker = this.worker;
    if (worker) {
      await worker.terminate();
      this.failWorker(worker, new Error('the sha256 worker was terminated'));
    }
  }

  private started(): Worker {
    if (this.worker) {
      return this.worker;
    }
    const worker = new Worker(workerSource, { eval: true, name: 'cloudly-sha256' });
    worker.unref();
    worker.on('message', (replyArg: TWorkerReply) => {
      const pending = this.waiting.get(replyArg.session)?.shift();
      pending?.resolve(replyArg.kind === 'digest' ? replyArg.hex : replyArg.buffer);
    });
    worker.on('error', (errorArg) => this.failWorker(worker, errorArg));
    worker.on('exit', (codeArg) => this.failWorker(worker, new Error(`the sha256 worker exited (${codeArg})`)));
    this.worker = worker;
    return worker;
  }

  /** Forgets a worker that died (once) and fails every hash that waited on it. */
  private failWorker(workerArg: Worker, errorArg: Error): void {
    if (this.worker !== workerArg) {
      return;
    }
    this.worker = null;
    for (const queue of this.waiting.values()) {
      for (const pending of queue.splice(0)) {
        pending.reject(errorArg);
      }
    }
  }
}

let shared: Sha256Worker | null = null;

/** A new incremental sha256 computed by the process's hash worker. */
export const openWorkerSha256 = (): IWorkerSha256 => {
  shared ??= new Sha256Worker();
  return shared.open();
};

/**
 * Ends the process's hash worker (a fault, as far as running hashes are concerned: each of them
 * fails and its write with it). Used by the tests that prove such a failure leaves nothing behind.
 */
export const terminateSha256Worker = async (): Promise<void> => {
  await shared?.terminate();
};

/**
 * One staging buffer: an allocation of its own (so it can be transferred to the hash worker
 * alone), the offset at which its bytes start (aligned ones, for direct writes), and what it
 * still waits for.
 */
export interface IStagingSlot {
  memory: ArrayBuffer;
  offset: number;
  /** Bytes the slot holds. */
  size: number;
  view: Buffer;
  /** Its hashing and what follows it, or null when it is free. */
  busy: Promise<void> | null;
}

/** A staging slot of `sizeArg` bytes starting at `offsetArg` of `memoryArg` (a buffer of its own). */
export const stagingSlotOf = (memoryArg: Buffer, offsetArg: number, sizeArg: number): IStagingSlot => ({
  memory: memoryArg.buffer as ArrayBuffer,
  offset: offsetArg,
  size: sizeArg,
  view: Buffer.from(memoryArg.buffer, offsetArg, sizeArg),
  busy: null,
});

/**
 * Hashes pushed bytes on the worker thread. The bytes are copied into a few staging buffers;
 * each full buffer is transferred to the worker, and when it comes back `afterHashArg` (e.g. a
 * file write) gets its bytes and position, while the next buffers fill. A buffer is filled again
 * only after both finished, so at most all buffers' bytes are in flight. The pushed chunks
 * themselves are never kept.
 */
export class StagedSha256 {
  private turn = 0;
  private filled = 0;
  private position = 0;
  private finished = false;
  private readonly hash = openWorkerSha256();

  constructor(
    private readonly slots: IStagingSlot[],
    private readonly afterHashArg: (bytesArg: Buffer, positionArg: number) => Promise<void> = async () => undefined,
  ) {}

  /** `countArg` staging buffers of `sizeArg` bytes without alignment. */
  static plainSlots(countArg: number, sizeArg: number): IStagingSlot[] {
    return Array.from({ length: countArg }, () => stagingSlotOf(Buffer.allocUnsafeSlow(sizeArg), 0, sizeArg));
  }

  /** Copies the chunk into the staging buffers, handing each one on as it fills. */
  async push(chunkArg: Uint8Array): Promise<void> {
    let consumed = 0;
    while (consumed < chunkArg.byteLength) {
      const slot = this.slots[this.turn];
      const take = Math.min(chunkArg.byteLength - consumed, slot.size - this.filled);
      slot.view.set(chunkArg.subarray(consumed, consumed + take), this.filled);
      this.filled += take;
      consumed += take;
      if (this.filled === slot.size) {
        await this.submitCurrent();
      }
    }
  }

  /** Hands on the rest, waits for everything, and answers the sha256 of all pushed bytes. */
  async finish(): Promise<string> {
    if (this.filled > 0) {
      await this.submitCurrent();
    }
    await this.settle();
    this.finished = true;
    return this.hash.digest();
  }

  /** Waits for every buffer still in flight, whatever its outcome, then fails with the first failure. */
  async settle(): Promise<void> {
    const pending = this.slots.map((slotArg) => slotArg.busy);
    for (const slot of this.slots) {
      slot.busy = null;
    }
    const results = await Promise.allSettled(pending);
    const failed = results.find((resultArg): resultArg is PromiseRejectedResult => resultArg.status === 'rejected');
    if (failed) {
      throw failed.reason;
    }
  }

  /** Waits for what is in flight and gives the hash up unless it was finished. */
  async close(): Promise<void> {
    await this.settle().catch(() => undefined);
    if (!this.finished) {
      this.finished = true;
      this.hash.discard();
    }
  }

  private async submitCurrent(): Promise<void> {
    const slot = this.slots[this.turn];
    const length = this.filled;
    const position = this.position;
    this.position += length;
    this.filled = 0;
    const work = this.hash.update(slot.memory, slot.offset, length).then((memoryArg) => {
      slot.memory = memoryArg;
      slot.view = Buffer.from(memoryArg, slot.offset, slot.size);
      return this.afterHashArg(slot.view.subarray(0, length), position);
    });
    // Observed here so a failure is never an unhandled rejection; it is rethrown when awaited.
    work.catch(() => undefined);
    slot.busy = work;
    this.turn = (this.turn + 1) % this.slots.length;
    const next = this.slots[this.turn].busy;
    if (next) {
      this.slots[this.turn].busy = null;
      await next;
    }
  }
}
