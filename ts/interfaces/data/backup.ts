import type { ICorestoreDatabaseAllocationReference } from './corestore.js';
import { isPlainDataRecord, isSha256Hex } from '../private/dataproperties.js';

/**
 * The backup shapes the node-addressed backup contract names but does not define. Every
 * type here is the project's own smallest honest definition of what the behaviour needs.
 */

/** The kinds of service data a node backs up. Project's own definition. */
export type TBackupResourceType = 'volume' | 'database' | 'bucket';

interface IBackupSnapshotBase {
  /** The node archive's own identifier for this snapshot. */
  snapshotId: string;
  /** The service resource the snapshot captured (volume name, database or bucket). */
  resourceName: string;
  /** Epoch milliseconds at which the node took the snapshot. */
  createdAt: number;
  /** Bytes the snapshot holds in the node's archive. */
  sizeBytes: number;
}

/** Project's own definition. */
export interface IBackupVolumeSnapshot extends IBackupSnapshotBase {
  type: 'volume';
  mountPath: string;
}

/** Project's own definition. */
export interface IBackupDatabaseSnapshot extends IBackupSnapshotBase {
  type: 'database';
  databaseName: string;
}

/** Project's own definition. */
export interface IBackupBucketSnapshot extends IBackupSnapshotBase {
  type: 'bucket';
  bucketName: string;
}

/** One snapshot a node took of one resource of a service. Project's own definition. */
export type TBackupSnapshot = IBackupVolumeSnapshot | IBackupDatabaseSnapshot | IBackupBucketSnapshot;

/** What happened to replication of a backup off the node. Project's own definition. */
export interface IBackupReplicationResult {
  status: 'replicated' | 'skipped' | 'failed';
  replicatedSnapshotIds: string[];
  /** Why replication was skipped or failed; absent when it replicated. */
  reason?: string;
}

/**
 * How many snapshots a node archive keeps when pruned. At least one count must be set.
 * Project's own definition.
 */
export interface IArchiveRetentionPolicy {
  keepLast?: number;
  keepDaily?: number;
  keepWeekly?: number;
  keepMonthly?: number;
}

/** The outcome of pruning one node archive. Project's own definition. */
export interface IArchivePruneResult {
  dryRun: boolean;
  keptSnapshotIds: string[];
  removedSnapshotIds: string[];
  reclaimedBytes: number;
}

/** One object of a backup archive manifest. Project's own definition. */
export interface IBackupArchiveObject {
  /** Relative POSIX path inside the archive, e.g. `data/0001.pack`. */
  path: string;
  /** Exact byte length. */
  size: number;
  /** Lowercase hex sha256 over exactly `size` bytes. */
  sha256: string;
}

/**
 * How one resource of the source backup lands in the scratch namespace of an isolated
 * restore. Project's own definition; the database target optionally names the Corestore
 * allocation it replaces, exactly as Corestore issued that reference.
 */
export type TIsolatedRestoreResourceMapping =
  | {
    type: 'database';
    source: { resourceName: string; databaseName: string };
    target: {
      resourceName: string;
      databaseName: string;
      databaseAllocation?: ICorestoreDatabaseAllocationReference;
    };
  }
  | {
    type: 'volume';
    source: { resourceName: string; mountPath: string };
    target: { resourceName: string; mountPath: string };
  };

/** Longest archive object path. Project's own definition. */
export const maximumBackupArchiveObjectPathLength = 1024;
/** Largest retention count. Project's own definition. */
export const maximumArchiveRetentionCount = 10_000;

const archiveObjectPathSegment = /^[A-Za-z0-9._-]{1,255}$/;

/** A relative archive path: segments of safe characters, no `.`/`..`, no leading slash. */
export const isBackupArchiveObjectPath = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string'
  && valueArg.length >= 1
  && valueArg.length <= maximumBackupArchiveObjectPathLength
  && valueArg.split('/').every(
    (segment) => archiveObjectPathSegment.test(segment) && segment !== '.' && segment !== '..',
  );

/** Every reason a manifest object is refused, in key order. */
export const validateBackupArchiveObject = (valueArg: unknown, pathArg = 'object'): string[] => {
  try {
    if (!isPlainDataRecord(valueArg)) {
      return [`${pathArg} must be a plain object`];
    }
    const reasons: string[] = [];
    for (const key of Object.keys(valueArg)) {
      if (key !== 'path' && key !== 'size' && key !== 'sha256') {
        reasons.push(`${pathArg}.${key} is not an archive object field`);
      }
    }
    if (!isBackupArchiveObjectPath(valueArg.path)) {
      reasons.push(
        `${pathArg}.path must be a relative path of at most ${maximumBackupArchiveObjectPathLength} characters `
          + "whose segments use letters, digits, '.', '_' or '-' and are not '.' or '..'",
      );
    }
    if (!Number.isSafeInteger(valueArg.size) || (valueArg.size as number) < 0) {
      reasons.push(`${pathArg}.size must be a non-negative integer`);
    }
    if (!isSha256Hex(valueArg.sha256)) {
      reasons.push(`${pathArg}.sha256 must be 64 lowercase hex digits`);
    }
    return reasons;
  } catch {
    return [`${pathArg} could not be read as plain data`];
  }
};

const retentionKeys = ['keepLast', 'keepDaily', 'keepWeekly', 'keepMonthly'] as const;

/** Every reason a retention policy is refused: unknown keys, bad counts, or no count at all. */
export const validateArchiveRetentionPolicy = (valueArg: unknown, pathArg = 'retention'): string[] => {
  try {
    if (!isPlainDataRecord(valueArg)) {
      return [`${pathArg} must be a plain object`];
    }
    const reasons: string[] = [];
    for (const key of Object.keys(valueArg)) {
      if (!(retentionKeys as readonly string[]).includes(key)) {
        reasons.push(`${pathArg}.${key} is not a retention field`);
      }
    }
    let counted = 0;
    for (const key of retentionKeys) {
      if (!Object.hasOwn(valueArg, key)) {
        continue;
      }
      counted += 1;
      const count = valueArg[key];
      if (!Number.isSafeInteger(count) || (count as number) < 0 || (count as number) > maximumArchiveRetentionCount) {
        reasons.push(`${pathArg}.${key} must be an integer from 0 to ${maximumArchiveRetentionCount}`);
      }
    }
    if (counted === 0) {
      reasons.push(`${pathArg} must set at least one of ${retentionKeys.join(', ')}`);
    }
    return reasons;
  } catch {
    return [`${pathArg} could not be read as plain data`];
  }
};
