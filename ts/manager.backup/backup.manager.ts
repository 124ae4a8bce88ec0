import { randomUUID } from 'node:crypto';
import * as path from 'node:path';
import { createLocalJWKSet } from 'jose';
import type { Cloudly } from '../classes.cloudly.js';
import { refuse } from '../core/errors.js';
import { BlobStoreError, FilesystemBlobStore, type IBlobStore } from '../core/blobstore.js';
import {
  StreamAbortedError,
  streamChannelOf,
  validateStreamReference,
  type StreamReceiver,
  type StreamSender,
} from '../core/streams.js';
import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import {
  requireRequestShape,
  isArrayOf,
  isBoolean,
  isIdString,
  isPositiveInteger,
  type TFieldCheck,
} from '../core/validation.js';
import { computeCanonicalJsonSha256Hex } from '../interfaces/private/canonicaljson.js';
import { isPlainDataRecord } from '../interfaces/private/dataproperties.js';
import {
  validateArchiveRetentionPolicy,
  type IBackupArchiveObject,
  type TBackupSnapshot,
  type IBackupReplicationResult,
  type TIsolatedRestoreResourceMapping,
} from '../interfaces/data/backup.js';
import {
  validateCorestoreDatabaseClosureDescriptor,
  type ICorestoreDatabaseClosureDescriptor,
} from '../interfaces/data/corestoreclosure.js';
import {
  computeIsolatedRestoreArchiveManifestSha256,
  computeIsolatedRestoreResourceMappingsSha256,
  normalizeIsolatedRestoreResourceMappings,
  validateIsolatedRestoreResourceMappings,
  type IIsolatedRestoreNodeState,
  type TIsolatedRestoreGrantOperation,
} from '../interfaces/data/isolatedrestore.js';
import type { IService } from '../interfaces/data/service.js';
import type {
  IReq_Admin_CreateIsolatedRestore,
  IReq_Admin_CreateServiceBackup,
  IReq_Admin_StepIsolatedRestore,
  IReq_Admin_GetServiceBackups,
  IReq_Admin_PruneClusterNodeArchive,
  IReq_Admin_RestoreServiceBackup,
  IReq_Cloudly_Coreflow_CleanupIsolatedRestore,
  IReq_Cloudly_Coreflow_ExecuteIsolatedRestore,
  IReq_Cloudly_Coreflow_GetIsolatedRestoreStatus,
  IReq_Cloudly_Coreflow_PrepareIsolatedRestore,
  IReq_Cloudly_Relay_BackupClusterService,
  IReq_Cloudly_Relay_PruneClusterNodeArchive,
  IReq_Cloudly_Relay_RestoreClusterService,
  IReq_Cloudly_Relay_StageIsolatedRestoreArchive,
  IReq_Relay_Cloudly_BackupServiceDatabaseClosure,
  IReq_Relay_Cloudly_RestoreServiceDatabaseClosure,
  IServiceBackupRecord,
  IServiceDatabaseClosureReceipt,
} from '../interfaces/requests/backup.js';
import { identityIssuer } from '../core/auth.js';
import { relayCallFailureReasons, requireValidRelayAnswer } from '../core/relaycalls.js';
import {
  validateBackupClusterServiceAnswer,
  validateIsolatedRestoreStateAnswer,
  validatePruneClusterNodeArchiveAnswer,
  validateRestoreClusterServiceAnswer,
} from './relayanswers.js';
import {
  restoreGrantAudience,
  restoreGrantClaimsOf,
  restoreGrantLifetimeSeconds,
  restoreGrantSubjectOf,
  verifyRestoreGrant,
  type IRestoreGrantBinding,
  type IRestoreGrantClaims,
} from './restoregrants.js';
import { backupRefusalReasons, decideBackupInterrupted, decideBackupOrder, decideBackupSettlement, decideClosureRecord } from './decide.js';
import { findPage, nextCursorMember, pageShape } from '../core/pagination.js';
import { haltIfDryRun } from '../core/operationcontext.js';
import { sha256Hex } from '../interfaces/private/canonicaljson.js';
import {
  OperationCancelledError,
  OperationManager,
  operationIdOf,
  operationTiming,
  type IOperationRun,
} from '../manager.operation/operation.manager.js';
import { operationKind, toPublicOperation, type IOperationDocument } from '../manager.operation/documents.js';
import { operationReasons } from '../manager.operation/decide.js';
import type { IOperation } from '../interfaces/requests/operation.js';

/**
 * Node-addressed backups, database closures and isolated restores.
 *
 * Administrators order backups, restores and prunes of one exact node; Cloudly calls the
 * cluster's relay with that `nodeId`. During a backup the relay sends the service's database
 * closure on its own session (`backupServiceDatabaseClosure`); Cloudly validates the
 * descriptor before any byte moves, stores the bytes in the blob store (exact length and
 * sha256 proven, fsynced, renamed, recorded) and only then answers the stream with its
 * receipt. A restore fetches the closure back (`restoreServiceDatabaseClosure`).
 *
 * The retired coreflow-tagged methods (`executeServiceBackup`, `executeServiceRestore`,
 * `pruneNodeArchive`, `uploadBackupArchiveObject`, `downloadBackupArchiveObject`) are not
 * registered, so Cloudly answers them as not served.
 */

export { maximumSnapshotsPerBackup } from './relayanswers.js';
/** Most tags one backup may carry, and their sizes. */
export const maximumBackupTags = 32;
const maximumTagKeyLength = 64;
const maximumTagValueLength = 256;
/** Where the closure of a backup lives inside an isolated-restore archive manifest. */
export const closureArchiveObjectPath = 'closure/database.closure';

