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
import {
  rolloutKind,
  rolloutProgressKind,
  terminalRolloutStates,
  type IRolloutDocument,
  type IRolloutProgressDocument,
} from './documents.js';

/**
 * The rollout controller: advances every rollout wave by wave, the only writer of
 * `CloudlyRolloutProgress`. Keys: a rollout's id; `service:<id>` (its stored verdict changed, which
 * includes its cluster turning dark) queues the rollouts still running over that service.
 *
 * Each service is changed by one compare-and-swap at the generation the plan read, under a
 * mutation id made of the rollout and the service: the progress first records that the change is
 * being made, so a run after kill -9 asks the service whether that change committed
 * (`store.findMutation`) before it would make it, and no service is changed twice or skipped.
 */

export const rolloutServiceKey = (serviceIdArg: string): string => `service:${serviceIdArg}`;

export interface IRolloutPorts {
  store: DocumentStore;
  logger: TCloudlyLogger;
  /** `updateService`'s decision on the generation given, recorded under the mutation id. */
  updateServiceSpecAt: (serviceIdArg: string, expectedGenerationArg: number, specArg: IServiceWritableSpec, mutationIdArg: string) => Promise<IServiceDocument>;
}

const activeStates = ['pending', 'running', 'paused', 'waiting-approval'];

/** At most this many steps in one run (each step changes something); the next run goes on. */
const maximumStepsPerRun = 1_000;

export const rolloutMutationId = (rolloutIdArg: string, serviceIdArg: string, whatArg: 'apply' | 'revert'): string =>
  `${rolloutIdArg}:${serviceIdArg}:${whatArg}`;

export class RolloutController implements IController {
  public readonly name = 'rollout';
  public readonly writes = [rolloutProgressKind.collectionName] as const;
  public readonly inputs: Readonly<Record<string, (changeArg: ICommittedChange) => readonly string[]>> = {
    CloudlyRollout: (changeArg) => {
      // Seen here for every instance's rollouts, before its own run: see `unfinished`.
      this.unfinished.add(changeArg.id);
      return [changeArg.id];
    },
    // A dark cluster marks its services' verdicts `unknown`: the verdict's change covers liveness too.
    CloudlyServiceRuntimeStatus: (changeArg) => [rolloutServiceKey(changeArg.id)],
  };

  /**
   * The rollouts that may still be running, as this instance knows them: filled by `all()` (start-up,
   * every resync) and by every rollout's change, emptied as runs find them finished or gone. A
   * verdict's change looks for rollouts over its service only while this holds one, so a fleet with
   * no rollout running pays no read per verdict. A rollout another instance just created is advanced
   * by its own key when its change arrives; skipping a verdict before that loses nothing.
   */
  private readonly unfinished = new Set<string>();

  constructor(private readonly ports: IRolloutPorts) {}

  public scopeOf(keyArg: string): string {
    return keyArg.startsWith('service:') ? 'expand' : 'rollout';
  }

  /** Every rollout not finished: a restart (or a new leader) goes on with each from its stored progress. */
  public async all(): Promise<readonly string[]> {
    const [rollouts, finished] = await Promise.all([
      this.ports.store.find(rolloutKind, {}),
      this.ports.store.find(rolloutProgressKind, { state: { $in: [...terminalRolloutStates] } } as never),
    ]);
    const done = new Set(finished.map((doc) => doc.id));
    const unfinished = rollouts.map((doc) => doc.id).filter((id) => !done.has(id));
    unfinished.forEach((id) => this.unfinished.add(id));
    return unfinished;
  }

  public async reconcile(keyArg: string, contextArg: IReconcileContext): Promise<IReconcileResult> {
    if (keyArg.startsWith('service:')) {
      if (this.unfinished.size === 0) {
        return { outcome: 'expanded' };
      }
      const running = await this.ports.store.find(rolloutKind, { 'targets.serviceId': keyArg.slice('service:'.length) } as never);
      if (running.length > 0) {
        const progress = await this.ports.store.findIn(rolloutProgressKind, 'id', running.map((doc) => doc.id));
        const finished = new Set(progress.filter((doc) => !activeStates.includes(doc.state)).map((doc) => doc.id));
        for (const doc of running) {
          if (!finished.has(doc.id)) {
            contextArg.enqueue(doc.id);
          }
        }
      }
      return { outcome: 'expanded' };
    }
    return this.advance(keyArg);
  }

  private async advance(rolloutIdArg: string): Promise<IReconcileResult> {
    const { store } = this.ports;
    let wrote = false;
    for (let step = 0; step < maximumStepsPerRun; step += 1) {
      const doc = await store.get(rolloutKind, rolloutIdArg);
      if (!doc) {
        this.unfinished.delete(rolloutIdArg);
        return { outcome: wrote ? 'written' : 'kept' };
      }
      let progress = await store.get(rolloutProgressKind, rolloutIdArg);
      if (!progress) {
        progress = await store.insert(rolloutProgressKind, initialRolloutProgress(doc)) ?? await store.get(rolloutProgressKind, rolloutIdArg);
        wrote = true;
        continue;
      }
      if (terminalRolloutStates.includes(progress.state)) {
        this.unfinished.delete(rolloutIdArg);
        return { outcome: wrote ? 'written' : 'kept' };
      }
      const now = Date.now();
      const advanced = advanceRollout(doc, progress, await this.readFacts(doc), now);
      if (!sameProgress(progress, advanced.progress)) {
        await this.saveProgress(progress, advanced.progress);
        wrote = true;
        continue;
      }
      const effect = advanced.effects[0];
      if (!effect) {
        return { outcome: wrote ? 'written' : 'kept', ...(advanced.requeueAfterMs === null ? {} : { requeueAfterMs: Math.max(advanced.requeueAfterMs, 50) }) };
      }
      await this.perform(doc, progress, effect);
      wrote = true;
    }
    return { outcome: 'written', requeueAfterMs: 0 };
  }

