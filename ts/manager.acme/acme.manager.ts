import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import { randomUUID, webcrypto } from 'node:crypto';
import acme from 'acme-client';
import * as x509 from '@peculiar/x509';
import { defineDocumentKind, type DocumentStore, type IDocumentKind, type IStoredDocument, type TDecision } from '../core/store.js';
import type { SecretBox, IEncryptedSecretValue } from '../core/secretbox.js';
import type { TCloudlyLogger } from '../core/logger.js';
import { judgeTlsMaterial, secureContextOptions, TlsMaterialError, type IServedCertificate, type ISecureContextTarget, type ITlsMaterial } from '../core/tls.js';
import type { ICloudlyConfig } from '../config.js';

/**
 * Cloudly's own certificate by ACME (RFC 8555; docs/tls.md, "ACME"), through the `acme-client`
 * library. One instance orders at a time (a lease document taken by compare-and-swap, as the
 * reconciler's); every instance serves what is stored. The certificate and its key are stored in
 * one document, the key sealed by the secret box, so an order cut off by kill -9 leaves either the
 * old pair or the new one. Renewal starts at two thirds of the lifetime; a failed order is tried
 * again after a pause that doubles (up to `maximumRetryMs`), and the certificate served stays.
 */

export interface IAcmeAccountDocument extends IStoredDocument {
  directoryUrl: string;
  /** The account's private key (PEM), sealed. */
  key: IEncryptedSecretValue;
  /** The account's URL at the ACME server, once registered. */
  url: string | null;
}

export interface IAcmeCertificateDocument extends IStoredDocument {
  domains: string[];
  certPem: string;
  /** The certificate's private key (PEM), sealed. */
  key: IEncryptedSecretValue;
  notBeforeMs: number;
  notAfterMs: number;
  fingerprint256: string;
  orderedBy: string;
  orderedAt: number;
}

/** What ACME is doing for the whole installation, kept beside the certificate (`/readyz`). */
export interface IAcmeStatusDocument extends IStoredDocument {
  state: 'pending' | 'ordering' | 'valid' | 'failed';
  /** Failures in a row since the last success. */
  failures: number;
  /** No order before this (epoch ms): the backoff after a failure. */
  nextAttemptAt: number;
  /** The last failure: the ACME problem's type when the server gave one, and its detail. */
  problem: { type: string; detail: string; at: number } | null;
}

export interface IAcmeLeaseDocument extends IStoredDocument {
  holder: string;
  expiresAt: number;
}

export interface IAcmeChallengeDocument extends IStoredDocument {
  /** The HTTP-01 key authorization served at /.well-known/acme-challenge/<id>. */
  keyAuthorization: string;
  expiresAt: number;
}

// None of these are changes an administrator made: no audit events.
export const acmeAccountKind = defineDocumentKind<IAcmeAccountDocument>('CloudlyAcmeAccount', { audited: false });
export const acmeCertificateKind = defineDocumentKind<IAcmeCertificateDocument>('CloudlyAcmeCertificate', { audited: false });
export const acmeStatusKind = defineDocumentKind<IAcmeStatusDocument>('CloudlyAcmeStatus', { audited: false });
export const acmeLeaseKind = defineDocumentKind<IAcmeLeaseDocument>('CloudlyAcmeLease', { audited: false });
export const acmeChallengeKind = defineDocumentKind<IAcmeChallengeDocument>('CloudlyAcmeChallenge', { audited: false });

const ownId = 'cloudly';
const keyContext = (kindArg: string): string => `${kindArg}/${ownId}/key`;
/** How long one order may hold the lease; an instance that died mid-order frees it after this. */
export const acmeOrderLeaseMs = 10 * 60_000;
export const maximumRetryMs = 6 * 3600_000;
/** How long a stop waits for an order in flight. */
const stopWaitMs = 3_000;

