import { isCanonicalId, isRecord } from '../private/dataproperties.js';
import { collectCanonicalHttpOriginReasons, parseUrlOrNull } from '../private/httporigin.js';
import { collectMemberReasons, readBoundedDataList, readOwnDataValue } from '../private/ownproperties.js';
import { isClusterNodeId, validateClusterNodeHostAddresses } from './clusternode.js';
import {
  snapshotClusterNetworkPolicyAuthority,
  validateClusterNetworkPolicyAuthority,
  type IClusterNetworkPolicyAuthority,
} from './servicenetworkpolicy.js';

/** Limits of relay registrations. Project's own definition. */
export const clusterRelayRegistrationContract = Object.freeze({
  maximumOriginLength: 2048,
  maximumVersionLength: 128,
  maximumProtocolLength: 128,
  /** Most cluster ids one `getClusterRelayRegistrations` may name. */
  maximumQueryClusterIds: 1024,
} as const);

/**
 * The relay of a cluster as others reach it. Project's own definition; `origin` is the exact
 * http(s) origin the relay listens on (what `SERVEZONE_CLUSTER_RELAY_ORIGIN` carries).
 */
export interface IClusterRelay {
  origin: string;
}

/**
 * What a relay announces about itself over its own authenticated socket. Project's own
 * definition. The cluster is not named: it is the cluster the socket's relay token belongs to.
 */
export interface IClusterRelayAnnouncement extends IClusterRelay {
  /** The relay software's version, free text. */
  version: string;
  /** The relay protocol the relay speaks, e.g. `cluster-relay/1`. */
  protocol: string;
  /**
   * The node whose host carries the relay listener and the cluster's hub. Optional: a relay that
   * does not name it states nothing, and no platform endpoint is derived from its registration.
   */
  nodeId?: string;
  /**
   * The IPv4 addresses that host carries beside the node's own interfaces, as a node report's
   * `hostAddresses` states them (sorted, unique, 1 to 32 uplink addresses); only with `nodeId`.
   * Cloudly names every plan platform endpoint at one of them in that node's
   * `hostPlatformEndpointIds`, and never hands one of them to a workload.
   */
  hostAddresses?: string[];
  /**
   * What the cluster's runtime can run, as its relay states it. Optional: a relay that does not
   * state it claims nothing, and Cloudly refuses nothing on it (the `*-unsupported` runtime
   * refusals need a stated capability to judge against).
   */
  capabilities?: IClusterRelayCapabilities;
}

/** The protocols a workload port can have. */
export const clusterRelayPortProtocols = Object.freeze(['tcp', 'udp'] as const);

/**
 * What a cluster's runtime supports, stated by its relay. Project's own definition: the spec
 * names the `platform-unsupported`, `secrets-unsupported`, `volumes-unsupported` and
 * `port-protocol-unsupported` refusals but not where the producer learns what is supported.
 */
export interface IClusterRelayCapabilities {
  /** The platform binding capabilities (`database`, `objectstorage`) its nodes can serve. */
  platforms: string[];
  /** Whether it delivers secrets (a binding's credentials) to workloads. */
  secrets: boolean;
  /** Whether it mounts volumes (local storage claims). */
  volumes: boolean;
  /** The port protocols its workloads may listen on. */
  portProtocols: Array<(typeof clusterRelayPortProtocols)[number]>;
  /**
   * What the cluster's network authority enforces of a service's network policy: the egress kinds
   * it expresses and the nodes it governs. Absent: it enforces none, and a service that requests a
   * policy is refused `network-policy-missing` (docs/api/services.md, "Network policy").
   */
  networkPolicy?: IClusterNetworkPolicyAuthority;
}

const capabilityKeys = ['platforms', 'secrets', 'volumes', 'portProtocols', 'networkPolicy'] as const;
const platformNamePattern = /^[a-z][a-z0-9-]{0,63}$/;

