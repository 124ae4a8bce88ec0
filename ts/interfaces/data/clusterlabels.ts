/**
 * Cluster labels and label selectors in Kubernetes' syntax (project's own definition, after
 * k8s.io/apimachinery's labels package): a key is an optional DNS-subdomain prefix and `/`, then a
 * name of at most 63 characters; a value is empty or at most 63 characters. Pure: the server, the
 * CLI and the dashboard judge the same rules.
 */

export const clusterLabelLimits = Object.freeze({
  maximumNameLength: 63,
  maximumValueLength: 63,
  maximumPrefixLength: 253,
  maximumLabels: 64,
  maximumSelectorLength: 4096,
} as const);

const labelNamePattern = /^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/;
const labelPrefixPattern = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

/** Every reason `keyArg` is not a label key, each a sentence starting with `pathArg`. */
export const validateLabelKey = (keyArg: string, pathArg: string): string[] => {
  const slash = keyArg.indexOf('/');
  const prefix = slash < 0 ? null : keyArg.slice(0, slash);
  const name = slash < 0 ? keyArg : keyArg.slice(slash + 1);
  const reasons: string[] = [];
  if (prefix !== null && (prefix.length === 0 || prefix.length > clusterLabelLimits.maximumPrefixLength || !labelPrefixPattern.test(prefix))) {
    reasons.push(`${pathArg} has a prefix that is not a DNS subdomain of at most ${clusterLabelLimits.maximumPrefixLength} characters`);
  }
  if (name.length === 0 || name.length > clusterLabelLimits.maximumNameLength || !labelNamePattern.test(name)) {
    reasons.push(`${pathArg} must name 1-${clusterLabelLimits.maximumNameLength} characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit`);
  }
  return reasons;
};

/** Every reason `valueArg` is not a label value. */
export const validateLabelValue = (valueArg: unknown, pathArg: string): string[] =>
  typeof valueArg === 'string' && (valueArg === '' || (valueArg.length <= clusterLabelLimits.maximumValueLength && labelNamePattern.test(valueArg)))
    ? []
    : [`${pathArg} must be empty or 1-${clusterLabelLimits.maximumValueLength} characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit`];

/** Every reason a value is not a set of cluster labels (a plain object of key → value). */
export const validateClusterLabels = (valueArg: unknown, pathArg = 'labels'): string[] => {
  if (valueArg === null || typeof valueArg !== 'object' || Array.isArray(valueArg) || Object.getPrototypeOf(valueArg) !== Object.prototype) {
    return [`${pathArg} must be a plain object of label keys to values`];
  }
  const entries = Object.entries(valueArg as Record<string, unknown>);
  if (entries.length > clusterLabelLimits.maximumLabels) {
    return [`${pathArg} must have at most ${clusterLabelLimits.maximumLabels} labels`];
  }
  return entries.flatMap(([key, value]) => [
    ...validateLabelKey(key, `${pathArg}.${key}`),
    ...validateLabelValue(value, `${pathArg}.${key}`),
  ]);
};

/** One requirement of a selector, as Kubernetes names its operators. */
export type TLabelRequirement =
  | { key: string; operator: 'equals' | 'not-equals'; values: [string] }
  | { key: string; operator: 'in' | 'notin'; values: string[] }
  | { key: string; operator: 'exists' | 'not-exists'; values: [] };

/** A parsed selector: every requirement must hold (an empty selector selects everything). */
export interface ILabelSelector {
  requirements: TLabelRequirement[];
}

/** Splits on commas outside parentheses (`a in (x,y),b` is two requirements). */
const splitRequirements = (textArg: string): string[] => {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let index = 0; index < textArg.length; index += 1) {
    const char = textArg[index];
    if (char === '(') {
      depth += 1;
    } else if (char === ')') {
      depth -= 1;
    } else if (char === ',' && depth === 0) {
      parts.push(textArg.slice(start, index));
      start = index + 1;
    }
  }
  parts.push(textArg.slice(start));
  return parts.map((partArg) => partArg.trim());
};

const setPattern = /^(\S+)\s+(in|notin)\s*\((.*)\)$/;
const comparisonPattern = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/;