/** When renewal is due: two thirds into the certificate's lifetime. */
export const renewalDueAt = (notBeforeMsArg: number, notAfterMsArg: number): number =>
  notBeforeMsArg + Math.floor(((notAfterMsArg - notBeforeMsArg) * 2) / 3);

/** The pause before the next order after `failuresArg` failures in a row: doubling from `baseMsArg`, capped. */
export const acmeRetryDelayMs = (failuresArg: number, baseMsArg: number): number =>
  Math.min(maximumRetryMs, baseMsArg * 2 ** Math.max(0, Math.min(failuresArg - 1, 30)));

/** Whether an order is due: no certificate for these names, or renewal time reached, and no backoff running. */
export const decideAcmeOrder = (
  certificateArg: Pick<IAcmeCertificateDocument, 'domains' | 'notBeforeMs' | 'notAfterMs'> | null,
  statusArg: Pick<IAcmeStatusDocument, 'nextAttemptAt'> | null,
  domainsArg: string[],
  nowArg: number,
): { order: boolean; why: 'no-certificate' | 'domains-changed' | 'renewal-due' | 'backoff' | 'current' } => {
  const sameDomains = certificateArg !== null && [...certificateArg.domains].sort().join(',') === [...domainsArg].sort().join(',');
  const why = certificateArg === null ? 'no-certificate'
    : !sameDomains ? 'domains-changed'
      : nowArg >= renewalDueAt(certificateArg.notBeforeMs, certificateArg.notAfterMs) ? 'renewal-due'
        : 'current';
  if (why === 'current') {
    return { order: false, why };
  }
  if (statusArg && statusArg.nextAttemptAt > nowArg) {
    return { order: false, why: 'backoff' };
  }
  return { order: true, why };
};

/** The lease decision: take it when it is free, expired or already ours. */
export const decideAcmeLease = (currentArg: IAcmeLeaseDocument | null, instanceArg: string, nowArg: number, ttlMsArg: number): TDecision<IAcmeLeaseDocument> => {
  if (!currentArg) {
    return { kind: 'create', doc: { id: ownId, holder: instanceArg, expiresAt: nowArg + ttlMsArg } };
  }
  if (currentArg.holder === instanceArg || currentArg.expiresAt <= nowArg) {
    return { kind: 'write', change: { set: { holder: instanceArg, expiresAt: nowArg + ttlMsArg } } };
  }
  return { kind: 'keep' };
};

/** An ACME problem document's type and detail, or the error's message. */
export const acmeProblemOf = (errorArg: unknown): { type: string; detail: string } => {
  const error = errorArg as { message?: string; type?: string; detail?: string };
  // acme-client throws an Error whose message is the problem's detail; the type is not kept on it.
  const type = typeof error?.type === 'string' ? error.type : 'order-failed';
  return { type, detail: String(error?.detail ?? error?.message ?? errorArg).slice(0, 500) };
};

/**
 * Settings of the library's shared HTTP client, for every order (Cloudly's own and the routes').
 * The library waits 5, 10, … 25 s between its own retries of a failed request (75 s before an
 * order against a server that is down fails). Cloudly backs off between whole orders itself and
 * shows the problem meanwhile, so the library tries once more, after 2 s (a Retry-After the server
 * sends still wins).
 */
export const prepareAcmeRequests = (configArg: Pick<ICloudlyConfig, 'acmeCaFile'>): void => {
  const settings = (acme.axios.defaults as { acmeSettings?: { retryMaxAttempts: number; retryDefaultDelay: number } }).acmeSettings;
  if (settings) {
    settings.retryMaxAttempts = 1;
    settings.retryDefaultDelay = 2;
  }
  if (configArg.acmeCaFile) {
    // A private ACME server (pebble in the tests): its https is verified against this CA.
    acme.axios.defaults.httpsAgent = new https.Agent({ ca: fs.readFileSync(configArg.acmeCaFile, 'utf8') });
  }
};

