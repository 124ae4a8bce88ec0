import { isCanonicalId, isRecord } from '../private/dataproperties.js';
import { isPlausibleUnicastIpv4 } from '../private/ipv4.js';
import { collectCanonicalHttpOriginReasons, parseUrlOrNull } from '../private/httporigin.js';
import {
  collectMemberReasons,
  isOwnDataProperty,
  readBoundedDataList,
  readOwnDataValue,
} from '../private/ownproperties.js';

/**
 * Where the cluster relay reaches one node's Corestore control API.
 *
 * Corestore runs beside the workloads of its node, so a relay that serves a whole cluster needs
 * the address of every node's Corestore separately. Cloudly owns this value and keeps it in its
 * database; the relay only reads it. It names a place, never a credential.
 */
export interface IClusterNodeCorestore {
  /**
   * The exact origin, e.g. `http://10.20.0.15:3000`. Plain http is admitted because the hop stays
   * inside the cluster and Corestore serves no TLS itself; https is admitted for deployments that
   * front it with TLS.
   */
  endpoint: string;
}

/** Longest Corestore endpoint text admitted. */
export const maximumClusterNodeCorestoreEndpointLength = 2048;

/**
 * Every reason a node's Corestore endpoint is refused. The checks run in layers: a value of the
 * wrong shape, of the wrong length, or that does not parse says nothing more worth reporting, so
 * each of those answers alone; a parsed URL answers every way it differs from an exact http(s)
 * origin at once.
 */
export const validateClusterNodeCorestore = (
  valueArg: unknown,
  pathArg = 'cluster node corestore',
): string[] => {
  if (
    !isRecord(valueArg)
    || Object.keys(valueArg).join(',') !== 'endpoint'
    || !isOwnDataProperty(valueArg, 'endpoint')
  ) {
    return [`${pathArg} must use its exact schema`];
  }
  const endpoint = readOwnDataValue(valueArg, 'endpoint');
  const endpointPath = `${pathArg} endpoint`;
  if (
    typeof endpoint !== 'string'
    || endpoint.length < 1
    || endpoint.length > maximumClusterNodeCorestoreEndpointLength
  ) {
    return [`${endpointPath} must be a string of 1 to ${maximumClusterNodeCorestoreEndpointLength} characters`];
  }
  const parsed = parseUrlOrNull(endpoint);
  if (parsed === null) {
    return [`${endpointPath} must be a parsable URL`];
  }
  return collectCanonicalHttpOriginReasons(parsed, endpoint, endpointPath);
};

/**
 * Limits of the runtime network's protection that node reports must respect. Project's own
 * definition of the constant the contract names; the runtime network manager imports it from
 * here so both sides read one number.
 */
export const runtimeNetworkProtectionContract = Object.freeze({
  /** Most IPv4 addresses one node report may state for its host. */
  maximumHostAddresses: 32,
} as const);

/**
 * Admits an IPv4 address a node's host may carry on an uplink it does not manage: a dotted quad
 * without leading zeros that is unicast (not unspecified, loopback, link-local, multicast,
 * reserved or broadcast).
 */
export const runtimeNodeUplinkAddress = (valueArg: unknown): valueArg is string =>
  isPlausibleUnicastIpv4(valueArg);

/**
 * Every reason a report's `hostAddresses` is refused: an array of uplink addresses, never empty,
 * at most `runtimeNetworkProtectionContract.maximumHostAddresses`, strictly ascending as strings
 * (which also makes it unique). An array longer than the limit answers that reason alone, so a
 * hostile report costs no more than the limit to judge.
 */
