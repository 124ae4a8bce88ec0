import {
  readServiceDataArray,
  readServiceDataField,
  readServiceDataRecord,
  reasonsForUnknownKeys,
  validateServiceCanonicalId,
  validateServiceRunAsOwner,
} from '../private/servicecontract.js';
import { collectValidatorReasons } from '../private/dataproperties.js';
import { canonicalizeJson } from '../private/canonicaljson.js';
import type { IServiceVolume, TServiceWritableVolume } from './servicevolume.js';
import { validateServiceWritableVolume } from './servicevolume.js';
import { serviceNamingLimits, validateServiceImageReference, validateServiceName } from './servicenaming.js';
import {
  snapshotServiceEnvironment,
  snapshotServiceSecrets,
  validateServiceEnvironment,
  type TServiceEnvironment,
  type TServiceSecretEnvironment,
} from './serviceenvironment.js';
import { snapshotServiceNetworkPolicy, validateServiceNetworkPolicy, type IServiceNetworkPolicy } from './servicenetworkpolicy.js';

/**
 * A service as Cloudly stores it. Project's own minimal definition: the members the service
 * volume, runtime status, local storage claim, ingress and Corestore contracts read.
 */

/** Numeric owner the workload runs as (`profile.runAs`); null leaves the image's own user. */
export interface IServiceRunAs {
  user: number;
  group: number;
}

export interface IServiceRuntimeProfile {
  runAs: IServiceRunAs | null;
}

/** The nodes a service may run on. One node pins the service (and its volumes) to that node. */
export interface IServicePlacement {
  nodeIds: string[];
}

/** One port the workload listens on. Project's own definition. */
export interface IServicePort {
  /** Names the port for routes: lowercase letters, digits and `-`, 1–15 characters. */
  name: string;
  port: number;
  protocol: 'tcp' | 'udp';
}

/** One public hostname the cluster ingress routes to a named port of this service. Project's own definition. */
export interface IServiceRoute {
  hostname: string;
  /** The `name` of one of the service's tcp ports. */
  targetPort: string;
  /**
   * `acme`: Cloudly orders a certificate for the hostname by ACME HTTP-01 and hands it to the
   * cluster sealed (docs/tls.md, "Certificates for the fleet's routes"). Absent: no certificate.
   */
  certificate?: 'acme';
}

/**
 * How the runtime knows a replica is ready for traffic: an HTTP GET of `path` on one of the
 * service's tcp ports (by name), or a command run in the workload that exits 0. Project's own
 * definition; a service with routes, or designated as its cluster's ingress, must state one
 * (`readiness-target-undeclared`).
 */
export type TServiceReadinessTarget =
  | { kind: 'http'; port: string; path: string }
  | { kind: 'command'; command: string[] };

/**
 * Execution policy only, stored exactly: a relay that checks upstream's exact schema refuses a
 * runtime spec with any member it does not know, so nothing of the project's own goes in here
 * (ports and routes sit beside it, on the service). Its changes bump the service's `specRevision`.
 */
export interface IServiceRuntimeSpec {
  image: string;
  replicas: number;
  profile: IServiceRuntimeProfile;
  placement: IServicePlacement;
}

export interface IService {
  id: string;
  name: string;
  organizationId: string;
  /** The cluster the service runs on. */
  clusterId: string;
  /** Server-managed; bumps on every committed change (compare-and-swap token). */
  generation: number;
  /**
   * Server-managed; starts at 1 and bumps when what the nodes run changes: `runtime`, `ports` or
   * `routes` (the same three that bumped it when ports and routes still sat inside `runtime`).
   */
  specRevision: number;
  runtime: IServiceRuntimeSpec;
  /** Project's own member: the ports the workload listens on, beside the runtime spec. */
  ports: IServicePort[];
  /** Project's own member: the hostnames the cluster ingress routes to a port of it. */
  routes: IServiceRoute[];
  volumes: IServiceVolume[];
  /** Project's own member: plain environment entries (docs/api/services.md, "Environment and secrets"). */
  environment: TServiceEnvironment;
  /** Project's own member: environment entries whose values are secret versions, by reference only. */
  secrets: TServiceSecretEnvironment;
  /** Project's own member: the readiness target, or null when none is declared. */
  readiness: TServiceReadinessTarget | null;
  /**
   * Project's own member: the network policy the service requests (its egress), or null when it
   * requests none (docs/api/services.md, "Network policy").
   */
  networkPolicy: IServiceNetworkPolicy | null;
  createdAt: number;
  updatedAt: number;
}

