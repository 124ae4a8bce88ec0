import type {
  IRollout,
  IRolloutChange,
  IRolloutWaveSpec,
  TRolloutState,
  TRolloutTargetState,
} from '../../ts/interfaces/data/rollout.js';
import type { IChangeEvent } from '../../ts/interfaces/requests/watch.js';
import { parseLabelSelector, validateClusterLabels } from '../../ts/interfaces/data/clusterlabels.js';

/**
 * The Rollouts page's decisions, pure so the decision tests cover them without a browser: which
 * watch events name a rollout, how the form becomes a request, what each wave counts, and which
 * actions a rollout offers in its state.
 */

/** The two document kinds a rollout is kept in (what was asked, and what it got). */
const rolloutKinds = new Set(['CloudlyRollout', 'CloudlyRolloutProgress']);

/** The rollout a watch event is about, or null: the event carries no body, so the page reads it again by this id. */
export const rolloutIdOfChange = (changeArg: Pick<IChangeEvent, 'kind' | 'id'>): string | null =>
  (rolloutKinds.has(changeArg.kind) ? changeArg.id : null);

export const endedRolloutStates: readonly TRolloutState[] = ['completed', 'halted', 'aborted'];

export interface IRolloutFormFields {
  selector: string;
  serviceName: string;
  image: string;
  replicas: string;
  /** Waves one after another, comma-separated: `1, 50%, 50%` (a count or a percentage). */
  waves: string;
  /** Every wave after the canary waits for an administrator's approval. */
  approveEachWave: boolean;
  onFailure: 'halt' | 'revert';
}

export interface IRolloutRequestOfForm {
  selector: string;
  serviceName: string;
  change: IRolloutChange;
  waves: IRolloutWaveSpec[];
  onFailure: 'halt' | 'revert';
}

/**
 * The request the form states, or every reason it cannot be sent (as the form's paths). Cloudly
 * judges the rest (a selector's syntax, a change the contract refuses, waves that do not cover the
 * selection) and names it in its refusal.
 */
export const rolloutRequestOfForm = (fieldsArg: IRolloutFormFields): { request?: IRolloutRequestOfForm; reasons: string[] } => {
  const reasons: string[] = [];
  const serviceName = fieldsArg.serviceName.trim();
  if (!serviceName) {
    reasons.push('serviceName: a service name is required');
  }
  const change: IRolloutChange = {};
  const image = fieldsArg.image.trim();
  if (image) {
    change.image = image;
  }
  const replicasText = fieldsArg.replicas.trim();
  if (replicasText) {
    const replicas = Number(replicasText);
    if (!/^\d+$/.test(replicasText) || !Number.isSafeInteger(replicas)) {
      reasons.push(`replicas: "${replicasText}" is not a whole number`);
    } else {
      change.replicas = replicas;
    }
  }
  if (!image && !replicasText) {
    reasons.push('change: name a new image or a replica count');
  }
  const waves: IRolloutWaveSpec[] = [];
  const waveTexts = fieldsArg.waves.split(',').map((text) => text.trim()).filter((text) => text !== '');
  if (waveTexts.length === 0) {
    reasons.push('waves: at least one wave is required');
  }
  waveTexts.forEach((text, index) => {
    const percent = /^(\d+)\s*%$/.exec(text);
    const approval = fieldsArg.approveEachWave && index > 0 ? { requiresApproval: true } : {};
    if (percent) {
      waves.push({ percent: Number(percent[1]), ...approval });
    } else if (/^\d+$/.test(text)) {
      waves.push({ clusters: Number(text), ...approval });
    } else {
      reasons.push(`waves[${index}]: "${text}" is neither a cluster count nor a percentage`);
    }
  });
  if (reasons.length > 0) {
    return { reasons };
  }
  return { request: { selector: fieldsArg.selector.trim(), serviceName, change, waves, onFailure: fieldsArg.onFailure }, reasons };
};

/** How a change reads in a sentence: `image registry/app:2, replicas 3`. */
export const describeRolloutChange = (changeArg: IRolloutChange): string => {
  const parts: string[] = [];
  if (changeArg.image !== undefined) {
    parts.push(`image ${changeArg.image}`);
  }
  if (changeArg.replicas !== undefined) {
    parts.push(`replicas ${changeArg.replicas}`);
  }
  if (changeArg.ports !== undefined) {
    parts.push(`${changeArg.ports.length} port(s)`);
  }
  if (changeArg.routes !== undefined) {
    parts.push(`${changeArg.routes.length} route(s)`);
  }
  return parts.join(', ') || 'nothing';
};

