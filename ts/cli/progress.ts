import { cliIo, type ICliOutputStream } from './io.js';

/**
 * Progress of an operation on stderr: a bar redrawn in place on a terminal (bytes, percent, rate,
 * phase, elapsed time), plain lines otherwise (one per phase change, then at most one a second
 * while bytes move, and a last one when it ends). stdout stays the answer.
 */

export interface IProgressSample {
  phase: string;
  bytesDone: number;
  bytesTotal: number | null;
}

export const formatBytes = (bytesArg: number): string => {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytesArg;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value >= 100 ? 0 : 1)} ${units[unit]}`;
};

export const formatRate = (bytesPerSecondArg: number | null): string =>
  (bytesPerSecondArg === null ? '-' : `${formatBytes(Math.round(bytesPerSecondArg))}/s`);

export const formatElapsed = (msArg: number): string => {
  const seconds = Math.max(0, Math.floor(msArg / 1000));
  return seconds < 60 ? `${seconds}s` : `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
};

/** Bytes per second over the last few seconds of samples (null until two samples differ in time). */
export class RateMeter {
  private samples: Array<{ at: number; bytes: number }> = [];

  constructor(private readonly windowMs = 5000) {}

  public add(atArg: number, bytesArg: number): void {
    const last = this.samples.at(-1);
    if (last && bytesArg < last.bytes) {
      this.samples = [];
    }
    this.samples.push({ at: atArg, bytes: bytesArg });
    while (this.samples.length > 2 && atArg - this.samples[0].at > this.windowMs) {
      this.samples.shift();
    }
  }

  public rate(): number | null {
    const first = this.samples[0];
    const last = this.samples.at(-1);
    if (!first || !last || last.at - first.at < 200) {
      return null;
    }
    return ((last.bytes - first.bytes) * 1000) / (last.at - first.at);
  }
}

export interface IProgressView {
  update(sampleArg: IProgressSample): void;
  /**
   * Ends the view: the bar's line is finished with `finalArg`, or a last plain line is written.
   * `endedAtArg` is when the work ended (the server's clock, as the start given to the view);
   * without it the work ends now.
   */
  finish(finalArg: string, endedAtArg?: number): void;
  /** Takes the bar off the line (before a note is written), it is drawn again on the next update. */
  clear(): void;
}

const percentOf = (sampleArg: IProgressSample): number | null =>
  (sampleArg.bytesTotal && sampleArg.bytesTotal > 0 ? Math.min(100, Math.floor((sampleArg.bytesDone * 100) / sampleArg.bytesTotal)) : null);

/** `transfer 1.0 MiB of 2.0 MiB (50%) at 3.1 MiB/s` */
export const describeSample = (sampleArg: IProgressSample, rateArg: number | null): string => {
  const percent = percentOf(sampleArg);
  const bytes = sampleArg.bytesTotal !== null
    ? `${formatBytes(sampleArg.bytesDone)} of ${formatBytes(sampleArg.bytesTotal)}${percent !== null ? ` (${percent}%)` : ''}`
    : `${formatBytes(sampleArg.bytesDone)}`;
  return `${sampleArg.phase} ${bytes}${rateArg !== null ? ` at ${formatRate(rateArg)}` : ''}`;
};

/**
 * `startedAtArg` is when the work began (an operation's `startedAt`): a view opened on work that
 * is already running or over counts its time from there, not from when someone started watching.
 */
export const createProgressView = (
  labelArg: string,
  streamArg: ICliOutputStream = cliIo().stderr,
  nowArg: () => number = Date.now,
  startedAtArg?: number,
): IProgressView => {
  const started = startedAtArg ?? nowArg();
  const meter = new RateMeter();
  let last: IProgressSample | null = null;
  if (!streamArg.isTTY) {
    let lastPhase = '';
    let lastLineAt = 0;
    let lastBytes = -1;
    return {
      update(sampleArg) {
        meter.add(nowArg(), sampleArg.bytesDone);
        last = sampleArg;
        const now = nowArg();
        const phaseChanged = sampleArg.phase !== lastPhase;
        if (phaseChanged || (sampleArg.bytesDone !== lastBytes && now - lastLineAt >= 1000)) {
          streamArg.write(`${labelArg}: ${describeSample(sampleArg, meter.rate())}\n`);
          lastPhase = sampleArg.phase;
          lastLineAt = now;
          lastBytes = sampleArg.bytesDone;
        }
      },
      finish(finalArg, endedAtArg) {
        streamArg.write(`${labelArg}: ${finalArg}${last ? ` (${formatBytes(last.bytesDone)} in ${formatElapsed((endedAtArg ?? nowArg()) - started)})` : ''}\n`);
      },
      clear() {},
    };
  }
  let drawn = false;
  const draw = (): void => {
    if (!last) {
      return;
    }
    const columns = Math.max(40, streamArg.columns || 80);
    const percent = percentOf(last);
    const rate = meter.rate();
    const bytes = last.bytesTotal !== null ? `${formatBytes(last.bytesDone)}/${formatBytes(last.bytesTotal)}` : formatBytes(last.bytesDone);
    const tail = ` ${percent !== null ? `${String(percent).padStart(3)}%` : '  -%'} ${bytes} ${formatRate(rate)} ${last.phase} ${formatElapsed(nowArg() - started)}`;
    const barWidth = Math.max(10, Math.min(30, columns - labelArg.length - tail.length - 4));
    const filled = percent !== null ? Math.round((barWidth * percent) / 100) : 0;
    const bar = `[${'#'.repeat(filled)}${'-'.repeat(barWidth - filled)}]`;
    const line = `${labelArg} ${bar}${tail}`;
    streamArg.write(`\r\u001b[2K${line.slice(0, columns - 1)}`);
    drawn = true;
  };
  const timer = setInterval(draw, 500);
  timer.unref();
  return {
    update(sampleArg) {
      meter.add(nowArg(), sampleArg.bytesDone);
      last = sampleArg;
      draw();
    },
    finish(finalArg) {
      clearInterval(timer);
      draw();
      // The bar above already says the bytes and the time.
      streamArg.write(`${drawn ? '\n' : ''}${labelArg}: ${finalArg}\n`);
      drawn = false;
    },
    clear() {
      if (drawn) {
        streamArg.write('\r\u001b[2K');
        drawn = false;
      }
    },
  };
};
