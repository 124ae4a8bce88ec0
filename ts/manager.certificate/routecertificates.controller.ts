import { ofOwningClusterInputs, type IController, type IReconcileContext, type IReconcileResult } from '../core/controller.js';
import type { ICommittedChange } from '../core/changefeed.js';
import type { TCloudlyLogger } from '../core/logger.js';
import type { SecretBox } from '../core/secretbox.js';
import type { DocumentStore } from '../core/store.js';
import { allClusterIds, clusterKind } from '../manager.cluster/documents.js';
import { deriveClusterRoutes, routedServiceView } from '../manager.desiredstate/routes.js';
import { serviceKind } from '../manager.service/documents.js';
import {
  decideRouteCertificateFailed,
  decideRouteCertificateIssued,
  decideRouteCertificateOwner,
  decideRouteCertificateWork,
  newRouteCertificate,
} from './decide.js';
import { routeAcmeAccountKind, routeAcmeChallengeKind, routeCertificateId, routeCertificateKeyContext, routeCertificateKind } from './documents.js';
import { RouteCertificateOrderError, type IIssuedRouteCertificate } from './issuer.js';

export interface IRouteCertificatesPorts {
  store: DocumentStore;
  secrets: SecretBox;
  logger: TCloudlyLogger;
  /** Orders a certificate by ACME HTTP-01; throws `RouteCertificateOrderError`. */
  order: (clusterIdArg: string, hostnameArg: string) => Promise<IIssuedRouteCertificate>;
  /** Whether a stored challenge's token is of an order this process is running. */
  orderInFlight: (tokenArg: string) => boolean;
  /** Revokes a certificate whose route is gone (best effort). */
  revoke: (hostnameArg: string, certPemArg: string) => Promise<boolean>;
  /** Tells the cluster's relay a hostname's certificate changed (best effort: the relay also reads after every connect). */
  hint: (clusterIdArg: string, hostnameArg: string) => Promise<void>;
  /** The first pause after a failed order (CLOUDLY_ACME_RETRY_MS); it doubles per failure, up to 6 h. */
  retryBaseMs: number;
}

/** A service's own key: whether its change can touch a certificate of its cluster. */
const serviceKeyPrefix = 'service:';

/** The longest a key waits before it is looked at again, even when nothing is due (a lost timer, a clock step). */
const maximumWaitMs = 3600_000;

/**
 * The route certificates controller (docs/tls.md, "Certificates for the fleet's routes"): for each
 * hostname a live service of the cluster routes with `certificate: 'acme'` (the route table's own
 * derivation, `deriveClusterRoutes`, so one hostname has one owner), a certificate record exists;
 * an order is placed when none is issued or renewal is due; a record whose route is gone is revoked
 * and removed. The one writer of the certificates, their HTTP-01 challenges and the ACME account
 * of the routes. Only the reconciling instance runs it, so one instance orders. Keys are cluster ids,
 * and `service:<id>` for a changed service: most services route nothing with a certificate, so a
 * change of one looks only at that service and the certificates its routes could touch, and queues
 * its cluster (whose run reads every service of it) only when one could change.
 */
export class RouteCertificatesController implements IController {
  public readonly name = 'route-certificates';
  public readonly writes = [routeCertificateKind.collectionName, routeAcmeChallengeKind.collectionName, routeAcmeAccountKind.collectionName] as const;
  public readonly inputs = {
    CloudlyService: (changeArg: ICommittedChange) => [`${serviceKeyPrefix}${changeArg.id}`],
    CloudlyCluster: ofOwningClusterInputs,
  };
  /** Only a service's routes decide its certificates: a new image changes no certificate. */
  public readonly inputViews = { CloudlyService: routedServiceView };
  /**
   * A renewal or a retry coming due is a `requeueAfterMs` deadline of the cluster's own run: the
   * resync runs only the clusters whose digest moved (a cluster's services, the cluster, and what
   * is written here for it).
   */
  public readonly digestResync = { keyOf: (clusterIdArg: string) => clusterIdArg };
  // An order waits on the ACME server for seconds: a few clusters at a time.
  public readonly concurrency = 4;

