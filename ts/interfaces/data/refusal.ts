/**
 * The refusal shape every Cloudly method shares (the project's own definition; the upstream
 * contracts fix only their own error data): `reasons` are machine tokens a client may branch on,
 * `causes` are sentences for people that a client may show and never branches on.
 */

/** Lower-case words joined by single hyphens: `service-not-found`, `mutation-id-reused`. */
export const refusalReasonTokenPattern = /^[a-z0-9]+(-[a-z0-9]+)*$/;

export const isRefusalReasonToken = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string' && refusalReasonTokenPattern.test(valueArg);

/**
 * A sentence for people about one refusal; `path` names the request member it is about, when one
 * is, and `reason` the token of that one problem (an input check's `field-…` token), when it has one.
 */
export interface IRefusalCause {
  path?: string;
  reason?: string;
  message: string;
}

/**
 * The reasons an input check gives (in the manner of Kubernetes' `field.ErrorType`): a small fixed
 * set, one per kind of problem with one request member. A refusal of the request's shape carries
 * the distinct ones in `reasons` and every problem, with its path and sentence, in `causes`.
 */
export const fieldProblemReasons = Object.freeze({
  /** A required member is missing. */
  required: 'field-required',
  /** The value has the wrong type, form or range. */
  invalid: 'field-invalid',
  /** The value is not one of the values the member admits. */
  notSupported: 'field-not-supported',
  /** A string longer than the member admits. */
  tooLong: 'field-too-long',
  /** A list or record with more items than the member admits. */
  tooMany: 'field-too-many',
  /** An item that repeats an earlier one where each must be unique. */
  duplicate: 'field-duplicate',
  /** The value names something that does not exist (a node of the cluster, a service). */
  notFound: 'field-not-found',
  /** A member that must be absent here (given the request's other members). */
  forbidden: 'field-forbidden',
  /** A member the request (or the object it is in) does not have. */
  unknown: 'field-unknown',
  /** A secret's value sent in clear where only a reference or a sealed value is accepted; never stored or repeated. */
  secretValueInClear: 'secret-value-in-clear',
} as const);

export type TFieldProblemReason = (typeof fieldProblemReasons)[keyof typeof fieldProblemReasons];

/** One problem an input check found: the member's path, its reason token and the sentence for people (without the path). */
export interface IFieldProblem {
  path: string;
  reason: TFieldProblemReason;
  message: string;
}

/** The reason a method the answering side does not serve is refused with (`invalid-request`). */
export const methodNotServedReason = 'method-not-served';

/** A mutation id already used by a different request of the same method. */
export const mutationIdReusedReason = 'mutation-id-reused';

/**
 * Why an identity, a login or an instance's internal bearer was refused (`unauthenticated`, and
 * the signing key's own `not-found` / `conflict`). Clients branch on these; the sentence that says
 * which member was wrong travels in `causes`.
 */
export const identityReasons = {
  /** No identity (or no bearer) came with the request, or it is not an object. */
  missing: 'identity-missing',
  /** The identity's JWT is not a compact JWT at all. */
  malformed: 'identity-malformed',
  /** Signature, issuer or audience wrong, claims missing, or a visible field that disagrees with its signed claim. */
  invalid: 'identity-invalid',
  /** The JWT verified but has expired: log in again. */
  expired: 'identity-expired',
  /** A login whose username or password is wrong (one token for both, so names are not revealed). */
  credentialsWrong: 'credentials-wrong',
  /** An instance's internal bearer that is missing, not valid, or made for another instance. */
  internalTokenMissing: 'internal-token-missing',
  internalTokenInvalid: 'internal-token-invalid',
  internalTokenWrongInstance: 'internal-token-wrong-instance',
  /** Signing-key rotation: there is no key yet, or the expected key id is no longer the current one. */
  signingKeyMissing: 'signing-key-missing',
  signingKeyChanged: 'signing-key-changed',
} as const;
