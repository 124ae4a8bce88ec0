import {
  collectValidatorReasons,
  hasKeysWithin,
  isCanonicalId,
  isPlainDataRecord,
  isPositiveCounter,
  isSha256Hex,
  type TPlainRecord,
} from '../private/dataproperties.js';

/**
 * Platform bindings: a service's claim on a platform capability (a Corestore database or bucket)
 * on one node. The shapes below are the smallest honest version the Corestore legacy adoption flow
 * needs. Project's own definition.
 */

/** The platform capabilities a binding can claim. Project's own definition. */
export const platformBindingCapabilities = ['database', 'objectstorage'] as const;
export type TPlatformBindingCapability = (typeof platformBindingCapabilities)[number];

/** Lifecycle of a binding as its node reports it. Project's own definition. */
export const platformBindingStatuses = ['pending', 'provisioning', 'ready', 'failed'] as const;
export type TPlatformBindingStatus = (typeof platformBindingStatuses)[number];

/**
 * Why a binding sits in its status, as read from Corestore's refusal. Each reason belongs to
 * exactly one status (see `getPlatformBindingStatusOfReason`).
 */
export const platformBindingStatusReasons = [
  'legacy-adoption-pending',
  'legacy-adoption-conflict',
  'legacy-adoption-mismatch',
] as const;
export type TPlatformBindingStatusReason = (typeof platformBindingStatusReasons)[number];

/** The one status each reason may accompany. */
const statusOfReason: Readonly<Record<TPlatformBindingStatusReason, TPlatformBindingStatus>> = {
  'legacy-adoption-pending': 'provisioning',
  'legacy-adoption-conflict': 'failed',
  'legacy-adoption-mismatch': 'failed',
};

export const isPlatformBindingCapability = (valueArg: unknown): valueArg is TPlatformBindingCapability =>
  typeof valueArg === 'string' && (platformBindingCapabilities as readonly string[]).includes(valueArg);

export const isPlatformBindingStatus = (valueArg: unknown): valueArg is TPlatformBindingStatus =>
  typeof valueArg === 'string' && (platformBindingStatuses as readonly string[]).includes(valueArg);

export const isPlatformBindingStatusReason = (valueArg: unknown): valueArg is TPlatformBindingStatusReason =>
  typeof valueArg === 'string' && (platformBindingStatusReasons as readonly string[]).includes(valueArg);

/** The status a reason is paired with. */
export const getPlatformBindingStatusOfReason = (
  reasonArg: TPlatformBindingStatusReason,
): TPlatformBindingStatus => statusOfReason[reasonArg];

/**
 * Names every reason a (status, statusReason) pair is refused. A missing or null reason pairs
 * with any known status; a stated reason must be known and must sit with its own status.
 */
export const validatePlatformBindingStatusReason = (
  statusArg: unknown,
  statusReasonArg: unknown,
  pathArg = 'platformBinding',
): string[] => {
  const reasons: string[] = [];
  const statusKnown = isPlatformBindingStatus(statusArg);
  if (!statusKnown) {
    reasons.push(`${pathArg}.status must be one of ${platformBindingStatuses.join(', ')}`);
  }
  if (statusReasonArg === undefined || statusReasonArg === null) {
    return reasons;
  }
  if (!isPlatformBindingStatusReason(statusReasonArg)) {
    reasons.push(`${pathArg}.statusReason must be null or one of ${platformBindingStatusReasons.join(', ')}`);
    return reasons;
  }
  const pairedStatus = statusOfReason[statusReasonArg];
  if (statusKnown && statusArg !== pairedStatus) {
    reasons.push(`${pathArg}.statusReason ${statusReasonArg} is only reported with status ${pairedStatus}`);
  }
  return reasons;
};

/**
 * What an object storage bucket is asked to retain by default. Project's own definition: the
 * smallest shape that lets Cloudly carry a legacy bucket's intent unchanged to Corestore.
 */
export interface IObjectStorageRetentionIntent {
  mode: 'governance' | 'compliance';
  days: number;
}

/** Project's own limit: a hundred years of retention. */
export const maximumObjectStorageRetentionDays = 36_500;

export const validateObjectStorageRetentionIntent = (
  valueArg: unknown,
  pathArg = 'intent',
): string[] => collectValidatorReasons(pathArg, () => {
  if (!isPlainDataRecord(valueArg) || !hasKeysWithin(valueArg, ['mode', 'days'], [])) {
    return [`${pathArg} must be an object with exactly mode and days`];
  }
  const reasons: string[] = [];
  if (valueArg.mode !== 'governance' && valueArg.mode !== 'compliance') {
    reasons.push(`${pathArg}.mode must be governance or compliance`);
  }
  if (!isPositiveCounter(valueArg.days) || valueArg.days > maximumObjectStorageRetentionDays) {
    reasons.push(`${pathArg}.days must be an integer from 1 to ${maximumObjectStorageRetentionDays}`);
  }
  return reasons;
});

/** Longest legacy database or bucket name Cloudly reads or records. Project's own limit. */
export const maximumCorestoreLegacyResourceNameLength = 255;

