import { TypedResponseError } from '@api.global/typedrequest';
import { randomUUID } from 'node:crypto';

/**
 * The one catalogue of refusal codes. Contract-specific error data (ingress refusals, volume
 * initialization errors, adoption errors ...) travels as defined by the contract; everything else
 * uses these codes.
 */
export const errorCodes = [
  'unauthenticated',
  'forbidden',
  'invalid-request',
  'not-found',
  'conflict',
  'unavailable',
  'internal',
] as const;

export type TErrorCode = typeof errorCodes[number];

import type { IRefusalCause } from '../interfaces/data/refusal.js';

import { mutationIdReusedReason } from '../interfaces/data/refusal.js';
export { isRefusalReasonToken, methodNotServedReason, mutationIdReusedReason, refusalReasonTokenPattern, type IRefusalCause } from '../interfaces/data/refusal.js';

export interface ICloudlyErrorData {
  code: TErrorCode;
  retryable: boolean;
  reasons?: string[];
  /** What a person reads about the refusal; clients may show it and never branch on it. */
  causes?: IRefusalCause[];
  errorId?: string;
  /** On `unavailable` refusals of a limit: how long to wait before trying again. */
  retryAfterMs?: number;
}

const retryableCodes: ReadonlySet<TErrorCode> = new Set(['conflict', 'unavailable']);

const errorTexts: Record<TErrorCode, string> = {
  unauthenticated: 'The request carries no valid identity.',
  forbidden: 'The identity may not do this.',
  'invalid-request': 'The request was refused.',
  'not-found': 'The named object does not exist.',
  conflict: 'The object changed since it was read.',
  unavailable: 'The service needed for this request is unavailable.',
  internal: 'Cloudly failed to answer this request.',
};

/** A refusal with the catalogue's error data; `throw refuse(...)`. */
export const refuse = (
  codeArg: TErrorCode,
  reasonsArg?: string[],
  extraArg: Pick<ICloudlyErrorData, 'retryAfterMs' | 'causes'> = {},
): TypedResponseError => {
  const errorData: ICloudlyErrorData = { code: codeArg, retryable: retryableCodes.has(codeArg) };
  if (reasonsArg && reasonsArg.length > 0) {
    errorData.reasons = reasonsArg;
  }
  if (extraArg.causes && extraArg.causes.length > 0) {
    errorData.causes = extraArg.causes;
  }
  if (extraArg.retryAfterMs !== undefined) {
    errorData.retryAfterMs = Math.max(1, Math.ceil(extraArg.retryAfterMs));
  }
  return new TypedResponseError(errorTexts[codeArg], errorData);
};

/** A refusal whose error data the contract defines itself. */
export const contractRefusal = (textArg: string, errorDataArg: object): TypedResponseError =>
  new TypedResponseError(textArg, errorDataArg);

export const isTypedResponseError = (valueArg: unknown): valueArg is TypedResponseError =>
  valueArg instanceof TypedResponseError;

/** The `internal` answer for an unexpected failure, with an id the log line carries too. */
export const internalFailure = (): { error: TypedResponseError; errorId: string } => {
  const errorId = randomUUID();
  const errorData: ICloudlyErrorData = { code: 'internal', retryable: true, errorId };
  return { error: new TypedResponseError(errorTexts.internal, errorData), errorId };
};

/** Reads catalogue error data from a value that crossed a wire, or null. */
export const readCloudlyErrorData = (valueArg: unknown): ICloudlyErrorData | null => {
  if (!valueArg || typeof valueArg !== 'object') {
    return null;
  }
  const data = valueArg as Record<string, unknown>;
  return typeof data.code === 'string' && (errorCodes as readonly string[]).includes(data.code)
    ? (data as unknown as ICloudlyErrorData)
    : null;
};

/** The reason an identity whose role may not call a method is refused with (`forbidden`). */
export const accessDeniedReason = 'role-not-allowed';

/** The `forbidden` answer to a role that may not call the method. */
export const accessDeniedRefusal = (): TypedResponseError =>
  refuse('forbidden', [accessDeniedReason], { causes: [{ path: 'identity.role', message: 'must be admin' }] });

/** The refusal of a mutation id already used by a different request of the method (`invalid-request`). */
export const mutationIdReusedRefusal = (pathArg = 'request.mutationId'): TypedResponseError =>
  refuse('invalid-request', [mutationIdReusedReason], { causes: [{ path: pathArg, message: 'was already used for a different request' }] });

/** A refusal with one reason token and its sentence for people apart (`causes`), naming `pathArg` when given. */
export const refuseNamed = (codeArg: TErrorCode, reasonArg: string, messageArg: string, pathArg?: string): TypedResponseError =>
  refuse(codeArg, [reasonArg], { causes: [{ ...(pathArg ? { path: pathArg } : {}), message: messageArg }] });
