/**
 * A field-level diff of two JSON-like values, for every review in the dashboard: what the change
 * does, field by field (`runtime.image: "…:1" → "…:2"`), instead of the whole new value. Pure:
 * no DOM, no Lit (test/dashboard.diff.decision.test.ts).
 */

/** One changed field: its path, the value before and after (`undefined`: absent on that side). */
export interface IFieldChange {
  path: string;
  before: unknown;
  after: unknown;
}

const isRecord = (valueArg: unknown): valueArg is Record<string, unknown> =>
  typeof valueArg === 'object' && valueArg !== null && !Array.isArray(valueArg);

const join = (pathArg: string, keyArg: string): string =>
  (/^[A-Za-z_$][\w$]*$/.test(keyArg) ? (pathArg ? `${pathArg}.${keyArg}` : keyArg) : `${pathArg}[${JSON.stringify(keyArg)}]`);

/**
 * Every field that differs between `beforeArg` and `afterArg`, in the order of `afterArg`'s keys
 * then the removed ones. Objects are compared member by member and arrays element by element
 * (a longer or shorter array adds or removes elements at the end), an absent one as empty; any
 * other value, or two values of different kinds, is one change at its path. Equal values give no change, so an empty answer
 * means "nothing changes". A member that is `undefined` counts as absent.
 */
export const fieldDiff = (beforeArg: unknown, afterArg: unknown, pathArg = ''): IFieldChange[] => {
  if (Object.is(beforeArg, afterArg)) {
    return [];
  }
  // An absent side of an object or array is compared as an empty one: every member is added or removed.
  if (beforeArg === undefined && (isRecord(afterArg) || Array.isArray(afterArg))) {
    return fieldDiff(Array.isArray(afterArg) ? [] : {}, afterArg, pathArg);
  }
  if (afterArg === undefined && (isRecord(beforeArg) || Array.isArray(beforeArg))) {
    return fieldDiff(beforeArg, Array.isArray(beforeArg) ? [] : {}, pathArg);
  }
  if (isRecord(beforeArg) && isRecord(afterArg)) {
    const keys = [...Object.keys(afterArg), ...Object.keys(beforeArg).filter((key) => !Object.hasOwn(afterArg, key))];
    return keys.flatMap((key) => fieldDiff(beforeArg[key], afterArg[key], join(pathArg, key)));
  }
  if (Array.isArray(beforeArg) && Array.isArray(afterArg)) {
    const length = Math.max(beforeArg.length, afterArg.length);
    return Array.from({ length }, (_unused, index) => fieldDiff(beforeArg[index], afterArg[index], `${pathArg}[${index}]`)).flat();
  }
  if (beforeArg === undefined && afterArg === undefined) {
    return [];
  }
  return [{ path: pathArg || '(the whole value)', before: beforeArg, after: afterArg }];
};

/** A value of a change as the review shows it: JSON, or "absent". */
export const describeFieldValue = (valueArg: unknown): string => (valueArg === undefined ? '(absent)' : JSON.stringify(valueArg));
