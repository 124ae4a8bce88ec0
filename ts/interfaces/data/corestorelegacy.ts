import { canonicalizeJson, computeDomainDigestHex } from '../private/canonicaljson.js';
import {
  collectValidatorReasons,
  hasKeysWithin,
  isCanonicalId,
  isCounter,
  isPlainDataRecord,
  isSha256Hex,
} from '../private/dataproperties.js';
import {
  corestoreLegacyAdoptionContract,
  getCorestoreLegacyResourceName,
  readCorestoreLegacyServiceCapabilityEntry,
  validateCorestoreLegacyResourceInventory,
  type ICorestoreLegacyResourceAdoptionPlanEntry,
  type ICorestoreLegacyResourceInventoryService,
  type TCorestoreLegacyResource,
} from '../platform/corestorelegacy.js';
import {
  validatePlatformBinding,
  type IPlatformBinding,
  type TPlatformBindingCapability,
} from './platformbinding.js';

/**
 * Cloudly's side of the Corestore legacy resource adoption: the inventory as the relay reports it
 * for one node, its digest, the administrator's selection, the rule every adopting binding obeys,
 * the plan built from those bindings, and the refusals of an adoption. The Corestore-side shapes
 * are re-exported here so `data` names the whole flow.
 */
export {
  corestoreLegacyAdoptionContract,
  corestoreLegacyInventoryLimits,
  corestoreLegacyResourceBlockers,
  getCorestoreLegacyResourceName,
  readCorestoreLegacyAdoptionRefusal,
  validateCorestoreLegacyResourceAdoptionPlan,
  validateCorestoreLegacyResourceInventory,
} from '../platform/corestorelegacy.js';
export type {
  ICorestoreLegacyDatabaseResource,
  ICorestoreLegacyObjectStorageResource,
  ICorestoreLegacyResourceAdoptionPlanEntry,
  ICorestoreLegacyResourceInventory,
  ICorestoreLegacyResourceInventoryService,
  TCorestoreLegacyResource,
  TCorestoreLegacyResourceAdoption,
  TCorestoreLegacyResourceBlocker,
} from '../platform/corestorelegacy.js';

/** Why the relay could not produce a node's inventory. */
export const clusterCorestoreLegacyInventoryErrorCodes = ['CORESTORE_ENDPOINT_UNKNOWN', 'CORESTORE_UNREACHABLE'] as const;
export type TClusterCorestoreLegacyInventoryErrorCode = (typeof clusterCorestoreLegacyInventoryErrorCodes)[number];

/**
 * One node's inventory as the relay read it. `nodeId` and `readAt` (epoch milliseconds) are the
 * project's own fields; the digest covers the node id and the services, never the read time.
 */
export type TClusterCorestoreLegacyResourceInventory =
  | { reachable: true; nodeId: string; readAt: number; services: ICorestoreLegacyResourceInventoryService[] }
  | { reachable: false; nodeId: string; readAt: number; errorCode: TClusterCorestoreLegacyInventoryErrorCode };

/** Names every reason a value is not a `TClusterCorestoreLegacyResourceInventory`. */
export const validateClusterCorestoreLegacyResourceInventory = (
  valueArg: unknown,
  pathArg = 'inventory',
): string[] => collectValidatorReasons(pathArg, () => {
  if (!isPlainDataRecord(valueArg)) {
    return [`${pathArg} must be an object`];
  }
  const reasons: string[] = [];
  if (valueArg.reachable === true) {
    if (!hasKeysWithin(valueArg, ['reachable', 'nodeId', 'readAt', 'services'], [])) {
      return [`${pathArg} when reachable must have exactly reachable, nodeId, readAt and services`];
    }
  } else if (valueArg.reachable === false) {
    if (!hasKeysWithin(valueArg, ['reachable', 'nodeId', 'readAt', 'errorCode'], [])) {
      return [`${pathArg} when unreachable must have exactly reachable, nodeId, readAt and errorCode, and no services`];
    }
  } else {
    return [`${pathArg}.reachable must be true or false`];
  }
  if (!isCanonicalId(valueArg.nodeId)) {
    reasons.push(`${pathArg}.nodeId must be a canonical identifier`);
  }
  if (!isCounter(valueArg.readAt)) {
    reasons.push(`${pathArg}.readAt must be epoch milliseconds`);
  }
  if (valueArg.reachable === true) {
    reasons.push(...validateCorestoreLegacyResourceInventory({ services: valueArg.services }, pathArg));
  } else if (!(clusterCorestoreLegacyInventoryErrorCodes as readonly unknown[]).includes(valueArg.errorCode)) {
    reasons.push(`${pathArg}.errorCode must be one of ${clusterCorestoreLegacyInventoryErrorCodes.join(', ')}`);
  }
  return reasons;
});

/** Digest domain of the inventory digest. Project's own: the contract names none. */
export const clusterCorestoreLegacyResourceInventoryDigestDomain = 'serve.zone/cluster-corestore-legacy-resource-inventory';

