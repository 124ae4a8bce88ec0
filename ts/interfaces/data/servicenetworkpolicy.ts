import {
  readServiceDataArray,
  readServiceDataField,
  readServiceDataRecord,
  reasonsForUnknownKeys,
  validateServiceCanonicalId,
} from '../private/servicecontract.js';

/**
 * A service's network policy and what a cluster's network authority can enforce of one. Project's
 * own definition: the spec names the refusals `network-policy-missing` and
 * `network-policy-mismatch` ("a disagreement with the requested egress or placement") but shapes
 * neither the policy a service requests nor where the producer learns what the authority enforces.
 */

/** The egress kinds a policy may request, in the order they widen. */
export const serviceNetworkEgressKinds = Object.freeze(['none', 'mesh', 'destinations'] as const);
export type TServiceNetworkEgressKind = (typeof serviceNetworkEgressKinds)[number];

/** One destination a workload may open connections to: a DNS name or an IPv4 address, a port and a protocol. */
export interface IServiceEgressDestination {
  host: string;
  port: number;
  protocol: 'tcp' | 'udp';
}

/**
 * Where a workload may open connections: nowhere (`none`), to the workloads of its own
 * organization (`mesh`, the runtime network's full mesh), or only to the named `destinations`.
 * Replies to connections opened towards the workload are not egress.
 */
export type TServiceNetworkEgress =
  | { kind: 'none' }
  | { kind: 'mesh' }
  | { kind: 'destinations'; destinations: IServiceEgressDestination[] };

export interface IServiceNetworkPolicy {
  egress: TServiceNetworkEgress;
}

/**
 * What a cluster's network authority enforces, as the cluster's relay states it in its
 * capabilities: the egress kinds it can express, and the nodes whose traffic it governs (absent:
 * every node of the cluster).
 */
export interface IClusterNetworkPolicyAuthority {
  egress: TServiceNetworkEgressKind[];
  nodeIds?: string[];
}

/** Project's own limits. */
export const serviceNetworkPolicyLimits = Object.freeze({
  maximumDestinations: 64,
  maximumHostLength: 253,
  /** Most nodes an authority statement names. */
  maximumAuthorityNodes: 1024,
} as const);

/** The syntax of a destination's host; an all-digit name must also be an IPv4 address (octets up to 255). */
export const serviceEgressHostPattern = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;
const dottedNumbersPattern = /^[0-9]+(\.[0-9]+)*$/;

/** A lowercase DNS name, or an IPv4 address in dotted decimal (a name of digits only must be one). */
const isEgressHost = (valueArg: unknown): boolean => {
  if (typeof valueArg !== 'string' || !serviceEgressHostPattern.test(valueArg)) {
    return false;
  }
  if (!dottedNumbersPattern.test(valueArg)) {
    return true;
  }
  const octets = valueArg.split('.');
  return octets.length === 4 && octets.every((octet) => Number(octet) <= 255 && (octet === '0' || !octet.startsWith('0')));
};

const validateEgressDestination = (valueArg: unknown, pathArg: string): string[] => {
  const record = readServiceDataRecord(valueArg);
  if (record === null) {
    return [`${pathArg} must be { host, port, protocol }`];
  }
  const reasons = reasonsForUnknownKeys(record, ['host', 'port', 'protocol'], pathArg);
  if (!isEgressHost(readServiceDataField(record, 'host'))) {
    reasons.push(`${pathArg}.host must be a lowercase DNS name or an IPv4 address`);
  }
  const port = readServiceDataField(record, 'port');
  if (!Number.isSafeInteger(port) || (port as number) < 1 || (port as number) > 65535) {
    reasons.push(`${pathArg}.port must be an integer from 1 to 65535`);
  }
  const protocol = readServiceDataField(record, 'protocol');
  if (protocol !== 'tcp' && protocol !== 'udp') {
    reasons.push(`${pathArg}.protocol must be tcp or udp`);
  }
  return reasons;
};

/**
 * Every reason the `networkPolicy` member of a writable service spec is not valid; absent or null
 * is no policy requested.
 */
