import { refuse } from './errors.js';
import { fieldProblemReasons, type IFieldProblem, type TFieldProblemReason } from '../interfaces/data/refusal.js';
import { canonicalIdPattern, isCanonicalId } from '../interfaces/private/dataproperties.js';

export { fieldProblemReasons, type IFieldProblem, type TFieldProblemReason } from '../interfaces/data/refusal.js';

/**
 * Request shape checks shared by handlers: they collect every problem, each naming its path, its
 * reason token (`fieldProblemReasons`) and its sentence, in the order the fields are declared, so
 * one refusal tells the caller everything that is wrong.
 */

/**
 * JSON Schema keywords (draft 2020-12) that say what a field check admits, as far as a schema can:
 * GET /schema serves them beside the contract's types (ts/core/schema.ts), so a client validating
 * against the schema learns the same ranges, lengths and patterns the server enforces.
 */
export type TCheckSchema = Readonly<Record<string, unknown>>;

/** A member's check; `schema` is present when the check's rule is one a JSON Schema can state. */
export type TFieldCheck = ((valueArg: unknown, pathArg: string) => IFieldProblem[]) & { readonly schema?: TCheckSchema };

/**
 * A check together with the schema built from the same numbers and patterns it tests. A new
 * function, so a shared check (`isAnyValue`) handed in is never changed.
 */
export const describedCheck = (schemaArg: TCheckSchema, checkArg: (valueArg: unknown, pathArg: string) => IFieldProblem[]): TFieldCheck =>
  Object.assign((valueArg: unknown, pathArg: string) => checkArg(valueArg, pathArg), { schema: schemaArg });

/**
 * A pattern as JSON Schema spells it: the RegExp's source, read by validators with the `u` flag.
 * A pattern with flags (case-insensitive, say) has no such spelling and is left out.
 */
const patternKeyword = (patternArg: RegExp | undefined): TCheckSchema =>
  patternArg && patternArg.flags.replace('u', '') === '' ? { pattern: patternArg.source } : {};

/** The schema of a string of `minArg` to `maxArg` characters, optionally matching `patternArg`. */
export const stringSchema = (minArg: number, maxArg: number, patternArg?: RegExp): TCheckSchema =>
  ({ type: 'string', minLength: minArg, maxLength: maxArg, ...patternKeyword(patternArg) });

/** The schema of a safe integer from `minArg` (to `maxArg` when given). */
export const integerSchema = (minArg: number, maxArg = Number.MAX_SAFE_INTEGER): TCheckSchema =>
  ({ type: 'integer', minimum: minArg, maximum: maxArg });

/** The schema each member of a shape's checks states, by member; members whose checks state none are absent. */
export const shapeSchema = (shapeArg: IRequestShape): Record<string, TCheckSchema> => {
  const members: Record<string, TCheckSchema> = {};
  for (const [member, check] of [...Object.entries(shapeArg.required), ...Object.entries(shapeArg.optional ?? {})]) {
    if (check.schema) {
      members[member] = check.schema;
    }
  }
  return members;
};

export interface IRequestShape {
  required: Record<string, TFieldCheck>;
  optional?: Record<string, TFieldCheck>;
}

/** One problem of the member at `pathArg`. */
export const fieldProblem = (pathArg: string, reasonArg: TFieldProblemReason, messageArg: string): IFieldProblem =>
  ({ path: pathArg, reason: reasonArg, message: messageArg });

/** The most common problem: the value has the wrong type, form or range. */
export const invalidField = (pathArg: string, messageArg: string): IFieldProblem =>
  fieldProblem(pathArg, fieldProblemReasons.invalid, messageArg);

/** The sentence a contract validator would give for the problem: the path, then the message. */
export const sentenceOfProblem = (problemArg: IFieldProblem): string => `${problemArg.path} ${problemArg.message}`;

/**
 * The reason token of a contract validator's sentence (the part after the path), read from its
 * wording; whatever matches none of the kinds below is `field-invalid`.
 */