  private async readFacts(docArg: IRolloutDocument): Promise<IRolloutFacts> {
    const [verdicts, liveness] = await Promise.all([
      this.ports.store.findIn(serviceRuntimeStatusKind, 'id', docArg.targets.map((target) => target.serviceId)),
      this.ports.store.findIn(clusterLivenessKind, 'id', [...new Set(docArg.targets.map((target) => target.clusterId))]),
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

  /** One compare-and-swap of the progress on the generation read: the controller is its one writer, so a lost race means a second runner, which stops here. */
  private async saveProgress(currentArg: IRolloutProgressDocument, nextArg: IRolloutProgressDocument): Promise<void> {
    const { id: _id, generation: _generation, ...set } = nextArg;
    const saved = await this.ports.store.swap(rolloutProgressKind, currentArg.id, currentArg.generation, { set });
    if (!saved) {
      throw new Error(`rollout ${currentArg.id}: its progress changed under this run`);
    }
  }

  private async updateRecord(rolloutIdArg: string, serviceIdArg: string, changeArg: Partial<IRolloutProgressDocument['targets'][number]>, failureArg = false): Promise<void> {
    const progress = (await this.ports.store.get(rolloutProgressKind, rolloutIdArg))!;
    const next = structuredClone(progress);
    const record = next.targets.find((target) => target.serviceId === serviceIdArg)!;
    Object.assign(record, changeArg);
    if (failureArg) {
      next.failures += 1;
    }
    await this.saveProgress(progress, next);
  }

  /** Makes one change the decision asked for, as the rollout's own write (the audit names it as the cause). */
  private async perform(docArg: IRolloutDocument, progressArg: IRolloutProgressDocument, effectArg: TRolloutEffect): Promise<void> {
    const target = docArg.targets.find((candidate) => candidate.serviceId === effectArg.serviceId)!;
    const record = progressArg.targets.find((candidate) => candidate.serviceId === effectArg.serviceId)!;
    const mutationId = rolloutMutationId(docArg.id, target.serviceId, effectArg.kind);
    const inRollout = <T>(fnArg: () => Promise<T>) =>
      runInOperation({ actor: cloudlyActor, method: 'rollout', dryRun: false, cause: { kind: rolloutKind.collectionName, id: docArg.id } }, fnArg);
    if (effectArg.kind === 'apply') {
      if (!record.applying) {
        // Recorded before the service is touched: after a crash, the next run looks for this change first.
        await this.updateRecord(docArg.id, target.serviceId, { state: 'updating', applying: true, updatedAt: Date.now() });
        return;
      }
      const committed = await this.ports.store.findMutation(serviceKind, mutationId);
      if (committed) {
        await this.updateRecord(docArg.id, target.serviceId, { newSpecRevision: target.nextSpecRevision, updatedAt: Date.now() });
        return;
      }
      if (isStopping(docArg, progressArg)) {
        // A change that never committed is not made once the rollout stops or goes back.
        await this.updateRecord(docArg.id, target.serviceId, { state: 'cancelled', applying: false, updatedAt: Date.now() });
        return;
      }
      try {
        this.ports.logger.info({ rolloutId: docArg.id, serviceId: target.serviceId, clusterId: target.clusterId, wave: target.wave }, 'rollout changing a service');
        const updated = await inRollout(() => this.ports.updateServiceSpecAt(target.serviceId, target.generation, target.nextSpec, mutationId));
        await this.updateRecord(docArg.id, target.serviceId, { newSpecRevision: updated.specRevision, updatedAt: Date.now() });
      } catch (error) {
        if (!isRefusal(error)) {
          throw error;
        }
        // Someone else changed the service since the plan read it (or removed it): reported, never overwritten.
        const reasons = (error.errorData as { reasons?: string[] } | undefined)?.reasons ?? [];
        await this.updateRecord(docArg.id, target.serviceId, { state: 'conflict', reason: reasons[0] ?? 'conflict', applying: false, updatedAt: Date.now() }, true);
      }
      return;
    }
    const reverted = await this.ports.store.findMutation(serviceKind, mutationId);
    if (reverted) {
      await this.updateRecord(docArg.id, target.serviceId, { state: 'reverted', revertedSpecRevision: reverted.doc.specRevision, updatedAt: Date.now() });
      return;
    }
    const current = await this.ports.store.get(serviceKind, target.serviceId);
    // Only a service still as this rollout left it goes back; another change since then is kept.
    if (!current || !sameSpec(writableSpecOfService(toPublicService(current)), target.nextSpec)) {
      await this.updateRecord(docArg.id, target.serviceId, { reason: 'revert-conflict', updatedAt: Date.now() });
      return;
    }
    try {
      const updated = await inRollout(() => this.ports.updateServiceSpecAt(target.serviceId, current.generation, target.previousSpec, mutationId));
      await this.updateRecord(docArg.id, target.serviceId, { state: 'reverted', revertedSpecRevision: updated.specRevision, updatedAt: Date.now() });
    } catch (error) {
      if (!isRefusal(error)) {
        throw error;
      }
      await this.updateRecord(docArg.id, target.serviceId, { reason: 'revert-conflict', updatedAt: Date.now() });
    }
  }
}

const sameProgress = (leftArg: IRolloutProgressDocument, rightArg: IRolloutProgressDocument): boolean =>
  JSON.stringify(leftArg) === JSON.stringify(rightArg);
