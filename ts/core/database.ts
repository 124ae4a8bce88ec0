import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
// Loaded first: smartdata's console lines go to Cloudly's logger from its first document on.
import './dependencylogs.js';
import { SmartdataDb } from '@push.rocks/smartdata';
import {
  MongoError,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  type Document,
} from 'mongodb';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
// Before the first query: queries share mingo's operator table instead of copying it.
import './queryengine.js';
import { DataDirectoryLock, DataDirectoryLockedError } from './datadirlock.js';
import { syncDirectory } from './durablefiles.js';
import {
  Journal,
  JournalUnavailableError,
  journalUnavailableCode,
  listSegments,
  readJournal,
  StorageDamagedError,
  storageFullCode,
  StorageFullError,
} from './journal.js';
import { JournaledStorage } from './journaledstorage.js';
import { commandFiltersOf, withCommandFilters } from './storageindex.js';
import type { TCommandRoute } from './directwrite.js';
import { readLegacySnapshotFile, readSnapshotFile, serializeSnapshot, verifySnapshotFile, writeSnapshotFile, type ISnapshotContents } from './snapshotfile.js';
import { StorageFaults } from './storagefaults.js';
import type { TCloudlyLogger } from './logger.js';

/**
 * The database Cloudly runs on: a MongoDB named by MONGODB_URL, or the embedded in-memory
 * CongoDB server. For the embedded server Cloudly keeps the data itself (docs/storage.md):
 *
 * - every change is appended to a journal and synced before the write is answered (journal.ts,
 *   hooked in as the server's storage adapter, journaledstorage.ts);
 * - compaction writes a snapshot of one point in time with the journal position it covers, and
 *   then drops the journal the snapshot before it no longer needs;
 * - start-up loads the snapshot and replays the journal after its position;
 * - the server listens only on a Unix socket inside the data directory (0700, socket 0600), and a
 *   lock file keeps a second Cloudly off the same directory.
 */

export const snapshotFileName = 'embedded-db.snapshot';
export const previousSnapshotFileName = 'embedded-db.snapshot.previous';
/** The whole-database Extended JSON snapshot written before the journal; read once to migrate. */
export const legacySnapshotFileName = 'embedded-db.snapshot.ejson';
export const socketFileName = 'embedded-db.sock';

/** Kept under its old name for callers that catch it: a damaged snapshot or journal. */
export { StorageDamagedError as SnapshotDamagedError, StorageDamagedError, DataDirectoryLockedError };

export const findFreePort = async (): Promise<number> => new Promise((resolve, reject) => {
  const server = net.createServer();
  server.once('error', reject);
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
  });
});

/**
 * True for a failure that means "the database cannot be reached or cannot make this durable
 * right now": the caller should retry, and is answered `unavailable`, not `internal`.
 */
export const isDatabaseUnavailableError = (errorArg: unknown): boolean => {
  if (errorArg instanceof JournalUnavailableError || isStorageFullError(errorArg)) {
    return true;
  }
  if (errorArg instanceof MongoServerSelectionError || errorArg instanceof MongoNetworkError
    || errorArg instanceof MongoTopologyClosedError || errorArg instanceof MongoNotConnectedError) {
    return true;
  }
  if (errorArg instanceof MongoError) {
    const { code } = errorArg as MongoError & { code?: unknown };
    return code === journalUnavailableCode || errorArg.hasErrorLabel('RetryableWriteError')
      || errorArg.name === 'MongoPoolClearedError';
  }
  return false;
};

/** True for a write the embedded database refused because its disk is full (`storage-full`). */
export const isStorageFullError = (errorArg: unknown): boolean => {
  if (errorArg instanceof StorageFullError) {
    return true;
  }
  return errorArg instanceof MongoError && (errorArg as MongoError & { code?: unknown }).code === storageFullCode;
};