  constructor(private readonly ports: IRouteCertificatesPorts) {}

  public async all(): Promise<readonly string[]> {
    const [clusters, certificates] = await Promise.all([
      allClusterIds(this.ports.store),
      this.ports.store.find(routeCertificateKind, {}),
    ]);
    // A removed cluster's certificates are forgotten by its own key.
    return [...new Set([...clusters, ...certificates.map((docArg) => docArg.clusterId)])];
  }

  /** The opted-in hostnames of the cluster's live services, each with the service that owns its route. */
  private async wanted(clusterIdArg: string): Promise<Map<string, string>> {
    if (!(await this.ports.store.get(clusterKind, clusterIdArg))) {
      return new Map();
    }
    const live = (await this.ports.store.find(serviceKind, { clusterId: clusterIdArg }))
      .filter((serviceArg) => serviceArg.deletionRequestedAt === undefined);
    return new Map(deriveClusterRoutes(live)
      .filter((routeArg) => routeArg.certificate === 'acme')
      .map((routeArg) => [routeArg.hostname, routeArg.serviceId] as const));
  }

  public scopeOf(keyArg: string): string {
    return keyArg.startsWith(serviceKeyPrefix) ? 'expand' : 'cluster';
  }

  public async reconcile(keyArg: string, contextArg: IReconcileContext): Promise<IReconcileResult> {
    if (keyArg.startsWith(serviceKeyPrefix)) {
      for (const clusterId of await this.clustersTouchedBy(keyArg.slice(serviceKeyPrefix.length))) {
        contextArg.enqueue(clusterId);
      }
      return { outcome: 'expanded' };
    }
    return this.reconcileCluster(keyArg);
  }

  /**
   * The clusters whose certificates a change of the service can touch: its own when it routes a
   * hostname with a certificate, or routes a hostname that has a certificate record (it may now own
   * that route), and every cluster holding a certificate of the service (a route dropped, the
   * service gone).
   */
  private async clustersTouchedBy(serviceIdArg: string): Promise<string[]> {
    const { store } = this.ports;
    const [service, held] = await Promise.all([
      store.get(serviceKind, serviceIdArg),
      store.findFields(routeCertificateKind, { serviceId: serviceIdArg }, ['clusterId']),
    ]);
    const clusters = new Set(held.map((docArg) => docArg.clusterId));
    const routes = service?.routes ?? [];
    if (service && routes.length > 0) {
      const optsIn = routes.some((routeArg) => routeArg.certificate === 'acme');
      const certified = optsIn || (await store.findFields(routeCertificateKind, {
        clusterId: service.clusterId,
        hostname: { $in: routes.map((routeArg) => routeArg.hostname) },
      }, ['id'])).length > 0;
      if (certified) {
        clusters.add(service.clusterId);
      }
    }
    return [...clusters];
  }

