import { defineDocumentKind, type DocumentStore, type IStoredDocument, type TDecision } from '../core/store.js';
import { refuse, refuseNamed } from '../core/errors.js';
import { fromBase64Url } from '../core/sealing.js';
import { invalidField, fieldProblem, type IFieldProblem, type TFieldCheck } from '../core/validation.js';
import { fieldProblemReasons } from '../interfaces/data/refusal.js';
import { isCanonicalId } from '../interfaces/private/dataproperties.js';
import { readServiceDataArray, readServiceDataField, readServiceDataRecord } from '../interfaces/private/servicecontract.js';
import { canonicalizeJson } from '../interfaces/private/canonicaljson.js';
import {
  sealedSecretSuite,
  secretGroupContract,
  serviceSecretBinding,
  type ISealedSecret,
  type ISecretGroup,
  type ISecretGroupWritable,
  type ISecretVersionClusterState,
  type ISecretVersionWritable,
} from '../interfaces/data/secret.js';
import { isSecretValueInClear } from '../interfaces/data/serviceenvironment.js';
import { secretRecipientsKind, type ISecretRecipientsDocument } from './documents.js';

/**
 * Secret groups: values Cloudly delivers but cannot read. Each version of a group is sealed in the
 * client to the current recipient of every cluster the group names; Cloudly stores the sealed
 * copies, checks their shape, bindings and recipients, and hands each cluster's relay its own copy
 * in the desired state. It never holds a key that opens them. Details: docs/secrets.md, "Secret groups".
 */

/** One version as stored: metadata and one sealed copy per cluster of the group. */
export interface IStoredSecretVersion {
  secretVersionId: string;
  version: number;
  valueBytes: number;
  createdAt: number;
  createdBy: string;
  resealedAt: number | null;
  sealed: ISealedSecret[];
}

/** A secret group. Id: its key (so the key is unique by the create-only write). */
export interface ISecretGroupDocument extends IStoredDocument {
  key: string;
  tags: string[];
  environment: string;
  clusterIds: string[];
  retainedVersions: number;
  /** Newest first, at most `retainedVersions`. */
  versions: IStoredSecretVersion[];
  /** `<secretVersionId>@<version>` of each kept version, newest first: what the audit log shows of a rotation. */
  versionIds: string[];
  createdAt: number;
  updatedAt: number;
}

export const secretGroupKind = defineDocumentKind<ISecretGroupDocument>('CloudlySecretGroup', {
  // Never the sealed copies: the audit shows which versions exist and who changed them.
  auditedFields: ['key', 'tags', 'environment', 'clusterIds', 'retainedVersions', 'versionIds'],
});

export const secretGroupReasons = Object.freeze({
  notFound: 'secret-group-not-found',
  exists: 'secret-group-exists',
  inUse: 'secret-group-in-use',
  versionExists: 'secret-version-exists',
  versionOutOfOrder: 'secret-version-out-of-order',
  resealLengthChanged: 'secret-reseal-length-changed',
  generationMismatch: 'generation-mismatch',
  recipientNotEnrolled: 'secret-recipient-not-enrolled',
  recipientUnknown: 'secret-recipient-unknown',
  bindingMismatch: 'secret-binding-mismatch',
} as const);

const valueInClearMessage = 'is a secret value in clear: seal the value in the client to each cluster\'s recipient (docs/secrets.md)';

const keyPattern = /^[a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?$/;
const tagPattern = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}$/;

