import { randomUUID } from 'node:crypto';
import type { TypedResponseError } from '@api.global/typedrequest';
import { refuse, refuseNamed } from '../core/errors.js';
import { generatedOnCommit } from '../core/operationcontext.js';
import { adminMutation, adminOrchestration, adminQuery, type IDeclaredOperation } from '../core/operations.js';
import { findPage, newestFirst, nextCursorMember, orderedPageShape } from '../core/pagination.js';
import type { DocumentStore, TDecision } from '../core/store.js';
import { isBoolean, isIdString, isIntegerIn, isNonNegativeInteger, isOneOf, isPositiveInteger, isString, sentenceCheck, type TFieldCheck } from '../core/validation.js';
import { serviceNamingLimits } from '../interfaces/data/servicenaming.js';
import type { IRolloutGate, IRolloutStoredTarget } from '../interfaces/data/rollout.js';
import { isLabelSelectorText } from '../manager.cluster/labels.js';
import { rolloutLimits, validateRolloutChange, validateRolloutWaves, waveSizesOf } from './decide.js';
import { operationKind } from '../manager.operation/documents.js';
import {
  initialRolloutOperation,
  rolloutKind,
  rolloutProgressKind,
  rolloutServiceClaimKind,
  terminalRolloutStates,
  toPublicRollout,
  toPublicRolloutOperation,
  type IRolloutDocument,
  type IRolloutServiceClaimDocument,
} from './documents.js';
import { planRollout, type IRolloutPlanPorts } from './plan.js';

/**
 * The rollout methods as declared operations: the plan (a read), the creation (claims, then the
 * rollout), the reads, and the controls (one compare-and-swap each on the rollout's generation).
 * The rollout controller (./rollout.controller.ts) does the rest.
 */

/** Why a rollout or one of its controls is refused (causes name the services, clusters, waves). */
export const rolloutReasons = Object.freeze({
  selectsNothing: 'rollout-selects-nothing',
  changeRefused: 'rollout-change-refused',
  wavesIncomplete: 'rollout-waves-do-not-cover',
  overlaps: 'rollout-overlaps',
  finished: 'rollout-finished',
  notFound: 'rollout-not-found',
  waveNotWaiting: 'rollout-wave-not-waiting',
} as const);

/** A claim whose rollout was never stored (its creator died between the two writes) is free after this long. */
const orphanClaimMs = 60_000;

const isChange: TFieldCheck = sentenceCheck(validateRolloutChange);
const isWaves: TFieldCheck = sentenceCheck(validateRolloutWaves);
const isServiceName: TFieldCheck = isString(1, serviceNamingLimits.maximumNameLength);
const isGate: TFieldCheck = (valueArg, pathArg) => sentenceCheck((value, path) => {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return [`${path} must be an object with timeoutMs and maxFailures`];
  }
  const gate = value as Record<string, unknown>;
  const reasons = Object.keys(gate).filter((key) => key !== 'timeoutMs' && key !== 'maxFailures').map((key) => `${path}.${key} is not a member of a gate`);
  if (Object.hasOwn(gate, 'timeoutMs') && (!Number.isSafeInteger(gate.timeoutMs) || (gate.timeoutMs as number) < rolloutLimits.minimumTimeoutMs || (gate.timeoutMs as number) > rolloutLimits.maximumTimeoutMs)) {
    reasons.push(`${path}.timeoutMs must be an integer from ${rolloutLimits.minimumTimeoutMs} to ${rolloutLimits.maximumTimeoutMs}`);
  }
  if (Object.hasOwn(gate, 'maxFailures') && (!Number.isSafeInteger(gate.maxFailures) || (gate.maxFailures as number) < 0)) {
    reasons.push(`${path}.maxFailures must be a non-negative integer`);
  }
  return reasons;
})(valueArg, pathArg);

const planShape = {
  required: { selector: isLabelSelectorText, serviceName: isServiceName, change: isChange },
  optional: { organizationId: isIdString },
};

export interface IRolloutOperationPorts extends IRolloutPlanPorts {
  store: DocumentStore;
}

const readRollout = async (storeArg: DocumentStore, rolloutIdArg: string) => {
  const doc = await storeArg.get(rolloutKind, rolloutIdArg);
  if (!doc) {
    throw refuseNamed('not-found', rolloutReasons.notFound, `rollout ${rolloutIdArg} does not exist`, 'request.rolloutId');
  }
  const [progress, operation] = await Promise.all([storeArg.get(rolloutProgressKind, rolloutIdArg), storeArg.get(operationKind, rolloutIdArg)]);
  return { doc, progress, operation };
};

