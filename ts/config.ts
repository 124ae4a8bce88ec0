import { createServer, isIP } from 'node:net';
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
  /**
   * CLOUDLY_EMBEDDED_DIRECT_READS: the store's reads of the embedded database are answered in the
   * process (ts/core/directread.ts); false sends them through the database protocol, as before.
   */
  embeddedDirectReads?: boolean;
  /**
   * CLOUDLY_EMBEDDED_DIRECT_WRITES: the store's writes to the embedded database are handed to its
   * command router in the process (ts/core/directwrite.ts); false sends them through the database
   * protocol, as before.
   */
  embeddedDirectWrites?: boolean;
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
  /** Embedded database on a full disk: how often it checks whether the disk takes writes again. */
  storageProbeMs: number;
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
  /**
   * Open connections in total, whatever their state (CLOUDLY_CONNECTIONS_TOTAL). Null: the
   * process's open-files limit less a reserve for the journal, snapshots and the blob store
   * (docs/connections.md, `decideEstablishedLimits`).
   */
  connectionsTotal: number | null;
  /** Open connections one address may hold (CLOUDLY_CONNECTIONS_PER_ADDRESS). Null: half the total. */
  connectionsPerAddress: number | null;
  /**
   * Bytes of watch events one admin socket may hold unanswered, or have queued unsent
   * (CLOUDLY_WATCH_BUFFER_BYTES); at it, sending waits for answers, and a socket that stays there
   * for `watchStallMs` is closed 4002 (docs/api-dashboard.md).
   */
  watchBufferBytes: number;
  /** How long a socket's watch events may stay at CLOUDLY_WATCH_BUFFER_BYTES before the socket is closed 4002 (CLOUDLY_WATCH_STALL_MS). */
  watchStallMs: number;
  /** Watches one account may hold at once, over all its sockets (CLOUDLY_WATCHES_PER_ACCOUNT). */
  watchesPerAccount: number;
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
  /**
   * How long a cluster may be without a live relay session before its services read `unknown`
   * (CLOUDLY_RELAY_LIVENESS_GRACE_MS; docs/reconciler.md, "Liveness").
   */
  relayLivenessGraceMs: number;
  /**
   * How old a connected relay's newest stored observed-state report may be before its cluster's
   * services read `unknown` (CLOUDLY_OBSERVED_STALE_MS); above CLOUDLY_OBSERVED_REFRESH_MS, since an
   * unchanged report is stored again only that often.
   */
  observedStaleMs: number;
  /**
   * How much faster than the wall clock backup schedules see time pass (CLOUDLY_SCHEDULE_CLOCK_FACTOR,
   * default 1). For tests only: at 60 a one-minute schedule fires every real second, on every
   * instance alike (docs/api/backups.md, "Schedules").
   */
  scheduleClockFactor: number;
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

/** One bad variable and what it takes. */
export interface IConfigProblem {
  variable: string;
  message: string;
}

/**
 * The configuration cannot be used. `readConfig` reads every variable before it throws, so one
 * error names every bad one (`problems`, in the order read); `variable` is the first of them.
 */
export class ConfigError extends Error {
  public readonly problems: IConfigProblem[];
  public readonly variable: string;
  constructor(variableArg: string | IConfigProblem[], messageArg = '') {
    const problems = typeof variableArg === 'string' ? [{ variable: variableArg, message: messageArg }] : variableArg;
    super(problems.map((problemArg) => `${problemArg.variable}: ${problemArg.message}`).join('; '));
    this.name = 'ConfigError';
    this.problems = problems;
    this.variable = problems[0]?.variable ?? '';
  }
}

const durationUnits = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * A duration in milliseconds: plain milliseconds (`1500`), or a number with one unit, `ms`, `s`,
 * `m`, `h` or `d` (`500ms`, `30s`, `1.5s`, `5m`, `12h`, `1d`), as the readme writes them. Null
 * for anything else, or for a fraction of a millisecond.
 */
export const parseDurationMs = (textArg: string): number | null => {
  const match = /^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)?$/.exec(textArg);
  if (!match || (match[2] === undefined && match[1].includes('.'))) {
    return null;
  }
  const exact = Number(match[1]) * durationUnits[(match[2] ?? 'ms') as keyof typeof durationUnits];
  const milliseconds = Math.round(exact);
  return Number.isSafeInteger(milliseconds) && Math.abs(exact - milliseconds) < 1e-6 ? milliseconds : null;
};