/**
 * A selector's text parsed once: `env=prod`, `env==prod`, `env!=prod`, `tier in (a,b)`,
 * `tier notin (a,b)`, `gpu`, `!gpu`, joined by commas. Every problem is answered, each a sentence
 * starting with `pathArg` and the requirement's position.
 */
export const parseLabelSelector = (textArg: unknown, pathArg = 'selector'): { selector: ILabelSelector } | { reasons: string[] } => {
  if (typeof textArg !== 'string' || textArg.length > clusterLabelLimits.maximumSelectorLength) {
    return { reasons: [`${pathArg} must be a string of at most ${clusterLabelLimits.maximumSelectorLength} characters`] };
  }
  if (textArg.trim() === '') {
    return { selector: { requirements: [] } };
  }
  const reasons: string[] = [];
  const requirements: TLabelRequirement[] = [];
  splitRequirements(textArg).forEach((part, index) => {
    const path = `${pathArg}[${index}]`;
    if (part === '') {
      reasons.push(`${path} is empty`);
      return;
    }
    const set = setPattern.exec(part);
    if (set) {
      const [, key, operator, list] = set;
      const values = list.split(',').map((valueArg) => valueArg.trim());
      const keyReasons = validateLabelKey(key, path);
      const valueReasons = values.flatMap((valueArg) => validateLabelValue(valueArg, path));
      if (list.trim() === '') {
        reasons.push(`${path} must list at least one value in parentheses`);
      } else if (keyReasons.length + valueReasons.length > 0) {
        reasons.push(...keyReasons, ...valueReasons);
      } else {
        requirements.push({ key, operator: operator as 'in' | 'notin', values: [...new Set(values)] });
      }
      return;
    }
    const comparison = comparisonPattern.exec(part);
    if (comparison) {
      const [, key, operator, value] = comparison;
      const problems = [...validateLabelKey(key, path), ...validateLabelValue(value, path)];
      if (problems.length > 0) {
        reasons.push(...problems);
      } else {
        requirements.push({ key, operator: operator === '!=' ? 'not-equals' : 'equals', values: [value] });
      }
      return;
    }
    const negated = part.startsWith('!');
    const key = negated ? part.slice(1).trim() : part;
    if (/[\s()=!]/.test(key)) {
      reasons.push(`${path} is not a requirement: write key=value, key!=value, key in (a,b), key notin (a,b), key or !key`);
      return;
    }
    const keyReasons = validateLabelKey(key, path);
    if (keyReasons.length > 0) {
      reasons.push(...keyReasons);
      return;
    }
    requirements.push({ key, operator: negated ? 'not-exists' : 'exists', values: [] });
  });
  return reasons.length > 0 ? { reasons } : { selector: { requirements } };
};

/** Whether a cluster's labels satisfy every requirement (Kubernetes' semantics: `!=` and `notin` hold where the key is absent). */
export const labelsMatch = (selectorArg: ILabelSelector, labelsArg: Readonly<Record<string, string>>): boolean =>
  selectorArg.requirements.every((requirement) => {
    const has = Object.hasOwn(labelsArg, requirement.key);
    const value = has ? labelsArg[requirement.key] : undefined;
    switch (requirement.operator) {
      case 'equals':
        return value === requirement.values[0];
      case 'not-equals':
        return value !== requirement.values[0];
      case 'in':
        return value !== undefined && requirement.values.includes(value);
      case 'notin':
        return value === undefined || !requirement.values.includes(value);
      case 'exists':
        return has;
      case 'not-exists':
        return !has;
    }
  });

/** The selector written back as text, requirements in their order (for answers and tables). */
export const formatLabelSelector = (selectorArg: ILabelSelector): string =>
  selectorArg.requirements.map((requirement) => {
    switch (requirement.operator) {
      case 'equals':
        return `${requirement.key}=${requirement.values[0]}`;
      case 'not-equals':
        return `${requirement.key}!=${requirement.values[0]}`;
      case 'in':
      case 'notin':
        return `${requirement.key} ${requirement.operator} (${requirement.values.join(',')})`;
      case 'exists':
        return requirement.key;
      case 'not-exists':
        return `!${requirement.key}`;
    }
  }).join(',');
