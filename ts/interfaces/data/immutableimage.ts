import { isSha256Hex } from '../private/dataproperties.js';

/**
 * A sha256 digest written as 64 lowercase hex digits. Every digest a contract carries uses this
 * spelling, so two digests compare as plain strings. Project's own definition.
 */
export type TSha256Digest = string;

/** True for a value spelled as a `TSha256Digest`. */
export const isSha256Digest = (valueArg: unknown): valueArg is TSha256Digest => isSha256Hex(valueArg);
