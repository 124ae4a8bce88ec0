import { RolloutController } from './manager.rollout/rollout.controller.js';
import { RolloutManager } from './manager.rollout/rollout.manager.js';
import { judgeKernelLimits, readKernelLimits } from './core/kernellimits.js';
import { decideEstablishedLimits, fileDescriptorReserve } from './core/connectionlimits.js';
import type { FastifyInstance } from 'fastify';
import type { Server as HttpsServer } from 'node:https';
import { performance } from 'node:perf_hooks';
import { TypedHandler, TypedResponseError, TypedRouter } from '@api.global/typedrequest';
import type { ITypedRequest } from '@api.global/typedrequest-interfaces';
import type { ITypedContract } from './interfaces/requests/admin.js';
import { checkListenHost, defaultRelayWorkConcurrency, readConfig, unknownCloudlyVariables, type ICloudlyConfig } from './config.js';
import { createLogger, type TCloudlyLogger } from './core/logger.js';
import { routeDependencyLogs } from './core/dependencylogs.js';
import { CloudlyDatabase, isDatabaseUnavailableError, isStorageFullError } from './core/database.js';
import { DocumentStore } from './core/store.js';
import { CloudlyAuth, type IVerifiedIdentity } from './core/auth.js';
import { CloudlyMetrics } from './core/metrics.js';
import { RelaySessions, type IRelaySession } from './core/relaysessions.js';
import { WorkGate } from './core/workgate.js';
import { accessDeniedRefusal, asTypedResponseError, identityReasons, internalFailure, isRefusal, refuse, refuseNamed } from './core/errors.js';
import { invalidField, refuseFields, type TCheckSchema } from './core/validation.js';
import { answerWithHandler, methodNotServedEnvelope, type EnvelopePeer, type IEnvelope } from './core/envelopepeer.js';
import { closeHttpServerWithin, createHttpServer, type ITransportHost } from './core/transport.js';
import { runInOperation, withoutPaths, type IOperationContext } from './core/operationcontext.js';
import { ClusterManager } from './manager.cluster/cluster.manager.js';
import { cloudlyRelaySessionPorts } from './manager.cluster/relayelection.js';
import { ServiceManager } from './manager.service/service.manager.js';
import { IngressManager } from './manager.ingress/ingress.manager.js';
import { cloudlyIngressDependencies } from './manager.ingress/dependencies.js';
import { AdminManager } from './manager.admin/admin.manager.js';
import { CorestoreManager } from './manager.corestore/corestore.manager.js';
import { createManagerDirectory } from './manager.corestore/directory.js';
import { RuntimeNetworkManager } from './manager.runtimenetwork/runtimenetwork.manager.js';
import { BackupManager } from './manager.backup/backup.manager.js';
import { ImageManager } from './manager.image/image.manager.js';
import { blobStoreFromConfig } from './core/s3blobstore.js';
import { AuditManager } from './manager.audit/audit.manager.js';
import { DesiredStateManager } from './manager.desiredstate/desiredstate.manager.js';
import { SecretManager } from './manager.secret/secret.manager.js';
import { WatchManager } from './manager.watch/watch.manager.js';
import { OverviewManager } from './manager.overview/overview.manager.js';
import { TrafficManager } from './manager.traffic/traffic.manager.js';
import { Reconciler } from './manager.reconciler/reconciler.manager.js';
import { ReconcilerLeadership } from './manager.reconciler/leadership.js';
import { ChangeFeed } from './core/changefeed.js';
import type { IController } from './core/controller.js';
import { VerdictController, allServicesKey, clusterKey, serviceKey } from './manager.service/verdict.controller.js';
import { ClaimsController, claimServiceKey } from './manager.service/claims.controller.js';
import { needsPush } from './manager.service/service.manager.js';
import { LivenessController } from './manager.cluster/liveness.controller.js';
import { DesiredStateController } from './manager.desiredstate/desiredstate.controller.js';
import { ProjectionsController } from './manager.runtimenetwork/projections.controller.js';
import { CorestoreCredentialsController } from './manager.secret/corestorecredentials.controller.js';
import { BindingLedgerController } from './manager.corestore/bindingledger.controller.js';
import { BackupSchedulesController, scheduleClockOf } from './manager.backup/schedules.controller.js';
import { BackupRetentionController } from './manager.backup/retention.controller.js';
import { BackupDrillsController } from './manager.backup/drills.controller.js';
import { clusterLivenessKind } from './manager.cluster/liveness.js';
import { serviceKind, toPublicService } from './manager.service/documents.js';
import { clusterIngressRouteTableKind } from './manager.ingress/documents.js';
import type { IClusterReads } from './manager.cluster/ports.js';
import { SecretBox } from './core/secretbox.js';
import type { IAdminHandlerContext, IOperationDeclaration, IRelayHandlerContext } from './core/operations.js';
import { registerDashboard } from './core/dashboard.js';
import type { IServedMethod, TAdminAccess } from './core/access.js';
import { buildServedSchema, registerSchemaRoute } from './core/schema.js';
import { TlsCertificateSource, isLoopbackHost, secureContextOptions, type IServedCertificate } from './core/tls.js';
import { AcmeCertificates } from './manager.acme/acme.manager.js';
import { CertificateManager } from './manager.certificate/certificate.manager.js';
import { RouteCertificateIssuer } from './manager.certificate/issuer.js';
import { RouteCertificatesController } from './manager.certificate/routecertificates.controller.js';
import type { IListenerStatus } from './core/transport.js';

/** Times consecutive steps: `stepDone(name)` records the time since the previous step (ms) under its name. */
const stepTimer = (): { stepsMs: Record<string, number>; stepDone: (nameArg: string) => void } => {
  const stepsMs: Record<string, number> = {};
  let stepStarted = performance.now();
  return {
    stepsMs,
    stepDone: (nameArg) => {
      const now = performance.now();
      stepsMs[nameArg] = Math.round(now - stepStarted);
      stepStarted = now;
    },
  };
};

/**
 * The composition root: configuration → database → router → managers → server. Each manager
 * registers its handlers on the one shared router in its constructor and may roll work forward
 * in `start()`, which runs after the database is up and before the server accepts requests.
 */

