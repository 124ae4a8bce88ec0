import * as fs from 'node:fs/promises';
import { injectedError, noStorageFaults, type StorageFaults, type TStorageFaultStep } from './storagefaults.js';

/**
 * The steps every durable write here is made of: all of a file's bytes written (a write may
 * store fewer bytes than it was given, and says so only in its result), on the device before the
 * file is renamed into place, and the directory's entry on the device after.
 */

/** Raised when the file system keeps accepting no bytes; treated like a full disk. */
export const noProgressError = (pathArg: string): NodeJS.ErrnoException =>
  Object.assign(new Error(`ENOSPC: the file system accepted no bytes of a write to ${pathArg}`), { code: 'ENOSPC', syscall: 'write', path: pathArg });

/**
 * Writes every byte of `bytesArg` at `positionArg`, continuing after each short write, and throws
 * when a write fails or stores nothing. `faultsArg`/`stepArg` let a test inject the faults of
 * storagefaults.ts here.
 */
export const writeFully = async (
  handleArg: fs.FileHandle,
  bytesArg: Uint8Array,
  positionArg: number,
  faultsArg: StorageFaults = noStorageFaults,
  stepArg: TStorageFaultStep | null = null,
): Promise<void> => {
  let done = 0;
  while (done < bytesArg.byteLength) {
    let length = bytesArg.byteLength - done;
    let claimed: number | null = null;
    if (stepArg) {
      const fault = faultsArg.at(stepArg);
      if (fault === 'ENOSPC' || fault === 'EIO') {
        throw injectedError(fault, 'write', stepArg);
      }
      if (fault === 'SHORT' || fault === 'SILENT') {
        const full = length;
        length = Math.ceil(length / 2);
        claimed = fault === 'SILENT' ? full : null;
      }
    }
    const { bytesWritten } = await handleArg.write(bytesArg, done, length, positionArg + done);
    if (bytesWritten <= 0) {
      throw noProgressError(String(stepArg ?? 'file'));
    }
    done += claimed ?? bytesWritten;
  }
};

/** Writes `textArg` to `pathArg` (opened with `flagArg`, mode 0600) and fsyncs it before closing. */
export const writeFileSynced = async (pathArg: string, textArg: string, flagArg: 'w' | 'wx'): Promise<void> => {
  const handle = await fs.open(pathArg, flagArg, 0o600);
  try {
    // FileHandle.writeFile continues after short writes itself; writeFully says so explicitly.
    await writeFully(handle, Buffer.from(textArg, 'utf8'), 0);
    await handle.sync();
  } finally {
    await handle.close();
  }
};

/** Fsyncs a directory, so the entries a rename or create made in it survive a crash. */
export const syncDirectory = async (dirArg: string): Promise<void> => {
  const handle = await fs.open(dirArg, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
};
