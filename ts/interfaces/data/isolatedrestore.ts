import type { IBackupArchiveObject, TIsolatedRestoreResourceMapping } from './backup.js';
import { validateBackupArchiveObject } from './backup.js';
import type { ICorestoreDatabaseAllocationReference } from './corestore.js';
import { computeDomainDigestHex } from '../private/canonicaljson.js';
import { isCanonicalId, isPlainDataRecord, isSha256Hex } from '../private/dataproperties.js';

/**
 * Isolated restores: a backup restored into a scratch namespace on one node, driven by
 * Cloudly with a signed restore grant per operation. The grant binds the digest of the
 * normalized resource mappings and of the archive manifest defined here.
 */

/** Where one node's isolated restore stands. Project's own definition. */
export interface IIsolatedRestoreNodeState {
  clusterId: string;
  targetNodeName: string;
  restoreId: string;
  /** Bumps on every change; callers pass it back as `expectedRevision`. */
  revision: number;
  phase: 'prepared' | 'staging' | 'ready' | 'executed' | 'cleaned-up' | 'failed';
  /** Manifest objects whose bytes the node holds in full, proven by size and sha256. */
  stagedObjects: IBackupArchiveObject[];
  /** Why the restore failed; present only when `phase` is `failed`. */
  reason?: string;
}

/** The operations a restore grant can authorize, one grant per operation. */
export const isolatedRestoreGrantOperations = ['prepare', 'status', 'execute', 'cleanup', 'write-object'] as const;
export type TIsolatedRestoreGrantOperation = (typeof isolatedRestoreGrantOperations)[number];

/** Digest domain of the canonical resource mappings. Project's own definition. */
export const isolatedRestoreResourceMappingsDigestDomain = 'serve.zone/isolated-restore-resource-mappings';
/** Digest domain of the canonical archive manifest. Project's own definition. */
export const isolatedRestoreArchiveManifestDigestDomain = 'serve.zone/isolated-restore-archive-manifest';

/** Most mappings one restore may carry. Project's own definition. */
export const maximumIsolatedRestoreResourceMappings = 64;
/** Most objects one archive manifest may list. Project's own definition. */
export const maximumIsolatedRestoreArchiveObjects = 4096;
/** Longest mount path in a volume mapping. Project's own definition. */
export const maximumIsolatedRestoreMountPathLength = 4096;

const databaseAllocationKeys = [
  'purpose',
  'rehearsalId',
  'allocationId',
  'generation',
  'bindingSha256',
  'receiptSha256',
] as const;

const isDatabaseName = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string' && /^[A-Za-z0-9_-]{1,63}$/.test(valueArg);

const isMountPath = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string'
  && valueArg.length >= 2
  && valueArg.length <= maximumIsolatedRestoreMountPathLength
  && valueArg.startsWith('/')
  && !valueArg.endsWith('/')
  && !valueArg.includes('\u0000')
  && valueArg.slice(1).split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..');

const keysReason = (recordArg: Record<string, unknown>, keysArg: readonly string[], pathArg: string): string[] => {
  const keys = Object.keys(recordArg);
  const exact = keys.length === keysArg.length && keysArg.every((key) => Object.hasOwn(recordArg, key));
  return exact ? [] : [`${pathArg} must have exactly the keys ${keysArg.join(', ')}`];
};

/**
 * Every reason a target's `databaseAllocation` is refused: it must be Corestore's reference
 * exactly as issued, because it is signed into the grant as authority over that database.
 */
export const validateIsolatedRestoreDatabaseAllocation = (valueArg: unknown, pathArg: string): string[] => {
  try {
    return collectDatabaseAllocationReasons(valueArg, pathArg);
  } catch {
    return [`${pathArg} could not be read as plain data`];
  }
};

