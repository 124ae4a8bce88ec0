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

export interface ICloudlyErrorData {
  code: TErrorCode;
  retryable: boolean;
  reasons?: string[];
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
  extraArg: Pick<ICloudlyErrorData, 'retryAfterMs'> = {},
): TypedResponseError => {
  const errorData: ICloudlyErrorData = { code: codeArg, retryable: retryableCodes.has(codeArg) };
  if (reasonsArg && reasonsArg.length > 0) {
    errorData.reasons = reasonsArg;
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