/** Every reason a value is not a relay's capability statement, in the order of its members. */
export const validateClusterRelayCapabilities = (valueArg: unknown, pathArg = 'capabilities'): string[] => {
  if (!isRecord(valueArg)) {
    return [`${pathArg} must be an object`];
  }
  const reasons = collectMemberReasons(valueArg, capabilityKeys, pathArg, 'relay capabilities');
  const platforms = readBoundedDataList(readOwnDataValue(valueArg, 'platforms'), 32, `${pathArg}.platforms`, {
    entries: 'platform names',
    notArray: 'must be an array of platform names',
  });
  if ('reason' in platforms) {
    reasons.push(platforms.reason);
  } else {
    platforms.entries.forEach((entry, index) => {
      if (typeof entry !== 'string' || !platformNamePattern.test(entry)) {
        reasons.push(`${pathArg}.platforms[${index}] must be a lowercase platform name`);
      } else if (platforms.entries.indexOf(entry) !== index) {
        reasons.push(`${pathArg}.platforms[${index}] repeats a platform`);
      }
    });
  }
  for (const key of ['secrets', 'volumes'] as const) {
    if (typeof readOwnDataValue(valueArg, key) !== 'boolean') {
      reasons.push(`${pathArg}.${key} must be true or false`);
    }
  }
  const protocols = readBoundedDataList(readOwnDataValue(valueArg, 'portProtocols'), clusterRelayPortProtocols.length, `${pathArg}.portProtocols`, {
    entries: 'port protocols',
    notArray: 'must be an array of port protocols',
  });
  if ('reason' in protocols) {
    reasons.push(protocols.reason);
  } else {
    protocols.entries.forEach((entry, index) => {
      if (!(clusterRelayPortProtocols as readonly unknown[]).includes(entry)) {
        reasons.push(`${pathArg}.portProtocols[${index}] must be tcp or udp`);
      } else if (protocols.entries.indexOf(entry) !== index) {
        reasons.push(`${pathArg}.portProtocols[${index}] repeats a protocol`);
      }
    });
  }
  if (Object.hasOwn(valueArg, 'networkPolicy')) {
    reasons.push(...validateClusterNetworkPolicyAuthority(readOwnDataValue(valueArg, 'networkPolicy'), `${pathArg}.networkPolicy`));
  }
  return reasons;
};

/** A detached copy of a valid capability statement. */
export const snapshotClusterRelayCapabilities = (valueArg: IClusterRelayCapabilities): IClusterRelayCapabilities => ({
  platforms: [...valueArg.platforms],
  secrets: valueArg.secrets,
  volumes: valueArg.volumes,
  portProtocols: [...valueArg.portProtocols],
  ...(valueArg.networkPolicy !== undefined ? { networkPolicy: snapshotClusterNetworkPolicyAuthority(valueArg.networkPolicy) } : {}),
});

/**
 * A relay registration Cloudly accepted, one per cluster (the latest replaces the previous).
 * Project's own definition.
 */
export interface IClusterRelayRegistration extends IClusterRelayAnnouncement {
  clusterId: string;
  /** Epoch milliseconds when Cloudly accepted this registration. */
  acceptedAt: number;
  /** Server-managed; bumps on every accepted registration of the cluster. */
  generation: number;
  /**
   * Whether a verified relay socket of this cluster holds the cluster's election at the instant
   * of the answer. Computed per answer, never stored.
   */
  connected: boolean;
}

const isBoundedText = (valueArg: unknown, maximumArg: number): valueArg is string =>
  typeof valueArg === 'string'
  && valueArg.length >= 1
  && valueArg.length <= maximumArg
  && valueArg.trim() === valueArg
  // eslint-disable-next-line no-control-regex
  && !/[\u0000-\u001f\u007f]/.test(valueArg);