export interface IManager {
  start?(): Promise<void>;
  stop?(): Promise<void>;
}

// The handler contexts belong to the operation pipeline (ts/core/operations.ts); re-exported here
// for the handlers that still register themselves.
export type { IAdminHandlerContext, IRelayHandlerContext } from './core/operations.js';

export interface ICloudlyOptions {
  config?: Partial<ICloudlyConfig>;
  /** Where log lines go; tests pass a capturing stream. */
  logDestination?: NodeJS.WritableStream;
}

/**
 * The relay calls every relay makes when it (re)connects and while it idles: they go through the
 * relay call gate. Calls that may run long (transfers, restores) do not, so they never hold a slot.
 */
const stormRelayMethods: ReadonlySet<string> = new Set([
  'registerClusterRelay',
  'reportClusterPlatformObservedState',
  'getClusterPlatformDesiredState',
  'reportClusterNode',
  'registerClusterIngress',
  'getClusterIngressRouteTable',
  'getClusterRouteTable',
]);

/** Admin and relay requests are JSON objects; anything else is refused before a handler runs. */
const requireObjectRequest = (requestArg: unknown): void => {
  if (!requestArg || typeof requestArg !== 'object' || Array.isArray(requestArg)) {
    throw refuseFields([invalidField('request', 'must be an object')]);
  }
};

export class Cloudly {
  public readonly config: ICloudlyConfig;
  public readonly logger: TCloudlyLogger;
  public readonly metrics = new CloudlyMetrics();
  public readonly router = new TypedRouter();
  /** Every method this server serves, with its caller and declared access (GET /schema, the role tests). */
  public readonly servedMethods = new Map<string, IServedMethod>();
  /** Every declared operation's kind, and each orchestration's reason (test/foundation.pipeline.test.ts). */
  public readonly declaredOperations = new Map<string, IOperationDeclaration>();
  public readonly checkedRequestMembers = new Map<string, Record<string, TCheckSchema>>();
  public readonly database: CloudlyDatabase;
  public readonly store: DocumentStore;
  public readonly auth: CloudlyAuth;
  /** Encryption at rest of every secret value Cloudly keeps (docs/secrets.md). */
  public readonly secrets: SecretBox;
  public readonly relays: RelaySessions;
  /**
   * The lane of the relay calls a storm makes (`stormRelayMethods`): at most
   * CLOUDLY_RELAY_WORK_CONCURRENCY at once, so an administrator's calls interleave with a storm.
   */
  public readonly relayCallGate: WorkGate;
  /** Relay calls not run when their turn came because their socket had closed (`cloudly_relay_calls_dropped_total`). */
  public relayCallsDropped = 0;
  public readonly openSockets = new Set<EnvelopePeer>();
  public readonly managers: IManager[] = [];
  public readonly adminManager: AdminManager;
  public readonly clusterManager: ClusterManager;
  public readonly serviceManager: ServiceManager;
  public readonly ingressManager: IngressManager;
  public readonly corestoreManager: CorestoreManager;
  public readonly runtimeNetworkManager: RuntimeNetworkManager;
  public readonly backupManager: BackupManager;
  public readonly imageManager: ImageManager;
  public readonly auditManager: AuditManager;
  public readonly desiredStateManager: DesiredStateManager;
  public readonly secretManager: SecretManager;
  public readonly certificateManager: CertificateManager;
  /** The cluster domain as other domains read it (ts/manager.cluster/ports.ts). */
  public readonly clusterReads: IClusterReads;
  /** Every committed change, this instance's and (while someone needs them) other instances' (ts/core/changefeed.ts). */
  public readonly feed: ChangeFeed;
  public readonly reconciler: Reconciler;
  /** The controllers the reconciler runs, by role (the one list is `reconciler.controllers`). */
  public readonly controllers: {
    liveness: LivenessController;
    verdict: VerdictController;
    credentials: CorestoreCredentialsController;
    desiredState: DesiredStateController;
    projections: ProjectionsController;
    claims: ClaimsController;
    bindingLedger: BindingLedgerController;
    routeCertificates: RouteCertificatesController;
    rollout: RolloutController;
    backupSchedules: BackupSchedulesController;
    backupRetention: BackupRetentionController;
    backupDrills: BackupDrillsController;
  };
  public started = false;
  /** The first-admin password Cloudly generated on this start, if it generated one. */
  public generatedAdminPassword: string | null = null;
  private httpServer: FastifyInstance | null = null;
  /** The bounds on open connections, decided at start from the open-files limit (docs/connections.md). */
  private connectionBudget: { total: number; perAddress: number; reserve: number; budgetExceeded: boolean } | undefined;
  private stopping: Promise<void> | null = null;
  /** The certificate every listener serves, from files (CLOUDLY_TLS_CERT_FILE) or ACME (CLOUDLY_ACME_DOMAINS); docs/tls.md. */
  public tls: IServedCertificate | null = null;
  /** Cloudly's own certificate by ACME, when CLOUDLY_ACME_DOMAINS is set. */
  public acme: AcmeCertificates | null = null;
  private readonly reloadTlsOnSignal = (): void => {
    if (this.tls instanceof TlsCertificateSource) {
      void this.tls.reload('SIGHUP');
    }
  };

