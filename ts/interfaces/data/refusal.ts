/**
 * The refusal shape every Cloudly method shares (the project's own definition; the upstream
 * contracts fix only their own error data): `reasons` are machine tokens a client may branch on,
 * `causes` are sentences for people that a client may show and never branches on.
 */

/** Lower-case words joined by single hyphens: `service-not-found`, `mutation-id-reused`. */
export const refusalReasonTokenPattern = /^[a-z0-9]+(-[a-z0-9]+)*$/;

export const isRefusalReasonToken = (valueArg: unknown): valueArg is string =>
  typeof valueArg === 'string' && refusalReasonTokenPattern.test(valueArg);

/** A sentence for people about one refusal; `path` names the request member it is about, when one is. */
export interface IRefusalCause {
  path?: string;
  message: string;
}

/** The reason a method the answering side does not serve is refused with (`invalid-request`). */
export const methodNotServedReason = 'method-not-served';

/** A mutation id already used by a different request of the same method. */
export const mutationIdReusedReason = 'mutation-id-reused';
