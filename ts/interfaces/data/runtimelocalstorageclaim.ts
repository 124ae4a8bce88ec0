import {
  readServiceDataArray,
  readServiceDataField,
  readServiceDataRecord,
  reasonsForUnknownKeys,
  validateDirectoryModeBits,
  validateServiceCanonicalId,
  validateServiceMountPath,
  validateServiceOwnerId,
  type TServiceDataRecord,
} from '../private/servicecontract.js';
import { computeDomainDigestHex } from '../private/canonicaljson.js';
import { collectValidatorReasons, isSha256Hex } from '../private/dataproperties.js';

/**
 * A controller's authority for one retained, node-local volume of one service on one node.
 * Cloudly and Onebox issue claims alike. A claim revision is `id` + `generation`, chained by
 * `previous`; it never carries a host path, device, mount option or credential.
 */

export const runtimeLocalStorageClaimContract = Object.freeze({
  digestDomain: 'serve.zone/runtime-local-storage-claim',
  /** Directory permission bits `initialOwnership.mode` may hold; setuid (0o4000) is refused. */
  directoryModeBits: 0o3777,
  accessMode: 'ReadWriteOnce',
  reclaimPolicy: 'retain',
  error: 'Runtime local storage claim rejected.',
} as const);

export type TRuntimeLocalStorageClaimControllerKind = 'cloudly' | 'onebox';

/** The issuing controller. `id` names the controller instance; project's own definition. */
export interface IRuntimeLocalStorageClaimController {
  kind: TRuntimeLocalStorageClaimControllerKind;
  id: string;
}

/** What an assignment seals in `workload.storage`, and what `previous` names. */
export interface IRuntimeLocalStorageClaimReference {
  id: string;
  generation: number;
  /** Lowercase hex sha256 under the claim digest domain. */
  digest: string;
}

export interface IRuntimeLocalStorageClaimOwnership {
  uid: number;
  gid: number;
  mode: number;
}

export type TRuntimeLocalStorageClaimLifecycle = 'bound' | 'purge';

/** Who a claim belongs to; an assignment the claim binds to names exactly the same. */
export interface IRuntimeLocalStorageClaimOwners {
  controller: IRuntimeLocalStorageClaimController;
  organizationId: string;
  clusterId: string;
  nodeId: string;
  runtimeNamespace: string;
  serviceId: string;
}

interface IRuntimeLocalStorageClaimCommon extends IRuntimeLocalStorageClaimOwners {
  id: string;
  generation: number;
  previous: IRuntimeLocalStorageClaimReference | null;
  /** The service's own volume id. */
  volumeId: string;
  /** A directory the node derives from the claim's identity under a root only the node knows. */
  source: { kind: 'directory' };
  mount: { mountPath: string; readOnly: boolean };
  accessMode: 'ReadWriteOnce';
  reclaimPolicy: 'retain';
  /** `purge` orders the bytes deleted and always follows a bound generation of the same claim. */
  lifecycle: TRuntimeLocalStorageClaimLifecycle;
  digest: string;
}

export type IRuntimeLocalStorageClaim =
  | (IRuntimeLocalStorageClaimCommon & {
    initialization: 'empty';
    initialOwnership: IRuntimeLocalStorageClaimOwnership;
  })
  | (IRuntimeLocalStorageClaimCommon & { initialization: 'import'; initialOwnership: null });

/** A claim before Cloudly seals it with its digest. */
export type TRuntimeLocalStorageClaimUnsealed = IRuntimeLocalStorageClaim extends infer TClaim
  ? TClaim extends IRuntimeLocalStorageClaim ? Omit<TClaim, 'digest'> : never
  : never;

/** What a node holds for a claim, as it answers `applyRuntimeLocalStorageClaim`. */
export type TRuntimeLocalStorageClaimNodeState = 'ready' | 'import-required' | 'purged' | 'uncertain';

export const runtimeLocalStorageClaimNodeStates = Object.freeze([
  'ready',
  'import-required',
  'purged',
  'uncertain',
] as const);

