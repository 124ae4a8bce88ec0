import type { ICommittedChange } from '../core/changefeed.js';
import type { IController, IReconcileContext, IReconcileResult } from '../core/controller.js';
import { isRefusal } from '../core/errors.js';
import { cloudlyActor, runInOperation } from '../core/operationcontext.js';
import type { DocumentStore } from '../core/store.js';
import type { TCloudlyLogger } from '../core/logger.js';
import type { IServiceWritableSpec } from '../interfaces/data/service.js';
import { writableSpecOfService } from '../interfaces/data/servicewritable.js';
import { clusterLivenessKind } from '../manager.cluster/liveness.js';
import { serviceKind, serviceRuntimeStatusKind, toPublicService, type IServiceDocument } from '../manager.service/documents.js';
import { advanceRollout, initialRolloutProgress, isStopping, sameSpec, type IRolloutFacts, type TRolloutEffect } from './decide.js';
import { operationKind, type IOperationDocument } from '../manager.operation/documents.js';
import {
  initialRolloutOperation,
  rolloutDetailOf,
  rolloutKind,
  rolloutLifecycle,
  rolloutProgressKind,
  rolloutProgressOf,
  terminalRolloutStates,
  type IRolloutDetailDocument,
  type IRolloutDocument,
  type IRolloutProgressDocument,
  type IRolloutTargetRecord,
} from './documents.js';

/**
 * The rollout controller: advances every rollout wave by wave. After the creation it is the only
 * writer of a rollout's operation (`CloudlyOperation` of kind `rollout`, which holds the lifecycle
 * state) and of its progress (`CloudlyRolloutProgress`, each wave and service). Keys: a rollout's
 * id; `service:<id>` (its stored verdict changed, which includes its cluster turning dark) queues
 * the rollouts still running over that service.
 *
 * Each service is changed by one compare-and-swap at the generation the plan read, under a
 * mutation id made of the rollout and the service: the progress first records that the change is
 * being made, so a run after kill -9 asks the service whether that change committed
 * (`store.findMutation`) before it would make it, and no service is changed twice or skipped.
 * The changes one decision asks for are made together: one progress write records that they are
 * being made, one records how each went, so a wave of a thousand services costs a few reads of the
 * rollout, not a few per service.
 */

export const rolloutServiceKey = (serviceIdArg: string): string => `service:${serviceIdArg}`;

export interface IRolloutPorts {
  store: DocumentStore;
  logger: TCloudlyLogger;
  /** `updateService`'s decision on the generation given, recorded under the mutation id. */
  updateServiceSpecAt: (serviceIdArg: string, expectedGenerationArg: number, specArg: IServiceWritableSpec, mutationIdArg: string) => Promise<IServiceDocument>;
}

/** At most this many steps in one run (each step changes something); the next run goes on. */
const maximumStepsPerRun = 1_000;

/** How many services one step changes at once (each a read and a compare-and-swap). */
const serviceChangesInFlight = 16;

export const rolloutMutationId = (rolloutIdArg: string, serviceIdArg: string, whatArg: 'apply' | 'revert'): string =>
  `${rolloutIdArg}:${serviceIdArg}:${whatArg}`;

type TRecordChange = { serviceId: string; change: Partial<IRolloutTargetRecord>; failure?: boolean };

export class RolloutController implements IController {
  public readonly name = 'rollout';
  public readonly writes = [rolloutProgressKind.collectionName] as const;
  public readonly inputs: Readonly<Record<string, (changeArg: ICommittedChange) => readonly string[]>> = {
    CloudlyRollout: (changeArg) => [changeArg.id],
    // A dark cluster marks its services' verdicts `unknown`: the verdict's change covers liveness too.
    CloudlyServiceRuntimeStatus: (changeArg) => (this.rolloutsOfService.has(changeArg.id) ? [rolloutServiceKey(changeArg.id)] : []),
  };

  /**
   * The services of the rollouts this instance advances and that have not finished: filled when a
   * run reads a rollout, emptied when it finds the rollout finished or gone. A verdict's change
   * queues the rollouts over its service from here, with no read, and a fleet with no rollout
   * running pays nothing per verdict. A rollout another instance just created is advanced by its
   * own key when its change arrives (that run reads every verdict); skipping a verdict before that loses nothing.
   */
  private readonly rolloutsOfService = new Map<string, Set<string>>();
  private readonly servicesOfRollout = new Map<string, string[]>();