/** A duration in its largest whole unit: 3600000 → `1h`, 1500 → `1500ms`. */
export const formatDuration = (millisecondsArg: number): string => {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    if (millisecondsArg >= durationUnits[unit] && millisecondsArg % durationUnits[unit] === 0) {
      return `${millisecondsArg / durationUnits[unit]}${unit}`;
    }
  }
  return `${millisecondsArg}ms`;
};

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

/** A `*_MS` setting: plain milliseconds or a number with a unit (`parseDurationMs`), within bounds. */
const readDuration = (
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
  const value = parseDurationMs(raw);
  if (value === null || value < min || value > max) {
    throw new ConfigError(name, `must be a duration from ${formatDuration(min)} to ${formatDuration(max)}: milliseconds, or a number with a unit (500ms, 30s, 5m, 12h, 1d), got "${raw}"`);
  }
  return value;
};
/** An integer, or null when the variable is unset (its default is decided elsewhere). */
const readOptionalInteger = (env: NodeJS.ProcessEnv, name: string, min: number, max: number): number | null =>
  readOptional(env, name) === null ? null : readInteger(env, name, min, min, max);

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
/** Reads one setting; when it is refused, its problem is kept and reading goes on with the fallback. */
type TTake = <T>(readArg: () => T, fallbackArg: T) => T;

/**
 * Runs `readArg` with a `take` that keeps reading past a bad value, then throws one ConfigError
 * naming every bad variable it met (in the order read), or answers what was read.
 */
const readingAll = <T>(readArg: (takeArg: TTake) => T): T => {
  const problems: IConfigProblem[] = [];
  const take: TTake = (oneArg, fallbackArg) => {
    try {
      return oneArg();
    } catch (error) {
      if (error instanceof ConfigError) {
        problems.push(...error.problems);
        return fallbackArg;
      }
      throw error;
    }
  };
  const value = readArg(take);
  if (problems.length > 0) {
    throw new ConfigError(problems);
  }
  return value;
};

