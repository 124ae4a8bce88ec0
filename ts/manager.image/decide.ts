import { refuse } from '../core/errors.js';
import type { TypedResponseError } from '@api.global/typedrequest';
import type { TDecision } from '../core/store.js';
import type { IService } from '../interfaces/data/service.js';
import type { IImageVersionDocument } from './documents.js';

/** Pure decisions of the image domain: who may move a service's image bytes, and what is recorded. */

/** Reasons this domain gives, defined once (docs/api/images.md lists them). */
export const imageRefusalReasons = Object.freeze({
  serviceNotFound: 'service-not-found',
  /** The relay's cluster does not run the service: its images are not this relay's business. */
  serviceNotOnCluster: 'service-not-on-relay-cluster',
  imageVersionNotHeld: 'image-version-not-held',
  /** The bytes are held in the blob store no longer (or no longer match their record). */
  imageBytesMissing: 'image-version-bytes-missing',
  pushInProgress: 'image-version-push-in-progress',
  /** The stored bytes could not be recorded as the version they were pushed as. */
  recordFailed: 'image-version-record-failed',
} as const);

/**
 * Why the relay of `clusterIdArg` may not push or pull images of the service, or null. A relay
 * moves only the images of services its cluster runs: anything else would let one cluster read or
 * plant another's workloads.
 */
export const judgeRelayImageAccess = (serviceArg: IService | null, clusterIdArg: string): TypedResponseError | null => {
  if (!serviceArg) {
    return refuse('not-found', [imageRefusalReasons.serviceNotFound]);
  }
  if (serviceArg.clusterId !== clusterIdArg) {
    return refuse('forbidden', [imageRefusalReasons.serviceNotOnCluster]);
  }
  return null;
};

/** Records a stored image version once: a version already recorded keeps its first record. */
export const decideImageVersionRecord = (
  currentArg: IImageVersionDocument | null,
  recordArg: Omit<IImageVersionDocument, 'generation'>,
): TDecision<IImageVersionDocument> => (currentArg ? { kind: 'keep' } : { kind: 'create', doc: recordArg });
