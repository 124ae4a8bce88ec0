import {
  isCanonicalId,
  isCounter,
  isRecord,
  type TPlainRecord,
} from '../private/dataproperties.js';
import { isOwnDataProperty, readExactDataRecordOrNull, readOwnDataValue } from '../private/ownproperties.js';
import { type IProtocolOffer, validateProtocolOffer } from '../protocol/protocol.js';
import type { ISecretVersionReference } from './secret.js';
import type { IServiceRuntimeSpec } from './service.js';

/**
 * A cluster ingress: the proxy workload that serves a cluster's public traffic. It announces itself
 * to Cloudly with `registerClusterIngress`, forwarded by the cluster's relay, and pulls its route
 * table from the relay.
 */

/**
 * The protocol Cloudly and a cluster ingress speak on `registerClusterIngress`. An accepted
 * registration answers this offer back. Project's own definition.
 */
export const clusterIngressProtocolOffer: IProtocolOffer = Object.freeze({
  name: 'serve.zone/cluster-ingress',
  minimumVersion: 1,
  maximumVersion: 1,
});

/** Bounds of a registration body. Project's own definition. */
export const clusterIngressRegistrationLimits = Object.freeze({
  minimumBearerLength: 32,
  maximumBearerLength: 1024,
  maximumVersionLength: 64,
  maximumCapabilities: 32,
  maximumCapabilityLength: 64,
} as const);

/** The body of `registerClusterIngress`, as the ingress sends it. Project's own definition. */
export interface IClusterIngressRegistration {
  /** The designation's current credential; a secret, never logged or quoted back. */
  bearer: string;
  /** The ingress software's own version, for operators. */
  version: string;
  /** The node the ingress runs on; repeats `SERVEZONE_CLUSTER_NODE_ID`. */
  nodeId: string;
  /** Optional feature names the ingress supports, unique. */
  capabilities?: string[];
  protocol: IProtocolOffer;
}

/** What an accepted registration answers: the current route-table revision and Cloudly's offer. */
export interface IClusterIngressRegistrationAcceptance {
  accepted: true;
  /** The revision of the route table Cloudly holds now, `null` when none is computed yet. */
  revision: number | null;
  protocol: IProtocolOffer;
}

export const clusterIngressBearerPattern = /^[A-Za-z0-9._~+/=-]+$/;
export const clusterIngressVersionPattern = /^[0-9A-Za-z][0-9A-Za-z.+_-]*$/;
const capabilityPattern = /^[a-z0-9][a-z0-9.-]*$/;

/**
 * Names every reason a value is not a registration body. The bearer is judged by its shape only and
 * no reason ever repeats it. Never throws.
 */
export const validateClusterIngressRegistration = (
  valueArg: unknown,
  pathArg = 'cluster ingress registration',
): string[] => {
  try {
    if (!isRecord(valueArg)) {
      return [`${pathArg} must be a record`];
    }
    const reasons: string[] = [];
    const allowed = new Set(['bearer', 'version', 'nodeId', 'capabilities', 'protocol']);
    for (const key of Object.keys(valueArg).sort()) {
      if (!allowed.has(key)) {
        reasons.push(`${pathArg} must not carry ${JSON.stringify(key.slice(0, 64))}`);
      }
    }
    for (const key of ['bearer', 'version', 'nodeId', 'capabilities', 'protocol']) {
      if (Object.hasOwn(valueArg, key) && !isOwnDataProperty(valueArg, key)) {
        reasons.push(`${pathArg}.${key} must be a plain data property`);
      }
    }
    const limits = clusterIngressRegistrationLimits;
    const bearer = readOwnDataValue(valueArg, 'bearer');
    if (
      typeof bearer !== 'string'
      || bearer.length < limits.minimumBearerLength
      || bearer.length > limits.maximumBearerLength
      || !clusterIngressBearerPattern.test(bearer)
    ) {
      reasons.push(`${pathArg}.bearer must be ${limits.minimumBearerLength} to ${limits.maximumBearerLength} `
        + 'token characters');
    }
    const version = readOwnDataValue(valueArg, 'version');
    if (typeof version !== 'string' || version.length > limits.maximumVersionLength || !clusterIngressVersionPattern.test(version)) {
      reasons.push(`${pathArg}.version must be 1 to ${limits.maximumVersionLength} version characters`);
    }
    if (!isCanonicalId(readOwnDataValue(valueArg, 'nodeId'))) {
      reasons.push(`${pathArg}.nodeId must be a node id`);
    }
    if (Object.hasOwn(valueArg, 'capabilities')) {
      reasons.push(...validateCapabilities(readOwnDataValue(valueArg, 'capabilities'), `${pathArg}.capabilities`));
    }
    reasons.push(...validateProtocolOffer(readOwnDataValue(valueArg, 'protocol'), `${pathArg}.protocol`));
    return reasons;
  } catch {
    return [`${pathArg} could not be read as plain data`];
  }
};