const readMultiInstanceConfig = (env: NodeJS.ProcessEnv): Pick<ICloudlyConfig, 'internalUrl' | 'relayLeaseTtlMs' | 'relayLeaseHeartbeatMs' | 'sharedPollMs' | 'reconcileResyncMs' | 'reconcileConcurrency' | 'relayLivenessGraceMs'> => readingAll((take) => {
  const internalUrl = take(() => {
    const raw = readOptional(env, 'CLOUDLY_INTERNAL_URL');
    if (raw !== null && !/^https?:\/\/[^\s/?#]+\/?$/.test(raw)) {
      throw new ConfigError('CLOUDLY_INTERNAL_URL', 'must be http(s)://host[:port] without a path');
    }
    return raw;
  }, null);
  const relayLeaseTtlMs = take(() => readDuration(env, 'CLOUDLY_RELAY_LEASE_TTL_MS', 15_000, 500, 600_000), 15_000);
  const relayLeaseHeartbeatMs = take(() => {
    const heartbeat = readDuration(env, 'CLOUDLY_RELAY_LEASE_HEARTBEAT_MS', 5_000, 100, 300_000);
    if (heartbeat * 2 > relayLeaseTtlMs) {
      throw new ConfigError('CLOUDLY_RELAY_LEASE_HEARTBEAT_MS', `must be at most half of CLOUDLY_RELAY_LEASE_TTL_MS (${relayLeaseTtlMs})`);
    }
    return heartbeat;
  }, 5_000);
  return {
    internalUrl: internalUrl === null ? null : internalUrl.replace(/\/$/, ''),
    relayLeaseTtlMs,
    relayLeaseHeartbeatMs,
    sharedPollMs: take(() => readDuration(env, 'CLOUDLY_SHARED_POLL_MS', 250, 20, 60_000), 250),
    reconcileResyncMs: take(() => readDuration(env, 'CLOUDLY_RECONCILE_RESYNC_MS', 60_000, 200, 3_600_000), 60_000),
    reconcileConcurrency: take(() => readInteger(env, 'CLOUDLY_RECONCILE_CONCURRENCY', 8, 1, 256), 8),
    relayLivenessGraceMs: take(() => readDuration(env, 'CLOUDLY_RELAY_LIVENESS_GRACE_MS', 30_000, 500, 3_600_000), 30_000),
  };
});

/** The observed-state staleness bound: above the refresh period, or every unchanged relay would read stale. */
const readObservedStaleMs = (env: NodeJS.ProcessEnv, observedRefreshMsArg: number): number => {
  const observedStaleMs = readDuration(env, 'CLOUDLY_OBSERVED_STALE_MS', 600_000, 1_000, 24 * 3_600_000);
  if (observedRefreshMsArg > 0 && observedStaleMs <= observedRefreshMsArg) {
    throw new ConfigError('CLOUDLY_OBSERVED_STALE_MS', `must be above CLOUDLY_OBSERVED_REFRESH_MS (${observedRefreshMsArg}): an unchanged report is stored again only that often`);
  }
  return observedStaleMs;
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
    tlsReloadPollMs: readDuration(env, 'CLOUDLY_TLS_RELOAD_POLL_MS', 5_000, 50, 3_600_000),
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
    acmeCheckIntervalMs: readDuration(env, 'CLOUDLY_ACME_CHECK_INTERVAL_MS', 60_000, 50, 3_600_000),
    acmeRetryMs: readDuration(env, 'CLOUDLY_ACME_RETRY_MS', 60_000, 10, 3_600_000),
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

/** Parses the environment; throws one ConfigError naming every bad variable. */
export const readConfig = (env: NodeJS.ProcessEnv = process.env): ICloudlyConfig => readingAll((take) => {
  const integer = (name: string, fallback: number, min: number, max: number): number =>
    take(() => readInteger(env, name, fallback, min, max), fallback);
  const duration = (name: string, fallback: number, min: number, max: number): number =>
    take(() => readDuration(env, name, fallback, min, max), fallback);
  const check = (name: string, holdsArg: boolean, messageArg: string): void => {
    take(() => {
      if (!holdsArg) {
        throw new ConfigError(name, messageArg);
      }
    }, undefined);
  };
  const port = integer('CLOUDLY_PORT', 3000, 0, 65535);
  const host = readOptional(env, 'CLOUDLY_HOST') ?? '127.0.0.1';
  check('CLOUDLY_HOST', /^[A-Za-z0-9.:\-[\]]+$/.test(host), `must be a host name or IP address, got "${host}"`);
  const mongoDbUrl = readOptional(env, 'MONGODB_URL');
  check('MONGODB_URL', mongoDbUrl === null || /^mongodb(\+srv)?:\/\//.test(mongoDbUrl), 'must start with mongodb:// or mongodb+srv://');
  const mongoDbName = readOptional(env, 'MONGODB_NAME') ?? 'cloudly';
  check('MONGODB_NAME', /^[A-Za-z0-9_-]{1,63}$/.test(mongoDbName), 'must be 1-63 letters, digits, "_" or "-"');
  const dataDir = path.resolve(readOptional(env, 'CLOUDLY_DATA_DIR') ?? './.nogit/data');
  const adminUsername = readOptional(env, 'CLOUDLY_ADMIN_USERNAME') ?? 'admin';
  check('CLOUDLY_ADMIN_USERNAME', /^[A-Za-z0-9._@-]{1,64}$/.test(adminUsername), 'must be 1-64 letters, digits, ".", "_", "@" or "-"');
  const adminPassword = readOptional(env, 'CLOUDLY_ADMIN_PASSWORD');
  check('CLOUDLY_ADMIN_PASSWORD', adminPassword === null || (adminPassword.length >= 12 && adminPassword.length <= 1024), 'must be 12 to 1024 characters');
  const logLevelRaw = readOptional(env, 'CLOUDLY_LOG_LEVEL') ?? 'info';
  check('CLOUDLY_LOG_LEVEL', (logLevels as readonly string[]).includes(logLevelRaw), `must be one of ${logLevels.join(', ')}, got "${logLevelRaw}"`);
  const logFormatRaw = readOptional(env, 'CLOUDLY_LOG_FORMAT') ?? 'auto';
  check('CLOUDLY_LOG_FORMAT', (logFormats as readonly string[]).includes(logFormatRaw), `must be one of ${logFormats.join(', ')}, got "${logFormatRaw}"`);
  const config: ICloudlyConfig = {
    port,
    host,
    mongoDbUrl,
    mongoDbName,
    dataDir,
    adminUsername,
    adminPassword,
    logLevel: logLevelRaw as ICloudlyConfig['logLevel'],
    logFormat: logFormatRaw as TLogFormat,
    bodyLimitBytes: integer('CLOUDLY_BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    identityTtlMs: duration('CLOUDLY_IDENTITY_TTL_MS', 12 * 3600 * 1000, 1000, 30 * 24 * 3600 * 1000),
    passwordScryptN: take(() => readScryptN(env), defaultScryptN),
    auditRetentionDays: integer('CLOUDLY_AUDIT_RETENTION_DAYS', 90, 1, 36_500),
    embeddedDirectReads: readBoolean(env, 'CLOUDLY_EMBEDDED_DIRECT_READS', true),
    embeddedDirectWrites: readBoolean(env, 'CLOUDLY_EMBEDDED_DIRECT_WRITES', true),
    operationRetentionDays: integer('CLOUDLY_OPERATION_RETENTION_DAYS', 30, 1, 36_500),
    readCacheMs: duration('CLOUDLY_READ_CACHE_MS', 1000, 0, 60_000),
    observedRefreshMs: duration('CLOUDLY_OBSERVED_REFRESH_MS', 300_000, 0, 3_600_000),
    observedStaleMs: take(() => readObservedStaleMs(env, readDuration(env, 'CLOUDLY_OBSERVED_REFRESH_MS', 300_000, 0, 3_600_000)), 600_000),
    scheduleClockFactor: integer('CLOUDLY_SCHEDULE_CLOCK_FACTOR', 1, 1, 3_600),
    relayCallTimeoutMs: duration('CLOUDLY_RELAY_CALL_TIMEOUT_MS', 15_000, 10, 3_600_000),
    relayArchiveCallTimeoutMs: duration('CLOUDLY_RELAY_ARCHIVE_CALL_TIMEOUT_MS', 5 * 60_000, 10, 3_600_000),
    relayBackupCallTimeoutMs: duration('CLOUDLY_RELAY_BACKUP_CALL_TIMEOUT_MS', 15 * 60_000, 10, 6 * 3_600_000),
    socketPingIntervalMs: duration('CLOUDLY_SOCKET_PING_INTERVAL_MS', 5_000, 10, 60_000),
    socketMissedPongsAllowed: integer('CLOUDLY_SOCKET_MISSED_PONGS', 2, 1, 10),
    socketRequestsPerSecond: integer('CLOUDLY_SOCKET_REQUESTS_PER_SECOND', 1000, 1, 1_000_000),
    socketPendingRequests: integer('CLOUDLY_SOCKET_PENDING_REQUESTS', 128, 1, 100_000),
    relayAnswerLimitBytes: integer('CLOUDLY_RELAY_ANSWER_LIMIT_BYTES', 8 * 1024 * 1024, 1024, 256 * 1024 * 1024),
    snapshotDebounceMs: duration('CLOUDLY_SNAPSHOT_DEBOUNCE_MS', 250, 0, 1000),
    journalCompactBytes: integer('CLOUDLY_JOURNAL_COMPACT_BYTES', 64 * 1024 * 1024, 4096, 16 * 1024 * 1024 * 1024),
    compactIntervalMs: duration('CLOUDLY_COMPACT_INTERVAL_MS', 3_600_000, 1000, 7 * 24 * 3_600_000),
    compactRetryMs: duration('CLOUDLY_COMPACT_RETRY_MS', 5_000, 100, 3_600_000),
    storageProbeMs: duration('CLOUDLY_STORAGE_PROBE_MS', 2_000, 100, 600_000),
    databaseTimeoutMs: duration('CLOUDLY_DATABASE_TIMEOUT_MS', 2000, 100, 60_000),
    journalFailpointFile: readOptional(env, 'CLOUDLY_TEST_JOURNAL_FAILPOINT'),
    shutdownGraceMs: duration('CLOUDLY_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    headersTimeoutMs: duration('CLOUDLY_HEADERS_TIMEOUT_MS', 10_000, 100, 600_000),
    pendingConnectionsPerAddress: integer('CLOUDLY_PENDING_CONNECTIONS_PER_ADDRESS', 256, 1, 1_000_000),
    pendingConnectionsTotal: integer('CLOUDLY_PENDING_CONNECTIONS_TOTAL', 4096, 1, 1_000_000),
    connectionsTotal: take(() => readOptionalInteger(env, 'CLOUDLY_CONNECTIONS_TOTAL', 1, 10_000_000), null),
    connectionsPerAddress: take(() => readOptionalInteger(env, 'CLOUDLY_CONNECTIONS_PER_ADDRESS', 1, 10_000_000), null),
    watchBufferBytes: integer('CLOUDLY_WATCH_BUFFER_BYTES', 4 * 1024 * 1024, 16 * 1024, 1024 * 1024 * 1024),
    watchStallMs: duration('CLOUDLY_WATCH_STALL_MS', 10_000, 100, 600_000),
    watchesPerAccount: integer('CLOUDLY_WATCHES_PER_ACCOUNT', 32, 1, 100_000),
    keepAliveTimeoutMs: duration('CLOUDLY_KEEP_ALIVE_TIMEOUT_MS', 72_000, 100, 3_600_000),
    trustedProxies: take(() => readAddressList(env, 'CLOUDLY_TRUSTED_PROXIES'), []),
    listenBacklog: integer('CLOUDLY_LISTEN_BACKLOG', 4096, 1, 65_535),
    socketUpgradesPerAddress: integer('CLOUDLY_SOCKET_UPGRADES_PER_ADDRESS', 16, 1, 100_000),
    maxRelaysPerInstance: integer('CLOUDLY_MAX_RELAYS_PER_INSTANCE', 0, 0, 10_000_000),
    relayCapacityRetryMs: duration('CLOUDLY_RELAY_CAPACITY_RETRY_MS', 5_000, 100, 600_000),
    relayWorkConcurrency: integer('CLOUDLY_RELAY_WORK_CONCURRENCY', defaultRelayWorkConcurrency, 0, 10_000),
    webSocketCompression: take(() => readSocketKinds(env, 'CLOUDLY_WEBSOCKET_COMPRESSION'), []),
    secretsKeyFile: readOptionalPath(env, 'CLOUDLY_SECRETS_KEY_FILE'),
    secretsPreviousKeyFile: readOptionalPath(env, 'CLOUDLY_SECRETS_PREVIOUS_KEY_FILE'),
    secretEnrollmentTtlMs: duration('CLOUDLY_SECRET_ENROLLMENT_TTL_MS', 120_000, 10, 3_600_000),
    corestoreCredentialGraceMs: duration('CLOUDLY_CORESTORE_CREDENTIAL_GRACE_MS', 15 * 60_000, 0, 7 * 24 * 3_600_000),
    runtimeNetworkWithdrawalWindowMs: duration('CLOUDLY_RUNTIME_NETWORK_WITHDRAWAL_MS', 120_000, 0, 24 * 3_600_000),
    ...take(() => readMultiInstanceConfig(env), readMultiInstanceConfig({})),
    ...take(() => readBlobStoreConfig(env), readBlobStoreConfig({})),
    ...take(() => readTlsConfig(env), readTlsConfig({})),
    ...take(() => readAcmeConfig(env), readAcmeConfig({})),
  };
  return config;
});

/**
 * Every CLOUDLY_* variable `readConfig` reads. test/config.variables.test.ts checks this list
 * against the names this file reads.
 */
export const serverVariables: readonly string[] = [
  'CLOUDLY_PORT', 'CLOUDLY_HOST', 'CLOUDLY_DATA_DIR', 'CLOUDLY_ADMIN_USERNAME', 'CLOUDLY_ADMIN_PASSWORD',
  'CLOUDLY_LOG_LEVEL', 'CLOUDLY_LOG_FORMAT', 'CLOUDLY_BODY_LIMIT_BYTES', 'CLOUDLY_IDENTITY_TTL_MS',
  'CLOUDLY_PASSWORD_SCRYPT_N', 'CLOUDLY_AUDIT_RETENTION_DAYS', 'CLOUDLY_OPERATION_RETENTION_DAYS',
  'CLOUDLY_READ_CACHE_MS', 'CLOUDLY_OBSERVED_REFRESH_MS', 'CLOUDLY_OBSERVED_STALE_MS', 'CLOUDLY_RELAY_CALL_TIMEOUT_MS',
  'CLOUDLY_RELAY_ARCHIVE_CALL_TIMEOUT_MS', 'CLOUDLY_RELAY_BACKUP_CALL_TIMEOUT_MS', 'CLOUDLY_SOCKET_PING_INTERVAL_MS',
  'CLOUDLY_SOCKET_MISSED_PONGS', 'CLOUDLY_SOCKET_REQUESTS_PER_SECOND', 'CLOUDLY_SOCKET_PENDING_REQUESTS',
  'CLOUDLY_RELAY_ANSWER_LIMIT_BYTES', 'CLOUDLY_SNAPSHOT_DEBOUNCE_MS', 'CLOUDLY_JOURNAL_COMPACT_BYTES',
  'CLOUDLY_COMPACT_INTERVAL_MS', 'CLOUDLY_COMPACT_RETRY_MS', 'CLOUDLY_STORAGE_PROBE_MS', 'CLOUDLY_DATABASE_TIMEOUT_MS',
  'CLOUDLY_TEST_JOURNAL_FAILPOINT', 'CLOUDLY_SHUTDOWN_GRACE_MS', 'CLOUDLY_HEADERS_TIMEOUT_MS',
  'CLOUDLY_PENDING_CONNECTIONS_PER_ADDRESS', 'CLOUDLY_PENDING_CONNECTIONS_TOTAL', 'CLOUDLY_CONNECTIONS_TOTAL', 'CLOUDLY_CONNECTIONS_PER_ADDRESS',
  'CLOUDLY_WATCH_BUFFER_BYTES', 'CLOUDLY_WATCH_STALL_MS', 'CLOUDLY_WATCHES_PER_ACCOUNT', 'CLOUDLY_KEEP_ALIVE_TIMEOUT_MS',
  'CLOUDLY_TRUSTED_PROXIES', 'CLOUDLY_LISTEN_BACKLOG', 'CLOUDLY_SOCKET_UPGRADES_PER_ADDRESS',
  'CLOUDLY_MAX_RELAYS_PER_INSTANCE', 'CLOUDLY_RELAY_CAPACITY_RETRY_MS', 'CLOUDLY_RELAY_WORK_CONCURRENCY',
  'CLOUDLY_WEBSOCKET_COMPRESSION', 'CLOUDLY_SECRETS_KEY_FILE', 'CLOUDLY_SECRETS_PREVIOUS_KEY_FILE',
  'CLOUDLY_SECRET_ENROLLMENT_TTL_MS', 'CLOUDLY_CORESTORE_CREDENTIAL_GRACE_MS', 'CLOUDLY_RUNTIME_NETWORK_WITHDRAWAL_MS',
  'CLOUDLY_INTERNAL_URL', 'CLOUDLY_RELAY_LEASE_TTL_MS', 'CLOUDLY_RELAY_LEASE_HEARTBEAT_MS', 'CLOUDLY_SHARED_POLL_MS',
  'CLOUDLY_RECONCILE_RESYNC_MS', 'CLOUDLY_RECONCILE_CONCURRENCY', 'CLOUDLY_RELAY_LIVENESS_GRACE_MS', 'CLOUDLY_BLOB_STORE', 'CLOUDLY_S3_BUCKET',
  'CLOUDLY_S3_PREFIX', 'CLOUDLY_S3_ENDPOINT', 'CLOUDLY_S3_REGION', 'CLOUDLY_S3_FORCE_PATH_STYLE',
  'CLOUDLY_TLS_CERT_FILE', 'CLOUDLY_TLS_KEY_FILE', 'CLOUDLY_TLS_RELOAD_POLL_MS', 'CLOUDLY_ALLOW_PLAIN_HTTP',
  'CLOUDLY_ACME_DOMAINS', 'CLOUDLY_ACME_DIRECTORY_URL', 'CLOUDLY_ACME_EMAIL', 'CLOUDLY_ACME_HTTP_PORT', 'CLOUDLY_ACME_CA_FILE',
  'CLOUDLY_ACME_CHECK_INTERVAL_MS', 'CLOUDLY_ACME_RETRY_MS', 'CLOUDLY_SCHEDULE_CLOCK_FACTOR',
  'CLOUDLY_EMBEDDED_DIRECT_READS',
  'CLOUDLY_EMBEDDED_DIRECT_WRITES',
];

/**
 * CLOUDLY_* variables Cloudly's other programs read, which may share the server's environment:
 * the command line (`CLOUDLY_URL`, `CLOUDLY_CONFIG_DIR`), the launchers' bundles, the simulator,
 * the tests and benches (every `CLOUDLY_TEST_*`, `CLOUDLY_BENCH_*`). Not the server's, and not unknown.
 */
export const otherProgramVariables: readonly string[] = [
  'CLOUDLY_URL', 'CLOUDLY_CONFIG_DIR', 'CLOUDLY_CLI_SOURCE', 'CLOUDLY_CLI_CACHE_DIR', 'CLOUDLY_SERVER_SOURCE',
  'CLOUDLY_SERVER_CACHE_DIR', 'CLOUDLY_SIM_SOURCE', 'CLOUDLY_SIM_CACHE_DIR', 'CLOUDLY_RELAY_TOKEN',
  'CLOUDLY_DEV_DATABASE_DIR', 'CLOUDLY_CHROMIUM', 'CLOUDLY_MODULE_TRACE', 'CLOUDLY_CA_FILE', 'CLOUDLY_INSECURE_PLAIN_HTTP',
];
const otherProgramPrefixes = ['CLOUDLY_TEST_', 'CLOUDLY_BENCH_'];

/** Levenshtein's edit distance: insertions, deletions and substitutions of one character. */
export const editDistance = (aArg: string, bArg: string): number => {
  let previous = Array.from({ length: bArg.length + 1 }, (_unused, indexArg) => indexArg);
  for (let i = 1; i <= aArg.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= bArg.length; j += 1) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (aArg[i - 1] === bArg[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[bArg.length];
};

export interface IUnknownVariable {
  variable: string;
  /** The server's variable nearest to it by edit distance: most likely the one meant. */
  closest: string;
}

/**
 * Every CLOUDLY_* variable in `envArg` that no Cloudly program reads, with the server's variable
 * nearest to it: a misspelt setting (`LOGLEVEL` for `LOG_LEVEL`) would otherwise be ignored in silence.
 */
export const unknownCloudlyVariables = (envArg: NodeJS.ProcessEnv): IUnknownVariable[] =>
  Object.keys(envArg)
    .filter((nameArg) => nameArg.startsWith('CLOUDLY_')
      && !serverVariables.includes(nameArg)
      && !otherProgramVariables.includes(nameArg)
      && !otherProgramPrefixes.some((prefixArg) => nameArg.startsWith(prefixArg)))
    .sort()
    .map((nameArg) => ({
      variable: nameArg,
      closest: serverVariables.reduce((bestArg, candidateArg) =>
        (editDistance(nameArg, candidateArg) < editDistance(nameArg, bestArg) ? candidateArg : bestArg)),
    }));

const listenFailures: Record<string, string> = {
  ENOTFOUND: 'the name does not resolve',
  EAI_AGAIN: 'the name could not be resolved now',
  EADDRNOTAVAIL: 'no network interface of this machine has that address',
  EACCES: 'not allowed',
  EAFNOSUPPORT: 'this machine does not support that address family',
};

/**
 * Refuses (ConfigError naming CLOUDLY_HOST) a host Cloudly could not listen on: a name that does not
 * resolve, an address no interface has. Cloudly checks it before its database starts, so a typo
 * is named at once instead of after the database's start and before its first listen.
 */
export const checkListenHost = async (hostArg: string): Promise<void> => {
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ host: hostArg, port: 0, exclusive: true }, () => resolve());
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? '';
    throw new ConfigError('CLOUDLY_HOST', `cannot listen on "${hostArg}": ${listenFailures[code] ?? (error as Error).message}${code ? ` (${code})` : ''}`);
  } finally {
    await new Promise<void>((resolve) => {
      probe.close(() => resolve());
    });
  }
};
