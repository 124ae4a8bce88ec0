import { createHash } from 'node:crypto';
import { BlobStoreError, type IBlobStore } from '../core/blobstore.js';
import { refuse } from '../core/errors.js';
import type { TDecision } from '../core/store.js';
import type { IBackupVerification } from '../interfaces/requests/backup.js';
import { backupRefusalReasons } from './decide.js';
import { closureArchiveObjectPath, type IServiceBackupDocument } from './documents.js';

/**
 * Verifying a backup: every closure Cloudly stored for it is read back from the blob store (file
 * system or S3) and its digest compared here, independently of the store's own check, with the
 * receipt the backup recorded when the bytes arrived (the descriptor's exact length and sha256);
 * one hash of the bytes serves both comparisons (`sharedHash`). A closure that
 * is gone is `missing`; one whose bytes differ (or that the store itself finds corrupt) is
 * `mismatch`; the failing object is named. A damaged closure is never reported as good.
 */

/** Why a backup cannot be verified: it has nothing of Cloudly's to check. */
export const verificationRefusal = (backupArg: IServiceBackupDocument | null) => {
  if (!backupArg) {
    return refuse('not-found', [backupRefusalReasons.backupNotFound]);
  }
  if (backupArg.state !== 'completed') {
    return refuse('conflict', [backupRefusalReasons.backupNotCompleted]);
  }
  if (!backupArg.closure) {
    return refuse('conflict', [backupRefusalReasons.closureNotStored]);
  }
  return null;
};

/** Reads the backup's closure back and compares it with its receipt; never throws for what it finds. */
export const verifyStoredClosure = async (
  blobStoreArg: IBlobStore,
  backupArg: IServiceBackupDocument & { closure: NonNullable<IServiceBackupDocument['closure']> },
  nowArg: () => number,
): Promise<IBackupVerification> => {
  const { blobKey, descriptor } = backupArg.closure;
  const object = { path: closureArchiveObjectPath, size: descriptor.byteLength, sha256: descriptor.sha256 };
  // The store feeds this hash as it reads (its own check takes a copy), so each byte is hashed once
  // for both checks; the digest compared here is Cloudly's, against the backup's receipt.
  const hash = createHash('sha256');
  let bytes = 0;
  try {
    for await (const chunk of blobStoreArg.read(blobKey, { transientChunks: true, sharedHash: hash })) {
      bytes += chunk.byteLength;
    }
  } catch (error) {
    if (error instanceof BlobStoreError && error.code === 'blob-not-found') {
      return { outcome: 'missing', verifiedAt: nowArg(), checkedObjects: 1, failedObject: { ...object, problem: 'blob-not-found' } };
    }
    if (error instanceof BlobStoreError && error.code === 'blob-corrupt') {
      return { outcome: 'mismatch', verifiedAt: nowArg(), checkedObjects: 1, failedObject: { ...object, problem: 'blob-corrupt' } };
    }
    // The store did not answer: no outcome can be recorded; the caller is told and may retry.
    throw error;
  }
  const actualSha256 = hash.digest('hex');
  if (bytes !== descriptor.byteLength || actualSha256 !== descriptor.sha256) {
    return {
      outcome: 'mismatch',
      verifiedAt: nowArg(),
      checkedObjects: 1,
      failedObject: { ...object, problem: bytes !== descriptor.byteLength ? 'size-differs' : 'sha256-differs', actualSize: bytes, actualSha256 },
    };
  }
  return { outcome: 'ok', verifiedAt: nowArg(), checkedObjects: 1 };
};

/** Records a verification on the backup, unless the backup changed under it into something else. */
export const decideVerificationRecord = (
  currentArg: IServiceBackupDocument | null,
  verifiedArg: { closureSha256: string; verification: IBackupVerification },
): TDecision<IServiceBackupDocument> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuse('not-found', [backupRefusalReasons.backupNotFound]) };
  }
  if (currentArg.closure?.descriptor.sha256 !== verifiedArg.closureSha256) {
    return { kind: 'refuse', refusal: refuse('conflict', [backupRefusalReasons.closureNotStored]) };
  }
  return { kind: 'write', change: { set: { verification: verifiedArg.verification } } };
};
