/**
 * The embedded database (CongoDB on Cloudly's journaled storage) as a process of its own, for
 * development and tests: several Cloudly instances share it through MONGODB_URL. It is a
 * single-node database for development; production runs a MongoDB replica set
 * (docs/multi-instance.md).
 *
 *   node --import tsx scripts/dev-database.ts [--data-dir ./.nogit/dev-database]
 *
 * It listens on a Unix socket inside its data directory (0600; no TCP port), keeps the data
 * directory's lock (a second database process on the same directory is refused), journals every
 * write before it is answered and compacts on its own. It also keeps the key-encryption key every
 * instance must share (CLOUDLY_SECRETS_KEY_FILE), generated on first start.
 *
 * Once it is up it prints one line of JSON to stdout:
 *   {"ready":true,"mongoDbUrl":"mongodb://...","secretsKeyFile":"...","dataDir":"...","pid":123}
 * Logs go to stderr. SIGTERM or SIGINT stops it gracefully (a final compaction).
 */
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { CloudlyDatabase } from '../ts/core/database.js';
import { createLogger } from '../ts/core/logger.js';

/** The URL of an embedded database listening on a Unix socket (as the database builds it for itself). */
export const devDatabaseUrl = (socketPathArg: string): string =>
  `mongodb://${encodeURIComponent(socketPathArg)}/?serverMonitoringMode=poll&directConnection=true`;

const argumentValue = (nameArg: string): string | null => {
  const index = process.argv.indexOf(nameArg);
  return index >= 0 && index + 1 < process.argv.length ? process.argv[index + 1] : null;
};

/** The shared key-encryption key: created once (0600) beside the database, then only read. */
const ensureSharedKeyFile = async (dataDirArg: string): Promise<string> => {
  const file = path.join(dataDirArg, 'keys', 'shared-secrets-key-encryption-key');
  await fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    const handle = await fsp.open(file, 'wx', 0o600);
    try {
      await handle.writeFile(`${randomBytes(32).toString('hex')}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw error;
    }
  }
  return file;
};

const main = async (): Promise<void> => {
  const dataDir = path.resolve(argumentValue('--data-dir') ?? process.env.CLOUDLY_DEV_DATABASE_DIR ?? './.nogit/dev-database');
  const logger = createLogger(process.env.CLOUDLY_LOG_LEVEL ?? 'info', process.stderr);
  const database = new CloudlyDatabase({
    mongoDbUrl: null,
    mongoDbName: process.env.MONGODB_NAME ?? 'cloudly',
    dataDir,
    logger,
  });
  await database.start();
  const secretsKeyFile = await ensureSharedKeyFile(dataDir);
  const mongoDbUrl = devDatabaseUrl(database.socketPath!);
  await fsp.writeFile(path.join(dataDir, 'mongodb-url'), `${mongoDbUrl}\n`, { mode: 0o600 });
  process.stdout.write(`${JSON.stringify({ ready: true, mongoDbUrl, secretsKeyFile, dataDir, pid: process.pid })}\n`);
  let stopping = false;
  const stop = (signalArg: string): void => {
    if (stopping) {
      return;
    }
    stopping = true;
    logger.info({ signal: signalArg }, 'dev database stopping');
    database.stop().then(() => process.exit(0), (error: unknown) => {
      logger.error({ err: error }, 'dev database stop failed');
      process.exit(1);
    });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // Keeps the process up (the database's own handles are unref'd where they can be).
  setInterval(() => undefined, 1 << 30);
};

main().catch((error: unknown) => {
  process.stderr.write(`dev database failed to start: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