export interface IRolloutWaveSummary {
  index: number;
  state: IRollout['waves'][number]['state'];
  requiresApproval: boolean;
  /** How many of the wave's services are in each state; states with none are absent. */
  counts: Partial<Record<TRolloutTargetState, number>>;
  total: number;
  /** The services that did not converge, with the reason Cloudly named. */
  failures: Array<{ clusterName: string; serviceId: string; state: TRolloutTargetState; reason: string | null }>;
}

const failedTargetStates: readonly TRolloutTargetState[] = ['failed', 'conflict'];

/** Each wave's progress as counts by state, with its failures named. */
export const rolloutWaveSummaries = (rolloutArg: Pick<IRollout, 'waves' | 'targets'>): IRolloutWaveSummary[] =>
  rolloutArg.waves.map((wave) => {
    const targets = rolloutArg.targets.filter((target) => target.wave === wave.index);
    const counts: Partial<Record<TRolloutTargetState, number>> = {};
    for (const target of targets) {
      counts[target.state] = (counts[target.state] ?? 0) + 1;
    }
    return {
      index: wave.index,
      state: wave.state,
      requiresApproval: wave.requiresApproval,
      counts,
      total: targets.length,
      failures: targets
        .filter((target) => failedTargetStates.includes(target.state))
        .map((target) => ({ clusterName: target.clusterName, serviceId: target.serviceId, state: target.state, reason: target.reason })),
    };
  });

export type TRolloutAction = 'approve' | 'pause' | 'resume' | 'abort';

/**
 * The actions a rollout offers in its state: approve the wave that waits for approval, pause a
 * rollout that is changing services, resume a paused one, abort any that has not ended. The wave
 * to approve is the first one waiting (Cloudly starts waves in order).
 */
export const rolloutActions = (rolloutArg: Pick<IRollout, 'state' | 'paused' | 'waves'>): Array<{ action: TRolloutAction; wave?: number }> => {
  if (endedRolloutStates.includes(rolloutArg.state)) {
    return [];
  }
  const actions: Array<{ action: TRolloutAction; wave?: number }> = [];
  const waiting = rolloutArg.waves.find((wave) => wave.state === 'waiting-approval');
  if (waiting) {
    actions.push({ action: 'approve', wave: waiting.index });
  }
  actions.push(rolloutArg.paused ? { action: 'resume' } : { action: 'pause' });
  actions.push({ action: 'abort' });
  return actions;
};

/** The rollouts newest first, with one replaced by its fresher read (or added, when new). */
export const withRollout = (rolloutsArg: readonly IRollout[], freshArg: IRollout): IRollout[] => {
  const at = rolloutsArg.findIndex((rollout) => rollout.id === freshArg.id);
  if (at < 0) {
    return [freshArg, ...rolloutsArg].sort((a, b) => b.createdAt - a.createdAt);
  }
  const copy = [...rolloutsArg];
  copy[at] = freshArg;
  return copy;
};

// ---- cluster labels ----

/** A cluster's labels as one line, in key order: `env=prod, tier=web` (empty when it has none). */
export const labelsText = (labelsArg: Readonly<Record<string, string>> | undefined): string =>
  Object.entries(labelsArg ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([key, value]) => `${key}=${value}`).join(', ');

/**
 * Labels typed as `key=value` pairs separated by commas or new lines, judged by the contract's own
 * rules; every problem is named, a repeated key too. An empty text removes every label.
 */
export const labelsOfText = (textArg: string): { labels?: Record<string, string>; reasons: string[] } => {
  const labels: Record<string, string> = {};
  const reasons: string[] = [];
  for (const entry of textArg.split(/[,\n]/).map((text) => text.trim()).filter((text) => text !== '')) {
    const at = entry.indexOf('=');
    if (at < 0) {
      reasons.push(`labels: "${entry}" is not key=value`);
      continue;
    }
    const key = entry.slice(0, at).trim();
    if (Object.prototype.hasOwnProperty.call(labels, key)) {
      reasons.push(`labels.${key} is given twice`);
      continue;
    }
    labels[key] = entry.slice(at + 1).trim();
  }
  reasons.push(...validateClusterLabels(labels));
  return reasons.length > 0 ? { reasons } : { labels, reasons };
};

/** The reasons a typed selector is not one (none for an empty one, which selects every cluster). */
export const selectorReasons = (textArg: string): string[] => {
  const parsed = parseLabelSelector(textArg);
  return 'reasons' in parsed ? parsed.reasons : [];
};
