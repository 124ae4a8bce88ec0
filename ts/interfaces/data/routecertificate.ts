import type { ISealedSecret } from './secret.js';

/**
 * Certificates for the fleet's routes: a route a service declares with `certificate: 'acme'` gets
 * a certificate Cloudly orders by ACME HTTP-01, answered by the cluster's relay, and delivered
 * with its key sealed to the cluster's enrolled recipient (docs/tls.md, docs/relay-protocol.md).
 * Project's own definitions.
 */

/** `pending`: no certificate yet (ordering or waiting); `valid`: issued, until `notAfter`; `failed`: the last order failed. */
export const routeCertificateStates = ['pending', 'valid', 'failed'] as const;
export type TRouteCertificateState = typeof routeCertificateStates[number];

/** The ACME problem of a failed order: the server's problem type (RFC 8555 §6.7) and detail, or Cloudly's own `type` when no server answered. */
export interface IRouteCertificateProblem {
  type: string;
  detail: string;
  /** ISO 8601. */
  at: string;
}

/** One opted-in hostname's certificate status, as administrators read it. */
export interface IRouteCertificateStatus {
  hostname: string;
  serviceId: string;
  state: TRouteCertificateState;
  /** The certificate's expiry (ISO 8601) while one is issued, also while a renewal is pending or failed. */
  notAfter: string | null;
  /** SHA-256 fingerprint of the issued certificate (colon-separated hex), or null. */
  fingerprint256: string | null;
  /** Set while `failed`, and kept when a later renewal fails with an older certificate still valid. */
  problem: IRouteCertificateProblem | null;
  /** When Cloudly orders next after a failure (ISO 8601), or when renewal is due while `valid`. */
  nextAttemptAt: string | null;
}

/** One issued certificate as the relay receives it: the chain in clear, the key sealed. */
export interface IRouteCertificateMaterial {
  hostname: string;
  /** 1 for the first issuance of the hostname's certificate, +1 per renewal; the sealing binding's `version`. */
  version: number;
  /** The certificate and its chain (PEM). */
  certificatePem: string;
  /** ISO 8601. */
  notAfter: string;
  /** The PKCS#8 private key (PEM text), sealed with purpose `route-certificate-key`. */
  key: ISealedSecret;
}
