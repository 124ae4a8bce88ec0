import { isCanonicalId, isPlainDataRecord, isSha256Hex } from '../private/dataproperties.js';

/**
 * A Corestore database closure: the exact bytes Corestore exported for one service's
 * databases, described before the first byte moves so both ends can prove them.
 * Project's own definition (the upstream type lives in a Node-only entry we do not have).
 */

/** The only closure encoding this server understands. Project's own definition. */
export const corestoreDatabaseClosureFormat = 'corestore-database-closure-v1';

/** Largest closure the server accepts: 64 GiB. Project's own definition. */
export const maximumCorestoreDatabaseClosureByteLength = 64 * 1024 * 1024 * 1024;

/**
 * What Corestore issued when it exported the closure. Cloudly cannot check Corestore's
 * signature, so it keeps the receipt untouched and hands it back with the bytes.
 * Project's own definition.
 */
export interface ICorestoreDatabaseClosureReceipt {
  /** Corestore's identifier for this export. */
  receiptId: string;
  /** sha256 hex of Corestore's full receipt document. */
  receiptSha256: string;
}

/** Project's own definition: format, exact byte length, sha256 of the bytes, Corestore's receipt. */
export interface ICorestoreDatabaseClosureDescriptor {
  format: typeof corestoreDatabaseClosureFormat;
  /** Exact number of bytes the stream carries; not one more, not one less. */
  byteLength: number;
  /** Lowercase hex sha256 over exactly those bytes. */
  sha256: string;
  receipt: ICorestoreDatabaseClosureReceipt;
}

const descriptorKeys = ['format', 'byteLength', 'sha256', 'receipt'] as const;
const receiptKeys = ['receiptId', 'receiptSha256'] as const;

/**
 * Every reason a closure descriptor is refused, in key order. An empty list means the
 * value can be trusted as an `ICorestoreDatabaseClosureDescriptor`.
 */
export const validateCorestoreDatabaseClosureDescriptor = (
  valueArg: unknown,
  pathArg = 'descriptor',
): string[] => {
  try {
    return collectDescriptorReasons(valueArg, pathArg);
  } catch {
    // A proxy or exotic object that throws while being read is simply not a descriptor.
    return [`${pathArg} could not be read as plain data`];
  }
};

const collectDescriptorReasons = (valueArg: unknown, pathArg: string): string[] => {
  if (!isPlainDataRecord(valueArg)) {
    return [`${pathArg} must be a plain object`];
  }
  const reasons: string[] = [];
  for (const key of Object.keys(valueArg)) {
    if (!(descriptorKeys as readonly string[]).includes(key)) {
      reasons.push(`${pathArg}.${key} is not a descriptor field`);
    }
  }
  const { format, byteLength, sha256, receipt } = valueArg;
  if (format !== corestoreDatabaseClosureFormat) {
    reasons.push(`${pathArg}.format must be ${corestoreDatabaseClosureFormat}`);
  }
  if (!Number.isSafeInteger(byteLength)
    || (byteLength as number) < 1
    || (byteLength as number) > maximumCorestoreDatabaseClosureByteLength) {
    reasons.push(
      `${pathArg}.byteLength must be an integer from 1 to ${maximumCorestoreDatabaseClosureByteLength}`,
    );
  }
  if (!isSha256Hex(sha256)) {
    reasons.push(`${pathArg}.sha256 must be 64 lowercase hex digits`);
  }
  if (!isPlainDataRecord(receipt)) {
    reasons.push(`${pathArg}.receipt must be a plain object`);
  } else {
    for (const key of Object.keys(receipt)) {
      if (!(receiptKeys as readonly string[]).includes(key)) {
        reasons.push(`${pathArg}.receipt.${key} is not a receipt field`);
      }
    }
    if (!isCanonicalId(receipt.receiptId)) {
      reasons.push(`${pathArg}.receipt.receiptId must be an identifier of 1 to 128 letters, digits, '.', '_' or '-'`);
    }
    if (!isSha256Hex(receipt.receiptSha256)) {
      reasons.push(`${pathArg}.receipt.receiptSha256 must be 64 lowercase hex digits`);
    }
  }
  return reasons;
};