  constructor(private readonly ports: IRolloutPorts) {}

  public scopeOf(keyArg: string): string {
    return keyArg.startsWith('service:') ? 'expand' : 'rollout';
  }

  /** Every rollout not finished: a restart (or a new leader) goes on with each from its stored progress. */
  public async all(): Promise<readonly string[]> {
    const [rollouts, finished] = await Promise.all([
      this.ports.store.find(rolloutKind, {}),
      this.ports.store.find(operationKind, { kind: 'rollout', 'rollout.state': { $in: [...terminalRolloutStates] } } as never),
    ]);
    const done = new Set(finished.map((doc) => doc.id));
    const unfinished = rollouts.filter((doc) => !done.has(doc.id));
    unfinished.forEach((doc) => this.remember(doc));
    return unfinished.map((doc) => doc.id);
  }

  public async reconcile(keyArg: string, contextArg: IReconcileContext): Promise<IReconcileResult> {
    if (keyArg.startsWith('service:')) {
      for (const rolloutId of this.rolloutsOfService.get(keyArg.slice('service:'.length)) ?? []) {
        contextArg.enqueue(rolloutId);
      }
      return { outcome: 'expanded' };
    }
    return this.advance(keyArg);
  }

  private remember(docArg: IRolloutDocument): void {
    if (this.servicesOfRollout.has(docArg.id)) {
      return;
    }
    const serviceIds = docArg.targets.map((target) => target.serviceId);
    this.servicesOfRollout.set(docArg.id, serviceIds);
    for (const serviceId of serviceIds) {
      const rollouts = this.rolloutsOfService.get(serviceId) ?? new Set<string>();
      rollouts.add(docArg.id);
      this.rolloutsOfService.set(serviceId, rollouts);
    }
  }

  private forget(rolloutIdArg: string): void {
    for (const serviceId of this.servicesOfRollout.get(rolloutIdArg) ?? []) {
      const rollouts = this.rolloutsOfService.get(serviceId);
      rollouts?.delete(rolloutIdArg);
      if (rollouts?.size === 0) {
        this.rolloutsOfService.delete(serviceId);
      }
    }
    this.servicesOfRollout.delete(rolloutIdArg);
  }

  private async advance(rolloutIdArg: string): Promise<IReconcileResult> {
    const { store } = this.ports;
    let wrote = false;
    for (let step = 0; step < maximumStepsPerRun; step += 1) {
      const doc = await store.get(rolloutKind, rolloutIdArg);
      if (!doc) {
        this.forget(rolloutIdArg);
        return { outcome: wrote ? 'written' : 'kept' };
      }
      const [detail, operation] = await Promise.all([store.get(rolloutProgressKind, rolloutIdArg), store.get(operationKind, rolloutIdArg)]);
      if (!operation) {
        // Its creator died between storing the rollout and its operation: the same operation now.
        await store.insert(operationKind, initialRolloutOperation(doc));
        wrote = true;
        continue;
      }
      if (!detail) {
        await store.insert(rolloutProgressKind, rolloutDetailOfNew(doc));
        wrote = true;
        continue;
      }
      const progress = rolloutProgressOf(detail, operation);
      if (terminalRolloutStates.includes(progress.state)) {
        this.forget(rolloutIdArg);
        return { outcome: wrote ? 'written' : 'kept' };
      }
      this.remember(doc);
      const now = Date.now();
      const advanced = advanceRollout(doc, progress, await this.readFacts(doc, progress), now);
      if (!sameProgress(progress, advanced.progress)) {
        await this.saveProgress(detail, operation, advanced.progress);
        wrote = true;
        continue;
      }
      if (advanced.effects.length === 0) {
        return { outcome: wrote ? 'written' : 'kept', ...(advanced.requeueAfterMs === null ? {} : { requeueAfterMs: Math.max(advanced.requeueAfterMs, 50) }) };
      }
      await this.perform(doc, progress, detail, advanced.effects);
      wrote = true;
    }
    return { outcome: 'written', requeueAfterMs: 0 };
  }

