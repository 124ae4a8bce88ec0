import {
  collectValidatorReasons,
  hasKeysWithin,
  isCanonicalId,
  isPlainDataRecord,
  type TPlainRecord,
} from '../private/dataproperties.js';
import {
  isCanonicalObjectStorageBucketName,
  isPlatformBindingCapability,
  isPlatformBindingStatusReason,
  maximumCorestoreLegacyResourceNameLength,
  validateObjectStorageRetentionIntent,
  type IObjectStorageRetentionIntent,
  type TPlatformBindingCapability,
  type TPlatformBindingStatusReason,
} from '../data/platformbinding.js';

/**
 * What Corestore itself says about the databases and buckets a pre-32 release provisioned, and
 * the plan file its offline `legacy-resource-adoption` migration reads. These are the shapes on
 * the Corestore side of the adoption flow; Cloudly's own shapes live in `data/corestorelegacy.ts`.
 */

export const corestoreLegacyAdoptionContract = {
  /** Corestore's control path answering the inventory (bearer-authenticated). */
  inventoryPath: '/control/legacy-resources',
  /** Most entries one adoption plan may hold. */
  maximumPlanEntries: 4096,
  /** HTTP status Corestore answers when a binding waits for, or contradicts, an adoption. */
  refusalStatusCode: 409,
} as const;

/**
 * Project's own limits for reading an inventory off the wire: a node holds at most one service
 * entry per service, and a relay answer larger than this is treated as malformed.
 */
export const corestoreLegacyInventoryLimits = {
  maximumServices: 4096,
  maximumResourceNameLength: maximumCorestoreLegacyResourceNameLength,
} as const;

/** What would stop the offline adoption of an unadopted resource. */
export const corestoreLegacyResourceBlockers = [
  'not-adoptable',
  'ordinary-credentials-rotated',
  'owned-by-binding',
] as const;
export type TCorestoreLegacyResourceBlocker = (typeof corestoreLegacyResourceBlockers)[number];

export type TCorestoreLegacyResourceAdoption =
  | { state: 'unadopted'; blocker: TCorestoreLegacyResourceBlocker | null }
  | { state: 'authorized'; bindingId: string };

export interface ICorestoreLegacyDatabaseResource {
  capability: 'database';
  databaseName: string;
  adoption: TCorestoreLegacyResourceAdoption;
}

export interface ICorestoreLegacyObjectStorageResource {
  capability: 'objectstorage';
  bucketName: string;
  retention: IObjectStorageRetentionIntent | null;
  adoption: TCorestoreLegacyResourceAdoption;
}

export type TCorestoreLegacyResource = ICorestoreLegacyDatabaseResource | ICorestoreLegacyObjectStorageResource;

/** One service's legacy resources, `database` before `objectstorage`. Field names are the project's own. */
export interface ICorestoreLegacyResourceInventoryService {
  serviceId: string;
  resources: TCorestoreLegacyResource[];
}

/** Corestore's answer on the inventory path: every service with legacy resources, sorted by id. */
export interface ICorestoreLegacyResourceInventory {
  services: ICorestoreLegacyResourceInventoryService[];
}

/** The name a legacy resource is known by: its database name or its bucket name. */
export const getCorestoreLegacyResourceName = (resourceArg: TCorestoreLegacyResource): string =>
  resourceArg.capability === 'database' ? resourceArg.databaseName : resourceArg.bucketName;

const isResourceName = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string'
  && valueArg.length > 0
  && valueArg.length <= corestoreLegacyInventoryLimits.maximumResourceNameLength
  && !/[\u0000-\u001f\u007f]/.test(valueArg);

const validateAdoption = (valueArg: unknown, pathArg: string): string[] => {
  if (!isPlainDataRecord(valueArg)) {
    return [`${pathArg} must be an object`];
  }
  if (valueArg.state === 'unadopted') {
    if (!hasKeysWithin(valueArg, ['state', 'blocker'], [])) {
      return [`${pathArg} in state unadopted must have exactly state and blocker`];
    }
    if (valueArg.blocker !== null
      && !(corestoreLegacyResourceBlockers as readonly unknown[]).includes(valueArg.blocker)) {
      return [`${pathArg}.blocker must be null or one of ${corestoreLegacyResourceBlockers.join(', ')}`];
    }
    return [];
  }
  if (valueArg.state === 'authorized') {
    if (!hasKeysWithin(valueArg, ['state', 'bindingId'], [])) {
      return [`${pathArg} in state authorized must have exactly state and bindingId`];
    }
    return isCanonicalId(valueArg.bindingId) ? [] : [`${pathArg}.bindingId must be a canonical identifier`];
  }
  return [`${pathArg}.state must be unadopted or authorized`];
};

