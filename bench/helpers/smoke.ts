import * as fsp from 'node:fs/promises';
import * as path from 'node:path';

/**
 * `npm run bench -- --smoke` (bench/run.ts sets CLOUDLY_BENCH_SMOKE=1): every bench runs with tiny
 * sizes, so CI proves each one still runs to its end in seconds. Smoke figures mean nothing and
 * are written nowhere (no bench/results file is touched).
 */
// `--smoke` on a bench's own command line too: a bench run alone with it once took it for nothing
// and started its full size (the fleet bench: 10,000 relays).
export const smoke = process.env.CLOUDLY_BENCH_SMOKE === '1' || process.argv.slice(2).includes('--smoke');

/** The full size, or the smoke size in a smoke run. */
export const sized = <T>(fullArg: T, smokeArg: T): T => (smoke ? smokeArg : fullArg);

/**
 * Per-socket request limits for a bench's own Cloudly: the limits guard against a hostile peer;
 * a bench's load is the point, so they are set out of its way.
 */
export const benchSocketLimits = { socketRequestsPerSecond: 1_000_000, socketPendingRequests: 100_000 } as const;

/** Prints a bench's results and, unless this is a smoke run, keeps them as bench/results/<fileName>. */
export const reportResults = async (fileNameArg: string, linesArg: string[]): Promise<void> => {
  process.stdout.write(`${linesArg.join('\n')}\n`);
  if (!smoke) {
    const directory = path.join(import.meta.dirname, '..', 'results');
    await fsp.mkdir(directory, { recursive: true });
    await fsp.writeFile(path.join(directory, fileNameArg), linesArg.join('\n'));
  }
};
