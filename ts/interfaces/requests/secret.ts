import type { ITypedContract } from './admin.js';
import type { IIdentity } from '../data/user.js';
import type {
  ICorestoreControlCredentialReference,
  IEnrolledSecretRecipient,
  ISealedSecret,
  ISecretGroup,
  ISecretGroupWritable,
  ISecretRecipient,
  ISecretVersionWritable,
} from '../data/secret.js';
import type { IPageAnswer, IPageRequest } from './pagination.js';

// ---------------------------------------------------------------------------------------------
// Relay → Cloudly: secret recipient enrollment and sealed material. The method names are the
// spec's; the shapes are the project's own definitions (docs/relay-protocol.md, docs/secrets.md).
// ---------------------------------------------------------------------------------------------

/**
 * Relay → Cloudly (elected relay only): starts enrolling an X25519 key as the cluster's secret
 * recipient. The answer is a random challenge sealed to that key; only its private key opens it.
 */
export type IReq_Relay_Cloudly_BeginSecretRecipientEnrollment = ITypedContract<
  'beginSecretRecipientEnrollment',
  { recipient: ISecretRecipient },
  { enrollmentId: string; challenge: ISealedSecret; expiresAt: number }
>;

/**
 * Relay → Cloudly (elected relay only): proves possession of the private key with the opened
 * challenge (unpadded base64url of its bytes) and makes the key the cluster's current recipient;
 * the recipient it replaces stays as `previous` until the next enrollment. An enrollment is
 * completed at most once: a wrong proof, an expired or a used enrollment is refused.
 */
export type IReq_Relay_Cloudly_CompleteSecretRecipientEnrollment = ITypedContract<
  'completeSecretRecipientEnrollment',
  { enrollmentId: string; proof: string },
  { recipient: IEnrolledSecretRecipient; previous: IEnrolledSecretRecipient | null }
>;

/**
 * Relay → Cloudly (elected relay only): the Corestore control credential of one node of the
 * relay's cluster, sealed to the cluster's current recipient (or to the previous one when
 * `recipientId` names it). `previous` is the replaced credential while its grace period lasts.
 */
export type IReq_Relay_Cloudly_GetCorestoreControlCredentialMaterial = ITypedContract<
  'getCorestoreControlCredentialMaterial',
  { nodeId: string; recipientId?: string },
  {
    credential: ICorestoreControlCredentialReference;
    material: ISealedSecret;
    previousMaterial: ISealedSecret | null;
  }
>;

// ---------------------------------------------------------------------------------------------
// Administrator → Cloudly. Project's own definitions.
// ---------------------------------------------------------------------------------------------

/** A node's Corestore control credential reference (never its value); created on first read. */
export type IReq_Any_Cloudly_GetCorestoreControlCredential = ITypedContract<
  'getCorestoreControlCredential',
  { identity: IIdentity; clusterId: string; nodeId: string },
  { credential: ICorestoreControlCredentialReference }
>;

/**
 * Replaces a node's Corestore control credential with a fresh one, if it is still at
 * `expectedVersion` (else `conflict`). The replaced one stays valid for the grace period.
 */
export type IReq_Any_Cloudly_RotateCorestoreControlCredential = ITypedContract<
  'rotateCorestoreControlCredential',
  { identity: IIdentity; clusterId: string; nodeId: string; expectedVersion: number },
  { credential: ICorestoreControlCredentialReference }
>;

/** The cluster's enrolled secret recipients (public keys only). */
export type IReq_Any_Cloudly_GetSecretRecipients = ITypedContract<
  'getSecretRecipients',
  { identity: IIdentity; clusterId: string },
  { current: IEnrolledSecretRecipient | null; previous: IEnrolledSecretRecipient | null }
>;

/**
 * Replaces the identity signing key with a new one, if the current key is still `expectedKeyId`
 * (else `conflict`). The replaced key keeps verifying (and stays in the JWKS) until the next rotation.
 */
export type IReq_Any_Cloudly_RotateIdentitySigningKey = ITypedContract<
  'rotateIdentitySigningKey',
  { identity: IIdentity; expectedKeyId: string },
  { currentKeyId: string; previousKeyId: string }
>;

// ---------------------------------------------------------------------------------------------
// Administrator → Cloudly: secret groups Cloudly cannot read (docs/secrets.md, "Secret groups").
// Project's own methods. A value travels only sealed (in the client, to each cluster's recipient);
// a value in clear is refused `secret-value-in-clear` and neither stored nor logged.
// ---------------------------------------------------------------------------------------------

/** A new group, without versions (its id is part of what each version's value is sealed to). */
export type IReq_Any_Cloudly_CreateSecretGroup = ITypedContract<
  'createSecretGroup',
  { identity: IIdentity; group: ISecretGroupWritable },
  { group: ISecretGroup }
>;

/**
 * Adds a version sealed to every cluster of the group (a rotation), if the group is still at
 * `expectedGeneration`. The same `secretVersionId` and `version` as a stored version re-seals it
 * (after a cluster enrolled a new recipient): the value must be the same length.
 */
export type IReq_Any_Cloudly_AddSecretVersion = ITypedContract<
  'addSecretVersion',
  { identity: IIdentity; secretGroupId: string; expectedGeneration: number; version: ISecretVersionWritable },
  { group: ISecretGroup }
>;

/** Every secret group, metadata only: never a value, never a ciphertext. */
export type IReq_Any_Cloudly_GetSecretGroups = ITypedContract<
  'getSecretGroups',
  { identity: IIdentity } & IPageRequest,
  { groups: ISecretGroup[] } & IPageAnswer
>;

/** Deletes a group at `expectedGeneration`; refused while a service names one of its versions. */
export type IReq_Any_Cloudly_DeleteSecretGroup = ITypedContract<
  'deleteSecretGroup',
  { identity: IIdentity; secretGroupId: string; expectedGeneration: number },
  { secretGroupId: string; deleted: true }
>;
