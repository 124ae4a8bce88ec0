import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Cloudly } from '../../ts/classes.cloudly.js';
import { CloudlyAdminClient } from '../../ts/client/admin.js';
import type { ICloudlyConfig } from '../../ts/config.js';
import { benchSocketLimits, sized } from './smoke.js';

/** Pieces the request benchmarks share: a real Cloudly with a logged-in admin socket, and timers. */

export const benchAdminPassword = 'bench-admin-password-0123';

export interface IBenchCloudly {
  cloudly: Cloudly;
  /** Logged in as the first administrator, on the admin socket. */
  admin: CloudlyAdminClient;
  stop(): Promise<void>;
}

/** A real Cloudly on a free loopback port with the embedded database in a fresh data directory; no socket rate limit. */
export const startBenchCloudly = async (nameArg: string, configArg: Partial<ICloudlyConfig> = {}): Promise<IBenchCloudly> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), `cloudly-bench-${nameArg}-`));
  // CLOUDLY_EMBEDDED_DIRECT_READS=0: every store read through the database protocol, the baseline of reads in the process.
  const embeddedDirectReads = process.env.CLOUDLY_EMBEDDED_DIRECT_READS !== '0';
  // CLOUDLY_EMBEDDED_DIRECT_WRITES=0: every store write through the database protocol, the baseline of writes in the process.
  const embeddedDirectWrites = process.env.CLOUDLY_EMBEDDED_DIRECT_WRITES !== '0';
  const cloudly = new Cloudly({
    config: { port: 0, mongoDbUrl: null, dataDir, adminPassword: benchAdminPassword, logLevel: 'silent', embeddedDirectReads, embeddedDirectWrites, ...benchSocketLimits, ...configArg },
  });
  await cloudly.start();
  const admin = new CloudlyAdminClient(cloudly.baseUrl);
  await admin.login('admin', benchAdminPassword);
  await admin.connectSocket();
  return {
    cloudly,
    admin,
    async stop() {
      admin.close();
      await cloudly.stop();
      await fsp.rm(dataDir, { recursive: true, force: true });
    },
  };
};

/** Runs `fnArg` `countArg` times one after another; answers p50, p90 and mean in ms. */
export const timeEach = async (countArg: number, fnArg: () => Promise<unknown>): Promise<{ p50: number; p90: number; mean: number }> => {
  const samples: number[] = [];
  for (let index = 0; index < countArg; index++) {
    const started = performance.now();
    await fnArg();
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return {
    p50: samples[Math.floor(samples.length / 2)],
    p90: samples[Math.floor(samples.length * 0.9)],
    mean: samples.reduce((sum, value) => sum + value, 0) / samples.length,
  };
};

/** Runs `fnArg(0 … countArg-1)` with `widthArg` calls in flight. */
export const inParallel = async (countArg: number, widthArg: number, fnArg: (indexArg: number) => Promise<unknown>): Promise<void> => {
  let next = 0;
  await Promise.all(Array.from({ length: widthArg }, async () => {
    while (next < countArg) {
      await fnArg(next++);
    }
  }));
};

/** Calls per second of `opArg` with `inFlightArg` callers, for at most `budgetMsArg` or `maxOpsArg` calls. */
export const ratePerSecond = async (
  inFlightArg: number,
  opArg: (workerArg: number) => Promise<unknown>,
  budgetMsArg = 2_500,
  maxOpsArg = 20_000,
): Promise<number> => {
  let done = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: inFlightArg }, async (_, worker) => {
    while (performance.now() - started < sized(budgetMsArg, 100) && done < sized(maxOpsArg, 100)) {
      await opArg(worker);
      done++;
    }
  }));
  return done / ((performance.now() - started) / 1000);
};
