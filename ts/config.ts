import { isIP } from 'node:net';
import * as path from 'node:path';

/** How log lines are written (ts/core/logger.ts): `auto` is readable on a terminal, JSON lines otherwise. */
export type TLogFormat = 'auto' | 'json' | 'pretty';

/** CLOUDLY_PASSWORD_SCRYPT_N: scrypt's cost for passwords (ts/core/auth.ts), its default and its bounds. */
export const defaultScryptN = 16384;
export const minimumScryptN = 1024;
export const maximumScryptN = 65536;
/** A power of two from `minimumScryptN` to `maximumScryptN`. */
export const isScryptN = (nArg: number): boolean =>
  Number.isInteger(nArg) && nArg >= minimumScryptN && nArg <= maximumScryptN && (nArg & (nArg - 1)) === 0;

/** CLOUDLY_RELAY_WORK_CONCURRENCY's default (docs/multi-instance.md, "Admin calls during a storm"). */
export const defaultRelayWorkConcurrency = 8;

export const logFormats: readonly TLogFormat[] = ['auto', 'json', 'pretty'];

/**
 * Every environment variable Cloudly reads, parsed and validated in one place. A bad value stops
 * start-up with a message naming the variable, so a typo never turns into a silent default.
 */
export interface ICloudlyConfig {
  port: number;
  host: string;
  /** Unset means the embedded single-node database. */
  mongoDbUrl: string | null;
  mongoDbName: string;
  dataDir: string;
  adminUsername: string;
  /** Null means "generate one and print it once". */
  adminPassword: string | null;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** CLOUDLY_LOG_FORMAT: `auto` (readable lines on a terminal, JSON lines otherwise), `json` or `pretty`. */
  logFormat: TLogFormat;
  /** Largest accepted request body in bytes. */
  bodyLimitBytes: number;
  /** How long an admin identity stays valid. */
  identityTtlMs: number;
  /**
   * scrypt's cost N for passwords set from now on (CLOUDLY_PASSWORD_SCRYPT_N, `isScryptN`); a
   * stored hash keeps the N it was made with.
   */
  passwordScryptN: number;
  /** How long audit events are kept. */
  auditRetentionDays: number;
  /** How long a finished operation is kept after it ended (CLOUDLY_OPERATION_RETENTION_DAYS); running ones are always kept. */
  operationRetentionDays: number;
  /**
   * How stale an administrator's list read (`getClusters`) may be for writes made on another
   * instance; this instance's own writes are always seen. 0 reads the database every time.
   */
  readCacheMs: number;
  /**
   * How long an unchanged observed-state report of the same relay socket is answered without
   * storing it again; the first one after that stores it whole (renewing `reportedAt`). 0 stores
   * every report.
   */
  observedRefreshMs: number;
  /**
   * Timeout of the ordinary Cloudly → relay calls (inventory reads, claim pushes, isolated-restore
   * status); the per-method table is `cloudlyToRelayCalls` in ts/core/relaycalls.ts.
   */
  relayCallTimeoutMs: number;
  /** Timeout of the archive calls to a relay: prune, prepare/stage/execute/clean up an isolated restore. */
  relayArchiveCallTimeoutMs: number;
  /** Timeout of a node backup or restore called on a relay (`backupClusterService`, `restoreClusterService`). */
  relayBackupCallTimeoutMs: number;
  /** How often Cloudly pings every socket (relay and admin); a socket that misses pongs is terminated. */
  socketPingIntervalMs: number;
  /** Pings in a row a socket may leave unanswered; at the next tick it is terminated. */
  socketMissedPongsAllowed: number;
  /** Requests one socket may send per second (a token bucket with twice as many tokens). */
  socketRequestsPerSecond: number;
  /** Requests one socket may have in flight at once. */
  socketPendingRequests: number;
  /** Largest answer a relay may send to one of Cloudly's calls (an inventory can be large). */
  relayAnswerLimitBytes: number;
  /** Deprecated and ignored (CLOUDLY_SNAPSHOT_DEBOUNCE_MS): every embedded write is journaled before it is answered. */
  snapshotDebounceMs: number;
  /** Embedded database: journal bytes since the last compaction that start the next one. */
  journalCompactBytes: number;
  /** Embedded database: the longest time between compactions while anything was journaled. */
  compactIntervalMs: number;
  /** The first pause before a failed compaction is tried again (it doubles, up to 5 minutes). */
  compactRetryMs: number;
  /** How long a call waits for an unreachable database before it is answered `unavailable`. */
  databaseTimeoutMs: number;
  /** Test-only failpoint of the embedded journal (a file whose presence makes journal writes fail). */
  journalFailpointFile: string | null;
  /**
   * How long a stop (SIGTERM) waits for in-flight calls, streams and sockets to finish after the
   * sockets were asked to close (1001), before it ends what is left (CLOUDLY_SHUTDOWN_GRACE_MS).
   */
  shutdownGraceMs: number;
  /** How long a new connection may take to complete its headers or WebSocket upgrade (CLOUDLY_HEADERS_TIMEOUT_MS). */
  headersTimeoutMs: number;
  /** Connections one address may have that have not completed headers or upgrade (CLOUDLY_PENDING_CONNECTIONS_PER_ADDRESS). */
  pendingConnectionsPerAddress: number;
  /** Such pending connections in total (CLOUDLY_PENDING_CONNECTIONS_TOTAL). */
  pendingConnectionsTotal: number;
  /** How long an idle HTTP keep-alive connection is kept (CLOUDLY_KEEP_ALIVE_TIMEOUT_MS). */
  keepAliveTimeoutMs: number;
  /**
   * Addresses of reverse proxies / load balancers (CLOUDLY_TRUSTED_PROXIES, comma-separated IPs):
   * a request from one of them is taken to come from the last address of its X-Forwarded-For,
   * and its connections are not limited per address (docs/connections.md).
   */
  trustedProxies: string[];
  /**
   * The listen backlog (CLOUDLY_LISTEN_BACKLOG): connections the kernel completes and holds until
   * Cloudly accepts them. The kernel caps it at net.core.somaxconn. When it overflows, the kernel
   * drops the handshake and the client retransmits its SYN after 1 s, 3 s, 7 s …: a reconnect
   * storm larger than the backlog then takes seconds per overflow (docs/multi-instance.md).
   */
  listenBacklog: number;
  /**
   * Socket upgrades one address may have authenticating at once (CLOUDLY_SOCKET_UPGRADES_PER_ADDRESS);
   * further upgrades from that address wait in line (still pending connections, so bounded by
   * the pending limits and the headers timeout).
   */
  socketUpgradesPerAddress: number;
  /**
   * Relay sockets this instance holds at most (CLOUDLY_MAX_RELAYS_PER_INSTANCE, 0: no limit). A relay
   * beyond it is answered 503 `unavailable` `instance-relay-capacity` with `retryAfterMs`, so a
   * load balancer's next pick spreads the fleet over the instances.
   */
  maxRelaysPerInstance: number;
  /** How long a relay refused for capacity is told to wait (CLOUDLY_RELAY_CAPACITY_RETRY_MS). */
  relayCapacityRetryMs: number;
  /**
   * How many of each kind of a relay storm's work run at once (CLOUDLY_RELAY_WORK_CONCURRENCY, 0: no
   * bound): relay calls of the storm's methods, relay elections, desired-state refreshes. The rest
   * wait their turn; administrators' calls never wait behind them (docs/multi-instance.md).
   */
  relayWorkConcurrency: number;
  /**
   * Socket kinds that may negotiate permessage-deflate (CLOUDLY_WEBSOCKET_COMPRESSION: a
   * comma-separated list of `relay`, `admin`; empty: none). Measured in bench/results/fleet.md.
   */
  webSocketCompression: Array<'relay' | 'admin'>;
  /**
   * The key-encryption key that wraps the data key of every secret at rest (CLOUDLY_SECRETS_KEY_FILE).
   * Null: `<dataDir>/keys/secrets-key-encryption-key`, generated with mode 0600 on first start.
   */
  secretsKeyFile: string | null;
  /** The key-encryption key being rotated away from (CLOUDLY_SECRETS_PREVIOUS_KEY_FILE): data keys it wraps are re-wrapped at start. */
  secretsPreviousKeyFile: string | null;
  /** How long a begun secret recipient enrollment may be completed (CLOUDLY_SECRET_ENROLLMENT_TTL_MS). */
  secretEnrollmentTtlMs: number;
  /** How long a rotated Corestore control credential stays valid beside its successor (CLOUDLY_CORESTORE_CREDENTIAL_GRACE_MS). */
  corestoreCredentialGraceMs: number;
  /**
   * How long a released workload lease keeps its address out of use before another workload may
   * get it (CLOUDLY_RUNTIME_NETWORK_WITHDRAWAL_MS), so no node still routes it to the old one.
   */
  runtimeNetworkWithdrawalWindowMs: number;
  /**
   * Where the other Cloudly instances sharing the database reach this one (CLOUDLY_INTERNAL_URL),
   * for forwarded relay calls (docs/multi-instance.md). Null: the URL this instance listens on.
   */
  internalUrl: string | null;
  /** How long a relay election lease stays valid without renewal (CLOUDLY_RELAY_LEASE_TTL_MS). */
  relayLeaseTtlMs: number;
  /** How often the holder renews its leases and this instance's registry entry (CLOUDLY_RELAY_LEASE_HEARTBEAT_MS). */
  relayLeaseHeartbeatMs: number;
  /** How often an instance sharing the database reads the audit log for other instances' changes (CLOUDLY_SHARED_POLL_MS). */
  sharedPollMs: number;
  /**
   * How often the reconciler looks at every service again, whatever triggered (CLOUDLY_RECONCILE_RESYNC_MS):
   * the bound within which a change whose trigger was lost still reaches its verdict (docs/reconciler.md).
   */
  reconcileResyncMs: number;
  /** How many keys the reconciler works on at once (CLOUDLY_RECONCILE_CONCURRENCY). */
  reconcileConcurrency: number;
  /** Where blobs (database closures) live (CLOUDLY_BLOB_STORE): `filesystem` under dataDir (default) or `s3`. */
  blobStore: 'filesystem' | 's3';
  /** The S3 store's settings when `blobStore` is `s3` (CLOUDLY_S3_*, AWS_*), else null. See docs/blobstore.md. */
  s3: ICloudlyS3Config | null;
  /**
   * Cloudly's own certificate (CLOUDLY_TLS_CERT_FILE, PEM with its chain) and key
   * (CLOUDLY_TLS_KEY_FILE): set together, every listener speaks TLS (docs/tls.md). Null: plain HTTP.
   */
  tlsCertFile: string | null;
  tlsKeyFile: string | null;
  /** How often the certificate and key files are looked at for a replacement (CLOUDLY_TLS_RELOAD_POLL_MS). */
  tlsReloadPollMs: number;
  /**
   * CLOUDLY_ALLOW_PLAIN_HTTP: a proxy in front terminates TLS, so plain HTTP on a non-loopback
   * address is intended and not warned about.
   */
  allowPlainHttp: boolean;
  /**
   * Cloudly's own names to get a certificate for by ACME (CLOUDLY_ACME_DOMAINS, comma-separated;
   * docs/tls.md). Empty: ACME is off.
   */
  acmeDomains: string[];
  /** The ACME directory (CLOUDLY_ACME_DIRECTORY_URL); Let's Encrypt's production directory by default. */
  acmeDirectoryUrl: string;
  /** The account's contact (CLOUDLY_ACME_EMAIL), or null. */
  acmeEmail: string | null;
  /** Where HTTP-01 challenges are answered (CLOUDLY_ACME_HTTP_PORT; 80, where the ACME server asks). */
  acmeHttpPort: number;
  /** CA certificates (PEM) the ACME directory's https is verified against (CLOUDLY_ACME_CA_FILE; a private ACME server). */
  acmeCaFile: string | null;
  /** How often each instance looks at the stored certificate and whether an order is due (CLOUDLY_ACME_CHECK_INTERVAL_MS). */
  acmeCheckIntervalMs: number;
  /** The first pause after a failed order; it doubles with each failure in a row, up to 6 h (CLOUDLY_ACME_RETRY_MS). */
  acmeRetryMs: number;
}