/**
 * Which legacy Corestore resource a binding adopts, and on which inventory the adoption was
 * decided. Server-managed: only `adoptCorestoreLegacyResources` writes it.
 */
export interface IPlatformBindingCorestoreLegacyAdoption {
  nodeId: string;
  resourceName: string;
  inventorySha256: string;
}

/** Project's own definition (minimal). */
export interface IPlatformBinding {
  /** Server-assigned; one binding per service and capability. */
  id: string;
  serviceId: string;
  capability: TPlatformBindingCapability;
  enabled: boolean;
  /** The node whose Corestore serves this binding; null while unplaced. */
  nodeId: string | null;
  status: TPlatformBindingStatus;
  /** Reported with the status; null when the last report carried none. */
  statusReason: TPlatformBindingStatusReason | null;
  /** Server-managed; only an adoption sets a legacy bucket name. Object storage only. */
  objectstorageBucketName?: string;
  /** Object storage only; absent when the bucket states no retention intent. */
  objectstorageRetention?: { intent: IObjectStorageRetentionIntent };
  /** Present exactly on bindings created by a legacy adoption. */
  corestoreLegacyAdoption?: IPlatformBindingCorestoreLegacyAdoption;
  /** Server-managed; bumps on every committed change. */
  generation: number;
}

/**
 * Where a bucket name is admitted: the canonical S3 rule (3-63 characters of lowercase letters,
 * digits, dots and hyphens, starting and ending with a letter or digit, no two dots in a row, not
 * shaped like an IPv4 address, no reserved prefix or suffix).
 */
export const isCanonicalObjectStorageBucketName = (valueArg: unknown): valueArg is string => {
  if (typeof valueArg !== 'string' || valueArg.length < 3 || valueArg.length > 63) {
    return false;
  }
  if (!/^[a-z0-9][a-z0-9.-]*[a-z0-9]$/.test(valueArg) || valueArg.includes('..')) {
    return false;
  }
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(valueArg)) {
    return false;
  }
  if (valueArg.startsWith('xn--') || valueArg.startsWith('sthree-')) {
    return false;
  }
  return !valueArg.endsWith('-s3alias') && !valueArg.endsWith('--ol-s3');
};

const platformBindingRequiredKeys = [
  'id',
  'serviceId',
  'capability',
  'enabled',
  'nodeId',
  'status',
  'statusReason',
  'generation',
] as const;
const platformBindingOptionalKeys = [
  'objectstorageBucketName',
  'objectstorageRetention',
  'corestoreLegacyAdoption',
] as const;

const validateRetentionHolder = (valueArg: unknown, pathArg: string): string[] => {
  if (!isPlainDataRecord(valueArg) || !hasKeysWithin(valueArg, ['intent'], [])) {
    return [`${pathArg} must be an object with exactly intent`];
  }
  return validateObjectStorageRetentionIntent(valueArg.intent, `${pathArg}.intent`);
};

/** Names every reason a value is not a whole `IPlatformBinding`. */
export const validatePlatformBinding = (valueArg: unknown, pathArg = 'platformBinding'): string[] => collectValidatorReasons(pathArg, () => {
  if (!isPlainDataRecord(valueArg) || !hasKeysWithin(valueArg, platformBindingRequiredKeys, platformBindingOptionalKeys)) {
    return [
      `${pathArg} must be an object with ${platformBindingRequiredKeys.join(', ')} and optionally `
        + platformBindingOptionalKeys.join(', '),
    ];
  }
  const reasons: string[] = [];
  if (!isCanonicalId(valueArg.id)) {
    reasons.push(`${pathArg}.id must be a canonical identifier`);
  }
  if (!isCanonicalId(valueArg.serviceId)) {
    reasons.push(`${pathArg}.serviceId must be a canonical identifier`);
  }
  if (!isPlatformBindingCapability(valueArg.capability)) {
    reasons.push(`${pathArg}.capability must be database or objectstorage`);
  }
  if (typeof valueArg.enabled !== 'boolean') {
    reasons.push(`${pathArg}.enabled must be a boolean`);
  }
  if (valueArg.nodeId !== null && !isCanonicalId(valueArg.nodeId)) {
    reasons.push(`${pathArg}.nodeId must be null or a canonical identifier`);
  }
  reasons.push(...validatePlatformBindingStatusReason(valueArg.status, valueArg.statusReason, pathArg));
  if (!isPositiveCounter(valueArg.generation)) {
    reasons.push(`${pathArg}.generation must be a positive integer`);
  }
  reasons.push(...validateObjectStorageFields(valueArg, pathArg));
  if (Object.hasOwn(valueArg, 'corestoreLegacyAdoption')) {
    reasons.push(
      ...validatePlatformBindingCorestoreLegacyAdoptionShape(
        valueArg.corestoreLegacyAdoption,
        `${pathArg}.corestoreLegacyAdoption`,
      ),
    );
  }
  return reasons;
});

