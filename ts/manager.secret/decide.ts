import { refuse, refuseNamed } from '../core/errors.js';
import type { TDecision } from '../core/store.js';
import type { IEnrolledSecretRecipient } from '../interfaces/data/secret.js';
import type {
  ICorestoreCredentialDocument,
  ISecretEnrollmentDocument,
  ISecretRecipientsDocument,
  IStoredCredentialVersion,
} from './documents.js';

/** Reasons a relay meets on the secret methods; docs/relay-protocol.md names each one. */
export const secretRefusalReasons = {
  enrollmentNotFound: 'enrollment-not-found',
  enrollmentExpired: 'enrollment-expired',
  enrollmentUsed: 'enrollment-already-used',
  enrollmentProofRefused: 'enrollment-proof-refused',
  recipientNotEnrolled: 'secret-recipient-not-enrolled',
  recipientUnknown: 'secret-recipient-unknown',
} as const;

/** A new enrollment is created under a fresh id; an id that exists already is never reused. */
export const decideEnrollmentBegin = (
  currentArg: ISecretEnrollmentDocument | null,
  enrollmentArg: Omit<ISecretEnrollmentDocument, 'generation'>,
): TDecision<ISecretEnrollmentDocument> => currentArg
  ? { kind: 'refuse', refusal: refuseNamed('conflict', 'enrollment-id-taken', 'the enrollment id is taken; begin again') }
  : { kind: 'create', doc: enrollmentArg };

/**
 * How a completion attempt is judged. `proofMatches` is computed by the caller in constant time.
 * Another cluster's enrollment reads as missing. Any judged attempt uses the enrollment up: a
 * wrong proof is not retried on the same challenge.
 */
export const judgeEnrollmentCompletion = (
  enrollmentArg: ISecretEnrollmentDocument | null,
  factsArg: { clusterId: string; proofMatches: boolean; now: number },
): 'complete' | (typeof secretRefusalReasons)[keyof typeof secretRefusalReasons] => {
  if (!enrollmentArg || enrollmentArg.clusterId !== factsArg.clusterId) {
    return secretRefusalReasons.enrollmentNotFound;
  }
  if (enrollmentArg.state !== 'open') {
    return secretRefusalReasons.enrollmentUsed;
  }
  if (factsArg.now >= enrollmentArg.expiresAt) {
    return secretRefusalReasons.enrollmentExpired;
  }
  return factsArg.proofMatches ? 'complete' : secretRefusalReasons.enrollmentProofRefused;
};

/** The write a judgement makes on the enrollment: completed or refused, or a refusal with no write. */
export const decideEnrollmentCompletion = (
  enrollmentArg: ISecretEnrollmentDocument | null,
  factsArg: { clusterId: string; proofMatches: boolean; now: number },
): TDecision<ISecretEnrollmentDocument> => {
  const verdict = judgeEnrollmentCompletion(enrollmentArg, factsArg);
  switch (verdict) {
    case 'complete':
      return { kind: 'write', change: { set: { state: 'completed' } } };
    case secretRefusalReasons.enrollmentProofRefused:
    case secretRefusalReasons.enrollmentExpired:
      // Used up (and so never completed later), then refused by the caller from the stored state.
      return { kind: 'write', change: { set: { state: 'refused' } } };
    case secretRefusalReasons.enrollmentNotFound:
      return { kind: 'refuse', refusal: refuse('not-found', [verdict]) };
    default:
      return { kind: 'refuse', refusal: refuse('conflict', [verdict]) };
  }
};

/** Enrolling makes the key current and keeps the one it replaces as previous; the same key again changes nothing. */
export const decideRecipientEnrollment = (
  currentArg: ISecretRecipientsDocument | null,
  clusterIdArg: string,
  recipientArg: IEnrolledSecretRecipient,
): TDecision<ISecretRecipientsDocument> => {
  if (!currentArg) {
    return { kind: 'create', doc: { id: clusterIdArg, clusterId: clusterIdArg, current: recipientArg, previous: null } };
  }
  if (currentArg.current.recipientId === recipientArg.recipientId) {
    return { kind: 'keep' };
  }
  return { kind: 'write', change: { set: { current: recipientArg, previous: currentArg.current } } };
};

/** Which recipient material is sealed to: the current one, or the one `recipientIdArg` names (current or previous). */
export const chooseRecipient = (
  recipientsArg: ISecretRecipientsDocument | null,
  recipientIdArg: string | undefined,
): IEnrolledSecretRecipient => {
  if (!recipientsArg) {
    throw refuse('not-found', [secretRefusalReasons.recipientNotEnrolled]);
  }
  if (recipientIdArg === undefined || recipientIdArg === recipientsArg.current.recipientId) {
    return recipientsArg.current;
  }
  if (recipientsArg.previous && recipientIdArg === recipientsArg.previous.recipientId) {
    return recipientsArg.previous;
  }
  throw refuse('not-found', [secretRefusalReasons.recipientUnknown]);
};

/**
 * A node's credential: created at version 1 when missing (`ensure`), or replaced when still at
 * `expectedVersion` (`rotate`; expected 0 creates). The replaced version stays valid until
 * `now + graceMs`. `freshArg` is the new version, generated and encrypted by the caller.
 */
export const decideCredentialChange = (
  currentArg: ICorestoreCredentialDocument | null,
  intentArg:
    | { kind: 'ensure'; identity: { id: string; clusterId: string; nodeId: string; secretId: string } }
    | { kind: 'rotate'; identity: { id: string; clusterId: string; nodeId: string; secretId: string }; expectedVersion: number; now: number; graceMs: number },
  freshArg: (versionArg: number) => IStoredCredentialVersion,
): TDecision<ICorestoreCredentialDocument> => {
  const { id, clusterId, nodeId, secretId } = intentArg.identity;
  if (!currentArg) {
    if (intentArg.kind === 'rotate' && intentArg.expectedVersion !== 0) {
      return { kind: 'refuse', refusal: refuseNamed('conflict', 'version-mismatch', `is ${intentArg.expectedVersion}, but node ${nodeId} has no credential yet (version 0)`, 'request.expectedVersion') };
    }
    return { kind: 'create', doc: { id, clusterId, nodeId, secretId, current: freshArg(1), previous: null } };
  }
  if (intentArg.kind === 'ensure') {
    return { kind: 'keep' };
  }
  if (currentArg.current.version !== intentArg.expectedVersion) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'version-mismatch', `is ${intentArg.expectedVersion}, but the credential is at version ${currentArg.current.version}`, 'request.expectedVersion') };
  }
  return {
    kind: 'write',
    change: { set: { current: freshArg(currentArg.current.version + 1), previous: { ...currentArg.current, validUntil: intentArg.now + intentArg.graceMs } } },
  };
};
