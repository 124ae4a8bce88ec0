import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';

/**
 * The project's one canonical JSON form (RFC 8785 / JCS) and the one domain-separated
 * sha256 digest every contract digest is built on. Keeping them in one place means two
 * digests of the same value can never disagree because of key order or number spelling.
 */

const canonicalize = canonicalizeModule as unknown as (valueArg: unknown) => string | undefined;

/** Thrown inside `canonicalText` when a value is not plain JSON: the checked way then names why. */
const notPlainJson = Symbol('not plain JSON');

/**
 * The canonical text of a plain JSON value in one walk, or `notPlainJson` thrown: the same text
 * the `canonicalize` package writes for every value `assertPlainJson` accepts (keys sorted by
 * UTF-16 code units, primitives as JSON.stringify writes them). Checked against the package on
 * random values in test/foundation.canonicaljson.test.ts.
 */
const canonicalText = (valueArg: unknown, depthArg: number, knownArg?: TKnownCanonicalTexts): string => {
  if (depthArg > 64) {
    throw notPlainJson;
  }
  if (valueArg === null) {
    return 'null';
  }
  switch (typeof valueArg) {
    case 'string':
      return JSON.stringify(valueArg);
    case 'boolean':
      return valueArg ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(valueArg)) {
        throw notPlainJson;
      }
      return JSON.stringify(valueArg);
    case 'object':
      break;
    default:
      throw notPlainJson;
  }
  const known = knownArg?.get(valueArg);
  if (known !== undefined) {
    return known;
  }
  if (Array.isArray(valueArg)) {
    let text = '[';
    for (let index = 0; index < valueArg.length; index++) {
      // A hole: the package's spelling of it is left to the package.
      if (!(index in valueArg)) {
        throw notPlainJson;
      }
      text += (index === 0 ? '' : ',') + canonicalText(valueArg[index], depthArg + 1, knownArg);
    }
    return `${text}]`;
  }
  const prototype = Object.getPrototypeOf(valueArg);
  if (prototype !== Object.prototype && prototype !== null) {
    throw notPlainJson;
  }
  const record = valueArg as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  let text = '{';
  for (let index = 0; index < keys.length; index++) {
    const item = record[keys[index]];
    if (item === undefined) {
      throw notPlainJson;
    }
    text += `${index === 0 ? '' : ','}${JSON.stringify(keys[index])}:${canonicalText(item, depthArg + 1, knownArg)}`;
  }
  return `${text}}`;
};

/**
 * Canonical texts already written for objects that do not change (frozen): a value holding one of
 * them is written with that text instead of walking it again (a cluster's desired state reuses
 * the text of each service entry that did not change).
 */
export type TKnownCanonicalTexts = WeakMap<object, string>;

/** Canonical JSON text of a plain JSON value; throws for values JSON cannot express. */
export const canonicalizeJson = (valueArg: unknown, knownArg?: TKnownCanonicalTexts): string => {
  try {
    return canonicalText(valueArg, 0, knownArg);
  } catch (error) {
    if (error !== notPlainJson) {
      throw error;
    }
  }
  // Not plain JSON (or an array with holes): the checked way names what is wrong.
  assertPlainJson(valueArg, 'value');
  const text = canonicalize(valueArg);
  if (typeof text !== 'string') {
    throw new Error('value has no canonical JSON form');
  }
  return text;
};

/** Lowercase hex sha256 of bytes or text. */
export const sha256Hex = (bytesArg: string | Uint8Array): string =>
  createHash('sha256').update(bytesArg).digest('hex');

/**
 * Domain-separated digest: sha256 over the UTF-8 domain, one NUL byte, then the canonical
 * JSON of the value. The NUL cannot appear in a domain name, so no (domain, value) pair can
 * collide with another by moving characters across the boundary.
 */
export const computeDomainDigestHex = (domainArg: string, valueArg: unknown, knownArg?: TKnownCanonicalTexts): string => {
  if (domainArg.length === 0 || domainArg.includes('\u0000')) {
    throw new Error('digest domain must be a non-empty string without NUL');
  }
  const hash = createHash('sha256');
  hash.update(domainArg, 'utf8');
  hash.update(Buffer.from([0]));
  hash.update(canonicalizeJson(valueArg, knownArg), 'utf8');
  return hash.digest('hex');
};

/** sha256 of the canonical JSON alone, for digests the contract defines without a domain. */
export const computeCanonicalJsonSha256Hex = (valueArg: unknown): string =>
  sha256Hex(canonicalizeJson(valueArg));

const assertPlainJson = (valueArg: unknown, pathArg: string, depthArg = 0): void => {
  if (depthArg > 64) {
    throw new Error(`${pathArg} is nested too deeply`);
  }
  if (valueArg === null || typeof valueArg === 'string' || typeof valueArg === 'boolean') {
    return;
  }
  if (typeof valueArg === 'number') {
    if (!Number.isFinite(valueArg)) {
      throw new Error(`${pathArg} must be a finite number`);
    }
    return;
  }
  if (Array.isArray(valueArg)) {
    valueArg.forEach((item, index) => assertPlainJson(item, `${pathArg}[${index}]`, depthArg + 1));
    return;
  }
  if (typeof valueArg === 'object') {
    const prototype = Object.getPrototypeOf(valueArg);
    if (prototype !== Object.prototype && prototype !== null) {
      throw new Error(`${pathArg} must be a plain object`);
    }
    for (const [key, item] of Object.entries(valueArg as Record<string, unknown>)) {
      if (item === undefined) {
        throw new Error(`${pathArg}.${key} must not be undefined`);
      }
      assertPlainJson(item, `${pathArg}.${key}`, depthArg + 1);
    }
    return;
  }
  throw new Error(`${pathArg} is not a JSON value`);
};
