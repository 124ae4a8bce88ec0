import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { writeFully } from './durablefiles.js';

/**
 * One Cloudly per data directory: two processes replaying and appending one journal would
 * destroy it. The lock file holds the owner's pid and its start time (from /proc, so a recycled
 * pid is not mistaken for the owner); a lock whose owner is gone (kill -9) or a zombie (ended, not
 * yet reaped by its parent) is stale and taken over.
 */

export const lockFileName = 'cloudly.lock';
export const releasedLockFileName = 'cloudly.lock.released';

export class DataDirectoryLockedError extends Error {
  constructor(public readonly dataDir: string, public readonly ownerPid: number) {
    super(`data directory ${dataDir} is in use by another Cloudly (pid ${ownerPid}, lock file ${path.join(dataDir, lockFileName)}); `
      + 'stop that one first, or give this one its own CLOUDLY_DATA_DIR');
    this.name = 'DataDirectoryLockedError';
  }
}

interface ILockContents {
  pid: number;
  startTime: string | null;
}

/** The kernel's start time of a process (field 22 of /proc/<pid>/stat), or null where unknown. */
const processStartTime = (pidArg: number): string | null => {
  try {
    const stat = fs.readFileSync(`/proc/${pidArg}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
};

/**
 * The kernel's state letter of a process (field 3 of /proc/<pid>/stat), or null where unknown.
 * The command name before it is in parentheses and may itself hold spaces and parentheses, so the
 * fields are counted from the last ')'.
 */
export const processState = (pidArg: number): string | null => {
  try {
    const stat = fs.readFileSync(`/proc/${pidArg}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] || null;
  } catch {
    return null;
  }
};

