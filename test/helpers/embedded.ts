import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { CloudlyDatabase } from '../../ts/core/database.js';
import { createLogger } from '../../ts/core/logger.js';
import { DocumentStore } from '../../ts/core/store.js';

/**
 * The embedded database alone, without a Cloudly around it: for the storage and store tests that
 * drive it directly (foundation.storageindex, foundation.batching, foundation.directread,
 * storage.memory).
 */

/** A small deterministic generator, so a failure can be replayed from its seed. */
export const seededRandom = (seedArg: number) => {
  let state = seedArg >>> 0;
  const next = (): number => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  return {
    next,
    pick: <T>(listArg: readonly T[]): T => listArg[Math.floor(next() * listArg.length)],
  };
};

/** The embedded database on `dataDirArg`, started. */
export const openEmbeddedDatabase = async (dataDirArg: string): Promise<CloudlyDatabase> => {
  const database = new CloudlyDatabase({ mongoDbUrl: null, mongoDbName: 'cloudly', dataDir: dataDirArg, logger: createLogger('error') });
  await database.start();
  return database;
};

/** A store over a fresh embedded database in a temporary directory, removed afterwards. */
export const withEmbeddedStore = async (
  prefixArg: string,
  fnArg: (storeArg: DocumentStore, databaseArg: CloudlyDatabase) => Promise<void>,
): Promise<void> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), prefixArg));
  const database = await openEmbeddedDatabase(dataDir);
  try {
    await fnArg(new DocumentStore(database), database);
  } finally {
    await database.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
};
