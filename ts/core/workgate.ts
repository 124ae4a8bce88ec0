/**
 * A bounded lane for the relay calls a reconnect storm makes (relay elections and desired-state
 * refreshes are bounded the same way by their work queues' `concurrency`): at most `limit` run at
 * once, the rest wait their turn in arrival order. Work that does not go through the gate (an
 * administrator's call) never waits behind the queued storm, and the storm's database commands in
 * flight stay bounded, so an administrator's commands find a short line in the database too
 * (docs/multi-instance.md, "Admin calls during a storm").
 */
export class WorkGate {
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  /** Runs that waited for a slot, since the start. */
  public waitedTotal = 0;

  /** `limitArg` 0 lets everything through at once. */
  constructor(private readonly limitArg: number) {}

  /** Work running through the gate right now. */
  public get active(): number {
    return this.running;
  }

  /** Work waiting for its turn. */
  public get queued(): number {
    return this.waiting.length;
  }

  /** Runs `workArg` once a slot is free; answers what it answers, throws what it throws. */
  public async run<T>(workArg: () => Promise<T>): Promise<T> {
    if (this.limitArg <= 0) {
      return workArg();
    }
    if (this.running < this.limitArg) {
      this.running++;
    } else {
      // The slot is handed over by the run that ends (running stays counted).
      this.waitedTotal++;
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
    try {
      return await workArg();
    } finally {
      const next = this.waiting.shift();
      if (next) {
        next();
      } else {
        this.running--;
      }
    }
  }
}
