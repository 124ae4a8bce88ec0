import { randomUUID } from 'node:crypto';
import type { Cloudly } from '../classes.cloudly.js';
import { isRefusal, refuse, type IRefusalCause } from '../core/errors.js';
import { WorkQueue } from '../core/workqueue.js';
import { fieldProblem, fieldProblemReasons, isIdString } from '../core/validation.js';
import { adminMutation, adminQuery, registerOperations } from '../core/operations.js';
import { cloudlyActor, runInOperation } from '../core/operationcontext.js';
import { findPage, newestFirst, nextCursorMember, orderedPageShape } from '../core/pagination.js';
import { sha256Hex } from '../interfaces/private/canonicaljson.js';
import {
  operationStates,
  type IOperation,
  type IOperationError,
  type IOperationProgress,
} from '../interfaces/requests/operation.js';
import {
  initialProgress,
  operationKind,
  operationProgressKind,
  toPublicOperation,
  type IOperationDocument,
  type IOperationProgressDocument,
  type IOperationRemoteTransfer,
} from './documents.js';
import {
  decideOperationCancel,
  decideOperationEnd,
  decideOperationStart,
  decideProgress,
  decideRemoteTransfer,
  finishedOperationStates,
  isOperationAbandoned,
  isOperationPastRetention,
  operationReasons,
} from './decide.js';
import { rolloutProgressKind, toPublicRolloutOperation } from '../manager.rollout/documents.js';

/**
 * Long work as operations. A method that starts one answers at once with the operation; the work
 * runs on this instance's work queue. Progress is written at most every `progressWriteMs`, and
 * with it a heartbeat; the heartbeat also notices a cancel written by another instance. An
 * operation whose instance is gone (heartbeat older than `expiryMs`, or any instance before this
 * one on an embedded database, whose data-directory lock proves the earlier process ended) becomes
 * `failed` with reason `interrupted`, at start-up and by a periodic sweep on every instance.
 *
 * Retention (Kubernetes' TTL after finished): an operation that ended more than
 * `CLOUDLY_OPERATION_RETENTION_DAYS` ago is deleted, with its progress, at start-up and every
 * hour. Each deletion is conditional on the generation the sweep read in an ended state, so an
 * operation that changed meanwhile is kept; several instances may sweep at once.
 */

export const operationTiming = Object.freeze({
  progressWriteMs: 250,
  heartbeatMs: 2_000,
  expiryMs: 30_000,
  sweepMs: 10_000,
});

/** How often retention runs, and how many operations one read of it takes. */
export const operationRetentionTiming = Object.freeze({
  sweepMs: 3_600_000,
  batch: 200,
});
const dayMs = 24 * 3_600_000;

/** Test seam of a retention sweep: runs after each read of candidates, before their deletions. */
export interface IRetentionSweepOptions {
  afterRead?: (candidatesArg: readonly IOperationDocument[]) => Promise<void>;
}

/** Thrown into a runner's awaits once its operation is cancelled (or its instance stops). */

/** Operations are a log: newest started first, in the whole list and in its pages. */
const operationsOrder = newestFirst('startedAt');
export class OperationCancelledError extends Error {
  constructor(public readonly why: 'cancelled' | 'interrupted') {
    super(`operation ${why}`);
    this.name = 'OperationCancelledError';
  }
}

/** What a runner gets: progress setters and a way to stop waiting when the operation is cancelled. */
export interface IOperationRun {
  readonly operationId: string;
  readonly signal: AbortSignal;
  setPhase(phaseArg: IOperationProgress['phase'], bytesTotalArg?: number | null): void;
  setBytes(bytesDoneArg: number, bytesTotalArg?: number | null): void;
  /** `promiseArg`, or an `OperationCancelledError` as soon as the operation is cancelled. */
  untilCancelled<T>(promiseArg: Promise<T>): Promise<T>;
}

export interface IOperationStart {
  /** `op-<uuid>`, or `operationIdOf(method, mutationId)` for a request with a mutationId. */
  operationId: string;
  kind: IOperationDocument['kind'];
  method: string;
  clusterId: string;
  serviceId: string;
  nodeId: string;
  backupId: string;
  requestedBy: string;
  mutationId?: string;
  /** Digest of everything the request asked for: a reused mutationId must repeat it. */
  requestSha256: string;
  input?: Record<string, unknown>;
}

