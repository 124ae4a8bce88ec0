import { randomUUID } from 'node:crypto';
import { mutationIdReusedRefusal, refuse, refuseNamed } from '../core/errors.js';
import { haltIfDryRun } from '../core/operationcontext.js';
import {
  adminMutation,
  adminOrchestration,
  adminQuery,
  relayOrchestration,
  relayQuery,
  type IDeclaredOperation,
} from '../core/operations.js';
import { relayCallFailureReasons } from '../core/relaycalls.js';
import type { IRelaySession, RelaySessions } from '../core/relaysessions.js';
import type { DocumentStore } from '../core/store.js';
import type { TCloudlyLogger } from '../core/logger.js';
import { validateStreamReference } from '../core/streams.js';
import { fieldProblem, fieldProblemReasons, invalidField, isArrayOf, isBoolean, isIdString, isOneOf, isPositiveInteger, sentenceCheck, type TFieldCheck } from '../core/validation.js';
import { findPage, nextCursorMember, oldestFirst, orderedPageShape } from '../core/pagination.js';
import { computeCanonicalJsonSha256Hex, sha256Hex } from '../interfaces/private/canonicaljson.js';
import { isPlainDataRecord } from '../interfaces/private/dataproperties.js';
import { validateArchiveRetentionPolicy, type IBackupArchiveObject } from '../interfaces/data/backup.js';
import { validateCorestoreDatabaseClosureDescriptor } from '../interfaces/data/corestoreclosure.js';
import {
  computeIsolatedRestoreArchiveManifestSha256,
  computeIsolatedRestoreResourceMappingsSha256,
  normalizeIsolatedRestoreResourceMappings,
  validateIsolatedRestoreResourceMappings,
  type IIsolatedRestoreNodeState,
  type TIsolatedRestoreGrantOperation,
} from '../interfaces/data/isolatedrestore.js';
import type { IService } from '../interfaces/data/service.js';
import type { ICloudlyOutboundMethods, TCloudlyOutboundMethod } from '../interfaces/requests/methodmap.js';
import type { IServiceBackupRecord } from '../interfaces/requests/backup.js';
import type { IOperation } from '../interfaces/requests/operation.js';
import {
  OperationCancelledError,
  operationIdOf,
  type IOperationRun,
  type OperationManager,
} from '../manager.operation/operation.manager.js';
import { toPublicOperation } from '../manager.operation/documents.js';
import { operationReasons } from '../manager.operation/decide.js';
import {
  backupRefusalReasons,
  backupRestoreRefusal,
  closureDownloadRefusal,
  closureUploadRefusal,
  decideBackupOrder,
  decideBackupSettlement,
  decideIsolatedRestoreCreation,
  decideRestoreStateRecord,
} from './decide.js';
import {
  backupDrillKind,
  toDrillReceipt,
  type IBackupDrillDocument,
  isolatedRestoreKind,
  manifestOf,
  serviceBackupKind,
  toRecord,
  type IIsolatedRestoreDocument,
  type IServiceBackupDocument,
} from './documents.js';
import {
  readBackupClusterServiceAnswer,
  readIsolatedRestoreStateAnswer,
  readPruneClusterNodeArchiveAnswer,
  readRestoreClusterServiceAnswer,
} from './relayanswers.js';
import type { IRestoreGrantBinding } from './restoregrants.js';
import { blobRefusalOf, type ClosureTransfers } from './transfers.js';
import { decideVerificationRecord, verificationRefusal, verifyStoredClosure } from './verification.js';
import type { IBlobStore } from '../core/blobstore.js';
import type { IScheduledBackupOrder } from './schedules.controller.js';


/**
 * The backup domain's methods as declared operations (ts/core/operations.ts runs them). Backups,
 * restores and isolated restores are orchestrations: the intent is recorded (the backup, the
 * restore, the operation), the answer goes out at once with the operation, and the operation's
 * work makes the typed relay call (`relays.ask`), reads its answer with the contract's checks
 * (./relayanswers.ts) and settles the outcome with a pure decision (./decide.ts). A dry run
 * decides all of that and stops before the relay call: nothing is written, nothing is started.
 * The closure bytes move on the relay's socket (./transfers.ts).
 */

/** Most tags one backup may carry, and their sizes. */
export const maximumBackupTags = 32;
const maximumTagKeyLength = 64;
const maximumTagValueLength = 256;