export const validateClusterNodeHostAddresses = (
  valueArg: unknown,
  pathArg = 'hostAddresses',
): string[] => {
  const list = readBoundedDataList(valueArg, runtimeNetworkProtectionContract.maximumHostAddresses, pathArg, {
    entries: 'addresses',
    notArray: 'must be an array of IPv4 addresses when present',
  });
  if ('reason' in list) {
    return [list.reason];
  }
  const { entries } = list;
  if (entries.length === 0) {
    return [`${pathArg} must not be empty when present; omit it to state nothing`];
  }
  const reasons: string[] = [];
  entries.forEach((entry, index) => {
    if (!runtimeNodeUplinkAddress(entry)) {
      reasons.push(`${pathArg}[${index}] must be a unicast IPv4 uplink address`);
      return;
    }
    const previous = index > 0 ? entries[index - 1] : undefined;
    if (!runtimeNodeUplinkAddress(previous)) {
      // Ordering against a refused neighbour would only repeat that neighbour's reason.
      return;
    }
    if (previous === entry) {
      reasons.push(`${pathArg}[${index}] repeats ${entry}; addresses must be unique`);
    } else if (previous > entry) {
      reasons.push(`${pathArg}[${index}] must sort after ${pathArg}[${index - 1}] as a string`);
    }
  });
  return reasons;
};

/** Longest node name admitted. Project's own definition. */
export const maximumClusterNodeNameLength = 128;

/**
 * The node name rule as one pattern (no control characters, no whitespace at either end), for
 * schemas; `isClusterNodeName` tests the same rule and the length.
 */
// eslint-disable-next-line no-control-regex
export const clusterNodeNamePattern = /^(?!\s)(?![\s\S]*\s$)[^\u0000-\u001f\u007f]*$/;

/** A node name: 1-128 characters, no control characters, no surrounding whitespace. */
export const isClusterNodeName = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string'
  && valueArg.length >= 1
  && valueArg.length <= maximumClusterNodeNameLength
  && valueArg.trim() === valueArg
  // eslint-disable-next-line no-control-regex
  && !/[\u0000-\u001f\u007f]/.test(valueArg);

/** A node id follows the project's identifier rule. */
export const isClusterNodeId = (valueArg: unknown): valueArg is string => isCanonicalId(valueArg);

/** How Cloudly came to know a node. Project's own definition. */
export type TClusterNodeSource = 'admin' | 'relay-report';

/**
 * One node of a cluster as Cloudly stores it. Project's own minimal definition: the upstream
 * document carries much more; this holds what the described behaviour needs.
 */
export interface IClusterNode {
  /** Unique within its cluster. */
  id: string;
  clusterId: string;
  name: string;
  /** Server-managed; bumps on every committed change. */
  generation: number;
  /** Epoch milliseconds. */
  createdAt: number;
  source: TClusterNodeSource;
  /** Absent: this node runs no Corestore the relay may reach. Never defaulted or guessed. */
  corestore?: IClusterNodeCorestore;
  /** The IPv4 addresses the node's host last reported on unmanaged interfaces; absent states nothing. */
  hostAddresses?: string[];
  /** Epoch milliseconds of the last node report, when one was received. */
  reportedAt?: number;
}

/**
 * What a relay reports about one node of its own cluster. Project's own definition: the cluster
 * is never named here, it is the cluster of the relay's socket.
 */
export interface IClusterNodeReport {
  nodeId: string;
  /** The node's name; required when the report introduces a node Cloudly does not know yet. */
  name?: string;
  hostAddresses?: string[];
}

const clusterNodeReportKeys = ['nodeId', 'name', 'hostAddresses'] as const;

/** Every reason a node report is refused. */
export const validateClusterNodeReport = (valueArg: unknown, pathArg = 'report'): string[] => {
  if (!isRecord(valueArg)) {
    return [`${pathArg} must be an object`];
  }
  const reasons = collectMemberReasons(valueArg, clusterNodeReportKeys, pathArg, 'a node report');
  if (!isClusterNodeId(readOwnDataValue(valueArg, 'nodeId'))) {
    reasons.push(`${pathArg}.nodeId must be a node id (letters, digits, '.', '_', '-'; 1-128 characters)`);
  }
  if (Object.hasOwn(valueArg, 'name') && !isClusterNodeName(readOwnDataValue(valueArg, 'name'))) {
    reasons.push(`${pathArg}.name must be 1-${maximumClusterNodeNameLength} characters without control characters or surrounding spaces`);
  }
  if (Object.hasOwn(valueArg, 'hostAddresses')) {
    reasons.push(...validateClusterNodeHostAddresses(readOwnDataValue(valueArg, 'hostAddresses'), `${pathArg}.hostAddresses`));
  }
  return reasons;
};