/** What `createService` / `updateService` accept. */
export interface IServiceWritableSpec {
  name: string;
  organizationId: string;
  clusterId: string;
  runtime: IServiceRuntimeSpec;
  /** Absent means none. */
  ports?: IServicePort[];
  /** Absent means none; each names one of `ports` by name, and that port must be tcp. */
  routes?: IServiceRoute[];
  volumes: TServiceWritableVolume[];
  /** Absent means none. */
  environment?: TServiceEnvironment;
  /** Absent means none; a value in clear here is refused `secret-value-in-clear`. */
  secrets?: TServiceSecretEnvironment;
  /** Absent or null means none declared. */
  readiness?: TServiceReadinessTarget | null;
  /** Absent or null means no policy requested. */
  networkPolicy?: IServiceNetworkPolicy | null;
}

/** Project's own limits for the writable spec. */
export const serviceSpecLimits = Object.freeze({
  maximumNameLength: serviceNamingLimits.maximumNameLength,
  maximumImageLength: serviceNamingLimits.maximumImageLength,
  maximumReplicas: 1024,
  maximumPlacementNodes: 64,
  maximumVolumes: 64,
  // Beyond the runtime config's 64 target ports (`ports-too-many` is a runtime verdict, not an input refusal).
  maximumPorts: 1024,
  maximumRoutes: 64,
} as const);

const servicePortNamePattern = /^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$/;
const serviceRouteHostnamePattern = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** Every reason the ports and routes of a writable service spec are not valid, each by path. */
const validateServicePortsAndRoutes = (recordArg: Record<string, unknown>, pathArg: string): string[] => {
  const reasons: string[] = [];
  const portNames = new Map<string, string>();
  if (Object.hasOwn(recordArg, 'ports')) {
    const ports = readServiceDataArray(readServiceDataField(recordArg, 'ports'), serviceSpecLimits.maximumPorts);
    if (ports === null) {
      reasons.push(`${pathArg}.ports must be an array of at most ${serviceSpecLimits.maximumPorts} ports`);
    } else {
      const seenPorts = new Set<string>();
      ports.forEach((value, index) => {
        const path = `${pathArg}.ports[${index}]`;
        const port = readServiceDataRecord(value);
        if (port === null) {
          reasons.push(`${path} must be a plain object`);
          return;
        }
        reasons.push(...reasonsForUnknownKeys(port, ['name', 'port', 'protocol'], path));
        const name = readServiceDataField(port, 'name');
        const number = readServiceDataField(port, 'port');
        const protocol = readServiceDataField(port, 'protocol');
        if (typeof name !== 'string' || !servicePortNamePattern.test(name)) {
          reasons.push(`${path}.name must be 1-15 lowercase letters, digits or '-', not starting or ending with '-'`);
        } else if (portNames.has(name)) {
          reasons.push(`${path}.name repeats the name of an earlier port`);
        }
        if (!Number.isSafeInteger(number) || (number as number) < 1 || (number as number) > 65535) {
          reasons.push(`${path}.port must be an integer from 1 to 65535`);
        }
        if (protocol !== 'tcp' && protocol !== 'udp') {
          reasons.push(`${path}.protocol must be tcp or udp`);
        }
        if (typeof name === 'string' && !portNames.has(name)) {
          portNames.set(name, String(protocol));
        }
        const key = `${String(number)}/${String(protocol)}`;
        if (seenPorts.has(key)) {
          reasons.push(`${path} repeats the port and protocol of an earlier port`);
        }
        seenPorts.add(key);
      });
    }
  }
  if (Object.hasOwn(recordArg, 'routes')) {
    const routes = readServiceDataArray(readServiceDataField(recordArg, 'routes'), serviceSpecLimits.maximumRoutes);
    if (routes === null) {
      reasons.push(`${pathArg}.routes must be an array of at most ${serviceSpecLimits.maximumRoutes} routes`);
    } else {
      const seenHostnames = new Set<string>();
      routes.forEach((value, index) => {
        const path = `${pathArg}.routes[${index}]`;
        const route = readServiceDataRecord(value);
        if (route === null) {
          reasons.push(`${path} must be a plain object`);
          return;
        }
        reasons.push(...reasonsForUnknownKeys(route, ['hostname', 'targetPort', 'certificate'], path));
        if (Object.hasOwn(route, 'certificate') && readServiceDataField(route, 'certificate') !== 'acme') {
          reasons.push(`${path}.certificate must be "acme" when present`);
        }
        const hostname = readServiceDataField(route, 'hostname');
        const targetPort = readServiceDataField(route, 'targetPort');
        if (typeof hostname !== 'string' || !serviceRouteHostnamePattern.test(hostname)) {
          reasons.push(`${path}.hostname must be a lowercase DNS name`);
        } else if (seenHostnames.has(hostname)) {
          reasons.push(`${path}.hostname repeats the hostname of an earlier route`);
        } else {
          seenHostnames.add(hostname);
        }
        if (typeof targetPort !== 'string' || !portNames.has(targetPort)) {
          reasons.push(`${path}.targetPort must name one of the service's ports`);
        } else if (portNames.get(targetPort) !== 'tcp') {
          reasons.push(`${path}.targetPort must name a tcp port`);
        }
      });
    }
  }
  return reasons;
};