const validateCapabilities = (valueArg: unknown, pathArg: string): string[] => {
  const limits = clusterIngressRegistrationLimits;
  if (!Array.isArray(valueArg) || Object.getPrototypeOf(valueArg) !== Array.prototype) {
    return [`${pathArg} must be an array when present`];
  }
  if (valueArg.length > limits.maximumCapabilities) {
    return [`${pathArg} must hold at most ${limits.maximumCapabilities} entries`];
  }
  const reasons: string[] = [];
  const seen = new Set<string>();
  for (let index = 0; index < valueArg.length; index += 1) {
    const descriptor = Object.getOwnPropertyDescriptor(valueArg, index);
    const capability: unknown = descriptor?.value;
    if (
      typeof capability !== 'string'
      || capability.length > limits.maximumCapabilityLength
      || !capabilityPattern.test(capability)
    ) {
      reasons.push(`${pathArg}[${index}] must be a lowercase capability name of at most `
        + `${limits.maximumCapabilityLength} characters`);
    } else if (seen.has(capability)) {
      reasons.push(`${pathArg}[${index}] repeats a capability`);
    } else {
      seen.add(capability);
    }
  }
  return reasons;
};

/**
 * The environment variable names Cloudly writes into the ingress workload and the ingress reads:
 * the registration bearer (delivered as a secret), the relay's exact origin, and the node the
 * assignment runs on.
 */
export const clusterIngressEnvironmentNames = Object.freeze({
  bearer: 'SERVEZONE_CLUSTER_INGRESS_BEARER',
  relayOrigin: 'SERVEZONE_CLUSTER_RELAY_ORIGIN',
  nodeId: 'SERVEZONE_CLUSTER_NODE_ID',
} as const);

/**
 * Why Cloudly refuses a registration, in the order it checks them; the earliest failing check is
 * the one answered. A protocol mismatch is judged before all of these and answered as the
 * `IProtocolRefusal` of the protocol module, so it has no name here.
 */
export const clusterIngressRegistrationRefusalReasons = Object.freeze([
  /** Cloudly is starting, stopping or lacks what it needs to judge. */
  'not-ready',
  /** The body fails `validateClusterIngressRegistration`. */
  'registration-invalid',
  /** The forwarding relay is not the connection Cloudly elected for the cluster. */
  'relay-not-connected',
  /** The cluster has no current ingress designation. */
  'ingress-not-designated',
  /** The designation does not let the ingress run on the named node. */
  'node-mismatch',
  /** No ready assignment of the ingress service on that node, under its current session, with the current credential. */
  'assignment-not-running',
  /** The bearer is not the designation's current credential. */
  'bearer-refused',
  /** Designation, assignment or session changed while the registration was being judged. */
  'conflict',
] as const);

export type TClusterIngressRegistrationRefusalReason = typeof clusterIngressRegistrationRefusalReasons[number];

export const clusterIngressRegistrationContract = Object.freeze({
  refusalCode: 'cluster-ingress-registration-refused',
  minimumRetryAfterMs: 1_000,
  maximumRetryAfterMs: 300_000,
} as const);

/**
 * A named registration refusal, carried as `TypedResponseError.errorData` and forwarded by the relay
 * as it is. `retryAfterMs` tells the ingress how long to wait before registering again. It never
 * carries the bearer or anything computed from it.
 */
export interface IClusterIngressRegistrationRefusal {
  code: 'cluster-ingress-registration-refused';
  reason: TClusterIngressRegistrationRefusalReason;
  retryAfterMs: number;
}

const isRetryAfterMs = (valueArg: unknown): valueArg is number =>
  Number.isSafeInteger(valueArg)
  && (valueArg as number) >= clusterIngressRegistrationContract.minimumRetryAfterMs
  && (valueArg as number) <= clusterIngressRegistrationContract.maximumRetryAfterMs;

/** Names every reason a value is not a registration refusal. Never throws. */
export const validateClusterIngressRegistrationRefusal = (
  valueArg: unknown,
  pathArg = 'cluster ingress registration refusal',
): string[] => {
  const refusal = readExactDataRecordOrNull(valueArg, ['code', 'reason', 'retryAfterMs']);
  if (refusal === null) {
    return [`${pathArg} must use its exact schema`];
  }
  const reasons: string[] = [];
  if (readOwnDataValue(refusal, 'code') !== clusterIngressRegistrationContract.refusalCode) {
    reasons.push(`${pathArg} code must be ${clusterIngressRegistrationContract.refusalCode}`);
  }
  if (!(clusterIngressRegistrationRefusalReasons as readonly unknown[]).includes(readOwnDataValue(refusal, 'reason'))) {
    reasons.push(`${pathArg} reason must be a cluster ingress registration refusal reason`);
  }
  if (!isRetryAfterMs(readOwnDataValue(refusal, 'retryAfterMs'))) {
    reasons.push(`${pathArg} retryAfterMs must be an integer from `
      + `${clusterIngressRegistrationContract.minimumRetryAfterMs} to `
      + `${clusterIngressRegistrationContract.maximumRetryAfterMs}`);
  }
  return reasons;
};

