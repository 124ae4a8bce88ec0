import type { TCloudlyLogger } from './logger.js';

/**
 * The log lines each relay's socket causes (opened, elected, registration accepted, lease
 * released, closed), with a budget: the first `budget` of a window are written at info as they
 * happen, the rest at debug, and at the window's end one info line counts those by message. A
 * quiet instance logs every relay as it comes and goes; a storm of thousands of reconnects costs
 * a few lines, not five per relay. (Each line is a JSON serialisation, a redaction pass over
 * every secret field name and a write: in a 1,000-relay storm they were 6% of the instances' busy
 * time, bench/results/fleet.md.) At `CLOUDLY_LOG_LEVEL=debug` every line is still written.
 */

export interface IRelayActivityBudget {
  /** Lines at info per window. */
  budget: number;
  windowMs: number;
}

export const defaultRelayActivityBudget: IRelayActivityBudget = Object.freeze({ budget: 20, windowMs: 10_000 });

/** The message of the line that counts what a window wrote at debug. */
export const relayActivitySummaryMessage = 'relay lines past the budget were logged at debug';

export class RelayActivityLog {
  private windowStartedAt = -Infinity;
  private linesInWindow = 0;
  /** Lines written at debug in this window, by message. */
  private readonly quieted = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly logger: TCloudlyLogger, private readonly options: IRelayActivityBudget = defaultRelayActivityBudget) {}

  /** Logs one relay's line: at info within the window's budget, at debug (and counted) past it. */
  public line(fieldsArg: Record<string, unknown>, messageArg: string): void {
    const now = Date.now();
    if (now - this.windowStartedAt >= this.options.windowMs) {
      this.flush();
      this.windowStartedAt = now;
      this.linesInWindow = 0;
    }
    if (this.linesInWindow < this.options.budget) {
      this.linesInWindow++;
      this.logger.info(fieldsArg, messageArg);
      return;
    }
    this.logger.debug(fieldsArg, messageArg);
    this.quieted.set(messageArg, (this.quieted.get(messageArg) ?? 0) + 1);
    if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), Math.max(1, this.windowStartedAt + this.options.windowMs - now));
      this.timer.unref();
    }
  }

  /** Writes the count of the window's lines logged at debug, if any (also on stop). */
  public flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.quieted.size === 0) {
      return;
    }
    const lines = Object.fromEntries(this.quieted);
    this.quieted.clear();
    this.logger.info({ windowMs: this.options.windowMs, budget: this.options.budget, lines }, relayActivitySummaryMessage);
  }
}