/** Project's own limits of a readiness target. */
export const serviceReadinessLimits = Object.freeze({ maximumPathLength: 1024, maximumCommandArguments: 64, maximumArgumentLength: 4096 } as const);

/** Every reason the `readiness` member of a writable spec is not valid; an http target's port must name a tcp port of the spec. */
const validateServiceReadiness = (recordArg: Record<string, unknown>, pathArg: string): string[] => {
  const value = readServiceDataField(recordArg, 'readiness');
  if (value === undefined || value === null) {
    return [];
  }
  const path = `${pathArg}.readiness`;
  const target = readServiceDataRecord(value);
  const kind = target === null ? undefined : readServiceDataField(target, 'kind');
  if (target === null || (kind !== 'http' && kind !== 'command')) {
    return [`${path} must be { kind: 'http', port, path } or { kind: 'command', command }`];
  }
  if (kind === 'http') {
    const reasons = reasonsForUnknownKeys(target, ['kind', 'port', 'path'], path);
    const port = readServiceDataField(target, 'port');
    const ports = readServiceDataArray(readServiceDataField(recordArg, 'ports') ?? [], serviceSpecLimits.maximumPorts) ?? [];
    const named = ports.map(readServiceDataRecord).find((candidate) => candidate !== null && readServiceDataField(candidate, 'name') === port);
    if (typeof port !== 'string' || !named) {
      reasons.push(`${path}.port must name one of the service's ports`);
    } else if (readServiceDataField(named, 'protocol') !== 'tcp') {
      reasons.push(`${path}.port must name a tcp port`);
    }
    const httpPath = readServiceDataField(target, 'path');
    if (typeof httpPath !== 'string' || !/^\/[\x21-\x7e]*$/.test(httpPath) || httpPath.length > serviceReadinessLimits.maximumPathLength) {
      reasons.push(`${path}.path must be an absolute request path of visible ASCII characters, at most ${serviceReadinessLimits.maximumPathLength}`);
    }
    return reasons;
  }
  const reasons = reasonsForUnknownKeys(target, ['kind', 'command'], path);
  const command = readServiceDataArray(readServiceDataField(target, 'command'), serviceReadinessLimits.maximumCommandArguments);
  if (command === null || command.length === 0) {
    reasons.push(`${path}.command must be an array of 1 to ${serviceReadinessLimits.maximumCommandArguments} arguments`);
  } else {
    command.forEach((argument, index) => {
      if (typeof argument !== 'string' || argument.length === 0 || argument.length > serviceReadinessLimits.maximumArgumentLength || argument.includes('\u0000')) {
        reasons.push(`${path}.command[${index}] must be a non-empty string without NUL characters, at most ${serviceReadinessLimits.maximumArgumentLength}`);
      }
    });
  }
  return reasons;
};