const reasonOfMessage = (messageArg: string): TFieldProblemReason => {
  if (/^is required\b/.test(messageArg)) {
    return fieldProblemReasons.required;
  }
  if (/^is not (a|an) ([a-z]+ )*(field|member|key|filter)\b/.test(messageArg)) {
    return fieldProblemReasons.unknown;
  }
  if (/^must be one of\b/.test(messageArg)) {
    return fieldProblemReasons.notSupported;
  }
  if (/^must (have|hold) at most\b/.test(messageArg)) {
    return fieldProblemReasons.tooMany;
  }
  if (/^repeats\b|\bmust be unique\b/.test(messageArg)) {
    return fieldProblemReasons.duplicate;
  }
  if (/^(names no|is no)\b/.test(messageArg)) {
    return fieldProblemReasons.notFound;
  }
  if (/^is a secret value in clear\b/.test(messageArg)) {
    return fieldProblemReasons.secretValueInClear;
  }
  if (/^(must be omitted|is only carried)\b/.test(messageArg)) {
    return fieldProblemReasons.forbidden;
  }
  return fieldProblemReasons.invalid;
};

/**
 * Sentences of a contract validator (`ts/interfaces/`, which words its reasons as the seed does,
 * `<path> <message>`) as problems: the path is the sentence's first word when it lies at or under
 * `pathArg`, else `pathArg` itself with the whole sentence as the message. `sentenceOfProblem`
 * gives each sentence back unchanged when it begins with its path.
 */
export const problemsOfSentences = (sentencesArg: readonly string[], pathArg: string): IFieldProblem[] =>
  sentencesArg.map((sentenceArg) => {
    const space = sentenceArg.indexOf(' ');
    const head = space < 0 ? sentenceArg : sentenceArg.slice(0, space);
    const under = head === pathArg || head.startsWith(`${pathArg}.`) || head.startsWith(`${pathArg}[`);
    if (!under || space < 0) {
      return fieldProblem(pathArg, reasonOfMessage(sentenceArg), sentenceArg);
    }
    const message = sentenceArg.slice(space + 1);
    return fieldProblem(head, reasonOfMessage(message), message);
  });

/** A contract validator `(value, path) => sentences` as a field check. */
export const sentenceCheck = (validateArg: (valueArg: unknown, pathArg: string) => string[]): TFieldCheck =>
  (valueArg, pathArg) => problemsOfSentences(validateArg(valueArg, pathArg), pathArg);

/** The `invalid-request` refusal of every problem: the distinct reason tokens in order, every problem a cause. */
export const refuseFields = (problemsArg: readonly IFieldProblem[]) =>
  refuse('invalid-request', [...new Set(problemsArg.map((problemArg) => problemArg.reason))], {
    causes: problemsArg.map((problemArg) => ({ path: problemArg.path, reason: problemArg.reason, message: problemArg.message })),
  });

/** Fields every admin request carries and the shape check leaves to the identity verifier. */
const identityField = 'identity';

export const checkRequestShape = (requestArg: unknown, shapeArg: IRequestShape, pathArg = 'request'): IFieldProblem[] => {
  if (!requestArg || typeof requestArg !== 'object' || Array.isArray(requestArg)) {
    return [invalidField(pathArg, 'must be an object')];
  }
  const request = requestArg as Record<string, unknown>;
  const problems: IFieldProblem[] = [];
  const known = new Set([identityField, ...Object.keys(shapeArg.required), ...Object.keys(shapeArg.optional ?? {})]);
  for (const [field, check] of Object.entries(shapeArg.required)) {
    if (!Object.hasOwn(request, field) || request[field] === undefined) {
      problems.push(fieldProblem(`${pathArg}.${field}`, fieldProblemReasons.required, 'is required'));
    } else {
      problems.push(...check(request[field], `${pathArg}.${field}`));
    }
  }
  for (const [field, check] of Object.entries(shapeArg.optional ?? {})) {
    if (Object.hasOwn(request, field) && request[field] !== undefined) {
      problems.push(...check(request[field], `${pathArg}.${field}`));
    }
  }
  for (const field of Object.keys(request)) {
    if (!known.has(field)) {
      problems.push(fieldProblem(`${pathArg}.${field}`, fieldProblemReasons.unknown, 'is not a field of this request'));
    }
  }
  return problems;
};

/**
 * `checkRequestShape`, throwing one `invalid-request` refusal with every problem when there is any.
 * Answers a fresh object holding exactly the declared fields the request has (and `identity`),
 * read as own properties: handlers go on with that copy, so nothing inherited or undeclared can
 * reach them.
 */