/** Reasons this manager gives, defined once. */
export { backupRefusalReasons } from './decide.js';

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

const isTags: TFieldCheck = (valueArg, pathArg) => {
  if (!isPlainDataRecord(valueArg)) {
    return [`${pathArg} must be an object of strings`];
  }
  const entries = Object.entries(valueArg);
  if (entries.length > maximumBackupTags) {
    return [`${pathArg} must have at most ${maximumBackupTags} tags`];
  }
  return entries.flatMap(([key, value]) =>
    key.length >= 1 && key.length <= maximumTagKeyLength && typeof value === 'string' && value.length <= maximumTagValueLength
      ? []
      : [`${pathArg}.${key.slice(0, maximumTagKeyLength)} must be a key of 1 to ${maximumTagKeyLength} characters with a string of at most ${maximumTagValueLength}`]);
};

const isReplication: TFieldCheck = (valueArg, pathArg) =>
  isPlainDataRecord(valueArg) && Object.keys(valueArg).join(',') === 'enabled' && typeof valueArg.enabled === 'boolean'
    ? []
    : [`${pathArg} must be exactly { enabled: boolean }`];

const resourceTypes = ['volume', 'database', 'bucket'] as const;
const isResourceType: TFieldCheck = (valueArg, pathArg) =>
  (resourceTypes as readonly unknown[]).includes(valueArg) ? [] : [`${pathArg} must be one of ${resourceTypes.join(', ')}`];

const fromValidator = (validatorArg: (valueArg: unknown, pathArg: string) => string[]): TFieldCheck =>
  (valueArg, pathArg) => validatorArg(valueArg, pathArg);

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
});

/** Where the closure of one backup lives in the blob store. */
export const closureBlobKey = (clusterIdArg: string, backupIdArg: string): string =>
  `closures/${clusterIdArg}/${backupIdArg}`;

/** What a stream failure is called on the wire: the blob store's code or the stream's reason. */
/** A blob store failure before any byte moved, as a refusal (e.g. `closure-blob-store-unavailable` while S3 is down). */
const blobRefusalOf = (errorArg: unknown): unknown =>
  (errorArg instanceof BlobStoreError ? refuse('unavailable', [`closure-${errorArg.code}`]) : errorArg);

const abortReasonOf = (errorArg: unknown): string => {
  if (errorArg instanceof BlobStoreError) {
    return `closure-${errorArg.code}`;
  }
  if (errorArg instanceof StreamAbortedError) {
    return errorArg.reason;
  }
  return 'closure-store-failed';
};

const optionalOperation = (operationArg: IOperation | undefined): { operation?: IOperation } =>
  (operationArg ? { operation: operationArg } : {});

export class BackupManager {
  public readonly blobStore: IBlobStore & { init?(): Promise<void> };
  /** Closure uploads in flight on this instance, by blob key: one at a time per backup. */
  private readonly uploadsInFlight = new Set<string>();
  /** Background stream work, awaited on stop so no write is cut off mid-way. */
  private readonly streamTasks = new Set<Promise<void>>();
  /** Long work (backups, restores) as operations; started before this manager, stopped after it. */
  public readonly operations: OperationManager;
  /** Running backup operations on this instance, by backup id: the closure upload reports bytes to it. */
  private readonly backupRuns = new Map<string, IOperationRun>();
  /** Running restore operations on this instance, by backup id and node: the closure download reports to it. */
  private readonly restoreRuns = new Map<string, IOperationRun>();
  /** Closure streams in flight, by backup id (upload) or backup id and node (download): a cancel aborts them. */
  private readonly openStreams = new Map<string, { abort(reasonArg: string): void; readonly isSettled: boolean }>();

  constructor(private readonly cloudly: Cloudly, optionsArg: { blobStore?: IBlobStore } = {}) {
    this.operations = cloudly.addManager(new OperationManager(cloudly));
    this.operations.onAbandoned((docArg) => this.settleInterrupted(docArg));
    this.blobStore = optionsArg.blobStore ?? new FilesystemBlobStore(path.join(cloudly.config.dataDir, 'blobs'));
    // Every relay socket gets its stream channel as soon as it opens.
    cloudly.relays.onSessionOpened((sessionArg) => {
      streamChannelOf(sessionArg.peer);
    });
    this.registerAdminHandlers();
    this.registerRelayHandlers();
  }

  public async start(): Promise<void> {
    await this.blobStore.init?.();
    // A backup left running by an attempt whose operation ended (or never got recorded) failed with it.
    for (const backup of await this.cloudly.store.find(serviceBackupKind, { state: 'running' })) {
      const operation = backup.operationId ? await this.cloudly.store.get(operationKind, backup.operationId) : null;
      if (backup.operationId && (!operation || operation.state !== 'running')) {
        await this.cloudly.store.mutate(serviceBackupKind, backup.id, (currentArg) => decideBackupInterrupted(currentArg, backup.operationId!));
      }
    }
  }

  /** The backup of an operation whose instance died fails with it, unless another attempt took it over. */
  private async settleInterrupted(docArg: IOperationDocument): Promise<void> {
    if (docArg.kind !== 'service-backup') {
      return;
    }
    await this.cloudly.store.mutate(serviceBackupKind, docArg.backupId, (currentArg) => decideBackupInterrupted(currentArg, docArg.id));
  }

  /** The public operation, or undefined (a backup ordered before operations existed has none). */
  private async operationOf(operationIdArg: string | undefined): Promise<IOperation | undefined> {
    return operationIdArg ? (await this.operations.getPublic(operationIdArg)) ?? undefined : undefined;
  }

  public async stop(): Promise<void> {
    await Promise.allSettled([...this.streamTasks]);
  }