/** Every reason a relay origin is refused: an exact http(s) origin of at most 2048 characters. */
export const validateClusterRelayOrigin = (valueArg: unknown, pathArg = 'origin'): string[] => {
  const maximum = clusterRelayRegistrationContract.maximumOriginLength;
  if (typeof valueArg !== 'string' || valueArg.length < 1 || valueArg.length > maximum) {
    return [`${pathArg} must be a string of 1 to ${maximum} characters`];
  }
  const parsed = parseUrlOrNull(valueArg);
  if (parsed === null) {
    return [`${pathArg} does not parse as a URL`];
  }
  return collectCanonicalHttpOriginReasons(parsed, valueArg, pathArg);
};

const announcementKeys = ['origin', 'version', 'protocol', 'nodeId', 'hostAddresses', 'capabilities'] as const;

/** Every reason a relay announcement is refused, in the order of its members. */
export const validateClusterRelayAnnouncement = (valueArg: unknown, pathArg = 'registration'): string[] => {
  if (!isRecord(valueArg)) {
    return [`${pathArg} must be an object`];
  }
  const reasons = collectMemberReasons(valueArg, announcementKeys, pathArg, 'a relay registration');
  reasons.push(...validateClusterRelayOrigin(readOwnDataValue(valueArg, 'origin'), `${pathArg}.origin`));
  const { maximumVersionLength, maximumProtocolLength } = clusterRelayRegistrationContract;
  if (!isBoundedText(readOwnDataValue(valueArg, 'version'), maximumVersionLength)) {
    reasons.push(`${pathArg}.version must be 1-${maximumVersionLength} characters without control characters or surrounding spaces`);
  }
  if (!isBoundedText(readOwnDataValue(valueArg, 'protocol'), maximumProtocolLength)) {
    reasons.push(`${pathArg}.protocol must be 1-${maximumProtocolLength} characters without control characters or surrounding spaces`);
  }
  const nodeId = readOwnDataValue(valueArg, 'nodeId');
  if (nodeId !== undefined && !isClusterNodeId(nodeId)) {
    reasons.push(`${pathArg}.nodeId must be a node id (letters, digits, '.', '_', '-'; 1-128 characters)`);
  }
  const hostAddresses = readOwnDataValue(valueArg, 'hostAddresses');
  if (hostAddresses !== undefined) {
    if (nodeId === undefined) {
      reasons.push(`${pathArg}.hostAddresses needs ${pathArg}.nodeId: addresses are stated for the node whose host carries them`);
    }
    reasons.push(...validateClusterNodeHostAddresses(hostAddresses, `${pathArg}.hostAddresses`));
  }
  const capabilities = readOwnDataValue(valueArg, 'capabilities');
  if (capabilities !== undefined) {
    reasons.push(...validateClusterRelayCapabilities(capabilities, `${pathArg}.capabilities`));
  }
  return reasons;
};

/**
 * Every reason the `clusterIds` of `getClusterRelayRegistrations` is refused: when present, an
 * array of at most 1024 unique cluster ids. An empty array is admitted and narrows to nothing.
 */
export const validateClusterRelayRegistrationQueryIds = (valueArg: unknown, pathArg = 'clusterIds'): string[] => {
  const list = readBoundedDataList(valueArg, clusterRelayRegistrationContract.maximumQueryClusterIds, pathArg, {
    entries: 'cluster ids',
    notArray: 'must be an array of cluster ids when present',
  });
  if ('reason' in list) {
    return [list.reason];
  }
  const { entries } = list;
  const reasons: string[] = [];
  const seen = new Set<string>();
  entries.forEach((entry, index) => {
    if (!isCanonicalId(entry)) {
      reasons.push(`${pathArg}[${index}] must be a cluster id (letters, digits, '.', '_', '-'; 1-128 characters)`);
    } else if (seen.has(entry)) {
      reasons.push(`${pathArg}[${index}] repeats cluster ${entry}`);
    } else {
      seen.add(entry);
    }
  });
  return reasons;
};