export const requireRequestShape = <T>(requestArg: T, shapeArg: IRequestShape, pathArg = 'request'): T => {
  const problems = checkRequestShape(requestArg, shapeArg, pathArg);
  if (problems.length > 0) {
    throw refuseFields(problems);
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

/**
 * A string of `minArg` to `maxArg` characters, matching `patternArg` when given. Lengths count
 * UTF-16 code units, as JavaScript does; a JSON Schema validator counts code points, so the two
 * differ only for characters above U+FFFF.
 */
export const isString = (minArg: number, maxArg: number, patternArg?: RegExp): TFieldCheck => describedCheck(stringSchema(minArg, maxArg, patternArg), (valueArg, pathArg) => {
  if (typeof valueArg !== 'string' || valueArg.length < minArg || valueArg.length > maxArg) {
    const tooLong = typeof valueArg === 'string' && valueArg.length > maxArg;
    return [fieldProblem(pathArg, tooLong ? fieldProblemReasons.tooLong : fieldProblemReasons.invalid, `must be a string of ${minArg} to ${maxArg} characters`)];
  }
  return patternArg && !patternArg.test(valueArg) ? [invalidField(pathArg, 'has characters that are not allowed')] : [];
});

export const isIdString: TFieldCheck = isString(1, 128, /^[A-Za-z0-9][A-Za-z0-9._-]*$/);

export const isNonNegativeInteger: TFieldCheck = describedCheck(integerSchema(0), (valueArg, pathArg) =>
  Number.isSafeInteger(valueArg) && (valueArg as number) >= 0 ? [] : [invalidField(pathArg, 'must be a non-negative integer')]);

export const isPositiveInteger: TFieldCheck = describedCheck(integerSchema(1), (valueArg, pathArg) =>
  Number.isSafeInteger(valueArg) && (valueArg as number) >= 1 ? [] : [invalidField(pathArg, 'must be a positive integer')]);

/** A safe integer from `minArg` to `maxArg`; the message names the range. */
export const isIntegerIn = (minArg: number, maxArg: number, messageArg = `must be an integer from ${minArg} to ${maxArg}`): TFieldCheck =>
  describedCheck(integerSchema(minArg, maxArg), (valueArg, pathArg) =>
    Number.isSafeInteger(valueArg) && (valueArg as number) >= minArg && (valueArg as number) <= maxArg ? [] : [invalidField(pathArg, messageArg)]);

export const isBoolean: TFieldCheck = describedCheck({ type: 'boolean' }, (valueArg, pathArg) =>
  typeof valueArg === 'boolean' ? [] : [invalidField(pathArg, 'must be a boolean')]);

/** A value that must be one of `valuesArg`; the message lists them (`must be one of a, b, c`). */
export const isOneOf = (valuesArg: readonly unknown[], messageArg = `must be one of ${valuesArg.join(', ')}`): TFieldCheck =>
  describedCheck({ enum: [...valuesArg] }, (valueArg, pathArg) =>
    (valuesArg.includes(valueArg) ? [] : [fieldProblem(pathArg, fieldProblemReasons.notSupported, messageArg)]));

export const isArrayOf = (itemArg: TFieldCheck, maxArg: number): TFieldCheck => describedCheck(
  { type: 'array', maxItems: maxArg, ...(itemArg.schema ? { items: itemArg.schema } : {}) },
  (valueArg, pathArg) => {
    if (!Array.isArray(valueArg)) {
      return [invalidField(pathArg, 'must be an array')];
    }
    if (valueArg.length > maxArg) {
      return [fieldProblem(pathArg, fieldProblemReasons.tooMany, `must have at most ${maxArg} items`)];
    }
    return valueArg.flatMap((item, index) => itemArg(item, `${pathArg}[${index}]`));
  },
);

/** A node id: the project's identifier rule (letters, digits, '.', '_', '-'; 1-128 characters). */
export const isNodeIdField: TFieldCheck = describedCheck(stringSchema(1, 128, canonicalIdPattern), (valueArg, pathArg) =>
  isCanonicalId(valueArg) ? [] : [invalidField(pathArg, `must be a node id (letters, digits, '.', '_', '-'; 1-128 characters)`)]);

/** Accepts anything; for fields whose own validator runs later in the handler. */
export const isAnyValue: TFieldCheck = () => [];
