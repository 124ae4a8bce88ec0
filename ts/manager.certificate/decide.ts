import type { TDecision } from '../core/store.js';
import type { IRouteCertificateStatus } from '../interfaces/data/routecertificate.js';
import { acmeRetryDelayMs, renewalDueAt } from '../manager.acme/acme.manager.js';
import type { IRouteCertificateDocument } from './documents.js';

/**
 * The route certificates' decisions, pure (test/certificate.decision.test.ts): when to order, what
 * an issuance or a failure writes, and what administrators read.
 */

/** What is due for one hostname now: an order, or a look again after `waitMs`. */
export type TRouteCertificateWork =
  | { kind: 'order'; why: 'no-certificate' | 'renewal-due' }
  | { kind: 'wait'; waitMs: number };

/**
 * An order is due when there is no certificate, or renewal time is reached (two thirds into its
 * lifetime, as for Cloudly's own), and no backoff after a failure runs.
 */
export const decideRouteCertificateWork = (docArg: Pick<IRouteCertificateDocument, 'certPem' | 'notBeforeMs' | 'notAfterMs' | 'nextAttemptAt'>, nowArg: number): TRouteCertificateWork => {
  const dueAt = docArg.certPem !== null && docArg.notBeforeMs !== null && docArg.notAfterMs !== null
    ? renewalDueAt(docArg.notBeforeMs, docArg.notAfterMs)
    : null;
  const at = Math.max(dueAt ?? 0, docArg.nextAttemptAt);
  if (at > nowArg) {
    return { kind: 'wait', waitMs: at - nowArg };
  }
  return { kind: 'order', why: dueAt === null ? 'no-certificate' : 'renewal-due' };
};

/** A newly opted-in hostname: `pending`, no certificate. */
export const newRouteCertificate = (idArg: string, clusterIdArg: string, hostnameArg: string, serviceIdArg: string): Omit<IRouteCertificateDocument, 'generation'> => ({
  id: idArg,
  clusterId: clusterIdArg,
  hostname: hostnameArg,
  serviceId: serviceIdArg,
  state: 'pending',
  certPem: null,
  key: null,
  version: 0,
  notBeforeMs: null,
  notAfterMs: null,
  fingerprint256: null,
  failures: 0,
  nextAttemptAt: 0,
  problem: null,
});

/** The hostname moved to another service: only the owner changes. */
export const decideRouteCertificateOwner = (currentArg: IRouteCertificateDocument | null, serviceIdArg: string): TDecision<IRouteCertificateDocument> =>
  (currentArg && currentArg.serviceId !== serviceIdArg ? { kind: 'write', change: { set: { serviceId: serviceIdArg } } } : { kind: 'keep' });

/** An issuance replaces certificate and key together and clears the failures. */
export const decideRouteCertificateIssued = (
  currentArg: IRouteCertificateDocument | null,
  issuedArg: Pick<IRouteCertificateDocument, 'certPem' | 'key' | 'notBeforeMs' | 'notAfterMs' | 'fingerprint256'> & { version: number },
): TDecision<IRouteCertificateDocument> => {
  if (!currentArg || currentArg.version !== issuedArg.version - 1) {
    // The route was removed while the order ran, or another run stored an issuance first.
    return { kind: 'keep' };
  }
  return {
    kind: 'write',
    change: { set: { ...issuedArg, state: 'valid', failures: 0, nextAttemptAt: 0, problem: null } },
  };
};

/**
 * A failed order: `failed` with the problem, unless a certificate that has not expired is still
 * held (a failed renewal), which stays `valid` and carries the problem; the next order waits a
 * pause that doubles from `retryBaseMsArg`.
 */
export const decideRouteCertificateFailed = (
  currentArg: IRouteCertificateDocument | null,
  problemArg: { type: string; detail: string },
  nowArg: number,
  retryBaseMsArg: number,
): TDecision<IRouteCertificateDocument> => {
  if (!currentArg) {
    return { kind: 'keep' };
  }
  const failures = currentArg.failures + 1;
  const stillValid = currentArg.certPem !== null && (currentArg.notAfterMs ?? 0) > nowArg;
  return {
    kind: 'write',
    change: {
      set: {
        state: stillValid ? 'valid' : 'failed',
        failures,
        nextAttemptAt: nowArg + acmeRetryDelayMs(failures, retryBaseMsArg),
        problem: { type: problemArg.type, detail: problemArg.detail, at: nowArg },
      },
    },
  };
};

const iso = (msArg: number | null): string | null => (msArg === null ? null : new Date(msArg).toISOString());

/** What administrators read of one hostname (never the key). */
export const toRouteCertificateStatus = (docArg: IRouteCertificateDocument): IRouteCertificateStatus => {
  const renewalAt = docArg.notBeforeMs !== null && docArg.notAfterMs !== null ? renewalDueAt(docArg.notBeforeMs, docArg.notAfterMs) : null;
  return {
    hostname: docArg.hostname,
    serviceId: docArg.serviceId,
    state: docArg.state,
    notAfter: iso(docArg.notAfterMs),
    fingerprint256: docArg.fingerprint256,
    problem: docArg.problem ? { type: docArg.problem.type, detail: docArg.problem.detail, at: new Date(docArg.problem.at).toISOString() } : null,
    nextAttemptAt: docArg.nextAttemptAt > 0 ? iso(docArg.nextAttemptAt) : iso(renewalAt),
  };
};