/** Which of these rollouts have ended, as their operations record it. */
const finishedRollouts = async (storeArg: DocumentStore, rolloutIdsArg: readonly string[]): Promise<Set<string>> => {
  const operations = rolloutIdsArg.length === 0 ? [] : await storeArg.findIn(operationKind, 'id', [...rolloutIdsArg]);
  return new Set(operations.filter((doc) => doc.rollout && terminalRolloutStates.includes(doc.rollout.state)).map((doc) => doc.id));
};

const isRefusalChange = (changeArg: Partial<IRolloutDocument> | { refuse: TypedResponseError }): changeArg is { refuse: TypedResponseError } =>
  Object.hasOwn(changeArg, 'refuse');

/** A control of a rollout: on the generation the caller read, and only while the rollout runs. */
const decideControl = (
  currentArg: IRolloutDocument | null,
  requestArg: { rolloutId: string; expectedGeneration: number },
  finishedArg: boolean,
  changeArg: (docArg: IRolloutDocument) => Partial<IRolloutDocument> | 'keep' | { refuse: TypedResponseError },
): TDecision<IRolloutDocument> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', rolloutReasons.notFound, `rollout ${requestArg.rolloutId} does not exist`, 'request.rolloutId') };
  }
  if (currentArg.generation !== requestArg.expectedGeneration) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'generation-mismatch', "is not the rollout's current generation", 'request.expectedGeneration') };
  }
  if (finishedArg) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', rolloutReasons.finished, `rollout ${currentArg.id} has finished`) };
  }
  const change = changeArg(currentArg);
  if (change === 'keep') {
    return { kind: 'keep' };
  }
  if (isRefusalChange(change)) {
    return { kind: 'refuse', refusal: change.refuse };
  }
  return { kind: 'write', change: { set: change } };
};