  /** The JWKS-published key set that verifies restore grants, as Corestore would use it. */
  public async verifyRestoreGrant(grantArg: string, bindingArg: IRestoreGrantBinding): Promise<IRestoreGrantClaims> {
    return verifyRestoreGrant(grantArg, createLocalJWKSet(this.cloudly.auth.jwks), identityIssuer, bindingArg);
  }

  /** Signs one restore grant with Cloudly's identity key (published in the JWKS). */
  public async signRestoreGrant(bindingArg: IRestoreGrantBinding): Promise<string> {
    return this.cloudly.auth.signJwt(restoreGrantClaimsOf(bindingArg), {
      audience: restoreGrantAudience,
      subject: restoreGrantSubjectOf(bindingArg),
      expiresAtMs: Date.now() + restoreGrantLifetimeSeconds * 1000,
    });
  }

  private track(taskArg: Promise<void>): void {
    this.streamTasks.add(taskArg);
    void taskArg.finally(() => this.streamTasks.delete(taskArg));
  }

  private async requireService(serviceIdArg: string): Promise<IService> {
    const service = await this.cloudly.serviceManager.getService(serviceIdArg);
    if (!service) {
      throw refuse('not-found', [backupRefusalReasons.serviceNotFound]);
    }
    return service;
  }

  private async requireNode(clusterIdArg: string, nodeIdArg: string): Promise<void> {
    if (!(await this.cloudly.clusterManager.nodes.getNode(clusterIdArg, nodeIdArg))) {
      throw refuse('not-found', [backupRefusalReasons.nodeNotFound]);
    }
  }

  // ---------------------------------------------------------------- admin

  /**
   * The same mutationId again answers the operation it started, as that operation stands now,
   * with its backup; null when the mutationId is absent or new. Another request under a used
   * mutationId is refused.
   */
  private async replayBackupOperation(
    methodArg: 'createServiceBackup' | 'restoreServiceBackup',
    mutationIdArg: string | undefined,
    requestSha256Arg: string,
  ): Promise<{ backup: IServiceBackupRecord; operation: IOperation } | null> {
    if (mutationIdArg === undefined) {
      return null;
    }
    const earlier = await this.operations.findByMutation(methodArg, mutationIdArg);
    if (!earlier) {
      return null;
    }
    if (earlier.requestSha256 !== requestSha256Arg) {
      throw refuse('invalid-request', [backupRefusalReasons.mutationReused]);
    }
    const backup = await this.cloudly.store.get(serviceBackupKind, earlier.backupId);
    if (!backup) {
      throw refuse('not-found', [backupRefusalReasons.backupNotFound]);
    }
    return { backup: toRecord(backup), operation: (await this.operationOf(earlier.id))! };
  }