  /**
   * The facts the next decision can use: the verdicts of the services changing (the gate judges
   * only those), and the liveness of the clusters whose services are still to be changed.
   */
  private async readFacts(docArg: IRolloutDocument, progressArg: IRolloutProgressDocument): Promise<IRolloutFacts> {
    const waveOf = new Map(docArg.targets.map((target) => [target.serviceId, target]));
    const changing = progressArg.targets.filter((record) => record.state === 'updating' && record.newSpecRevision !== null).map((record) => record.serviceId);
    const clusters = new Set(progressArg.targets.filter((record) => record.state === 'pending').map((record) => waveOf.get(record.serviceId)!.clusterId));
    const [verdicts, liveness] = await Promise.all([
      changing.length === 0 ? [] : this.ports.store.findIn(serviceRuntimeStatusKind, 'id', changing),
      clusters.size === 0 ? [] : this.ports.store.findIn(clusterLivenessKind, 'id', [...clusters]),
    ]);
    return {
      verdicts: new Map(verdicts.map((verdict) => [verdict.id, {
        specRevision: verdict.specRevision,
        state: verdict.state,
        reason: verdict.reason,
        unknown: verdict.unknown !== undefined,
      }])),
      darkClusters: new Set(liveness.filter((doc) => doc.unknown !== null).map((doc) => doc.id)),
    };
  }

  /**
   * Stores a decided progress: the detail by one compare-and-swap on the generation read, then the
   * lifecycle on the operation when it changed. The controller is the one writer of both, so a lost
   * race means a second runner, which stops here. A crash between the two writes leaves the
   * operation one decision behind; the next run decides the same lifecycle again from the detail.
   */
  private async saveProgress(detailArg: IRolloutDetailDocument, operationArg: IOperationDocument, nextArg: IRolloutProgressDocument): Promise<void> {
    const detail = rolloutDetailOf(nextArg);
    if (JSON.stringify(detail) !== JSON.stringify(rolloutDetailOf(rolloutProgressOf(detailArg, operationArg)))) {
      const saved = await this.ports.store.swap(rolloutProgressKind, detailArg.id, detailArg.generation, { set: detail });
      if (!saved) {
        throw new Error(`rollout ${detailArg.id}: its progress changed under this run`);
      }
    }
    const lifecycle = rolloutLifecycle(nextArg);
    const current = rolloutLifecycle(rolloutProgressOf(detailArg, operationArg));
    if (JSON.stringify(lifecycle) !== JSON.stringify(current)) {
      const saved = await this.ports.store.swap(operationKind, operationArg.id, operationArg.generation, { set: lifecycle });
      if (!saved) {
        throw new Error(`rollout ${operationArg.id}: its operation changed under this run`);
      }
    }
  }

  /** Records how each change went, in one write of the progress. */
  private async updateRecords(detailArg: IRolloutDetailDocument, changesArg: readonly TRecordChange[]): Promise<void> {
    if (changesArg.length === 0) {
      return;
    }
    const next = structuredClone(detailArg);
    const records = new Map(next.targets.map((record) => [record.serviceId, record]));
    for (const { serviceId, change, failure } of changesArg) {
      Object.assign(records.get(serviceId)!, change);
      if (failure) {
        next.failures += 1;
      }
    }
    const { id: _id, generation: _generation, ...set } = next;
    const saved = await this.ports.store.swap(rolloutProgressKind, detailArg.id, detailArg.generation, { set });
    if (!saved) {
      throw new Error(`rollout ${detailArg.id}: its progress changed under this run`);
    }
  }

  /**
   * Makes the changes the decision asked for, as the rollout's own writes (the audit names it as
   * the cause): first one write records every change about to be made; the next step makes them
   * and one write records how each went.
   */
  private async perform(docArg: IRolloutDocument, progressArg: IRolloutProgressDocument, detailArg: IRolloutDetailDocument, effectsArg: readonly TRolloutEffect[]): Promise<void> {
    const recordOf = new Map(progressArg.targets.map((record) => [record.serviceId, record]));
    const unmarked = effectsArg.filter((effect) => effect.kind === 'apply' && !recordOf.get(effect.serviceId)!.applying);
    if (unmarked.length > 0) {
      // Recorded before the services are touched: after a crash, the next run looks for these changes first.
      const now = Date.now();
      await this.updateRecords(detailArg, unmarked.map((effect) => ({ serviceId: effect.serviceId, change: { state: 'updating', applying: true, updatedAt: now } })));
      return;
    }
    const changes: TRecordChange[] = [];
    const queue = [...effectsArg];
    let failure: { error: unknown } | null = null;
    const worker = async () => {
      for (let effect = queue.shift(); effect && !failure; effect = queue.shift()) {
        try {
          changes.push(await this.performOne(docArg, progressArg, effect));
        } catch (error) {
          failure ??= { error };
        }
      }
    };
    // Every change in flight ends before the outcomes are recorded, so none is still being made
    // when the next run asks whether it committed.
    await Promise.all(Array.from({ length: Math.min(serviceChangesInFlight, queue.length) }, worker));
    // What committed is recorded even when another change failed: the next run finds the rest.
    await this.updateRecords(detailArg, changes);
    if (failure) {
      throw (failure as { error: unknown }).error;
    }
  }

