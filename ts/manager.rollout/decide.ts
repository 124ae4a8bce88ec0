import type { IServiceWritableSpec } from '../interfaces/data/service.js';
import type { IRolloutChange, IRolloutWaveSpec } from '../interfaces/data/rollout.js';
import { canonicalizeJson } from '../interfaces/private/canonicaljson.js';
import type { IRolloutDocument, IRolloutProgressDocument, IRolloutTargetRecord } from './documents.js';
import { terminalRolloutStates } from './documents.js';

/**
 * The rollout's pure decisions: what a change makes of a spec, how waves divide a selection, and
 * the next step of a running rollout from what is stored now (`advanceRollout`). The controller
 * (./rollout.controller.ts) reads the facts, asks this module, and performs what it answers.
 */

export const rolloutLimits = Object.freeze({
  maximumWaves: 64,
  maximumPauseMs: 7 * 24 * 3_600_000,
  minimumTimeoutMs: 100,
  maximumTimeoutMs: 24 * 3_600_000,
  defaultTimeoutMs: 600_000,
  maximumConcurrent: 100_000,
});


/** A spec with a rollout's change applied: each member the change names replaces the spec's. */
export const applyRolloutChange = (specArg: IServiceWritableSpec, changeArg: IRolloutChange): IServiceWritableSpec => ({
  ...specArg,
  runtime: {
    ...specArg.runtime,
    ...(changeArg.image === undefined ? {} : { image: changeArg.image }),
    ...(changeArg.replicas === undefined ? {} : { replicas: changeArg.replicas }),
  },
  ...(changeArg.ports === undefined ? {} : { ports: changeArg.ports }),
  ...(changeArg.routes === undefined ? {} : { routes: changeArg.routes }),
});

export const sameSpec = (leftArg: IServiceWritableSpec, rightArg: IServiceWritableSpec): boolean =>
  canonicalizeJson(leftArg) === canonicalizeJson(rightArg);

const changeMembers = ['image', 'replicas', 'ports', 'routes'];

/**
 * Every reason a value is not a rollout change, as sentences by path. Only the shape is judged
 * here; what the change makes of each service's spec is judged against the contract per service.
 */
export const validateRolloutChange = (valueArg: unknown, pathArg = 'change'): string[] => {
  if (valueArg === null || typeof valueArg !== 'object' || Array.isArray(valueArg)) {
    return [`${pathArg} must be an object naming at least one of ${changeMembers.join(', ')}`];
  }
  const record = valueArg as Record<string, unknown>;
  const reasons = Object.keys(record).filter((key) => !changeMembers.includes(key)).map((key) => `${pathArg}.${key} is not a member a rollout may change`);
  if (!changeMembers.some((key) => Object.hasOwn(record, key))) {
    reasons.push(`${pathArg} must name at least one of ${changeMembers.join(', ')}`);
  }
  if (Object.hasOwn(record, 'image') && (typeof record.image !== 'string' || record.image.length === 0)) {
    reasons.push(`${pathArg}.image must be a non-empty string`);
  }
  if (Object.hasOwn(record, 'replicas') && (!Number.isSafeInteger(record.replicas) || (record.replicas as number) < 0)) {
    reasons.push(`${pathArg}.replicas must be a non-negative integer`);
  }
  for (const key of ['ports', 'routes']) {
    if (Object.hasOwn(record, key) && !Array.isArray(record[key])) {
      reasons.push(`${pathArg}.${key} must be an array`);
    }
  }
  return reasons;
};