const collectDatabaseAllocationReasons = (valueArg: unknown, pathArg: string): string[] => {
  if (!isPlainDataRecord(valueArg)) {
    return [`${pathArg} must be a plain object`];
  }
  const reasons = keysReason(valueArg, databaseAllocationKeys, pathArg);
  if (valueArg.purpose !== 'scratch-rehearsal') {
    reasons.push(`${pathArg}.purpose must be scratch-rehearsal`);
  }
  if (!isCanonicalId(valueArg.rehearsalId)) {
    reasons.push(`${pathArg}.rehearsalId must be a scoped identifier of 1 to 128 letters, digits, '.', '_' or '-'`);
  }
  if (!isSha256Hex(valueArg.allocationId)) {
    reasons.push(`${pathArg}.allocationId must be 64 lowercase hex digits`);
  }
  if (!Number.isSafeInteger(valueArg.generation) || (valueArg.generation as number) < 1) {
    reasons.push(`${pathArg}.generation must be a safe integer of at least 1`);
  }
  if (!isSha256Hex(valueArg.bindingSha256)) {
    reasons.push(`${pathArg}.bindingSha256 must be 64 lowercase hex digits`);
  }
  if (!isSha256Hex(valueArg.receiptSha256)) {
    reasons.push(`${pathArg}.receiptSha256 must be 64 lowercase hex digits`);
  }
  return reasons;
};

const validateEnd = (
  valueArg: unknown,
  pathArg: string,
  typeArg: 'database' | 'volume',
  sideArg: 'source' | 'target',
): string[] => {
  if (!isPlainDataRecord(valueArg)) {
    return [`${pathArg} must be a plain object`];
  }
  const reasons: string[] = [];
  const secondKey = typeArg === 'database' ? 'databaseName' : 'mountPath';
  const withAllocation = typeArg === 'database' && sideArg === 'target' && Object.hasOwn(valueArg, 'databaseAllocation');
  reasons.push(...keysReason(
    valueArg,
    withAllocation ? ['resourceName', secondKey, 'databaseAllocation'] : ['resourceName', secondKey],
    pathArg,
  ));
  if (!isCanonicalId(valueArg.resourceName)) {
    reasons.push(`${pathArg}.resourceName must be an identifier of 1 to 128 letters, digits, '.', '_' or '-'`);
  }
  if (typeArg === 'database' && !isDatabaseName(valueArg.databaseName)) {
    reasons.push(`${pathArg}.databaseName must be 1 to 63 letters, digits, '_' or '-'`);
  }
  if (typeArg === 'volume' && !isMountPath(valueArg.mountPath)) {
    reasons.push(`${pathArg}.mountPath must be an absolute path without empty, '.' or '..' segments`);
  }
  if (withAllocation) {
    reasons.push(...validateIsolatedRestoreDatabaseAllocation(valueArg.databaseAllocation, `${pathArg}.databaseAllocation`));
  }
  return reasons;
};

const validateMapping = (valueArg: unknown, pathArg: string): string[] => {
  if (!isPlainDataRecord(valueArg)) {
    return [`${pathArg} must be a plain object`];
  }
  const reasons = keysReason(valueArg, ['type', 'source', 'target'], pathArg);
  if (valueArg.type !== 'database' && valueArg.type !== 'volume') {
    reasons.push(`${pathArg}.type must be database or volume`);
    return reasons;
  }
  reasons.push(...validateEnd(valueArg.source, `${pathArg}.source`, valueArg.type, 'source'));
  reasons.push(...validateEnd(valueArg.target, `${pathArg}.target`, valueArg.type, 'target'));
  return reasons;
};

/** Every reason a list of resource mappings is refused, mapping by mapping. */
export const validateIsolatedRestoreResourceMappings = (valueArg: unknown, pathArg = 'mappings'): string[] => {
  try {
    if (!Array.isArray(valueArg)) {
      return [`${pathArg} must be an array`];
    }
    if (valueArg.length < 1 || valueArg.length > maximumIsolatedRestoreResourceMappings) {
      return [`${pathArg} must hold 1 to ${maximumIsolatedRestoreResourceMappings} mappings`];
    }
    const reasons: string[] = [];
    const targets = new Set<string>();
    valueArg.forEach((mapping, index) => {
      const mappingReasons = validateMapping(mapping, `${pathArg}[${index}]`);
      reasons.push(...mappingReasons);
      if (mappingReasons.length === 0) {
        const target = (mapping as TIsolatedRestoreResourceMapping).target;
        const key = `${(mapping as TIsolatedRestoreResourceMapping).type}:${target.resourceName}`;
        if (targets.has(key)) {
          reasons.push(`${pathArg}[${index}].target.resourceName repeats an earlier target`);
        }
        targets.add(key);
      }
    });
    return reasons;
  } catch {
    return [`${pathArg} could not be read as plain data`];
  }
};