/** Every problem of a group's writable metadata, by path. */
export const checkSecretGroupWritable: TFieldCheck = (valueArg, pathArg) => {
  if (isSecretValueInClear(valueArg)) {
    return [fieldProblem(pathArg, fieldProblemReasons.secretValueInClear, valueInClearMessage)];
  }
  const record = readServiceDataRecord(valueArg);
  if (record === null) {
    return [invalidField(pathArg, 'must be { key, tags, environment, clusterIds, retainedVersions? }')];
  }
  const problems: IFieldProblem[] = [];
  for (const key of Object.keys(record)) {
    if (!['key', 'tags', 'environment', 'clusterIds', 'retainedVersions'].includes(key)) {
      problems.push(fieldProblem(`${pathArg}.${key}`, fieldProblemReasons.unknown, 'is not a known member'));
    }
  }
  const key = readServiceDataField(record, 'key');
  if (typeof key !== 'string' || !keyPattern.test(key)) {
    problems.push(invalidField(`${pathArg}.key`, `must be 1-${secretGroupContract.maximumKeyLength} lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit`));
  }
  const tags = readServiceDataArray(readServiceDataField(record, 'tags'), secretGroupContract.maximumTags);
  if (tags === null) {
    problems.push(invalidField(`${pathArg}.tags`, `must be an array of at most ${secretGroupContract.maximumTags} tags`));
  } else {
    tags.forEach((tag, index) => {
      if (typeof tag !== 'string' || !tagPattern.test(tag)) {
        problems.push(invalidField(`${pathArg}.tags[${index}]`, `must be 1-${secretGroupContract.maximumTagLength} letters, digits, '.', '_', ':', '/' or '-'`));
      }
    });
    if (new Set(tags).size !== tags.length) {
      problems.push(fieldProblem(`${pathArg}.tags`, fieldProblemReasons.duplicate, 'must be unique'));
    }
  }
  const environment = readServiceDataField(record, 'environment');
  if (typeof environment !== 'string' || !keyPattern.test(environment)) {
    problems.push(invalidField(`${pathArg}.environment`, `must be 1-128 lowercase letters, digits, '.', '_' or '-' (e.g. production)`));
  }
  const clusterIds = readServiceDataArray(readServiceDataField(record, 'clusterIds'), secretGroupContract.maximumClusters);
  if (clusterIds === null || clusterIds.length === 0) {
    problems.push(invalidField(`${pathArg}.clusterIds`, `must be an array of 1 to ${secretGroupContract.maximumClusters} cluster ids`));
  } else {
    clusterIds.forEach((clusterId, index) => {
      if (!isCanonicalId(clusterId)) {
        problems.push(invalidField(`${pathArg}.clusterIds[${index}]`, 'must be a cluster id'));
      }
    });
    if (new Set(clusterIds).size !== clusterIds.length) {
      problems.push(fieldProblem(`${pathArg}.clusterIds`, fieldProblemReasons.duplicate, 'must be unique'));
    }
  }
  if (Object.hasOwn(record, 'retainedVersions')) {
    const retained = readServiceDataField(record, 'retainedVersions');
    if (!Number.isSafeInteger(retained) || (retained as number) < 1 || (retained as number) > secretGroupContract.maximumRetainedVersions) {
      problems.push(invalidField(`${pathArg}.retainedVersions`, `must be an integer from 1 to ${secretGroupContract.maximumRetainedVersions}`));
    }
  }
  return problems;
};

const base64UrlPattern = /^[A-Za-z0-9_-]+$/;
const recipientIdPattern = /^x25519:[0-9a-f]{32}$/;

/** The value's length a sealed copy carries (its ciphertext less the tag), or null when the copy is malformed. */
export const sealedValueBytes = (sealedArg: Pick<ISealedSecret, 'ciphertext'>): number | null => {
  const bytes = fromBase64Url(sealedArg.ciphertext);
  return bytes === null || bytes.length < secretGroupContract.sealedTagBytes ? null : bytes.length - secretGroupContract.sealedTagBytes;
};

/**
 * Every problem of a version's shape, by path: ids, the sealed copies' suite, encodings and sizes.
 * Whether the bindings and recipients fit the group is judged against the group (`judgeSealedCopies`).
 * A member that looks like the value in clear is refused `secret-value-in-clear`; its content is
 * never repeated.
 */