/**
 * Reads the directory once with node's own client first: when the ACME server cannot be reached,
 * acme-client 5.4 loses the network error (it fails reading the missing response), so the problem
 * would say nothing useful.
 */
export const probeAcmeDirectory = (configArg: Pick<ICloudlyConfig, 'acmeCaFile' | 'acmeDirectoryUrl'>): Promise<void> => {
  const ca = configArg.acmeCaFile ? fs.readFileSync(configArg.acmeCaFile, 'utf8') : undefined;
  return new Promise((resolve, reject) => {
    const request = https.get(configArg.acmeDirectoryUrl, { ...(ca ? { ca } : {}), agent: false, timeout: 15_000 }, (responseArg) => {
      responseArg.resume();
      if ((responseArg.statusCode ?? 0) >= 200 && (responseArg.statusCode ?? 0) < 300) {
        resolve();
      } else {
        reject(Object.assign(new Error(`the ACME directory answered HTTP ${responseArg.statusCode}`), { type: 'directory-unavailable' }));
      }
    });
    request.once('timeout', () => request.destroy(new Error('no answer within 15 s')));
    request.once('error', (errorArg: NodeJS.ErrnoException) =>
      reject(Object.assign(new Error(`the ACME directory cannot be reached: ${errorArg.code ?? ''} ${errorArg.message}`.trim()), { type: 'directory-unreachable' })));
  });
};

/**
 * An ACME account key kept sealed at rest in one document of `kindArg`: the stored one for this
 * directory, or a new one stored first (a lost race takes the winner's).
 */
export const ensureAcmeAccountKey = async (
  depsArg: { store: DocumentStore; secrets: SecretBox },
  kindArg: IDocumentKind<IAcmeAccountDocument>,
  idArg: string,
  directoryUrlArg: string,
): Promise<{ keyPem: string; url: string | null }> => {
  const context = `${kindArg.collectionName}/${idArg}/key`;
  const existing = await depsArg.store.get(kindArg, idArg);
  if (existing && existing.directoryUrl === directoryUrlArg) {
    return { keyPem: depsArg.secrets.decryptText(existing.key, context), url: existing.url };
  }
  const keyPem = (await acme.crypto.createPrivateEcdsaKey()).toString();
  const sealed = depsArg.secrets.encrypt(keyPem, context);
  const { doc } = await depsArg.store.mutate(kindArg, idArg, (currentArg) => {
    if (currentArg && currentArg.directoryUrl === directoryUrlArg) {
      return { kind: 'keep' };
    }
    const fresh = { directoryUrl: directoryUrlArg, key: sealed, url: null };
    return currentArg ? { kind: 'write', change: { set: fresh } } : { kind: 'create', doc: { id: idArg, ...fresh } };
  });
  return { keyPem: depsArg.secrets.decryptText(doc!.key, context), url: doc!.url };
};

/** A self-signed certificate for the names, served only until the first order is stored. */
const placeholderCertificate = async (domainsArg: string[]): Promise<{ certPem: string; keyPem: string }> => {
  x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
  const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']) as webcrypto.CryptoKeyPair;
  const now = Date.now();
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomUUID().replace(/-/g, '').slice(0, 16),
    name: 'CN=Cloudly placeholder (ACME certificate pending)',
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 7 * 24 * 3600_000),
    keys,
    signingAlgorithm: algorithm,
    extensions: [new x509.SubjectAlternativeNameExtension(domainsArg.map((value) => ({ type: 'dns' as const, value })))],
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  return {
    certPem: certificate.toString('pem'),
    keyPem: `-----BEGIN PRIVATE KEY-----\n${pkcs8.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END PRIVATE KEY-----\n`,
  };
};

export interface IAcmeOptions {
  config: Pick<ICloudlyConfig, 'host' | 'acmeDirectoryUrl' | 'acmeDomains' | 'acmeEmail' | 'acmeHttpPort' | 'acmeCaFile' | 'acmeCheckIntervalMs' | 'acmeRetryMs'>;
  store: DocumentStore;
  secrets: SecretBox;
  logger: TCloudlyLogger;
  instanceId: string;
}