  constructor(optionsArg: ICloudlyOptions = {}) {
    this.config = { ...readConfig(process.env), ...(optionsArg.config ?? {}) };
    this.logger = createLogger(this.config.logLevel, optionsArg.logDestination, this.config.logFormat);
    routeDependencyLogs(this.logger);
    for (const { variable, closest } of unknownCloudlyVariables(process.env)) {
      this.logger.warn({ variable, closest }, `${variable} is not a Cloudly setting and is ignored; did you mean ${closest}?`);
    }
    this.database = new CloudlyDatabase({
      mongoDbUrl: this.config.mongoDbUrl,
      mongoDbName: this.config.mongoDbName,
      dataDir: this.config.dataDir,
      snapshotDebounceMs: this.config.snapshotDebounceMs,
      compactBytes: this.config.journalCompactBytes,
      compactIntervalMs: this.config.compactIntervalMs,
      compactRetryMs: this.config.compactRetryMs,
      storageProbeMs: this.config.storageProbeMs,
      databaseTimeoutMs: this.config.databaseTimeoutMs,
      journalFailpointFile: this.config.journalFailpointFile,
      logger: this.logger,
    });
    this.metrics.databaseCommands = () => this.database.commandsStarted;
    this.metrics.storageReadOnly = () => this.database.storageReadOnly;
    this.metrics.listener = () => ({
      ...this.listenerStatus(),
      reloads: this.tls?.reloads ?? null,
      // With ACME, the placeholder served before the first order is no certificate to watch.
      notAfterMs: this.acme && this.acme.servedGeneration === 0 ? null : this.tls?.current.notAfterMs ?? null,
    });
    this.metrics.relayCallGate = () => ({ queued: this.relayCallGate.queued, waitedTotal: this.relayCallGate.waitedTotal, droppedTotal: this.relayCallsDropped });
    this.store = new DocumentStore(this.database);
    this.store.direct.enabled = this.config.embeddedDirectReads ?? true;
    this.store.writes.enabled = this.config.embeddedDirectWrites ?? true;
    this.secrets = new SecretBox(
      { dataDir: this.config.dataDir, keyFile: this.config.secretsKeyFile, previousKeyFile: this.config.secretsPreviousKeyFile, logger: this.logger },
      this.store,
    );
    this.auth = new CloudlyAuth(
      { dataDir: this.config.dataDir, identityTtlMs: this.config.identityTtlMs, logger: this.logger, secrets: this.secrets },
      this.store,
    );
    this.relayCallGate = new WorkGate(this.config.relayWorkConcurrency ?? defaultRelayWorkConcurrency);
    this.feed = new ChangeFeed({
      store: this.store,
      shared: !this.database.embedded,
      pollMs: this.config.sharedPollMs ?? 250,
      readOwnersOf: (kindArg, idsArg) => this.database.mongoDb.collection(kindArg)
        // Only what a kind's owners and the derived-inputs check read, not whole documents.
        .find({ id: idsArg.length === 1 ? idsArg[0] : { $in: idsArg } }, { projection: { _id: 0, id: 1, clusterId: 1, serviceId: 1, inputsGeneration: 1 } })
        .toArray(),
      logger: this.logger,
    });
    // The sessions' port to the relay election (selection, in-flight election, forwarding); it reads
    // the election when called, so it may be passed before the cluster manager that builds it.
    this.relays = new RelaySessions(
      { defaultTimeoutMs: this.config.relayCallTimeoutMs, metrics: this.metrics, logger: this.logger },
      cloudlyRelaySessionPorts(this),
    );
    // The cluster domain as other domains read it; each member reads the manager when called, so
    // it may be handed to managers built before the cluster manager.
    this.clusterReads = {
      requireCluster: (clusterIdArg) => this.clusterManager.requireCluster(clusterIdArg),
      requireElected: (sessionArg) => this.clusterManager.requireElected(sessionArg),
      getNode: (clusterIdArg, nodeIdArg) => this.clusterManager.nodes.getNode(clusterIdArg, nodeIdArg),
      listNodes: (clusterIdArg) => this.clusterManager.nodes.listNodes(clusterIdArg),
      relayOrigin: (clusterIdArg) => this.clusterManager.relayRegistrations.getOrigin(clusterIdArg),
      relayHost: (clusterIdArg) => this.clusterManager.relayRegistrations.getRelayHost(clusterIdArg),
      relayConnected: async (clusterIdArg) => (await this.clusterManager.electedSession(clusterIdArg)) !== null
        || this.clusterManager.relayElection.isClusterConnected(clusterIdArg),
    };
    this.adminManager = this.addManager(new AdminManager(this));
    this.clusterManager = this.addManager(new ClusterManager(this));
    this.serviceManager = this.addManager(new ServiceManager(this));
    this.ingressManager = this.addManager(new IngressManager(this, cloudlyIngressDependencies(this)));
    this.corestoreManager = this.addManager(new CorestoreManager(this, createManagerDirectory(this)));
    this.runtimeNetworkManager = this.addManager(new RuntimeNetworkManager(this, this.clusterReads, (clusterIdArg) => this.ingressManager.getDesignation(clusterIdArg)));
    this.backupManager = this.addManager(new BackupManager(this, { blobStore: blobStoreFromConfig(this.config) }));
    this.imageManager = this.addManager(new ImageManager(this));
    this.auditManager = this.addManager(new AuditManager(this));
    this.desiredStateManager = this.addManager(new DesiredStateManager(this, {
      clusters: this.clusterReads,
      ingress: {
        getDesignation: (clusterIdArg) => this.ingressManager.getDesignation(clusterIdArg),
        getRouteTable: (clusterIdArg) => this.ingressManager.getRouteTable(clusterIdArg),
        recordComputedRouteTable: (clusterIdArg, routesArg) => this.ingressManager.recordComputedRouteTable(clusterIdArg, routesArg),
        storeAssignments: (clusterIdArg, entryArg) => this.ingressManager.storeAssignments(clusterIdArg, entryArg),
      },
      credentialReferences: (clusterIdArg) => this.secretManager.corestoreCredentialReferences(clusterIdArg),
      allocateCluster: (clusterIdArg) => this.runtimeNetworkManager.allocateCluster(clusterIdArg),
    }));
    this.secretManager = this.addManager(new SecretManager(this, this.clusterReads));
    this.addManager(new WatchManager(this));
    this.addManager(new OverviewManager(this));
    this.addManager(new TrafficManager(this));
    this.certificateManager = this.addManager(new CertificateManager(this));
    this.addManager(new RolloutManager(this));
    // Last: it starts once every domain it reads is started, and stops first.
    this.reconciler = this.addManager(new Reconciler({
      feed: this.feed,
      store: this.store,
      leadership: new ReconcilerLeadership(this.store, this.clusterManager.relayElection.instanceId, this.config.relayLeaseTtlMs ?? 15_000, this.database.embedded),
      logger: this.logger,
      registry: this.metrics.registry,
      instanceId: this.clusterManager.relayElection.instanceId,
      resyncMs: this.config.reconcileResyncMs ?? 60_000,
      heartbeatMs: this.config.relayLeaseHeartbeatMs ?? 5_000,
      concurrency: this.config.reconcileConcurrency ?? 8,
    }));
    this.controllers = this.buildControllers();
    this.reconciler.setControllers(Object.values(this.controllers) as IController[]);
  }

