/**
 * One keyed work queue for background work (claim pushes, service reconciles, relay elections),
 * shaped like client-go's `util/workqueue`: a key is never processed twice at once; a key added
 * while it waits runs once; a key added while it is being processed runs once more afterwards, so
 * the last trigger is always seen. Different keys run concurrently. `drain()` (on stop) takes no
 * new work and waits for what is running. A failed run is logged and, when the queue has a retry
 * policy, added again after a backoff that doubles per consecutive failure of that key.
 */

import { currentOperation, runAsCloudly } from './operationcontext.js';

export interface IWorkQueueLogger {
  error(objectArg: object, messageArg: string): void;
}

export interface IWorkQueueRetry {
  /** Consecutive failures of one key after which it is no longer added again (until its next add). */
  maximumRetries: number;
  /** The first backoff; each further consecutive failure doubles it. */
  baseDelayMs: number;
  /** The longest backoff. */
  maximumDelayMs: number;
}

export interface IWorkQueueOptions {
  /** Names the queue in log lines. */
  name: string;
  logger: IWorkQueueLogger;
  /** Processes one key. A throw is a failure: logged, and retried when `retry` is set. */
  process: (keyArg: string) => Promise<void>;
  retry?: IWorkQueueRetry;
  /** How many keys may run at once; unlimited when absent. Keys over the limit wait their turn, still coalescing adds. */
  concurrency?: number;
}

interface IKeyState {
  /** Added since its current run started (or waiting to run): one more run is owed. */
  dirty: boolean;
  /** The run loop of this key while it goes. */
  loop: Promise<void> | null;
  /** Callers of `add` waiting for the run that will see their add. */
  waiters: Array<() => void>;
  /** Consecutive failures, for the backoff; kept while a retry waits, reset by a success. */
  failures: number;
  retryTimer: NodeJS.Timeout | null;
  /** When the key became owed a run it has not started yet (for the age of the oldest pending key); null while none is owed. */
  pendingSince: number | null;
}

export class WorkQueue {
  private readonly keys = new Map<string, IKeyState>();
  private draining = false;
  /** Runs in progress, and the loops waiting for a free slot (only with `concurrency`). */
  private running = 0;
  private readonly slotWaiters: Array<() => void> = [];

  constructor(private readonly options: IWorkQueueOptions) {}

  /**
   * Asks for one run of `keyArg` that starts after this call. Resolves once such a run has ended
   * (whether it succeeded or failed: failures are the queue's to log), or at once when the queue
   * is draining. Never rejects.
   */
  public add(keyArg: string): Promise<void> {
    // A dry run queues no follow-up work: it answers what it would commit and nothing happens.
    if (this.draining || currentOperation().dryRun) {
      return Promise.resolve();
    }
    const state = this.stateOf(keyArg);
    // An explicit add replaces a pending retry: it runs now instead of after the backoff.
    this.clearRetry(state);
    const seen = new Promise<void>((resolve) => state.waiters.push(resolve));
    state.dirty = true;
    state.pendingSince ??= Date.now();
    if (!state.loop) {
      // The loop is Cloudly's own work whichever request started it (audited as `cloudly`).
      state.loop = runAsCloudly(() => this.runLoop(keyArg, state));
    }
    return seen;
  }

  /** Resolves once the key is neither running nor owed a run (at once when it is idle). */
  public async idle(keyArg: string): Promise<void> {
    for (;;) {
      const loop = this.keys.get(keyArg)?.loop;
      if (!loop) {
        return;
      }
      await loop;
    }
  }

  /** How many keys are owed a run that has not started yet. */
  public get depth(): number {
    let count = 0;
    for (const state of this.keys.values()) {
      if (state.pendingSince !== null) {
        count++;
      }
    }
    return count;
  }

  /** How many keys are running or owed a run. */
  public get busyKeys(): number {
    let count = 0;
    for (const state of this.keys.values()) {
      if (state.loop) {
        count++;
      }
    }
    return count;
  }

