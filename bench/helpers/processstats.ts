import * as fs from 'node:fs';

/** What the kernel says about a process (Linux `/proc`), for the benches' figures. */

/** The kernel's view of a process's memory: current and peak resident set, in bytes. */
export const memoryOf = (pidArg: number): { rss: number; peak: number } => {
  const status = fs.readFileSync(`/proc/${pidArg}/status`, 'utf8');
  const kib = (fieldArg: string): number => Number(new RegExp(`^${fieldArg}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM') };
};

/** CPU seconds (user + system) a process has used so far. */
export const cpuSecondsOf = (pidArg: number): number => {
  const stat = fs.readFileSync(`/proc/${pidArg}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the whole line, in clock ticks (100 per second on Linux).
  return (Number(fields[11]) + Number(fields[12])) / 100;
};

/** CPU seconds this process has used so far. */
export const ownCpuSeconds = (): number => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
};