/** Every reason a value is not a list of waves (its shape; whether they cover the selection is `waveSizesOf`). */
export const validateRolloutWaves = (valueArg: unknown, pathArg = 'waves'): string[] => {
  if (!Array.isArray(valueArg) || valueArg.length === 0 || valueArg.length > rolloutLimits.maximumWaves) {
    return [`${pathArg} must be an array of 1 to ${rolloutLimits.maximumWaves} waves`];
  }
  return valueArg.flatMap((waveArg: unknown, index) => {
    const path = `${pathArg}[${index}]`;
    if (waveArg === null || typeof waveArg !== 'object' || Array.isArray(waveArg)) {
      return [`${path} must be an object with clusters or percent`];
    }
    const wave = waveArg as Record<string, unknown>;
    const reasons = Object.keys(wave).filter((key) => !['clusters', 'percent', 'pauseMs', 'requiresApproval'].includes(key))
      .map((key) => `${path}.${key} is not a member of a wave`);
    const hasClusters = Object.hasOwn(wave, 'clusters');
    const hasPercent = Object.hasOwn(wave, 'percent');
    if (hasClusters === hasPercent) {
      reasons.push(`${path} must name exactly one of clusters or percent`);
    }
    if (hasClusters && (!Number.isSafeInteger(wave.clusters) || (wave.clusters as number) < 1)) {
      reasons.push(`${path}.clusters must be a positive integer`);
    }
    if (hasPercent && (typeof wave.percent !== 'number' || !(wave.percent > 0 && wave.percent <= 100))) {
      reasons.push(`${path}.percent must be a number above 0 and at most 100`);
    }
    if (Object.hasOwn(wave, 'pauseMs') && (!Number.isSafeInteger(wave.pauseMs) || (wave.pauseMs as number) < 0 || (wave.pauseMs as number) > rolloutLimits.maximumPauseMs)) {
      reasons.push(`${path}.pauseMs must be an integer from 0 to ${rolloutLimits.maximumPauseMs}`);
    }
    if (Object.hasOwn(wave, 'requiresApproval') && typeof wave.requiresApproval !== 'boolean') {
      reasons.push(`${path}.requiresApproval must be a boolean`);
    }
    return reasons;
  });
};

/**
 * How many clusters each wave takes of `totalArg` (in order): a count as given, a percentage of
 * the total rounded up. The waves must reach every cluster, and each must take at least one; the
 * last may take fewer than it asks for (what is left).
 */
export const waveSizesOf = (wavesArg: readonly IRolloutWaveSpec[], totalArg: number): { sizes: number[] } | { reasons: string[] } => {
  const sizes: number[] = [];
  const reasons: string[] = [];
  let taken = 0;
  wavesArg.forEach((wave, index) => {
    const asked = wave.clusters ?? Math.ceil(((wave.percent ?? 0) / 100) * totalArg);
    const size = Math.min(asked, totalArg - taken);
    if (size <= 0) {
      reasons.push(`waves[${index}] takes no cluster: the waves before it already cover all ${totalArg}`);
    }
    sizes.push(size);
    taken += Math.max(size, 0);
  });
  if (taken < totalArg) {
    reasons.push(`waves cover ${taken} of the ${totalArg} clusters selected`);
  }
  return reasons.length > 0 ? { reasons } : { sizes };
};

/** What the controller reads before each step: the stored verdicts of the rollout's services, and which clusters are dark. */
export interface IRolloutFacts {
  verdicts: ReadonlyMap<string, { specRevision: number; state: string; reason: string | null; unknown: boolean }>;
  darkClusters: ReadonlySet<string>;
}

export type TRolloutEffect = { kind: 'apply'; serviceId: string } | { kind: 'revert'; serviceId: string };

export interface IRolloutAdvance {
  progress: IRolloutProgressDocument;
  effects: TRolloutEffect[];
  /** When to look again although nothing changes (a gate's timeout, a pause between waves). */
  requeueAfterMs: number | null;
}

/** The progress a rollout starts with: every target pending, the first wave next. */
export const initialRolloutProgress = (docArg: IRolloutDocument): Omit<IRolloutProgressDocument, 'generation'> => ({
  id: docArg.id,
  state: 'pending',
  currentWave: 0,
  failures: 0,
  waves: docArg.waves.map(() => ({ state: 'pending', startedAt: null, endedAt: null, notBefore: null })),
  targets: docArg.targets.map((target) => ({
    serviceId: target.serviceId,
    state: 'pending',
    reason: null,
    appliedGeneration: null,
    newSpecRevision: null,
    revertedSpecRevision: null,
    applying: false,
    updatedAt: null,
  })),
  reverting: false,
  endedAt: null,
});