const isTags: TFieldCheck = (valueArg, pathArg) => {
  if (!isPlainDataRecord(valueArg)) {
    return [invalidField(pathArg, `must be an object of strings`)];
  }
  const entries = Object.entries(valueArg);
  if (entries.length > maximumBackupTags) {
    return [fieldProblem(pathArg, fieldProblemReasons.tooMany, `must have at most ${maximumBackupTags} tags`)];
  }
  return entries.flatMap(([key, value]) =>
    key.length >= 1 && key.length <= maximumTagKeyLength && typeof value === 'string' && value.length <= maximumTagValueLength
      ? []
      : [invalidField(`${pathArg}.${key.slice(0, maximumTagKeyLength)}`, `must be a key of 1 to ${maximumTagKeyLength} characters with a string of at most ${maximumTagValueLength}`)]);
};

const isReplication: TFieldCheck = (valueArg, pathArg) =>
  isPlainDataRecord(valueArg) && Object.keys(valueArg).join(',') === 'enabled' && typeof valueArg.enabled === 'boolean'
    ? []
    : [invalidField(pathArg, `must be exactly { enabled: boolean }`)];

const resourceTypes = ['volume', 'database', 'bucket'] as const;
const isResourceType: TFieldCheck = isOneOf(resourceTypes);

const isStepOperation: TFieldCheck = isOneOf(['status', 'execute', 'cleanup'], 'must be status, execute or cleanup');

/** The relay methods of an isolated restore's steps. */
const restoreStepMethods = {
  status: 'coreflowGetIsolatedRestoreStatus',
  execute: 'coreflowExecuteIsolatedRestore',
  cleanup: 'coreflowCleanupIsolatedRestore',
} as const;

/** What the backup domain's operations need, wired by the manager from the composition root's parts. */
export interface IBackupPorts {
  store: DocumentStore;
  logger: TCloudlyLogger;
  /** Long work as operations (ts/manager.operation). */
  operations: OperationManager;
  /** The closure bytes on this instance. */
  transfers: ClosureTransfers;
  relays: Pick<RelaySessions, 'ask' | 'activeSession' | 'timeoutOf'>;
  /** A typed call on one exact relay session (the one that carries a stream); the answer is unknown until read. */
  askSession<M extends TCloudlyOutboundMethod>(sessionArg: IRelaySession, methodArg: M, requestArg: ICloudlyOutboundMethods[M]['request']): Promise<unknown>;
  /** The service (the service domain's read), or `not-found` `service-not-found`. */
  requireService(serviceIdArg: string): Promise<IService>;
  /** Refuses `not-found` `cluster-not-found` for a cluster Cloudly does not know. */
  requireCluster(clusterIdArg: string): Promise<void>;
  /** Refuses `not-found` `node-not-found` for a node the cluster does not have. */
  requireNode(clusterIdArg: string, nodeIdArg: string): Promise<void>;
  /** One restore grant, signed with Cloudly's identity key. */
  signRestoreGrant(bindingArg: IRestoreGrantBinding): Promise<string>;
  /** False once this instance is stopping: a relay wait that ends then is an interruption. */
  isStarted(): boolean;
  /** Where the closures are stored (verification reads them back). */
  blobStore: IBlobStore;
}

const optionalOperation = (operationArg: IOperation | undefined): { operation?: IOperation } =>
  (operationArg ? { operation: operationArg } : {});

/** The routing every isolated-restore call names, and its answer must name back. */
const restoreRoutingOf = (docArg: IIsolatedRestoreDocument) =>
  ({ clusterId: docArg.clusterId, targetNodeName: docArg.targetNodeName, restoreId: docArg.id });

const restoreGrantBindingOf = (
  docArg: IIsolatedRestoreDocument,
  operationArg: TIsolatedRestoreGrantOperation,
  objectArg?: IBackupArchiveObject,
): IRestoreGrantBinding => ({
  operation: operationArg,
  ...restoreRoutingOf(docArg),
  mappingsSha256: computeIsolatedRestoreResourceMappingsSha256(docArg.mappings),
  manifestSha256: computeIsolatedRestoreArchiveManifestSha256(docArg.manifest),
  ...(objectArg ? { object: objectArg } : {}),
});

