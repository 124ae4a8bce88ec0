import { fork, execFileSync, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { IFleetStats } from './fleetrelays.js';

/** Pieces of bench/fleet.bench.ts: the relay fleet child, the kernel's counters, timing. */

export const percentile = (samplesArg: number[], pArg: number): number => {
  const sorted = [...samplesArg].sort((x, y) => x - y);
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * pArg))];
};

export const sleep = (msArg: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, msArg));

/**
 * The kernel's TCP counters that say a listener could not keep up: accept-queue overflows and the
 * SYNs dropped with them, SYN cookies sent (the SYN queue was full) and SYN-ACK retransmits.
 * Machine-wide (other processes' connections count too), so a bench reads the difference over
 * its own storm. Empty when `nstat` is missing.
 */
export const kernelTcpCounters = (): Record<string, number> => {
  try {
    const text = execFileSync('nstat', ['-az', 'TcpExtListenOverflows', 'TcpExtListenDrops', 'TcpExtSyncookiesSent', 'TcpExtTCPSynRetrans'], { encoding: 'utf8' });
    const counters: Record<string, number> = {};
    for (const line of text.split('\n')) {
      const match = /^(TcpExt\w+)\s+(\d+)/.exec(line);
      if (match) {
        counters[match[1].replace(/^TcpExt/, '')] = Number(match[2]);
      }
    }
    return counters;
  } catch {
    return {};
  }
};

export const counterDelta = (beforeArg: Record<string, number>, afterArg: Record<string, number>): string =>
  Object.keys(afterArg).map((key) => `${key} +${afterArg[key] - (beforeArg[key] ?? 0)}`).join(', ') || 'nstat not available';

/** The fleet child (bench/helpers/fleetrelays.ts) and a way to ask it for its counters. */
export class FleetProcess {
  private readonly child: ChildProcess;
  private readonly waiting: Array<(statsArg: IFleetStats) => void> = [];

  constructor() {
    this.child = fork(path.join(import.meta.dirname, 'fleetrelays.ts'), [], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (messageArg: IFleetStats | { kind: 'stopped' }) => {
      if (messageArg.kind === 'stats') {
        this.waiting.shift()?.(messageArg);
      }
    });
  }

  public get pid(): number {
    return this.child.pid!;
  }

  public start(urlsArg: string[], tokensArg: string[], optionsArg: { reportMs?: number; rampMs?: number } = {}): void {
    this.child.send({ kind: 'start', urls: urlsArg, tokens: tokensArg, ...optionsArg });
  }

  /** Every relay reports an unchanged observed state every `periodMsArg` ms (0: stop reporting). */
  public report(periodMsArg: number): void {
    this.child.send({ kind: 'report', reportMs: periodMsArg });
  }

  public stats(resetFailuresArg = false): Promise<IFleetStats> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.child.send({ kind: 'stats', resetFailures: resetFailuresArg });
    });
  }

  /**
   * Polls until `doneArg(stats)` holds or `boundMsArg` passes; answers the time it took (ms) and the
   * last stats. Each poll is one message to the child, so polling every 100 ms costs nothing.
   */
  public async waitFor(doneArg: (statsArg: IFleetStats) => boolean, boundMsArg: number): Promise<{ ms: number; stats: IFleetStats; reached: boolean }> {
    const started = performance.now();
    for (;;) {
      const stats = await this.stats();
      if (doneArg(stats)) {
        return { ms: performance.now() - started, stats, reached: true };
      }
      if (performance.now() - started > boundMsArg) {
        return { ms: performance.now() - started, stats, reached: false };
      }
      await sleep(100);
    }
  }

  public async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) {
      return;
    }
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.send({ kind: 'stop' });
    const forced = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(forced);
  }
}