/** Detached copy of a valid readiness target (member order fixed); null when none. */
export const snapshotServiceReadiness = (valueArg: TServiceReadinessTarget | null | undefined): TServiceReadinessTarget | null => {
  if (!valueArg) {
    return null;
  }
  return valueArg.kind === 'http'
    ? { kind: 'http', port: valueArg.port, path: valueArg.path }
    : { kind: 'command', command: [...valueArg.command] };
};

const validateRunAs = (valueArg: unknown, pathArg: string): string[] =>
  valueArg === null ? [] : validateServiceRunAsOwner(valueArg, pathArg);

/** Every reason a value is not a valid `IServiceRuntimeSpec`. */
export const validateServiceRuntimeSpec = (valueArg: unknown, pathArg = 'runtime'): string[] =>
  collectValidatorReasons(pathArg, () => {
    const record = readServiceDataRecord(valueArg);
    if (record === null) {
      return [`${pathArg} must be a plain object`];
    }
    const reasons = reasonsForUnknownKeys(record, ['image', 'replicas', 'profile', 'placement'], pathArg);
    reasons.push(...validateServiceImageReference(readServiceDataField(record, 'image'), `${pathArg}.image`));
    const replicas = readServiceDataField(record, 'replicas');
    if (!Number.isSafeInteger(replicas) || (replicas as number) < 0 || (replicas as number) > serviceSpecLimits.maximumReplicas) {
      reasons.push(`${pathArg}.replicas must be an integer from 0 to ${serviceSpecLimits.maximumReplicas}`);
    }
    const profile = readServiceDataRecord(readServiceDataField(record, 'profile'));
    if (profile === null) {
      reasons.push(`${pathArg}.profile must be a plain object`);
    } else {
      reasons.push(...reasonsForUnknownKeys(profile, ['runAs'], `${pathArg}.profile`));
      if (!Object.hasOwn(profile, 'runAs')) {
        reasons.push(`${pathArg}.profile.runAs must be stated ({ user, group } or null)`);
      } else {
        reasons.push(...validateRunAs(readServiceDataField(profile, 'runAs'), `${pathArg}.profile.runAs`));
      }
    }
    const placement = readServiceDataRecord(readServiceDataField(record, 'placement'));
    if (placement === null) {
      reasons.push(`${pathArg}.placement must be a plain object`);
    } else {
      reasons.push(...reasonsForUnknownKeys(placement, ['nodeIds'], `${pathArg}.placement`));
      const nodeIds = readServiceDataArray(readServiceDataField(placement, 'nodeIds'), serviceSpecLimits.maximumPlacementNodes);
      if (nodeIds === null) {
        reasons.push(`${pathArg}.placement.nodeIds must be an array of at most ${serviceSpecLimits.maximumPlacementNodes} node ids`);
      } else {
        nodeIds.forEach((nodeId, index) => reasons.push(...validateServiceCanonicalId(nodeId, `${pathArg}.placement.nodeIds[${index}]`)));
        if (new Set(nodeIds).size !== nodeIds.length) {
          reasons.push(`${pathArg}.placement.nodeIds must not repeat a node`);
        }
      }
    }
    return reasons;
  });

/** Every reason a value is not a valid `IServiceWritableSpec`, volumes included. */
export const validateServiceWritableSpec = (valueArg: unknown, pathArg = 'service'): string[] =>
  collectValidatorReasons(pathArg, () => {
    const record = readServiceDataRecord(valueArg);
    if (record === null) {
      return [`${pathArg} must be a plain object`];
    }
    const reasons = reasonsForUnknownKeys(record, ['name', 'organizationId', 'clusterId', 'runtime', 'ports', 'routes', 'volumes', 'environment', 'secrets', 'readiness', 'networkPolicy'], pathArg);
    reasons.push(...validateServiceName(readServiceDataField(record, 'name'), `${pathArg}.name`));
    reasons.push(...validateServiceCanonicalId(readServiceDataField(record, 'organizationId'), `${pathArg}.organizationId`));
    reasons.push(...validateServiceCanonicalId(readServiceDataField(record, 'clusterId'), `${pathArg}.clusterId`));
    reasons.push(...validateServiceRuntimeSpec(readServiceDataField(record, 'runtime'), `${pathArg}.runtime`));
    reasons.push(...validateServicePortsAndRoutes(record, pathArg));
    reasons.push(...validateServiceEnvironment(record, pathArg));
    reasons.push(...validateServiceReadiness(record, pathArg));
    reasons.push(...validateServiceNetworkPolicy(record, pathArg));
    const volumes = readServiceDataArray(readServiceDataField(record, 'volumes'), serviceSpecLimits.maximumVolumes);
    if (volumes === null) {
      reasons.push(`${pathArg}.volumes must be an array of at most ${serviceSpecLimits.maximumVolumes} volumes`);
    } else {
      const seenMountPaths = new Set<string>();
      volumes.forEach((volume, index) => {
        const volumePath = `${pathArg}.volumes[${index}]`;
        reasons.push(...validateServiceWritableVolume(volume, volumePath));
        const volumeRecord = readServiceDataRecord(volume);
        const mountPath = volumeRecord === null ? undefined : readServiceDataField(volumeRecord, 'mountPath');
        if (typeof mountPath === 'string') {
          if (seenMountPaths.has(mountPath)) {
            reasons.push(`${volumePath}.mountPath repeats the mount path of an earlier volume`);
          }
          seenMountPaths.add(mountPath);
        }
      });
    }
    return reasons;
  });

