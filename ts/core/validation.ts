import { refuse } from './errors.js';

/**
 * Request shape checks shared by handlers: they collect every reason, each naming its path, in
 * the order the fields are declared, so one refusal tells the caller everything that is wrong.
 */

export type TFieldCheck = (valueArg: unknown, pathArg: string) => string[];

export interface IRequestShape {
  required: Record<string, TFieldCheck>;
  optional?: Record<string, TFieldCheck>;
}

/** Fields every admin request carries and the shape check leaves to the identity verifier. */
const identityField = 'identity';

export const checkRequestShape = (requestArg: unknown, shapeArg: IRequestShape, pathArg = 'request'): string[] => {
  if (!requestArg || typeof requestArg !== 'object' || Array.isArray(requestArg)) {
    return [`${pathArg} must be an object`];
  }
  const request = requestArg as Record<string, unknown>;
  const reasons: string[] = [];
  const known = new Set([identityField, ...Object.keys(shapeArg.required), ...Object.keys(shapeArg.optional ?? {})]);
  for (const [field, check] of Object.entries(shapeArg.required)) {
    if (!Object.hasOwn(request, field) || request[field] === undefined) {
      reasons.push(`${pathArg}.${field} is required`);
    } else {
      reasons.push(...check(request[field], `${pathArg}.${field}`));
    }
  }
  for (const [field, check] of Object.entries(shapeArg.optional ?? {})) {
    if (Object.hasOwn(request, field) && request[field] !== undefined) {
      reasons.push(...check(request[field], `${pathArg}.${field}`));
    }
  }
  for (const field of Object.keys(request)) {
    if (!known.has(field)) {
      reasons.push(`${pathArg}.${field} is not a field of this request`);
    }
  }
  return reasons;
};

/**
 * `checkRequestShape`, throwing one `invalid-request` refusal with every reason when there is any.
 * Answers a fresh object holding exactly the declared fields the request has (and `identity`),
 * read as own properties: handlers go on with that copy, so nothing inherited or undeclared can
 * reach them.
 */
export const requireRequestShape = <T>(requestArg: T, shapeArg: IRequestShape, pathArg = 'request'): T => {
  const reasons = checkRequestShape(requestArg, shapeArg, pathArg);
  if (reasons.length > 0) {
    throw refuse('invalid-request', reasons);
  }
  const request = requestArg as Record<string, unknown>;
  const copy: Record<string, unknown> = {};
  for (const field of [identityField, ...Object.keys(shapeArg.required), ...Object.keys(shapeArg.optional ?? {})]) {
    if (Object.hasOwn(request, field) && request[field] !== undefined) {
      copy[field] = request[field];
    }
  }
  return copy as T;
};

export const isString = (minArg: number, maxArg: number, patternArg?: RegExp): TFieldCheck => (valueArg, pathArg) => {
  if (typeof valueArg !== 'string' || valueArg.length < minArg || valueArg.length > maxArg) {
    return [`${pathArg} must be a string of ${minArg} to ${maxArg} characters`];
  }
  return patternArg && !patternArg.test(valueArg) ? [`${pathArg} has characters that are not allowed`] : [];
};

export const isIdString: TFieldCheck = isString(1, 128, /^[A-Za-z0-9][A-Za-z0-9._-]*$/);

export const isNonNegativeInteger: TFieldCheck = (valueArg, pathArg) =>
  Number.isSafeInteger(valueArg) && (valueArg as number) >= 0 ? [] : [`${pathArg} must be a non-negative integer`];

export const isPositiveInteger: TFieldCheck = (valueArg, pathArg) =>
  Number.isSafeInteger(valueArg) && (valueArg as number) >= 1 ? [] : [`${pathArg} must be a positive integer`];

export const isBoolean: TFieldCheck = (valueArg, pathArg) =>
  typeof valueArg === 'boolean' ? [] : [`${pathArg} must be a boolean`];

export const isArrayOf = (itemArg: TFieldCheck, maxArg: number): TFieldCheck => (valueArg, pathArg) => {
  if (!Array.isArray(valueArg)) {
    return [`${pathArg} must be an array`];
  }
  if (valueArg.length > maxArg) {
    return [`${pathArg} must have at most ${maxArg} items`];
  }
  return valueArg.flatMap((item, index) => itemArg(item, `${pathArg}[${index}]`));
};

/** Accepts anything; for fields whose own validator runs later in the handler. */
export const isAnyValue: TFieldCheck = () => [];