type TRunner = (runArg: IOperationRun) => Promise<IOperationDocument['result']>;

/**
 * Where an instance reports the bytes it moves for an operation that another instance runs:
 * the setters of a run, and `flush`, which resolves once the last bytes set are written.
 */
export interface IOperationTransferReport extends Pick<IOperationRun, 'setPhase' | 'setBytes'> {
  flush(): Promise<void>;
}

interface ILocalRun {
  controller: AbortController;
  why: 'cancelled' | 'interrupted';
  progress: IOperationProgress;
  dirty: boolean;
  runner: TRunner | null;
  /** Progress writes of this operation, one after another, so an older one never lands last. */
  writing: Promise<void>;
}

/** The id of an operation started under a caller's mutationId: the same id for the same method and mutationId. */
export const operationIdOf = (methodArg: string, mutationIdArg: string): string =>
  `op-${sha256Hex(`${methodArg}\u0000${mutationIdArg}`).slice(0, 32)}`;

export class OperationManager {
  /** This process's id; running operations name the instance that runs them. */
  public readonly instanceId = randomUUID();
  private readonly local = new Map<string, ILocalRun>();
  private readonly abandonedListeners = new Set<(docArg: IOperationDocument) => Promise<void>>();
  private readonly queue: WorkQueue;
  private progressTimer: NodeJS.Timeout | null = null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private sweepTimer: NodeJS.Timeout | null = null;
  private retentionTimer: NodeJS.Timeout | null = null;

  constructor(private readonly cloudly: Cloudly) {
    this.queue = new WorkQueue({ name: 'operations', logger: cloudly.logger, process: (keyArg) => this.runLocal(keyArg) });
    this.registerHandlers();
  }

  public async start(): Promise<void> {
    await this.sweep(true);
    await this.sweepRetention();
    this.progressTimer = setInterval(() => void this.flushProgress(false), operationTiming.progressWriteMs);
    this.heartbeatTimer = setInterval(() => void this.flushProgress(true), operationTiming.heartbeatMs);
    this.sweepTimer = setInterval(() => void this.sweep(false), operationTiming.sweepMs);
    this.retentionTimer = setInterval(() => {
      void this.sweepRetention().catch((error: unknown) => this.cloudly.logger.warn({ err: error }, 'operation retention sweep failed'));
    }, operationRetentionTiming.sweepMs);
    for (const timer of [this.progressTimer, this.heartbeatTimer, this.sweepTimer, this.retentionTimer]) {
      timer.unref();
    }
  }

  public async stop(): Promise<void> {
    for (const timer of [this.progressTimer, this.heartbeatTimer, this.sweepTimer, this.retentionTimer]) {
      if (timer) clearInterval(timer);
    }
    this.progressTimer = this.heartbeatTimer = this.sweepTimer = this.retentionTimer = null;
    // Work still waiting on a relay stops waiting: its operation ends `interrupted`.
    for (const run of this.local.values()) {
      run.why = 'interrupted';
      run.controller.abort();
    }
    await this.queue.drain();
  }

  /** Called when an operation of another instance is found abandoned (after it is marked `interrupted`). */
  public onAbandoned(listenerArg: (docArg: IOperationDocument) => Promise<void>): void {
    this.abandonedListeners.add(listenerArg);
  }

  /**
   * Starts (records) an operation, or answers the one a repeated mutationId started. `created`
   * says whether this call made it. A dry run records nothing and answers what it would record.
   */
  public async begin(startArg: IOperationStart): Promise<{ doc: IOperationDocument; created: boolean }> {
    const id = startArg.operationId;
    const now = Date.now();
    const result = await this.cloudly.store.mutate(operationKind, id, (existingArg) => decideOperationStart(existingArg, {
      id,
      kind: startArg.kind,
      method: startArg.method,
      state: 'running',
      clusterId: startArg.clusterId,
      serviceId: startArg.serviceId,
      nodeId: startArg.nodeId,
      backupId: startArg.backupId,
      requestedBy: startArg.requestedBy,
      ...(startArg.mutationId !== undefined ? { mutationId: startArg.mutationId } : {}),
      requestSha256: startArg.requestSha256,
      instanceId: this.instanceId,
      input: startArg.input ?? {},
      startedAt: now,
    }));
    return { doc: result.doc!, created: result.outcome === 'created' };
  }