/**
 * The assignment facts a claim binds to: who runs which service where, and the claim references
 * sealed in its workload. Project's own minimal definition of the runtime assignment.
 */
export interface IRuntimeLocalStorageClaimAssignment extends IRuntimeLocalStorageClaimOwners {
  workload: { storage: IRuntimeLocalStorageClaimReference[] };
}

const claimKeys = [
  'id', 'generation', 'previous', 'controller', 'organizationId', 'clusterId', 'nodeId', 'runtimeNamespace',
  'serviceId', 'volumeId', 'source', 'initialization', 'initialOwnership', 'mount', 'accessMode',
  'reclaimPolicy', 'lifecycle', 'digest',
] as const;

/** Most claim references one assignment's `workload.storage` is read with. Project's own limit. */
export const maximumRuntimeAssignmentStorageClaims = 4096;

const validateDigest = (valueArg: unknown, pathArg: string): string[] =>
  isSha256Hex(valueArg)
    ? []
    : [`${pathArg} must be a lowercase hex sha256 digest`];

const validateGeneration = (valueArg: unknown, pathArg: string): string[] =>
  Number.isSafeInteger(valueArg) && (valueArg as number) >= 1 ? [] : [`${pathArg} must be a positive integer`];

/** Every reason a value is not a valid claim reference `{ id, generation, digest }`. */
export const validateRuntimeLocalStorageClaimReference = (valueArg: unknown, pathArg = 'claim'): string[] =>
  collectValidatorReasons(pathArg, () => {
    const record = readServiceDataRecord(valueArg);
    if (record === null) {
      return [`${pathArg} must be a plain object`];
    }
    return [
      ...reasonsForUnknownKeys(record, ['id', 'generation', 'digest'], pathArg),
      ...validateServiceCanonicalId(readServiceDataField(record, 'id'), `${pathArg}.id`),
      ...validateGeneration(readServiceDataField(record, 'generation'), `${pathArg}.generation`),
      ...validateDigest(readServiceDataField(record, 'digest'), `${pathArg}.digest`),
    ];
  });

const exactRecordReasons = (
  valueArg: unknown,
  keysArg: readonly string[],
  pathArg: string,
): { record: TServiceDataRecord | null; reasons: string[] } => {
  const record = readServiceDataRecord(valueArg);
  if (record === null) {
    return { record: null, reasons: [`${pathArg} must be a plain object`] };
  }
  const reasons = reasonsForUnknownKeys(record, keysArg, pathArg);
  for (const key of keysArg) {
    if (!Object.hasOwn(record, key)) {
      reasons.push(`${pathArg}.${key} is missing`);
    }
  }
  return { record, reasons };
};

