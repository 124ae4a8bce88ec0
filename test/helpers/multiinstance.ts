import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { cloudlyProcessEnv, exitOf, runServerBundle, startCloudlyProcess, type ICloudlyProcess } from './process.js';
import { devDatabaseBundlePath } from '../../scripts/testserver.js';
import { CloudlyRelayClient } from '../../ts/client/relay.js';
import { readCloudlyErrorData } from '../../ts/core/errors.js';

/**
 * Several Cloudly processes over one shared database process (scripts/dev-database.ts), and
 * relays that reconnect to another instance when theirs goes away: for the multi-instance test
 * and benchmark.
 */

const projectRoot = path.resolve(import.meta.dirname, '..', '..');

export interface IDevDatabaseProcess {
  child: ChildProcess;
  mongoDbUrl: string;
  secretsKeyFile: string;
  dataDir: string;
  stop(): Promise<void>;
}

/**
 * The dev database's bundle beside the test server's, when the test runner made one for this run
 * (scripts/testserver.ts): the same source, started without transpiling it again.
 */
const devDatabaseEntry = (): string[] => {
  const serverBundle = runServerBundle();
  const bundle = serverBundle ? path.join(path.dirname(serverBundle), path.basename(devDatabaseBundlePath)) : null;
  return bundle && fs.existsSync(bundle) ? [bundle] : ['--import', 'tsx', 'scripts/dev-database.ts'];
};

/**
 * Starts scripts/dev-database.ts and waits for its ready line; `envArg` adds to its environment
 * (a bench's CPU profiler, bench/helpers/cpuprofile.mjs).
 */
export const startDevDatabase = (dataDirArg: string, envArg: Record<string, string> = {}): Promise<IDevDatabaseProcess> => new Promise((resolve, reject) => {
  const child = spawn(process.execPath, [...devDatabaseEntry(), '--data-dir', dataDirArg], {
    cwd: projectRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, CLOUDLY_LOG_LEVEL: 'warn', ...envArg },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let errors = '';
  let readySeen = false;
  child.stdout!.on('data', (chunkArg: Buffer) => {
    if (readySeen) {
      return;
    }
    output += chunkArg.toString();
    const line = output.split('\n').find((candidate) => candidate.startsWith('{"ready":true'));
    if (line) {
      readySeen = true;
      const ready = JSON.parse(line) as { mongoDbUrl: string; secretsKeyFile: string; dataDir: string };
      resolve({
        child,
        ...ready,
        async stop() {
          if (child.exitCode === null && child.signalCode === null) {
            child.kill('SIGTERM');
            await exitOf(child);
          }
        },
      });
    }
  });
  child.stderr!.on('data', (chunkArg: Buffer) => { errors += chunkArg.toString(); });
  child.once('exit', (code) => reject(new Error(`dev database exited with ${code}: ${errors}`)));
});

export interface IInstanceProcess extends ICloudlyProcess {
  name: string;
  dataDir: string;
}

export const multiInstanceAdminPassword = 'process-admin-password';

/** One Cloudly process on the shared database (its own data directory for everything else). */
export const startInstance = async (
  databaseArg: IDevDatabaseProcess,
  nameArg: string,
  extraEnvArg: Record<string, string> = {},
): Promise<IInstanceProcess> => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), `cloudly-mi-${nameArg}-`));
  const started = await startCloudlyProcess(cloudlyProcessEnv(dataDir, {
    MONGODB_URL: databaseArg.mongoDbUrl,
    CLOUDLY_SECRETS_KEY_FILE: databaseArg.secretsKeyFile,
    CLOUDLY_LOG_LEVEL: 'info',
    ...extraEnvArg,
  }));
  return { ...started, name: nameArg, dataDir };
};

/** Stops the instance gracefully; SIGKILL when it has not exited after 10 s. */
export const stopInstance = async (instanceArg: IInstanceProcess): Promise<void> => {
  if (instanceArg.child.exitCode === null && instanceArg.child.signalCode === null) {
    instanceArg.child.kill('SIGTERM');
    const forced = setTimeout(() => instanceArg.child.kill('SIGKILL'), 10_000);
    await exitOf(instanceArg.child);
    clearTimeout(forced);
  }
  await fsp.rm(instanceArg.dataDir, { recursive: true, force: true });
};

/**
 * A test relay that stays connected: when its socket closes it reconnects to the next URL of its
 * list (a load balancer's choice), after a short random pause, and registers again.
 */
export class FailoverRelay {
  public client: CloudlyRelayClient | null = null;
  public connectedTo: string | null = null;
  public connects = 0;
  public registered = false;
  private closed = false;
  private next: number;

  constructor(
    public readonly clusterId: string,
    private readonly relayToken: string,
    private readonly urls: () => string[],
    startIndexArg: number,
    private readonly setup: (clientArg: CloudlyRelayClient) => void,
    private readonly options: { register?: boolean } = {},
  ) {
    this.next = startIndexArg;
  }

  public async connect(): Promise<void> {
    let attempt = 0;
    while (!this.closed) {
      const urls = this.urls();
      const url = urls[this.next % urls.length];
      this.next++;
      try {
        const client = await CloudlyRelayClient.connect(url, this.relayToken, { liveness: false, reconnect: false });
        this.setup(client);
        this.client = client;
        this.connectedTo = url;
        this.connects++;
        this.registered = false;
        client.onClose(() => {
          if (this.client === client) {
            this.client = null;
            this.connectedTo = null;
            this.registered = false;
          }
          if (!this.closed) {
            setTimeout(() => void this.connect(), Math.floor(Math.random() * 100));
          }
        });
        if (this.options.register) {
          void this.register(client);
        }
        return;
      } catch {
        // Exponential backoff with full jitter, as a relay client reconnects.
        await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * Math.min(2_000, 100 * 2 ** attempt))));
        attempt++;
      }
    }
  }

  /** Registers until accepted: the socket may not be elected yet (`relay-not-elected`). */
  private async register(clientArg: CloudlyRelayClient): Promise<void> {
    while (!this.closed && this.client === clientArg && clientArg.isOpen) {
      try {
        await clientArg.fire('registerClusterRelay', {
          registration: { origin: 'http://192.0.2.10:8080', version: '1.0.0', protocol: 'cluster-relay/1' },
        }, 10_000);
        this.registered = true;
        return;
      } catch (error) {
        const data = readCloudlyErrorData((error as { errorData?: unknown }).errorData);
        await new Promise((resolve) => setTimeout(resolve, data?.retryAfterMs ?? 100 + Math.floor(Math.random() * 100)));
      }
    }
  }

  public close(): void {
    this.closed = true;
    this.client?.close();
  }
}