  /** An earlier operation started under this method and mutationId, if any. */
  public async findByMutation(methodArg: string, mutationIdArg: string): Promise<IOperationDocument | null> {
    return this.cloudly.store.get(operationKind, operationIdOf(methodArg, mutationIdArg));
  }

  /** Runs the work of an operation this call created, on the work queue; its end is recorded. */
  public launch(docArg: IOperationDocument, runnerArg: TRunner): void {
    this.local.set(docArg.id, { controller: new AbortController(), why: 'cancelled', progress: initialProgress(Date.now()), dirty: true, runner: runnerArg, writing: Promise.resolve() });
    void this.queue.add(docArg.id);
  }

  public async getPublic(idArg: string): Promise<IOperation | null> {
    const doc = await this.cloudly.store.get(operationKind, idArg);
    return doc ? (await this.toPublic([doc]))[0] : null;
  }

  /** The public operations of documents: each with its progress (a rollout's: its waves and services). */
  private async toPublic(docsArg: readonly IOperationDocument[]): Promise<IOperation[]> {
    const rolloutIds = docsArg.filter((docArg) => docArg.kind === 'rollout').map((docArg) => docArg.id);
    const otherIds = docsArg.filter((docArg) => docArg.kind !== 'rollout').map((docArg) => docArg.id);
    const [progress, rollouts] = await Promise.all([
      otherIds.length === 0 ? [] : this.cloudly.store.findIn(operationProgressKind, 'id', otherIds),
      rolloutIds.length === 0 ? [] : this.cloudly.store.findIn(rolloutProgressKind, 'id', rolloutIds),
    ]);
    const progressOf = new Map(progress.map((docArg) => [docArg.id, docArg]));
    const rolloutOf = new Map(rollouts.map((docArg) => [docArg.id, docArg]));
    return docsArg.map((docArg) => (docArg.kind === 'rollout'
      ? toPublicRolloutOperation(docArg, rolloutOf.get(docArg.id) ?? null)
      : toPublicOperation(docArg, progressOf.get(docArg.id) ?? null)));
  }

  /**
   * Reports the bytes of a stream this instance carries for an operation another instance runs
   * (a relay on this instance's socket uploads the closure of a backup ordered elsewhere): they
   * go to the progress document's `transfer` member, at most one write in flight, the newest last.
   */
  public reportRemoteTransfer(operationIdArg: string): IOperationTransferReport {
    let latest: IOperationRemoteTransfer = { bytesDone: 0, bytesTotal: null, updatedAt: Date.now(), instanceId: this.instanceId };
    let dirty = false;
    let writing: Promise<void> | null = null;
    // One write at a time: changes made meanwhile are written together right after it.
    const write = (): Promise<void> => {
      if (writing) {
        return writing;
      }
      if (!dirty) {
        return Promise.resolve();
      }
      writing = (async () => {
        while (dirty) {
          dirty = false;
          const transfer = latest;
          try {
            await this.cloudly.store.mutate(operationProgressKind, operationIdArg, (currentArg) => decideRemoteTransfer(currentArg, operationIdArg, transfer, Date.now()));
          } catch (error) {
            this.cloudly.logger.warn({ err: error, operationId: operationIdArg }, 'transfer progress not written');
          }
        }
        writing = null;
      })();
      return writing;
    };
    const change = (bytesDoneArg: number | null, bytesTotalArg: number | null | undefined): void => {
      latest = {
        ...latest,
        ...(bytesDoneArg !== null ? { bytesDone: bytesDoneArg } : {}),
        ...(bytesTotalArg !== undefined ? { bytesTotal: bytesTotalArg } : {}),
        updatedAt: Date.now(),
      };
      dirty = true;
      void write();
    };
    return {
      setPhase: (_phaseArg, bytesTotalArg) => change(null, bytesTotalArg),
      setBytes: (bytesDoneArg, bytesTotalArg) => change(bytesDoneArg, bytesTotalArg),
      flush: () => write(),
    };
  }

