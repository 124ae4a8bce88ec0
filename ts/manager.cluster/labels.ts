import { describedCheck, problemsOfSentences, stringSchema, type TFieldCheck } from '../core/validation.js';
import { clusterLabelLimits, parseLabelSelector, validateClusterLabels, type ILabelSelector } from '../interfaces/data/clusterlabels.js';
import { clusterSelectorFilter } from './documents.js';

/**
 * Field checks and filters of cluster labels and selectors, shared by the cluster list, the fleet
 * overview and rollouts: every problem of a selector is answered at its path, in one refusal.
 */

// The schema states the length; the grammar (docs/rollouts.md) only the parser can judge.
export const isLabelSelectorText: TFieldCheck = describedCheck(stringSchema(0, clusterLabelLimits.maximumSelectorLength), (valueArg, pathArg) => {
  const parsed = parseLabelSelector(valueArg, pathArg);
  return 'reasons' in parsed ? problemsOfSentences(parsed.reasons, pathArg) : [];
});

export const isClusterLabels: TFieldCheck = (valueArg, pathArg) => problemsOfSentences(validateClusterLabels(valueArg, pathArg), pathArg);

/** The selector of a request whose field check passed (an absent one selects every cluster). */
export const selectorOf = (textArg: string | undefined): ILabelSelector => {
  const parsed = parseLabelSelector(textArg ?? '');
  return 'selector' in parsed ? parsed.selector : { requirements: [] };
};

/** The database filter of a request's selector text. */
export const clusterFilterOf = (textArg: string | undefined): Record<string, unknown> => clusterSelectorFilter(selectorOf(textArg));