  private async reconcileCluster(clusterIdArg: string): Promise<IReconcileResult> {
    const { store } = this.ports;
    const [wanted, stored] = await Promise.all([
      this.wanted(clusterIdArg),
      store.find(routeCertificateKind, { clusterId: clusterIdArg }),
    ]);
    let changed = false;
    let removed = false;
    // A challenge of no order this process is running was left behind, by a process killed
    // mid-order (whose key died with its memory, so the order cannot finish) or by an instance that
    // lost the reconciler's lease (this one orders now). It is removed rather than served until it expires.
    for (const challenge of await store.find(routeAcmeChallengeKind, { clusterId: clusterIdArg })) {
      if (!this.ports.orderInFlight(challenge.id)) {
        const { outcome } = await store.mutate(routeAcmeChallengeKind, challenge.id, (currentArg) =>
          (currentArg && !this.ports.orderInFlight(currentArg.id) ? { kind: 'remove' } : { kind: 'keep' }));
        removed = removed || outcome === 'removed';
      }
    }
    for (const doc of stored) {
      if (wanted.has(doc.hostname)) {
        continue;
      }
      const revoked = doc.certPem ? await this.ports.revoke(doc.hostname, doc.certPem) : false;
      // By its generation: a record stored again meanwhile is decided again on the next run.
      const { outcome } = await store.mutate(routeCertificateKind, doc.id, (currentArg) =>
        (currentArg && currentArg.generation === doc.generation ? { kind: 'remove' } : { kind: 'keep' }));
      removed = removed || outcome === 'removed';
      await this.ports.hint(clusterIdArg, doc.hostname);
      this.ports.logger.info({ clusterId: clusterIdArg, hostname: doc.hostname, revoked }, 'route certificate: the route is gone; its certificate is forgotten');
    }
    let waitMs = maximumWaitMs;
    for (const [hostname, serviceId] of wanted) {
      const id = routeCertificateId(clusterIdArg, hostname);
      let doc = stored.find((candidateArg) => candidateArg.id === id) ?? null;
      if (!doc) {
        const created = await store.mutate(routeCertificateKind, id, (currentArg) =>
          (currentArg ? { kind: 'keep' } : { kind: 'create', doc: newRouteCertificate(id, clusterIdArg, hostname, serviceId) }));
        doc = created.doc;
        changed = true;
      } else if (doc.serviceId !== serviceId) {
        doc = (await store.mutate(routeCertificateKind, id, (currentArg) => decideRouteCertificateOwner(currentArg, serviceId))).doc;
        changed = true;
      }
      if (!doc) {
        continue;
      }
      const work = decideRouteCertificateWork(doc, Date.now());
      if (work.kind === 'wait') {
        waitMs = Math.min(waitMs, work.waitMs);
        continue;
      }
      const next = await this.orderOne(doc.id, clusterIdArg, hostname, doc.version + 1, work.why);
      changed = true;
      if (next) {
        const after = decideRouteCertificateWork(next, Date.now());
        waitMs = Math.min(waitMs, after.kind === 'wait' ? after.waitMs : 0);
      }
    }
    const outcome = changed ? 'written' : removed ? 'removed' : 'kept';
    // A cluster with no certificate to keep has nothing coming due: no timer of its own.
    return wanted.size === 0 ? { outcome } : { outcome, requeueAfterMs: Math.max(waitMs, 50) };
  }

  /** One order and its outcome stored; the key leaves memory only sealed by the secret box. */
  private async orderOne(idArg: string, clusterIdArg: string, hostnameArg: string, versionArg: number, whyArg: string) {
    const { store, logger } = this.ports;
    logger.info({ clusterId: clusterIdArg, hostname: hostnameArg, why: whyArg }, 'route certificate: ordering');
    try {
      const issued = await this.ports.order(clusterIdArg, hostnameArg);
      const key = this.ports.secrets.encrypt(issued.keyPem, routeCertificateKeyContext(idArg, versionArg));
      const { doc } = await store.mutate(routeCertificateKind, idArg, (currentArg) => decideRouteCertificateIssued(currentArg, {
        certPem: issued.certPem,
        key,
        version: versionArg,
        notBeforeMs: issued.notBeforeMs,
        notAfterMs: issued.notAfterMs,
        fingerprint256: issued.fingerprint256,
      }));
      logger.info({ clusterId: clusterIdArg, hostname: hostnameArg, fingerprint256: issued.fingerprint256, notAfter: new Date(issued.notAfterMs).toISOString() },
        'route certificate: issued and stored');
      await this.ports.hint(clusterIdArg, hostnameArg);
      return doc;
    } catch (error) {
      const problem = error instanceof RouteCertificateOrderError ? error.problem : { type: 'order-failed', detail: String((error as Error)?.message ?? error).slice(0, 500) };
      const { doc } = await store.mutate(routeCertificateKind, idArg, (currentArg) =>
        decideRouteCertificateFailed(currentArg, problem, Date.now(), this.ports.retryBaseMs));
      logger.warn({ clusterId: clusterIdArg, hostname: hostnameArg, problem, failures: doc?.failures, nextAttemptAt: doc ? new Date(doc.nextAttemptAt).toISOString() : null },
        'route certificate: the order failed; it is tried again after the pause');
      return doc;
    }
  }
}
