/**
 * Traffic statistics of a cluster's ingress (spec 001: `getClusterTrafficStatistics`, Cloudly →
 * relay → ingress). The spec names the members of one record (`requests`, `bytesIn`, `bytesOut`,
 * `connections` and the backend failures `connect`, `handshake`, `request`) and says a record is
 * one UTC day of one hostname's traffic on one node; the member names for the day, the node, the
 * hostname and the failures are the project's own definition.
 */

export interface IClusterTrafficBackendFailures {
  /** Connections to a backend that could not be opened. */
  connect: number;
  /** TLS handshakes with a backend that failed. */
  handshake: number;
  /** Requests a backend failed to answer. */
  request: number;
}

export interface IClusterTrafficStatistics {
  /** The UTC day, `YYYY-MM-DD`. */
  dayUtc: string;
  nodeId: string;
  hostname: string;
  requests: number;
  bytesIn: number;
  bytesOut: number;
  connections: number;
  backendFailures: IClusterTrafficBackendFailures;
}

export const clusterTrafficStatisticsContract = Object.freeze({
  /** The longest range one read may span, in days (both ends included). */
  maximumRangeDays: 366,
  /** The most records one page may hold, and the default when a caller names no limit. */
  maximumLimit: 1000,
  defaultLimit: 100,
  /** Longest cursor text, either way. */
  maximumCursorLength: 1024,
} as const);

export const utcDayPattern = /^(\d{4})-(\d{2})-(\d{2})$/;

/** The day's epoch milliseconds at 00:00 UTC, or null when the text is not a real `YYYY-MM-DD` day. */
export const readUtcDay = (valueArg: unknown): number | null => {
  if (typeof valueArg !== 'string') {
    return null;
  }
  const match = utcDayPattern.exec(valueArg);
  if (!match) {
    return null;
  }
  const time = Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]));
  // Date.UTC rolls 2026-02-31 over into March: a real day survives the round trip.
  return new Date(time).toISOString().slice(0, 10) === valueArg ? time : null;
};

const hostnamePattern = /^(?=.{1,253}$)(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;
const idPattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const isCount = (valueArg: unknown): boolean => Number.isSafeInteger(valueArg) && (valueArg as number) >= 0;

const recordKeys = ['dayUtc', 'nodeId', 'hostname', 'requests', 'bytesIn', 'bytesOut', 'connections', 'backendFailures'];
const failureKeys = ['connect', 'handshake', 'request'];

const readOwn = (recordArg: object, keyArg: string): unknown =>
  Object.getOwnPropertyDescriptor(recordArg, keyArg)?.value;

const isPlainRecord = (valueArg: unknown): valueArg is object =>
  typeof valueArg === 'object' && valueArg !== null && !Array.isArray(valueArg)
  && [Object.prototype, null].includes(Object.getPrototypeOf(valueArg));

/** Every reason one statistics record is not well formed, each naming its path. */
export const validateClusterTrafficStatistics = (valueArg: unknown, pathArg: string): string[] => {
  if (!isPlainRecord(valueArg)) {
    return [`${pathArg} must be an object`];
  }
  const reasons: string[] = [];
  for (const key of Object.keys(valueArg)) {
    if (!recordKeys.includes(key)) {
      reasons.push(`${pathArg}.${key} is not a member of a traffic statistics record`);
    }
  }
  if (readUtcDay(readOwn(valueArg, 'dayUtc')) === null) {
    reasons.push(`${pathArg}.dayUtc must be a UTC day YYYY-MM-DD`);
  }
  const nodeId = readOwn(valueArg, 'nodeId');
  if (typeof nodeId !== 'string' || !idPattern.test(nodeId)) {
    reasons.push(`${pathArg}.nodeId must be an id`);
  }
  const hostname = readOwn(valueArg, 'hostname');
  if (typeof hostname !== 'string' || !hostnamePattern.test(hostname)) {
    reasons.push(`${pathArg}.hostname must be a lower-case DNS name`);
  }
  for (const key of ['requests', 'bytesIn', 'bytesOut', 'connections']) {
    if (!isCount(readOwn(valueArg, key))) {
      reasons.push(`${pathArg}.${key} must be a non-negative integer`);
    }
  }
  const failures = readOwn(valueArg, 'backendFailures');
  if (!isPlainRecord(failures)) {
    reasons.push(`${pathArg}.backendFailures must be { connect, handshake, request }`);
  } else {
    for (const key of failureKeys) {
      if (!isCount(readOwn(failures, key))) {
        reasons.push(`${pathArg}.backendFailures.${key} must be a non-negative integer`);
      }
    }
    for (const key of Object.keys(failures)) {
      if (!failureKeys.includes(key)) {
        reasons.push(`${pathArg}.backendFailures.${key} is not a backend failure kind`);
      }
    }
  }
  return reasons;
};

/** A detached copy of a record that passed `validateClusterTrafficStatistics`. */
export const snapshotClusterTrafficStatistics = (valueArg: IClusterTrafficStatistics): IClusterTrafficStatistics => ({
  dayUtc: valueArg.dayUtc,
  nodeId: valueArg.nodeId,
  hostname: valueArg.hostname,
  requests: valueArg.requests,
  bytesIn: valueArg.bytesIn,
  bytesOut: valueArg.bytesOut,
  connections: valueArg.connections,
  backendFailures: {
    connect: valueArg.backendFailures.connect,
    handshake: valueArg.backendFailures.handshake,
    request: valueArg.backendFailures.request,
  },
});