/**
 * The mappings rebuilt key by key from validated input, so the digest covers exactly the
 * contract's fields. Call only after `validateIsolatedRestoreResourceMappings` returned [].
 */
export const normalizeIsolatedRestoreResourceMappings = (
  mappingsArg: readonly TIsolatedRestoreResourceMapping[],
): TIsolatedRestoreResourceMapping[] =>
  mappingsArg.map((mapping): TIsolatedRestoreResourceMapping => {
    if (mapping.type === 'volume') {
      return {
        type: 'volume',
        source: { resourceName: mapping.source.resourceName, mountPath: mapping.source.mountPath },
        target: { resourceName: mapping.target.resourceName, mountPath: mapping.target.mountPath },
      };
    }
    const allocation = mapping.target.databaseAllocation;
    return {
      type: 'database',
      source: { resourceName: mapping.source.resourceName, databaseName: mapping.source.databaseName },
      target: {
        resourceName: mapping.target.resourceName,
        databaseName: mapping.target.databaseName,
        // Present exactly when the target is allocation-managed, so the digest binds it.
        ...(Object.hasOwn(mapping.target, 'databaseAllocation') && allocation
          ? {
            databaseAllocation: {
              purpose: 'scratch-rehearsal' as const,
              rehearsalId: allocation.rehearsalId,
              allocationId: allocation.allocationId,
              generation: allocation.generation,
              bindingSha256: allocation.bindingSha256,
              receiptSha256: allocation.receiptSha256,
            } satisfies ICorestoreDatabaseAllocationReference,
          }
          : {}),
      },
    };
  });

/** Domain-separated sha256 of the normalized mappings, as a restore grant binds it. */
export const computeIsolatedRestoreResourceMappingsSha256 = (
  mappingsArg: readonly TIsolatedRestoreResourceMapping[],
): string => computeDomainDigestHex(
  isolatedRestoreResourceMappingsDigestDomain,
  normalizeIsolatedRestoreResourceMappings(mappingsArg),
);

/** Every reason an archive manifest is refused: bad objects, or a path listed twice. */
export const validateIsolatedRestoreArchiveManifest = (valueArg: unknown, pathArg = 'manifest'): string[] => {
  try {
    if (!Array.isArray(valueArg)) {
      return [`${pathArg} must be an array`];
    }
    if (valueArg.length > maximumIsolatedRestoreArchiveObjects) {
      return [`${pathArg} must list at most ${maximumIsolatedRestoreArchiveObjects} objects`];
    }
    const reasons: string[] = [];
    const paths = new Set<string>();
    valueArg.forEach((object, index) => {
      const objectReasons = validateBackupArchiveObject(object, `${pathArg}[${index}]`);
      reasons.push(...objectReasons);
      if (objectReasons.length === 0) {
        const path = (object as IBackupArchiveObject).path;
        if (paths.has(path)) {
          reasons.push(`${pathArg}[${index}].path repeats an earlier object`);
        }
        paths.add(path);
      }
    });
    return reasons;
  } catch {
    return [`${pathArg} could not be read as plain data`];
  }
};

/** Domain-separated sha256 of the manifest, ordered by path so listing order cannot matter. */
export const computeIsolatedRestoreArchiveManifestSha256 = (
  manifestArg: readonly IBackupArchiveObject[],
): string => computeDomainDigestHex(
  isolatedRestoreArchiveManifestDigestDomain,
  [...manifestArg]
    .map((object) => ({ path: object.path, size: object.size, sha256: object.sha256 }))
    .sort((left, right) => (left.path < right.path ? -1 : left.path > right.path ? 1 : 0)),
);