export const checkSecretVersionWritable: TFieldCheck = (valueArg, pathArg) => {
  if (isSecretValueInClear(valueArg)) {
    return [fieldProblem(pathArg, fieldProblemReasons.secretValueInClear, valueInClearMessage)];
  }
  const record = readServiceDataRecord(valueArg);
  if (record === null) {
    return [invalidField(pathArg, 'must be { secretVersionId, version, sealed }')];
  }
  const problems: IFieldProblem[] = [];
  for (const key of Object.keys(record)) {
    if (!['secretVersionId', 'version', 'sealed'].includes(key)) {
      problems.push(fieldProblem(`${pathArg}.${key}`, fieldProblemReasons.unknown, 'is not a known member'));
    }
  }
  if (!isCanonicalId(readServiceDataField(record, 'secretVersionId'))) {
    problems.push(invalidField(`${pathArg}.secretVersionId`, 'must be an id of 1-128 letters, digits, \'.\', \'_\' or \'-\' starting with a letter or digit'));
  }
  const version = readServiceDataField(record, 'version');
  if (!Number.isSafeInteger(version) || (version as number) < 1) {
    problems.push(invalidField(`${pathArg}.version`, 'must be a positive integer'));
  }
  const sealed = readServiceDataArray(readServiceDataField(record, 'sealed'), secretGroupContract.maximumClusters);
  if (sealed === null || sealed.length === 0) {
    problems.push(invalidField(`${pathArg}.sealed`, `must be an array of 1 to ${secretGroupContract.maximumClusters} sealed copies`));
    return problems;
  }
  sealed.forEach((copy, index) => {
    const path = `${pathArg}.sealed[${index}]`;
    if (isSecretValueInClear(copy)) {
      problems.push(fieldProblem(path, fieldProblemReasons.secretValueInClear, valueInClearMessage));
      return;
    }
    const item = readServiceDataRecord(copy);
    if (item === null || Object.keys(item).sort().join(',') !== 'binding,ciphertext,enc,recipientId,suite') {
      problems.push(invalidField(path, 'must be exactly { suite, recipientId, binding, enc, ciphertext }'));
      return;
    }
    if (item.suite !== sealedSecretSuite) {
      problems.push(invalidField(`${path}.suite`, `must be ${sealedSecretSuite}`));
    }
    if (typeof item.recipientId !== 'string' || !recipientIdPattern.test(item.recipientId)) {
      problems.push(invalidField(`${path}.recipientId`, 'must be x25519: and 32 hex digits'));
    }
    const enc = typeof item.enc === 'string' && base64UrlPattern.test(item.enc) ? fromBase64Url(item.enc) : null;
    if (enc === null || enc.length !== 32) {
      problems.push(invalidField(`${path}.enc`, 'must be the 32-byte X25519 encapsulated key in unpadded base64url'));
    }
    const ciphertext = typeof item.ciphertext === 'string' && base64UrlPattern.test(item.ciphertext) ? fromBase64Url(item.ciphertext) : null;
    if (ciphertext === null || ciphertext.length < secretGroupContract.sealedTagBytes
      || ciphertext.length > secretGroupContract.maximumValueBytes + secretGroupContract.sealedTagBytes) {
      problems.push(invalidField(`${path}.ciphertext`, `must be unpadded base64url of a value of at most ${secretGroupContract.maximumValueBytes} bytes and its 16-byte tag`));
    }
    if (readServiceDataRecord(item.binding) === null) {
      problems.push(invalidField(`${path}.binding`, 'must be the sealed binding object'));
    }
  });
  return problems;
};

/**
 * Whether the sealed copies of a version fit the group: exactly one per cluster of the group,
 * each bound to `{ clusterId, nodeId: null, purpose: 'service-secret', secretVersion: { secretId:
 * <group id>, secretVersionId }, version, enrollmentId: null }`, each to its cluster's current
 * recipient, all of one value length. The refusal names every copy that does not.
 */
