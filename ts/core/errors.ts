import { TypedResponseError } from '@api.global/typedrequest';
import { randomUUID } from 'node:crypto';
import { CloudlyRefusal, errorCodes, errorTexts, refusalData, type ICloudlyErrorData, type TErrorCode } from './refusal.js';

export { errorCodes, type ICloudlyErrorData, type TErrorCode } from './refusal.js';
import { mutationIdReusedReason } from '../interfaces/data/refusal.js';
export { identityReasons, isRefusalReasonToken, methodNotServedReason, mutationIdReusedReason, refusalReasonTokenPattern, type IRefusalCause } from '../interfaces/data/refusal.js';

/** A refusal with the catalogue's error data; `throw refuse(...)`. */
export const refuse = (
  codeArg: TErrorCode,
  reasonsArg?: string[],
  extraArg: Pick<ICloudlyErrorData, 'retryAfterMs' | 'causes'> = {},
): TypedResponseError => new TypedResponseError(errorTexts[codeArg], refusalData(codeArg, reasonsArg, extraArg));

/** A refusal whose error data the contract defines itself. */
export const contractRefusal = (textArg: string, errorDataArg: object): TypedResponseError =>
  new TypedResponseError(textArg, errorDataArg);

/**
 * A refusal of either class: typedrequest's (what the server's own code throws) or a
 * `CloudlyRefusal` (what a socket call or a client throws, e.g. a relay's or another instance's
 * refusal).
 */
export const isRefusal = (valueArg: unknown): valueArg is TypedResponseError =>
  valueArg instanceof TypedResponseError || valueArg instanceof CloudlyRefusal;

/** The refusal as typedrequest's class, the only one its router answers as an error. */
export const asTypedResponseError = (refusalArg: TypedResponseError | CloudlyRefusal): TypedResponseError =>
  (refusalArg instanceof TypedResponseError ? refusalArg : new TypedResponseError(refusalArg.errorText, refusalArg.errorData));

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