  private registerAdminHandlers(): void {
    this.cloudly.addAdminHandler<IReq_Admin_CreateServiceBackup>('createServiceBackup', async (request, context) => {
      request = requireRequestShape(request, {
        required: { clusterId: isIdString, nodeId: isIdString, serviceId: isIdString },
        optional: { backupId: isIdString, tags: isTags, replication: isReplication, mutationId: isIdString },
      });
      const requestSha256 = sha256Hex(JSON.stringify(request));
      const replayed = await this.replayBackupOperation('createServiceBackup', request.mutationId, requestSha256);
      if (replayed) {
        return replayed;
      }
      const service = await this.requireService(request.serviceId);
      if (service.clusterId !== request.clusterId) {
        throw refuse('invalid-request', [`request.clusterId: ${backupRefusalReasons.clusterMismatch}`]);
      }
      await this.requireNode(request.clusterId, request.nodeId);
      const operationId = request.mutationId !== undefined ? operationIdOf('createServiceBackup', request.mutationId) : `op-${randomUUID()}`;
      const backupId = request.backupId
        ?? (request.mutationId !== undefined ? `backup-${sha256Hex(`createServiceBackup\u0000${request.mutationId}`).slice(0, 32)}` : `backup-${randomUUID()}`);
      const orderSha256 = computeCanonicalJsonSha256Hex({
        clusterId: request.clusterId,
        nodeId: request.nodeId,
        serviceId: request.serviceId,
        tags: request.tags ?? {},
        replication: request.replication ?? null,
      });
      // A repeated order of a backup that is running answers its operation instead of a conflict.
      const current = await this.cloudly.store.get(serviceBackupKind, backupId);
      if (current?.state === 'running' && current.orderSha256 === orderSha256 && current.operationId) {
        const operation = await this.operationOf(current.operationId);
        if (operation?.state === 'running') {
          return { backup: toRecord(current), operation };
        }
      }
      const ordered = await this.cloudly.store.mutate(serviceBackupKind, backupId, (existingArg) => decideBackupOrder(existingArg, {
        backupId,
        clusterId: request.clusterId,
        nodeId: request.nodeId,
        serviceId: request.serviceId,
        orderSha256,
        now: Date.now(),
        attemptTimeoutMs: this.cloudly.relays.timeoutOf('backupClusterService'),
        operationId,
      }));
      if (ordered.outcome === 'kept') {
        // The same order of a completed backup: answered as it is, with the operation that made it.
        return { backup: toRecord(ordered.doc!), ...optionalOperation(await this.operationOf(ordered.doc!.operationId)) };
      }
      const { doc: operationDoc } = await this.operations.begin({
        operationId,
        kind: 'service-backup',
        method: 'createServiceBackup',
        clusterId: request.clusterId,
        serviceId: request.serviceId,
        nodeId: request.nodeId,
        backupId,
        requestedBy: context.identity.userId,
        ...(request.mutationId !== undefined ? { mutationId: request.mutationId } : {}),
        requestSha256,
      });
      // A dry run has decided the order and the operation; it never asks the relay.
      haltIfDryRun('relay call backupClusterService');
      this.cloudly.logger.info({ backupId, operationId, clusterId: request.clusterId, nodeId: request.nodeId, serviceId: request.serviceId, actor: context.identity.userId }, 'service backup ordered');
      this.operations.launch(operationDoc, (runArg) => this.runBackup(runArg, backupId, {
        nodeId: request.nodeId,
        backupId,
        service,
        ...(request.tags ? { tags: request.tags } : {}),
        ...(request.replication ? { replication: request.replication } : {}),
      }));
      return { backup: toRecord(ordered.doc!), operation: toPublicOperation(operationDoc, null) };
    });

    this.cloudly.addAdminHandler<IReq_Admin_RestoreServiceBackup>('restoreServiceBackup', async (request, context) => {
      request = requireRequestShape(request, {
        required: { backupId: isIdString },
        optional: { nodeId: isIdString, clear: isBoolean, resourceTypes: isArrayOf(isResourceType, resourceTypes.length), mutationId: isIdString },
      });
      const requestSha256 = sha256Hex(JSON.stringify(request));
      const replayed = await this.replayBackupOperation('restoreServiceBackup', request.mutationId, requestSha256);
      if (replayed) {
        return replayed;
      }
      const backup = await this.cloudly.store.get(serviceBackupKind, request.backupId);
      if (!backup) {
        throw refuse('not-found', [backupRefusalReasons.backupNotFound]);
      }
      if (backup.state !== 'completed') {
        throw refuse('conflict', [backupRefusalReasons.backupNotCompleted]);
      }
      const nodeId = request.nodeId ?? backup.nodeId;
      const service = await this.requireService(backup.serviceId);
      await this.requireNode(backup.clusterId, nodeId);
      const snapshots = request.resourceTypes
        ? backup.snapshots.filter((snapshot) => request.resourceTypes!.includes(snapshot.type))
        : backup.snapshots;
      const { doc: operationDoc, created } = await this.operations.begin({
        operationId: request.mutationId !== undefined ? operationIdOf('restoreServiceBackup', request.mutationId) : `op-${randomUUID()}`,
        kind: 'service-restore',
        method: 'restoreServiceBackup',
        clusterId: backup.clusterId,
        serviceId: backup.serviceId,
        nodeId,
        backupId: backup.id,
        requestedBy: context.identity.userId,
        ...(request.mutationId !== undefined ? { mutationId: request.mutationId } : {}),
        requestSha256,
      });
      if (!created) {
        return { backup: toRecord(backup), operation: (await this.operationOf(operationDoc.id))! };
      }
      haltIfDryRun('relay call restoreClusterService');
      const relayRequest: IReq_Cloudly_Relay_RestoreClusterService['request'] = {
        nodeId,
        backupId: backup.id,
        service,
        snapshots,
        ...(request.clear !== undefined ? { clear: request.clear } : {}),
        ...(request.resourceTypes ? { resourceTypes: request.resourceTypes } : {}),
      };
      this.operations.launch(operationDoc, async (runArg) => {
        const key = `${backup.id}\u0000${nodeId}`;
        this.restoreRuns.set(key, runArg);
        runArg.signal.addEventListener('abort', () => this.abortStream(key), { once: true });
        runArg.setPhase('relay');
        try {
          const answer = await runArg.untilCancelled(this.cloudly.relays.call<IReq_Cloudly_Relay_RestoreClusterService['response']>(
            backup.clusterId, 'restoreClusterService', relayRequest));
          requireValidRelayAnswer(validateRestoreClusterServiceAnswer(answer));
          return { backup: toRecord(backup), restored: answer.restored };
        } finally {
          if (this.restoreRuns.get(key) === runArg) {
            this.restoreRuns.delete(key);
          }
        }
      });
      return { backup: toRecord(backup), operation: toPublicOperation(operationDoc, null) };
    });

    this.cloudly.addAdminHandler<IReq_Admin_GetServiceBackups>('getServiceBackups', async (request) => {
      request = requireRequestShape(request, { required: {}, optional: { serviceId: isIdString, clusterId: isIdString, ...pageShape('getServiceBackups') } });
      const filter: Record<string, string> = {};
      if (request.serviceId !== undefined) filter.serviceId = request.serviceId;
      if (request.clusterId !== undefined) filter.clusterId = request.clusterId;
      const page = await findPage(this.cloudly.store, serviceBackupKind, filter, 'getServiceBackups', request, { createdAt: 1 });
      return { backups: page.items.map(toRecord), ...nextCursorMember(page) };
    });

    this.cloudly.addAdminHandler<IReq_Admin_PruneClusterNodeArchive>('adminPruneClusterNodeArchive', async (request) => {
      request = requireRequestShape(request, {
        required: { clusterId: isIdString, nodeId: isIdString, retention: fromValidator(validateArchiveRetentionPolicy) },
        optional: { dryRun: isBoolean },
      });
      if (!(await this.cloudly.clusterManager.getCluster(request.clusterId))) {
        throw refuse('not-found', [backupRefusalReasons.clusterNotFound]);
      }
      await this.requireNode(request.clusterId, request.nodeId);
      const answer = await this.cloudly.relays.call<IReq_Cloudly_Relay_PruneClusterNodeArchive['response']>(
        request.clusterId,
        'pruneClusterNodeArchive',
        {
          nodeId: request.nodeId,
          retention: request.retention,
          ...(request.dryRun !== undefined ? { dryRun: request.dryRun } : {}),
        } satisfies IReq_Cloudly_Relay_PruneClusterNodeArchive['request'],
      );
      requireValidRelayAnswer(validatePruneClusterNodeArchiveAnswer(answer));
      // `found: false` is what the node has, not a failure: it is answered as it is.
      return answer.found && answer.result !== undefined ? { found: true, result: answer.result } : { found: answer.found };
    }, { contractOwnsDryRun: true });

    this.cloudly.addAdminHandler<IReq_Admin_CreateIsolatedRestore>('createIsolatedRestore', async (request, context) => {
      request = requireRequestShape(request, {
        required: {
          backupId: isIdString,
          targetNodeName: isIdString,
          mappings: fromValidator(validateIsolatedRestoreResourceMappings),
        },
        optional: { restoreId: isIdString, mutationId: isIdString },
      });
      return this.createIsolatedRestore(request, context.identity.userId);
    });

    this.cloudly.addAdminHandler<IReq_Admin_StepIsolatedRestore>('stepIsolatedRestore', async (request) => {
      request = requireRequestShape(request, {
        required: {
          restoreId: isIdString,
          operation: (valueArg, pathArg) => (['status', 'execute', 'cleanup'].includes(valueArg as string) ? [] : [`${pathArg} must be status, execute or cleanup`]),
        },
        optional: { expectedRevision: isPositiveInteger },
      });
      if (request.operation !== 'status' && request.expectedRevision === undefined) {
        throw refuse('invalid-request', ['request.expectedRevision is required for execute and cleanup']);
      }
      return this.stepIsolatedRestore(request.restoreId, request.operation, request.expectedRevision);
    });
  }