/**
 * The registration refusal in an error payload that crossed a wire, or `null` when the payload is
 * something else (a protocol refusal, a generic error). Reads plain own data only.
 */
export const readClusterIngressRegistrationRefusal = (
  valueArg: unknown,
): IClusterIngressRegistrationRefusal | null => {
  if (validateClusterIngressRegistrationRefusal(valueArg).length > 0) {
    return null;
  }
  const refusal = valueArg as TPlainRecord;
  return Object.freeze({
    code: clusterIngressRegistrationContract.refusalCode,
    reason: readOwnDataValue(refusal, 'reason') as TClusterIngressRegistrationRefusalReason,
    retryAfterMs: readOwnDataValue(refusal, 'retryAfterMs') as number,
  });
};

/**
 * The hint that a newer route table exists. Only a revision, nothing secret, so it may be logged.
 * The ingress pulls the table with the revision it applied and drops a hint that is not newer.
 */
export interface IClusterIngressRouteTableChange {
  revision: number;
}

/** Names every reason a value is not a route-table change hint. Never throws. */
export const validateClusterIngressRouteTableChange = (
  valueArg: unknown,
  pathArg = 'cluster ingress route table change',
): string[] => {
  const change = readExactDataRecordOrNull(valueArg, ['revision']);
  if (change === null) {
    return [`${pathArg} must use its exact schema`];
  }
  return isCounter(readOwnDataValue(change, 'revision'))
    ? []
    : [`${pathArg} revision must be a non-negative safe integer`];
};

/**
 * One public hostname the ingress serves and the service behind it, as a service declares it
 * (`service.routes`, resolved to the port it names). Project's own definition.
 */
export interface IClusterIngressRoute {
  hostname: string;
  serviceId: string;
  /** The service's listening port the ingress forwards to. */
  port: number;
  /** `acme`: the route opted in to a certificate; the relay fetches it with `getClusterRouteCertificates`. */
  certificate?: 'acme';
}

/** Where the ingress sends a route's traffic: one confirmed lease of the routed service the ingress is granted. Project's own definition. */
export interface IClusterIngressRouteTarget {
  lease: { id: string; generation: number };
  nodeId: string;
  address: string;
  port: number;
}

/**
 * A route with the lease addresses Cloudly routes it to: only once a workload ingress grant from
 * the ingress to that lease exists (spec: Cloudly routes a cluster ingress route to the target
 * lease address and port once the grant exists). Never empty: a route without a target is not in
 * the table yet. Project's own definition.
 */
export interface IClusterIngressResolvedRoute extends IClusterIngressRoute {
  targets: IClusterIngressRouteTarget[];
}

/**
 * The cluster's one route table: the routes its live services declare, resolved to lease targets.
 * `revision` grows by one with every change of `routes` and never goes back; a table that exists is
 * never replaced by `null` (`null` is "Cloudly has computed none yet"). Project's own definition.
 */
export interface IClusterIngressRouteTable {
  clusterId: string;
  revision: number;
  /** Sorted by hostname, one route per hostname. */
  routes: IClusterIngressResolvedRoute[];
}

/**
 * One environment value of a prepared workload spec: a literal, or a reference to a secret version
 * that only the node resolves. Project's own definition.
 */
export type TClusterIngressEnvironmentValue =
  | { value: string }
  | { secret: ISecretVersionReference };

/** The ingress workload as it is to run on one node. Project's own definition. */
export interface IClusterIngressNodeSpec {
  nodeId: string;
  /** Keyed by variable name; carries every name of `clusterIngressEnvironmentNames`. */
  environment: Record<string, TClusterIngressEnvironmentValue>;
}

/**
 * The ingress service's runtime spec prepared for the designation: the service's own spec at the
 * revision the designation was accepted against, and, per placement node, the environment with the
 * three ingress names filled in. The bearer appears only as a secret reference. Project's own
 * definition.
 */
export interface IClusterIngressPreparedSpec {
  serviceId: string;
  specRevision: number;
  /** The service's runtime spec at `specRevision`, unchanged. */
  runtime: IServiceRuntimeSpec;
  nodes: IClusterIngressNodeSpec[];
}
