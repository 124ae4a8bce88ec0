import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as path from 'node:path';
import { SmartdataDb } from '@push.rocks/smartdata';
import { BSON, type Document } from 'mongodb';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import { syncDirectory, writeFileSynced } from './durablefiles.js';
import type { TCloudlyLogger } from './logger.js';

/**
 * The database Cloudly runs on: a MongoDB named by MONGODB_URL, or the embedded in-memory
 * CongoDB server. The embedded server's own persistence is not trustworthy (non-atomic files,
 * types turned into strings, a damaged file silently replaced), so for it Cloudly keeps its own
 * snapshot: every collection read through the driver, written as canonical Extended JSON to a
 * temporary file, fsynced and renamed over the current one, the previous snapshot kept beside it.
 */

export const snapshotFileName = 'embedded-db.snapshot.ejson';
export const previousSnapshotFileName = 'embedded-db.snapshot.previous.ejson';
const snapshotFormat = 'cloudly-embedded-snapshot/1';

export class SnapshotDamagedError extends Error {
  constructor(public readonly file: string, detail: string) {
    super(`embedded database snapshot ${file} is damaged (${detail}); refusing to start and leaving it untouched`);
    this.name = 'SnapshotDamagedError';
  }
}

interface ISnapshotFile {
  format: string;
  writtenAt: number;
  collections: Record<string, Document[]>;
}

export const findFreePort = async (): Promise<number> => new Promise((resolve, reject) => {
  const server = net.createServer();
  server.once('error', reject);
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
  });
});

export interface ICloudlyDatabaseOptions {
  mongoDbUrl: string | null;
  mongoDbName: string;
  dataDir: string;
  snapshotDebounceMs: number;
  logger: TCloudlyLogger;
}

export class CloudlyDatabase {
  public smartdataDb!: SmartdataDb;
  public readonly embedded: boolean;
  private congoServer: congodb.CongoServer | null = null;
  private snapshotTimer: NodeJS.Timeout | null = null;
  private snapshotRunning: Promise<void> | null = null;
  private dirtyAgain = false;
  private firstDirtyAt: number | null = null;
  private closed = false;
  /** Count of snapshots written, for tests and metrics. */
  public snapshotsWritten = 0;

  constructor(private readonly options: ICloudlyDatabaseOptions) {
    this.embedded = options.mongoDbUrl === null;
  }

  public get snapshotPath(): string {
    return path.join(this.options.dataDir, snapshotFileName);
  }

  public get previousSnapshotPath(): string {
    return path.join(this.options.dataDir, previousSnapshotFileName);
  }

  public async start(): Promise<void> {
    let url = this.options.mongoDbUrl;
    let snapshot: ISnapshotFile | null = null;
    if (this.embedded) {
      // Read the snapshot before anything else runs, so a damaged file stops start-up before a
      // single byte could be written over it.
      snapshot = await this.readSnapshot();
      const port = await findFreePort();
      this.congoServer = new congodb.CongoServer({ port, host: '127.0.0.1', storage: 'memory' });
      await this.congoServer.start();
      // The embedded server needs polling monitoring: with the default the pool is cleared about
      // once a second and operations fail.
      url = `mongodb://127.0.0.1:${port}/?serverMonitoringMode=poll&directConnection=true`;
      this.options.logger.warn(
        { port },
        'embedded database: single-node, in-memory, made durable only by Cloudly snapshots '
          + `in ${this.options.dataDir} (at most about ${this.options.snapshotDebounceMs} ms behind a committed write); `
          + 'set MONGODB_URL for production',
      );
    }
    this.smartdataDb = new SmartdataDb({ mongoDbUrl: url!, mongoDbName: this.options.mongoDbName });
    await this.smartdataDb.init();
    if (snapshot) {
      await this.restoreSnapshot(snapshot);
    }
  }

  public get mongoDb() {
    return this.smartdataDb.mongoDb;
  }

  /** Pings the database; false when it does not answer. */
  public async isReachable(): Promise<boolean> {
    try {
      await this.smartdataDb.mongoDb.command({ ping: 1 });
      return true;
    } catch {
      return false;
    }
  }

  /** Called after every committed write; schedules a snapshot at most `snapshotDebounceMs` later. */
  public markDirty(): void {
    if (!this.embedded || this.closed) {
      return;
    }
    if (this.snapshotRunning) {
      this.dirtyAgain = true;
      return;
    }
    if (this.firstDirtyAt === null) {
      this.firstDirtyAt = Date.now();
    }
    if (!this.snapshotTimer) {
      this.snapshotTimer = setTimeout(() => {
        this.snapshotTimer = null;
        void this.flushSnapshot().catch((error: unknown) => {
          this.options.logger.error({ err: error }, 'embedded database snapshot failed');
        });
      }, this.options.snapshotDebounceMs);
    }
  }