  /** When the longest-waiting owed run was asked for (epoch ms), or null when nothing waits. */
  public oldestPendingAt(): number | null {
    let oldest: number | null = null;
    for (const state of this.keys.values()) {
      if (state.pendingSince !== null && (oldest === null || state.pendingSince < oldest)) {
        oldest = state.pendingSince;
      }
    }
    return oldest;
  }

  /** Whether the key is running or owed a run right now. */
  public isBusy(keyArg: string): boolean {
    return Boolean(this.keys.get(keyArg)?.loop);
  }

  /**
   * Stops taking work (adds resolve at once and run nothing), cancels pending retries, and waits
   * for every run in progress to end. Runs owed but not started are dropped; their callers resolve.
   */
  public async drain(): Promise<void> {
    this.draining = true;
    for (const state of this.keys.values()) {
      this.clearRetry(state);
    }
    for (;;) {
      const loops = [...this.keys.values()].map((state) => state.loop).filter((loop): loop is Promise<void> => loop !== null);
      if (loops.length === 0) {
        break;
      }
      await Promise.all(loops);
    }
    this.keys.clear();
  }

  /** Takes work again after a `drain()` (a manager started again). */
  public resume(): void {
    this.draining = false;
  }

  private stateOf(keyArg: string): IKeyState {
    let state = this.keys.get(keyArg);
    if (!state) {
      state = { dirty: false, loop: null, waiters: [], failures: 0, retryTimer: null, pendingSince: null };
      this.keys.set(keyArg, state);
    }
    return state;
  }

  private clearRetry(stateArg: IKeyState): void {
    if (stateArg.retryTimer) {
      clearTimeout(stateArg.retryTimer);
      stateArg.retryTimer = null;
    }
  }

  private async runLoop(keyArg: string, stateArg: IKeyState): Promise<void> {
    // Start on a later tick, so every add of this tick is folded into the first run.
    await Promise.resolve();
    while (stateArg.dirty && !this.draining) {
      // Adds that arrive while the key waits for a slot fold into the run it is waiting for.
      await this.acquireSlot();
      if (this.draining) {
        this.releaseSlot();
        break;
      }
      stateArg.dirty = false;
      stateArg.pendingSince = null;
      const waiters = stateArg.waiters.splice(0);
      try {
        await this.options.process(keyArg);
        stateArg.failures = 0;
      } catch (error) {
        stateArg.failures++;
        this.options.logger.error(
          { err: error, queue: this.options.name, key: keyArg, failures: stateArg.failures },
          `${this.options.name} failed`,
        );
        this.scheduleRetry(keyArg, stateArg);
      } finally {
        this.releaseSlot();
        for (const resolve of waiters) {
          resolve();
        }
      }
    }
    stateArg.loop = null;
    stateArg.pendingSince = null;
    // Dropped by a drain: nobody runs them, so nobody may wait for them.
    for (const resolve of stateArg.waiters.splice(0)) {
      resolve();
    }
    stateArg.dirty = false;
    if (!stateArg.retryTimer) {
      this.keys.delete(keyArg);
    }
  }

  private async acquireSlot(): Promise<void> {
    const limit = this.options.concurrency;
    if (limit === undefined || this.running < limit) {
      this.running++;
      return;
    }
    // The releasing run hands its slot over: `running` stays as it is.
    await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
  }

  private releaseSlot(): void {
    const next = this.slotWaiters.shift();
    if (next) {
      next();
    } else {
      this.running--;
    }
  }

  private scheduleRetry(keyArg: string, stateArg: IKeyState): void {
    const retry = this.options.retry;
    if (!retry || this.draining || stateArg.failures > retry.maximumRetries || stateArg.dirty) {
      // Without a policy, past its budget, or already owed a run by a newer add: no timer.
      return;
    }
    const delay = Math.min(retry.maximumDelayMs, retry.baseDelayMs * 2 ** (stateArg.failures - 1));
    this.clearRetry(stateArg);
    stateArg.retryTimer = setTimeout(() => {
      stateArg.retryTimer = null;
      if (!this.draining) {
        // The state stays in the map while its timer waits, so the failures keep counting.
        void this.add(keyArg);
      }
    }, delay);
    stateArg.retryTimer.unref();
  }
}