/** True when nothing in Corestore would stop this resource from being adopted by a new binding. */
const isAdoptable = (adoptionArg: unknown): boolean =>
  isPlainDataRecord(adoptionArg)
  && (adoptionArg.state === 'authorized' || (adoptionArg.state === 'unadopted' && adoptionArg.blocker === null));

const validateResource = (valueArg: unknown, pathArg: string): string[] => {
  if (!isPlainDataRecord(valueArg)) {
    return [`${pathArg} must be an object`];
  }
  if (valueArg.capability === 'database') {
    if (!hasKeysWithin(valueArg, ['capability', 'databaseName', 'adoption'], [])) {
      return [`${pathArg} must have exactly capability, databaseName and adoption`];
    }
    const reasons: string[] = [];
    if (!isResourceName(valueArg.databaseName)) {
      reasons.push(`${pathArg}.databaseName must be a printable string of 1 to `
        + `${corestoreLegacyInventoryLimits.maximumResourceNameLength} characters`);
    }
    reasons.push(...validateAdoption(valueArg.adoption, `${pathArg}.adoption`));
    return reasons;
  }
  if (valueArg.capability === 'objectstorage') {
    if (!hasKeysWithin(valueArg, ['capability', 'bucketName', 'retention', 'adoption'], [])) {
      return [`${pathArg} must have exactly capability, bucketName, retention and adoption`];
    }
    const reasons: string[] = [];
    if (!isResourceName(valueArg.bucketName)) {
      reasons.push(`${pathArg}.bucketName must be a printable string of 1 to `
        + `${corestoreLegacyInventoryLimits.maximumResourceNameLength} characters`);
    } else if (!isCanonicalObjectStorageBucketName(valueArg.bucketName) && isAdoptable(valueArg.adoption)) {
      // A binding request can only carry a canonical name, so Corestore must block any other.
      reasons.push(`${pathArg}.bucketName is not a canonical S3 name, so its adoption must be blocked as not-adoptable`);
    }
    if (valueArg.retention !== null) {
      reasons.push(...validateObjectStorageRetentionIntent(valueArg.retention, `${pathArg}.retention`));
    }
    reasons.push(...validateAdoption(valueArg.adoption, `${pathArg}.adoption`));
    return reasons;
  }
  return [`${pathArg}.capability must be database or objectstorage`];
};

const validateInventoryService = (valueArg: unknown, pathArg: string): string[] => {
  if (!isPlainDataRecord(valueArg) || !hasKeysWithin(valueArg, ['serviceId', 'resources'], [])) {
    return [`${pathArg} must be an object with exactly serviceId and resources`];
  }
  const reasons: string[] = [];
  if (!isCanonicalId(valueArg.serviceId)) {
    reasons.push(`${pathArg}.serviceId must be a canonical identifier`);
  }
  const resources = valueArg.resources;
  if (!Array.isArray(resources) || resources.length < 1 || resources.length > 2) {
    reasons.push(`${pathArg}.resources must be an array of one or two resources`);
    return reasons;
  }
  resources.forEach((resource, index) => {
    reasons.push(...validateResource(resource, `${pathArg}.resources[${index}]`));
  });
  if (resources.length === 2) {
    const first = isPlainDataRecord(resources[0]) ? resources[0].capability : undefined;
    const second = isPlainDataRecord(resources[1]) ? resources[1].capability : undefined;
    if (first !== 'database' || second !== 'objectstorage') {
      reasons.push(`${pathArg}.resources must list database before objectstorage, each once`);
    }
  }
  return reasons;
};

/** Names every reason a value is not an `ICorestoreLegacyResourceInventory`. */
export const validateCorestoreLegacyResourceInventory = (
  valueArg: unknown,
  pathArg = 'inventory',
): string[] => collectValidatorReasons(pathArg, () => {
  if (!isPlainDataRecord(valueArg) || !hasKeysWithin(valueArg, ['services'], [])) {
    return [`${pathArg} must be an object with exactly services`];
  }
  const services = valueArg.services;
  if (!Array.isArray(services) || services.length > corestoreLegacyInventoryLimits.maximumServices) {
    return [`${pathArg}.services must be an array of at most ${corestoreLegacyInventoryLimits.maximumServices} services`];
  }
  const reasons: string[] = [];
  let previousId: string | null = null;
  services.forEach((service, index) => {
    const servicePath = `${pathArg}.services[${index}]`;
    reasons.push(...validateInventoryService(service, servicePath));
    const serviceId = isPlainDataRecord(service) && typeof service.serviceId === 'string' ? service.serviceId : null;
    if (serviceId !== null && previousId !== null && !(previousId < serviceId)) {
      reasons.push(`${servicePath}.serviceId must sort after ${previousId}, each service once`);
    }
    if (serviceId !== null) {
      previousId = serviceId;
    }
  });
  return reasons;
});