  private async performOne(docArg: IRolloutDocument, progressArg: IRolloutProgressDocument, effectArg: TRolloutEffect): Promise<TRecordChange> {
    const target = docArg.targets.find((candidate) => candidate.serviceId === effectArg.serviceId)!;
    const mutationId = rolloutMutationId(docArg.id, target.serviceId, effectArg.kind);
    const serviceId = target.serviceId;
    const inRollout = <T>(fnArg: () => Promise<T>) =>
      runInOperation({ actor: cloudlyActor, method: 'rollout', dryRun: false, cause: { kind: rolloutKind.collectionName, id: docArg.id } }, fnArg);
    if (effectArg.kind === 'apply') {
      const committed = await this.ports.store.findMutation(serviceKind, mutationId);
      if (committed) {
        return { serviceId, change: { newSpecRevision: target.nextSpecRevision, updatedAt: Date.now() } };
      }
      if (isStopping(docArg, progressArg)) {
        // A change that never committed is not made once the rollout stops or goes back.
        return { serviceId, change: { state: 'cancelled', applying: false, updatedAt: Date.now() } };
      }
      try {
        this.ports.logger.info({ rolloutId: docArg.id, serviceId, clusterId: target.clusterId, wave: target.wave }, 'rollout changing a service');
        const updated = await inRollout(() => this.ports.updateServiceSpecAt(serviceId, target.generation, target.nextSpec, mutationId));
        return { serviceId, change: { newSpecRevision: updated.specRevision, updatedAt: Date.now() } };
      } catch (error) {
        if (!isRefusal(error)) {
          throw error;
        }
        // Someone else changed the service since the plan read it (or removed it): reported, never overwritten.
        const reasons = (error.errorData as { reasons?: string[] } | undefined)?.reasons ?? [];
        return { serviceId, change: { state: 'conflict', reason: reasons[0] ?? 'conflict', applying: false, updatedAt: Date.now() }, failure: true };
      }
    }
    const reverted = await this.ports.store.findMutation(serviceKind, mutationId);
    if (reverted) {
      return { serviceId, change: { state: 'reverted', revertedSpecRevision: reverted.doc.specRevision, updatedAt: Date.now() } };
    }
    const current = await this.ports.store.get(serviceKind, serviceId);
    // Only a service still as this rollout left it goes back; another change since then is kept.
    if (!current || !sameSpec(writableSpecOfService(toPublicService(current)), target.nextSpec)) {
      return { serviceId, change: { reason: 'revert-conflict', updatedAt: Date.now() } };
    }
    try {
      const updated = await inRollout(() => this.ports.updateServiceSpecAt(serviceId, current.generation, target.previousSpec, mutationId));
      return { serviceId, change: { state: 'reverted', revertedSpecRevision: updated.specRevision, updatedAt: Date.now() } };
    } catch (error) {
      if (!isRefusal(error)) {
        throw error;
      }
      return { serviceId, change: { reason: 'revert-conflict', updatedAt: Date.now() } };
    }
  }
}

/** The stored detail a rollout starts with. */
const rolloutDetailOfNew = (docArg: IRolloutDocument): Omit<IRolloutDetailDocument, 'generation'> => {
  const { state: _state, endedAt: _endedAt, ...detail } = initialRolloutProgress(docArg);
  return detail;
};

const sameProgress = (leftArg: IRolloutProgressDocument, rightArg: IRolloutProgressDocument): boolean =>
  JSON.stringify(leftArg) === JSON.stringify(rightArg);