/** Every schema reason of a claim, with or without its `digest` member. */
const collectClaimSchemaReasons = (valueArg: unknown, requireDigestArg: boolean, pathArg: string): string[] =>
  collectValidatorReasons(pathArg, () => {
    const keys = requireDigestArg ? claimKeys : claimKeys.filter((key) => key !== 'digest');
    const { record, reasons } = exactRecordReasons(valueArg, keys, pathArg);
    if (record === null) {
      return reasons;
    }
    const field = (keyArg: string): unknown => readServiceDataField(record, keyArg);
    const id = field('id');
    const generation = field('generation');
    reasons.push(...validateServiceCanonicalId(id, `${pathArg}.id`));
    reasons.push(...validateGeneration(generation, `${pathArg}.generation`));
    const previous = field('previous');
    if (previous === null) {
      if (generation !== 1) {
        reasons.push(`${pathArg}.previous must name the prior generation when generation is above 1`);
      }
    } else if (Object.hasOwn(record, 'previous')) {
      const previousReasons = validateRuntimeLocalStorageClaimReference(previous, `${pathArg}.previous`);
      reasons.push(...previousReasons);
      if (previousReasons.length === 0) {
        const previousRecord = previous as TServiceDataRecord;
        if (previousRecord.id !== id) {
          reasons.push(`${pathArg}.previous.id must be the claim's own id`);
        }
        if (typeof generation === 'number' && previousRecord.generation !== generation - 1) {
          reasons.push(`${pathArg}.previous.generation must be the generation right before ${pathArg}.generation`);
        }
      }
    }
    const controller = exactRecordReasons(field('controller'), ['kind', 'id'], `${pathArg}.controller`);
    reasons.push(...controller.reasons);
    if (controller.record !== null) {
      const kind = readServiceDataField(controller.record, 'kind');
      if (kind !== 'cloudly' && kind !== 'onebox') {
        reasons.push(`${pathArg}.controller.kind must be 'cloudly' or 'onebox'`);
      }
      reasons.push(...validateServiceCanonicalId(readServiceDataField(controller.record, 'id'), `${pathArg}.controller.id`));
    }
    for (const key of ['organizationId', 'clusterId', 'nodeId', 'runtimeNamespace', 'serviceId', 'volumeId']) {
      reasons.push(...validateServiceCanonicalId(field(key), `${pathArg}.${key}`));
    }
    const source = exactRecordReasons(field('source'), ['kind'], `${pathArg}.source`);
    reasons.push(...source.reasons);
    if (source.record !== null && readServiceDataField(source.record, 'kind') !== 'directory') {
      reasons.push(`${pathArg}.source.kind must be 'directory'`);
    }
    const initialization = field('initialization');
    const initialOwnership = field('initialOwnership');
    if (initialization === 'empty') {
      const ownership = exactRecordReasons(initialOwnership, ['uid', 'gid', 'mode'], `${pathArg}.initialOwnership`);
      if (ownership.record === null) {
        reasons.push(`${pathArg}.initialOwnership must state { uid, gid, mode } for an empty claim`);
      } else {
        reasons.push(...ownership.reasons);
        reasons.push(...validateServiceOwnerId(readServiceDataField(ownership.record, 'uid'), `${pathArg}.initialOwnership.uid`));
        reasons.push(...validateServiceOwnerId(readServiceDataField(ownership.record, 'gid'), `${pathArg}.initialOwnership.gid`));
        reasons.push(...validateDirectoryModeBits(
          readServiceDataField(ownership.record, 'mode'),
          runtimeLocalStorageClaimContract.directoryModeBits,
          `${pathArg}.initialOwnership.mode`,
        ));
      }
    } else if (initialization === 'import') {
      if (initialOwnership !== null) {
        reasons.push(`${pathArg}.initialOwnership must be null for an import claim`);
      }
    } else {
      reasons.push(`${pathArg}.initialization must be 'empty' or 'import'`);
    }
    const mount = exactRecordReasons(field('mount'), ['mountPath', 'readOnly'], `${pathArg}.mount`);
    reasons.push(...mount.reasons);
    if (mount.record !== null) {
      reasons.push(...validateServiceMountPath(readServiceDataField(mount.record, 'mountPath'), `${pathArg}.mount.mountPath`));
      if (typeof readServiceDataField(mount.record, 'readOnly') !== 'boolean') {
        reasons.push(`${pathArg}.mount.readOnly must be a boolean`);
      }
    }
    if (field('accessMode') !== runtimeLocalStorageClaimContract.accessMode) {
      reasons.push(`${pathArg}.accessMode must be 'ReadWriteOnce'`);
    }
    if (field('reclaimPolicy') !== runtimeLocalStorageClaimContract.reclaimPolicy) {
      reasons.push(`${pathArg}.reclaimPolicy must be 'retain'`);
    }
    const lifecycle = field('lifecycle');
    if (lifecycle !== 'bound' && lifecycle !== 'purge') {
      reasons.push(`${pathArg}.lifecycle must be 'bound' or 'purge'`);
    } else if (lifecycle === 'purge' && previous === null) {
      reasons.push(`${pathArg}.lifecycle 'purge' must follow a bound generation of the same claim`);
    }
    if (requireDigestArg) {
      reasons.push(...validateDigest(field('digest'), `${pathArg}.digest`));
    }
    return reasons;
  });

