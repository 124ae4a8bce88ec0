import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import type {
  IBackupArchiveObject,
  IBackupReplicationResult,
  TBackupSnapshot,
  TIsolatedRestoreResourceMapping,
} from '../interfaces/data/backup.js';
import type { ICorestoreDatabaseClosureDescriptor } from '../interfaces/data/corestoreclosure.js';
import type { IIsolatedRestoreNodeState } from '../interfaces/data/isolatedrestore.js';
import type { IBackupDrillReceipt, IBackupVerification, IServiceBackupRecord } from '../interfaces/requests/backup.js';

/** The backup domain's documents and their public shapes. */

type TBackupState = 'running' | 'completed' | 'failed';

export interface IServiceBackupDocument extends IStoredDocument {
  clusterId: string;
  nodeId: string;
  serviceId: string;
  createdAt: number;
  state: TBackupState;
  /** When the current attempt started; an attempt older than the relay timeout is dead. */
  attemptStartedAt: number;
  /** Canonical digest of what was asked for, so a repeated order can be recognised. */
  orderSha256: string;
  snapshots: TBackupSnapshot[];
  replication?: IBackupReplicationResult;
  failureReason?: string;
  /** The operation of the current (or last) attempt; absent on backups ordered before operations existed. */
  operationId?: string;
  closure?: { descriptor: ICorestoreDatabaseClosureDescriptor; storedAt: number; blobKey: string };
  /** The schedule that ordered it and the occurrence it ran for (ts/manager.backup/schedules.controller.ts). */
  scheduleId?: string;
  occurrenceAt?: number;
  /** The last verification of the stored closure (ts/manager.backup/verification.ts). */
  verification?: IBackupVerification;
}

export const serviceBackupKind = defineDocumentKind<IServiceBackupDocument>('CloudlyServiceBackup');

export interface IIsolatedRestoreDocument extends IStoredDocument {
  backupId: string;
  clusterId: string;
  sourceServiceId: string;
  targetNodeName: string;
  createdAt: number;
  mappings: TIsolatedRestoreResourceMapping[];
  manifest: IBackupArchiveObject[];
  lastState?: IIsolatedRestoreNodeState;
}

export const isolatedRestoreKind = defineDocumentKind<IIsolatedRestoreDocument>('CloudlyIsolatedRestore');

/** Where the closure of a backup lives inside an isolated-restore archive manifest. */
export const closureArchiveObjectPath = 'closure/database.closure';

/** Where the closure of one backup lives in the blob store. */
export const closureBlobKey = (clusterIdArg: string, backupIdArg: string): string =>
  `closures/${clusterIdArg}/${backupIdArg}`;

/** A backup as the API answers it: the blob key stays inside Cloudly. */
export const toRecord = (docArg: IServiceBackupDocument): IServiceBackupRecord => ({
  backupId: docArg.id,
  clusterId: docArg.clusterId,
  nodeId: docArg.nodeId,
  serviceId: docArg.serviceId,
  createdAt: docArg.createdAt,
  generation: docArg.generation,
  state: docArg.state,
  ...(docArg.failureReason !== undefined ? { failureReason: docArg.failureReason } : {}),
  ...(docArg.operationId !== undefined ? { operationId: docArg.operationId } : {}),
  snapshots: docArg.snapshots,
  ...(docArg.replication ? { replication: docArg.replication } : {}),
  ...(docArg.closure ? { closure: { descriptor: docArg.closure.descriptor, storedAt: docArg.closure.storedAt } } : {}),
  ...(docArg.scheduleId !== undefined ? { scheduleId: docArg.scheduleId, occurrenceAt: docArg.occurrenceAt! } : {}),
  ...(docArg.verification !== undefined ? { verification: docArg.verification } : {}),
});

/** The manifest of what Cloudly holds for a backup: today, its database closure. */
export const manifestOf = (backupArg: IServiceBackupDocument): IBackupArchiveObject[] =>
  (backupArg.closure
    ? [{ path: closureArchiveObjectPath, size: backupArg.closure.descriptor.byteLength, sha256: backupArg.closure.descriptor.sha256 }]
    : []);

/**
 * A restore drill's receipt (./drills.ts): written only by the drills controller, from the drill's
 * operation, with the cleanup it did.
 */
export interface IBackupDrillDocument extends IStoredDocument, Omit<IBackupDrillReceipt, 'drillId'> {
  clusterId: string;
  serviceId: string;
}

export const backupDrillKind = defineDocumentKind<IBackupDrillDocument>('CloudlyBackupDrill');

/** The receipt as the API answers it. */
export const toDrillReceipt = (docArg: IBackupDrillDocument): IBackupDrillReceipt => ({
  drillId: docArg.id,
  backupId: docArg.backupId,
  nodeId: docArg.nodeId,
  outcome: docArg.outcome,
  ...(docArg.reason !== undefined ? { reason: docArg.reason } : {}),
  ...(docArg.detail !== undefined ? { detail: docArg.detail } : {}),
  startedAt: docArg.startedAt,
  ...(docArg.finishedAt !== undefined ? { finishedAt: docArg.finishedAt, durationMs: docArg.durationMs ?? docArg.finishedAt - docArg.startedAt } : {}),
  bytes: docArg.bytes,
  restoreId: docArg.restoreId,
  operationId: docArg.operationId,
  ...(docArg.scheduleId !== undefined ? { scheduleId: docArg.scheduleId } : {}),
  cleanedUp: docArg.cleanedUp,
  ...(docArg.cleanupReason !== undefined ? { cleanupReason: docArg.cleanupReason } : {}),
});

