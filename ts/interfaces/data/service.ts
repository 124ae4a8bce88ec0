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

/** Execution policy only; stored exactly. Its changes bump the service's `specRevision`. */
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
  /** Server-managed; starts at 1 and bumps when `runtime` changes. */
  specRevision: number;
  runtime: IServiceRuntimeSpec;
  volumes: IServiceVolume[];
  createdAt: number;
  updatedAt: number;
}

/** What `createService` / `updateService` accept. */
export interface IServiceWritableSpec {
  name: string;
  organizationId: string;
  clusterId: string;
  runtime: IServiceRuntimeSpec;
  volumes: TServiceWritableVolume[];
}

/** Project's own limits for the writable spec. */
export const serviceSpecLimits = Object.freeze({
  maximumNameLength: 128,
  maximumImageLength: 1024,
  maximumReplicas: 1024,
  maximumPlacementNodes: 64,
  maximumVolumes: 64,
} as const);

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
    const image = readServiceDataField(record, 'image');
    if (typeof image !== 'string' || image.length === 0 || image.length > serviceSpecLimits.maximumImageLength) {
      reasons.push(`${pathArg}.image must be a string of 1-${serviceSpecLimits.maximumImageLength} characters`);
    }
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
    const reasons = reasonsForUnknownKeys(record, ['name', 'organizationId', 'clusterId', 'runtime', 'volumes'], pathArg);
    const name = readServiceDataField(record, 'name');
    if (typeof name !== 'string' || name.trim().length === 0 || name.length > serviceSpecLimits.maximumNameLength) {
      reasons.push(`${pathArg}.name must be a non-blank string of at most ${serviceSpecLimits.maximumNameLength} characters`);
    }
    reasons.push(...validateServiceCanonicalId(readServiceDataField(record, 'organizationId'), `${pathArg}.organizationId`));
    reasons.push(...validateServiceCanonicalId(readServiceDataField(record, 'clusterId'), `${pathArg}.clusterId`));
    reasons.push(...validateServiceRuntimeSpec(readServiceDataField(record, 'runtime'), `${pathArg}.runtime`));
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