/**
 * The ACME certificate source: like the file source (ts/core/tls.ts) it has a `current` pair and
 * serves replacements to the server; the replacements come from the database.
 */
export class AcmeCertificates implements IServedCertificate {
  public current!: ITlsMaterial;
  /** The stored certificate now served (its generation), or 0 for the placeholder. */
  public servedGeneration = 0;
  public reloads = { ok: 0, refused: 0 };
  public orders = { ok: 0, failed: 0 };
  public status: Omit<IAcmeStatusDocument, 'id' | 'generation'> = { state: 'pending', failures: 0, nextAttemptAt: 0, problem: null };
  private target: ISecureContextTarget | null = null;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private responder: http.Server | null = null;
  private stopped = false;

  constructor(private readonly options: IAcmeOptions) {}

  private get domains(): string[] {
    return this.options.config.acmeDomains;
  }

  /** Loads the stored certificate (or makes a placeholder) and opens the HTTP-01 responder. */
  public async start(): Promise<void> {
    const stored = await this.options.store.get(acmeCertificateKind, ownId);
    const material = stored ? this.materialOf(stored) : null;
    if (stored && material) {
      this.current = material;
      this.servedGeneration = stored.generation;
    } else {
      const placeholder = await placeholderCertificate(this.domains);
      this.current = judgeTlsMaterial(placeholder.certPem, placeholder.keyPem, Date.now());
    }
    await this.readStatus();
    this.responder = http.createServer((requestArg, responseArg) => void this.answerChallenge(requestArg, responseArg));
    await new Promise<void>((resolve, reject) => {
      this.responder!.once('error', reject);
      this.responder!.listen(this.options.config.acmeHttpPort, this.options.config.host, () => resolve());
    });
  }

  /** The port the HTTP-01 responder listens on. */
  public get httpPort(): number {
    const address = this.responder?.address();
    return typeof address === 'object' && address ? address.port : this.options.config.acmeHttpPort;
  }

  /** Serves reloads to the server and starts the loop (first look at once). */
  public attach(targetArg: ISecureContextTarget): void {
    this.target = targetArg;
    this.schedule(0);
  }

  private schedule(delayMsArg: number): void {
    if (this.stopped) {
      return;
    }
    this.timer = setTimeout(() => {
      this.ticking = this.tick().catch((error: unknown) => {
        this.options.logger.error({ err: error }, 'ACME: the certificate loop failed; it runs again');
      }).finally(() => {
        this.ticking = null;
        this.schedule(this.options.config.acmeCheckIntervalMs);
      });
    }, delayMsArg);
    this.timer.unref();
  }

  /** One look: serve what is stored if it is newer, then order if this instance should. */
  public async tick(): Promise<void> {
    const stored = await this.options.store.get(acmeCertificateKind, ownId);
    if (stored && stored.generation !== this.servedGeneration) {
      this.serve(stored);
    }
    const status = await this.readStatus();
    const decision = decideAcmeOrder(stored, status, this.domains, Date.now());
    if (!decision.order) {
      return;
    }
    const { doc: lease } = await this.options.store.mutate(acmeLeaseKind, ownId, (currentArg) =>
      decideAcmeLease(currentArg, this.options.instanceId, Date.now(), acmeOrderLeaseMs));
    if (!lease || lease.holder !== this.options.instanceId) {
      // Another instance orders; this one serves the result when it is stored.
      return;
    }
    try {
      await this.order(decision.why);
    } finally {
      await this.options.store.mutate(acmeLeaseKind, ownId, (currentArg) =>
        (currentArg && currentArg.holder === this.options.instanceId ? { kind: 'write', change: { set: { expiresAt: 0 } } } : { kind: 'keep' }));
    }
  }