const validateObjectStorageFields = (valueArg: TPlainRecord, pathArg: string): string[] => {
  const reasons: string[] = [];
  const isObjectStorage = valueArg.capability === 'objectstorage';
  if (Object.hasOwn(valueArg, 'objectstorageBucketName')) {
    if (!isObjectStorage) {
      reasons.push(`${pathArg}.objectstorageBucketName is only carried by an objectstorage binding`);
    } else if (!isCanonicalObjectStorageBucketName(valueArg.objectstorageBucketName)) {
      reasons.push(`${pathArg}.objectstorageBucketName must be a canonical S3 bucket name`);
    }
  }
  if (Object.hasOwn(valueArg, 'objectstorageRetention')) {
    if (!isObjectStorage) {
      reasons.push(`${pathArg}.objectstorageRetention is only carried by an objectstorage binding`);
    } else {
      reasons.push(...validateRetentionHolder(valueArg.objectstorageRetention, `${pathArg}.objectstorageRetention`));
    }
  }
  return reasons;
};

/** Shape check of `corestoreLegacyAdoption` alone (no inventory involved). */
export const validatePlatformBindingCorestoreLegacyAdoptionShape = (
  valueArg: unknown,
  pathArg = 'platformBinding.corestoreLegacyAdoption',
): string[] => collectValidatorReasons(pathArg, () => {
  if (!isPlainDataRecord(valueArg) || !hasKeysWithin(valueArg, ['nodeId', 'resourceName', 'inventorySha256'], [])) {
    return [`${pathArg} must be an object with exactly nodeId, resourceName and inventorySha256`];
  }
  const reasons: string[] = [];
  if (!isCanonicalId(valueArg.nodeId)) {
    reasons.push(`${pathArg}.nodeId must be a canonical identifier`);
  }
  if (typeof valueArg.resourceName !== 'string' || valueArg.resourceName.length === 0
    || valueArg.resourceName.length > maximumCorestoreLegacyResourceNameLength) {
    reasons.push(`${pathArg}.resourceName must be a string of 1 to ${maximumCorestoreLegacyResourceNameLength} characters`);
  }
  if (!isSha256Hex(valueArg.inventorySha256)) {
    reasons.push(`${pathArg}.inventorySha256 must be a lowercase hex sha256`);
  }
  return reasons;
});

/**
 * What an administrator may write through `upsertPlatformBinding`. The server-managed fields
 * (`objectstorageBucketName`, `corestoreLegacyAdoption`, `statusReason`, and also id, status and
 * generation) are refused by name. Project's own definition.
 */
export interface IPlatformBindingUpsert {
  serviceId: string;
  capability: TPlatformBindingCapability;
  enabled: boolean;
  nodeId: string | null;
  objectstorageRetention?: { intent: IObjectStorageRetentionIntent };
}

const upsertRequiredKeys = ['serviceId', 'capability', 'enabled', 'nodeId'] as const;
const upsertServerManagedKeys = [
  'objectstorageBucketName',
  'corestoreLegacyAdoption',
  'statusReason',
  'id',
  'status',
  'generation',
] as const;

export const validatePlatformBindingUpsert = (
  valueArg: unknown,
  pathArg = 'platformBinding',
): string[] => collectValidatorReasons(pathArg, () => {
  if (!isPlainDataRecord(valueArg)) {
    return [`${pathArg} must be an object`];
  }
  const reasons: string[] = [];
  for (const key of upsertServerManagedKeys) {
    if (Object.hasOwn(valueArg, key)) {
      reasons.push(`${pathArg}.${key} is server-managed and cannot be written`);
    }
  }
  const known = new Set<string>([...upsertRequiredKeys, 'objectstorageRetention', ...upsertServerManagedKeys]);
  for (const key of Object.keys(valueArg)) {
    if (!known.has(key)) {
      reasons.push(`${pathArg}.${key} is not a platform binding field`);
    }
  }
  for (const key of upsertRequiredKeys) {
    if (!Object.hasOwn(valueArg, key)) {
      reasons.push(`${pathArg}.${key} is required`);
    }
  }
  if (Object.hasOwn(valueArg, 'serviceId') && !isCanonicalId(valueArg.serviceId)) {
    reasons.push(`${pathArg}.serviceId must be a canonical identifier`);
  }
  if (Object.hasOwn(valueArg, 'capability') && !isPlatformBindingCapability(valueArg.capability)) {
    reasons.push(`${pathArg}.capability must be database or objectstorage`);
  }
  if (Object.hasOwn(valueArg, 'enabled') && typeof valueArg.enabled !== 'boolean') {
    reasons.push(`${pathArg}.enabled must be a boolean`);
  }
  if (Object.hasOwn(valueArg, 'nodeId') && valueArg.nodeId !== null && !isCanonicalId(valueArg.nodeId)) {
    reasons.push(`${pathArg}.nodeId must be null or a canonical identifier`);
  }
  if (Object.hasOwn(valueArg, 'objectstorageRetention')) {
    if (valueArg.capability !== 'objectstorage') {
      reasons.push(`${pathArg}.objectstorageRetention is only carried by an objectstorage binding`);
    } else {
      reasons.push(...validateRetentionHolder(valueArg.objectstorageRetention, `${pathArg}.objectstorageRetention`));
    }
  }
  return reasons;
});