/**
 * The digest an adoption must quote: over the node id and the services only, so two reads of an
 * unchanged Corestore agree whatever their read times. Null for an unreachable node, which has no
 * services to digest.
 */
export const computeClusterCorestoreLegacyResourceInventorySha256 = (
  inventoryArg: TClusterCorestoreLegacyResourceInventory,
): string | null => {
  if (inventoryArg.reachable !== true) {
    return null;
  }
  return computeDomainDigestHex(clusterCorestoreLegacyResourceInventoryDigestDomain, {
    nodeId: inventoryArg.nodeId,
    services: inventoryArg.services,
  });
};

/** One resource the administrator selects for adoption. */
export interface ICorestoreLegacyResourceSelection {
  serviceId: string;
  capability: TPlatformBindingCapability;
}

/** Code-unit order by service id, then capability (`database` before `objectstorage`). */
export const compareCorestoreLegacyResourceSelections = (
  leftArg: ICorestoreLegacyResourceSelection,
  rightArg: ICorestoreLegacyResourceSelection,
): number => {
  if (leftArg.serviceId !== rightArg.serviceId) {
    return leftArg.serviceId < rightArg.serviceId ? -1 : 1;
  }
  if (leftArg.capability !== rightArg.capability) {
    return leftArg.capability < rightArg.capability ? -1 : 1;
  }
  return 0;
};

/**
 * A selection is a non-empty array (at most the plan limit) of exact `{ serviceId, capability }`
 * entries, sorted by service then capability, each once.
 */
export const validateCorestoreLegacyResourceSelections = (
  valueArg: unknown,
  pathArg = 'resources',
): string[] => collectValidatorReasons(pathArg, () => {
  const maximum = corestoreLegacyAdoptionContract.maximumPlanEntries;
  if (!Array.isArray(valueArg) || valueArg.length === 0 || valueArg.length > maximum) {
    return [`${pathArg} must be an array of 1 to ${maximum} selections`];
  }
  const reasons: string[] = [];
  let previous: ICorestoreLegacyResourceSelection | null = null;
  valueArg.forEach((item, index) => {
    const entryPath = `${pathArg}[${index}]`;
    const { entry, reasons: entryReasons } = readCorestoreLegacyServiceCapabilityEntry(item, entryPath);
    reasons.push(...entryReasons);
    if (entry === null) {
      return;
    }
    const current = entry as unknown as ICorestoreLegacyResourceSelection;
    if (previous !== null) {
      const order = compareCorestoreLegacyResourceSelections(previous, current);
      if (order === 0) {
        reasons.push(`${entryPath} selects service ${current.serviceId} capability ${current.capability} a second time`);
      } else if (order > 0) {
        reasons.push(`${entryPath} must sort after service ${previous.serviceId} capability ${previous.capability}`);
      }
    }
    previous = current;
  });
  return reasons;
});

/** The inventory entry for one service capability, or null when Corestore lists none. */
export const findCorestoreLegacyResource = (
  servicesArg: readonly ICorestoreLegacyResourceInventoryService[],
  serviceIdArg: string,
  capabilityArg: TPlatformBindingCapability,
): TCorestoreLegacyResource | null => {
  const service = servicesArg.find((item) => item.serviceId === serviceIdArg);
  return service?.resources.find((resource) => resource.capability === capabilityArg) ?? null;
};

/**
 * The rule every binding an adoption creates obeys, against the inventory it was decided on and
 * that inventory's digest: enabled, placed on the inventory's node, adopting exactly the listed
 * resource under that digest, a resource nothing blocks (or one already authorized for this very
 * binding), and for a bucket the legacy bucket name and retention intent unchanged (retention
 * absent when the bucket has none).
 */
