import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import { findFreePort } from '../../ts/core/database.js';
import { Cloudly } from '../../ts/classes.cloudly.js';
import type { ICloudlyConfig } from '../../ts/config.js';
import { CloudlyAdminClient } from '../../ts/client/admin.js';
import { CloudlyRelayClient } from '../../ts/client/relay.js';
import type { IIdentity } from '../../ts/interfaces/data/user.js';
import type { ICluster } from '../../ts/interfaces/data/cluster.js';
import type { IReq_Any_Cloudly_CreateCluster } from '../../ts/interfaces/requests/admin.js';

/**
 * Starts a real Cloudly on a free port with the embedded database and a fresh data directory,
 * and hands back real clients. Every log line is captured, so tests can prove a secret never
 * reached the log.
 */

export const testAdminUsername = 'admin';
export const testAdminPassword = 'test-admin-password-0123';

export interface ITestCloudly {
  cloudly: Cloudly;
  baseUrl: string;
  dataDir: string;
  admin: CloudlyAdminClient;
  identity: IIdentity;
  /** Every log line written so far (JSON text). */
  logs: string[];
  createCluster(nameArg?: string): Promise<{ cluster: ICluster; relayToken: string }>;
  connectRelay(relayTokenArg: string, optionsArg?: { timeoutMs?: number }): Promise<CloudlyRelayClient>;
  /** Adds nodes (by id, named as their id) to a cluster, as an administrator would. */
  addNodes(clusterIdArg: string, ...nodeIdsArg: string[]): Promise<void>;
  /** Stops gracefully and starts a new Cloudly on the same data directory (new port). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** Cluster names are unique: each default name is a fresh one. */
let defaultClusterNames = 0;

export const startTestCloudly = async (configArg: Partial<ICloudlyConfig> = {}): Promise<ITestCloudly> => {
  const dataDir = configArg.dataDir ?? await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-test-'));
  const logs: string[] = [];
  const relays: CloudlyRelayClient[] = [];
  const logDestination = new Writable({
    write(chunkArg, _encodingArg, callbackArg) {
      logs.push(chunkArg.toString());
      callbackArg();
    },
  });
  const config: Partial<ICloudlyConfig> = {
    port: 0,
    host: '127.0.0.1',
    mongoDbUrl: null,
    dataDir,
    adminUsername: testAdminUsername,
    adminPassword: testAdminPassword,
    logLevel: 'info',
    snapshotDebounceMs: 50,
    ...configArg,
  };
  const boot = async () => {
    const cloudly = new Cloudly({ config, logDestination });
    await cloudly.start();
    const admin = new CloudlyAdminClient(cloudly.baseUrl);
    const identity = await admin.login(testAdminUsername, testAdminPassword);
    return { cloudly, admin, identity };
  };
  const handle: ITestCloudly = {
    ...(await boot()),
    baseUrl: '',
    dataDir,
    logs,
    async createCluster(nameArg = `test-cluster-${++defaultClusterNames}`) {
      return handle.admin.call<IReq_Any_Cloudly_CreateCluster>('createCluster', { name: nameArg });
    },
    async addNodes(clusterIdArg, ...nodeIdsArg) {
      for (const nodeId of nodeIdsArg) {
        await handle.admin.call('addClusterNode', { clusterId: clusterIdArg, name: nodeId, nodeId });
      }
    },
    async connectRelay(relayTokenArg, optionsArg = {}) {
      const relay = await CloudlyRelayClient.connect(handle.baseUrl, relayTokenArg, { reconnect: false, ...optionsArg });
      relays.push(relay);
      return relay;
    },
    async restart() {
      for (const relay of relays.splice(0)) {
        relay.close();
      }
      handle.admin.close();
      await handle.cloudly.stop();
      Object.assign(handle, await boot());
      handle.baseUrl = handle.cloudly.baseUrl;
    },
    async stop() {
      for (const relay of relays.splice(0)) {
        relay.close();
      }
      handle.admin.close();
      await handle.cloudly.stop();
      if (!configArg.dataDir) {
        await fsp.rm(dataDir, { recursive: true, force: true });
      }
    },
  };
  handle.baseUrl = handle.cloudly.baseUrl;
  return handle;
};

/** Waits until `predicateArg` holds, polling; fails with `messageArg` after `timeoutMsArg`. */
export const waitFor = async (predicateArg: () => boolean | Promise<boolean>, messageArg: string, timeoutMsArg = 5000): Promise<void> => {
  const deadline = Date.now() + timeoutMsArg;
  while (!(await predicateArg())) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting: ${messageArg}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

/** Runs `fnArg` and returns the error data it was refused with (fails if it was not refused). */
export const refusalOf = async (fnArg: () => Promise<unknown>): Promise<Record<string, unknown>> => {
  try {
    await fnArg();
  } catch (error) {
    const data = (error as { errorData?: unknown }).errorData;
    if (data && typeof data === 'object') {
      return data as Record<string, unknown>;
    }
    throw error;
  }
  throw new Error('expected a refusal, but the call succeeded');
};

/**
 * One in-memory CongoDB on a loopback TCP port and one key-encryption key file: what several
 * in-process Cloudly instances share (pass `shared` into each `startTestCloudly`).
 */
export const startSharedDatabase = async (): Promise<{ shared: Partial<ICloudlyConfig>; stop(): Promise<void> }> => {
  const port = await findFreePort();
  const database = new congodb.CongoServer({ port, host: '127.0.0.1', storage: 'memory' });
  await database.start();
  const keyDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-shared-'));
  const keyFile = path.join(keyDir, 'kek');
  await fsp.writeFile(keyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
  return {
    shared: { mongoDbUrl: `mongodb://127.0.0.1:${port}/?serverMonitoringMode=poll&directConnection=true`, secretsKeyFile: keyFile },
    async stop() {
      await database.stop();
      await fsp.rm(keyDir, { recursive: true, force: true });
    },
  };
};