  /**
   * The controllers, each given the ports it reads through (its constructor's parameters are its
   * whole dependency list), and the managers given their side of the controllers. Liveness first:
   * the verdict reads it.
   */
  private buildControllers(): Cloudly['controllers'] {
    const { store, reconciler } = this;
    const settled = (controllerArg: string, keysArg: string[]) => reconciler.settled(controllerArg, keysArg);
    const controllers: Cloudly['controllers'] = {
      liveness: new LivenessController({
        store,
        settings: {
          graceMs: this.config.relayLivenessGraceMs ?? 30_000,
          observedStaleMs: this.config.observedStaleMs ?? 600_000,
          leaseTtlMs: this.config.relayLeaseTtlMs ?? 15_000,
        },
        watchingSince: () => reconciler.leaderSince,
      }),
      verdict: new VerdictController({
        store,
        platformBindingsOfServices: (idsArg) => this.corestoreManager.getPlatformBindingsOfServices(idsArg),
        heldImageVersionsOf: (idsArg) => this.imageManager.heldImageVersionsOf(idsArg),
        clusterRuntimePhase: (clusterIdArg) => this.ingressManager.peekClusterRuntimePhase(clusterIdArg),
        allocateCluster: (clusterIdArg) => this.runtimeNetworkManager.allocateCluster(clusterIdArg),
        relayCapabilities: (clusterIdArg) => this.clusterManager.relayRegistrations.getCapabilities(clusterIdArg),
      }),
      credentials: new CorestoreCredentialsController({
        store,
        ensure: (clusterIdArg, nodeIdArg) => this.secretManager.ensureCredential(clusterIdArg, nodeIdArg),
      }),
      desiredState: new DesiredStateController({
        store,
        publish: (clusterIdArg) => this.desiredStateManager.publish(clusterIdArg),
        hint: async (clusterIdArg, stateArg) => { await this.desiredStateManager.hint(clusterIdArg, stateArg); },
        routeTableKind: clusterIngressRouteTableKind.collectionName,
        forgetRemembered: () => this.desiredStateManager.forgetEntries(),
      }),
      projections: new ProjectionsController({
        store,
        refreshNode: (clusterIdArg, nodeIdArg) => this.runtimeNetworkManager.refreshProjection(clusterIdArg, nodeIdArg),
        logger: this.logger,
      }),
      claims: new ClaimsController({
        store,
        rollForward: (serviceIdArg) => this.serviceManager.rollClaimsForward(serviceIdArg),
        pushPending: (clusterIdArg) => this.serviceManager.pushPendingClaims(clusterIdArg),
        needsPush,
      }),
      bindingLedger: new BindingLedgerController({ applyPendingCreation: () => this.corestoreManager.applyPendingCreation() }),
      routeCertificates: this.buildRouteCertificatesController(),
      rollout: new RolloutController({
        store,
        logger: this.logger,
        updateServiceSpecAt: (...argsArg) => this.serviceManager.updateServiceSpecAt(...argsArg),
      }),
      backupSchedules: new BackupSchedulesController({
        store,
        logger: this.logger,
        clock: scheduleClockOf(this.config.scheduleClockFactor ?? 1),
        servicesOf: async (targetArg) => {
          const filter = 'serviceId' in targetArg ? { id: targetArg.serviceId }
            : 'clusterId' in targetArg ? { clusterId: targetArg.clusterId } : { organizationId: targetArg.organizationId };
          const docs = await store.find(serviceKind, filter, { sort: { createdAt: 1 } });
          // A service being deleted is gone for its schedules.
          return docs.filter((docArg) => docArg.deletionRequestedAt === undefined).map(toPublicService);
        },
        nodesOf: async (clusterIdArg) => (await this.clusterManager.nodes.listNodes(clusterIdArg)).map((nodeArg) => nodeArg.id).sort(),
        darkReasonOf: async (clusterIdArg) => (await store.get(clusterLivenessKind, clusterIdArg))?.unknown?.reason ?? null,
        orderBackup: (orderArg) => this.backupManager.orderScheduledBackup(orderArg),
      }),
      backupRetention: new BackupRetentionController({
        store,
        logger: this.logger,
        blobStore: this.backupManager.blobStore,
        darkReasonOf: async (clusterIdArg) => (await store.get(clusterLivenessKind, clusterIdArg))?.unknown?.reason ?? null,
        prune: (clusterIdArg, requestArg) => this.relays.ask(clusterIdArg, 'pruneClusterNodeArchive', requestArg),
      }),
      backupDrills: new BackupDrillsController({
        store,
        logger: this.logger,
        startDrill: (orderArg) => this.backupManager.startDrill(orderArg),
        cleanupRestore: (restoreIdArg) => this.backupManager.cleanupDrillRestore(restoreIdArg),
      }),
    };
    const cause = (kindArg: string, idArg: string) => ({ kind: kindArg, id: idArg, at: Date.now() });
    this.serviceManager.connect({
      settledVerdict: (serviceArg) => settled('verdict', [allServicesKey, clusterKey(serviceArg.clusterId), serviceKey(serviceArg.id)]),
      requestClaims: (serviceIdArg) => reconciler.enqueue('claims', claimServiceKey(serviceIdArg), cause('CloudlyService', serviceIdArg)),
    });
    this.desiredStateManager.connect({
      settled: async (clusterIdArg) => {
        await settled('corestore-credentials', [clusterIdArg]);
        await settled('desiredstate', [clusterIdArg]);
      },
      requestRefresh: (clusterIdArg) => reconciler.enqueue('desiredstate', clusterIdArg, cause('CloudlyClusterDesiredState', clusterIdArg)),
      isRefreshBusy: (clusterIdArg) => reconciler.isBusy('desiredstate', clusterIdArg),
    });
    this.runtimeNetworkManager.connect({
      allocationChanged: (clusterIdArg) => {
        const allocation = cause('CloudlyRuntimeNetworkAddressBlock', clusterIdArg);
        reconciler.enqueue('projections', clusterIdArg, allocation);
        reconciler.enqueue('desiredstate', clusterIdArg, allocation);
        reconciler.enqueue('verdict', clusterKey(clusterIdArg), allocation);
      },
      requestProjections: (clusterIdArg) => reconciler.enqueue('projections', clusterIdArg, cause('CloudlyRuntimeNetworkProjection', clusterIdArg)),
      settledProjections: async (clusterIdArg) => {
        await settled('verdict', [allServicesKey, clusterKey(clusterIdArg)]);
        await settled('projections', ['all', clusterIdArg]);
      },
    });
    this.secretManager.connect({ settledCredentials: (clusterIdArg) => settled('corestore-credentials', [clusterIdArg]) });
    return controllers;
  }