  /**
   * The work of a backup operation: the relay call (during which the relay streams the closure),
   * then the outcome recorded on the backup. A cancel stops the wait, aborts a closure upload in
   * flight and records the backup failed (`operation-cancelled`); the relay's later answer is discarded.
   */
  private async runBackup(
    runArg: IOperationRun,
    backupIdArg: string,
    relayRequestArg: IReq_Cloudly_Relay_BackupClusterService['request'],
  ): Promise<{ backup: IServiceBackupRecord }> {
    this.backupRuns.set(backupIdArg, runArg);
    runArg.signal.addEventListener('abort', () => this.abortStream(backupIdArg), { once: true });
    runArg.setPhase('relay');
    const backup = await this.cloudly.store.get(serviceBackupKind, backupIdArg);
    let answer: IReq_Cloudly_Relay_BackupClusterService['response'];
    try {
      answer = await runArg.untilCancelled(this.cloudly.relays.call<IReq_Cloudly_Relay_BackupClusterService['response']>(
        backup?.clusterId ?? '', 'backupClusterService', relayRequestArg));
      requireValidRelayAnswer(validateBackupClusterServiceAnswer(answer));
    } catch (error) {
      const reasons = (error as { errorData?: { reasons?: unknown } }).errorData?.reasons;
      const failureReason = error instanceof OperationCancelledError || !this.cloudly.started
        ? (error instanceof OperationCancelledError && error.why === 'cancelled' ? backupRefusalReasons.backupCancelled : operationReasons.interrupted)
        : Array.isArray(reasons) && typeof reasons[0] === 'string' ? reasons[0] : relayCallFailureReasons.failed;
      await this.settleBackup(backupIdArg, { state: 'failed', failureReason }, runArg.operationId);
      throw error;
    } finally {
      if (this.backupRuns.get(backupIdArg) === runArg) {
        this.backupRuns.delete(backupIdArg);
      }
    }
    runArg.setPhase('recording');
    const settled = await this.settleBackup(backupIdArg, {
      state: 'completed',
      snapshots: answer.snapshots,
      ...(answer.replication ? { replication: answer.replication } : {}),
    }, runArg.operationId);
    return { backup: toRecord(settled) };
  }

  /** Aborts the closure stream of a cancelled operation, if one is open on this instance. */
  private abortStream(keyArg: string): void {
    const stream = this.openStreams.get(keyArg);
    if (stream && !stream.isSettled) {
      stream.abort(backupRefusalReasons.backupCancelled);
    }
  }

  /**
   * Records the outcome of a backup on its document, racing only with a closure being recorded;
   * a backup that is gone by then is `not-found`.
   */
  private async settleBackup(
    backupIdArg: string,
    setArg: Partial<Pick<IServiceBackupDocument, 'state' | 'snapshots' | 'replication' | 'failureReason'>>,
    operationIdArg: string,
  ): Promise<IServiceBackupDocument> {
    // An attempt that another order took over (a new operation on the same backup) records nothing.
    return (await this.cloudly.store.mutate(serviceBackupKind, backupIdArg, (currentArg) =>
      (currentArg && currentArg.operationId !== undefined && currentArg.operationId !== operationIdArg
        ? { kind: 'keep' }
        : decideBackupSettlement(currentArg, setArg)))).doc!;
  }

  // ---------------------------------------------------------------- relay