export const rolloutOperations = (portsArg: IRolloutOperationPorts): IDeclaredOperation[] => {
  const { store } = portsArg;
  const isFinished = async (rolloutIdArg: string) => (await finishedRollouts(store, [rolloutIdArg])).has(rolloutIdArg);
  const answerOf = async (docArg: IRolloutDocument) => {
    const [progress, operation] = await Promise.all([store.get(rolloutProgressKind, docArg.id), store.get(operationKind, docArg.id)]);
    return { rollout: toPublicRollout(docArg, progress, operation) };
  };
  const controlInput = { required: { rolloutId: isIdString, expectedGeneration: isPositiveInteger } };

  /** Takes a claim on every service for `rolloutIdArg`, or refuses `rollout-overlaps` naming the rollout holding one (and takes none). */
  const claimServices = async (rolloutIdArg: string, serviceIdsArg: string[], nowArg: number): Promise<void> => {
    const held = await store.findIn(rolloutServiceClaimKind, 'id', serviceIdsArg);
    const holders = [...new Set(held.map((claim) => claim.rolloutId))];
    const [holderDocs, finished] = holders.length === 0 ? [[], new Set<string>()] : await Promise.all([
      store.findIn(rolloutKind, 'id', holders),
      finishedRollouts(store, holders),
    ]);
    const stored = new Set(holderDocs.map((doc) => doc.id));
    const free = (claimArg: IRolloutServiceClaimDocument) =>
      finished.has(claimArg.rolloutId) || (!stored.has(claimArg.rolloutId) && nowArg - claimArg.claimedAt > orphanClaimMs);
    const taken: string[] = [];
    try {
      for (const serviceId of serviceIdsArg) {
        await store.mutate(rolloutServiceClaimKind, serviceId, (current): TDecision<IRolloutServiceClaimDocument> => {
          if (!current) {
            return { kind: 'create', doc: { id: serviceId, rolloutId: rolloutIdArg, claimedAt: nowArg } };
          }
          if (current.rolloutId === rolloutIdArg) {
            return { kind: 'keep' };
          }
          if (free(current)) {
            return { kind: 'write', change: { set: { rolloutId: rolloutIdArg, claimedAt: nowArg } } };
          }
          return {
            kind: 'refuse',
            refusal: refuse('conflict', [rolloutReasons.overlaps], { causes: [{ path: 'request.selector', message: `rollout ${current.rolloutId} is changing service ${serviceId}` }] }),
          };
        });
        taken.push(serviceId);
      }
    } catch (error) {
      await Promise.all(taken.map((serviceId) => store.mutate(rolloutServiceClaimKind, serviceId, (current): TDecision<IRolloutServiceClaimDocument> =>
        (current?.rolloutId === rolloutIdArg ? { kind: 'remove' } : { kind: 'keep' }))));
      throw error;
    }
  };

  return [
    adminQuery({
      method: 'planRollout',
      access: 'read',
      input: planShape,
      run: async (request) => ({ plan: (await planRollout(portsArg, request)).plan }),
    }),

    adminOrchestration({
      method: 'createRollout',
      why: 'a claim per service decides which rollout may change it, then the rollout; its controller changes the services',
      access: 'write',
      input: {
        required: { ...planShape.required, waves: isWaves },
        optional: {
          ...planShape.optional,
          gate: isGate,
          onFailure: isOneOf(['halt', 'revert']),
          maxConcurrent: isIntegerIn(1, rolloutLimits.maximumConcurrent),
        },
      },
      async run(request, context) {
        const computed = await planRollout(portsArg, request);
        const reasons: string[] = [];
        const causes: Array<{ path?: string; message: string }> = [];
        const refusedChanges = computed.plan.skipped.filter((skip) => skip.reason === 'change-refused');
        if (computed.targets.length === 0 && refusedChanges.length === 0) {
          reasons.push(rolloutReasons.selectsNothing);
          causes.push({ path: 'request.selector', message: computed.clustersSelected === 0
            ? 'selects no cluster'
            : `selects ${computed.clustersSelected} clusters, none with a service ${request.serviceName} that can be changed now` });
        }
        if (refusedChanges.length > 0) {
          reasons.push(rolloutReasons.changeRefused);
          for (const skip of refusedChanges) {
            for (const cause of skip.causes ?? []) {
              causes.push({ path: 'request.change', message: `cluster ${skip.clusterName}, service ${skip.serviceId}: ${cause}` });
            }
          }
        }
        const clusterIds = [...new Set(computed.targets.map((target) => target.clusterId))];
        // The waves divide every cluster the change would reach, those whose change is refused included.
        const selection = new Set([...clusterIds, ...refusedChanges.map((skip) => skip.clusterId)]).size;
        const sized = waveSizesOf(request.waves, refusedChanges.length > 0 ? selection : clusterIds.length);
        if (selection > 0 && 'reasons' in sized) {
          reasons.push(rolloutReasons.wavesIncomplete);
          causes.push(...sized.reasons.map((message) => ({ path: 'request.waves', message })));
        }
        if (reasons.length > 0 || !('sizes' in sized)) {
          throw refuse('invalid-request', reasons, { causes });
        }
        const waveOf = new Map<string, number>();
        let next = 0;
        sized.sizes.forEach((size, wave) => {
          for (const clusterId of clusterIds.slice(next, next + size)) {
            waveOf.set(clusterId, wave);
          }
          next += size;
        });
        const now = Date.now();
        generatedOnCommit('rollout.id', 'rollout.operationId', 'operation.operationId', 'operation.rollout.rolloutId');
        const id = `rollout-${randomUUID()}`;
        const targets: IRolloutStoredTarget[] = computed.targets.map((target) => ({ ...target, wave: waveOf.get(target.clusterId)! }));
        await claimServices(id, targets.map((target) => target.serviceId), now);
        const gate: IRolloutGate = {
          timeoutMs: request.gate?.timeoutMs ?? rolloutLimits.defaultTimeoutMs,
          maxFailures: request.gate?.maxFailures ?? 0,
        };
        const doc = await store.insert(rolloutKind, {
          id,
          selector: computed.plan.selector,
          serviceName: request.serviceName,
          organizationId: request.organizationId ?? null,
          change: request.change,
          gate,
          onFailure: request.onFailure ?? 'halt',
          maxConcurrent: request.maxConcurrent ?? rolloutLimits.maximumConcurrent,
          waves: request.waves.map((wave, index) => ({
            clusterIds: clusterIds.filter((clusterId) => waveOf.get(clusterId) === index),
            pauseMs: wave.pauseMs ?? 0,
            requiresApproval: wave.requiresApproval ?? false,
          })),
          targets,
          skipped: computed.plan.skipped,
          createdBy: context.identity.userId,
          createdAt: now,
          paused: false,
          approvedWaves: [],
          abort: null,
        });
        if (!doc) {
          throw refuseNamed('conflict', 'rollout-id-collided', 'rollout id collided; try again');
        }
        // The operation after the rollout: a crash between the two leaves a rollout whose
        // controller stores the same operation on its first look, never an operation without a rollout.
        const operation = await store.insert(operationKind, initialRolloutOperation(doc)) ?? await store.get(operationKind, id);
        return { rollout: toPublicRollout(doc, null, operation), plan: computed.plan, operation: toPublicRolloutOperation(operation!, null) };
      },
    }),

    adminQuery({
      method: 'getRollouts',
      access: 'read',
      input: { required: {}, optional: orderedPageShape('getRollouts', newestFirst('createdAt')) },
      run: async (request) => {
        const page = await findPage(store, rolloutKind, {}, 'getRollouts', request, newestFirst('createdAt'));
        const ids = page.items.map((doc) => doc.id);
        const [progress, operations] = ids.length === 0 ? [[], []] : await Promise.all([
          store.findIn(rolloutProgressKind, 'id', ids),
          store.findIn(operationKind, 'id', ids),
        ]);
        const progressOf = new Map(progress.map((doc) => [doc.id, doc]));
        const operationOf = new Map(operations.map((doc) => [doc.id, doc]));
        return { rollouts: page.items.map((doc) => toPublicRollout(doc, progressOf.get(doc.id) ?? null, operationOf.get(doc.id) ?? null)), ...nextCursorMember(page) };
      },
    }),

    adminQuery({
      method: 'getRollout',
      access: 'read',
      input: { required: { rolloutId: isIdString } },
      run: async (request) => {
        const { doc, progress, operation } = await readRollout(store, request.rolloutId);
        return { rollout: toPublicRollout(doc, progress, operation) };
      },
    }),

    adminMutation({
      method: 'pauseRollout',
      access: 'write',
      input: controlInput,
      facts: async (request) => ({ finished: await isFinished(request.rolloutId) }),
      target: (request) => ({ kind: rolloutKind, id: request.rolloutId }),
      decide: (current, { request, facts }) => decideControl(current, request, facts.finished, (doc) => (doc.paused ? 'keep' : { paused: true })),
      answer: ({ doc }) => answerOf(doc!),
    }),

    adminMutation({
      method: 'resumeRollout',
      access: 'write',
      input: controlInput,
      facts: async (request) => ({ finished: await isFinished(request.rolloutId) }),
      target: (request) => ({ kind: rolloutKind, id: request.rolloutId }),
      decide: (current, { request, facts }) => decideControl(current, request, facts.finished, (doc) => (doc.paused ? { paused: false } : 'keep')),
      answer: ({ doc }) => answerOf(doc!),
    }),

    adminMutation({
      method: 'approveRolloutWave',
      access: 'write',
      input: { required: { ...controlInput.required, wave: isNonNegativeInteger } },
      facts: async (request) => ({ finished: await isFinished(request.rolloutId) }),
      target: (request) => ({ kind: rolloutKind, id: request.rolloutId }),
      decide: (current, { request, facts }) => decideControl(current, request, facts.finished, (doc) => {
        if (request.wave >= doc.waves.length || !doc.waves[request.wave].requiresApproval) {
          return { refuse: refuseNamed('conflict', rolloutReasons.waveNotWaiting, `wave ${request.wave} does not require an approval`, 'request.wave') };
        }
        return doc.approvedWaves.includes(request.wave) ? 'keep' : { approvedWaves: [...doc.approvedWaves, request.wave].sort((a, b) => a - b) };
      }),
      answer: ({ doc }) => answerOf(doc!),
    }),

    adminMutation({
      method: 'abortRollout',
      access: 'write',
      input: { required: controlInput.required, optional: { revert: isBoolean } },
      facts: async (request) => ({ finished: await isFinished(request.rolloutId), now: Date.now() }),
      target: (request) => ({ kind: rolloutKind, id: request.rolloutId }),
      decide: (current, { request, facts }) => decideControl(current, request, facts.finished, (doc) =>
        (doc.abort && (doc.abort.revert || !request.revert) ? 'keep' : { abort: { revert: request.revert ?? false, at: facts.now } })),
      answer: ({ doc }) => answerOf(doc!),
    }),
  ];
};
