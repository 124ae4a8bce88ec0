import { requireValidRelayAnswer } from '../core/relaycalls.js';
import { isPlainDataRecord } from '../interfaces/private/dataproperties.js';
import type { IIsolatedRestoreNodeState } from '../interfaces/data/isolatedrestore.js';
import type { ICloudlyOutboundMethods } from '../interfaces/requests/methodmap.js';

/**
 * Checks of what a relay answers to Cloudly's backup, restore, prune and isolated-restore calls.
 * Each returns every reason, naming the member under `answer` that failed, so an administrator
 * (and the relay's authors) read which part of the answer was wrong.
 */

/** Most snapshots one backup may record, so most one answer may name. */
export const maximumSnapshotsPerBackup = 1024;
const maximumIdLength = 256;
const snapshotTypes = ['volume', 'database', 'bucket'] as const;
const snapshotTypeMember = { volume: 'mountPath', database: 'databaseName', bucket: 'bucketName' } as const;
const restorePhases = ['prepared', 'staging', 'ready', 'executed', 'cleaned-up', 'failed'] as const;

const isShortString = (valueArg: unknown): boolean =>
  typeof valueArg === 'string' && valueArg.length >= 1 && valueArg.length <= maximumIdLength;
const isCount = (valueArg: unknown): boolean => Number.isSafeInteger(valueArg) && (valueArg as number) >= 0;

const objectReasons = (valueArg: unknown, pathArg: string): string[] | null =>
  (isPlainDataRecord(valueArg) ? null : [`${pathArg} must be an object`]);

export const validateAnsweredSnapshots = (valueArg: unknown, pathArg: string): string[] => {
  if (!Array.isArray(valueArg)) {
    return [`${pathArg} must be an array of snapshots`];
  }
  if (valueArg.length > maximumSnapshotsPerBackup) {
    return [`${pathArg} must have at most ${maximumSnapshotsPerBackup} snapshots`];
  }
  return valueArg.flatMap((snapshot, index) => {
    const path = `${pathArg}[${index}]`;
    if (!isPlainDataRecord(snapshot)) {
      return [`${path} must be an object`];
    }
    const reasons: string[] = [];
    if (!(snapshotTypes as readonly unknown[]).includes(snapshot.type)) {
      reasons.push(`${path}.type must be one of ${snapshotTypes.join(', ')}`);
    } else {
      const member = snapshotTypeMember[snapshot.type as typeof snapshotTypes[number]];
      if (typeof snapshot[member] !== 'string') {
        reasons.push(`${path}.${member} must be a string`);
      }
    }
    for (const member of ['snapshotId', 'resourceName'] as const) {
      if (!isShortString(snapshot[member])) {
        reasons.push(`${path}.${member} must be a string of 1 to ${maximumIdLength} characters`);
      }
    }
    for (const member of ['createdAt', 'sizeBytes'] as const) {
      if (!isCount(snapshot[member])) {
        reasons.push(`${path}.${member} must be a non-negative integer`);
      }
    }
    return reasons;
  });
};

/** `backupClusterService` → `{ snapshots, replication? }`. */
export const validateBackupClusterServiceAnswer = (valueArg: unknown, pathArg = 'answer'): string[] => {
  const notObject = objectReasons(valueArg, pathArg);
  if (notObject) {
    return notObject;
  }
  const answer = valueArg as Record<string, unknown>;
  const reasons = validateAnsweredSnapshots(answer.snapshots, `${pathArg}.snapshots`);
  if (answer.replication !== undefined) {
    const replication = answer.replication;
    if (!isPlainDataRecord(replication)) {
      reasons.push(`${pathArg}.replication must be an object`);
    } else {
      if (!['replicated', 'skipped', 'failed'].includes(replication.status as string)) {
        reasons.push(`${pathArg}.replication.status must be one of replicated, skipped, failed`);
      }
      if (!Array.isArray(replication.replicatedSnapshotIds) || !replication.replicatedSnapshotIds.every(isShortString)) {
        reasons.push(`${pathArg}.replication.replicatedSnapshotIds must be an array of snapshot ids`);
      }
      if (replication.reason !== undefined && typeof replication.reason !== 'string') {
        reasons.push(`${pathArg}.replication.reason must be a string when present`);
      }
    }
  }
  return reasons;
};

/** `restoreClusterService` → `{ restored }`. */
export const validateRestoreClusterServiceAnswer = (valueArg: unknown, pathArg = 'answer'): string[] =>
  objectReasons(valueArg, pathArg) ?? validateAnsweredSnapshots((valueArg as Record<string, unknown>).restored, `${pathArg}.restored`);

