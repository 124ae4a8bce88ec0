/**
 * A refusal as it crosses Cloudly's wire, with no package behind it: the catalogue of codes, the
 * error data, and `CloudlyRefusal`, the class the clients (admin, relay, the CLI) and both sides of
 * a socket throw. It has the shape of typedrequest's `TypedResponseError` (`{ errorText,
 * errorData }`, not an `Error`), so anything that reads one reads the other. The server's handlers
 * still answer through typedrequest's router, which only knows its own class: `core/errors.ts`
 * turns a `CloudlyRefusal` into one at that boundary. Keeping this module free of typedrequest
 * keeps the command line from loading it (and the ~900 files behind it) for a plain HTTP call.
 */

import type { IRefusalCause } from '../interfaces/data/refusal.js';

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
  /** What a person reads about the refusal; clients may show it and never branch on it. */
  causes?: IRefusalCause[];
  errorId?: string;
  /** On `unavailable` refusals of a limit: how long to wait before trying again. */
  retryAfterMs?: number;
}

const retryableCodes: ReadonlySet<TErrorCode> = new Set(['conflict', 'unavailable']);

export const errorTexts: Record<TErrorCode, string> = {
  unauthenticated: 'The request carries no valid identity.',
  forbidden: 'The identity may not do this.',
  'invalid-request': 'The request was refused.',
  'not-found': 'The named object does not exist.',
  conflict: 'The object changed since it was read.',
  unavailable: 'The service needed for this request is unavailable.',
  internal: 'Cloudly failed to answer this request.',
};

/** The catalogue's error data for a code and its reasons. */
export const refusalData = (
  codeArg: TErrorCode,
  reasonsArg?: string[],
  extraArg: Pick<ICloudlyErrorData, 'retryAfterMs' | 'causes'> = {},
): ICloudlyErrorData => {
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
  return errorData;
};

/** What every refusal carries, whichever class holds it. */
export interface IRefusal {
  errorText: string;
  errorData: any;
}

/**
 * A refusal answered by the other side (or recorded by an operation): its text and its error data
 * exactly as they came. Thrown by `postEnvelope`, by a socket call (`PeerCallError`) and by
 * `outcomeOf`.
 */
export class CloudlyRefusal implements IRefusal {
  constructor(
    public errorText: string,
    public errorData: any,
  ) {}
}

/** A catalogue refusal as a `CloudlyRefusal` (the server's own code uses `refuse` in core/errors.ts). */
export const refusalFor = (
  codeArg: TErrorCode,
  reasonsArg?: string[],
  extraArg: Pick<ICloudlyErrorData, 'retryAfterMs' | 'causes'> = {},
): CloudlyRefusal => new CloudlyRefusal(errorTexts[codeArg], refusalData(codeArg, reasonsArg, extraArg));
