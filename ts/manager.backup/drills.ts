import { randomUUID } from 'node:crypto';
import { refuseNamed } from '../core/errors.js';
import { haltIfDryRun } from '../core/operationcontext.js';
import { adminOrchestration, type IDeclaredOperation } from '../core/operations.js';
import { relayCallFailureReasons } from '../core/relaycalls.js';
import { isIdString } from '../core/validation.js';
import { sha256Hex } from '../interfaces/private/canonicaljson.js';
import { isCanonicalId } from '../interfaces/private/dataproperties.js';
import type { TIsolatedRestoreResourceMapping } from '../interfaces/data/backup.js';
import {
  normalizeIsolatedRestoreResourceMappings,
  validateIsolatedRestoreResourceMappings,
  type IIsolatedRestoreNodeState,
} from '../interfaces/data/isolatedrestore.js';
import type { IBackupDrillReceipt } from '../interfaces/requests/backup.js';
import type { IOperation } from '../interfaces/requests/operation.js';
import type { IOperationRun } from '../manager.operation/operation.manager.js';
import { toPublicOperation, type IOperationDocument } from '../manager.operation/documents.js';
import { operationReasons } from '../manager.operation/decide.js';
import { backupRefusalReasons, backupRestoreRefusal, decideIsolatedRestoreCreation } from './decide.js';
import {
  isolatedRestoreKind,
  manifestOf,
  serviceBackupKind,
  toRecord,
  type IBackupDrillDocument,
  type IIsolatedRestoreDocument,
  type IServiceBackupDocument,
} from './documents.js';
import { isolatedRestoreSteps, type IBackupPorts } from './operations.js';

export { backupDrillKind, toDrillReceipt, type IBackupDrillDocument } from './documents.js';

/**
 * Restore drills: a completed backup restored through the isolated-restore flow onto a drill
 * node (prepare, stage every manifest object, the node's status awaited, execute, its status
 * awaited, cleanup), as an operation of kind `backup-drill`. Ordered by `drillServiceBackup` or by
 * the drills controller for a schedule's `drill` (./drills.controller.ts). The receipt
 * (`CloudlyBackupDrill`) is written only by that controller, from the operation as it stands; it
 * also cleans up what a drill that failed or was interrupted left on the node.
 */

export const drillReasons = {
  restoreFailed: 'isolated-restore-failed',
  stagedObjectsDiffer: 'drill-staged-objects-differ',
  statusDeadline: 'drill-status-deadline-passed',
  mappingsInvalid: 'drill-mappings-invalid',
} as const;

/** The operation of a drill: its id is the drill's, so an operation change names its drill without a read. */
export const drillOperationIdOf = (drillIdArg: string): string => `op-${drillIdArg}`;
export const drillIdOfOperation = (operationIdArg: string): string | null =>
  (operationIdArg.startsWith('op-drill-') ? operationIdArg.slice('op-'.length) : null);
export const drillRestoreIdOf = (drillIdArg: string): string => `restore-${drillIdArg}`;
/** A schedule's drill of one backup: derived from the backup, so it is ordered once whoever looks. */
export const scheduledDrillIdOf = (backupIdArg: string): string => `drill-s-${sha256Hex(`scheduled-drill\u0000${backupIdArg}`).slice(0, 32)}`;

/** How long a drill waits for the node to report a phase past staging (or past execute). */
export const drillStatusDeadlineMs = 30 * 60_000;
const statusPollMs = 250;

/** What starts a drill. */
export interface IBackupDrillOrder {
  drillId: string;
  backupId: string;
  nodeId: string;
  scheduleId?: string;
  requestedBy: string;
}

const prefixedId = (prefixArg: string, idArg: string, maxArg: number): string => `${prefixArg}${idArg}`.slice(0, maxArg);

/**
 * Where the backup's resources land on the drill node: each database and volume snapshot into a
 * scratch resource named `drill-<resource>` (databases `drill_<name>`, volumes under `/drill`). A
 * backup without snapshots (the relay named none) restores its closure as database `closure`.
 */