/** The isolated-restore steps shared by `createIsolatedRestore` and the drills (./drills.ts). */
export const isolatedRestoreSteps = (portsArg: IBackupPorts) => {
  const { store, transfers } = portsArg;
  /** Sends one manifest object to the node under its own write-object grant; its bytes are the progress. */
  const stageArchiveObject = async (
    docArg: IIsolatedRestoreDocument,
    objectArg: IBackupArchiveObject,
    blobKeyArg: string,
    expectedRevisionArg: number,
    runArg: IOperationRun,
  ): Promise<IIsolatedRestoreNodeState> => {
    // The stream and the call share one socket: the cluster's active one on this instance.
    const session = portsArg.relays.activeSession(docArg.clusterId);
    if (!session) {
      throw refuse('unavailable', [relayCallFailureReasons.notConnected]);
    }
    return transfers.stageBlob(session, docArg.id, blobKeyArg, runArg, async (archiveArg) => readIsolatedRestoreStateAnswer(
      await portsArg.askSession(session, 'stageIsolatedRestoreArchive', {
        restoreGrant: await portsArg.signRestoreGrant(restoreGrantBindingOf(docArg, 'write-object', objectArg)),
        ...restoreRoutingOf(docArg),
        expectedRevision: expectedRevisionArg,
        object: objectArg,
        archive: archiveArg,
      }),
      restoreRoutingOf(docArg),
    ));
  };

  const recordRestoreState = async (restoreIdArg: string, stateArg: IIsolatedRestoreNodeState): Promise<void> => {
    await store.mutate(isolatedRestoreKind, restoreIdArg, (currentArg) => decideRestoreStateRecord(currentArg, stateArg));
  };

  /** One step on the node (status, execute or cleanup) under its own grant; its answered state is recorded on the restore. */
  const step = async (docArg: IIsolatedRestoreDocument, operationArg: keyof typeof restoreStepMethods, expectedRevisionArg?: number): Promise<IIsolatedRestoreNodeState> => {
    const routing = restoreRoutingOf(docArg);
    const grant = { restoreGrant: await portsArg.signRestoreGrant(restoreGrantBindingOf(docArg, operationArg)), ...routing };
    const answer = operationArg === 'status'
      ? await portsArg.relays.ask(docArg.clusterId, restoreStepMethods.status, grant)
      : await portsArg.relays.ask(docArg.clusterId, restoreStepMethods[operationArg], { ...grant, expectedRevision: expectedRevisionArg ?? 0 });
    const state = readIsolatedRestoreStateAnswer(answer, routing);
    await recordRestoreState(docArg.id, state);
    return state;
  };

  /** Prepares the restore on its node under a `prepare` grant. */
  const prepare = async (docArg: IIsolatedRestoreDocument): Promise<IIsolatedRestoreNodeState> => {
    const routing = restoreRoutingOf(docArg);
    return readIsolatedRestoreStateAnswer(await portsArg.relays.ask(docArg.clusterId, 'coreflowPrepareIsolatedRestore', {
      restoreGrant: await portsArg.signRestoreGrant(restoreGrantBindingOf(docArg, 'prepare')),
      ...routing,
      mappings: docArg.mappings,
      manifest: docArg.manifest,
    }), routing);
  };

  return { stageArchiveObject, recordRestoreState, step, prepare };
};

/** A backup attempt's work (the relay call, then its outcome recorded), shared by the admin method and the schedules. */
const backupWork = (portsArg: IBackupPorts) => {
  const { store, transfers } = portsArg;
  /**
   * Records the outcome of a backup attempt on its document, racing only with a closure being
   * recorded; a backup that is gone by then is `not-found`, one another attempt took over is kept.
   */
  const settleBackup = async (
    backupIdArg: string,
    setArg: Parameters<typeof decideBackupSettlement>[1],
    operationIdArg: string,
  ): Promise<IServiceBackupDocument> =>
    (await store.mutate(serviceBackupKind, backupIdArg, (currentArg) => decideBackupSettlement(currentArg, setArg, operationIdArg))).doc!;

  /**
   * The work of a backup operation: the relay call (during which the relay streams the closure),
   * then the outcome recorded on the backup. A cancel stops the wait, aborts a closure upload in
   * flight and records the backup failed (`operation-cancelled`); the relay's later answer is discarded.
   */
  const runBackup = async (
    runArg: IOperationRun,
    clusterIdArg: string,
    relayRequestArg: ICloudlyOutboundMethods['backupClusterService']['request'],
  ): Promise<{ backup: IServiceBackupRecord }> => {
    const backupId = relayRequestArg.backupId;
    const release = transfers.followBackup(backupId, runArg);
    runArg.setPhase('relay');
    let answer: ICloudlyOutboundMethods['backupClusterService']['response'];
    try {
      answer = readBackupClusterServiceAnswer(await runArg.untilCancelled(portsArg.relays.ask(clusterIdArg, 'backupClusterService', relayRequestArg)));
    } catch (error) {
      await settleBackup(backupId, { state: 'failed', failureReason: backupFailureReasonOf(error, portsArg.isStarted()) }, runArg.operationId);
      throw error;
    } finally {
      release();
    }
    runArg.setPhase('recording');
    const settled = await settleBackup(backupId, {
      state: 'completed',
      snapshots: answer.snapshots,
      ...(answer.replication ? { replication: answer.replication } : {}),
    }, runArg.operationId);
    return { backup: toRecord(settled) };
  };

  return { settleBackup, runBackup };
};