  private buildRouteCertificatesController(): RouteCertificatesController {
    const issuer = new RouteCertificateIssuer({ config: this.config, store: this.store, secrets: this.secrets, logger: this.logger });
    return new RouteCertificatesController({
      store: this.store,
      secrets: this.secrets,
      logger: this.logger,
      order: (clusterIdArg, hostnameArg) => issuer.order(clusterIdArg, hostnameArg),
      orderInFlight: (tokenArg) => issuer.isInFlight(tokenArg),
      revoke: (hostnameArg, certPemArg) => issuer.revoke(hostnameArg, certPemArg),
      retryBaseMs: this.config.acmeRetryMs,
      hint: async (clusterIdArg, hostnameArg) => {
        await this.relays.call(clusterIdArg, 'pushClusterRouteCertificatesChanged', { hostname: hostnameArg }).catch((error: unknown) => {
          this.logger.debug({ clusterId: clusterIdArg, hostname: hostnameArg, reasons: (error as { errorData?: { reasons?: unknown } }).errorData?.reasons }, 'route certificate hint not delivered');
        });
      },
    });
  }

  /** Registers a manager so its start/stop run with Cloudly's. */
  public addManager<T extends object>(managerArg: T): T {
    this.managers.push(managerArg as IManager);
    return managerArg;
  }

  /** The port the server listens on (resolved after start when configured as 0). */
  public get port(): number {
    const address = this.httpServer?.server.address();
    return typeof address === 'object' && address ? address.port : this.config.port;
  }

  public get baseUrl(): string {
    return `${this.config.tlsCertFile || this.config.acmeDomains.length > 0 ? 'https' : 'http'}://${this.config.host.includes(':') ? `[${this.config.host}]` : this.config.host}:${this.port}`;
  }

  public async start(): Promise<void> {
    // Each step's time goes into the "listening" log line, so a slow start says where it waited.
    const { stepsMs, stepDone } = stepTimer();
    await checkListenHost(this.config.host);
    if (this.config.tlsCertFile && this.config.tlsKeyFile) {
      // First: a certificate that cannot be served stops the start before anything else is touched.
      this.tls = await TlsCertificateSource.open({
        certFile: this.config.tlsCertFile, keyFile: this.config.tlsKeyFile, pollMs: this.config.tlsReloadPollMs, logger: this.logger,
      });
      stepDone('tls');
    }
    await this.database.start();
    stepDone('database');
    // Deferred steps run once the start is complete (not beside the steps still starting).
    this.database.onStorageWritable(() => {
      if (this.started) {
        void this.runDeferredStartSteps();
      }
    });
    await this.runStartStep('auditReconcile', async () => {
      const audit = await this.store.reconcileAudit();
      if (audit.appended > 0 || audit.removalsFinished > 0) {
        this.logger.info(audit, 'audit log reconciled: events of changes committed before a crash were appended');
      }
    });
    stepDone('auditReconcile');
    await this.secrets.start();
    if (this.config.acmeDomains.length > 0) {
      // Needs the database and the secret box (the keys are sealed); serves the stored certificate
      // or a placeholder until the first order is stored.
      this.acme = new AcmeCertificates({
        config: this.config, store: this.store, secrets: this.secrets, logger: this.logger, instanceId: this.clusterManager.relayElection.instanceId,
      });
      await this.acme.start();
      this.tls = this.acme;
      stepDone('acme');
    }
    await this.auth.start();
    this.generatedAdminPassword = await this.adminManager.ensureFirstAdmin(this.config.adminUsername, this.config.adminPassword);
    stepDone('secretsAuthAdmin');
    this.feed.start();
    for (const manager of this.managers) {
      if (manager.start) {
        await this.runStartStep(manager.constructor.name, () => manager.start!());
      }
      stepDone(manager.constructor.name);
    }
    const kernelLimits = readKernelLimits();
    this.connectionBudget = decideEstablishedLimits(kernelLimits.openFiles, this.config);
    this.logger[this.connectionBudget.budgetExceeded ? 'warn' : 'info']({
      connectionsTotal: this.connectionBudget.total,
      connectionsPerAddress: this.connectionBudget.perAddress,
      openFilesLimit: kernelLimits.openFiles,
      reservedFileDescriptors: this.connectionBudget.reserve,
    }, this.connectionBudget.budgetExceeded
      ? `connection limits: CLOUDLY_CONNECTIONS_TOTAL leaves fewer than ${fileDescriptorReserve} of the open-files limit for the journal, snapshots and the blob store (docs/connections.md)`
      : 'connection limits (docs/connections.md)');
    this.httpServer = await createHttpServer(this.transportHost());
    registerDashboard(this.httpServer, { logger: this.logger, tls: this.tls !== null });
    // Built once here, after every manager registered its methods.
    const servedSchema = buildServedSchema(this.servedMethods.values(), this.checkedRequestMembers);
    if (servedSchema.untyped.length > 0) {
      this.logger.warn({ methods: servedSchema.untyped }, 'served methods missing from the contract schema: run node --import tsx scripts/contract-schema.ts');
    }
    registerSchemaRoute(this.httpServer, () => servedSchema);
    await this.httpServer.listen({ port: this.config.port, host: this.config.host, backlog: this.config.listenBacklog });
    stepDone('listen');
    if (this.tls) {
      this.tls.attach(this.httpServer.server as unknown as HttpsServer);
      process.on('SIGHUP', this.reloadTlsOnSignal);
    }
    if (this.listenerStatus().plainHttpExposed) {
      this.logger.warn(
        { host: this.config.host, port: this.port },
        'listening in plain HTTP on an address other machines reach: passwords, identities and relay tokens cross the network in clear. Set CLOUDLY_TLS_CERT_FILE and CLOUDLY_TLS_KEY_FILE, or CLOUDLY_ALLOW_PLAIN_HTTP=1 when a proxy in front terminates TLS (docs/tls.md)',
      );
    }
    for (const warning of judgeKernelLimits(this.config, kernelLimits)) {
      this.logger.warn(warning, 'a kernel limit is below what this configuration needs (docs/multi-instance.md, "Kernel limits")');
    }
    await this.clusterManager.relayElection.startRegistry(this.config.internalUrl ?? this.baseUrl);
    stepDone('instanceRegistry');
    this.started = true;
    if (this.deferredStartSteps.length > 0 && !this.database.storageReadOnly) {
      // Space returned while the start went on.
      void this.runDeferredStartSteps();
    }
    this.logger.info({
      url: this.baseUrl,
      database: this.database.embedded ? 'embedded' : 'mongodb',
      ...(this.tls ? { tlsFingerprint256: this.tls.current.fingerprint256 } : {}),
      stepsMs,
    }, 'cloudly is listening');
  }