export const validatePlatformBindingCorestoreLegacyAdoption = (
  bindingArg: unknown,
  inventoryArg: unknown,
  inventorySha256Arg: unknown,
  pathArg = 'platformBinding',
): string[] => collectValidatorReasons(pathArg, () => {
  const inventoryReasons = validateClusterCorestoreLegacyResourceInventory(inventoryArg, 'inventory');
  if (inventoryReasons.length > 0) {
    return inventoryReasons;
  }
  const inventory = inventoryArg as TClusterCorestoreLegacyResourceInventory;
  if (inventory.reachable !== true) {
    return ['inventory must be a reachable inventory to adopt from'];
  }
  const reasons: string[] = [];
  if (!isSha256Hex(inventorySha256Arg)
    || inventorySha256Arg !== computeClusterCorestoreLegacyResourceInventorySha256(inventory)) {
    reasons.push('inventorySha256 must be the digest of the inventory');
  }
  const bindingReasons = validatePlatformBinding(bindingArg, pathArg);
  if (bindingReasons.length > 0) {
    return [...reasons, ...bindingReasons];
  }
  const binding = bindingArg as IPlatformBinding;
  if (binding.enabled !== true) {
    reasons.push(`${pathArg}.enabled must be true for an adopting binding`);
  }
  if (binding.nodeId !== inventory.nodeId) {
    reasons.push(`${pathArg}.nodeId must be the inventory's node ${inventory.nodeId}`);
  }
  const resource = findCorestoreLegacyResource(inventory.services, binding.serviceId, binding.capability);
  if (resource === null) {
    reasons.push(`${pathArg} names service ${binding.serviceId} capability ${binding.capability}, which the inventory does not list`);
    return reasons;
  }
  const adoption = binding.corestoreLegacyAdoption;
  const expectedAdoption = {
    nodeId: inventory.nodeId,
    resourceName: getCorestoreLegacyResourceName(resource),
    inventorySha256: typeof inventorySha256Arg === 'string' ? inventorySha256Arg : '',
  };
  if (adoption === undefined) {
    reasons.push(`${pathArg}.corestoreLegacyAdoption is required on an adopting binding`);
  } else if (canonicalizeJson(adoption) !== canonicalizeJson(expectedAdoption)) {
    reasons.push(`${pathArg}.corestoreLegacyAdoption must be exactly node ${expectedAdoption.nodeId}, `
      + `resource ${expectedAdoption.resourceName} and the inventory digest`);
  }
  if (resource.adoption.state === 'unadopted' && resource.adoption.blocker !== null) {
    reasons.push(`${pathArg} adopts a resource blocked as ${resource.adoption.blocker}`);
  }
  if (resource.adoption.state === 'authorized' && resource.adoption.bindingId !== binding.id) {
    reasons.push(`${pathArg} adopts a resource already authorized for binding ${resource.adoption.bindingId}`);
  }
  if (resource.capability === 'database') {
    return reasons;
  }
  if (binding.objectstorageBucketName !== resource.bucketName) {
    reasons.push(`${pathArg}.objectstorageBucketName must be the legacy bucket ${resource.bucketName}`);
  }
  if (resource.retention === null) {
    if (binding.objectstorageRetention !== undefined) {
      reasons.push(`${pathArg}.objectstorageRetention must be absent: the legacy bucket states no retention intent`);
    }
  } else if (binding.objectstorageRetention === undefined
    || canonicalizeJson(binding.objectstorageRetention.intent) !== canonicalizeJson(resource.retention)) {
    reasons.push(`${pathArg}.objectstorageRetention.intent must be the legacy bucket's retention intent exactly`);
  }
  return reasons;
});

/**
 * The plan for Corestore's offline migration, built from adopting bindings and sorted by service
 * then capability. It restates no legacy name or intent: Corestore holds those itself. A binding
 * without `corestoreLegacyAdoption` is a caller error, not an entry.
 */
export const createCorestoreLegacyResourceAdoptionPlan = (
  bindingsArg: readonly IPlatformBinding[],
): ICorestoreLegacyResourceAdoptionPlanEntry[] => {
  const entries = bindingsArg.map((binding) => {
    if (binding.corestoreLegacyAdoption === undefined) {
      throw new Error(`platform binding ${binding.id} adopts no legacy resource`);
    }
    return { serviceId: binding.serviceId, capability: binding.capability, bindingId: binding.id };
  });
  return entries.sort(compareCorestoreLegacyResourceSelections);
};

/** Refusal codes of an adoption, in the contract's order. */
export const corestoreLegacyAdoptionErrorCodes = [
  'legacy-inventory-unreachable',
  'legacy-inventory-changed',
  'legacy-resource-absent',
  'legacy-resource-blocked',
  'legacy-resource-authorized-elsewhere',
  'service-absent',
  'binding-exists',
] as const;
export type TCorestoreLegacyAdoptionErrorCode = (typeof corestoreLegacyAdoptionErrorCodes)[number];

export interface ICorestoreLegacyAdoptionErrorData {
  code: TCorestoreLegacyAdoptionErrorCode;
  retryable: boolean;
}

/** The error data for a code: only an unreachable inventory is worth retrying as is. */
export const createCorestoreLegacyAdoptionErrorData = (
  codeArg: TCorestoreLegacyAdoptionErrorCode,
): ICorestoreLegacyAdoptionErrorData => ({ code: codeArg, retryable: codeArg === 'legacy-inventory-unreachable' });

export const isCorestoreLegacyAdoptionErrorData = (valueArg: unknown): valueArg is ICorestoreLegacyAdoptionErrorData => {
  try {
    return isPlainDataRecord(valueArg)
      && hasKeysWithin(valueArg, ['code', 'retryable'], [])
      && (corestoreLegacyAdoptionErrorCodes as readonly unknown[]).includes(valueArg.code)
      && valueArg.retryable === (valueArg.code === 'legacy-inventory-unreachable');
  } catch {
    return false;
  }
};