  private async runLocal(idArg: string): Promise<void> {
    const run = this.local.get(idArg);
    if (!run?.runner) {
      return;
    }
    const runner = run.runner;
    run.runner = null;
    const context: IOperationRun = {
      operationId: idArg,
      signal: run.controller.signal,
      setPhase: (phaseArg, bytesTotalArg) => {
        run.progress = { ...run.progress, phase: phaseArg, ...(bytesTotalArg !== undefined ? { bytesTotal: bytesTotalArg } : {}), updatedAt: Date.now() };
        run.dirty = true;
      },
      setBytes: (bytesDoneArg, bytesTotalArg) => {
        run.progress = { ...run.progress, bytesDone: bytesDoneArg, ...(bytesTotalArg !== undefined ? { bytesTotal: bytesTotalArg } : {}), updatedAt: Date.now() };
        run.dirty = true;
      },
      untilCancelled: <T>(promiseArg: Promise<T>) => new Promise<T>((resolve, reject) => {
        const onAbort = () => reject(new OperationCancelledError(run.why));
        if (run.controller.signal.aborted) {
          onAbort();
          return;
        }
        run.controller.signal.addEventListener('abort', onAbort, { once: true });
        promiseArg.then(resolve, reject).finally(() => run.controller.signal.removeEventListener('abort', onAbort));
      }),
    };
    try {
      const result = await runner(context);
      run.progress = { ...run.progress, phase: 'done', updatedAt: Date.now() };
      await this.finalProgress(idArg, run);
      await this.end(idArg, { state: 'completed', now: Date.now(), ...(result ? { result } : {}) });
    } catch (error) {
      // The last progress is written before the end, so a reader of the ended operation sees it.
      await this.finalProgress(idArg, run).catch(() => undefined);
      // An instance that is stopping closed the relay sockets first: its waits end as interrupted.
      if (!this.cloudly.started && !run.controller.signal.aborted) {
        run.why = 'interrupted';
        run.controller.abort();
      }
      if (run.controller.signal.aborted) {
        // A cancel is already recorded; an interruption by this instance's stop is recorded now.
        if (run.why === 'interrupted') {
          await this.end(idArg, { state: 'failed', now: Date.now(), reason: operationReasons.interrupted, error: { code: 'unavailable', retryable: true, reasons: [operationReasons.interrupted] } }).catch(() => undefined);
        }
      } else {
        const error_ = operationErrorOf(error, (errorArg) => this.cloudly.logInternalFailure(errorArg, `operation ${idArg}`));
        await this.end(idArg, { state: 'failed', now: Date.now(), reason: error_.reasons?.[0] ?? error_.code, error: error_ });
      }
    } finally {
      this.local.delete(idArg);
    }
  }

  /** The last progress write of a run: queued after any write in flight, and no flush after it. */
  private async finalProgress(idArg: string, runArg: ILocalRun): Promise<void> {
    runArg.dirty = false;
    this.local.delete(idArg);
    const write = runArg.writing.then(() => this.writeProgress(idArg, runArg.progress));
    runArg.writing = write.catch(() => undefined);
    await write;
  }

  private async end(idArg: string, endArg: Parameters<typeof decideOperationEnd>[1]): Promise<void> {
    await this.cloudly.store.mutate(operationKind, idArg, (currentArg) => decideOperationEnd(currentArg, endArg));
  }

  private async writeProgress(idArg: string, progressArg: IOperationProgress): Promise<void> {
    const now = Date.now();
    await this.cloudly.store.mutate(operationProgressKind, idArg, (currentArg) => decideProgress(currentArg, idArg, progressArg, now));
  }

  /**
   * Writes the progress of local operations that changed (every `progressWriteMs`), or of all of
   * them as a heartbeat; the heartbeat also reads each operation, so a cancel recorded by another
   * instance stops the local wait.
   */
  private async flushProgress(heartbeatArg: boolean): Promise<void> {
    for (const [id, run] of this.local) {
      if (!heartbeatArg && !run.dirty) {
        continue;
      }
      run.dirty = false;
      try {
        const write = run.writing.then(() => this.writeProgress(id, run.progress));
        run.writing = write.catch(() => undefined);
        await write;
        if (heartbeatArg) {
          const doc = await this.cloudly.store.get(operationKind, id);
          if (doc && doc.state !== 'running' && !run.controller.signal.aborted) {
            run.controller.abort();
          }
        }
      } catch (error) {
        run.dirty = true;
        this.cloudly.logger.warn({ err: error, operationId: id }, 'operation progress not written');
      }
    }
  }