export const drillMappingsOf = (backupArg: IServiceBackupDocument): TIsolatedRestoreResourceMapping[] => {
  const mappings: TIsolatedRestoreResourceMapping[] = [];
  const seen = new Set<string>();
  for (const snapshot of backupArg.snapshots) {
    if (seen.has(snapshot.resourceName) || snapshot.type === 'bucket' || !isCanonicalId(snapshot.resourceName)) {
      continue;
    }
    seen.add(snapshot.resourceName);
    const resourceName = prefixedId('drill-', snapshot.resourceName, 128);
    mappings.push(snapshot.type === 'database'
      ? { type: 'database', source: { resourceName: snapshot.resourceName, databaseName: snapshot.databaseName }, target: { resourceName, databaseName: prefixedId('drill_', snapshot.databaseName, 63) } }
      : { type: 'volume', source: { resourceName: snapshot.resourceName, mountPath: snapshot.mountPath }, target: { resourceName, mountPath: `/drill${snapshot.mountPath}` } });
  }
  return mappings.length > 0
    ? mappings.slice(0, 64)
    : [{ type: 'database', source: { resourceName: 'closure', databaseName: 'closure' }, target: { resourceName: 'drill-closure', databaseName: 'drill_closure' } }];
};

/** The receipt an operation implies: its outcome, reason, duration and bytes (the cleanup is the controller's to add). */
export const receiptOfOperation = (operationArg: IOperationDocument): Omit<IBackupDrillDocument, 'id' | 'generation' | 'cleanedUp' | 'cleanupReason'> => {
  const input = operationArg.input as { drillId?: string; restoreId?: string; scheduleId?: string };
  const outcome: IBackupDrillReceipt['outcome'] = operationArg.state === 'running' ? 'running'
    : operationArg.state === 'completed' ? 'ok'
      : operationArg.reason === operationReasons.interrupted ? 'interrupted' : 'failed';
  const detail = operationArg.error?.causes?.[0]?.message;
  return {
    backupId: operationArg.backupId,
    clusterId: operationArg.clusterId,
    serviceId: operationArg.serviceId,
    nodeId: operationArg.nodeId,
    outcome,
    ...(outcome === 'failed' || outcome === 'interrupted' ? { reason: operationArg.reason ?? relayCallFailureReasons.failed } : {}),
    ...(detail !== undefined && outcome !== 'ok' ? { detail: detail.slice(0, 500) } : {}),
    startedAt: operationArg.startedAt,
    ...(operationArg.endedAt !== undefined ? { finishedAt: operationArg.endedAt, durationMs: operationArg.endedAt - operationArg.startedAt } : {}),
    bytes: operationArg.result?.drillBytes ?? 0,
    restoreId: input.restoreId ?? drillRestoreIdOf(input.drillId ?? operationArg.id),
    operationId: operationArg.id,
    ...(input.scheduleId !== undefined ? { scheduleId: input.scheduleId } : {}),
  };
};

/**
 * Whether a schedule's drill is owed for the newest of a service's completed backups (ids newest
 * first): once none of them was drilled yet, else once `everyNth` backups were made since the last
 * one drilled. Only the newest is ever drilled, so a backup found late is not.
 */
export const isDrillOwed = (newestFirstIdsArg: readonly string[], drilledArg: ReadonlySet<string>, backupIdArg: string, everyNthArg: number): boolean => {
  if (newestFirstIdsArg[0] !== backupIdArg || drilledArg.has(backupIdArg)) {
    return false;
  }
  const sinceLast = newestFirstIdsArg.findIndex((idArg) => drilledArg.has(idArg));
  return sinceLast === -1 || sinceLast >= everyNthArg;
};

