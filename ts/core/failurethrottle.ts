/**
 * Growing delays after failures of a key (an address, an address and an account): a key may fail
 * `freeFailures` times without waiting; after each further failure it must wait `firstDelayMs`,
 * then twice as long after the next, up to `maxDelayMs`. A key's failures are forgotten
 * `forgetAfterMs` after its last one. Nothing here locks a key out for good, and a key that has
 * not failed is never delayed, so failures of other keys cannot deny it.
 *
 * Memory is bounded: at most `maxKeys` keys are tracked; a new key past that forgets the key whose
 * last failure is the oldest.
 */

export interface IFailureThrottle {
  /** Failures a key may have before it must wait. */
  freeFailures: number;
  /** The wait after the first failure past the free ones; each further failure doubles it. */
  firstDelayMs: number;
  maxDelayMs: number;
  /** A key's failures are forgotten this long after its last one. */
  forgetAfterMs: number;
  /** Keys tracked at once. */
  maxKeys: number;
}

interface IFailures {
  count: number;
  lastAt: number;
}

export class FailureThrottle {
  /** By key, in the order of each key's last failure (a failure moves its key to the end). */
  private readonly failures = new Map<string, IFailures>();

  constructor(private readonly schedule: IFailureThrottle, private readonly now: () => number = Date.now) {}

  /** The wait after `countArg` failures (0 while they are free). */
  public delayAfter(countArg: number): number {
    const past = countArg - this.schedule.freeFailures;
    if (past <= 0) {
      return 0;
    }
    // Capped before the power grows past what a number holds exactly.
    return Math.min(this.schedule.maxDelayMs, this.schedule.firstDelayMs * 2 ** Math.min(past - 1, 40));
  }

  /** Milliseconds until `keyArg` may try again, or 0 when it may try now. Counts nothing. */
  public retryAfterMs(keyArg: string): number {
    const failures = this.current(keyArg);
    if (!failures) {
      return 0;
    }
    return Math.max(0, failures.lastAt + this.delayAfter(failures.count) - this.now());
  }

  /** Records one failure of `keyArg`. */
  public recordFailure(keyArg: string): void {
    const failures = this.current(keyArg);
    this.failures.delete(keyArg);
    if (!failures && this.failures.size >= this.schedule.maxKeys) {
      // Maps iterate in insertion order, and a failure re-inserts its key: the first is the stalest.
      this.failures.delete(this.failures.keys().next().value!);
    }
    this.failures.set(keyArg, { count: (failures?.count ?? 0) + 1, lastAt: this.now() });
  }

  /** Forgets `keyArg`'s failures (a successful login from the same address for the same account). */
  public clear(keyArg: string): void {
    this.failures.delete(keyArg);
  }

  /** Keys tracked now (for tests of the bound). */
  public get size(): number {
    return this.failures.size;
  }

  private current(keyArg: string): IFailures | null {
    const failures = this.failures.get(keyArg);
    if (!failures) {
      return null;
    }
    // Never forgotten before its wait is over.
    if (this.now() - failures.lastAt >= Math.max(this.schedule.forgetAfterMs, this.delayAfter(failures.count))) {
      this.failures.delete(keyArg);
      return null;
    }
    return failures;
  }
}