const copyClaimMembers = (recordArg: TServiceDataRecord): TRuntimeLocalStorageClaimUnsealed => {
  const value = recordArg as unknown as IRuntimeLocalStorageClaim;
  const common = {
    id: value.id,
    generation: value.generation,
    previous: value.previous === null
      ? null
      : { id: value.previous.id, generation: value.previous.generation, digest: value.previous.digest },
    controller: { kind: value.controller.kind, id: value.controller.id },
    organizationId: value.organizationId,
    clusterId: value.clusterId,
    nodeId: value.nodeId,
    runtimeNamespace: value.runtimeNamespace,
    serviceId: value.serviceId,
    volumeId: value.volumeId,
    source: { kind: 'directory' as const },
    mount: { mountPath: value.mount.mountPath, readOnly: value.mount.readOnly },
    accessMode: 'ReadWriteOnce' as const,
    reclaimPolicy: 'retain' as const,
    lifecycle: value.lifecycle,
  };
  return value.initialization === 'empty'
    ? {
      ...common,
      initialization: 'empty',
      initialOwnership: {
        uid: value.initialOwnership.uid,
        gid: value.initialOwnership.gid,
        mode: value.initialOwnership.mode,
      },
    }
    : { ...common, initialization: 'import', initialOwnership: null };
};

const failClaim = (reasonsArg: string[]): never => {
  throw new TypeError(`${runtimeLocalStorageClaimContract.error} ${reasonsArg.join('; ')}`);
};

/** Detached exact-schema snapshot of a claim; throws with every reason. The digest is a separate check. */
export const snapshotRuntimeLocalStorageClaim = (valueArg: unknown): IRuntimeLocalStorageClaim => {
  const reasons = collectClaimSchemaReasons(valueArg, true, 'claim');
  if (reasons.length > 0) {
    return failClaim(reasons);
  }
  const record = valueArg as TServiceDataRecord;
  return { ...copyClaimMembers(record), digest: record.digest as string } as IRuntimeLocalStorageClaim;
};

/**
 * The claim digest: sha256 under `serve.zone/runtime-local-storage-claim` over the claim's canonical
 * JSON without its `digest` member. Accepts a sealed or an unsealed claim; throws for any other value.
 */
export const computeRuntimeLocalStorageClaimDigest = async (valueArg: unknown): Promise<string> => {
  let record: TServiceDataRecord | null = null;
  try {
    record = readServiceDataRecord(valueArg);
  } catch {
    record = null;
  }
  const sealed = record !== null && Object.hasOwn(record, 'digest');
  const reasons = collectClaimSchemaReasons(valueArg, sealed, 'claim');
  if (reasons.length > 0) {
    return failClaim(reasons);
  }
  return computeDomainDigestHex(
    runtimeLocalStorageClaimContract.digestDomain,
    copyClaimMembers(record as TServiceDataRecord),
  );
};

/** Seals an unsealed claim with its digest. */
export const sealRuntimeLocalStorageClaim = async (
  valueArg: TRuntimeLocalStorageClaimUnsealed,
): Promise<IRuntimeLocalStorageClaim> => {
  const digest = await computeRuntimeLocalStorageClaimDigest(valueArg);
  return { ...copyClaimMembers(valueArg as unknown as TServiceDataRecord), digest } as IRuntimeLocalStorageClaim;
};

/** Every reason a claim is refused: its exact schema first, then the stated digest. */
export const validateRuntimeLocalStorageClaim = async (valueArg: unknown): Promise<string[]> => {
  const reasons = collectClaimSchemaReasons(valueArg, true, 'claim');
  if (reasons.length > 0) {
    return reasons;
  }
  const claim = snapshotRuntimeLocalStorageClaim(valueArg);
  return claim.digest === await computeRuntimeLocalStorageClaimDigest(claim)
    ? []
    : ['claim.digest does not match the claim'];
};

/** The `{ id, generation, digest }` an assignment seals in `workload.storage`. */
export const getRuntimeLocalStorageClaimReference = (valueArg: unknown): IRuntimeLocalStorageClaimReference => {
  const claim = snapshotRuntimeLocalStorageClaim(valueArg);
  return { id: claim.id, generation: claim.generation, digest: claim.digest };
};

