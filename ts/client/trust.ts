import * as fs from 'node:fs';
import { connect, rootCertificates, type DetailedPeerCertificate, type PeerCertificate } from 'node:tls';
import { refusalFor, type CloudlyRefusal } from '../core/refusal.js';
import { isLoopbackHost, splitPemCertificates } from '../core/tls.js';

/**
 * What the clients (the CLI, the relay client, the simulator, the demo) trust and refuse on the
 * wire (docs/tls.md). Process-wide, as the system's CA store is: a process talks to one Cloudly
 * or one fleet of them, and the admin and relay clients share one transport.
 *
 * - https/wss verify against the system's CAs plus those of `--ca-file` / `CLOUDLY_CA_FILE`.
 * - A password, identity or relay token never goes in clear to a host other machines could be:
 *   plain http to anything but loopback is refused unless `--insecure-plain-http` allowed it.
 */

export const clientTransportReasons = {
  plainHttpRefused: 'plain-http-to-remote-host',
  caFileUnreadable: 'ca-file-unreadable',
} as const;

const trust = {
  extraCa: [] as string[],
  allowPlainHttp: false,
  /** CLOUDLY_CA_FILE and CLOUDLY_INSECURE_PLAIN_HTTP were read (once, at the first connection of the process). */
  environmentRead: false,
};

/** A library user (a relay built on CloudlyRelayClient) gets the environment's trust without a call of its own. */
const readEnvironmentOnce = (): void => {
  if (!trust.environmentRead) {
    trust.environmentRead = true;
    trustFromEnvironment(process.env);
  }
};

/** Trusts the CA certificates of a PEM file beside the system's; throws a named refusal when it holds none. */
export const trustCaFile = (fileArg: string): void => {
  let pem: string;
  try {
    pem = fs.readFileSync(fileArg, 'utf8');
  } catch (error) {
    throw refusalFor('invalid-request', [clientTransportReasons.caFileUnreadable], {
      causes: [{ path: 'caFile', message: `${fileArg} cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}` }],
    });
  }
  const certificates = splitPemCertificates(pem);
  if (certificates.length === 0) {
    throw refusalFor('invalid-request', [clientTransportReasons.caFileUnreadable], {
      causes: [{ path: 'caFile', message: `${fileArg} holds no PEM certificate` }],
    });
  }
  trust.extraCa.push(...certificates.filter((one) => !trust.extraCa.includes(one)));
};

/** Back to the system's CAs only and no plain http to remote hosts (each CLI run starts from here). */
export const resetClientTrust = (): void => {
  trust.extraCa = [];
  trust.allowPlainHttp = false;
  // What the caller sets next is the whole of it (the CLI reads its own environment).
  trust.environmentRead = true;
};

/** `--insecure-plain-http`: credentials may go in clear to a non-loopback host (a trusted network). */
export const allowPlainHttp = (allowArg: boolean): void => {
  trust.allowPlainHttp = allowArg;
};

/**
 * Reads the environment's trust settings (CLOUDLY_CA_FILE, CLOUDLY_INSECURE_PLAIN_HTTP=1) for a
 * process that has no flags of its own for them.
 */
export const trustFromEnvironment = (envArg: NodeJS.ProcessEnv = process.env): void => {
  trust.environmentRead = true;
  if (envArg.CLOUDLY_CA_FILE) {
    trustCaFile(envArg.CLOUDLY_CA_FILE);
  }
  if (envArg.CLOUDLY_INSECURE_PLAIN_HTTP === '1' || envArg.CLOUDLY_INSECURE_PLAIN_HTTP === 'true') {
    allowPlainHttp(true);
  }
};

/**
 * The TLS options of an outgoing https/wss connection. Node's `ca` replaces the system's list, so
 * the system's roots are named beside the extra ones; without extra ones node's default applies.
 */
export const clientTlsOptions = (): { ca?: string[] } => {
  readEnvironmentOnce();
  return trust.extraCa.length > 0 ? { ca: [...rootCertificates, ...trust.extraCa] } : {};
};