export const judgeSealedCopies = (
  groupArg: Pick<ISecretGroupDocument, 'id' | 'clusterIds'>,
  versionArg: ISecretVersionWritable,
  currentRecipientsArg: ReadonlyMap<string, string | null>,
): { valueBytes: number } | { refusal: ReturnType<typeof refuse> } => {
  const causes: { path: string; reason: string; message: string }[] = [];
  const reasons = new Set<string>();
  const seen = new Set<string>();
  const lengths = new Set<number>();
  versionArg.sealed.forEach((copy, index) => {
    const path = `request.version.sealed[${index}]`;
    const clusterId = readServiceDataRecord(copy.binding)?.clusterId;
    if (typeof clusterId !== 'string' || !groupArg.clusterIds.includes(clusterId)) {
      reasons.add(secretGroupReasons.bindingMismatch);
      causes.push({ path: `${path}.binding.clusterId`, reason: secretGroupReasons.bindingMismatch, message: `names no cluster of group ${groupArg.id}` });
      return;
    }
    if (seen.has(clusterId)) {
      reasons.add(secretGroupReasons.bindingMismatch);
      causes.push({ path: `${path}.binding.clusterId`, reason: secretGroupReasons.bindingMismatch, message: `repeats cluster ${clusterId}` });
      return;
    }
    seen.add(clusterId);
    const expected = serviceSecretBinding(clusterId, groupArg.id, versionArg.secretVersionId, versionArg.version);
    if (canonicalizeJson(copy.binding) !== canonicalizeJson(expected)) {
      reasons.add(secretGroupReasons.bindingMismatch);
      causes.push({ path: `${path}.binding`, reason: secretGroupReasons.bindingMismatch, message: `must be ${canonicalizeJson(expected)}` });
    }
    const current = currentRecipientsArg.get(clusterId) ?? null;
    if (current === null) {
      reasons.add(secretGroupReasons.recipientNotEnrolled);
      causes.push({ path: `${path}.recipientId`, reason: secretGroupReasons.recipientNotEnrolled, message: `cluster ${clusterId} has enrolled no recipient yet` });
    } else if (copy.recipientId !== current) {
      reasons.add(secretGroupReasons.recipientUnknown);
      causes.push({ path: `${path}.recipientId`, reason: secretGroupReasons.recipientUnknown, message: `is not the current recipient of cluster ${clusterId} (${current})` });
    }
    const bytes = sealedValueBytes(copy);
    if (bytes !== null) {
      lengths.add(bytes);
    }
  });
  for (const clusterId of groupArg.clusterIds) {
    if (!seen.has(clusterId)) {
      reasons.add(secretGroupReasons.bindingMismatch);
      causes.push({ path: 'request.version.sealed', reason: secretGroupReasons.bindingMismatch, message: `holds no copy for cluster ${clusterId}` });
    }
  }
  if (lengths.size > 1) {
    reasons.add(secretGroupReasons.bindingMismatch);
    causes.push({ path: 'request.version.sealed', reason: secretGroupReasons.bindingMismatch, message: 'the copies seal values of different lengths: one value is sealed to every cluster' });
  }
  if (causes.length > 0) {
    return { refusal: refuse('invalid-request', [...reasons], { causes }) };
  }
  return { valueBytes: [...lengths][0] };
};

/** A new group under its key; a key taken is refused. */
export const decideSecretGroupCreation = (
  currentArg: ISecretGroupDocument | null,
  docArg: Omit<ISecretGroupDocument, 'generation'>,
): TDecision<ISecretGroupDocument> => (currentArg
  ? { kind: 'refuse', refusal: refuseNamed('conflict', 'secret-group-exists', `a secret group with key ${docArg.key} exists`, 'request.group.key') }
  : { kind: 'create', doc: docArg });

/**
 * A version added (or re-sealed) on the group as read: the group must exist and be at the
 * generation the caller read. A new version is the next number; the same id and number as a kept
 * version re-seals it (its value length must stay). Versions beyond the retention are dropped.
 */
export const decideSecretVersion = (
  currentArg: ISecretGroupDocument | null,
  requestArg: { secretGroupId: string; expectedGeneration: number; version: ISecretVersionWritable },
  factsArg: { currentRecipients: ReadonlyMap<string, string | null>; actor: string; now: number },
): TDecision<ISecretGroupDocument> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'secret-group-not-found', `names no secret group: ${requestArg.secretGroupId}`, 'request.secretGroupId') };
  }
  if (currentArg.generation !== requestArg.expectedGeneration) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'generation-mismatch', "is not the group's current generation", 'request.expectedGeneration') };
  }
  const judged = judgeSealedCopies(currentArg, requestArg.version, factsArg.currentRecipients);
  if ('refusal' in judged) {
    return { kind: 'refuse', refusal: judged.refusal };
  }
  const { secretVersionId, version } = requestArg.version;
  const sealed = requestArg.version.sealed.map((copy) => ({
    suite: copy.suite, recipientId: copy.recipientId, binding: copy.binding, enc: copy.enc, ciphertext: copy.ciphertext,
  }));
  const existing = currentArg.versions.find((stored) => stored.secretVersionId === secretVersionId);
  let versions: IStoredSecretVersion[];
  if (existing) {
    if (existing.version !== version) {
      return { kind: 'refuse', refusal: refuseNamed('conflict', 'secret-version-exists', `version id ${secretVersionId} is version ${existing.version} of the group`, 'request.version.secretVersionId') };
    }
    if (existing.valueBytes !== judged.valueBytes) {
      return { kind: 'refuse', refusal: refuseNamed('conflict', 'secret-reseal-length-changed', `a re-seal seals the same value: version ${version} holds ${existing.valueBytes} bytes, the copies ${judged.valueBytes}`, 'request.version.sealed') };
    }
    versions = currentArg.versions.map((stored) => (stored === existing ? { ...stored, sealed, resealedAt: factsArg.now, createdBy: factsArg.actor } : stored));
  } else {
    const next = (currentArg.versions[0]?.version ?? 0) + 1;
    if (version !== next) {
      return { kind: 'refuse', refusal: refuseNamed('conflict', 'secret-version-out-of-order', `the next version of the group is ${next}`, 'request.version.version') };
    }
    versions = [
      { secretVersionId, version, valueBytes: judged.valueBytes, createdAt: factsArg.now, createdBy: factsArg.actor, resealedAt: null, sealed },
      ...currentArg.versions,
    ].slice(0, currentArg.retainedVersions);
  }
  return {
    kind: 'write',
    change: { set: { versions, versionIds: versions.map((stored) => `${stored.secretVersionId}@${stored.version}`), updatedAt: factsArg.now } },
  };
};