  private registerRelayHandlers(): void {
    this.cloudly.addRelayHandler<IReq_Relay_Cloudly_BackupServiceDatabaseClosure>('backupServiceDatabaseClosure', async (request, context) => {
      // Everything is checked before the receiver attaches, so no byte moves for a bad request.
      request = requireRequestShape(request, {
        required: {
          backupId: isIdString,
          serviceId: isIdString,
          nodeId: isIdString,
          descriptor: fromValidator(validateCorestoreDatabaseClosureDescriptor),
          closure: (valueArg, pathArg) => validateStreamReference(valueArg, 'send', pathArg),
        },
      });
      const backup = await this.cloudly.store.get(serviceBackupKind, request.backupId);
      // Another cluster's backup is answered exactly like a missing one.
      if (!backup || backup.clusterId !== context.clusterId || backup.serviceId !== request.serviceId || backup.nodeId !== request.nodeId) {
        throw refuse('not-found', [backupRefusalReasons.backupNotFound]);
      }
      if (backup.closure) {
        throw refuse('conflict', [backupRefusalReasons.closureAlreadyStored]);
      }
      if (backup.state === 'failed' && backup.failureReason === backupRefusalReasons.backupCancelled) {
        throw refuse('conflict', [backupRefusalReasons.backupCancelled]);
      }
      const blobKey = closureBlobKey(backup.clusterId, backup.id);
      if (this.uploadsInFlight.has(blobKey)) {
        throw refuse('conflict', [backupRefusalReasons.closureUploadInProgress]);
      }
      this.uploadsInFlight.add(blobKey);
      // Bytes without a record on the backup are left over from an attempt that never
      // committed (e.g. a crash between fsync and the record): they are not the closure.
      try {
        if (await this.blobStore.stat(blobKey)) {
          await this.blobStore.delete(blobKey);
        }
      } catch (error) {
        this.uploadsInFlight.delete(blobKey);
        throw blobRefusalOf(error);
      }
      let receiver: StreamReceiver;
      try {
        // The first credit follows the `{ accepted: true }` answer, never precedes it.
        receiver = streamChannelOf(context.session.peer).attachReceiver(request.closure.streamId, { firstCreditAfterAnswer: true });
      } catch (error) {
        this.uploadsInFlight.delete(blobKey);
        throw error instanceof StreamAbortedError
          ? refuse('unavailable', [error.reason])
          : refuse('invalid-request', ['request.closure.streamId is already in use on this socket']);
      }
      this.track(this.receiveClosure(receiver, blobKey, request).finally(() => this.uploadsInFlight.delete(blobKey)));
      return { accepted: true };
    });

    this.cloudly.addRelayHandler<IReq_Relay_Cloudly_RestoreServiceDatabaseClosure>('restoreServiceDatabaseClosure', async (request, context) => {
      request = requireRequestShape(request, {
        required: { backupId: isIdString, serviceId: isIdString, nodeId: isIdString },
      });
      const backup = await this.cloudly.store.get(serviceBackupKind, request.backupId);
      if (!backup || backup.clusterId !== context.clusterId || backup.serviceId !== request.serviceId) {
        throw refuse('not-found', [backupRefusalReasons.backupNotFound]);
      }
      if (!backup.closure) {
        throw refuse('not-found', [backupRefusalReasons.closureNotStored]);
      }
      await this.requireNode(context.clusterId, request.nodeId);
      const stored = await this.blobStore.stat(backup.closure.blobKey).catch((error: unknown) => {
        throw blobRefusalOf(error);
      });
      if (!stored || stored.byteLength !== backup.closure.descriptor.byteLength || stored.sha256 !== backup.closure.descriptor.sha256) {
        throw refuse('unavailable', [backupRefusalReasons.closureBytesMissing]);
      }
      const sender = streamChannelOf(context.session.peer).openSender();
      // A restore operation of this instance follows the bytes sent.
      const key = `${backup.id}\u0000${request.nodeId}`;
      const run = this.restoreRuns.get(key);
      run?.setPhase('transfer', backup.closure.descriptor.byteLength);
      if (run) {
        this.openStreams.set(key, sender);
      }
      this.track(this.sendBlob(sender, backup.closure.blobKey, run).finally(() => {
        if (this.openStreams.get(key) === sender) {
          this.openStreams.delete(key);
        }
      }));
      return { descriptor: backup.closure.descriptor, closure: sender.reference('receive') };
    });
  }

  /** Stores the streamed closure, records it, and only then answers the stream with the receipt. */
  private async receiveClosure(
    receiverArg: StreamReceiver,
    blobKeyArg: string,
    requestArg: IReq_Relay_Cloudly_BackupServiceDatabaseClosure['request'],
  ): Promise<void> {
    const { descriptor } = requestArg;
    const run = this.backupRuns.get(requestArg.backupId);
    run?.setPhase('transfer', descriptor.byteLength);
    this.openStreams.set(requestArg.backupId, receiverArg);
    // Progress follows the bytes: the operation manager writes it at most every progressWriteMs.
    const progressTimer = run ? setInterval(() => run.setBytes(receiverArg.bytesReceived), operationTiming.progressWriteMs / 2) : null;
    try {
      const stored = await this.blobStore.put(blobKeyArg, { byteLength: descriptor.byteLength, sha256: descriptor.sha256 }, receiverArg);
      run?.setBytes(stored.byteLength);
      const recorded = await this.recordClosure(requestArg.backupId, { descriptor, storedAt: stored.storedAt, blobKey: blobKeyArg });
      if (!recorded) {
        await this.blobStore.delete(blobKeyArg);
        receiverArg.abort(backupRefusalReasons.closureRecordFailed);
        return;
      }
      // The embedded database writes its snapshot lazily; the receipt waits until it is on disk.
      await this.cloudly.database.flushSnapshot();
      const receipt: IServiceDatabaseClosureReceipt = {
        backupId: requestArg.backupId,
        serviceId: requestArg.serviceId,
        nodeId: requestArg.nodeId,
        byteLength: stored.byteLength,
        sha256: stored.sha256,
        storedAt: stored.storedAt,
      };
      receiverArg.complete(receipt);
      this.cloudly.logger.info({ backupId: requestArg.backupId, byteLength: stored.byteLength }, 'service database closure stored');
    } catch (error) {
      if (!receiverArg.isSettled) {
        receiverArg.abort(abortReasonOf(error));
      }
      this.cloudly.logger.warn({ backupId: requestArg.backupId, reason: abortReasonOf(error) }, 'service database closure refused');
    } finally {
      if (progressTimer) clearInterval(progressTimer);
      if (this.openStreams.get(requestArg.backupId) === receiverArg) {
        this.openStreams.delete(requestArg.backupId);
      }
    }
  }