/** The refusal a plain-http URL to a remote host gets (null when it may be used). */
export const plainHttpRefusal = (urlArg: string): CloudlyRefusal | null => {
  const url = new URL(urlArg);
  if (url.protocol !== 'http:' && url.protocol !== 'ws:') {
    return null;
  }
  readEnvironmentOnce();
  // The unspecified address (0.0.0.0, ::) as a destination is this machine too.
  const local = isLoopbackHost(url.hostname) || url.hostname === '0.0.0.0' || url.hostname === '[::]';
  if (trust.allowPlainHttp || local) {
    return null;
  }
  return refusalFor('invalid-request', [clientTransportReasons.plainHttpRefused], {
    causes: [{
      path: 'url',
      message: `${url.host} is reached in plain http: the password, identity or relay token would cross the network in clear. Use https:// (docs/tls.md), or --insecure-plain-http (CLOUDLY_INSECURE_PLAIN_HTTP=1) on a network you trust`,
    }],
  });
};

/** Throws the plain-http refusal for `urlArg`, if it has one. */
export const assertCredentialsMayTravel = (urlArg: string): void => {
  const refusal = plainHttpRefusal(urlArg);
  if (refusal) {
    throw refusal;
  }
};

export interface IServerCertificateView {
  fingerprint256: string;
  subject: string;
  /** The certificate that anchors the chain the server sent (its root, or the last one sent). */
  anchorSubject: string;
  /** Verifies against the system's CAs alone. */
  trustedBySystem: boolean;
  /** Verifies against the system's and the extra CAs (CLOUDLY_CA_FILE / --ca-file). */
  trusted: boolean;
  /** Why it does not verify with the extra CAs either (node's code), when it does not. */
  verifyError: string | null;
}

const handshake = (urlArg: URL, caArg: string[] | undefined): Promise<{ authorized: boolean; error: string | null; certificate: DetailedPeerCertificate }> =>
  new Promise((resolve, reject) => {
    const socket = connect({
      host: urlArg.hostname.replace(/^\[|\]$/g, ''),
      port: Number(urlArg.port || 443),
      servername: /^[\d.]+$|:/.test(urlArg.hostname) ? undefined : urlArg.hostname,
      ...(caArg ? { ca: caArg } : {}),
      // Only looked at, never trusted: nothing is sent on this connection.
      rejectUnauthorized: false,
    }, () => {
      const certificate = socket.getPeerCertificate(true);
      const error = socket.authorizationError ? String((socket.authorizationError as Error & { code?: string }).code ?? socket.authorizationError) : null;
      resolve({ authorized: socket.authorized, error, certificate });
      socket.end();
    });
    socket.once('error', reject);
  });

/**
 * The certificate an https server presents, looked at twice: against the system's CAs and against
 * the trust configured here. `cloudly login` shows it on first contact when only a private CA vouches
 * for it, so the operator can compare it with the fingerprint the server logged.
 */
export const probeServerCertificate = async (urlArg: string): Promise<IServerCertificateView> => {
  const url = new URL(urlArg);
  const bySystem = await handshake(url, undefined);
  const configured = trust.extraCa.length > 0 ? await handshake(url, clientTlsOptions().ca) : bySystem;
  let anchor: DetailedPeerCertificate = configured.certificate;
  const seen = new Set<string>();
  while (anchor.issuerCertificate && anchor.issuerCertificate !== anchor && !seen.has(anchor.fingerprint256)) {
    seen.add(anchor.fingerprint256);
    anchor = anchor.issuerCertificate;
  }
  const name = (certificateArg: PeerCertificate): string =>
    Object.entries(certificateArg.subject ?? {}).map(([key, value]) => `${key}=${String(value)}`).join(', ');
  return {
    fingerprint256: configured.certificate.fingerprint256,
    subject: name(configured.certificate),
    anchorSubject: name(anchor),
    trustedBySystem: bySystem.authorized,
    trusted: configured.authorized,
    verifyError: configured.authorized ? null : configured.error,
  };
};