/** A group removed at the generation the caller read, unless a service still names one of its versions. */
export const decideSecretGroupDeletion = (
  currentArg: ISecretGroupDocument | null,
  requestArg: { secretGroupId: string; expectedGeneration: number },
  usersArg: readonly string[],
): TDecision<ISecretGroupDocument> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'secret-group-not-found', `names no secret group: ${requestArg.secretGroupId}`, 'request.secretGroupId') };
  }
  if (currentArg.generation !== requestArg.expectedGeneration) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'generation-mismatch', "is not the group's current generation", 'request.expectedGeneration') };
  }
  if (usersArg.length > 0) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'secret-group-in-use', `services still name a version of it: ${usersArg.join(', ')}`, 'request.secretGroupId') };
  }
  return { kind: 'remove' };
};

/** How a sealed copy stands against its cluster's enrolled recipients. */
export const sealedCopyState = (
  recipientIdArg: string,
  recipientsArg: Pick<ISecretRecipientsDocument, 'current' | 'previous'> | null,
): ISecretVersionClusterState['state'] => {
  if (recipientsArg?.current.recipientId === recipientIdArg) {
    return 'sealed';
  }
  return recipientsArg?.previous?.recipientId === recipientIdArg ? 'reseal-required' : 'recipient-gone';
};

/** A group as answered: metadata only, each version's state per cluster. */
export const toPublicSecretGroup = (
  docArg: ISecretGroupDocument,
  recipientsArg: ReadonlyMap<string, Pick<ISecretRecipientsDocument, 'current' | 'previous'>>,
): ISecretGroup => ({
  id: docArg.id,
  key: docArg.key,
  tags: [...docArg.tags],
  environment: docArg.environment,
  clusterIds: [...docArg.clusterIds],
  retainedVersions: docArg.retainedVersions,
  generation: docArg.generation,
  versions: docArg.versions.map((version) => ({
    secretVersionId: version.secretVersionId,
    version: version.version,
    valueBytes: version.valueBytes,
    createdAt: version.createdAt,
    createdBy: version.createdBy,
    resealedAt: version.resealedAt,
    clusters: version.sealed.map((copy) => ({
      clusterId: copy.binding.clusterId,
      recipientId: copy.recipientId,
      state: sealedCopyState(copy.recipientId, recipientsArg.get(copy.binding.clusterId) ?? null),
    })),
  })),
  createdAt: docArg.createdAt,
  updatedAt: docArg.updatedAt,
});

/** The enrolled recipients of the clusters named, by cluster id. */
export const readRecipientsOf = async (
  storeArg: DocumentStore,
  clusterIdsArg: Iterable<string>,
): Promise<Map<string, ISecretRecipientsDocument>> => {
  const found = new Map<string, ISecretRecipientsDocument>();
  for (const clusterId of new Set(clusterIdsArg)) {
    const doc = await storeArg.get(secretRecipientsKind, clusterId);
    if (doc) {
      found.set(clusterId, doc);
    }
  }
  return found;
};

/** The writable metadata as stored. */
export const newSecretGroupDocument = (writableArg: ISecretGroupWritable, nowArg: number): Omit<ISecretGroupDocument, 'generation'> => ({
  id: writableArg.key,
  key: writableArg.key,
  tags: [...writableArg.tags],
  environment: writableArg.environment,
  clusterIds: [...writableArg.clusterIds],
  retainedVersions: writableArg.retainedVersions ?? secretGroupContract.defaultRetainedVersions,
  versions: [],
  versionIds: [],
  createdAt: nowArg,
  updatedAt: nowArg,
});
