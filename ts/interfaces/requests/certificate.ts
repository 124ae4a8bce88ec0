import type { ITypedContract } from './admin.js';
import type { IIdentity } from '../data/user.js';
import type { IRouteCertificateMaterial, IRouteCertificateStatus } from '../data/routecertificate.js';

// ---------------------------------------------------------------------------------------------
// Certificates for the fleet's routes (docs/tls.md, docs/relay-protocol.md). Project's own
// definitions.
// ---------------------------------------------------------------------------------------------

/**
 * Relay → Cloudly (elected relay only): the HTTP-01 key authorization for `token`, which the relay
 * serves at `http://<hostname>/.well-known/acme-challenge/<token>` while Cloudly's order for one of
 * its cluster's routes waits for the ACME server's validation. `not-found` `acme-challenge-not-found`
 * for a token of no order of this cluster.
 */
export type IReq_Relay_Cloudly_GetClusterAcmeChallenge = ITypedContract<
  'getClusterAcmeChallenge',
  { token: string },
  { keyAuthorization: string }
>;

/**
 * Relay → Cloudly (elected relay only): every issued certificate of the cluster's opted-in routes,
 * each key sealed to the cluster's current recipient (or the previous one `recipientId` names).
 * `not-found` `secret-recipient-not-enrolled` before any enrollment.
 */
export type IReq_Relay_Cloudly_GetClusterRouteCertificates = ITypedContract<
  'getClusterRouteCertificates',
  { recipientId?: string },
  { certificates: IRouteCertificateMaterial[] }
>;

/** Administrator → Cloudly: the status of every opted-in route of a cluster, sorted by hostname. */
export type IReq_Any_Cloudly_GetRouteCertificates = ITypedContract<
  'getRouteCertificates',
  { identity: IIdentity; clusterId: string },
  { certificates: IRouteCertificateStatus[] }
>;

/**
 * Cloudly → relay: the certificate of `hostname` was issued, renewed or forgotten; read
 * `getClusterRouteCertificates`. A lost hint costs a delay only: a relay reads the certificates
 * again after every (re)connect.
 */
export type IReq_Cloudly_Relay_PushClusterRouteCertificatesChanged = ITypedContract<
  'pushClusterRouteCertificatesChanged',
  { hostname: string },
  Record<string, never>
>;