/** The drills' work and their start, over the backup domain's ports. */
export const backupDrills = (portsArg: IBackupPorts) => {
  const { store, operations, transfers } = portsArg;
  const steps = isolatedRestoreSteps(portsArg);

  /** Asks the node's status until it reports a phase the drill may go on from (or failed), within the deadline. */
  const awaitPhase = async (docArg: IIsolatedRestoreDocument, waitingPhasesArg: ReadonlySet<string>, runArg: IOperationRun): Promise<IIsolatedRestoreNodeState> => {
    const deadline = Date.now() + drillStatusDeadlineMs;
    for (;;) {
      const state = await runArg.untilCancelled(steps.step(docArg, 'status'));
      if (!waitingPhasesArg.has(state.phase)) {
        return state;
      }
      if (Date.now() > deadline) {
        throw refuseNamed('unavailable', drillReasons.statusDeadline, `the node still reports ${state.phase} after ${drillStatusDeadlineMs / 60_000} minutes`);
      }
      await runArg.untilCancelled(new Promise((resolve) => setTimeout(resolve, statusPollMs)));
    }
  };

  const requireNotFailed = (stateArg: IIsolatedRestoreNodeState): IIsolatedRestoreNodeState => {
    if (stateArg.phase === 'failed') {
      throw refuseNamed('conflict', drillReasons.restoreFailed, stateArg.reason ?? 'the node reports the restore failed');
    }
    return stateArg;
  };

  /** The drill: every step of the isolated restore, the staged objects proved against the manifest, then cleaned up. */
  const runDrill = async (runArg: IOperationRun, docArg: IIsolatedRestoreDocument, source: IServiceBackupDocument) => {
    const closure = source.closure!;
    runArg.setPhase('relay');
    transfers.followStaging(docArg.id, runArg);
    try {
      let state = requireNotFailed(await runArg.untilCancelled(steps.prepare(docArg)));
      await steps.recordRestoreState(docArg.id, state);
      for (const object of docArg.manifest) {
        runArg.setPhase('transfer', object.size);
        runArg.setBytes(0, object.size);
        state = requireNotFailed(await runArg.untilCancelled(steps.stageArchiveObject(docArg, object, closure.blobKey, state.revision, runArg)));
      }
      await steps.recordRestoreState(docArg.id, state);
      runArg.setPhase('relay');
      // The node's own word that every object is staged: each one's path, size and sha256 as the manifest names them.
      state = requireNotFailed(await awaitPhase(docArg, new Set(['prepared', 'staging']), runArg));
      const staged = new Map(state.stagedObjects.map((objectArg) => [objectArg.path, objectArg]));
      const differs = docArg.manifest.filter((objectArg) => staged.get(objectArg.path)?.sha256 !== objectArg.sha256 || staged.get(objectArg.path)?.size !== objectArg.size);
      if (differs.length > 0) {
        throw refuseNamed('conflict', drillReasons.stagedObjectsDiffer, `the node does not hold ${differs.map((objectArg) => objectArg.path).join(', ')} as the manifest names it`);
      }
      const drillBytes = docArg.manifest.reduce((sumArg, objectArg) => sumArg + objectArg.size, 0);
      state = requireNotFailed(await runArg.untilCancelled(steps.step(docArg, 'execute', state.revision)));
      state = requireNotFailed(await awaitPhase(docArg, new Set(['ready']), runArg));
      runArg.setPhase('recording');
      state = await runArg.untilCancelled(steps.step(docArg, 'cleanup', state.revision));
      return { backup: toRecord(source), restoreId: docArg.id, state, drillBytes };
    } catch (error) {
      // What the node holds goes now if the relay still answers; otherwise the drills controller cleans up later.
      await cleanupRestore(docArg.id).catch(() => undefined);
      throw error;
    }
  };

  /**
   * Removes a drill's scratch restore from its node: its status first (for the revision, and
   * because a node that already cleaned up needs nothing more), then the cleanup. Throws what the
   * relay answered when it could not be done.
   */
  const cleanupRestore = async (restoreIdArg: string): Promise<IIsolatedRestoreNodeState | null> => {
    const doc = await store.get(isolatedRestoreKind, restoreIdArg);
    if (!doc) {
      return null;
    }
    let status: IIsolatedRestoreNodeState;
    try {
      status = await steps.step(doc, 'status');
    } catch (error) {
      // A node that never answered for this restore and refuses its status holds nothing of it.
      if (doc.lastState === undefined && (error as { errorData?: { reasons?: unknown } }).errorData?.reasons instanceof Array
        && ((error as { errorData: { reasons: unknown[] } }).errorData.reasons[0] === relayCallFailureReasons.refused)) {
        return null;
      }
      throw error;
    }
    if (status.phase === 'cleaned-up') {
      return status;
    }
    return steps.step(doc, 'cleanup', status.revision);
  };

  /**
   * Starts one drill: the restore record and the operation, then the work. A drill already started
   * under the id is answered as it is ('exists'). Refuses a backup that is not completed with its
   * closure stored, and a node its cluster does not have.
   */
  const startDrill = async (orderArg: IBackupDrillOrder): Promise<{ operation: IOperation; started: boolean }> => {
    const operationId = drillOperationIdOf(orderArg.drillId);
    const earlier = await operations.getPublic(operationId);
    if (earlier) {
      if (earlier.backupId !== orderArg.backupId || earlier.nodeId !== orderArg.nodeId) {
        throw refuseNamed('conflict', backupRefusalReasons.drillIdInUse, `drill ${orderArg.drillId} drills another backup or node`, 'request.drillId');
      }
      return { operation: earlier, started: false };
    }
    const backup = await store.get(serviceBackupKind, orderArg.backupId);
    const refusal = backupRestoreRefusal(backup, { needsClosure: true });
    if (refusal) {
      throw refusal;
    }
    const source = backup!;
    await portsArg.requireNode(source.clusterId, orderArg.nodeId);
    const mappings = drillMappingsOf(source);
    const problems = validateIsolatedRestoreResourceMappings(mappings);
    if (problems.length > 0) {
      throw refuseNamed('conflict', drillReasons.mappingsInvalid, problems.join('; ').slice(0, 500));
    }
    const restoreId = drillRestoreIdOf(orderArg.drillId);
    const wanted: Omit<IIsolatedRestoreDocument, 'generation'> = {
      id: restoreId,
      backupId: source.id,
      clusterId: source.clusterId,
      sourceServiceId: source.serviceId,
      targetNodeName: orderArg.nodeId,
      createdAt: Date.now(),
      mappings: normalizeIsolatedRestoreResourceMappings(mappings),
      manifest: manifestOf(source),
    };
    const { doc: operationDoc, created } = await operations.begin({
      operationId,
      kind: 'backup-drill',
      method: 'drillServiceBackup',
      clusterId: source.clusterId,
      serviceId: source.serviceId,
      nodeId: orderArg.nodeId,
      backupId: source.id,
      requestedBy: orderArg.requestedBy,
      requestSha256: sha256Hex(JSON.stringify({ backupId: orderArg.backupId, nodeId: orderArg.nodeId, drillId: orderArg.drillId })),
      input: { drillId: orderArg.drillId, restoreId, ...(orderArg.scheduleId !== undefined ? { scheduleId: orderArg.scheduleId } : {}) },
    });
    if (!created) {
      return { operation: toPublicOperation(operationDoc, null), started: false };
    }
    haltIfDryRun('relay call coreflowPrepareIsolatedRestore');
    const doc = (await store.mutate(isolatedRestoreKind, restoreId, (currentArg) => (currentArg ? { kind: 'keep' } : decideIsolatedRestoreCreation(null, wanted)))).doc!;
    portsArg.logger.info({ drillId: orderArg.drillId, backupId: source.id, nodeId: orderArg.nodeId, requestedBy: orderArg.requestedBy }, 'backup drill started');
    operations.launch(operationDoc, (runArg) => runDrill(runArg, doc, source));
    return { operation: toPublicOperation(operationDoc, null), started: true };
  };

  const declared: IDeclaredOperation[] = [
    adminOrchestration({
      method: 'drillServiceBackup',
      why: 'the drill\'s operation and isolated-restore documents, then the relay\'s isolated-restore calls as the operation\'s work',
      access: 'write',
      input: { required: { backupId: isIdString, nodeId: isIdString }, optional: { drillId: isIdString } },
      // Intent: the drill's operation; its work is the isolated restore onto the drill node, answered at once.
      async run(request, context) {
        const drillId = request.drillId ?? `drill-${randomUUID()}`;
        if (!drillId.startsWith('drill-')) {
          throw refuseNamed('invalid-request', backupRefusalReasons.drillIdInvalid, 'must start with drill-', 'request.drillId');
        }
        const { operation } = await startDrill({ drillId, backupId: request.backupId, nodeId: request.nodeId, requestedBy: context.identity.userId });
        return { drillId, operation };
      },
    }),
  ];

  return { startDrill, cleanupRestore, declared };
};

/** A drill's cleanup could not be asked (no relay, no answer): tried again later; anything else the node said is final. */
export const isCleanupRetryable = (errorArg: unknown): boolean => {
  const reasons = (errorArg as { errorData?: { reasons?: unknown } }).errorData?.reasons;
  const first = Array.isArray(reasons) ? reasons[0] : undefined;
  return first === relayCallFailureReasons.notConnected || first === relayCallFailureReasons.timeout
    || first === relayCallFailureReasons.disconnected || first === relayCallFailureReasons.failed || first === undefined;
};