  /** Marks every abandoned running operation `failed` / `interrupted`: one read of each kind. */
  private async sweep(startingArg: boolean): Promise<void> {
    try {
      // A rollout's operation has no instance: the rollout controller advances it wherever it runs.
      const running = await this.cloudly.store.find(operationKind, { state: 'running', kind: { $ne: 'rollout' } });
      if (running.length === 0) {
        return;
      }
      const progress = new Map((await this.cloudly.store.find(operationProgressKind, { id: { $in: running.map((docArg) => docArg.id) } }))
        .map((docArg) => [docArg.id, docArg]));
      const now = Date.now();
      for (const doc of running) {
        if (!isOperationAbandoned(doc, progress.get(doc.id) ?? null, {
          now, expiryMs: operationTiming.expiryMs, instanceId: this.instanceId, otherInstancesAreGone: startingArg && this.cloudly.database.embedded,
        })) {
          continue;
        }
        const ended = await this.cloudly.store.mutate(operationKind, doc.id, (currentArg) =>
          (currentArg && currentArg.instanceId === doc.instanceId
            ? decideOperationEnd(currentArg, { state: 'failed', now, reason: operationReasons.interrupted, error: { code: 'unavailable', retryable: true, reasons: [operationReasons.interrupted] } })
            : { kind: 'keep' }));
        if (ended.outcome === 'written') {
          this.cloudly.logger.warn({ operationId: doc.id, kind: doc.kind, instanceId: doc.instanceId }, 'operation interrupted: its instance is gone');
          for (const listener of this.abandonedListeners) {
            await listener(ended.doc!).catch((error: unknown) => this.cloudly.logger.warn({ err: error, operationId: doc.id }, 'interrupted operation not settled'));
          }
        }
      }
    } catch (error) {
      if (startingArg) {
        throw error;
      }
      this.cloudly.logger.warn({ err: error }, 'operation sweep failed');
    }
  }

  /**
   * Deletes every operation that ended before `nowArg` minus the retention, and its progress;
   * answers how many this call deleted. Candidates are read in (endedAt, id) order, a batch at a
   * time; each is deleted only if it still has the generation read (the store's conditional
   * remove), so one that changed since is kept until a later sweep judges it again, and one
   * another instance deleted first is simply not counted. Running operations are never read.
   */
  public async sweepRetention(nowArg = Date.now(), optionsArg: IRetentionSweepOptions = {}): Promise<number> {
    const retentionDays = this.cloudly.config.operationRetentionDays;
    const cutoff = nowArg - retentionDays * dayMs;
    // The deletions are Cloudly's own work: their audit events name it and this sweep.
    return runInOperation({ actor: cloudlyActor, method: 'operationRetention', dryRun: false }, async () => {
      let deleted = 0;
      let after: { endedAt: number; id: string } | null = null;
      for (;;) {
        // A rollout's operation holds its lifecycle: it stays as long as the rollout does.
        const clauses: Array<Record<string, unknown>> = [{ state: { $in: [...finishedOperationStates] }, endedAt: { $lt: cutoff }, kind: { $ne: 'rollout' } }];
        if (after) {
          clauses.push({ $or: [{ endedAt: { $gt: after.endedAt } }, { endedAt: after.endedAt, id: { $gt: after.id } }] });
        }
        const candidates = await this.cloudly.store.find(operationKind, { $and: clauses }, {
          sort: { endedAt: 1, id: 1 },
          limit: operationRetentionTiming.batch,
        });
        if (candidates.length === 0) {
          break;
        }
        await optionsArg.afterRead?.(candidates);
        for (const doc of candidates) {
          if (isOperationPastRetention(doc, cutoff) && await this.cloudly.store.remove(operationKind, doc.id, doc.generation)) {
            deleted++;
            await this.forgetProgress(doc.id);
          }
        }
        if (candidates.length < operationRetentionTiming.batch) {
          break;
        }
        const last = candidates[candidates.length - 1];
        after = { endedAt: last.endedAt!, id: last.id };
      }
      await this.forgetOrphanedProgress(cutoff);
      if (deleted > 0) {
        this.cloudly.logger.info({ deleted, retentionDays }, 'operations past retention deleted');
      }
      return deleted;
    });
  }