  private materialOf(docArg: IAcmeCertificateDocument): ITlsMaterial | null {
    try {
      return judgeTlsMaterial(docArg.certPem, this.options.secrets.decryptText(docArg.key, keyContext(acmeCertificateKind.collectionName)), Date.now());
    } catch (error) {
      this.reloads.refused++;
      this.options.logger.error({ reason: error instanceof TlsMaterialError ? error.reason : 'unreadable', generation: docArg.generation },
        `ACME: the stored certificate is not served: ${(error as Error).message}`);
      return null;
    }
  }

  private serve(docArg: IAcmeCertificateDocument): void {
    const material = this.materialOf(docArg);
    if (!material) {
      return;
    }
    this.target?.setSecureContext(secureContextOptions(material));
    const previous = this.current.fingerprint256;
    this.current = material;
    this.servedGeneration = docArg.generation;
    this.reloads.ok++;
    this.options.logger.info({ fingerprint256: material.fingerprint256, previousFingerprint256: previous, notAfter: new Date(material.notAfterMs).toISOString(), orderedBy: docArg.orderedBy },
      'ACME: serving the stored certificate');
  }

  private async readStatus(): Promise<IAcmeStatusDocument | null> {
    const status = await this.options.store.get(acmeStatusKind, ownId);
    if (status) {
      const { id: _id, generation: _generation, ...rest } = status;
      this.status = rest;
    }
    return status;
  }

  private async writeStatus(changeArg: (currentArg: Omit<IAcmeStatusDocument, 'id' | 'generation'>) => Omit<IAcmeStatusDocument, 'id' | 'generation'>): Promise<void> {
    const { doc } = await this.options.store.mutate(acmeStatusKind, ownId, (currentArg) => {
      const next = changeArg(currentArg ?? { state: 'pending', failures: 0, nextAttemptAt: 0, problem: null });
      return currentArg ? { kind: 'write', change: { set: next } } : { kind: 'create', doc: { id: ownId, ...next } };
    });
    if (doc) {
      const { id: _id, generation: _generation, ...rest } = doc;
      this.status = rest;
    }
  }

  private accountKey(): Promise<{ keyPem: string; url: string | null }> {
    return ensureAcmeAccountKey(this.options, acmeAccountKind, ownId, this.options.config.acmeDirectoryUrl);
  }

