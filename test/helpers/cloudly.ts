import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import { findFreePort } from '../../ts/core/database.js';
import { Cloudly } from '../../ts/classes.cloudly.js';
import { minimumScryptN, type ICloudlyConfig } from '../../ts/config.js';
import { CloudlyAdminClient } from '../../ts/client/admin.js';
import { CloudlyRelayClient } from '../../ts/client/relay.js';
import type { IIdentity } from '../../ts/interfaces/data/user.js';
import type { ICluster } from '../../ts/interfaces/data/cluster.js';
import { readFrame, refusalEnvelope, type IEnvelope } from '../../ts/core/envelopepeer.js';
import { boundaryReasons } from '../../ts/core/boundary.js';
import { buildRequestEnvelope } from '../../ts/client/transport.js';
import { CloudlyRefusal } from '../../ts/core/refusal.js';
import { seedSigningKey } from './signingkeys.js';

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
  /**
   * The same administrator's client, calling `cloudly.dispatch` in this process (no HTTP): the
   * whole request pipeline from the boundary parser on (see `dispatchInProcess`).
   */
  caller: CloudlyAdminClient;
  identity: IIdentity;
  /** Every log line written so far (JSON text). */
  logs: string[];
  createCluster(nameArg?: string): Promise<{ cluster: ICluster; relayToken: string }>;
  connectRelay(relayTokenArg: string, optionsArg?: { timeoutMs?: number; handlers?: (clientArg: CloudlyRelayClient) => void }): Promise<CloudlyRelayClient>;
  /** Adds nodes (by id, named as their id) to a cluster, as an administrator would. */
  addNodes(clusterIdArg: string, ...nodeIdsArg: string[]): Promise<void>;
  /**
   * Stops gracefully and starts a new Cloudly on the same data directory: on a new port, or on
   * the same one with `samePort` (a browser page keeps its origin); `whileStopped` runs between.
   */
  restart(optionsArg?: { samePort?: boolean; whileStopped?: () => Promise<void> }): Promise<void>;
  stop(): Promise<void>;
}

/** Cluster names are unique: each default name is a fresh one. */
let defaultClusterNames = 0;

export interface IStartTestCloudlyOptions {
  /**
   * Let the server make its signing key on first start, as a new installation does, instead of
   * taking one from the run's pool (test/helpers/signingkeys.ts).
   */
  generateSigningKey?: boolean;
}

export const startTestCloudly = async (configArg: Partial<ICloudlyConfig> = {}, optionsArg: IStartTestCloudlyOptions = {}): Promise<ITestCloudly> => {
  const dataDir = configArg.dataDir ?? await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-test-'));
  // Only a data directory that is new (made here, or given empty; seedSigningKey checks). On a
  // shared database that already holds its keys the file is never read: the server finds the keys
  // document first.
  if (!optionsArg.generateSigningKey) {
    await seedSigningKey(dataDir);
  }
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
    // The lowest password-hashing cost the setting allows (see cloudlyProcessEnv).
    passwordScryptN: minimumScryptN,
    ...configArg,
  };
  const boot = async (portArg?: number) => {
    const cloudly = new Cloudly({ config: portArg === undefined ? config : { ...config, port: portArg }, logDestination });
    await cloudly.start();
    const admin = new CloudlyAdminClient(cloudly.baseUrl);
    const identity = await admin.login(testAdminUsername, testAdminPassword);
    return { cloudly, admin, identity, caller: createCaller(cloudly, identity) };
  };
  const handle: ITestCloudly = {
    ...(await boot()),
    baseUrl: '',
    dataDir,
    logs,
    async createCluster(nameArg = `test-cluster-${++defaultClusterNames}`) {
      return handle.caller.call('createCluster', { name: nameArg });
    },
    async addNodes(clusterIdArg, ...nodeIdsArg) {
      for (const nodeId of nodeIdsArg) {
        await handle.caller.call('addClusterNode', { clusterId: clusterIdArg, name: nodeId, nodeId });
      }
    },
    async connectRelay(relayTokenArg, optionsArg = {}) {
      const relay = await CloudlyRelayClient.connect(handle.baseUrl, relayTokenArg, { reconnect: false, ...optionsArg });
      relays.push(relay);
      return relay;
    },
    async restart(optionsArg = {}) {
      const port = Number(new URL(handle.baseUrl).port);
      for (const relay of relays.splice(0)) {
        relay.close();
      }
      handle.admin.close();
      await handle.cloudly.stop();
      await optionsArg.whileStopped?.();
      Object.assign(handle, await boot(optionsArg.samePort ? port : undefined));
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

/**
 * One request through Cloudly's request pipeline in this process, as `inject()` does for fastify:
 * the envelope is written as the wire carries it, read by the same boundary parser as an HTTP
 * body (`readFrame`), routed by `cloudly.dispatch` (guards, identity checks, validation, metrics)
 * and its answer read back from JSON. A refusal is thrown as the HTTP client throws it
 * (a CloudlyRefusal with the contract's error data); only the socket and HTTP layers are skipped.
 */
export const dispatchInProcess = (cloudlyArg: Cloudly) => async (methodArg: string, requestArg: unknown): Promise<unknown> => {
  const frame = readFrame(JSON.stringify(buildRequestEnvelope(methodArg, requestArg)), 'body');
  const answer: IEnvelope = frame.kind === 'request'
    ? await cloudlyArg.dispatch(frame.envelope, { transport: 'http', remoteAddress: '127.0.0.1' })
    : frame.kind === 'refused'
      ? refusalEnvelope(frame.correlationId ?? '', frame.method ?? '', frame.reasons, frame.causes)
      : refusalEnvelope(frame.correlationId, methodArg, [boundaryReasons.envelopeInvalid], [{ path: 'correlation.phase', message: 'must be request' }]);
  const wire = JSON.parse(JSON.stringify(answer)) as IEnvelope;
  if (wire.error) {
    throw new CloudlyRefusal(wire.error.text, wire.error.data);
  }
  if (wire.response === undefined) {
    throw new Error(`in-process call ${methodArg} answered no response`);
  }
  return wire.response;
};

/**
 * An admin client whose calls go through `dispatchInProcess` (like tRPC's `createCaller`), with
 * an identity already issued (e.g. `t.identity`); without one, `login` issues it in process too.
 * Its socket methods (`connectSocket`) still open a real socket to `cloudly.baseUrl`.
 */
export const createCaller = (cloudlyArg: Cloudly, identityArg: IIdentity | null = null): CloudlyAdminClient => {
  const caller = new CloudlyAdminClient(cloudlyArg.baseUrl, { post: dispatchInProcess(cloudlyArg) });
  caller.identity = identityArg;
  return caller;
};

/** Waits until `predicateArg` holds, polling; fails with `messageArg` after `timeoutMsArg`. */
/** The server's count of database commands (`cloudly_database_commands_total`), read from /metrics as a scraper reads it. */
export const databaseCommandsOf = async (baseUrlArg: string): Promise<number> => {
  // Only the counter: a whole scrape would also run the fleet gauges' counting queries.
  const text = await (await fetch(`${baseUrlArg}/metrics?name=cloudly_database_commands_total`)).text();
  const match = /^cloudly_database_commands_total (\d+)/m.exec(text);
  if (!match) {
    throw new Error('/metrics has no cloudly_database_commands_total');
  }
  return Number(match[1]);
};

export const waitFor = async (predicateArg: () => boolean | Promise<boolean>, messageArg: string, timeoutMsArg = 30_000): Promise<void> => {
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
