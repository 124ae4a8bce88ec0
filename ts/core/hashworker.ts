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