  /** Deletes the progress of an operation that is gone (whatever its generation: nothing else writes it then). */
  private async forgetProgress(idArg: string): Promise<void> {
    try {
      await this.cloudly.store.mutate(operationProgressKind, idArg, () => ({ kind: 'remove' }));
    } catch (error) {
      // Left for `forgetOrphanedProgress` of a later sweep.
      this.cloudly.logger.warn({ err: error, operationId: idArg }, 'progress of a deleted operation not deleted');
    }
  }

  /** Progress whose operation is gone (an instance died between the two deletions), last written before the cutoff. */
  private async forgetOrphanedProgress(cutoffArg: number): Promise<void> {
    const stale = await this.cloudly.store.find(operationProgressKind, { heartbeatAt: { $lt: cutoffArg } }, { limit: operationRetentionTiming.batch });
    if (stale.length === 0) {
      return;
    }
    const kept = new Set((await this.cloudly.store.find(operationKind, { id: { $in: stale.map((docArg) => docArg.id) } })).map((docArg) => docArg.id));
    for (const progress of stale) {
      if (!kept.has(progress.id)) {
        await this.forgetProgress(progress.id);
      }
    }
  }

  private registerHandlers(): void {
    registerOperations(this.cloudly, [
      adminQuery({
        method: 'getOperation',
        access: 'read',
        input: { required: { operationId: isIdString } },
        run: async (request) => {
          const operation = await this.getPublic(request.operationId);
          if (!operation) {
            throw refuse('not-found', [operationReasons.notFound]);
          }
          return { operation };
        },
      }),
      adminQuery({
        method: 'getOperations',
        access: 'read',
        input: {
          required: {},
          optional: {
            clusterId: isIdString,
            serviceId: isIdString,
            state: (valueArg, pathArg) => ((operationStates as readonly unknown[]).includes(valueArg) ? [] : [fieldProblem(pathArg, fieldProblemReasons.notSupported, `must be one of ${operationStates.join(', ')}`)]),
            ...orderedPageShape('getOperations', operationsOrder),
          },
        },
        run: async (request) => {
          const filter: Record<string, string> = {};
          if (request.clusterId !== undefined) filter.clusterId = request.clusterId;
          if (request.serviceId !== undefined) filter.serviceId = request.serviceId;
          if (request.state !== undefined) filter.state = request.state;
          const page = await findPage(this.cloudly.store, operationKind, filter, 'getOperations', request, operationsOrder);
          return { operations: await this.toPublic(page.items), ...nextCursorMember(page) };
        },
      }),
      adminMutation({
        method: 'cancelOperation',
        access: 'write',
        input: { required: { operationId: isIdString } },
        target: (request) => ({ kind: operationKind, id: request.operationId }),
        decide: (current, { now }) => decideOperationCancel(current, now),
        answer: async ({ doc }) => ({ operation: (await this.toPublic([doc!]))[0] }),
        // The work this instance runs stops waiting (a dry run records nothing and leaves it running).
        after: (_outcome, { request }) => {
          const run = this.local.get(request.operationId);
          if (run && !run.controller.signal.aborted) {
            run.why = 'cancelled';
            run.controller.abort();
          }
          this.cloudly.logger.info({ operationId: request.operationId }, 'operation cancelled');
        },
      }),
    ]);
  }
}

/** The error data a failed operation records: a refusal's own data, or `internal` with a logged id. */
export const operationErrorOf = (errorArg: unknown, logArg: (errorArg: unknown) => string): IOperationError => {
  if (isRefusal(errorArg)) {
    const data = errorArg.errorData as Record<string, unknown> | undefined;
    if (data && typeof data.code === 'string') {
      return {
        code: data.code,
        retryable: data.retryable === true,
        ...(Array.isArray(data.reasons) ? { reasons: data.reasons.filter((reasonArg): reasonArg is string => typeof reasonArg === 'string') } : {}),
        ...(Array.isArray(data.causes) && data.causes.length > 0 ? { causes: data.causes as IRefusalCause[] } : {}),
        ...(data.relayError !== undefined ? { relayError: data.relayError } : {}),
      };
    }
  }
  const errorId = logArg(errorArg);
  return { code: 'internal', retryable: true, reasons: ['internal-failure'], causes: [{ message: `error id ${errorId}; Cloudly's log names it` }] };
};