  private async order(whyArg: string): Promise<void> {
    const startedAt = Date.now();
    await this.writeStatus((currentArg) => ({ ...currentArg, state: 'ordering' }));
    this.options.logger.info({ domains: this.domains, why: whyArg, directoryUrl: this.options.config.acmeDirectoryUrl }, 'ACME: ordering a certificate');
    try {
      prepareAcmeRequests(this.options.config);
      await probeAcmeDirectory(this.options.config);
      const account = await this.accountKey();
      const client = new acme.Client({
        directoryUrl: this.options.config.acmeDirectoryUrl,
        accountKey: account.keyPem,
        ...(account.url ? { accountUrl: account.url } : {}),
      });
      const [certificateKey, csr] = await acme.crypto.createCsr({ commonName: this.domains[0], altNames: this.domains }, await acme.crypto.createPrivateEcdsaKey());
      const certPem = await client.auto({
        csr,
        ...(this.options.config.acmeEmail ? { email: this.options.config.acmeEmail } : {}),
        termsOfServiceAgreed: true,
        challengePriority: ['http-01'],
        // The ACME server checks the challenge itself; a self-check would need this instance to
        // reach its own public name.
        skipChallengeVerification: true,
        challengeCreateFn: async (_authzArg, challengeArg, keyAuthorizationArg) => {
          await this.options.store.mutate(acmeChallengeKind, challengeArg.token, (currentArg) => {
            const fields = { keyAuthorization: keyAuthorizationArg, expiresAt: Date.now() + acmeOrderLeaseMs };
            return currentArg ? { kind: 'write', change: { set: fields } } : { kind: 'create', doc: { id: challengeArg.token, ...fields } };
          });
        },
        challengeRemoveFn: async (_authzArg, challengeArg) => {
          await this.options.store.mutate(acmeChallengeKind, challengeArg.token, () => ({ kind: 'remove' }));
        },
      });
      if (!account.url) {
        const url = client.getAccountUrl();
        await this.options.store.mutate(acmeAccountKind, ownId, (currentArg) =>
          (currentArg && currentArg.url === null ? { kind: 'write', change: { set: { url } } } : { kind: 'keep' }));
      }
      const keyPem = certificateKey.toString();
      // Judged before it is stored: what is stored is always servable.
      const material = judgeTlsMaterial(certPem, keyPem, Date.now());
      const fields = {
        domains: [...this.domains],
        certPem,
        key: this.options.secrets.encrypt(keyPem, keyContext(acmeCertificateKind.collectionName)),
        notBeforeMs: material.notBeforeMs,
        notAfterMs: material.notAfterMs,
        fingerprint256: material.fingerprint256,
        orderedBy: this.options.instanceId,
        orderedAt: Date.now(),
      };
      // One write holds the certificate and its sealed key together.
      const { doc } = await this.options.store.mutate(acmeCertificateKind, ownId, (currentArg) =>
        (currentArg ? { kind: 'write', change: { set: fields } } : { kind: 'create', doc: { id: ownId, ...fields } }));
      this.orders.ok++;
      await this.writeStatus(() => ({ state: 'valid', failures: 0, nextAttemptAt: 0, problem: null }));
      this.options.logger.info({ domains: this.domains, fingerprint256: material.fingerprint256, notAfter: new Date(material.notAfterMs).toISOString(), tookMs: Date.now() - startedAt },
        'ACME: certificate stored');
      if (doc) {
        this.serve(doc);
      }
    } catch (error) {
      this.orders.failed++;
      const problem = acmeProblemOf(error);
      await this.writeStatus((currentArg) => {
        const failures = currentArg.failures + 1;
        return { state: 'failed', failures, nextAttemptAt: Date.now() + acmeRetryDelayMs(failures, this.options.config.acmeRetryMs), problem: { ...problem, at: Date.now() } };
      });
      this.options.logger.warn({ domains: this.domains, problem, failures: this.status.failures, nextAttemptAt: new Date(this.status.nextAttemptAt).toISOString(), servedFingerprint256: this.current.fingerprint256 },
        'ACME: the order failed; the certificate served stays, and it is tried again after the pause');
    }
  }

  private async answerChallenge(requestArg: http.IncomingMessage, responseArg: http.ServerResponse): Promise<void> {
    const match = /^\/\.well-known\/acme-challenge\/([A-Za-z0-9_-]{1,256})$/.exec(requestArg.url ?? '');
    try {
      const challenge = match && requestArg.method === 'GET' ? await this.options.store.get(acmeChallengeKind, match[1]) : null;
      if (!challenge || challenge.expiresAt < Date.now()) {
        responseArg.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
        return;
      }
      responseArg.writeHead(200, { 'content-type': 'application/octet-stream' }).end(challenge.keyAuthorization);
    } catch {
      responseArg.writeHead(503, { 'content-type': 'text/plain' }).end('unavailable');
    }
  }

  public async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) {
      clearTimeout(this.timer);
    }
    // An order in flight may wait long on the ACME server: the stop waits a little for it, not
    // for the whole order (the lease runs out and another instance, or the next start, orders).
    let bound: NodeJS.Timeout | null = null;
    await Promise.race([this.ticking?.catch(() => undefined), new Promise((resolve) => { bound = setTimeout(resolve, stopWaitMs); })]);
    if (bound) {
      clearTimeout(bound);
    }
    if (this.responder) {
      this.responder.closeAllConnections();
      await new Promise<void>((resolve) => this.responder!.close(() => resolve()));
    }
  }
}
