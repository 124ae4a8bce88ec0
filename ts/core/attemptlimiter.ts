/**
 * Counts attempts per key (an address) in a fixed window and says when a key has had
 * too many: failed socket upgrades per address. Memory is bounded: at most `maxKeys` keys are
 * tracked, and when a new key would exceed that the oldest window is forgotten first.
 */

export interface IAttemptLimit {
  /** Attempts a key may make in one window; the next one is refused. */
  attempts: number;
  windowMs: number;
  /** Keys tracked at once. */
  maxKeys?: number;
}

interface IWindow {
  startedAt: number;
  count: number;
}

export class AttemptLimiter {
  private readonly windows = new Map<string, IWindow>();
  private readonly maxKeys: number;

  constructor(private readonly limit: IAttemptLimit, private readonly now: () => number = Date.now) {
    this.maxKeys = limit.maxKeys ?? 10_000;
  }

  /** Milliseconds until `keyArg` may try again, or 0 when it may try now. Counts nothing. */
  public retryAfterMs(keyArg: string): number {
    const window = this.current(keyArg);
    return window && window.count >= this.limit.attempts ? window.startedAt + this.limit.windowMs - this.now() : 0;
  }

  /** Records one attempt of `keyArg`. */
  public record(keyArg: string): void {
    const window = this.current(keyArg);
    if (window) {
      window.count++;
      return;
    }
    if (this.windows.size >= this.maxKeys) {
      // Maps iterate in insertion order: the first key is the oldest window.
      this.windows.delete(this.windows.keys().next().value!);
    }
    this.windows.set(keyArg, { startedAt: this.now(), count: 1 });
  }

  private current(keyArg: string): IWindow | null {
    const window = this.windows.get(keyArg);
    if (!window) {
      return null;
    }
    if (this.now() - window.startedAt >= this.limit.windowMs) {
      this.windows.delete(keyArg);
      return null;
    }
    return window;
  }
}
