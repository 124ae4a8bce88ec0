import * as fs from 'node:fs';
import type { ICloudlyConfig } from '../config.js';

/**
 * The kernel limits a large fleet runs into (docs/multi-instance.md, "Kernel limits"): the
 * listen backlog is silently capped at `net.core.somaxconn`, and every socket is a file
 * descriptor under the process's open-files limit. Cloudly checks both once at start and says so
 * in a warning; while running, `/metrics` has `cloudly_process_open_fds` and
 * `cloudly_process_max_fds`, and refused connections by reason.
 */

export interface IKernelLimits {
  /** `net.core.somaxconn`, or null where it cannot be read (not Linux). */
  somaxconn: number | null;
  /** The soft limit on open files of this process, or null where it cannot be read. */
  openFiles: number | null;
}

/** File descriptors a Cloudly instance needs besides its sockets (database, journal, logs, libraries). */
export const baseFileDescriptors = 256;

export const readKernelLimits = (): IKernelLimits => {
  const readNumber = (fileArg: string, patternArg: RegExp): number | null => {
    try {
      const match = patternArg.exec(fs.readFileSync(fileArg, 'utf8'));
      return match ? Number(match[1]) : null;
    } catch {
      return null;
    }
  };
  return {
    somaxconn: readNumber('/proc/sys/net/core/somaxconn', /^(\d+)/),
    openFiles: readNumber('/proc/self/limits', /^Max open files\s+(\d+)/m),
  };
};

/**
 * What is below what the configuration needs: a backlog above somaxconn (the kernel uses the
 * smaller), and an open-files limit below the relays this instance may hold plus the pending
 * connections it admits. Pure: the limits are read by `readKernelLimits`.
 */
export const judgeKernelLimits = (
  configArg: Pick<ICloudlyConfig, 'listenBacklog' | 'maxRelaysPerInstance' | 'pendingConnectionsTotal'>,
  limitsArg: IKernelLimits,
): Array<{ limit: string; configured: number; kernel: number; advice: string }> => {
  const warnings: Array<{ limit: string; configured: number; kernel: number; advice: string }> = [];
  if (limitsArg.somaxconn !== null && limitsArg.somaxconn < configArg.listenBacklog) {
    warnings.push({
      limit: 'net.core.somaxconn',
      configured: configArg.listenBacklog,
      kernel: limitsArg.somaxconn,
      advice: `the listen backlog is capped at ${limitsArg.somaxconn}; raise it with sysctl -w net.core.somaxconn=${configArg.listenBacklog}`,
    });
  }
  if (limitsArg.openFiles !== null && configArg.maxRelaysPerInstance > 0) {
    const needed = configArg.maxRelaysPerInstance + configArg.pendingConnectionsTotal + baseFileDescriptors;
    if (limitsArg.openFiles < needed) {
      warnings.push({
        limit: 'open files (ulimit -n, LimitNOFILE)',
        configured: needed,
        kernel: limitsArg.openFiles,
        advice: `CLOUDLY_MAX_RELAYS_PER_INSTANCE plus CLOUDLY_PENDING_CONNECTIONS_TOTAL plus ${baseFileDescriptors} descriptors are needed; raise the limit to at least ${needed}`,
      });
    }
  }
  return warnings;
};
