import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import type { IEncryptedSecretValue } from '../core/secretbox.js';
import type { TRouteCertificateState } from '../interfaces/data/routecertificate.js';
import type { IAcmeAccountDocument } from '../manager.acme/acme.manager.js';

/**
 * One opted-in hostname of a cluster and its certificate. Id: `<clusterId>/<hostname>`. The
 * certificate and its key are written in one document (the key sealed by the secret box), so an
 * order cut off by kill -9 leaves the old pair or the new one, never half of one.
 */
export interface IRouteCertificateDocument extends IStoredDocument {
  clusterId: string;
  hostname: string;
  serviceId: string;
  state: TRouteCertificateState;
  /** The issued certificate and chain (PEM), or null before the first issuance. */
  certPem: string | null;
  /** Its private key (PEM), sealed by the secret box at rest; sealed again to the cluster's recipient on delivery. */
  key: IEncryptedSecretValue | null;
  /** Issuances so far (1 after the first): the delivery's sealing `version`. */
  version: number;
  notBeforeMs: number | null;
  notAfterMs: number | null;
  fingerprint256: string | null;
  /** Failed orders in a row since the last issuance. */
  failures: number;
  /** No order before this (epoch ms): the backoff after a failure. */
  nextAttemptAt: number;
  problem: { type: string; detail: string; at: number } | null;
}

/** One HTTP-01 challenge of an order in flight: what the cluster's relay serves for `token` (the id). */
export interface IRouteAcmeChallengeDocument extends IStoredDocument {
  clusterId: string;
  hostname: string;
  keyAuthorization: string;
  expiresAt: number;
}

export const routeCertificateKind = defineDocumentKind<IRouteCertificateDocument>('CloudlyRouteCertificate');
// Challenges and the account are the order's working state, not changes anyone made: not audited.
export const routeAcmeChallengeKind = defineDocumentKind<IRouteAcmeChallengeDocument>('CloudlyRouteAcmeChallenge', { audited: false });
export const routeAcmeAccountKind = defineDocumentKind<IAcmeAccountDocument>('CloudlyRouteAcmeAccount', { audited: false });

export const routeCertificateId = (clusterIdArg: string, hostnameArg: string): string => `${clusterIdArg}/${hostnameArg}`;
/** The secret box's context of a stored key: bound to its document and issuance. */
export const routeCertificateKeyContext = (idArg: string, versionArg: number): string => `${routeCertificateKind.collectionName}/${idArg}/key/${versionArg}`;