const failureReasons = new Set(['failure-backoff']);

/** Whether the rollout makes no new change any more: aborted, or failed past its budget. */
export const isStopping = (docArg: IRolloutDocument, progressArg: IRolloutProgressDocument): boolean =>
  docArg.abort !== null || progressArg.reverting || progressArg.failures > docArg.gate.maxFailures;

/** Whether a target took the change (its service may need a revert). */
export const isApplied = (recordArg: IRolloutTargetRecord): boolean => recordArg.newSpecRevision !== null && recordArg.state !== 'reverted';

/**
 * The next step of a rollout from what is stored now: the gate's judgement of every changed
 * service, an abort or a failure past the budget (halt, or revert every changed service at once),
 * a pause, the start of the next wave (after its pause and approval), and which services to change
 * next within the pacing bound. Pure: answers the progress to store and the changes to make.
 */
export const advanceRollout = (docArg: IRolloutDocument, progressArg: IRolloutProgressDocument, factsArg: IRolloutFacts, nowArg: number): IRolloutAdvance => {
  const progress: IRolloutProgressDocument = structuredClone(progressArg);
  const effects: TRolloutEffect[] = [];
  if (terminalRolloutStates.includes(progress.state)) {
    return { progress, effects, requeueAfterMs: null };
  }
  const targetOf = new Map(docArg.targets.map((target) => [target.serviceId, target]));
  const deadlines: number[] = [];

  // The gate: each changed service converged at its new revision, or failed (refused, its workload
  // failing to start, or the gate's time over).
  for (const record of progress.targets) {
    if (record.state !== 'updating' || record.newSpecRevision === null || progress.reverting) {
      continue;
    }
    const verdict = factsArg.verdicts.get(record.serviceId);
    if (verdict && !verdict.unknown && verdict.specRevision === record.newSpecRevision) {
      if (verdict.state === 'converged') {
        Object.assign(record, { state: 'converged', reason: null });
        continue;
      }
      if (verdict.state === 'refused' || (verdict.state === 'waiting' && failureReasons.has(verdict.reason ?? ''))) {
        Object.assign(record, { state: 'failed', reason: verdict.reason });
        progress.failures += 1;
        continue;
      }
    }
    const deadline = (record.updatedAt ?? nowArg) + docArg.gate.timeoutMs;
    if (nowArg >= deadline) {
      Object.assign(record, { state: 'failed', reason: 'gate-timeout' });
      progress.failures += 1;
    } else {
      deadlines.push(deadline);
    }
  }

  const stopEverythingPending = (waveStateArg: 'failed' | 'cancelled') => {
    for (const record of progress.targets) {
      if (record.state === 'pending') {
        Object.assign(record, { state: 'cancelled', reason: null });
      }
    }
    progress.waves.forEach((wave, index) => {
      if (wave.state === 'pending' || wave.state === 'waiting-approval' || wave.state === 'running') {
        wave.state = index === progress.currentWave ? waveStateArg : 'cancelled';
        wave.endedAt = nowArg;
      }
    });
  };

  // A change started before a crash whose commit is not known yet: settled before the rollout may
  // end (the controller makes no new change once the rollout stops; it only records one that committed).
  const unsettled: TRolloutEffect[] = progress.targets
    .filter((record) => record.applying && record.newSpecRevision === null && record.state === 'updating')
    .map((record) => ({ kind: 'apply', serviceId: record.serviceId }));
  if (docArg.abort && !progress.reverting) {
    stopEverythingPending('cancelled');
    if (docArg.abort.revert) {
      progress.reverting = true;
    }
  } else if (isStopping(docArg, progress) && !progress.reverting) {
    stopEverythingPending('failed');
    if (docArg.onFailure === 'revert') {
      progress.reverting = true;
    } else if (unsettled.length > 0) {
      return { progress, effects: unsettled, requeueAfterMs: null };
    } else {
      progress.state = 'halted';
      progress.endedAt = nowArg;
      return { progress, effects, requeueAfterMs: null };
    }
  }
  if (docArg.abort && !progress.reverting) {
    if (unsettled.length > 0) {
      return { progress, effects: unsettled, requeueAfterMs: null };
    }
    progress.state = 'aborted';
    progress.endedAt = nowArg;
    return { progress, effects, requeueAfterMs: null };
  }
  if (progress.reverting) {
    // Every changed service back at once: no waves, no gate on the way back.
    for (const record of progress.targets) {
      if (isApplied(record) && record.reason !== 'revert-conflict' && record.state !== 'cancelled') {
        effects.push({ kind: 'revert', serviceId: record.serviceId });
      } else if (record.state === 'updating' && record.newSpecRevision === null && record.applying) {
        // A change whose commit is not known yet: the apply step settles it first.
        effects.push({ kind: 'apply', serviceId: record.serviceId });
      }
    }
    if (effects.length === 0) {
      progress.state = docArg.abort ? 'aborted' : 'halted';
      progress.endedAt = nowArg;
    }
    return { progress, effects, requeueAfterMs: null };
  }

  // A change started before a crash is settled first, whatever else holds.
  for (const record of progress.targets) {
    if (record.applying && record.newSpecRevision === null && record.state === 'updating') {
      effects.push({ kind: 'apply', serviceId: record.serviceId });
    }
  }
  if (docArg.paused) {
    progress.state = 'paused';
    return { progress, effects, requeueAfterMs: deadlines.length > 0 ? Math.max(0, Math.min(...deadlines) - nowArg) : null };
  }

  for (;;) {
    const index = progress.currentWave;
    const wave = progress.waves[index];
    const asked = docArg.waves[index];
    if (wave.state === 'pending') {
      if (wave.notBefore !== null && nowArg < wave.notBefore) {
        progress.state = 'running';
        deadlines.push(wave.notBefore);
        break;
      }
      wave.state = asked.requiresApproval && !docArg.approvedWaves.includes(index) ? 'waiting-approval' : 'running';
      if (wave.state === 'running') {
        wave.startedAt = nowArg;
      }
    }
    if (wave.state === 'waiting-approval') {
      if (!docArg.approvedWaves.includes(index)) {
        progress.state = 'waiting-approval';
        break;
      }
      wave.state = 'running';
      wave.startedAt = nowArg;
    }
    progress.state = 'running';
    const records = progress.targets.filter((record) => targetOf.get(record.serviceId)?.wave === index);
    let inFlight = progress.targets.filter((record) => record.state === 'updating').length;
    for (const record of records) {
      if (record.state !== 'pending') {
        continue;
      }
      const clusterId = targetOf.get(record.serviceId)!.clusterId;
      if (factsArg.darkClusters.has(clusterId)) {
        // A dark cluster never blocks a wave: skipped and listed.
        Object.assign(record, { state: 'skipped', reason: 'cluster-unknown', updatedAt: nowArg });
        continue;
      }
      if (inFlight < docArg.maxConcurrent) {
        effects.push({ kind: 'apply', serviceId: record.serviceId });
        inFlight += 1;
      }
    }
    const settled = records.every((record) => ['converged', 'failed', 'conflict', 'skipped'].includes(record.state));
    if (!settled || effects.length > 0) {
      break;
    }
    wave.state = 'passed';
    wave.endedAt = nowArg;
    if (index + 1 >= progress.waves.length) {
      progress.state = 'completed';
      progress.endedAt = nowArg;
      break;
    }
    progress.currentWave = index + 1;
    progress.waves[index + 1].notBefore = asked.pauseMs > 0 ? nowArg + asked.pauseMs : null;
  }
  const next = deadlines.length > 0 ? Math.max(0, Math.min(...deadlines) - nowArg) : null;
  return { progress, effects, requeueAfterMs: next };
};
