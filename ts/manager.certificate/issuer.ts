import { X509Certificate } from 'node:crypto';
import acme from 'acme-client';
import type { ICloudlyConfig } from '../config.js';
import type { TCloudlyLogger } from '../core/logger.js';
import type { SecretBox } from '../core/secretbox.js';
import type { DocumentStore } from '../core/store.js';
import { acmeOrderLeaseMs, acmeProblemOf, ensureAcmeAccountKey, prepareAcmeRequests, probeAcmeDirectory } from '../manager.acme/acme.manager.js';
import { routeAcmeAccountKind, routeAcmeChallengeKind } from './documents.js';

/**
 * Orders one route's certificate by ACME HTTP-01 (RFC 8555) with `acme-client`, step by step
 * rather than its `auto()`, so a challenge the ACME server found invalid gives back the server's
 * own problem (`urn:ietf:params:acme:error:connection`, …). The key authorization is stored as a
 * challenge document, which the cluster's relay reads with `getClusterAcmeChallenge` and serves.
 * The certificate's private key exists in clear only in this process's memory, until the caller
 * seals it.
 */

export interface IIssuedRouteCertificate {
  certPem: string;
  keyPem: string;
  notBeforeMs: number;
  notAfterMs: number;
  fingerprint256: string;
}

/** An order that failed, with the problem to show: the ACME server's type and detail when it gave one. */
export class RouteCertificateOrderError extends Error {
  constructor(public readonly problem: { type: string; detail: string }) {
    super(problem.detail);
  }
}

const accountId = 'routes';

export interface IRouteCertificateIssuerOptions {
  config: Pick<ICloudlyConfig, 'acmeDirectoryUrl' | 'acmeEmail' | 'acmeCaFile'>;
  store: DocumentStore;
  secrets: SecretBox;
  logger: TCloudlyLogger;
  /** The pause between the library's polls of an authorization or order (5 s in the library). */
  pollMs?: number;
}

export class RouteCertificateIssuer {
  /** The challenge tokens of this process's orders in flight: any other stored challenge was left behind. */
  private readonly tokensInFlight = new Set<string>();

  constructor(private readonly options: IRouteCertificateIssuerOptions) {}

  /** Whether `tokenArg` is the challenge of an order this process is running. */
  public isInFlight(tokenArg: string): boolean {
    return this.tokensInFlight.has(tokenArg);
  }

  private async client(): Promise<acme.Client> {
    const { config } = this.options;
    prepareAcmeRequests(config);
    await probeAcmeDirectory(config);
    const account = await ensureAcmeAccountKey(this.options, routeAcmeAccountKind, accountId, config.acmeDirectoryUrl);
    const pollMs = this.options.pollMs ?? 1_000;
    const client = new acme.Client({
      directoryUrl: config.acmeDirectoryUrl,
      accountKey: account.keyPem,
      ...(account.url ? { accountUrl: account.url } : {}),
      backoffAttempts: 30,
      backoffMin: pollMs,
      backoffMax: pollMs * 4,
    });
    if (!account.url) {
      await client.createAccount({ termsOfServiceAgreed: true, ...(config.acmeEmail ? { contact: [`mailto:${config.acmeEmail}`] } : {}) });
      const url = client.getAccountUrl();
      await this.options.store.mutate(routeAcmeAccountKind, accountId, (currentArg) =>
        (currentArg && currentArg.url === null ? { kind: 'write', change: { set: { url } } } : { kind: 'keep' }));
    }
    return client;
  }

  /** One order for `hostnameArg` of cluster `clusterIdArg`; throws `RouteCertificateOrderError`. */
  public async order(clusterIdArg: string, hostnameArg: string): Promise<IIssuedRouteCertificate> {
    const tokens: string[] = [];
    try {
      const client = await this.client();
      const order = await client.createOrder({ identifiers: [{ type: 'dns', value: hostnameArg }] });
      const authorizations = await client.getAuthorizations(order);
      for (const authorization of authorizations) {
        if (authorization.status === 'valid') {
          continue;
        }
        const challenge = authorization.challenges.find((candidateArg) => candidateArg.type === 'http-01');
        if (!challenge) {
          throw new RouteCertificateOrderError({ type: 'http-01-not-offered', detail: `the ACME server offers no http-01 challenge for ${authorization.identifier.value}` });
        }
        const keyAuthorization = await client.getChallengeKeyAuthorization(challenge);
        tokens.push(challenge.token);
        this.tokensInFlight.add(challenge.token);
        await this.options.store.mutate(routeAcmeChallengeKind, challenge.token, (currentArg) => {
          const fields = { clusterId: clusterIdArg, hostname: hostnameArg, keyAuthorization, expiresAt: Date.now() + acmeOrderLeaseMs };
          return currentArg ? { kind: 'write', change: { set: fields } } : { kind: 'create', doc: { id: challenge.token, ...fields } };
        });
        await client.completeChallenge(challenge);
        try {
          await client.waitForValidStatus(challenge);
        } catch (error) {
          // The server's verdict on the challenge, with its problem document (RFC 8555 §8).
          const [again] = await client.getAuthorizations({ ...order, authorizations: [authorization.url] }).catch(() => [null]);
          const failed = again?.challenges.find((candidateArg) => candidateArg.token === challenge.token) as { error?: { type?: string; detail?: string } } | undefined;
          if (failed?.error?.type) {
            throw new RouteCertificateOrderError({ type: failed.error.type, detail: String(failed.error.detail ?? '').slice(0, 500) });
          }
          throw error;
        }
      }
      const [keyPem, csr] = await acme.crypto.createCsr({ commonName: hostnameArg, altNames: [hostnameArg] }, await acme.crypto.createPrivateEcdsaKey());
      const finalized = await client.finalizeOrder(order, csr);
      const certPem = await client.getCertificate(finalized);
      const leaf = new X509Certificate(certPem);
      return {
        certPem,
        keyPem: keyPem.toString(),
        notBeforeMs: Date.parse(leaf.validFrom),
        notAfterMs: Date.parse(leaf.validTo),
        fingerprint256: leaf.fingerprint256,
      };
    } catch (error) {
      throw error instanceof RouteCertificateOrderError ? error : new RouteCertificateOrderError(acmeProblemOf(error));
    } finally {
      for (const token of tokens) {
        await this.options.store.mutate(routeAcmeChallengeKind, token, (currentArg) => (currentArg ? { kind: 'remove' } : { kind: 'keep' })).catch(() => undefined);
        this.tokensInFlight.delete(token);
      }
    }
  }

  /** Revokes an issued certificate (the route is gone); a failure is logged, the record is forgotten anyway. */
  public async revoke(hostnameArg: string, certPemArg: string): Promise<boolean> {
    try {
      const client = await this.client();
      await client.revokeCertificate(certPemArg, { reason: 5 });
      return true;
    } catch (error) {
      this.options.logger.warn({ hostname: hostnameArg, problem: acmeProblemOf(error) }, 'route certificate: revocation failed; the certificate is forgotten anyway');
      return false;
    }
  }
}