/** `pruneClusterNodeArchive` → `{ found, result? }`. */
export const validatePruneClusterNodeArchiveAnswer = (valueArg: unknown, pathArg = 'answer'): string[] => {
  const notObject = objectReasons(valueArg, pathArg);
  if (notObject) {
    return notObject;
  }
  const answer = valueArg as Record<string, unknown>;
  const reasons: string[] = [];
  if (typeof answer.found !== 'boolean') {
    reasons.push(`${pathArg}.found must be a boolean`);
  }
  if (answer.result !== undefined) {
    const result = answer.result;
    if (!isPlainDataRecord(result)) {
      reasons.push(`${pathArg}.result must be an object`);
    } else {
      if (typeof result.dryRun !== 'boolean') {
        reasons.push(`${pathArg}.result.dryRun must be a boolean`);
      }
      for (const member of ['keptSnapshotIds', 'removedSnapshotIds'] as const) {
        if (!Array.isArray(result[member]) || !(result[member] as unknown[]).every(isShortString)) {
          reasons.push(`${pathArg}.result.${member} must be an array of snapshot ids`);
        }
      }
      if (!isCount(result.reclaimedBytes)) {
        reasons.push(`${pathArg}.result.reclaimedBytes must be a non-negative integer`);
      }
    }
  }
  return reasons;
};

/** Every isolated-restore call → `{ state }`, and the state must be the restore Cloudly asked about. */
export const validateIsolatedRestoreStateAnswer = (
  valueArg: unknown,
  expectedArg: { clusterId: string; targetNodeName: string; restoreId: string },
  pathArg = 'answer',
): string[] => {
  const notObject = objectReasons(valueArg, pathArg);
  if (notObject) {
    return notObject;
  }
  const state = (valueArg as Record<string, unknown>).state;
  const statePath = `${pathArg}.state`;
  if (!isPlainDataRecord(state)) {
    return [`${statePath} must be an object`];
  }
  const reasons: string[] = [];
  for (const member of ['clusterId', 'targetNodeName', 'restoreId'] as const) {
    if (state[member] !== expectedArg[member]) {
      reasons.push(`${statePath}.${member} must be ${expectedArg[member]}`);
    }
  }
  if (!isCount(state.revision)) {
    reasons.push(`${statePath}.revision must be a non-negative integer`);
  }
  if (!(restorePhases as readonly unknown[]).includes(state.phase)) {
    reasons.push(`${statePath}.phase must be one of ${restorePhases.join(', ')}`);
  }
  if (!Array.isArray(state.stagedObjects)) {
    reasons.push(`${statePath}.stagedObjects must be an array`);
  }
  if (state.reason !== undefined && typeof state.reason !== 'string') {
    reasons.push(`${statePath}.reason must be a string when present`);
  }
  return reasons;
};

// ---- readers: what `relays.ask` answered (unknown), checked, as the contract's answer ----
// A malformed answer is refused `unavailable` `relay-answer-invalid`, naming every member.

type TAnswerOf<M extends keyof ICloudlyOutboundMethods> = ICloudlyOutboundMethods[M]['response'];

export const readBackupClusterServiceAnswer = (answerArg: unknown): TAnswerOf<'backupClusterService'> => {
  requireValidRelayAnswer(validateBackupClusterServiceAnswer(answerArg));
  return answerArg as TAnswerOf<'backupClusterService'>;
};

export const readRestoreClusterServiceAnswer = (answerArg: unknown): TAnswerOf<'restoreClusterService'> => {
  requireValidRelayAnswer(validateRestoreClusterServiceAnswer(answerArg));
  return answerArg as TAnswerOf<'restoreClusterService'>;
};

export const readPruneClusterNodeArchiveAnswer = (answerArg: unknown): TAnswerOf<'pruneClusterNodeArchive'> => {
  requireValidRelayAnswer(validatePruneClusterNodeArchiveAnswer(answerArg));
  return answerArg as TAnswerOf<'pruneClusterNodeArchive'>;
};

/** Any isolated-restore call's answer: the state of exactly the restore Cloudly asked about. */
export const readIsolatedRestoreStateAnswer = (
  answerArg: unknown,
  expectedArg: { clusterId: string; targetNodeName: string; restoreId: string },
): IIsolatedRestoreNodeState => {
  requireValidRelayAnswer(validateIsolatedRestoreStateAnswer(answerArg, expectedArg));
  return (answerArg as { state: IIsolatedRestoreNodeState }).state;
};