/** Detached copy of a valid runtime spec (member order fixed). */
export const snapshotServiceRuntimeSpec = (valueArg: IServiceRuntimeSpec): IServiceRuntimeSpec => ({
  image: valueArg.image,
  replicas: valueArg.replicas,
  profile: {
    runAs: valueArg.profile.runAs === null
      ? null
      : { user: valueArg.profile.runAs.user, group: valueArg.profile.runAs.group },
  },
  placement: { nodeIds: [...valueArg.placement.nodeIds] },
});

/** True when two runtime specs are the same policy (canonical JSON equality). */
export const isSameServiceRuntimeSpec = (leftArg: IServiceRuntimeSpec, rightArg: IServiceRuntimeSpec): boolean =>
  canonicalizeJson(snapshotServiceRuntimeSpec(leftArg)) === canonicalizeJson(snapshotServiceRuntimeSpec(rightArg));

/** Detached copies of valid ports (member order fixed). */
export const snapshotServicePorts = (portsArg: readonly IServicePort[]): IServicePort[] =>
  portsArg.map((port) => ({ name: port.name, port: port.port, protocol: port.protocol }));

/** Detached copies of valid routes (member order fixed). */
export const snapshotServiceRoutes = (routesArg: readonly IServiceRoute[]): IServiceRoute[] =>
  routesArg.map((route) => ({ hostname: route.hostname, targetPort: route.targetPort, ...(route.certificate === 'acme' ? { certificate: 'acme' as const } : {}) }));

/**
 * True when two services ask the nodes for the same thing: the same runtime spec, ports, routes,
 * environment, secret references, readiness target and network policy. A difference in any of them
 * is a new `specRevision`.
 */
export const isSameServiceExecution = (
  leftArg: Pick<IService, 'runtime' | 'ports' | 'routes'> & Partial<Pick<IService, 'environment' | 'secrets' | 'readiness' | 'networkPolicy'>>,
  rightArg: Pick<IService, 'runtime' | 'ports' | 'routes'> & Partial<Pick<IService, 'environment' | 'secrets' | 'readiness' | 'networkPolicy'>>,
): boolean =>
  isSameServiceRuntimeSpec(leftArg.runtime, rightArg.runtime)
  && canonicalizeJson(snapshotServicePorts(leftArg.ports)) === canonicalizeJson(snapshotServicePorts(rightArg.ports))
  && canonicalizeJson(snapshotServiceRoutes(leftArg.routes)) === canonicalizeJson(snapshotServiceRoutes(rightArg.routes))
  && canonicalizeJson(snapshotServiceEnvironment(leftArg.environment)) === canonicalizeJson(snapshotServiceEnvironment(rightArg.environment))
  && canonicalizeJson(snapshotServiceSecrets(leftArg.secrets)) === canonicalizeJson(snapshotServiceSecrets(rightArg.secrets))
  && canonicalizeJson(snapshotServiceReadiness(leftArg.readiness)) === canonicalizeJson(snapshotServiceReadiness(rightArg.readiness))
  && canonicalizeJson(snapshotServiceNetworkPolicy(leftArg.networkPolicy)) === canonicalizeJson(snapshotServiceNetworkPolicy(rightArg.networkPolicy));
