import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import type { IEncryptedSecretValue } from '../core/secretbox.js';
import type { IEnrolledSecretRecipient, ISecretRecipient } from '../interfaces/data/secret.js';

/**
 * The documents of the secret manager. None holds a secret in clear: enrollment challenges are kept
 * as their sha256 only, credentials as `IEncryptedSecretValue`, recipients are public keys.
 */

/** One begun enrollment. Id: the enrollment id. It is completed or refused at most once. */
export interface ISecretEnrollmentDocument extends IStoredDocument {
  clusterId: string;
  recipient: ISecretRecipient;
  recipientId: string;
  /** sha256 (hex) of the challenge bytes; the challenge itself exists only sealed. */
  challengeSha256: string;
  createdAt: number;
  expiresAt: number;
  state: 'open' | 'completed' | 'refused';
}

export const secretEnrollmentKind = defineDocumentKind<ISecretEnrollmentDocument>('CloudlySecretEnrollment');

/** A cluster's enrolled recipients. Id: the cluster id. */
export interface ISecretRecipientsDocument extends IStoredDocument {
  clusterId: string;
  current: IEnrolledSecretRecipient;
  previous: IEnrolledSecretRecipient | null;
}

export const secretRecipientsKind = defineDocumentKind<ISecretRecipientsDocument>('CloudlySecretRecipients');

export interface IStoredCredentialVersion {
  secretVersionId: string;
  version: number;
  createdAt: number;
  value: IEncryptedSecretValue;
}

/** A node's Corestore control credential. Id: `clusterNodeDocumentId(clusterId, nodeId)`. */
export interface ICorestoreCredentialDocument extends IStoredDocument {
  clusterId: string;
  nodeId: string;
  secretId: string;
  current: IStoredCredentialVersion;
  previous: (IStoredCredentialVersion & { validUntil: number }) | null;
}

export const corestoreCredentialKind = defineDocumentKind<ICorestoreCredentialDocument>('CloudlyCorestoreCredential');