export const validateServiceNetworkPolicy = (recordArg: Record<string, unknown>, pathArg: string): string[] => {
  const value = readServiceDataField(recordArg, 'networkPolicy');
  if (value === undefined || value === null) {
    return [];
  }
  const path = `${pathArg}.networkPolicy`;
  const policy = readServiceDataRecord(value);
  if (policy === null) {
    return [`${path} must be { egress } or null`];
  }
  const reasons = reasonsForUnknownKeys(policy, ['egress'], path);
  const egress = readServiceDataRecord(readServiceDataField(policy, 'egress'));
  const kind = egress === null ? undefined : readServiceDataField(egress, 'kind');
  if (egress === null || !(serviceNetworkEgressKinds as readonly unknown[]).includes(kind)) {
    reasons.push(`${path}.egress must be { kind: 'none' }, { kind: 'mesh' } or { kind: 'destinations', destinations }`);
    return reasons;
  }
  if (kind !== 'destinations') {
    reasons.push(...reasonsForUnknownKeys(egress, ['kind'], `${path}.egress`));
    return reasons;
  }
  reasons.push(...reasonsForUnknownKeys(egress, ['kind', 'destinations'], `${path}.egress`));
  const destinations = readServiceDataArray(readServiceDataField(egress, 'destinations'), serviceNetworkPolicyLimits.maximumDestinations);
  if (destinations === null || destinations.length === 0) {
    reasons.push(`${path}.egress.destinations must be an array of 1 to ${serviceNetworkPolicyLimits.maximumDestinations} destinations`);
    return reasons;
  }
  const seen = new Set<string>();
  destinations.forEach((destination, index) => {
    const destinationPath = `${path}.egress.destinations[${index}]`;
    const found = validateEgressDestination(destination, destinationPath);
    reasons.push(...found);
    if (found.length === 0) {
      const { host, port, protocol } = destination as IServiceEgressDestination;
      const key = `${host}:${port}/${protocol}`;
      if (seen.has(key)) {
        reasons.push(`${destinationPath} repeats the host, port and protocol of an earlier destination`);
      }
      seen.add(key);
    }
  });
  return reasons;
};

/** Detached copy of a valid network policy (member order fixed); null when none. */
export const snapshotServiceNetworkPolicy = (valueArg: IServiceNetworkPolicy | null | undefined): IServiceNetworkPolicy | null => {
  if (!valueArg) {
    return null;
  }
  const { egress } = valueArg;
  return egress.kind === 'destinations'
    ? { egress: { kind: 'destinations', destinations: egress.destinations.map((destination) => ({ host: destination.host, port: destination.port, protocol: destination.protocol })) } }
    : { egress: { kind: egress.kind } };
};

/** Every reason a value is not an authority statement (`capabilities.networkPolicy` of a relay registration). */
export const validateClusterNetworkPolicyAuthority = (valueArg: unknown, pathArg: string): string[] => {
  const record = readServiceDataRecord(valueArg);
  if (record === null) {
    return [`${pathArg} must be { egress, nodeIds? }`];
  }
  const reasons = reasonsForUnknownKeys(record, ['egress', 'nodeIds'], pathArg);
  const egress = readServiceDataArray(readServiceDataField(record, 'egress'), serviceNetworkEgressKinds.length);
  if (egress === null) {
    reasons.push(`${pathArg}.egress must be an array of egress kinds (none, mesh, destinations)`);
  } else {
    egress.forEach((kind, index) => {
      if (!(serviceNetworkEgressKinds as readonly unknown[]).includes(kind)) {
        reasons.push(`${pathArg}.egress[${index}] must be none, mesh or destinations`);
      } else if (egress.indexOf(kind) !== index) {
        reasons.push(`${pathArg}.egress[${index}] repeats an egress kind`);
      }
    });
  }
  if (Object.hasOwn(record, 'nodeIds')) {
    const nodeIds = readServiceDataArray(readServiceDataField(record, 'nodeIds'), serviceNetworkPolicyLimits.maximumAuthorityNodes);
    if (nodeIds === null) {
      reasons.push(`${pathArg}.nodeIds must be an array of at most ${serviceNetworkPolicyLimits.maximumAuthorityNodes} node ids`);
    } else {
      nodeIds.forEach((nodeId, index) => {
        const found = validateServiceCanonicalId(nodeId, `${pathArg}.nodeIds[${index}]`);
        reasons.push(...found);
        if (found.length === 0 && nodeIds.indexOf(nodeId) !== index) {
          reasons.push(`${pathArg}.nodeIds[${index}] repeats a node`);
        }
      });
    }
  }
  return reasons;
};

/** Detached copy of a valid authority statement. */
export const snapshotClusterNetworkPolicyAuthority = (valueArg: IClusterNetworkPolicyAuthority): IClusterNetworkPolicyAuthority => ({
  egress: [...valueArg.egress],
  ...(valueArg.nodeIds !== undefined ? { nodeIds: [...valueArg.nodeIds] } : {}),
});