export interface ICloudlyS3Config {
  bucket: string;
  /** Key prefix inside the bucket: '' or ending in '/'. */
  prefix: string;
  region: string;
  /** An S3-compatible endpoint URL; null means AWS. */
  endpoint: string | null;
  forcePathStyle: boolean;
  /** From AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN; null: the SDK's default chain. */
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | null;
}

export class ConfigError extends Error {
  constructor(public readonly variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const readInteger = (
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number => {
  const raw = env[name];
  if (raw === undefined || raw === '') {
    return fallback;
  }
  if (!/^[0-9]+$/.test(raw)) {
    throw new ConfigError(name, `must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(name, `must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
};

const readOptional = (env: NodeJS.ProcessEnv, name: string): string | null => {
  const raw = env[name];
  return raw === undefined || raw === '' ? null : raw;
};

const socketKinds = ['relay', 'admin'] as const;
const readSocketKinds = (env: NodeJS.ProcessEnv, name: string): Array<'relay' | 'admin'> => {
  const raw = readOptional(env, name);
  if (raw === null) {
    return [];
  }
  const kinds = raw.split(',').map((part) => part.trim()).filter((part) => part.length > 0);
  const unknown = kinds.filter((kind) => !(socketKinds as readonly string[]).includes(kind));
  if (unknown.length > 0) {
    throw new ConfigError(name, `must be a comma-separated list of ${socketKinds.join(', ')}; unknown: ${unknown.join(', ')}`);
  }
  return [...new Set(kinds)] as Array<'relay' | 'admin'>;
};

/** A comma-separated list of IP addresses; empty when unset. */
const readAddressList = (env: NodeJS.ProcessEnv, name: string): string[] => {
  const raw = readOptional(env, name);
  if (raw === null) {
    return [];
  }
  const addresses = raw.split(',').map((one) => one.trim()).filter((one) => one !== '');
  const invalid = addresses.filter((one) => isIP(one) === 0);
  if (invalid.length > 0) {
    throw new ConfigError(name, `must be IP addresses separated by commas; not addresses: ${invalid.map((one) => `"${one}"`).join(', ')}`);
  }
  return addresses;
};

const readOptionalPath = (env: NodeJS.ProcessEnv, name: string): string | null => {
  const raw = readOptional(env, name);
  return raw === null ? null : path.resolve(raw);
};

/** The settings of several instances over one database (docs/multi-instance.md). */
const readMultiInstanceConfig = (env: NodeJS.ProcessEnv): Pick<ICloudlyConfig, 'internalUrl' | 'relayLeaseTtlMs' | 'relayLeaseHeartbeatMs' | 'sharedPollMs' | 'reconcileResyncMs' | 'reconcileConcurrency'> => {
  const internalUrl = readOptional(env, 'CLOUDLY_INTERNAL_URL');
  if (internalUrl !== null && !/^https?:\/\/[^\s/?#]+\/?$/.test(internalUrl)) {
    throw new ConfigError('CLOUDLY_INTERNAL_URL', 'must be http(s)://host[:port] without a path');
  }
  const relayLeaseTtlMs = readInteger(env, 'CLOUDLY_RELAY_LEASE_TTL_MS', 15_000, 500, 600_000);
  const relayLeaseHeartbeatMs = readInteger(env, 'CLOUDLY_RELAY_LEASE_HEARTBEAT_MS', 5_000, 100, 300_000);
  if (relayLeaseHeartbeatMs * 2 > relayLeaseTtlMs) {
    throw new ConfigError('CLOUDLY_RELAY_LEASE_HEARTBEAT_MS', `must be at most half of CLOUDLY_RELAY_LEASE_TTL_MS (${relayLeaseTtlMs})`);
  }
  return {
    internalUrl: internalUrl === null ? null : internalUrl.replace(/\/$/, ''),
    relayLeaseTtlMs,
    relayLeaseHeartbeatMs,
    sharedPollMs: readInteger(env, 'CLOUDLY_SHARED_POLL_MS', 250, 20, 60_000),
    reconcileResyncMs: readInteger(env, 'CLOUDLY_RECONCILE_RESYNC_MS', 60_000, 200, 3_600_000),
    reconcileConcurrency: readInteger(env, 'CLOUDLY_RECONCILE_CONCURRENCY', 8, 1, 256),
  };
};

const readBoolean = (env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean => {
  const raw = readOptional(env, name);
  if (raw === null) {
    return fallback;
  }
  if (!['true', 'false', '1', '0'].includes(raw)) {
    throw new ConfigError(name, `must be true, false, 1 or 0, got "${raw}"`);
  }
  return raw === 'true' || raw === '1';
};

/** The blob store's selection and, for `s3`, its settings (docs/blobstore.md). */
const readBlobStoreConfig = (env: NodeJS.ProcessEnv): Pick<ICloudlyConfig, 'blobStore' | 's3'> => {
  const blobStore = readOptional(env, 'CLOUDLY_BLOB_STORE') ?? 'filesystem';
  if (blobStore !== 'filesystem' && blobStore !== 's3') {
    throw new ConfigError('CLOUDLY_BLOB_STORE', `must be filesystem or s3, got "${blobStore}"`);
  }
  if (blobStore === 'filesystem') {
    return { blobStore, s3: null };
  }
  const bucket = readOptional(env, 'CLOUDLY_S3_BUCKET');
  if (bucket === null) {
    throw new ConfigError('CLOUDLY_S3_BUCKET', 'is required when CLOUDLY_BLOB_STORE=s3');
  }
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    throw new ConfigError('CLOUDLY_S3_BUCKET', 'must be a bucket name of 3-63 lowercase letters, digits, "." or "-"');
  }
  const rawPrefix = readOptional(env, 'CLOUDLY_S3_PREFIX') ?? '';
  const prefix = rawPrefix === '' || rawPrefix.endsWith('/') ? rawPrefix : `${rawPrefix}/`;
  if (prefix !== '' && (prefix.length > 256 || !/^([A-Za-z0-9._-]+\/)+$/.test(prefix) || prefix.split('/').some((segment) => segment === '.' || segment === '..'))) {
    throw new ConfigError('CLOUDLY_S3_PREFIX', 'must be up to 256 characters of path segments of letters, digits, ".", "_" or "-"');
  }
  const endpoint = readOptional(env, 'CLOUDLY_S3_ENDPOINT');
  if (endpoint !== null) {
    let parsed: URL | null;
    try {
      parsed = new URL(endpoint);
    } catch {
      parsed = null;
    }
    if (!parsed || !['http:', 'https:'].includes(parsed.protocol) || parsed.username || parsed.password || parsed.search || parsed.hash) {
      throw new ConfigError('CLOUDLY_S3_ENDPOINT', 'must be an http(s) URL without credentials, query or fragment');
    }
  }
  const region = readOptional(env, 'CLOUDLY_S3_REGION') ?? readOptional(env, 'AWS_REGION');
  if (region === null) {
    throw new ConfigError('CLOUDLY_S3_REGION', 'is required when CLOUDLY_BLOB_STORE=s3 (or set AWS_REGION)');
  }
  if (!/^[a-z0-9-]{1,64}$/.test(region)) {
    throw new ConfigError('CLOUDLY_S3_REGION', 'must be a region name of lowercase letters, digits and "-"');
  }
  const accessKeyId = readOptional(env, 'AWS_ACCESS_KEY_ID');
  const secretAccessKey = readOptional(env, 'AWS_SECRET_ACCESS_KEY');
  const sessionToken = readOptional(env, 'AWS_SESSION_TOKEN');
  if ((accessKeyId === null) !== (secretAccessKey === null)) {
    throw new ConfigError(accessKeyId === null ? 'AWS_ACCESS_KEY_ID' : 'AWS_SECRET_ACCESS_KEY', 'AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together');
  }
  return {
    blobStore,
    s3: {
      bucket,
      prefix,
      region,
      endpoint,
      forcePathStyle: readBoolean(env, 'CLOUDLY_S3_FORCE_PATH_STYLE', endpoint !== null),
      credentials: accessKeyId !== null && secretAccessKey !== null
        ? { accessKeyId, secretAccessKey, ...(sessionToken !== null ? { sessionToken } : {}) }
        : null,
    },
  };
};

/** Cloudly's own certificate and how plain HTTP is judged (docs/tls.md). */
const readTlsConfig = (env: NodeJS.ProcessEnv): Pick<ICloudlyConfig, 'tlsCertFile' | 'tlsKeyFile' | 'tlsReloadPollMs' | 'allowPlainHttp'> => {
  const tlsCertFile = readOptionalPath(env, 'CLOUDLY_TLS_CERT_FILE');
  const tlsKeyFile = readOptionalPath(env, 'CLOUDLY_TLS_KEY_FILE');
  if ((tlsCertFile === null) !== (tlsKeyFile === null)) {
    throw new ConfigError(tlsCertFile === null ? 'CLOUDLY_TLS_CERT_FILE' : 'CLOUDLY_TLS_KEY_FILE', 'CLOUDLY_TLS_CERT_FILE and CLOUDLY_TLS_KEY_FILE must be set together');
  }
  return {
    tlsCertFile,
    tlsKeyFile,
    tlsReloadPollMs: readInteger(env, 'CLOUDLY_TLS_RELOAD_POLL_MS', 5_000, 50, 3_600_000),
    allowPlainHttp: readBoolean(env, 'CLOUDLY_ALLOW_PLAIN_HTTP', false),
  };
};

/** The public ACME directory used when ACME is on and none is named. */
export const letsEncryptDirectoryUrl = 'https://acme-v02.api.letsencrypt.org/directory';

const dnsNamePattern = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** Cloudly's own certificate by ACME (docs/tls.md, "ACME"). */
const readAcmeConfig = (env: NodeJS.ProcessEnv): Pick<ICloudlyConfig, 'acmeDomains' | 'acmeDirectoryUrl' | 'acmeEmail' | 'acmeHttpPort' | 'acmeCaFile' | 'acmeCheckIntervalMs' | 'acmeRetryMs'> => {
  const domains = (readOptional(env, 'CLOUDLY_ACME_DOMAINS') ?? '').split(',').map((one) => one.trim().toLowerCase()).filter((one) => one !== '');
  const invalid = domains.filter((one) => !dnsNamePattern.test(one));
  if (invalid.length > 0) {
    throw new ConfigError('CLOUDLY_ACME_DOMAINS', `must be DNS names separated by commas; not names: ${invalid.map((one) => `"${one}"`).join(', ')}`);
  }
  if (domains.length > 0 && (readOptional(env, 'CLOUDLY_TLS_CERT_FILE') !== null || readOptional(env, 'CLOUDLY_TLS_KEY_FILE') !== null)) {
    throw new ConfigError('CLOUDLY_ACME_DOMAINS', 'and CLOUDLY_TLS_CERT_FILE / CLOUDLY_TLS_KEY_FILE exclude each other: the certificate comes from ACME or from files');
  }
  const directoryUrl = readOptional(env, 'CLOUDLY_ACME_DIRECTORY_URL') ?? letsEncryptDirectoryUrl;
  if (!/^https:\/\/[^\s]+$/.test(directoryUrl)) {
    throw new ConfigError('CLOUDLY_ACME_DIRECTORY_URL', 'must be an https:// URL');
  }
  const email = readOptional(env, 'CLOUDLY_ACME_EMAIL');
  if (email !== null && !/^[^\s@,]+@[^\s@,]+$/.test(email)) {
    throw new ConfigError('CLOUDLY_ACME_EMAIL', 'must be one e-mail address');
  }
  return {
    acmeDomains: [...new Set(domains)],
    acmeDirectoryUrl: directoryUrl,
    acmeEmail: email,
    acmeHttpPort: readInteger(env, 'CLOUDLY_ACME_HTTP_PORT', 80, 0, 65535),
    acmeCaFile: readOptionalPath(env, 'CLOUDLY_ACME_CA_FILE'),
    acmeCheckIntervalMs: readInteger(env, 'CLOUDLY_ACME_CHECK_INTERVAL_MS', 60_000, 50, 3_600_000),
    acmeRetryMs: readInteger(env, 'CLOUDLY_ACME_RETRY_MS', 60_000, 10, 3_600_000),
  };
};

const readScryptN = (env: NodeJS.ProcessEnv): number => {
  const name = 'CLOUDLY_PASSWORD_SCRYPT_N';
  const value = readInteger(env, name, defaultScryptN, minimumScryptN, maximumScryptN);
  if (!isScryptN(value)) {
    throw new ConfigError(name, `must be a power of two from ${minimumScryptN} to ${maximumScryptN}, got "${env[name]}"`);
  }
  return value;
};

/** Parses the environment; throws ConfigError naming the first bad variable. */
export const readConfig = (env: NodeJS.ProcessEnv = process.env): ICloudlyConfig => {
  const port = readInteger(env, 'CLOUDLY_PORT', 3000, 0, 65535);
  const host = readOptional(env, 'CLOUDLY_HOST') ?? '127.0.0.1';
  if (!/^[A-Za-z0-9.:\-[\]]+$/.test(host)) {
    throw new ConfigError('CLOUDLY_HOST', `must be a host name or IP address, got "${host}"`);
  }
  const mongoDbUrl = readOptional(env, 'MONGODB_URL');
  if (mongoDbUrl !== null && !/^mongodb(\+srv)?:\/\//.test(mongoDbUrl)) {
    throw new ConfigError('MONGODB_URL', 'must start with mongodb:// or mongodb+srv://');
  }
  const mongoDbName = readOptional(env, 'MONGODB_NAME') ?? 'cloudly';
  if (!/^[A-Za-z0-9_-]{1,63}$/.test(mongoDbName)) {
    throw new ConfigError('MONGODB_NAME', 'must be 1-63 letters, digits, "_" or "-"');
  }
  const dataDir = path.resolve(readOptional(env, 'CLOUDLY_DATA_DIR') ?? './.nogit/data');
  const adminUsername = readOptional(env, 'CLOUDLY_ADMIN_USERNAME') ?? 'admin';
  if (!/^[A-Za-z0-9._@-]{1,64}$/.test(adminUsername)) {
    throw new ConfigError('CLOUDLY_ADMIN_USERNAME', 'must be 1-64 letters, digits, ".", "_", "@" or "-"');
  }
  const adminPassword = readOptional(env, 'CLOUDLY_ADMIN_PASSWORD');
  if (adminPassword !== null && (adminPassword.length < 12 || adminPassword.length > 1024)) {
    throw new ConfigError('CLOUDLY_ADMIN_PASSWORD', 'must be 12 to 1024 characters');
  }
  const logLevelRaw = readOptional(env, 'CLOUDLY_LOG_LEVEL') ?? 'info';
  if (!(logLevels as readonly string[]).includes(logLevelRaw)) {
    throw new ConfigError('CLOUDLY_LOG_LEVEL', `must be one of ${logLevels.join(', ')}`);
  }
  const logFormatRaw = readOptional(env, 'CLOUDLY_LOG_FORMAT') ?? 'auto';
  if (!(logFormats as readonly string[]).includes(logFormatRaw)) {
    throw new ConfigError('CLOUDLY_LOG_FORMAT', `must be one of ${logFormats.join(', ')}`);
  }
  return {
    port,
    host,
    mongoDbUrl,
    mongoDbName,
    dataDir,
    adminUsername,
    adminPassword,
    logLevel: logLevelRaw as ICloudlyConfig['logLevel'],
    logFormat: logFormatRaw as TLogFormat,
    bodyLimitBytes: readInteger(env, 'CLOUDLY_BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    identityTtlMs: readInteger(env, 'CLOUDLY_IDENTITY_TTL_MS', 12 * 3600 * 1000, 1000, 30 * 24 * 3600 * 1000),
    passwordScryptN: readScryptN(env),
    auditRetentionDays: readInteger(env, 'CLOUDLY_AUDIT_RETENTION_DAYS', 90, 1, 36_500),
    operationRetentionDays: readInteger(env, 'CLOUDLY_OPERATION_RETENTION_DAYS', 30, 1, 36_500),
    readCacheMs: readInteger(env, 'CLOUDLY_READ_CACHE_MS', 1000, 0, 60_000),
    observedRefreshMs: readInteger(env, 'CLOUDLY_OBSERVED_REFRESH_MS', 300_000, 0, 3_600_000),
    relayCallTimeoutMs: readInteger(env, 'CLOUDLY_RELAY_CALL_TIMEOUT_MS', 15_000, 10, 3_600_000),
    relayArchiveCallTimeoutMs: readInteger(env, 'CLOUDLY_RELAY_ARCHIVE_CALL_TIMEOUT_MS', 5 * 60_000, 10, 3_600_000),
    relayBackupCallTimeoutMs: readInteger(env, 'CLOUDLY_RELAY_BACKUP_CALL_TIMEOUT_MS', 15 * 60_000, 10, 6 * 3_600_000),
    socketPingIntervalMs: readInteger(env, 'CLOUDLY_SOCKET_PING_INTERVAL_MS', 5_000, 10, 60_000),
    socketMissedPongsAllowed: readInteger(env, 'CLOUDLY_SOCKET_MISSED_PONGS', 2, 1, 10),
    socketRequestsPerSecond: readInteger(env, 'CLOUDLY_SOCKET_REQUESTS_PER_SECOND', 1000, 1, 1_000_000),
    socketPendingRequests: readInteger(env, 'CLOUDLY_SOCKET_PENDING_REQUESTS', 128, 1, 100_000),
    relayAnswerLimitBytes: readInteger(env, 'CLOUDLY_RELAY_ANSWER_LIMIT_BYTES', 8 * 1024 * 1024, 1024, 256 * 1024 * 1024),
    snapshotDebounceMs: readInteger(env, 'CLOUDLY_SNAPSHOT_DEBOUNCE_MS', 250, 0, 1000),
    journalCompactBytes: readInteger(env, 'CLOUDLY_JOURNAL_COMPACT_BYTES', 64 * 1024 * 1024, 4096, 16 * 1024 * 1024 * 1024),
    compactIntervalMs: readInteger(env, 'CLOUDLY_COMPACT_INTERVAL_MS', 3_600_000, 1000, 7 * 24 * 3_600_000),
    compactRetryMs: readInteger(env, 'CLOUDLY_COMPACT_RETRY_MS', 5_000, 100, 3_600_000),
    databaseTimeoutMs: readInteger(env, 'CLOUDLY_DATABASE_TIMEOUT_MS', 2000, 100, 60_000),
    journalFailpointFile: readOptional(env, 'CLOUDLY_TEST_JOURNAL_FAILPOINT'),
    shutdownGraceMs: readInteger(env, 'CLOUDLY_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    headersTimeoutMs: readInteger(env, 'CLOUDLY_HEADERS_TIMEOUT_MS', 10_000, 100, 600_000),
    pendingConnectionsPerAddress: readInteger(env, 'CLOUDLY_PENDING_CONNECTIONS_PER_ADDRESS', 256, 1, 1_000_000),
    pendingConnectionsTotal: readInteger(env, 'CLOUDLY_PENDING_CONNECTIONS_TOTAL', 4096, 1, 1_000_000),
    keepAliveTimeoutMs: readInteger(env, 'CLOUDLY_KEEP_ALIVE_TIMEOUT_MS', 72_000, 100, 3_600_000),
    trustedProxies: readAddressList(env, 'CLOUDLY_TRUSTED_PROXIES'),
    listenBacklog: readInteger(env, 'CLOUDLY_LISTEN_BACKLOG', 4096, 1, 65_535),
    socketUpgradesPerAddress: readInteger(env, 'CLOUDLY_SOCKET_UPGRADES_PER_ADDRESS', 16, 1, 100_000),
    maxRelaysPerInstance: readInteger(env, 'CLOUDLY_MAX_RELAYS_PER_INSTANCE', 0, 0, 10_000_000),
    relayCapacityRetryMs: readInteger(env, 'CLOUDLY_RELAY_CAPACITY_RETRY_MS', 5_000, 100, 600_000),
    relayWorkConcurrency: readInteger(env, 'CLOUDLY_RELAY_WORK_CONCURRENCY', defaultRelayWorkConcurrency, 0, 10_000),
    webSocketCompression: readSocketKinds(env, 'CLOUDLY_WEBSOCKET_COMPRESSION'),
    secretsKeyFile: readOptionalPath(env, 'CLOUDLY_SECRETS_KEY_FILE'),
    secretsPreviousKeyFile: readOptionalPath(env, 'CLOUDLY_SECRETS_PREVIOUS_KEY_FILE'),
    secretEnrollmentTtlMs: readInteger(env, 'CLOUDLY_SECRET_ENROLLMENT_TTL_MS', 120_000, 10, 3_600_000),
    corestoreCredentialGraceMs: readInteger(env, 'CLOUDLY_CORESTORE_CREDENTIAL_GRACE_MS', 15 * 60_000, 0, 7 * 24 * 3_600_000),
    runtimeNetworkWithdrawalWindowMs: readInteger(env, 'CLOUDLY_RUNTIME_NETWORK_WITHDRAWAL_MS', 120_000, 0, 24 * 3_600_000),
    ...readMultiInstanceConfig(env),
    ...readBlobStoreConfig(env),
    ...readTlsConfig(env),
    ...readAcmeConfig(env),
  };
};
