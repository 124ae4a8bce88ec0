import type { Cloudly } from '../classes.cloudly.js';
import { refuseNamed } from '../core/errors.js';
import { adminQuery, registerOperations, relayQuery } from '../core/operations.js';
import { isIdString, isString, type TFieldCheck } from '../core/validation.js';
import type { IRouteCertificateMaterial, IRouteCertificateStatus } from '../interfaces/data/routecertificate.js';
import type { ISealedSecretBinding } from '../interfaces/data/secret.js';
import { toRouteCertificateStatus } from './decide.js';
import { routeAcmeChallengeKind, routeCertificateKeyContext, routeCertificateKind, type IRouteCertificateDocument } from './documents.js';

/** HTTP-01 tokens are base64url (RFC 8555 §8.3), at least 128 bits. */
const isAcmeToken: TFieldCheck = isString(16, 256, /^[A-Za-z0-9_-]+$/);
const isRecipientId: TFieldCheck = isString(1, 64, /^x25519:[0-9a-f]{32}$/);

/** What the relay opens a delivered key against: the binding of one hostname's issuance. */
export const routeCertificateKeyBinding = (clusterIdArg: string, hostnameArg: string, versionArg: number): ISealedSecretBinding => ({
  clusterId: clusterIdArg,
  nodeId: null,
  purpose: 'route-certificate-key',
  secretVersion: { secretId: `route-certificate/${hostnameArg}`, secretVersionId: `v${versionArg}` },
  version: versionArg,
  enrollmentId: null,
});

const byHostname = (leftArg: { hostname: string }, rightArg: { hostname: string }): number =>
  (leftArg.hostname < rightArg.hostname ? -1 : leftArg.hostname > rightArg.hostname ? 1 : 0);

/**
 * The route certificates' methods (docs/tls.md, docs/relay-protocol.md): the relay's HTTP-01
 * challenge read and its sealed delivery, and the administrators' status read. The orders are the
 * route certificates controller's (./routecertificates.controller.ts).
 */
export class CertificateManager {
  constructor(private readonly cloudly: Cloudly) {
    registerOperations(cloudly, [
      relayQuery({
        method: 'getClusterAcmeChallenge',
        access: 'relay',
        input: { required: { token: isAcmeToken } },
        run: async (request, context) => {
          await cloudly.clusterManager.requireElected(context.session);
          const challenge = await cloudly.store.get(routeAcmeChallengeKind, request.token);
          // Another cluster's token reads as missing, as does one whose order is over.
          if (!challenge || challenge.clusterId !== context.clusterId || challenge.expiresAt < Date.now()) {
            throw refuseNamed('not-found', 'acme-challenge-not-found', 'names no HTTP-01 challenge of an order for this relay\'s cluster', 'request.token');
          }
          return { keyAuthorization: challenge.keyAuthorization };
        },
      }),
      relayQuery({
        method: 'getClusterRouteCertificates',
        access: 'relay',
        input: { required: {}, optional: { recipientId: isRecipientId } },
        run: async (request, context) => {
          await cloudly.clusterManager.requireElected(context.session);
          return { certificates: await this.sealedCertificates(context.clusterId, request.recipientId) };
        },
      }),
      adminQuery({
        method: 'getRouteCertificates',
        access: 'read',
        input: { required: { clusterId: isIdString } },
        run: async (request) => {
          await cloudly.clusterManager.requireCluster(request.clusterId);
          return { certificates: await this.statuses(request.clusterId) };
        },
      }),
    ]);
  }

  /** Every opted-in route's status of the cluster, sorted by hostname (the overview and the CLI). */
  public async statuses(clusterIdArg: string): Promise<IRouteCertificateStatus[]> {
    return (await this.cloudly.store.find(routeCertificateKind, { clusterId: clusterIdArg })).map(toRouteCertificateStatus).sort(byHostname);
  }

  /** Each issued certificate, its key opened from the secret box and sealed to the cluster's recipient. */
  private async sealedCertificates(clusterIdArg: string, recipientIdArg: string | undefined): Promise<IRouteCertificateMaterial[]> {
    const issued = (await this.cloudly.store.find(routeCertificateKind, { clusterId: clusterIdArg }))
      .filter((docArg): docArg is IRouteCertificateDocument & { certPem: string; key: NonNullable<IRouteCertificateDocument['key']>; notAfterMs: number } =>
        docArg.certPem !== null && docArg.key !== null && docArg.notAfterMs !== null)
      .sort(byHostname);
    const certificates: IRouteCertificateMaterial[] = [];
    for (const doc of issued) {
      const keyBytes = this.cloudly.secrets.decrypt(doc.key, routeCertificateKeyContext(doc.id, doc.version));
      try {
        certificates.push({
          hostname: doc.hostname,
          version: doc.version,
          certificatePem: doc.certPem,
          notAfter: new Date(doc.notAfterMs).toISOString(),
          key: await this.cloudly.secretManager.sealToClusterRecipient(clusterIdArg, recipientIdArg, routeCertificateKeyBinding(clusterIdArg, doc.hostname, doc.version), keyBytes),
        });
      } finally {
        keyBytes.fill(0);
      }
    }
    return certificates;
  }
}
