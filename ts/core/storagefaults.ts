import * as fs from 'node:fs';

/**
 * The fault-injecting file layer of the embedded database, for tests that kill a real Cloudly
 * child process (an in-process failpoint, failpoints.ts, cannot be armed from the parent). The
 * test names a file (CLOUDLY_TEST_JOURNAL_FAILPOINT); each step below reads it when it runs, so
 * the test arms and disarms a fault by writing or removing that file. Without the variable every
 * check is one null test.
 *
 * The file holds lines `<step>=<fault>`, e.g. `snapshot.write=ENOSPC`. The older one-word forms
 * keep their meaning: `ENOSPC` / `EIO` (journal.write), `EIO-SYNC` (journal.sync) and
 * `PAUSE-COMPACTION` (compaction waits before it replaces the snapshot).
 */

export const storageFaultSteps = [
  /** Appending a batch of records to a journal segment. */
  'journal.write',
  /** Making that batch durable (fdatasync; with O_DSYNC part of the write itself). */
  'journal.sync',
  /** Dropping a journal segment a newer snapshot made unnecessary. */
  'journal.unlink',
  /** Writing a snapshot's bytes to its temporary file. */
  'snapshot.write',
  /** fsync of the temporary snapshot. */
  'snapshot.sync',
  /** Hard-linking the current snapshot under the previous one's temporary name. */
  'snapshot.link',
  /** Renaming the temporary snapshot (or the previous one's link) into place. */
  'snapshot.rename',
] as const;

export type TStorageFaultStep = (typeof storageFaultSteps)[number];

/**
 * ENOSPC / EIO: the call fails with that code. SHORT: a write stores only the first half of its
 * bytes and says so (a nearly full file system does this). SILENT: a write stores half its bytes
 * and claims all of them (a lying device; only reading back notices).
 */
export type TStorageFault = 'ENOSPC' | 'EIO' | 'SHORT' | 'SILENT';

const legacyForms: Record<string, [TStorageFaultStep, TStorageFault]> = {
  ENOSPC: ['journal.write', 'ENOSPC'],
  EIO: ['journal.write', 'EIO'],
  'EIO-SYNC': ['journal.sync', 'EIO'],
};

export class StorageFaults {
  constructor(private readonly file: string | null) {}

  /** The whole file (trimmed), or null; for the non-fault commands such as PAUSE-COMPACTION. */
  public command(): string | null {
    if (!this.file || !fs.existsSync(this.file)) {
      return null;
    }
    try {
      return fs.readFileSync(this.file, 'utf8').trim();
    } catch {
      return null;
    }
  }

  /** The fault armed for `stepArg`, or null. */
  public at(stepArg: TStorageFaultStep): TStorageFault | null {
    if (!this.file) {
      return null;
    }
    const text = this.command();
    if (text === null) {
      return null;
    }
    for (const line of text.split('\n').map((one) => one.trim())) {
      const legacy = legacyForms[line];
      if (legacy) {
        if (legacy[0] === stepArg) {
          return legacy[1];
        }
        continue;
      }
      const [step, fault] = line.split('=');
      if (step === stepArg && ['ENOSPC', 'EIO', 'SHORT', 'SILENT'].includes(fault)) {
        return fault as TStorageFault;
      }
    }
    return null;
  }

  /** Throws the armed ENOSPC or EIO at `stepArg` (the other faults only shape writes). */
  public throwIfArmed(stepArg: TStorageFaultStep, syscallArg: string): void {
    const fault = this.at(stepArg);
    if (fault === 'ENOSPC' || fault === 'EIO') {
      throw injectedError(fault, syscallArg, stepArg);
    }
  }
}

export const injectedError = (codeArg: 'ENOSPC' | 'EIO', syscallArg: string, stepArg: string): NodeJS.ErrnoException =>
  Object.assign(new Error(`${codeArg}: injected by the test failpoint at ${stepArg}`), { code: codeArg, syscall: syscallArg });

/** No file: every check is a null test. */
export const noStorageFaults = new StorageFaults(null);