export interface ICloudlyDatabaseOptions {
  mongoDbUrl: string | null;
  mongoDbName: string;
  dataDir: string;
  logger: TCloudlyLogger;
  /** Deprecated and ignored: there is no snapshot window any more (every write is journaled). */
  snapshotDebounceMs?: number;
  /** Compaction starts once this many journal bytes were written since the last one. */
  compactBytes?: number;
  /** ... or once this long has passed with anything journaled. */
  compactIntervalMs?: number;
  /** How long a call waits for an unreachable MongoDB before it is answered `unavailable`. */
  databaseTimeoutMs?: number;
  /** The first pause before a failed compaction is tried again (doubling up to 5 minutes). */
  compactRetryMs?: number;
  /** On a full disk, how often a probe checks whether the disk takes writes again. */
  storageProbeMs?: number;
  /** Test-only: see IJournalOptions.failpointFile. */
  journalFailpointFile?: string | null;
  /** Bench-only: false runs the embedded database without a journal (nothing is durable). */
  journal?: boolean;
}

const defaultCompactBytes = 64 * 1024 * 1024;
const defaultCompactIntervalMs = 3_600_000;
/** The first retry of a failed compaction; each further failure doubles it, up to the maximum. */
const defaultCompactRetryMs = 5_000;
const compactRetryMaximumMs = 300_000;
const defaultStorageProbeMs = 2_000;
const defaultDatabaseTimeoutMs = 2_000;
/** `/readyz` answers within about this long, whatever the database does. */
const readinessTimeoutMs = 800;
/** Commands that change nothing and answer the driver's monitoring; they never wait for the journal. */
const handshakeCommands = new Set(['hello', 'ismaster', 'isMaster']);
/**
 * Commands that only read. When the journal batch they waited for was refused (a full disk), its
 * writes were rolled back: such a read is answered again, so it never fails for another caller's
 * refused write (docs/storage.md, "Read-only on a full disk").
 */
const readCommands = new Set(['find', 'getMore', 'aggregate', 'count', 'countDocuments', 'distinct', 'listCollections', 'listIndexes', 'listDatabases', 'dbStats', 'collStats', 'ping']);
/** How often a read is answered again after a concurrent write's batch was refused. */
const readRetriesAfterRefusedBatch = 3;
/** Unix socket paths are limited to 108 bytes; beyond this the socket goes to a private temp dir. */
const maximumSocketPathBytes = 100;

export class CloudlyDatabase {
  public smartdataDb!: SmartdataDb;
  public readonly embedded: boolean;
  public journal: Journal | null = null;
  public storage: JournaledStorage | null = null;
  /** The journal position the current snapshot covers. */
  public snapshotLsn = 0;
  /** Count of snapshots written (compactions), for tests and the benchmark. */
  public snapshotsWritten = 0;
  /** What the last start recovered and how long each step took (embedded database only). */
  public recovery: Record<string, number> | null = null;
  /** Where the embedded server listens (a Unix socket path). */
  public socketPath: string | null = null;
  private congoServer: congodb.CongoServer | null = null;
  private readonly lock: DataDirectoryLock;
  private compacting: Promise<void> | null = null;
  private compactTimer: NodeJS.Timeout | null = null;
  private compactRetryTimer: NodeJS.Timeout | null = null;
  private storageProbeTimer: NodeJS.Timeout | null = null;
  private probing = false;
  /** Failures in a row; the retry pause doubles with each. */
  private compactionFailures = 0;
  /** Compactions that failed (each left the files recovery needs as they were), for tests and /metrics. */
  public compactionsFailed = 0;
  /** How long reading the last snapshot back took, in ms. */
  public lastVerifyMs = 0;
  private readonly faults: StorageFaults;
  private privateSocketDir: string | null = null;
  private closed = false;

  constructor(private readonly options: ICloudlyDatabaseOptions) {
    this.embedded = options.mongoDbUrl === null;
    this.lock = new DataDirectoryLock(options.dataDir);
    this.faults = new StorageFaults(options.journalFailpointFile ?? null);
  }