/**
 * Orders one scheduled backup: an ordinary backup operation (requested by `schedule:<id>`, the
 * schedule and occurrence in its input) whose backup carries the schedule id. Its backup id and
 * operation id are derived from the occurrence, so a second order of it finds the backup stored
 * and starts nothing ('exists'), whatever became of the first one.
 */
export const orderScheduledBackup = async (portsArg: IBackupPorts, orderArg: IScheduledBackupOrder): Promise<'ordered' | 'exists'> => {
  const { store, operations } = portsArg;
  const service = await portsArg.requireService(orderArg.serviceId);
  const operationId = `op-${sha256Hex(`scheduled-backup\u0000${orderArg.backupId}`).slice(0, 32)}`;
  const orderSha256 = computeCanonicalJsonSha256Hex({
    clusterId: orderArg.clusterId,
    nodeId: orderArg.nodeId,
    serviceId: orderArg.serviceId,
    tags: {},
    replication: null,
    scheduleId: orderArg.scheduleId,
    occurrenceAt: orderArg.occurrenceAt,
  });
  const ordered = await store.mutate(serviceBackupKind, orderArg.backupId, (existingArg) => {
    if (existingArg) {
      return { kind: 'keep' };
    }
    const decision = decideBackupOrder(null, {
      backupId: orderArg.backupId,
      clusterId: orderArg.clusterId,
      nodeId: orderArg.nodeId,
      serviceId: orderArg.serviceId,
      orderSha256,
      now: Date.now(),
      attemptTimeoutMs: portsArg.relays.timeoutOf('backupClusterService'),
      operationId,
    });
    return decision.kind === 'create'
      ? { kind: 'create', doc: { ...decision.doc, scheduleId: orderArg.scheduleId, occurrenceAt: orderArg.occurrenceAt } }
      : decision;
  });
  if (ordered.outcome !== 'created') {
    return 'exists';
  }
  const { doc: operationDoc, created } = await operations.begin({
    operationId,
    kind: 'service-backup',
    method: 'createServiceBackup',
    clusterId: orderArg.clusterId,
    serviceId: orderArg.serviceId,
    nodeId: orderArg.nodeId,
    backupId: orderArg.backupId,
    requestedBy: `schedule:${orderArg.scheduleId}`,
    requestSha256: orderSha256,
    input: { scheduleId: orderArg.scheduleId, occurrenceAt: orderArg.occurrenceAt },
  });
  if (!created) {
    return 'exists';
  }
  const { runBackup } = backupWork(portsArg);
  operations.launch(operationDoc, async (runArg) => {
    const result = await runBackup(runArg, orderArg.clusterId, { nodeId: orderArg.nodeId, backupId: orderArg.backupId, service });
    if (!orderArg.verify) {
      return result;
    }
    // The schedule verifies each new backup: what Cloudly stored for it, read back before the operation ends.
    runArg.setPhase('recording');
    const backup = await store.get(serviceBackupKind, orderArg.backupId);
    if (!backup || verificationRefusal(backup)) {
      return result;
    }
    const verifiable = backup as IServiceBackupDocument & { closure: NonNullable<IServiceBackupDocument['closure']> };
    const verification = await verifyStoredClosure(portsArg.blobStore, verifiable, Date.now);
    const recorded = await store.mutate(serviceBackupKind, orderArg.backupId, (currentArg) =>
      decideVerificationRecord(currentArg, { closureSha256: verifiable.closure.descriptor.sha256, verification }));
    return { backup: toRecord(recorded.doc!) };
  });
  return 'ordered';
};

