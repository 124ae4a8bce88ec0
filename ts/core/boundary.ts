/**
 * The one place where bytes from outside become values: every JSON text that reaches Cloudly (an
 * HTTP body, a socket text frame, a relay's answer to Cloudly's call) is parsed and inspected here
 * before anything else reads it. The inspection is iterative, so no nesting depth an attacker picks
 * can overflow the stack, and it refuses the keys that turn data into behaviour elsewhere:
 * `__proto__` (becomes a prototype when a library copies the object key by key),
 * `constructor.prototype`, and typedrequest's stream markers (each one registers a stream for good).
 */

/** Limits of one parsed text. A 1 MiB body holds at most ~500,000 values, so the count bounds work. */
export const boundaryLimits = Object.freeze({
  /** Containers nested inside each other, counting the envelope itself as depth 1. */
  maxDepth: 64,
  /** Values of every kind (containers and scalars) in one text. */
  maxValues: 200_000,
  /** Problems (causes) listed in one refusal; the walk stops after this many. */
  maxReasons: 16,
});

/**
 * The reasons of the parser's refusals (`invalid-request`); each problem is also a cause naming
 * its path and saying it for people.
 */
export const boundaryReasons = Object.freeze({
  notJson: 'not-json',
  nestedTooDeep: 'nested-too-deep',
  tooManyValues: 'too-many-values',
  keyNotAllowed: 'key-not-allowed',
  /** The envelope around the request: `method`, `correlation`, a response's `error`. */
  envelopeInvalid: 'envelope-invalid',
} as const);

/** One problem of a text: the member it is about, its token and its sentence. */
export interface IBoundaryProblem {
  path: string;
  reason: string;
  message: string;
}

/** Keys no caller may send at any depth; each names what it would do. */
const refusedKeys: ReadonlyMap<string, string> = new Map([
  ['__proto__', 'would replace the prototype of the object holding it'],
  ['_isVirtualStream', 'is a typedrequest stream marker'],
  ['_OBMITTED_VIRTUAL_STREAM', 'is a typedrequest stream marker'],
]);

/** A key printed into a reason is cut to this length, so a refusal cannot echo a huge key. */
const printedKeyLength = 64;

interface IWalkEntry {
  value: object;
  depth: number;
  parent: IWalkEntry | null;
  key: string | number;
}

const printKey = (keyArg: string): string => (keyArg.length > printedKeyLength ? `${keyArg.slice(0, printedKeyLength)}…` : keyArg);

/** `request.items[3].name`, built only when a reason needs it. */
const pathOf = (entryArg: IWalkEntry | null, rootArg: string, leafArg?: string | number): string => {
  const parts: Array<string | number> = leafArg === undefined ? [] : [leafArg];
  for (let entry = entryArg; entry && entry.parent; entry = entry.parent) {
    parts.push(entry.key);
  }
  let path = rootArg;
  for (let index = parts.length - 1; index >= 0; index--) {
    const part = parts[index];
    path = typeof part === 'number' ? `${path}[${part}]` : path ? `${path}.${printKey(part)}` : printKey(part);
  }
  return path || 'value';
};

/**
 * Every problem that keeps a parsed JSON value from crossing the boundary, each naming its path below
 * `rootPathArg` (empty for an envelope, whose members then read `request.…`). Empty when it may.
 */
export const inspectBoundaryValue = (valueArg: unknown, rootPathArg = ''): IBoundaryProblem[] => {
  const problems: IBoundaryProblem[] = [];
  if (valueArg === null || typeof valueArg !== 'object') {
    return problems;
  }
  let values = 1;
  const stack: IWalkEntry[] = [{ value: valueArg, depth: 1, parent: null, key: '' }];
  while (stack.length > 0 && problems.length < boundaryLimits.maxReasons) {
    const entry = stack.pop()!;
    if (entry.depth > boundaryLimits.maxDepth) {
      problems.push({ path: pathOf(entry, rootPathArg), reason: boundaryReasons.nestedTooDeep, message: `is nested deeper than ${boundaryLimits.maxDepth} levels` });
      // One reason for a too-deep branch is enough; its inside is not walked.
      continue;
    }
    if (Array.isArray(entry.value)) {
      const items = entry.value as unknown[];
      values += items.length;
      if (values > boundaryLimits.maxValues) {
        problems.push({ path: rootPathArg || 'text', reason: boundaryReasons.tooManyValues, message: `holds more than ${boundaryLimits.maxValues} values` });
        break;
      }
      for (let index = items.length - 1; index >= 0; index--) {
        const item = items[index];
        if (item !== null && typeof item === 'object') {
          stack.push({ value: item, depth: entry.depth + 1, parent: entry, key: index });
        }
      }
      continue;
    }
    const record = entry.value as Record<string, unknown>;
    const keys = Object.keys(record);
    values += keys.length;
    if (values > boundaryLimits.maxValues) {
      problems.push({ path: rootPathArg || 'text', reason: boundaryReasons.tooManyValues, message: `holds more than ${boundaryLimits.maxValues} values` });
      break;
    }
    for (let index = keys.length - 1; index >= 0; index--) {
      const key = keys[index];
      const child = record[key];
      const refusal = refusedKeys.get(key);
      if (refusal) {
        problems.push({ path: pathOf(entry, rootPathArg, key), reason: boundaryReasons.keyNotAllowed, message: `is not allowed: the key ${refusal}` });
        continue;
      }
      if (key === 'constructor' && child !== null && typeof child === 'object' && Object.hasOwn(child, 'prototype')) {
        problems.push({ path: pathOf(entry, rootPathArg, key), reason: boundaryReasons.keyNotAllowed, message: 'is not allowed: constructor.prototype would reach a prototype' });
        continue;
      }
      if (child !== null && typeof child === 'object') {
        stack.push({ value: child, depth: entry.depth + 1, parent: entry, key });
      }
    }
  }
  return problems.slice(0, boundaryLimits.maxReasons);
};

export type TBoundaryParse =
  | { ok: true; value: unknown }
  | { ok: false; problems: IBoundaryProblem[]; value?: unknown };

/**
 * Parses one JSON text and inspects it. V8's JSON.parse is iterative (a 100,000-deep array parses
 * fine); the recursion that used to crash Cloudly was in what read the value afterwards. `value`
 * is handed back with a refusal too, so the caller can still read a correlation id from its top.
 */
export const parseBoundaryJson = (textArg: string, rootPathArg = '', textNameArg = 'text'): TBoundaryParse => {
  let value: unknown;
  try {
    value = JSON.parse(textArg);
  } catch {
    return { ok: false, problems: [{ path: textNameArg, reason: boundaryReasons.notJson, message: 'is not valid JSON' }] };
  }
  const problems = inspectBoundaryValue(value, rootPathArg);
  return problems.length > 0 ? { ok: false, problems, value } : { ok: true, value };
};