  public get snapshotPath(): string {
    return path.join(this.options.dataDir, snapshotFileName);
  }

  public get previousSnapshotPath(): string {
    return path.join(this.options.dataDir, previousSnapshotFileName);
  }

  public async start(): Promise<void> {
    let url = this.options.mongoDbUrl;
    if (this.embedded) {
      url = await this.startEmbedded();
    }
    // smartdata passes serverSelectionTimeoutMS to the driver (its type does not list it): a
    // MongoDB that is gone fails a call within it instead of the driver's 30 s default.
    const descriptor = {
      mongoDbUrl: url,
      mongoDbName: this.options.mongoDbName,
      serverSelectionTimeoutMS: this.options.databaseTimeoutMs ?? defaultDatabaseTimeoutMs,
    };
    this.smartdataDb = new SmartdataDb(descriptor as ConstructorParameters<typeof SmartdataDb>[0]);
    await this.smartdataDb.init();
    // /metrics counts database commands (cloudly_database_commands_total): what a relay's report
    // or reconnect costs the database is a fleet's capacity figure. Every command an operation
    // sends takes a connection from the pool for itself, and the pool reports each checkout
    // whatever the options, so the count comes from there. The driver's command monitoring
    // (`monitorCommands`) would count the same, but it decodes every reply a second time into a
    // plain object for its event, a reply the caller has already read lazily
    // (bench/dbmonitoring.bench.ts measures what that costs a read).
    const client = (this.smartdataDb as unknown as { mongoDbClient?: { on(eventArg: 'connectionCheckedOut', listenerArg: () => void): void } }).mongoDbClient;
    client?.on('connectionCheckedOut', () => {
      this.commandsStarted++;
    });
  }

  /** Database commands this instance has sent since it started (one per connection checkout, and one per write in the process). */
  public commandsStarted = 0;

  /** The database's name (MONGODB_NAME). */
  public get name(): string {
    return this.options.mongoDbName;
  }

  /**
   * The embedded server's storage while it serves (for reads in the process, directread.ts); null
   * with MONGODB_URL, before the start and once stopped.
   */
  public get servingStorage(): JournaledStorage | null {
    return this.embedded && !this.closed ? this.storage : null;
  }

  /**
   * The embedded server's command router while it serves, as its socket uses it: every answer
   * waits for the journal (for writes in the process, directwrite.ts); null as `servingStorage`.
   */
  public get servingRoute(): TCommandRoute | null {
    return this.embedded && !this.closed && this.congoServer ? this.commandRoute : null;
  }

  private commandRoute: TCommandRoute | null = null;

  public get mongoDb() {
    return this.smartdataDb.mongoDb;
  }

