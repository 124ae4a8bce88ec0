import * as fs from 'node:fs/promises';

/**
 * The two steps every durable write here is made of: a file's bytes on the device before it
 * is renamed into place, and the directory's entry on the device after.
 */

/** Writes `textArg` to `pathArg` (opened with `flagArg`, mode 0600) and fsyncs it before closing. */
export const writeFileSynced = async (pathArg: string, textArg: string, flagArg: 'w' | 'wx'): Promise<void> => {
  const handle = await fs.open(pathArg, flagArg, 0o600);
  try {
    await handle.writeFile(textArg, 'utf8');
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