  /** Whether the wire is protected (`/readyz`'s `listener`, /metrics). */
  public listenerStatus(): IListenerStatus {
    if (this.tls) {
      const acme = this.acme;
      return {
        tls: true,
        plainHttpExposed: false,
        certificate: { fingerprint256: this.tls.current.fingerprint256, notAfter: new Date(this.tls.current.notAfterMs).toISOString() },
        ...(acme ? {
          acme: {
            domains: this.config.acmeDomains,
            state: acme.status.state,
            failures: acme.status.failures,
            nextAttemptAt: acme.status.nextAttemptAt > 0 ? new Date(acme.status.nextAttemptAt).toISOString() : null,
            problem: acme.status.problem ? { ...acme.status.problem, at: new Date(acme.status.problem.at).toISOString() } : null,
          },
        } : {}),
      };
    }
    return { tls: false, plainHttpExposed: !this.config.allowPlainHttp && !isLoopbackHost(this.config.host) };
  }

  /** Start-up steps that met a full disk, in start order; each runs again once the disk takes writes. */
  private deferredStartSteps: Array<{ name: string; run: () => Promise<void> }> = [];

  /**
   * Runs a start-up step. The steps roll forward what a crash left unfinished, and that takes
   * writes: on a full disk (a crash on one leaves it so) such a step is refused `storage-full`.
   * Cloudly then starts read-only instead of refusing to start, and the step runs again, whole,
   * once the disk takes writes. Running one again is safe: each finishes what is unfinished, and a
   * manager's start does its writes before it arms its timers (what comes before only resumes
   * queues, which is idempotent), so a rerun arms them once.
   */
  private async runStartStep(nameArg: string, stepArg: () => Promise<void>): Promise<void> {
    try {
      await stepArg();
    } catch (error) {
      if (!isStorageFullError(error)) {
        throw error;
      }
      this.logger.warn({ step: nameArg, err: error }, 'a start-up step needs a write and the disk is full; it runs again once the disk takes writes');
      this.deferredStartSteps.push({ name: nameArg, run: stepArg });
    }
  }

  private runningDeferredSteps = false;

  private async runDeferredStartSteps(): Promise<void> {
    if (this.runningDeferredSteps || this.deferredStartSteps.length === 0 || this.stopping) {
      return;
    }
    this.runningDeferredSteps = true;
    try {
      while (this.deferredStartSteps.length > 0 && !this.stopping) {
        const step = this.deferredStartSteps[0];
        try {
          await step.run();
          this.logger.info({ step: step.name }, 'a deferred start-up step ran now that the disk takes writes');
        } catch (error) {
          // Full again: it stays queued for the next time. Any other failure is logged and dropped.
          if (isStorageFullError(error)) {
            return;
          }
          this.logger.error({ step: step.name, err: error }, 'a deferred start-up step failed');
        }
        this.deferredStartSteps.shift();
      }
    } finally {
      this.runningDeferredSteps = false;
    }
  }

