import { sha256Hex } from '../interfaces/private/canonicaljson.js';
import {
  corestoreLegacyAdoptionErrorCodes,
  findCorestoreLegacyResource,
  getCorestoreLegacyResourceName,
  validatePlatformBindingCorestoreLegacyAdoption,
  type ICorestoreLegacyResourceSelection,
  type TClusterCorestoreLegacyResourceInventory,
  type TCorestoreLegacyAdoptionErrorCode,
} from '../interfaces/data/corestorelegacy.js';
import type { IPlatformBinding, TPlatformBindingCapability } from '../interfaces/data/platformbinding.js';

/**
 * The pure part of an adoption: given the inventory, its digest, the selection and what Cloudly
 * holds (services, the bindings of the selected service capabilities), decide which bindings to
 * create, which stand unchanged, or which refusal answers. No I/O here, so tests call it directly.
 */

/**
 * A service has at most one binding per capability, so the binding id is derived from the pair.
 * That makes "exactly one binding per service capability" an exactly-once insert of one id rather
 * than a unique index the embedded database would not enforce.
 */
export const derivePlatformBindingId = (serviceIdArg: string, capabilityArg: TPlatformBindingCapability): string =>
  `pb-${sha256Hex(`${serviceIdArg}\u0000${capabilityArg}`).slice(0, 32)}`;

export interface ICorestoreLegacyAdoptionDecisionInput {
  nodeId: string;
  inventory: Extract<TClusterCorestoreLegacyResourceInventory, { reachable: true }>;
  inventorySha256: string;
  /** Already validated: sorted, unique. */
  selections: readonly ICorestoreLegacyResourceSelection[];
  /** Which selected services Cloudly knows. */
  knownServiceIds: ReadonlySet<string>;
  /** The stored binding of each selected service capability, by derived binding id. */
  existingBindings: ReadonlyMap<string, IPlatformBinding>;
}

export interface ICorestoreLegacyAdoptionRefusalDetail {
  serviceId: string;
  capability: TPlatformBindingCapability;
  code: TCorestoreLegacyAdoptionErrorCode;
}

export type TCorestoreLegacyAdoptionDecision =
  | {
    kind: 'refused';
    /** The refusal answered: the first, in the contract's order, any selection earned. */
    code: TCorestoreLegacyAdoptionErrorCode;
    details: ICorestoreLegacyAdoptionRefusalDetail[];
  }
  | {
    kind: 'accepted';
    /** One binding per selection, in selection order: existing ones unchanged, new ones as created. */
    bindings: IPlatformBinding[];
    /** The bindings this adoption creates (a subset of `bindings`). */
    toCreate: IPlatformBinding[];
  };

const buildAdoptingBinding = (
  inputArg: ICorestoreLegacyAdoptionDecisionInput,
  selectionArg: ICorestoreLegacyResourceSelection,
  bindingIdArg: string,
  resourceArg: NonNullable<ReturnType<typeof findCorestoreLegacyResource>>,
): IPlatformBinding => {
  const binding: IPlatformBinding = {
    id: bindingIdArg,
    serviceId: selectionArg.serviceId,
    capability: selectionArg.capability,
    enabled: true,
    nodeId: inputArg.nodeId,
    status: 'pending',
    statusReason: null,
    corestoreLegacyAdoption: {
      nodeId: inputArg.nodeId,
      resourceName: getCorestoreLegacyResourceName(resourceArg),
      inventorySha256: inputArg.inventorySha256,
    },
    generation: 1,
  };
  if (resourceArg.capability === 'objectstorage') {
    binding.objectstorageBucketName = resourceArg.bucketName;
    if (resourceArg.retention !== null) {
      binding.objectstorageRetention = { intent: { ...resourceArg.retention } };
    }
  }
  return binding;
};

/** True when the stored binding already adopts this node's resource of that service capability. */
const isSameAdoption = (
  bindingArg: IPlatformBinding,
  nodeIdArg: string,
  resourceNameArg: string | null,
): boolean => bindingArg.corestoreLegacyAdoption !== undefined
  && bindingArg.corestoreLegacyAdoption.nodeId === nodeIdArg
  && (resourceNameArg === null || bindingArg.corestoreLegacyAdoption.resourceName === resourceNameArg);

export const decideCorestoreLegacyAdoption = (
  inputArg: ICorestoreLegacyAdoptionDecisionInput,
): TCorestoreLegacyAdoptionDecision => {
  const details: ICorestoreLegacyAdoptionRefusalDetail[] = [];
  const bindings: IPlatformBinding[] = [];
  const toCreate: IPlatformBinding[] = [];
  for (const selection of inputArg.selections) {
    const refuseSelection = (codeArg: TCorestoreLegacyAdoptionErrorCode) => {
      details.push({ serviceId: selection.serviceId, capability: selection.capability, code: codeArg });
    };
    const resource = findCorestoreLegacyResource(inputArg.inventory.services, selection.serviceId, selection.capability);
    const bindingId = derivePlatformBindingId(selection.serviceId, selection.capability);
    const existing = inputArg.existingBindings.get(bindingId);
    if (existing !== undefined) {
      // The one binding of this service capability exists: either it is this very adoption,
      // answered unchanged (its legacy entry may already be consumed), or it blocks one.
      if (isSameAdoption(existing, inputArg.nodeId, resource === null ? null : getCorestoreLegacyResourceName(resource))) {
        bindings.push(existing);
      } else {
        refuseSelection('binding-exists');
      }
      continue;
    }
    if (!inputArg.knownServiceIds.has(selection.serviceId)) {
      refuseSelection('service-absent');
      continue;
    }
    if (resource === null) {
      refuseSelection('legacy-resource-absent');
      continue;
    }
    if (resource.adoption.state === 'authorized' && resource.adoption.bindingId !== bindingId) {
      refuseSelection('legacy-resource-authorized-elsewhere');
      continue;
    }
    if (resource.adoption.state === 'unadopted' && resource.adoption.blocker !== null) {
      refuseSelection('legacy-resource-blocked');
      continue;
    }
    const binding = buildAdoptingBinding(inputArg, selection, bindingId, resource);
    const ruleReasons = validatePlatformBindingCorestoreLegacyAdoption(binding, inputArg.inventory, inputArg.inventorySha256);
    if (ruleReasons.length > 0) {
      // The builder and the rule disagree: a defect here, never a caller's fault.
      throw new Error(`adopting binding breaks the adoption rule: ${ruleReasons.join('; ')}`);
    }
    bindings.push(binding);
    toCreate.push(binding);
  }
  if (details.length > 0) {
    const code = corestoreLegacyAdoptionErrorCodes.find((candidate) => details.some((detail) => detail.code === candidate))!;
    return { kind: 'refused', code, details };
  }
  return { kind: 'accepted', bindings, toCreate };
};
