/**
 * Readers and rules shared by the service, service volume and local storage claim contracts.
 * Every reader looks only at own data properties: a getter, a proxy or a class instance never
 * runs foreign code here, and a validator built on them never throws. Project's own definition.
 */

import { isCanonicalId } from './dataproperties.js';

export type TServiceDataRecord = Record<string, unknown>;

/** A plain record (prototype Object or null) whose own properties are all data properties. */
export const readServiceDataRecord = (valueArg: unknown): TServiceDataRecord | null => {
  if (valueArg === null || typeof valueArg !== 'object' || Array.isArray(valueArg)) {
    return null;
  }
  const prototype = Object.getPrototypeOf(valueArg);
  if (prototype !== Object.prototype && prototype !== null) {
    return null;
  }
  const descriptors = Object.getOwnPropertyDescriptors(valueArg);
  if (Object.getOwnPropertySymbols(descriptors).length > 0) {
    return null;
  }
  for (const descriptor of Object.values(descriptors)) {
    if (!Object.hasOwn(descriptor, 'value')) {
      return null;
    }
  }
  return valueArg as TServiceDataRecord;
};

/** The own data value of a key, or undefined when it is absent. */
export const readServiceDataField = (recordArg: TServiceDataRecord, keyArg: string): unknown =>
  Object.hasOwn(recordArg, keyArg) ? recordArg[keyArg] : undefined;

/**
 * A dense array of data entries no longer than the limit, or null. Longer arrays answer null
 * from their length alone so a huge value costs nothing.
 */
export const readServiceDataArray = (valueArg: unknown, limitArg: number): unknown[] | null => {
  if (!Array.isArray(valueArg) || Object.getPrototypeOf(valueArg) !== Array.prototype) {
    return null;
  }
  if (valueArg.length > limitArg) {
    return null;
  }
  const descriptors = Object.getOwnPropertyDescriptors(valueArg);
  if (Object.keys(descriptors).length !== valueArg.length + 1) {
    return null;
  }
  const entries: unknown[] = [];
  for (let index = 0; index < valueArg.length; index++) {
    const descriptor = descriptors[String(index)];
    if (descriptor === undefined || !Object.hasOwn(descriptor, 'value')) {
      return null;
    }
    entries.push(descriptor.value);
  }
  return entries;
};

/** One reason per own key that is not allowed, in the record's own key order. */
export const reasonsForUnknownKeys = (
  recordArg: TServiceDataRecord,
  allowedArg: readonly string[],
  pathArg: string,
): string[] =>
  Object.keys(recordArg)
    .filter((key) => !allowedArg.includes(key))
    .map((key) => `${pathArg}.${key} is not a known member`);

/** The one reason an id that breaks the project's identifier rule (`isCanonicalId`) earns. */
export const validateServiceCanonicalId = (valueArg: unknown, pathArg: string): string[] =>
  isCanonicalId(valueArg)
    ? []
    : [`${pathArg} must be an id of 1-128 letters, digits, '.', '_' or '-' starting with a letter or digit`];

/** Longest mount path accepted; Linux PATH_MAX. Project's own limit. */
export const maximumServiceMountPathLength = 4096;

/** The directory a runtime delivers secrets into; no volume may sit on, above or under it. */
export const runtimeSecretsMountPath = '/run/secrets';

/**
 * The storage mount path rule: an absolute, canonical path (no empty, `.` or `..` segment, no
 * trailing slash, no control character) that is not `/` and does not overlap `/run/secrets`.
 */
export const validateServiceMountPath = (valueArg: unknown, pathArg: string): string[] => {
  if (typeof valueArg !== 'string') {
    return [`${pathArg} must be a string`];
  }
  if (valueArg.length === 0 || valueArg.length > maximumServiceMountPathLength) {
    return [`${pathArg} must be 1-${maximumServiceMountPathLength} characters long`];
  }
  const reasons: string[] = [];
  if (!valueArg.startsWith('/')) {
    reasons.push(`${pathArg} must be an absolute path`);
  }
  if (valueArg === '/') {
    reasons.push(`${pathArg} must not be the root directory`);
    return reasons;
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(valueArg)) {
    reasons.push(`${pathArg} must not contain control characters`);
  }
  const segments = valueArg.split('/').slice(1);
  if (segments.some((segment) => segment === '' || segment === '.' || segment === '..')) {
    reasons.push(`${pathArg} must be canonical: no empty, '.' or '..' segment and no trailing slash`);
  }
  if (
    valueArg === runtimeSecretsMountPath
    || valueArg.startsWith(`${runtimeSecretsMountPath}/`)
    || runtimeSecretsMountPath.startsWith(`${valueArg}/`)
  ) {
    reasons.push(`${pathArg} must not overlap ${runtimeSecretsMountPath}`);
  }
  return reasons;
};

/** Largest POSIX uid/gid a volume owner may carry; (uid_t)-1 means "unchanged". Project's own limit. */
export const maximumServiceOwnerId = 4294967294;

export const validateServiceOwnerId = (valueArg: unknown, pathArg: string): string[] =>
  Number.isSafeInteger(valueArg) && (valueArg as number) >= 0 && (valueArg as number) <= maximumServiceOwnerId
    ? []
    : [`${pathArg} must be an integer from 0 to ${maximumServiceOwnerId}`];

/** Every reason a value is not a numeric owner `{ user, group }` (the runtime spec's `profile.runAs`). */
export const validateServiceRunAsOwner = (valueArg: unknown, pathArg: string): string[] => {
  const record = readServiceDataRecord(valueArg);
  if (record === null) {
    return [`${pathArg} must be { user, group } or null`];
  }
  return [
    ...reasonsForUnknownKeys(record, ['user', 'group'], pathArg),
    ...validateServiceOwnerId(readServiceDataField(record, 'user'), `${pathArg}.user`),
    ...validateServiceOwnerId(readServiceDataField(record, 'group'), `${pathArg}.group`),
  ];
};

const setuidBit = 0o4000;

/**
 * A directory mode: an integer holding only bits of `allowedBitsArg`. The setuid bit gets its own
 * reason because it is refused on purpose, not merely out of range.
 */
export const validateDirectoryModeBits = (
  valueArg: unknown,
  allowedBitsArg: number,
  pathArg: string,
): string[] => {
  if (!Number.isSafeInteger(valueArg) || (valueArg as number) < 0) {
    return [`${pathArg} must be a non-negative integer`];
  }
  const mode = valueArg as number;
  const reasons: string[] = [];
  // Division instead of bitwise operators keeps values above 2^31 exact.
  const lowBits = mode % 0o10000;
  if (Math.floor(lowBits / setuidBit) % 2 === 1) {
    reasons.push(`${pathArg} must not set the setuid bit (0o4000)`);
  }
  const otherBits = mode - (Math.floor(lowBits / setuidBit) % 2 === 1 ? setuidBit : 0);
  if (otherBits > allowedBitsArg || (otherBits & allowedBitsArg) !== otherBits) {
    reasons.push(`${pathArg} must hold only directory permission bits (0o${allowedBitsArg.toString(8)})`);
  }
  return reasons;
};