const ownerIsAlive = (ownerArg: ILockContents): boolean => {
  try {
    process.kill(ownerArg.pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A zombie (Z) or dying (X) process has ended and holds nothing; it only waits for its parent
  // to collect its exit status, which a killed Cloudly whose parent died first may wait long for.
  const state = processState(ownerArg.pid);
  if (state === 'Z' || state === 'X') {
    return false;
  }
  const startTime = processStartTime(ownerArg.pid);
  return ownerArg.startTime === null || startTime === null || startTime === ownerArg.startTime;
};

const parseLock = (textArg: string): ILockContents | null => {
  try {
    const parsed = JSON.parse(textArg) as Partial<ILockContents>;
    return typeof parsed.pid === 'number' ? { pid: parsed.pid, startTime: parsed.startTime ?? null } : null;
  } catch {
    return null;
  }
};

/** No space or quota left on the device. */
const isNoSpaceError = (errorArg: unknown): boolean =>
  ['ENOSPC', 'EDQUOT'].includes((errorArg as NodeJS.ErrnoException | null)?.code ?? '');

export class DataDirectoryLock {
  private held = false;
  /** The lock was made from the file a graceful stop left (on a full disk). */
  private heldFromReleased = false;

  constructor(private readonly dataDir: string) {}

  public get lockPath(): string {
    return path.join(this.dataDir, lockFileName);
  }

  /** What a graceful stop leaves of the lock: never a lock, only a block to reuse on a full disk. */
  public get releasedPath(): string {
    return path.join(this.dataDir, releasedLockFileName);
  }

  /** Takes the lock or throws DataDirectoryLockedError; a stale lock is replaced. */
  public async acquire(): Promise<{ replacedStalePid: number | null }> {
    const contents: ILockContents = { pid: process.pid, startTime: processStartTime(process.pid) };
    const text = `${JSON.stringify(contents)}\n`;
    let replacedStalePid: number | null = null;
    for (let attempt = 0; attempt < 3; attempt++) {
      // Written under a private name, then linked into place: the lock appears complete or not at all.
      const temporary = `${this.lockPath}.${process.pid}.tmp`;
      try {
        await fsp.writeFile(temporary, text, { mode: 0o600 });
      } catch (error) {
        await fsp.rm(temporary, { force: true });
        if (!isNoSpaceError(error)) {
          throw error;
        }
        // A full disk (the usual state after a crash on a full disk): a new file gets no block,
        // but the stale lock's own block can be rewritten in place.
        const takenOver = await this.takeOverStaleLockInPlace(temporary, text);
        if (takenOver === 'retry') {
          continue;
        }
        if (takenOver === null) {
          throw error;
        }
        return takenOver;
      }
      try {
        await fsp.link(temporary, this.lockPath);
        this.held = true;
        return { replacedStalePid };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
          throw error;
        }
      } finally {
        await fsp.rm(temporary, { force: true });
      }
      const existingText = await fsp.readFile(this.lockPath, 'utf8').catch(() => '');
      const existing = parseLock(existingText);
      if (existing && existing.pid !== process.pid && ownerIsAlive(existing)) {
        throw new DataDirectoryLockedError(this.dataDir, existing.pid);
      }
      // Stale (its owner is gone) or unreadable (a crash while it was being replaced): remove it,
      // unless another starter replaced it meanwhile.
      if ((await fsp.readFile(this.lockPath, 'utf8').catch(() => '')) === existingText) {
        await fsp.rm(this.lockPath, { force: true });
        replacedStalePid = existing?.pid ?? null;
      }
    }
    throw new Error(`could not take the lock ${this.lockPath}`);
  }

  /**
   * Takes over a stale lock, or the file a graceful stop left, without allocating space: the file
   * is first renamed to this starter's private name (of racing starters only one rename succeeds),
   * rewritten in place with this owner, and linked under the lock's name. Returns the stale owner's
   * pid (null when unreadable or released), 'retry' when another starter moved the file meanwhile,
   * and null when there is no file to reuse or it cannot be rewritten.
   */
  private async takeOverStaleLockInPlace(temporaryArg: string, textArg: string): Promise<{ replacedStalePid: number | null } | 'retry' | null> {
    let source = this.lockPath;
    let existingText = await fsp.readFile(source, 'utf8').catch(() => null);
    const existing = existingText === null ? null : parseLock(existingText);
    if (existing && existing.pid !== process.pid && ownerIsAlive(existing)) {
      throw new DataDirectoryLockedError(this.dataDir, existing.pid);
    }
    if (existingText === null) {
      // No lock at all (a graceful stop): the block the stop left is reused.
      source = this.releasedPath;
      existingText = await fsp.readFile(source, 'utf8').catch(() => null);
      if (existingText === null) {
        return null;
      }
    }
    try {
      await fsp.rename(source, temporaryArg);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        return 'retry';
      }
      throw error;
    }
    if ((await fsp.readFile(temporaryArg, 'utf8').catch(() => '')) !== existingText) {
      // Another starter replaced the file between the read and the rename: put it back.
      await fsp.link(temporaryArg, source).catch(() => undefined);
      await fsp.rm(temporaryArg, { force: true });
      return 'retry';
    }
    const handle = await fsp.open(temporaryArg, 'r+');
    try {
      await writeFully(handle, Buffer.from(textArg, 'utf8'), 0);
      await handle.truncate(Buffer.byteLength(textArg));
      await handle.sync();
    } catch {
      await handle.close().catch(() => undefined);
      // Could not be rewritten (a file system that allocates on every write): the file goes
      // back under its name, as it was.
      await fsp.rename(temporaryArg, source).catch(() => undefined);
      return null;
    }
    await handle.close();
    try {
      await fsp.link(temporaryArg, this.lockPath);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') {
        return 'retry';
      }
      throw error;
    } finally {
      await fsp.rm(temporaryArg, { force: true });
    }
    this.held = true;
    this.heldFromReleased = source === this.releasedPath;
    return { replacedStalePid: source === this.lockPath ? existing?.pid ?? null : null };
  }

  /**
   * Releases the lock. The file is not removed but renamed to `cloudly.lock.released`, so its block
   * stays with the data directory: a start on a disk that filled up meanwhile takes it over in
   * place (a new lock file would get no block). A refused start passes `keepBlockArg` false: it
   * leaves the files as it found them (a released lock it took over is released again).
   */
  public async release(keepBlockArg = true): Promise<void> {
    if (this.held) {
      this.held = false;
      if (keepBlockArg || this.heldFromReleased) {
        await fsp.rename(this.lockPath, this.releasedPath).catch(() => fsp.rm(this.lockPath, { force: true }));
      } else {
        await fsp.rm(this.lockPath, { force: true });
      }
    }
  }
}