  /** The transport's view of this server: the few things HTTP and the sockets need. */
  private transportHost(): ITransportHost {
    return {
      config: this.config,
      logger: this.logger,
      dispatch: (envelopeArg, localDataArg) => this.dispatch(envelopeArg, localDataArg),
      relaySocketCount: () => this.relays.socketCount,
      authenticateRelayToken: (tokenArg) => this.clusterManager.authenticateRelayToken(tokenArg),
      verifyAdminJwt: (jwtArg) => this.adminManager.verifySocketJwt(jwtArg),
      openRelaySession: (clusterIdArg, peerArg, tokenGenerationArg) => this.relays.add(clusterIdArg, peerArg, tokenGenerationArg),
      trackSocket: (peerArg) => {
        this.openSockets.add(peerArg);
        peerArg.onClose(() => this.openSockets.delete(peerArg));
      },
      logInternalFailure: (errorArg, whereArg) => this.logInternalFailure(errorArg, whereArg),
      isReady: async () => this.started && await this.database.isReachable(),
      storageReadOnly: () => this.database.storageReadOnly,
      snapshotDownload: {
        authorize: async (bearerArg) => {
          if (bearerArg === null) {
            return { ok: false, status: 401, refusal: refuseNamed('unauthenticated', identityReasons.missing, 'Authorization: Bearer <admin identity JWT> is required', 'headers.authorization') };
          }
          let identity: IVerifiedIdentity;
          try {
            identity = await this.adminManager.verifySocketJwt(bearerArg);
          } catch (error) {
            // The identity's own refusal (identity-invalid, identity-expired, session-revoked, …).
            return { ok: false, status: 401, refusal: isRefusal(error) ? error : refuseNamed('unauthenticated', identityReasons.invalid, 'is not a valid identity', 'headers.authorization') };
          }
          if (identity.role !== 'admin') {
            return { ok: false, status: 403, refusal: accessDeniedRefusal() };
          }
          if (!this.database.embedded) {
            return { ok: false, status: 409, refusal: refuseNamed('conflict', 'snapshot-not-embedded', 'Cloudly runs on MongoDB (MONGODB_URL): save it with mongodump (docs/storage.md)') };
          }
          return { ok: true, actor: identity.userId };
        },
        export: (sinkArg, onStartArg) => this.database.exportSnapshot(sinkArg, onStartArg),
      },
      connectionLimits: {
        refused: (reasonArg) => this.metrics.connectionRefusals.inc({ reason: reasonArg }),
        pending: (countArg) => {
          this.metrics.pendingConnections = countArg;
        },
        established: (countArg) => {
          this.metrics.establishedConnections = countArg;
        },
      },
      establishedConnectionLimits: this.connectionBudget,
      unsolicitedResponse: (closedArg) => {
        this.metrics.unsolicitedResponses.inc();
        if (closedArg) {
          this.metrics.socketsClosed.inc({ reason: 'unsolicited-responses' });
        }
      },
      metricsText: (namesArg) => this.metrics.text(namesArg),
      jwks: () => this.auth.jwks,
      tls: this.tls ? secureContextOptions(this.tls.current) : null,
      listenerStatus: () => this.listenerStatus(),
      serveForwardedRelayCall: (bearerArg, bodyArg) => this.clusterManager.relayElection.serveForwarded(bearerArg, bodyArg),
      refuseInternalBearer: (bearerArg) => this.clusterManager.relayElection.refuseInternalBearer(bearerArg),
    };
  }

  /** Graceful stop: stop accepting, close sockets, stop managers, flush the snapshot, close the db. */
  public async stop(): Promise<void> {
    if (!this.stopping) {
      this.stopping = this.stopInternal();
    }
    return this.stopping;
  }

  private async stopInternal(): Promise<void> {
    // Each step's time goes into the last log line, so a slow stop says where it waited.
    const { stepsMs, stepDone } = stepTimer();
    this.started = false;
    process.off('SIGHUP', this.reloadTlsOnSignal);
    if (this.tls instanceof TlsCertificateSource) {
      this.tls.stop();
    }
    await this.acme?.stop();
    const relaySockets = this.relays.closeAll();
    for (const peer of this.openSockets) {
      peer.close(1001, 'cloudly is stopping');
    }
    stepDone('closeSockets');
    if (this.httpServer) {
      const graceMs = this.config.shutdownGraceMs;
      const closed = await closeHttpServerWithin(this.httpServer, graceMs);
      if (closed.graceElapsed) {
        this.logger.warn(
          { graceMs, terminatedSockets: closed.terminatedSockets, endedConnections: closed.closedConnections },
          'shutdown grace elapsed: ended the sockets and requests still open',
        );
      }
    }
    stepDone('httpServer');
    for (const manager of [...this.managers].reverse()) {
      await manager.stop?.().catch((error: unknown) => this.logger.error({ err: error }, 'manager stop failed'));
      stepDone(manager.constructor.name);
    }
    this.auth.stop();
    this.feed.stop();
    await this.database.stop();
    stepDone('database');
    this.relays.activity.flush();
    this.logger.info({ relaySockets, stepsMs }, 'cloudly stopped');
  }

  /** Logs an unexpected failure with a fresh error id and returns the id. */
  public logInternalFailure(errorArg: unknown, whereArg: string): string {
    const { errorId } = internalFailure();
    this.logger.error({ err: errorArg, errorId, where: whereArg }, 'unexpected failure');
    return errorId;
  }

  /** Registers a handler an administrator calls: the identity is verified before `fn` runs. */
  public addAdminHandler<T extends ITypedContract<string, unknown, unknown>>(
    methodArg: T['method'],
    fnArg: (requestArg: T['request'], contextArg: IAdminHandlerContext) => Promise<T['response']>,
    optionsArg: {
      /** Who may call it (ts/core/access.ts); the guard refuses every other role with `forbidden`. */
      access: TAdminAccess;
      /**
       * The contract defines `dryRun` for this method itself (the archive prune's preview, which
       * the node computes): it stays in the request and Cloudly runs no dry run of its own.
       */
      contractOwnsDryRun?: boolean;
    },
  ): void {
    this.addGuardedHandler<T>({ method: methodArg, caller: 'admin', access: optionsArg.access }, async (requestArg, localDataArg) => {
      requireObjectRequest(requestArg);
      const identity = await this.auth.verifyIdentity((requestArg as { identity?: unknown }).identity);
      // The role may call the method's access, and the account and session still stand (one read by id).
      await this.adminManager.requireAllowed(identity, optionsArg.access);
      if (optionsArg.contractOwnsDryRun) {
        const operation: IOperationContext = { actor: { kind: 'admin', id: identity.userId }, method: methodArg, dryRun: false };
        return runInOperation(operation, () =>
          fnArg(requestArg, { identity, transport: localDataArg.transport === 'socket' ? 'socket' : 'http', localData: localDataArg }));
      }
      // `dryRun` belongs to every admin request and to none of their shapes: it is taken off here.
      const { dryRun, ...request } = requestArg as Record<string, unknown>;
      if (dryRun !== undefined && typeof dryRun !== 'boolean') {
        throw refuseFields([invalidField('request.dryRun', 'must be a boolean')]);
      }
      const operation: IOperationContext = { actor: { kind: 'admin', id: identity.userId }, method: methodArg, dryRun: dryRun === true };
      const halted = () => ({ dryRun: true, haltedBefore: operation.haltedBefore }) as T['response'];
      try {
        const response = await runInOperation(operation, () =>
          fnArg(request as T['request'], { identity, transport: localDataArg.transport === 'socket' ? 'socket' : 'http', localData: localDataArg }));
        if (operation.haltedBefore) {
          return halted();
        }
        if (!operation.dryRun) {
          return response;
        }
        const generated = operation.generatedOnCommit ?? [];
        return (generated.length > 0
          ? { ...(withoutPaths(response, generated) as object), dryRun: true, generatedOnCommit: generated }
          : { ...(response as object), dryRun: true }) as T['response'];
      } catch (error) {
        // A handler may have turned the halt into a refusal of its own; the context still says.
        if (operation.haltedBefore) {
          return halted();
        }
        throw error;
      }
    });
  }

