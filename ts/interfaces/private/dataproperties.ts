/**
 * Small readers shared by every validator: they look at values that crossed a wire, so they
 * never trust a prototype, a getter or an inherited key.
 */

export type TPlainRecord = Record<string, unknown>;

/** A plain object (prototype Object or null), not an array, not a class instance. */
export const isRecord = (valueArg: unknown): valueArg is TPlainRecord => {
  if (valueArg === null || typeof valueArg !== 'object' || Array.isArray(valueArg)) {
    return false;
  }
  const prototype = Object.getPrototypeOf(valueArg);
  return prototype === Object.prototype || prototype === null;
};

/** True when the record has exactly these own keys, in any order. */
export const hasExactKeys = (valueArg: TPlainRecord, keysArg: readonly string[]): boolean => {
  const keys = Object.keys(valueArg);
  return keys.length === keysArg.length && keysArg.every((key) => Object.hasOwn(valueArg, key));
};

/** True when every own key is one of the allowed keys and every required key is present. */
export const hasKeysWithin = (
  valueArg: TPlainRecord,
  requiredArg: readonly string[],
  optionalArg: readonly string[],
): boolean => {
  const allowed = new Set([...requiredArg, ...optionalArg]);
  return requiredArg.every((key) => Object.hasOwn(valueArg, key))
    && Object.keys(valueArg).every((key) => allowed.has(key));
};

/** The record when it is a plain record with exactly these keys, otherwise null. */
export const readExactDataRecord = (
  valueArg: unknown,
  keysArg: readonly string[],
): TPlainRecord | null => (isRecord(valueArg) && hasExactKeys(valueArg, keysArg) ? valueArg : null);

/** A non-negative safe integer. */
export const isCounter = (valueArg: unknown): valueArg is number =>
  Number.isSafeInteger(valueArg) && (valueArg as number) >= 0;

/** A positive safe integer. */
export const isPositiveCounter = (valueArg: unknown): valueArg is number =>
  Number.isSafeInteger(valueArg) && (valueArg as number) >= 1;

/** Lowercase 64-digit hex sha256. */
export const sha256HexPattern = /^[0-9a-f]{64}$/;
export const isSha256Hex = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string' && sha256HexPattern.test(valueArg);

/**
 * The project's identifier rule: 1-128 characters of letters, digits, `.`, `_`, `-`, starting
 * with a letter or digit. Ids cross URLs, logs and file names, so nothing else is admitted.
 */
export const canonicalIdPattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const isCanonicalId = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string' && canonicalIdPattern.test(valueArg);

/**
 * A plain record whose own properties are all data properties (no getters or setters), so
 * reading any of them runs no foreign code.
 */
export const isPlainDataRecord = (valueArg: unknown): valueArg is TPlainRecord => {
  if (!isRecord(valueArg)) {
    return false;
  }
  return Object.values(Object.getOwnPropertyDescriptors(valueArg)).every(
    (descriptor) => Object.hasOwn(descriptor, 'value'),
  );
};

/**
 * Runs a validator and turns anything it throws (a hostile proxy, a revoked object) into one
 * reason naming the path, so a validator built on it answers reasons for every input.
 */
export const collectValidatorReasons = (pathArg: string, validatorArg: () => string[]): string[] => {
  try {
    return validatorArg();
  } catch {
    return [`${pathArg} could not be read as plain data`];
  }
};