  /** Writes a snapshot now (waiting for one in progress first). */
  public async flushSnapshot(): Promise<void> {
    if (!this.embedded) {
      return;
    }
    if (this.snapshotTimer) {
      clearTimeout(this.snapshotTimer);
      this.snapshotTimer = null;
    }
    while (this.snapshotRunning) {
      await this.snapshotRunning;
    }
    this.dirtyAgain = false;
    this.firstDirtyAt = null;
    this.snapshotRunning = this.writeSnapshot().finally(() => {
      this.snapshotRunning = null;
    });
    await this.snapshotRunning;
    if (this.dirtyAgain && !this.closed) {
      this.dirtyAgain = false;
      this.markDirty();
    }
  }

  public async stop(): Promise<void> {
    if (this.closed) {
      return;
    }
    try {
      if (this.embedded) {
        await this.flushSnapshot();
      }
    } catch (error) {
      this.options.logger.error({ err: error }, 'final embedded database snapshot failed; the previous snapshot stays');
    } finally {
      this.closed = true;
      if (this.snapshotTimer) {
        clearTimeout(this.snapshotTimer);
        this.snapshotTimer = null;
      }
      await this.smartdataDb?.close().catch(() => undefined);
      if (this.congoServer) {
        await this.congoServer.stop().catch(() => undefined);
        this.congoServer = null;
      }
    }
  }

  private async writeSnapshot(): Promise<void> {
    const collections: Record<string, Document[]> = {};
    const infos = await this.smartdataDb.mongoDb.listCollections({}, { nameOnly: true }).toArray();
    for (const info of infos.sort((a, b) => a.name.localeCompare(b.name))) {
      collections[info.name] = await this.smartdataDb.mongoDb.collection(info.name).find({}).toArray();
    }
    const file: ISnapshotFile = { format: snapshotFormat, writtenAt: Date.now(), collections };
    const text = BSON.EJSON.stringify(file, { relaxed: false });
    await fsp.mkdir(this.options.dataDir, { recursive: true });
    const temporaryPath = `${this.snapshotPath}.${process.pid}.tmp`;
    await writeFileSynced(temporaryPath, text, 'w');
    // Keep the previous snapshot: hard-link the current one under a temporary name, then rename
    // it, so at every instant a complete current snapshot exists under the current name.
    if (fs.existsSync(this.snapshotPath)) {
      const previousTemporary = `${this.previousSnapshotPath}.${process.pid}.tmp`;
      await fsp.rm(previousTemporary, { force: true });
      await fsp.link(this.snapshotPath, previousTemporary);
      await fsp.rename(previousTemporary, this.previousSnapshotPath);
    }
    await fsp.rename(temporaryPath, this.snapshotPath);
    await syncDirectory(this.options.dataDir);
    this.snapshotsWritten++;
  }

  private async readSnapshot(): Promise<ISnapshotFile | null> {
    let text: string;
    try {
      text = await fsp.readFile(this.snapshotPath, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        return null;
      }
      throw new SnapshotDamagedError(this.snapshotPath, `unreadable: ${(error as Error).message}`);
    }
    let parsed: unknown;
    try {
      parsed = BSON.EJSON.parse(text, { relaxed: false });
    } catch (error) {
      throw new SnapshotDamagedError(this.snapshotPath, `not Extended JSON: ${(error as Error).message}`);
    }
    const file = parsed as Partial<ISnapshotFile> | null;
    if (!file || typeof file !== 'object' || file.format !== snapshotFormat
      || !file.collections || typeof file.collections !== 'object'
      || !Object.values(file.collections).every((docs) => Array.isArray(docs))) {
      throw new SnapshotDamagedError(this.snapshotPath, `not a ${snapshotFormat} file`);
    }
    return file as ISnapshotFile;
  }

  private async restoreSnapshot(fileArg: ISnapshotFile): Promise<void> {
    let documents = 0;
    for (const [name, docs] of Object.entries(fileArg.collections)) {
      const collection = this.smartdataDb.mongoDb.collection(name);
      await collection.deleteMany({});
      if (docs.length > 0) {
        await collection.insertMany(docs, { ordered: true });
      }
      documents += docs.length;
    }
    this.options.logger.info(
      { collections: Object.keys(fileArg.collections).length, documents, writtenAt: fileArg.writtenAt },
      'embedded database restored from snapshot',
    );
  }
}
