import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import type { SecureContextOptions } from 'node:tls';
import type { TCloudlyLogger } from './logger.js';

/**
 * Cloudly's own TLS certificate (docs/tls.md): a PEM certificate with its chain and a PEM private
 * key, judged before they are served and served again, without dropping a connection, when the
 * files change or on SIGHUP. A pair that does not hold up keeps the one already served.
 */

/** Why a certificate and key were not served (the stable token; the message says the detail). */
export const tlsRefusalReasons = {
  unreadable: 'tls-file-unreadable',
  noCertificate: 'tls-no-certificate',
  badKey: 'tls-key-invalid',
  keyMismatch: 'tls-key-mismatch',
  expired: 'tls-certificate-expired',
  notYetValid: 'tls-certificate-not-yet-valid',
  chainInvalid: 'tls-chain-invalid',
} as const;
export type TTlsRefusalReason = typeof tlsRefusalReasons[keyof typeof tlsRefusalReasons];

export class TlsMaterialError extends Error {
  constructor(public readonly reason: TTlsRefusalReason, message: string) {
    super(message);
    this.name = 'TlsMaterialError';
  }
}

/** The oldest protocol version Cloudly speaks. */
export const minimumTlsVersion = 'TLSv1.2' as const;

export interface ITlsMaterial {
  /** The PEM text as read (leaf first, then its chain). */
  certPem: string;
  keyPem: string;
  notBeforeMs: number;
  notAfterMs: number;
  /** SHA-256 fingerprint of the leaf, as openssl prints it (AA:BB:…). */
  fingerprint256: string;
  subject: string;
  /** The names the leaf is valid for (its subjectAltName). */
  subjectAltName: string | null;
}

const pemCertificatePattern = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** Every certificate of a PEM bundle, in order. */
export const splitPemCertificates = (pemArg: string): string[] => pemArg.match(pemCertificatePattern) ?? [];

/**
 * Judges a certificate chain and its key: the leaf matches the key, every certificate is valid at
 * `nowMsArg`, and each is signed by the next. The last one need not be a root: a public CA's root
 * is the client's to have, not the server's to send. Throws TlsMaterialError.
 */
export const judgeTlsMaterial = (certPemArg: string, keyPemArg: string, nowMsArg: number): ITlsMaterial => {
  const pems = splitPemCertificates(certPemArg);
  if (pems.length === 0) {
    throw new TlsMaterialError(tlsRefusalReasons.noCertificate, 'the certificate file holds no PEM certificate');
  }
  let chain: X509Certificate[];
  try {
    chain = pems.map((pem) => new X509Certificate(pem));
  } catch (error) {
    throw new TlsMaterialError(tlsRefusalReasons.noCertificate, `the certificate file holds a certificate that cannot be read: ${(error as Error).message}`);
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPemArg);
  } catch {
    // The parser's message could quote the key's bytes; it is not passed on.
    throw new TlsMaterialError(tlsRefusalReasons.badKey, 'the key file holds no PEM private key Cloudly can read (unencrypted PKCS#8, PKCS#1 or SEC1)');
  }
  const leaf = chain[0];
  if (!leaf.checkPrivateKey(key)) {
    throw new TlsMaterialError(tlsRefusalReasons.keyMismatch, `the private key does not belong to the certificate "${leaf.subject.replace(/\n/g, ', ')}"`);
  }
  chain.forEach((certificate, index) => {
    const name = index === 0 ? 'the certificate' : `chain certificate ${index} ("${certificate.subject.replace(/\n/g, ', ')}")`;
    const notAfterMs = Date.parse(certificate.validTo);
    const notBeforeMs = Date.parse(certificate.validFrom);
    if (notAfterMs <= nowMsArg) {
      throw new TlsMaterialError(tlsRefusalReasons.expired, `${name} expired on ${new Date(notAfterMs).toISOString()}`);
    }
    if (notBeforeMs > nowMsArg) {
      throw new TlsMaterialError(tlsRefusalReasons.notYetValid, `${name} is valid only from ${new Date(notBeforeMs).toISOString()}`);
    }
    const issuer = chain[index + 1];
    if (issuer && !(certificate.checkIssued(issuer) && certificate.verify(issuer.publicKey))) {
      throw new TlsMaterialError(tlsRefusalReasons.chainInvalid, `${name} is not signed by the next certificate in the file ("${issuer.subject.replace(/\n/g, ', ')}")`);
    }
    if (!issuer && index > 0 && certificate.checkIssued(certificate) && !certificate.verify(certificate.publicKey)) {
      throw new TlsMaterialError(tlsRefusalReasons.chainInvalid, `${name} claims to be self-signed but its signature does not verify`);
    }
  });
  return {
    certPem: certPemArg,
    keyPem: keyPemArg,
    notBeforeMs: Date.parse(leaf.validFrom),
    notAfterMs: Date.parse(leaf.validTo),
    fingerprint256: leaf.fingerprint256,
    subject: leaf.subject.replace(/\n/g, ', '),
    subjectAltName: leaf.subjectAltName ?? null,
  };
};