  /** Records the stored closure on its backup, unless the backup is gone or already has one. */
  private async recordClosure(
    backupIdArg: string,
    closureArg: NonNullable<IServiceBackupDocument['closure']>,
  ): Promise<boolean> {
    const { outcome } = await this.cloudly.store.mutate(serviceBackupKind, backupIdArg, (currentArg) => decideClosureRecord(currentArg, closureArg));
    return outcome === 'written';
  }

  /**
   * Streams a stored blob; bytes that no longer match their record end in an abort, never a clean
   * end. The stream is done once its end is sent: the relay proves length and sha256 itself, and
   * its `complete` (or its abort after the end) is not waited for.
   */
  private async sendBlob(senderArg: StreamSender, blobKeyArg: string, runArg?: IOperationRun): Promise<void> {
    const progressTimer = runArg ? setInterval(() => runArg.setBytes(senderArg.bytesSent), operationTiming.progressWriteMs / 2) : null;
    try {
      // The sender copies each chunk into its frame before it asks for the next one.
      await senderArg.pipeFrom(this.blobStore.read(blobKeyArg, { transientChunks: true }), abortReasonOf, { awaitReceipt: false });
    } catch (error) {
      if (!senderArg.isSettled) {
        senderArg.abort(abortReasonOf(error));
      }
    } finally {
      if (progressTimer) clearInterval(progressTimer);
      runArg?.setBytes(senderArg.bytesSent);
    }
  }

  // ---------------------------------------------------------------- isolated restores

  /** The manifest of what Cloudly holds for a backup: today, its database closure. */
  private manifestOf(backupArg: IServiceBackupDocument): IBackupArchiveObject[] {
    return backupArg.closure
      ? [{ path: closureArchiveObjectPath, size: backupArg.closure.descriptor.byteLength, sha256: backupArg.closure.descriptor.sha256 }]
      : [];
  }

  private bindingOf(docArg: IIsolatedRestoreDocument, operationArg: TIsolatedRestoreGrantOperation, objectArg?: IBackupArchiveObject): IRestoreGrantBinding {
    return {
      operation: operationArg,
      clusterId: docArg.clusterId,
      targetNodeName: docArg.targetNodeName,
      restoreId: docArg.id,
      mappingsSha256: computeIsolatedRestoreResourceMappingsSha256(docArg.mappings),
      manifestSha256: computeIsolatedRestoreArchiveManifestSha256(docArg.manifest),
      ...(objectArg ? { object: objectArg } : {}),
    };
  }

  /**
   * Creates the restore record and answers at once with the operation that prepares it and stages
   * every manifest object (the closure bytes: the long part) on the node.
   */
  private async createIsolatedRestore(
    requestArg: IReq_Admin_CreateIsolatedRestore['request'],
    actorIdArg: string,
  ): Promise<IReq_Admin_CreateIsolatedRestore['response']> {
    const requestSha256 = sha256Hex(JSON.stringify(requestArg));
    if (requestArg.mutationId !== undefined) {
      const earlier = await this.operations.findByMutation('createIsolatedRestore', requestArg.mutationId);
      if (earlier) {
        if (earlier.requestSha256 !== requestSha256) {
          throw refuse('invalid-request', [backupRefusalReasons.mutationReused]);
        }
        return { restoreId: String(earlier.input.restoreId), operation: (await this.operationOf(earlier.id))! };
      }
    }
    const backup = await this.cloudly.store.get(serviceBackupKind, requestArg.backupId);
    if (!backup) {
      throw refuse('not-found', [backupRefusalReasons.backupNotFound]);
    }
    if (backup.state !== 'completed' || !backup.closure) {
      throw refuse('conflict', [backupRefusalReasons.backupNotCompleted]);
    }
    await this.requireNode(backup.clusterId, requestArg.targetNodeName);
    const restoreId = requestArg.restoreId
      ?? (requestArg.mutationId !== undefined ? `restore-${sha256Hex(`createIsolatedRestore\u0000${requestArg.mutationId}`).slice(0, 32)}` : `restore-${randomUUID()}`);
    const doc = await this.cloudly.store.insert(isolatedRestoreKind, {
      id: restoreId,
      backupId: backup.id,
      clusterId: backup.clusterId,
      sourceServiceId: backup.serviceId,
      targetNodeName: requestArg.targetNodeName,
      createdAt: Date.now(),
      mappings: normalizeIsolatedRestoreResourceMappings(requestArg.mappings),
      manifest: this.manifestOf(backup),
    });
    if (!doc) {
      throw refuse('conflict', [backupRefusalReasons.restoreIdInUse]);
    }
    const { doc: operationDoc } = await this.operations.begin({
      operationId: requestArg.mutationId !== undefined ? operationIdOf('createIsolatedRestore', requestArg.mutationId) : `op-${randomUUID()}`,
      kind: 'isolated-restore',
      method: 'createIsolatedRestore',
      clusterId: backup.clusterId,
      serviceId: backup.serviceId,
      nodeId: requestArg.targetNodeName,
      backupId: backup.id,
      requestedBy: actorIdArg,
      ...(requestArg.mutationId !== undefined ? { mutationId: requestArg.mutationId } : {}),
      requestSha256,
      input: { restoreId },
    });
    haltIfDryRun('relay call coreflowPrepareIsolatedRestore');
    const blobKey = backup.closure.blobKey;
    this.operations.launch(operationDoc, async (runArg) => {
      const routing = { clusterId: doc.clusterId, targetNodeName: doc.targetNodeName, restoreId };
      runArg.setPhase('relay');
      runArg.signal.addEventListener('abort', () => this.abortStream(`stage\u0000${restoreId}`), { once: true });
      let { state } = await runArg.untilCancelled(this.cloudly.relays.call<IReq_Cloudly_Coreflow_PrepareIsolatedRestore['response']>(
        doc.clusterId,
        'coreflowPrepareIsolatedRestore',
        {
          restoreGrant: await this.signRestoreGrant(this.bindingOf(doc, 'prepare')),
          ...routing,
          mappings: doc.mappings,
          manifest: doc.manifest,
        } satisfies IReq_Cloudly_Coreflow_PrepareIsolatedRestore['request'],
      ));
      requireValidRelayAnswer(validateIsolatedRestoreStateAnswer({ state }, routing));
      // One object per call, each under its own write-object grant; its bytes are the progress.
      for (const object of doc.manifest) {
        runArg.setPhase('transfer', object.size);
        runArg.setBytes(0, object.size);
        state = await runArg.untilCancelled(this.stageArchiveObject(doc, object, blobKey, state.revision, runArg));
      }
      runArg.setPhase('recording');
      await this.recordRestoreState(restoreId, state);
      return { backup: toRecord(backup), restoreId, state };
    });
    return { restoreId, operation: toPublicOperation(operationDoc, null) };
  }