  /** Registers a handler only an authenticated relay socket may call; the socket names the cluster. */
  public addRelayHandler<T extends ITypedContract<string, unknown, unknown>>(
    methodArg: T['method'],
    fnArg: (requestArg: T['request'], contextArg: IRelayHandlerContext) => Promise<T['response']>,
  ): void {
    this.addGuardedHandler<T>({ method: methodArg, caller: 'relay', access: 'relay' }, async (requestArg, localDataArg) => {
      const session = localDataArg.relaySession as IRelaySession | undefined;
      if (!session) {
        throw refuseNamed('forbidden', 'relay-socket-only', `${methodArg} is served only on an authenticated relay socket`, 'method');
      }
      requireObjectRequest(requestArg);
      const operation = { actor: { kind: 'relay' as const, id: `relay:${session.clusterId}` }, method: methodArg, dryRun: false };
      const run = (): Promise<T['response']> => runInOperation(operation, () => fnArg(requestArg, { clusterId: session.clusterId, session }));
      if (!stormRelayMethods.has(methodArg)) {
        return run();
      }
      return this.relayCallGate.run(() => {
        if (!session.peer.isOpen) {
          // The socket closed while its call waited (the relay gave up on it and reconnects): its
          // answer can reach nobody, so the work is not done. In a large storm, calls whose relays
          // had timed out otherwise filled the line ahead of the live ones.
          this.relayCallsDropped++;
          throw refuseNamed('unavailable', 'relay-socket-closed', `${methodArg} was not run: its relay socket closed while the call waited for its turn`, 'socket');
        }
        return run();
      });
    });
  }

  /** Registers a handler that needs no identity (only login); it sees the caller's address. */
  public addPublicHandler<T extends ITypedContract<string, unknown, unknown>>(
    methodArg: T['method'],
    fnArg: (requestArg: T['request'], contextArg: { remoteAddress?: unknown }) => Promise<T['response']>,
  ): void {
    this.addGuardedHandler<T>({ method: methodArg, caller: 'public', access: 'public' }, async (requestArg, localDataArg) =>
      fnArg(requestArg, { remoteAddress: localDataArg.remoteAddress }));
  }

  /**
   * The router-level guard: whatever a handler throws leaves as a TypedResponseError with error
   * data; an unexpected failure becomes `internal` with a logged error id and nothing else.
   */
  private addGuardedHandler<T extends ITypedContract<string, unknown, unknown>>(
    servedArg: IServedMethod,
    fnArg: (requestArg: T['request'], localDataArg: Record<string, unknown>) => Promise<T['response']>,
  ): void {
    const methodArg = servedArg.method;
    if (this.servedMethods.has(methodArg)) {
      throw new Error(`method ${methodArg} is registered twice`);
    }
    this.servedMethods.set(methodArg, servedArg);
    this.router.addTypedHandler(new TypedHandler<ITypedRequest>(methodArg, async (requestArg, toolsArg) => {
      try {
        const context = (toolsArg?.localData ?? {}) as Record<string, unknown>;
        const response = await fnArg(requestArg as T['request'], context);
        if (response === null || typeof response !== 'object') {
          throw new Error(`handler of ${methodArg} produced no answer`);
        }
        return response as ITypedRequest['response'];
      } catch (error) {
        if (isRefusal(error)) {
          // A socket call's refusal (a relay's, another instance's) arrives as a CloudlyRefusal.
          throw asTypedResponseError(error);
        }
        if (isStorageFullError(error)) {
          // The embedded database's disk is full: reads go on, this write was refused and rolled
          // back; it is worth trying again once the probe finds space (docs/storage.md).
          this.logger.warn({ err: error, method: methodArg }, 'write refused: the disk is full');
          throw refuse('unavailable', ['storage-full'], { retryAfterMs: this.database.storageProbeMs });
        }
        if (isDatabaseUnavailableError(error)) {
          // The database is unreachable or could not make the write durable: retryable, nothing answered as done.
          this.logger.warn({ err: error, method: methodArg }, 'database unavailable');
          throw refuse('unavailable', ['database-unavailable']);
        }
        const errorId = this.logInternalFailure(error, methodArg);
        throw new TypedResponseError('Cloudly failed to answer this request.', { code: 'internal', retryable: true, errorId });
      }
    }));
  }

  /**
   * Routes one request envelope from any transport and answers it; never answers with nothing.
   * The envelope comes from the boundary parser (`readFrame`): a fresh object holding only the
   * method, the inspected request and the correlation.
   */
  public async dispatch(envelopeArg: IEnvelope, localDataArg: Record<string, unknown>): Promise<IEnvelope> {
    const started = process.hrtime.bigint();
    const transport = localDataArg.transport === 'socket' ? 'socket' : 'http';
    const method = envelopeArg.method;
    let answer = await answerWithHandler(this.router, envelopeArg, localDataArg);
    const served = answer !== null;
    if (!answer) {
      answer = methodNotServedEnvelope(envelopeArg);
    } else if (!answer.error && (answer.response === null || answer.response === undefined)) {
      const errorId = this.logInternalFailure(new Error('router produced no answer'), method);
      answer.error = { text: 'Cloudly failed to answer this request.', data: { code: 'internal', retryable: true, errorId } };
    }
    const outcome = answer.error ? String((answer.error.data as { code?: unknown } | null)?.code ?? 'error') : 'ok';
    // Only served method names become label values, so a caller cannot grow the label set.
    const methodLabel = served ? method : 'unknown';
    this.metrics.calls.inc({ method: methodLabel, outcome, transport });
    this.metrics.latency.observe({ method: methodLabel }, Number(process.hrtime.bigint() - started) / 1e9);
    return answer;
  }
}