const joinWords = (wordsArg: readonly string[]): string =>
  wordsArg.length < 2 ? wordsArg.join('') : `${wordsArg.slice(0, -1).join(', ')} and ${wordsArg[wordsArg.length - 1]}`;

/**
 * Reads one `{ serviceId, capability }` entry of a selection or a plan, with further identifier
 * members named by `moreIdKeysArg`: every reason its shape and identifiers earn, and the entry
 * itself only when it earns none.
 */
export const readCorestoreLegacyServiceCapabilityEntry = (
  entryArg: unknown,
  entryPathArg: string,
  moreIdKeysArg: readonly string[] = [],
): { entry: TPlainRecord | null; reasons: string[] } => {
  const keys = ['serviceId', 'capability', ...moreIdKeysArg];
  if (!isPlainDataRecord(entryArg) || !hasKeysWithin(entryArg, keys, [])) {
    return { entry: null, reasons: [`${entryPathArg} must be an object with exactly ${joinWords(keys)}`] };
  }
  const reasons: string[] = [];
  if (!isCanonicalId(entryArg.serviceId)) {
    reasons.push(`${entryPathArg}.serviceId must be a canonical identifier`);
  }
  if (!isPlatformBindingCapability(entryArg.capability)) {
    reasons.push(`${entryPathArg}.capability must be database or objectstorage`);
  }
  for (const key of moreIdKeysArg) {
    if (!isCanonicalId(entryArg[key])) {
      reasons.push(`${entryPathArg}.${key} must be a canonical identifier`);
    }
  }
  return { entry: reasons.length === 0 ? entryArg : null, reasons };
};

/** One line of the plan Corestore's `legacy-resource-adoption` migration reads. */
export interface ICorestoreLegacyResourceAdoptionPlanEntry {
  serviceId: string;
  capability: TPlatformBindingCapability;
  bindingId: string;
}

/**
 * The migration's own rules for a plan: a non-empty array of at most 4096 entries, each exactly
 * `{ serviceId, capability, bindingId }` with canonical identifiers, no service capability and no
 * binding id twice. Order is free.
 */
export const validateCorestoreLegacyResourceAdoptionPlan = (
  valueArg: unknown,
  pathArg = 'plan',
): string[] => collectValidatorReasons(pathArg, () => {
  const maximum = corestoreLegacyAdoptionContract.maximumPlanEntries;
  if (!Array.isArray(valueArg) || valueArg.length === 0 || valueArg.length > maximum) {
    return [`${pathArg} must be an array of 1 to ${maximum} entries`];
  }
  const reasons: string[] = [];
  const serviceCapabilities = new Set<string>();
  const bindingIds = new Set<string>();
  valueArg.forEach((item, index) => {
    const entryPath = `${pathArg}[${index}]`;
    const { entry, reasons: entryReasons } = readCorestoreLegacyServiceCapabilityEntry(item, entryPath, ['bindingId']);
    reasons.push(...entryReasons);
    if (entry === null) {
      return;
    }
    const serviceCapability = `${entry.serviceId as string}\u0000${entry.capability as string}`;
    if (serviceCapabilities.has(serviceCapability)) {
      reasons.push(`${entryPath} names service ${entry.serviceId as string} capability ${entry.capability as string} a second time`);
    }
    serviceCapabilities.add(serviceCapability);
    if (bindingIds.has(entry.bindingId as string)) {
      reasons.push(`${entryPath}.bindingId ${entry.bindingId as string} appears a second time`);
    }
    bindingIds.add(entry.bindingId as string);
  });
  return reasons;
});

/**
 * Reads Corestore's answer to a binding request: a 409 whose body is exactly
 * `{ ok: false, error, code }` with a known `code` yields that code as a status reason; anything
 * else is not an adoption refusal and yields null. A body may be given parsed or as JSON text.
 */
export const readCorestoreLegacyAdoptionRefusal = (
  statusCodeArg: unknown,
  bodyArg: unknown,
): TPlatformBindingStatusReason | null => {
  if (statusCodeArg !== corestoreLegacyAdoptionContract.refusalStatusCode) {
    return null;
  }
  try {
    let body = bodyArg;
    if (typeof body === 'string') {
      body = JSON.parse(body) as unknown;
    }
    if (!isPlainDataRecord(body) || !hasKeysWithin(body, ['ok', 'error', 'code'], [])) {
      return null;
    }
    if (body.ok !== false || typeof body.error !== 'string') {
      return null;
    }
    return isPlatformBindingStatusReason(body.code) ? body.code : null;
  } catch {
    return null;
  }
};