export const backupOperations = (portsArg: IBackupPorts): IDeclaredOperation[] => {
  const { store, operations, transfers } = portsArg;

  /** The public operation, or undefined (a backup ordered before operations existed has none). */
  const operationOf = async (operationIdArg: string | undefined): Promise<IOperation | undefined> =>
    (operationIdArg ? (await operations.getPublic(operationIdArg)) ?? undefined : undefined);

  /**
   * The same mutationId again answers the operation it started, as that operation stands now,
   * with its backup; null when the mutationId is absent or new. Another request under a used
   * mutationId is refused.
   */
  const replayBackupOperation = async (
    methodArg: 'createServiceBackup' | 'restoreServiceBackup',
    mutationIdArg: string | undefined,
    requestSha256Arg: string,
  ): Promise<{ backup: IServiceBackupRecord; operation: IOperation } | null> => {
    if (mutationIdArg === undefined) {
      return null;
    }
    const earlier = await operations.findByMutation(methodArg, mutationIdArg);
    if (!earlier) {
      return null;
    }
    if (earlier.requestSha256 !== requestSha256Arg) {
      throw mutationIdReusedRefusal();
    }
    const backup = await store.get(serviceBackupKind, earlier.backupId);
    if (!backup) {
      throw refuse('not-found', [backupRefusalReasons.backupNotFound]);
    }
    return { backup: toRecord(backup), operation: (await operationOf(earlier.id))! };
  };

  const { settleBackup, runBackup } = backupWork(portsArg);

  const { stageArchiveObject, recordRestoreState } = isolatedRestoreSteps(portsArg);

  return [
    adminOrchestration({
      method: 'createServiceBackup',
      why: 'the backup and its operation documents, then the relay\'s backup call as the operation\'s work, settled on both',
      access: 'write',
      input: {
        required: { clusterId: isIdString, nodeId: isIdString, serviceId: isIdString },
        optional: { backupId: isIdString, tags: isTags, replication: isReplication, mutationId: isIdString },
      },
      // Intent: the backup (ordered with a pure decision) and its operation; the relay call is the
      // operation's work, and settles the backup when it ends.
      async run(request, context) {
        const requestSha256 = sha256Hex(JSON.stringify(request));
        const replayed = await replayBackupOperation('createServiceBackup', request.mutationId, requestSha256);
        if (replayed) {
          return replayed;
        }
        const service = await portsArg.requireService(request.serviceId);
        if (service.clusterId !== request.clusterId) {
          throw refuseNamed('invalid-request', backupRefusalReasons.clusterMismatch, `the service belongs to cluster ${service.clusterId}`, 'request.clusterId');
        }
        await portsArg.requireNode(request.clusterId, request.nodeId);
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
        const current = await store.get(serviceBackupKind, backupId);
        if (current?.state === 'running' && current.orderSha256 === orderSha256 && current.operationId) {
          const operation = await operationOf(current.operationId);
          if (operation?.state === 'running') {
            return { backup: toRecord(current), operation };
          }
        }
        const ordered = await store.mutate(serviceBackupKind, backupId, (existingArg) => decideBackupOrder(existingArg, {
          backupId,
          clusterId: request.clusterId,
          nodeId: request.nodeId,
          serviceId: request.serviceId,
          orderSha256,
          now: Date.now(),
          attemptTimeoutMs: portsArg.relays.timeoutOf('backupClusterService'),
          operationId,
        }));
        if (ordered.outcome === 'kept') {
          // The same order of a completed backup: answered as it is, with the operation that made it.
          return { backup: toRecord(ordered.doc!), ...optionalOperation(await operationOf(ordered.doc!.operationId)) };
        }
        const { doc: operationDoc } = await operations.begin({
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
        portsArg.logger.info({ backupId, operationId, clusterId: request.clusterId, nodeId: request.nodeId, serviceId: request.serviceId, actor: context.identity.userId }, 'service backup ordered');
        operations.launch(operationDoc, (runArg) => runBackup(runArg, request.clusterId, {
          nodeId: request.nodeId,
          backupId,
          service,
          ...(request.tags ? { tags: request.tags } : {}),
          ...(request.replication ? { replication: request.replication } : {}),
        }));
        return { backup: toRecord(ordered.doc!), operation: toPublicOperation(operationDoc, null) };
      },
    }),

    adminOrchestration({
      method: 'restoreServiceBackup',
      why: 'an operation document whose work is the relay\'s restore call, during which the relay fetches the stored closure',
      access: 'write',
      input: {
        required: { backupId: isIdString },
        optional: { nodeId: isIdString, clear: isBoolean, resourceTypes: isArrayOf(isResourceType, resourceTypes.length), mutationId: isIdString },
      },
      // Intent: the operation; its work is the relay call, during which the relay fetches the closure.
      async run(request, context) {
        const requestSha256 = sha256Hex(JSON.stringify(request));
        const replayed = await replayBackupOperation('restoreServiceBackup', request.mutationId, requestSha256);
        if (replayed) {
          return replayed;
        }
        const backup = await store.get(serviceBackupKind, request.backupId);
        const refusal = backupRestoreRefusal(backup, { needsClosure: false });
        if (refusal) {
          throw refusal;
        }
        const restorable = backup!;
        const nodeId = request.nodeId ?? restorable.nodeId;
        const service = await portsArg.requireService(restorable.serviceId);
        await portsArg.requireNode(restorable.clusterId, nodeId);
        const snapshots = request.resourceTypes
          ? restorable.snapshots.filter((snapshot) => request.resourceTypes!.includes(snapshot.type))
          : restorable.snapshots;
        const { doc: operationDoc, created } = await operations.begin({
          operationId: request.mutationId !== undefined ? operationIdOf('restoreServiceBackup', request.mutationId) : `op-${randomUUID()}`,
          kind: 'service-restore',
          method: 'restoreServiceBackup',
          clusterId: restorable.clusterId,
          serviceId: restorable.serviceId,
          nodeId,
          backupId: restorable.id,
          requestedBy: context.identity.userId,
          ...(request.mutationId !== undefined ? { mutationId: request.mutationId } : {}),
          requestSha256,
        });
        if (!created) {
          return { backup: toRecord(restorable), operation: (await operationOf(operationDoc.id))! };
        }
        haltIfDryRun('relay call restoreClusterService');
        const relayRequest: ICloudlyOutboundMethods['restoreClusterService']['request'] = {
          nodeId,
          backupId: restorable.id,
          service,
          snapshots,
          ...(request.clear !== undefined ? { clear: request.clear } : {}),
          ...(request.resourceTypes ? { resourceTypes: request.resourceTypes } : {}),
        };
        operations.launch(operationDoc, async (runArg) => {
          const release = transfers.followRestore(restorable.id, nodeId, runArg);
          runArg.setPhase('relay');
          try {
            const answer = readRestoreClusterServiceAnswer(
              await runArg.untilCancelled(portsArg.relays.ask(restorable.clusterId, 'restoreClusterService', relayRequest)));
            return { backup: toRecord(restorable), restored: answer.restored };
          } finally {
            release();
          }
        });
        return { backup: toRecord(restorable), operation: toPublicOperation(operationDoc, null) };
      },
    }),

    adminQuery({
      method: 'getServiceBackups',
      access: 'read',
      input: { required: {}, optional: { serviceId: isIdString, clusterId: isIdString, ...orderedPageShape('getServiceBackups', oldestFirst('createdAt')) } },
      async run(request) {
        const filter: Record<string, string> = {};
        if (request.serviceId !== undefined) filter.serviceId = request.serviceId;
        if (request.clusterId !== undefined) filter.clusterId = request.clusterId;
        const page = await findPage(store, serviceBackupKind, filter, 'getServiceBackups', request, oldestFirst('createdAt'));
        // Each backup with its newest drill receipt (the drills controller writes them apart from the backup).
        const newestDrill = new Map<string, IBackupDrillDocument>();
        for (const drill of await store.findIn(backupDrillKind, 'backupId', page.items.map((backupArg) => backupArg.id))) {
          const seen = newestDrill.get(drill.backupId);
          if (!seen || seen.startedAt < drill.startedAt) {
            newestDrill.set(drill.backupId, drill);
          }
        }
        return {
          backups: page.items.map((backupArg) => {
            const drill = newestDrill.get(backupArg.id);
            return drill ? { ...toRecord(backupArg), drill: toDrillReceipt(drill) } : toRecord(backupArg);
          }),
          ...nextCursorMember(page),
        };
      },
    }),

    adminMutation({
      method: 'verifyServiceBackup',
      access: 'write',
      input: { required: { backupId: isIdString } },
      // The fact is the verification itself: the stored closure read back and hashed, before the one write that records it.
      async facts(request) {
        const backup = await store.get(serviceBackupKind, request.backupId);
        const refusal = verificationRefusal(backup);
        if (refusal) {
          throw refusal;
        }
        const verifiable = backup as IServiceBackupDocument & { closure: NonNullable<IServiceBackupDocument['closure']> };
        try {
          return { closureSha256: verifiable.closure.descriptor.sha256, verification: await verifyStoredClosure(portsArg.blobStore, verifiable, Date.now) };
        } catch (error) {
          throw blobRefusalOf(error);
        }
      },
      target: (request) => ({ kind: serviceBackupKind, id: request.backupId }),
      decide: (current, { facts }) => decideVerificationRecord(current, facts),
      answer: ({ doc }) => ({ backup: toRecord(doc!) }),
      after({ doc }, _step, context) {
        portsArg.logger.info({ backupId: doc!.id, outcome: doc!.verification?.outcome, actor: context.identity.userId }, 'service backup verified');
      },
    }),

    adminOrchestration({
      method: 'adminPruneClusterNodeArchive',
      why: 'a relay call: the node prunes its archive (or previews it, the contract\'s own dry run); Cloudly stores nothing',
      access: 'write',
      input: {
        required: { clusterId: isIdString, nodeId: isIdString, retention: sentenceCheck(validateArchiveRetentionPolicy) },
        optional: { dryRun: isBoolean },
      },
      // The contract's own `dryRun` is the node's preview: the relay is asked either way.
      contractOwnsDryRun: true,
      async run(request) {
        await portsArg.requireCluster(request.clusterId);
        await portsArg.requireNode(request.clusterId, request.nodeId);
        const answer = readPruneClusterNodeArchiveAnswer(await portsArg.relays.ask(request.clusterId, 'pruneClusterNodeArchive', {
          nodeId: request.nodeId,
          retention: request.retention,
          ...(request.dryRun !== undefined ? { dryRun: request.dryRun } : {}),
        }));
        // `found: false` is what the node has, not a failure: it is answered as it is.
        return answer.found && answer.result !== undefined ? { found: true, result: answer.result } : { found: answer.found };
      },
    }),

    adminOrchestration({
      method: 'createIsolatedRestore',
      why: 'the isolated restore and its operation documents, then signed grants and the relay\'s staging and restore calls',
      access: 'write',
      input: {
        required: { backupId: isIdString, targetNodeName: isIdString, mappings: sentenceCheck(validateIsolatedRestoreResourceMappings) },
        optional: { restoreId: isIdString, mutationId: isIdString },
      },
      // Intent: the restore record and the operation that prepares it and stages every manifest
      // object (the closure bytes: the long part) on the node; answered at once.
      async run(request, context) {
        const requestSha256 = sha256Hex(JSON.stringify(request));
        if (request.mutationId !== undefined) {
          const earlier = await operations.findByMutation('createIsolatedRestore', request.mutationId);
          if (earlier) {
            if (earlier.requestSha256 !== requestSha256) {
              throw mutationIdReusedRefusal();
            }
            return { restoreId: String(earlier.input.restoreId), operation: (await operationOf(earlier.id))! };
          }
        }
        const backup = await store.get(serviceBackupKind, request.backupId);
        const refusal = backupRestoreRefusal(backup, { needsClosure: true });
        if (refusal) {
          throw refusal;
        }
        const source = backup!;
        const closure = source.closure!;
        await portsArg.requireNode(source.clusterId, request.targetNodeName);
        const restoreId = request.restoreId
          ?? (request.mutationId !== undefined ? `restore-${sha256Hex(`createIsolatedRestore\u0000${request.mutationId}`).slice(0, 32)}` : `restore-${randomUUID()}`);
        const wanted: Omit<IIsolatedRestoreDocument, 'generation'> = {
          id: restoreId,
          backupId: source.id,
          clusterId: source.clusterId,
          sourceServiceId: source.serviceId,
          targetNodeName: request.targetNodeName,
          createdAt: Date.now(),
          mappings: normalizeIsolatedRestoreResourceMappings(request.mappings),
          manifest: manifestOf(source),
        };
        const doc = (await store.mutate(isolatedRestoreKind, restoreId, (currentArg) => decideIsolatedRestoreCreation(currentArg, wanted))).doc!;
        const { doc: operationDoc } = await operations.begin({
          operationId: request.mutationId !== undefined ? operationIdOf('createIsolatedRestore', request.mutationId) : `op-${randomUUID()}`,
          kind: 'isolated-restore',
          method: 'createIsolatedRestore',
          clusterId: source.clusterId,
          serviceId: source.serviceId,
          nodeId: request.targetNodeName,
          backupId: source.id,
          requestedBy: context.identity.userId,
          ...(request.mutationId !== undefined ? { mutationId: request.mutationId } : {}),
          requestSha256,
          input: { restoreId },
        });
        haltIfDryRun('relay call coreflowPrepareIsolatedRestore');
        operations.launch(operationDoc, async (runArg) => {
          const routing = restoreRoutingOf(doc);
          runArg.setPhase('relay');
          transfers.followStaging(restoreId, runArg);
          let state = readIsolatedRestoreStateAnswer(await runArg.untilCancelled(portsArg.relays.ask(doc.clusterId, 'coreflowPrepareIsolatedRestore', {
            restoreGrant: await portsArg.signRestoreGrant(restoreGrantBindingOf(doc, 'prepare')),
            ...routing,
            mappings: doc.mappings,
            manifest: doc.manifest,
          })), routing);
          // One object per call, each under its own write-object grant; its bytes are the progress.
          for (const object of doc.manifest) {
            runArg.setPhase('transfer', object.size);
            runArg.setBytes(0, object.size);
            state = await runArg.untilCancelled(stageArchiveObject(doc, object, closure.blobKey, state.revision, runArg));
          }
          runArg.setPhase('recording');
          await recordRestoreState(restoreId, state);
          return { backup: toRecord(source), restoreId, state };
        });
        return { restoreId, operation: toPublicOperation(operationDoc, null) };
      },
    }),

    adminOrchestration({
      method: 'stepIsolatedRestore',
      why: 'a relay call under a signed restore grant, then the node\'s answered state recorded on the restore',
      access: 'write',
      input: {
        required: { restoreId: isIdString, operation: isStepOperation },
        optional: { expectedRevision: isPositiveInteger },
      },
      check: (request) => (request.operation !== 'status' && request.expectedRevision === undefined
        ? [fieldProblem('request.expectedRevision', fieldProblemReasons.required, 'is required for execute and cleanup')]
        : []),
      // Call: the step on the node under its own grant; settle: the node's answered state recorded.
      async run(request) {
        const doc = await store.get(isolatedRestoreKind, request.restoreId);
        if (!doc) {
          throw refuse('not-found', [backupRefusalReasons.restoreNotFound]);
        }
        const routing = restoreRoutingOf(doc);
        const grant = { restoreGrant: await portsArg.signRestoreGrant(restoreGrantBindingOf(doc, request.operation)), ...routing };
        const answer = request.operation === 'status'
          ? await portsArg.relays.ask(doc.clusterId, restoreStepMethods.status, grant)
          : await portsArg.relays.ask(doc.clusterId, restoreStepMethods[request.operation], { ...grant, expectedRevision: request.expectedRevision ?? 0 });
        const state = readIsolatedRestoreStateAnswer(answer, routing);
        await recordRestoreState(doc.id, state);
        return { state };
      },
    }),

    relayOrchestration({
      method: 'backupServiceDatabaseClosure',
      why: 'closure bytes stream from the relay into the blob store, then the closure is recorded on the backup',
      access: 'relay',
      // Everything is checked before the receiver attaches, so no byte moves for a bad request.
      input: {
        required: {
          backupId: isIdString,
          serviceId: isIdString,
          nodeId: isIdString,
          descriptor: sentenceCheck(validateCorestoreDatabaseClosureDescriptor),
          closure: sentenceCheck((valueArg, pathArg) => validateStreamReference(valueArg, 'send', pathArg)),
        },
      },
      // Accepted now; the bytes are stored, then recorded on the backup, then receipted (./transfers.ts).
      async run(request, context) {
        const backup = await store.get(serviceBackupKind, request.backupId);
        const refusal = closureUploadRefusal(backup, { clusterId: context.clusterId, serviceId: request.serviceId, nodeId: request.nodeId });
        if (refusal) {
          throw refusal;
        }
        return transfers.acceptClosure(context.session, backup!, request);
      },
    }),

    relayQuery({
      method: 'restoreServiceDatabaseClosure',
      access: 'relay',
      input: { required: { backupId: isIdString, serviceId: isIdString, nodeId: isIdString } },
      async run(request, context) {
        const backup = await store.get(serviceBackupKind, request.backupId);
        const refusal = closureDownloadRefusal(backup, { clusterId: context.clusterId, serviceId: request.serviceId });
        if (refusal) {
          throw refusal;
        }
        await portsArg.requireNode(context.clusterId, request.nodeId);
        return transfers.offerClosure(context.session, backup!, request.nodeId);
      },
    }),
  ];
};

/**
 * Why a backup attempt failed, as recorded on the backup: a cancel is `operation-cancelled`, a
 * wait ended by this instance stopping is `interrupted`, anything else the refusal's first reason.
 */
const backupFailureReasonOf = (errorArg: unknown, startedArg: boolean): string => {
  if (errorArg instanceof OperationCancelledError) {
    return errorArg.why === 'cancelled' ? backupRefusalReasons.backupCancelled : operationReasons.interrupted;
  }
  if (!startedArg) {
    return operationReasons.interrupted;
  }
  const reasons = (errorArg as { errorData?: { reasons?: unknown } }).errorData?.reasons;
  return Array.isArray(reasons) && typeof reasons[0] === 'string' ? reasons[0] : relayCallFailureReasons.failed;
};