/** Reads and judges the two files; throws TlsMaterialError. */
export const loadTlsFiles = async (certFileArg: string, keyFileArg: string, nowMsArg = Date.now()): Promise<ITlsMaterial> => {
  const read = async (fileArg: string, whatArg: string): Promise<string> => {
    try {
      return await fsp.readFile(fileArg, 'utf8');
    } catch (error) {
      throw new TlsMaterialError(tlsRefusalReasons.unreadable, `the ${whatArg} file ${fileArg} cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
  };
  return judgeTlsMaterial(await read(certFileArg, 'certificate'), await read(keyFileArg, 'key'), nowMsArg);
};

/** What the HTTPS server is given for a certificate (also on every reload). */
export const secureContextOptions = (materialArg: ITlsMaterial): SecureContextOptions => ({
  cert: materialArg.certPem,
  key: materialArg.keyPem,
  minVersion: minimumTlsVersion,
});

/** A server whose certificate can be replaced while it serves (node's https.Server). */
export interface ISecureContextTarget {
  setSecureContext(optionsArg: SecureContextOptions): void;
}

/** What a listener serves its certificate from: files (TlsCertificateSource) or ACME (ts/manager.acme). */
export interface IServedCertificate {
  readonly current: ITlsMaterial;
  readonly reloads: { ok: number; refused: number };
  /** Hands replacements to the server from now on. */
  attach(targetArg: ISecureContextTarget): void;
}

export interface ITlsReloadOutcome {
  ok: boolean;
  reason?: TTlsRefusalReason;
  message?: string;
  fingerprint256: string;
}

/**
 * The certificate being served and its source: `reload()` judges the source again and, if it holds
 * up, hands it to the server; new handshakes get it, open connections keep theirs. The files are
 * polled (`fs.watchFile`), because a replaced file (a rename, as certbot and Kubernetes secrets do)
 * escapes a watch on the old inode.
 */
export class TlsCertificateSource implements IServedCertificate {
  public current: ITlsMaterial;
  public reloads = { ok: 0, refused: 0 };
  private target: ISecureContextTarget | null = null;
  private watching: Array<{ file: string; listener: (currentArg: fs.Stats, previousArg: fs.Stats) => void }> = [];
  private pending: NodeJS.Timeout | null = null;
  private reloading: Promise<ITlsReloadOutcome> | null = null;

  private constructor(
    private readonly options: { certFile: string; keyFile: string; pollMs: number; logger: TCloudlyLogger },
    initialArg: ITlsMaterial,
  ) {
    this.current = initialArg;
  }

  /** Reads and judges the files; throws TlsMaterialError, so a bad pair stops the start. */
  public static async open(optionsArg: { certFile: string; keyFile: string; pollMs: number; logger: TCloudlyLogger }): Promise<TlsCertificateSource> {
    return new TlsCertificateSource(optionsArg, await loadTlsFiles(optionsArg.certFile, optionsArg.keyFile));
  }

  /** Serves reloads to `targetArg` and starts watching the files. */
  public attach(targetArg: ISecureContextTarget): void {
    this.target = targetArg;
    for (const file of [this.options.certFile, this.options.keyFile]) {
      const listener = (currentArg: fs.Stats, previousArg: fs.Stats): void => {
        if (currentArg.mtimeMs !== previousArg.mtimeMs || currentArg.ino !== previousArg.ino || currentArg.size !== previousArg.size) {
          this.scheduleReload();
        }
      };
      fs.watchFile(file, { interval: this.options.pollMs, persistent: false }, listener);
      this.watching.push({ file, listener });
    }
  }

  /** A certificate and its key are usually replaced one after the other: one reload once both settled. */
  private scheduleReload(): void {
    if (this.pending) {
      clearTimeout(this.pending);
    }
    this.pending = setTimeout(() => {
      this.pending = null;
      void this.reload('file changed');
    }, Math.min(250, this.options.pollMs));
  }

  /** Judges the files again and serves them if they hold up; otherwise keeps the current pair. */
  public async reload(triggerArg: string): Promise<ITlsReloadOutcome> {
    // One at a time, so an older read never replaces a newer one.
    while (this.reloading) {
      await this.reloading.catch(() => undefined);
    }
    this.reloading = this.reloadOnce(triggerArg);
    try {
      return await this.reloading;
    } finally {
      this.reloading = null;
    }
  }

  private async reloadOnce(triggerArg: string): Promise<ITlsReloadOutcome> {
    let material: ITlsMaterial;
    try {
      material = await loadTlsFiles(this.options.certFile, this.options.keyFile);
    } catch (error) {
      if (!(error instanceof TlsMaterialError)) {
        throw error;
      }
      this.reloads.refused++;
      this.options.logger.error(
        { trigger: triggerArg, reason: error.reason, servedFingerprint256: this.current.fingerprint256 },
        `TLS certificate not reloaded, the one already served stays: ${error.message}`,
      );
      return { ok: false, reason: error.reason, message: error.message, fingerprint256: this.current.fingerprint256 };
    }
    this.target?.setSecureContext(secureContextOptions(material));
    const previous = this.current.fingerprint256;
    this.current = material;
    this.reloads.ok++;
    this.options.logger.info(
      { trigger: triggerArg, fingerprint256: material.fingerprint256, previousFingerprint256: previous, notAfter: new Date(material.notAfterMs).toISOString() },
      'TLS certificate reloaded',
    );
    return { ok: true, fingerprint256: material.fingerprint256 };
  }

  public stop(): void {
    // Only this source's listeners: another server in the process may watch the same files.
    for (const { file, listener } of this.watching.splice(0)) {
      fs.unwatchFile(file, listener);
    }
    if (this.pending) {
      clearTimeout(this.pending);
      this.pending = null;
    }
  }
}

/** Whether a listen address is reachable only from this machine. */
export const isLoopbackHost = (hostArg: string): boolean => {
  const host = hostArg.replace(/^\[|\]$/g, '').toLowerCase();
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) || host === '::ffff:127.0.0.1';
};