  private async stageArchiveObject(
    docArg: IIsolatedRestoreDocument,
    objectArg: IBackupArchiveObject,
    blobKeyArg: string,
    expectedRevisionArg: number,
    runArg?: IOperationRun,
  ): Promise<IIsolatedRestoreNodeState> {
    const session = this.cloudly.relays.activeSession(docArg.clusterId);
    if (!session) {
      throw refuse('unavailable', ['relay-not-connected']);
    }
    const sender = streamChannelOf(session.peer).openSender();
    const streamKey = `stage\u0000${docArg.id}`;
    this.openStreams.set(streamKey, sender);
    const sending = this.sendBlob(sender, blobKeyArg, runArg).finally(() => {
      if (this.openStreams.get(streamKey) === sender) {
        this.openStreams.delete(streamKey);
      }
    });
    this.track(sending);
    try {
      const answer = await this.cloudly.relays.callSession<IReq_Cloudly_Relay_StageIsolatedRestoreArchive['response']>(
        session,
        'stageIsolatedRestoreArchive',
        {
          restoreGrant: await this.signRestoreGrant(this.bindingOf(docArg, 'write-object', objectArg)),
          clusterId: docArg.clusterId,
          targetNodeName: docArg.targetNodeName,
          restoreId: docArg.id,
          expectedRevision: expectedRevisionArg,
          object: objectArg,
          archive: sender.reference('send'),
        } satisfies IReq_Cloudly_Relay_StageIsolatedRestoreArchive['request'],
      );
      requireValidRelayAnswer(validateIsolatedRestoreStateAnswer(answer, { clusterId: docArg.clusterId, targetNodeName: docArg.targetNodeName, restoreId: docArg.id }));
      return answer.state;
    } finally {
      if (!sender.isSettled) {
        sender.abort('stage-call-ended');
      }
      await sending;
    }
  }

  private async stepIsolatedRestore(
    restoreIdArg: string,
    operationArg: 'status' | 'execute' | 'cleanup',
    expectedRevisionArg?: number,
  ): Promise<{ state: IIsolatedRestoreNodeState }> {
    const doc = await this.cloudly.store.get(isolatedRestoreKind, restoreIdArg);
    if (!doc) {
      throw refuse('not-found', [backupRefusalReasons.restoreNotFound]);
    }
    const routing = {
      restoreGrant: await this.signRestoreGrant(this.bindingOf(doc, operationArg)),
      clusterId: doc.clusterId,
      targetNodeName: doc.targetNodeName,
      restoreId: doc.id,
    };
    const revision = { expectedRevision: expectedRevisionArg ?? 0 };
    const answer = operationArg === 'status'
      ? await this.cloudly.relays.call<IReq_Cloudly_Coreflow_GetIsolatedRestoreStatus['response']>(
        doc.clusterId, 'coreflowGetIsolatedRestoreStatus', routing satisfies IReq_Cloudly_Coreflow_GetIsolatedRestoreStatus['request'])
      : operationArg === 'execute'
        ? await this.cloudly.relays.call<IReq_Cloudly_Coreflow_ExecuteIsolatedRestore['response']>(
          doc.clusterId, 'coreflowExecuteIsolatedRestore', { ...routing, ...revision } satisfies IReq_Cloudly_Coreflow_ExecuteIsolatedRestore['request'])
        : await this.cloudly.relays.call<IReq_Cloudly_Coreflow_CleanupIsolatedRestore['response']>(
          doc.clusterId, 'coreflowCleanupIsolatedRestore', { ...routing, ...revision } satisfies IReq_Cloudly_Coreflow_CleanupIsolatedRestore['request']);
    requireValidRelayAnswer(validateIsolatedRestoreStateAnswer(answer, routing));
    await this.recordRestoreState(doc.id, answer.state);
    return { state: answer.state };
  }

  private async recordRestoreState(restoreIdArg: string, stateArg: IIsolatedRestoreNodeState): Promise<void> {
    // A restore that is gone by then has nothing to record on.
    await this.cloudly.store.mutate(isolatedRestoreKind, restoreIdArg, (currentArg) =>
      (currentArg ? { kind: 'write', change: { set: { lastState: stateArg } } } : { kind: 'keep' }));
  }
}