/**
 * Binds a claim to an assignment: the claim must be valid (digest included) and bound, the
 * assignment must seal exactly its reference, and controller, organization, node, runtime
 * namespace, service and cluster must all match, the cluster being the one the caller expects.
 * A `purge` claim binds to no assignment. Answers the bound reference; throws otherwise.
 */
export const bindRuntimeLocalStorageClaimToAssignment = async (
  claimArg: unknown,
  assignmentArg: unknown,
  expectedClusterIdArg: string,
): Promise<IRuntimeLocalStorageClaimReference> => {
  const claimReasons = await validateRuntimeLocalStorageClaim(claimArg);
  if (claimReasons.length > 0) {
    return failClaim(claimReasons);
  }
  const claim = snapshotRuntimeLocalStorageClaim(claimArg);
  const reasons: string[] = [];
  if (claim.lifecycle === 'purge') {
    reasons.push('a purge claim binds to no assignment');
  }
  const assignment = collectValidatorReasons('assignment', () => {
    const record = readServiceDataRecord(assignmentArg);
    if (record === null) {
      return ['assignment must be a plain object'];
    }
    const mismatches: string[] = [];
    const controller = readServiceDataRecord(readServiceDataField(record, 'controller'));
    if (
      controller === null
      || readServiceDataField(controller, 'kind') !== claim.controller.kind
      || readServiceDataField(controller, 'id') !== claim.controller.id
    ) {
      mismatches.push('assignment.controller must be the claim controller');
    }
    for (const key of ['organizationId', 'clusterId', 'nodeId', 'runtimeNamespace', 'serviceId'] as const) {
      if (readServiceDataField(record, key) !== claim[key]) {
        mismatches.push(`assignment.${key} must be the claim's ${key}`);
      }
    }
    const workload = readServiceDataRecord(readServiceDataField(record, 'workload'));
    const storage = workload === null ? null : readServiceDataArray(readServiceDataField(workload, 'storage'), maximumRuntimeAssignmentStorageClaims);
    const sealed = storage?.filter((entry) => {
      const entryRecord = readServiceDataRecord(entry);
      return entryRecord !== null && readServiceDataField(entryRecord, 'id') === claim.id;
    }) ?? [];
    const exact = sealed.length === 1 ? readServiceDataRecord(sealed[0]) : null;
    if (
      exact === null
      || validateRuntimeLocalStorageClaimReference(exact).length > 0
      || exact.generation !== claim.generation
      || exact.digest !== claim.digest
    ) {
      mismatches.push('assignment.workload.storage must seal exactly the claim reference');
    }
    return mismatches;
  });
  reasons.push(...assignment);
  if (claim.clusterId !== expectedClusterIdArg) {
    reasons.push('claim.clusterId must be the expected cluster');
  }
  if (reasons.length > 0) {
    return failClaim(reasons);
  }
  return { id: claim.id, generation: claim.generation, digest: claim.digest };
};

/** Exposed for the request contracts in the same module. */
export const collectRuntimeLocalStorageClaimReasons = (valueArg: unknown, pathArg = 'claim'): string[] =>
  collectClaimSchemaReasons(valueArg, true, pathArg);

/**
 * Cloudly's record of one claim revision it issued and how the node answered. Project's own
 * definition; administrators read it.
 */
export interface IRuntimeLocalStorageClaimRecord {
  claim: IRuntimeLocalStorageClaim;
  /** `pending` until a bound answer arrives; a relay that is offline leaves it pending. */
  delivery: 'pending' | 'answered';
  /** The node's state from the last bound answer, null before one. */
  nodeState: TRuntimeLocalStorageClaimNodeState | null;
  answerStatus: 'accepted' | 'replay' | 'historical' | null;
  /** Why the last push did not bind (offline relay, mismatching answer), null after a bound answer. */
  lastDeliveryError: string | null;
  issuedAt: number;
  answeredAt: number | null;
  /**
   * With a `historical` answer only: the newer generation the node holds (Cloudly issued an older
   * one). Cloudly pushes nothing more for the claim until an administrator supersedes that generation.
   */
  nodeClaim?: IRuntimeLocalStorageClaimReference;
}