  /** Pings the database; false when it does not answer within a second or cannot write. */
  public async isReachable(): Promise<boolean> {
    if (this.journal?.failure) {
      return false;
    }
    let timer: NodeJS.Timeout | undefined;
    try {
      const ping = this.smartdataDb.mongoDb.command({ ping: 1 }).then(() => true, () => false);
      const timeout = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), readinessTimeoutMs);
      });
      return await Promise.race([ping, timeout]);
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * True while the embedded database's disk is full: reads are served, writes refused
   * `storage-full` until a write or a probe is stored again.
   */
  public get storageReadOnly(): boolean {
    return this.journal?.storageFullSince != null;
  }

  private readonly storageWritableListeners: Array<() => void> = [];

  /** Calls `listenerArg` each time a full disk takes writes again. */
  public onStorageWritable(listenerArg: () => void): void {
    this.storageWritableListeners.push(listenerArg);
  }

  /** How long a caller refused `storage-full` should wait before trying again: the probe interval. */
  public get storageProbeMs(): number {
    return this.options.storageProbeMs ?? defaultStorageProbeMs;
  }

  /** Resolves once every write answered so far, and every one in flight, is on disk. */
  public async flushSnapshot(): Promise<void> {
    await this.journal?.whenDurable();
  }

  /**
   * Compaction: a snapshot of one point in time, written atomically, after which the journal
   * older than the previous snapshot is dropped. One at a time; a second call joins the first.
   */
  public compact(): Promise<void> {
    if (!this.embedded || !this.journal || !this.storage) {
      return Promise.resolve();
    }
    if (!this.compacting) {
      this.compacting = this.compactOnce().catch((error: unknown) => {
        this.scheduleCompactionRetry();
        throw error;
      }).finally(() => {
        this.compacting = null;
      });
    }
    return this.compacting;
  }

  /**
   * A consistent copy of the whole embedded database, for `cloudly snapshot save`: captured at one
   * journal position exactly as compaction captures it (synchronously, once everything up to it
   * is durable), then serialised in snapshot frames to `sinkArg` while writes go on. `onStartArg`
   * learns the position and document count before the first byte.
   */
  public async exportSnapshot(
    sinkArg: (chunkArg: Buffer) => Promise<void>,
    onStartArg: (infoArg: { lsn: number; documents: number }) => void,
  ): Promise<{ lsn: number; documents: number; frames: number; bytes: number }> {
    const journal = this.journal;
    const storage = this.storage;
    if (!this.embedded || !journal || !storage) {
      throw new Error('only the embedded database can be saved this way; with MongoDB use mongodump (docs/storage.md)');
    }
    const rollbacksBefore = journal.rollbacks;
    const lsn = journal.lastAppendedLsn;
    const captured = storage.capture();
    await journal.whenDurable();
    if (journal.rollbacks !== rollbacksBefore) {
      throw new JournalUnavailableError('a journal write was refused while the snapshot was captured; try again');
    }
    onStartArg({ lsn, documents: captured.reduce((sum, collection) => sum + collection.docs.length, 0) });
    const written = await serializeSnapshot(lsn, captured, sinkArg);
    return { lsn, ...written };
  }

  public async stop(): Promise<void> {
    if (this.closed) {
      return;
    }
    this.closed = true;
    if (this.compactTimer) {
      clearInterval(this.compactTimer);
      this.compactTimer = null;
    }
    if (this.compactRetryTimer) {
      clearTimeout(this.compactRetryTimer);
      this.compactRetryTimer = null;
    }
    if (this.storageProbeTimer) {
      clearInterval(this.storageProbeTimer);
      this.storageProbeTimer = null;
    }
    try {
      await this.compacting?.catch(() => undefined);
      if (this.journal && this.storage && !this.journal.failure && this.journal.lastAppendedLsn > this.snapshotLsn) {
        // Not needed for durability; it only makes the next start replay less.
        await this.compact();
      }
    } catch (error) {
      this.options.logger.error({ err: error }, 'final embedded database compaction failed; the journal keeps every write');
    } finally {
      await this.smartdataDb?.close().catch(() => undefined);
      if (this.congoServer) {
        await this.congoServer.stop().catch(() => undefined);
        this.congoServer = null;
      }
      await this.journal?.close();
      if (this.socketPath) {
        await fsp.rm(this.socketPath, { force: true });
      }
      if (this.privateSocketDir) {
        await fsp.rm(this.privateSocketDir, { recursive: true, force: true });
      }
      await this.lock.release().catch(() => undefined);
    }
  }

  // ------------------------------------------------------------------ embedded start-up

  private async startEmbedded(): Promise<string> {
    const { dataDir, logger } = this.options;
    await fsp.mkdir(dataDir, { recursive: true, mode: 0o700 });
    await this.restrictDataDir();
    await this.lock.acquire().then(({ replacedStalePid }) => {
      if (replacedStalePid !== null) {
        logger.warn({ stalePid: replacedStalePid }, 'replaced the lock of a Cloudly that is no longer running');
      }
    });
    if (this.options.snapshotDebounceMs !== undefined && process.env.CLOUDLY_SNAPSHOT_DEBOUNCE_MS) {
      logger.warn('CLOUDLY_SNAPSHOT_DEBOUNCE_MS is ignored: every write is journaled before it is answered');
    }
    try {
      // Everything is read and checked before anything is changed, so a refused start leaves
      // every file as it was.
      const readStarted = Date.now();
      const snapshot = await this.readNewestSnapshot();
      const snapshotReadMs = Date.now() - readStarted;
      const journalState = await readJournal(dataDir, snapshot?.lsn ?? 0);
      const journalReadMs = Date.now() - readStarted - snapshotReadMs;
      const journal = new Journal({
        dir: dataDir,
        logger,
        nextLsn: journalState.lastLsn + 1,
        failpointFile: this.options.journalFailpointFile ?? null,
        disabled: this.options.journal === false,
        onStorageWritable: () => {
          for (const listener of this.storageWritableListeners) {
            listener();
          }
        },
        onDurable: (bytesArg) => {
          if (bytesArg >= (this.options.compactBytes ?? defaultCompactBytes) && !this.compacting && !this.closed) {
            this.compact().catch((error: unknown) => logger.error({ err: error }, 'embedded database compaction failed'));
          }
        },
      });
      const storage = new JournaledStorage(journal);
      const started = Date.now();
      for (const collection of snapshot?.collections ?? []) {
        storage.load(collection.db || this.options.mongoDbName, collection.name, collection.docs, collection.indexes);
      }
      for (const record of journalState.records) {
        storage.replay(record);
      }
      this.snapshotLsn = snapshot?.lsn ?? 0;
      if (journalState.tornTail) {
        const torn = journalState.tornTail;
        logger.warn(
          { file: torn.path, offset: torn.offset, bytes: torn.bytes, reason: torn.reason },
          'embedded database journal ends in a torn record (a crash during its append; it was never acknowledged); discarding it',
        );
        await fsp.truncate(torn.path, torn.offset);
        const handle = await fsp.open(torn.path, 'r+');
        await handle.sync().finally(() => handle.close());
      }
      await this.removeLeftoverTemporaries();
      this.journal = journal;
      this.storage = storage;
      this.recovery = {
        snapshotLsn: this.snapshotLsn,
        replayedRecords: journalState.records.length,
        documents: storage.documentCount(),
        snapshotReadMs,
        journalReadMs,
        applyMs: Date.now() - started,
      };
      logger.info(this.recovery, 'embedded database recovered from its snapshot and journal');
      const url = await this.startEmbeddedServer(storage);
      if (snapshot && snapshot.lsn === 0 && snapshot.collections.some((collection) => collection.db === '')) {
        // Migrated from the pre-journal snapshot: write the new format now.
        await this.compact();
        logger.info({ file: path.join(dataDir, legacySnapshotFileName) }, 'migrated the pre-journal snapshot; the old file is no longer read');
      }
      const intervalMs = this.options.compactIntervalMs ?? defaultCompactIntervalMs;
      this.compactTimer = setInterval(() => {
        if (this.journal && this.journal.lastAppendedLsn > this.snapshotLsn && !this.compacting) {
          this.compact().catch((error: unknown) => logger.error({ err: error }, 'embedded database compaction failed'));
        }
      }, intervalMs);
      this.compactTimer.unref();
      await this.startStorageProbe(journal);
      logger.warn(
        { socket: this.socketPath },
        `embedded database: single-node, in-memory, every write journaled in ${dataDir} before it is answered; `
          + 'set MONGODB_URL for production',
      );
      return url;
    } catch (error) {
      await this.lock.release(false).catch(() => undefined);
      throw error;
    }
  }

  /**
   * A start on a full disk (as a crash on one leaves it) serves reads: one probe now says whether
   * the disk takes writes, and while it does not, a probe every `storageProbeMs` notices when space
   * returns, so the state ends without a restart and without a write having to come first.
   */
  private async startStorageProbe(journalArg: Journal): Promise<void> {
    const probe = async (): Promise<void> => {
      if (this.probing || this.closed) {
        return;
      }
      this.probing = true;
      try {
        await journalArg.probeStorage();
      } catch (error) {
        this.options.logger.warn({ err: error }, 'embedded database storage probe failed');
      } finally {
        this.probing = false;
      }
    };
    await probe();
    if (journalArg.storageFullSince !== null) {
      this.options.logger.warn({ dataDir: this.options.dataDir }, 'embedded database started read-only: the disk is full; writes are refused storage-full until space returns');
    }
    this.storageProbeTimer = setInterval(() => {
      if (journalArg.storageFullSince !== null) {
        void probe();
      }
    }, this.storageProbeMs);
    this.storageProbeTimer.unref();
  }

  /** The data directory holds the database, the journal and the signing key: owner only. */
  private async restrictDataDir(): Promise<void> {
    const stat = await fsp.stat(this.options.dataDir);
    if ((stat.mode & 0o077) !== 0) {
      try {
        await fsp.chmod(this.options.dataDir, 0o700);
      } catch (error) {
        this.options.logger.warn({ err: error, dataDir: this.options.dataDir }, 'could not restrict the data directory to its owner (0700)');
      }
    }
  }

  private async readNewestSnapshot(): Promise<ISnapshotContents | null> {
    const { dataDir } = this.options;
    for (const [file, reader] of [
      [this.snapshotPath, readSnapshotFile],
      // Read only when the current one is absent: an operator moved a damaged snapshot away.
      [this.previousSnapshotPath, readSnapshotFile],
      [path.join(dataDir, legacySnapshotFileName), readLegacySnapshotFile],
    ] as const) {
      if (!fs.existsSync(file)) {
        continue;
      }
      try {
        return await reader(file);
      } catch (error) {
        if (error instanceof StorageDamagedError) {
          throw error;
        }
        throw new StorageDamagedError(file, null, `unreadable: ${(error as Error).message}`);
      }
    }
    return null;
  }

  private async removeLeftoverTemporaries(): Promise<void> {
    for (const name of await fsp.readdir(this.options.dataDir)) {
      if (name.startsWith('embedded-db.snapshot') && name.endsWith('.tmp')) {
        await fsp.rm(path.join(this.options.dataDir, name), { force: true });
      }
    }
  }

  /** Starts CongoDB on a Unix socket, on our journaled storage instead of its own. */
  private async startEmbeddedServer(storageArg: JournaledStorage): Promise<string> {
    let socketPath = path.join(this.options.dataDir, socketFileName);
    if (Buffer.byteLength(socketPath) > maximumSocketPathBytes) {
      this.privateSocketDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-db-'));
      socketPath = path.join(this.privateSocketDir, socketFileName);
    }
    // A socket file left by a killed run: we hold the lock, so nobody else listens on it.
    await fsp.rm(socketPath, { force: true });
    // CongoServer passes `port` straight to net.Server.listen, which takes a path for a Unix
    // socket: no TCP port is opened at all.
    const server = new congodb.CongoServer({ port: socketPath as unknown as number, host: '127.0.0.1', storage: 'memory' });
    const internals = server as unknown as { storage: unknown; commandRouter: unknown };
    internals.storage = storageArg;
    const router = new congodb.CommandRouter(storageArg as never, server);
    const route = router.route.bind(router);
    const journal = this.journal!;
    // No answer leaves the server before every journal record appended so far is on the device:
    // a write is acknowledged only once durable, a read never shows what a crash could take back,
    // and all the changes of one command share one sync. `decide` runs the handler, which decides
    // on the documents and changes them in memory; `durable` waits for the journal.
    const durable = async (commandArg: { commandName: string; database: string; command: Document }, decideArg: () => Promise<Document>): Promise<Document> => {
      for (let attempt = 0; ; attempt++) {
        const answer = await decideArg();
        if (handshakeCommands.has(commandArg.commandName)) {
          // The driver's monitoring: a slow disk must not make it declare the server gone.
          return answer;
        }
        try {
          await journal.whenDurable();
        } catch (error) {
          if (error instanceof StorageFullError) {
            if (readCommands.has(commandArg.commandName) && attempt < readRetriesAfterRefusedBatch) {
              // Another caller's write was refused and rolled back: read again what stands now.
              continue;
            }
            return { ok: 0, errmsg: error.message, code: storageFullCode, codeName: error.codeName };
          }
          return { ok: 0, errmsg: (error as Error).message, code: journalUnavailableCode, codeName: 'CloudlyJournalUnavailable' };
        }
        return answer;
      }
    };
    // The command's filters travel with it, so the storage can answer its reads from an index.
    const decide = (commandArg: Parameters<typeof route>[0]): Promise<Document> =>
      withCommandFilters(commandFiltersOf(commandArg.commandName, commandArg.database, commandArg.command), () => route(commandArg));
    router.route = (commandArg) => durable(commandArg, () => decide(commandArg));
    internals.commandRouter = router;
    // Commands from this process (directwrite.ts). A handler reads the documents it decides on and
    // changes them across a few awaits of settled promises: over the socket each command's handler
    // runs in the turn its message arrived in, so no two interleave, but commands started together
    // in this process would. They decide one at a time, in the order they came; each handler needs
    // no I/O, so a command waits only for those before it in the same turn. They wait for the
    // journal together, as commands over the socket do.
    let deciding: Promise<unknown> = Promise.resolve();
    // `decidedArg` sees the answer once the command has decided, before the journal is waited for:
    // a command it starts then decides next and shares the same sync.
    this.commandRoute = (commandArg, decidedArg) => durable(commandArg, () => {
      // Still a database command, as the metric has always counted it (unlike a read in the process).
      this.commandsStarted++;
      const decided = deciding.then(async () => {
        const answer = await decide(commandArg as Parameters<typeof route>[0]);
        decidedArg?.(answer);
        return answer;
      });
      deciding = decided.catch(() => undefined);
      return decided;
    });
    await server.start();
    this.congoServer = server;
    this.socketPath = socketPath;
    await fsp.chmod(socketPath, 0o600);
    // The embedded server needs polling monitoring: with the default the pool is cleared about
    // once a second and operations fail.
    return `mongodb://${encodeURIComponent(socketPath)}/?serverMonitoringMode=poll&directConnection=true`;
  }

  // ------------------------------------------------------------------ compaction

  /**
   * Test-only: while the failpoint file says PAUSE-COMPACTION, compaction waits between writing
   * its temporary snapshot and renaming it into place, so a test can kill the process right there.
   */
  private async pauseForTestFailpoint(): Promise<void> {
    const paused = () => this.faults.command() === 'PAUSE-COMPACTION';
    if (!paused()) {
      return;
    }
    this.options.logger.warn('compaction paused by the test failpoint');
    while (paused() && !this.closed) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /**
   * A failed compaction changed nothing that recovery needs; it is tried again after a pause
   * that doubles with each failure (a full disk is not freed in a second), up to a limit.
   */
  private scheduleCompactionRetry(): void {
    if (this.closed || this.compactRetryTimer) {
      return;
    }
    this.compactionFailures++;
    const delayMs = Math.min(compactRetryMaximumMs, (this.options.compactRetryMs ?? defaultCompactRetryMs) * 2 ** (this.compactionFailures - 1));
    this.compactRetryTimer = setTimeout(() => {
      this.compactRetryTimer = null;
      if (!this.closed && this.journal && this.journal.lastAppendedLsn > this.snapshotLsn) {
        this.compact().catch((error: unknown) => this.options.logger.error({ err: error }, 'embedded database compaction failed'));
      }
    }, delayMs);
    this.compactRetryTimer.unref();
  }

  /**
   * One compaction, in an order that keeps a complete, checked snapshot plus the journal it needs
   * at every instant: write the new snapshot to a temporary file and fsync it; read it back and
   * check every frame and count against what was written; only then keep the current snapshot as
   * the previous one and rename the new one into place; only after the directory is synced drop
   * the journal the previous snapshot no longer needs. A failure at any step before the rename
   * removes the temporary file (it may be what fills the disk) and leaves every other file as it
   * was; the caller retries later.
   */
  private async compactOnce(): Promise<void> {
    const journal = this.journal!;
    const storage = this.storage!;
    const { dataDir } = this.options;
    const faults = this.faults;
    journal.requestRotation();
    const rollbacksBefore = journal.rollbacks;
    // Captured synchronously: the snapshot holds exactly the records up to `lsn`.
    const lsn = journal.lastAppendedLsn;
    const captured = storage.capture();
    await journal.whenDurable();
    if (journal.rollbacks !== rollbacksBefore) {
      throw new Error('a journal write was refused while the snapshot was captured; this snapshot is void');
    }
    const started = Date.now();
    const temporaryPath = `${this.snapshotPath}.${process.pid}.tmp`;
    const previousTemporary = `${this.previousSnapshotPath}.${process.pid}.tmp`;
    let written: { documents: number; frames: number; bytes: number };
    try {
      written = await writeSnapshotFile(temporaryPath, lsn, captured, { faults });
      const verifyStarted = Date.now();
      await verifySnapshotFile(temporaryPath, { lsn, ...written });
      this.lastVerifyMs = Date.now() - verifyStarted;
      await this.pauseForTestFailpoint();
      // Keep the previous snapshot: hard-link the current one under a temporary name, then rename
      // it, so at every instant a complete current snapshot exists under the current name.
      if (fs.existsSync(this.snapshotPath)) {
        await fsp.rm(previousTemporary, { force: true });
        faults.throwIfArmed('snapshot.link', 'link');
        await fsp.link(this.snapshotPath, previousTemporary);
        faults.throwIfArmed('snapshot.rename', 'rename');
        await fsp.rename(previousTemporary, this.previousSnapshotPath);
      }
      faults.throwIfArmed('snapshot.rename', 'rename');
      await fsp.rename(temporaryPath, this.snapshotPath);
    } catch (error) {
      // Nothing recovery reads was changed (at worst the previous snapshot is now a second name
      // of the current one, which needs less journal); free the space the attempt took.
      await fsp.rm(temporaryPath, { force: true }).catch(() => undefined);
      await fsp.rm(previousTemporary, { force: true }).catch(() => undefined);
      this.compactionsFailed++;
      throw error;
    }
    // Until the directory is on the device, the rename may not be: drop no journal before.
    await syncDirectory(dataDir);
    const previousLsn = this.snapshotLsn;
    this.snapshotLsn = lsn;
    this.snapshotsWritten++;
    this.compactionFailures = 0;
    // The journal after the previous snapshot stays, so that snapshot plus the journal can still
    // rebuild everything should the new one ever be damaged; older segments go. A segment that
    // cannot be removed now only costs space: the next compaction tries again.
    const segments = await listSegments(dataDir);
    let dropped = 0;
    for (let index = 0; index + 1 < segments.length; index++) {
      if (segments[index + 1].firstLsn <= previousLsn + 1) {
        try {
          faults.throwIfArmed('journal.unlink', 'unlink');
          await fsp.rm(segments[index].path, { force: true });
          dropped++;
        } catch (error) {
          this.options.logger.warn({ err: error, file: segments[index].path }, 'could not remove a journal segment the snapshots no longer need; the next compaction tries again');
          break;
        }
      }
    }
    if (dropped > 0) {
      await syncDirectory(dataDir).catch((error: unknown) => {
        this.options.logger.warn({ err: error }, 'could not sync the data directory after removing journal segments');
      });
    }
    this.options.logger.info({ lsn, documents: written.documents, droppedSegments: dropped, verifyMs: this.lastVerifyMs, ms: Date.now() - started }, 'embedded database compacted');
  }
}
