import { readExactDataRecord, type TPlainRecord } from './dataproperties.js';

/**
 * Readers for values that crossed a wire and may be hostile: a getter could throw or answer
 * differently on every read, so these look at property descriptors and never invoke accessors.
 * Project's own definition.
 */

/** True when the key is an own data property (not an accessor). */
export const isOwnDataProperty = (recordArg: object, keyArg: string | number): boolean => {
  const descriptor = Object.getOwnPropertyDescriptor(recordArg, keyArg);
  return descriptor !== undefined && Object.hasOwn(descriptor, 'value');
};

/** The value of an own data property, or undefined for a missing key or an accessor. */
export const readOwnDataValue = (recordArg: object, keyArg: string | number): unknown => {
  const descriptor = Object.getOwnPropertyDescriptor(recordArg, keyArg);
  return descriptor !== undefined && Object.hasOwn(descriptor, 'value') ? descriptor.value : undefined;
};

/**
 * The entries of a dense array of data properties, or null when the value is not an array, is
 * sparse, carries accessors or carries extra own keys besides its indices and `length`.
 * `limitArg` bounds the work: longer arrays answer null from their length alone.
 */
export const readDataArray = (valueArg: unknown, limitArg: number): unknown[] | null => {
  if (!Array.isArray(valueArg) || valueArg.length > limitArg) {
    return null;
  }
  const entries: unknown[] = [];
  for (let index = 0; index < valueArg.length; index++) {
    if (!isOwnDataProperty(valueArg, index)) {
      return null;
    }
    entries.push(readOwnDataValue(valueArg, index));
  }
  return Object.keys(valueArg).length === valueArg.length ? entries : null;
};

/**
 * Every reason a record's own keys are not a subset of `allowedArg` or are accessors, one per
 * offending key in key order: `<path>.<key> is not a member of <noun>` or `... must be a data
 * property`.
 */
export const collectMemberReasons = (
  recordArg: object,
  allowedArg: readonly string[],
  pathArg: string,
  nounArg: string,
): string[] => {
  const reasons: string[] = [];
  for (const key of Object.keys(recordArg)) {
    if (!allowedArg.includes(key)) {
      reasons.push(`${pathArg}.${key} is not a member of ${nounArg}`);
    } else if (!isOwnDataProperty(recordArg, key)) {
      reasons.push(`${pathArg}.${key} must be a data property`);
    }
  }
  return reasons;
};

/**
 * The entries of a list that must be a plain array of at most `limitArg` data entries, or the one
 * reason it is not (not an array, too long, or holes/accessors/extra keys). The length is judged
 * before any entry is read, so a hostile list costs no more than the limit.
 */
export const readBoundedDataList = (
  valueArg: unknown,
  limitArg: number,
  pathArg: string,
  wordingArg: { entries: string; notArray: string },
): { entries: unknown[] } | { reason: string } => {
  if (!Array.isArray(valueArg)) {
    return { reason: `${pathArg} ${wordingArg.notArray}` };
  }
  if (valueArg.length > limitArg) {
    return { reason: `${pathArg} may hold at most ${limitArg} ${wordingArg.entries}, not ${valueArg.length}` };
  }
  const entries = readDataArray(valueArg, limitArg);
  return entries === null
    ? { reason: `${pathArg} must be a plain array without holes, accessors or extra keys` }
    : { entries };
};

/**
 * `readExactDataRecord`, except that a value whose inspection throws (a proxy trap) is null too
 * instead of an exception.
 */
export const readExactDataRecordOrNull = (
  valueArg: unknown,
  keysArg: readonly string[],
): TPlainRecord | null => {
  try {
    return readExactDataRecord(valueArg, keysArg);
  } catch {
    return null;
  }
};
