import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import type * as jose from 'jose';
import { CloudlyRelayClient, defaultRelayReconnectPolicy, delayAfterFailureMs, type IRelayReconnectPolicy, type IRelayRegistrationRetry } from '../client/relay.js';
import { fetchServiceDatabaseClosure, receiveStagedArchiveObject, sendServiceDatabaseClosure } from '../client/relayclosures.js';
import { CloudlyTransportError } from '../client/transport.js';
import { refuse, refuseNamed } from '../core/errors.js';
import { generateSecretRecipientKeyPair, openSealedSecret, toBase64Url, type ISecretRecipientKeyPair } from '../core/sealing.js';
import type { IClusterPlatformDesiredState, IClusterPlatformObservedService, IServiceSecretManifest, TObservedServiceState } from '../interfaces/data/desiredstate.js';
import { verifyRuntimeNetworkProjectionSignature } from '../interfaces/data/runtimenetworksignature.js';
import type { ITypedContract } from '../interfaces/requests/admin.js';
import type { ISimConfig } from './config.js';
import type { IBackupArchiveObject } from '../interfaces/data/backup.js';
import type { IIsolatedRestoreNodeState } from '../interfaces/data/isolatedrestore.js';
import { generatedClosureBytes, generatedClosureSha256, seededFraction, seededInteger } from './generate.js';
import { planRetention } from '../manager.backup/retention.js';
import type { IArchivePruneResult, IArchiveRetentionPolicy } from '../interfaces/data/backup.js';

type TAnyCall = ITypedContract<string, any, any>;

/**
 * One simulated cluster: one real relay connection (the project's relay client) that does what a
 * cluster's relay does, with nothing running behind it. It keeps little state (what it runs, what
 * it reported, a few versions it opened) so thousands fit in one process.
 */

export type TSimClusterState =
  | 'connecting' | 'registered' | 'converging' | 'converged' | 'degraded' | 'disconnected' | 'gave-up' | 'stopped';

/** What a simulated cluster runs of one service. */
interface ISimService {
  specRevision: number;
  /** Replicas per node, as Cloudly's leases (or the placement) put them. */
  perNode: Map<string, number>;
  state: TObservedServiceState;
  reason?: string;
  /** Pending removal: reported stopped until Cloudly says it is removed. */
  removing: boolean;
  timer: NodeJS.Timeout | null;
  /** What reached its workloads: the secrets this relay opened, and the bindings it was given. */
  manifest?: IServiceSecretManifest;
}

/** One isolated restore a simulated node holds: its state as the contract reports it, and what it staged. */
interface ISimIsolatedRestore {
  state: IIsolatedRestoreNodeState;
  manifest: IBackupArchiveObject[];
  /** The sha256 the node computed of each staged object's bytes, by path (kept after cleanup, as the node's record). */
  stagedSha256: Map<string, string>;
}

/** Counters the whole fleet shares: what a test or a benchmark reads. */
export interface ISimFleetCounters {
  registrations: number;
  reconnects: number;
  desiredStateReads: number;
  desiredStateUnchanged: number;
  observedReports: number;
  leaseConfirmations: number;
  projectionsVerified: number;
  projectionsRejected: number;
  credentialsOpened: number;
  /** Route certificates whose sealed key was opened and matched its certificate. */
  routeCertificatesOpened: number;
  /** ACME HTTP-01 challenges answered with Cloudly's key authorization. */
  acmeChallengesAnswered: number;
  ingressBearersOpened: number;
  /** Service secrets the relays opened for their manifests. */
  secretsOpened: number;
  inventoriesAnswered: number;
  trafficAnswered: number;
  backupsStored: number;
  backupsFailed: number;
  restoresVerified: number;
  restoresMismatched: number;
  /** Isolated-restore objects staged (length and sha256 proved) and their bytes: what drills moved. */
  drillObjectsStaged: number;
  drillBytesStaged: number;
  /** Isolated restores executed, failed on purpose (`--fault-drill-fail`) and cleaned up. */
  drillsExecuted: number;
  drillsFailed: number;
  drillsCleanedUp: number;
  errors: number;
}

/** One snapshot a simulated node holds in its archive: what a backup left there. */
export interface ISimArchiveSnapshot {
  snapshotId: string;
  serviceId: string;
  createdAt: number;
  sizeBytes: number;
}

export const emptyCounters = (): ISimFleetCounters => ({
  registrations: 0, reconnects: 0, desiredStateReads: 0, desiredStateUnchanged: 0, observedReports: 0,
  leaseConfirmations: 0, projectionsVerified: 0, projectionsRejected: 0, credentialsOpened: 0, routeCertificatesOpened: 0, acmeChallengesAnswered: 0, ingressBearersOpened: 0, secretsOpened: 0,
  inventoriesAnswered: 0, trafficAnswered: 0, backupsStored: 0, backupsFailed: 0, restoresVerified: 0, restoresMismatched: 0,
  drillObjectsStaged: 0, drillBytesStaged: 0, drillsExecuted: 0, drillsFailed: 0, drillsCleanedUp: 0, errors: 0,
});

/** What the fleet hands each cluster: configuration, counters, the log, and Cloudly's signing keys. */
export interface ISimFleetContext {
  config: ISimConfig;
  counters: ISimFleetCounters;
  log(fieldsArg: Record<string, unknown>, messageArg: string): void;
  jwks(refreshArg?: boolean): Promise<{ keys: jose.JWK[] }>;
}

const errorText = (errorArg: unknown): string => {
  const data = (errorArg as { errorData?: { code?: string; reasons?: string[] } })?.errorData;
  if (data?.code) {
    return `${data.code}${data.reasons?.length ? `: ${data.reasons.join('; ')}` : ''}`;
  }
  return errorArg instanceof Error ? errorArg.message : String(errorArg);
};

const dayOf = (textArg: string): number => Date.parse(`${textArg}T00:00:00Z`);

export class SimulatedCluster {
  public state: TSimClusterState = 'connecting';
  public relay: CloudlyRelayClient | null = null;
  public clusterId: string | null = null;
  public appliedRevision: number | null = null;
  public readonly nodeIds: string[];
  private readonly services = new Map<string, ISimService>();
  /** The isolated restores (drills) this cluster's nodes hold, by restore id; cleaned-up ones stay as their last state. */
  public readonly isolatedRestores = new Map<string, ISimIsolatedRestore>();
  private keys: ISecretRecipientKeyPair | null = null;
  private enrolled = false;
  /** Per node: the credential version last opened, the leases last confirmed, the projection last applied. */
  private readonly openedCredentials = new Map<string, string>();
  private readonly openedBearers = new Set<string>();
  private readonly confirmedLeases = new Map<string, string>();
  private readonly appliedProjections = new Map<string, string>();
  /** The route certificates this cluster holds, opened: by hostname, what an ingress would serve. */
  public readonly routeCertificates = new Map<string, { version: number; fingerprint256: string; notAfter: string }>();
  private readingCertificates: Promise<void> | null = null;
  private readCertificatesAgain = false;
  private syncing: Promise<void> | null = null;
  private syncAgain = false;
  private reportTimer: NodeJS.Timeout | null = null;
  private reporting = false;
  /** The credential references of the last desired state read. */
  private credentialRefs: Pick<IClusterPlatformDesiredState, 'nodes' | 'ingress'> | null = null;
  private reportAgain = false;
  private stopped = false;
  /** The first connect (with its registration) while it runs. */
  private starting: Promise<void> | null = null;
  /** Ends the wait between first-connect attempts (on stop). */
  private wakeRetry: (() => void) | null = null;
  /**
   * Each node's archive: the snapshots its backups left, oldest first. `pruneClusterNodeArchive`
   * applies its retention to it (see `pruneArchive`); kept in memory, so a restarted sim starts empty.
   */
  public readonly nodeArchives = new Map<string, ISimArchiveSnapshot[]>();
  /**
   * Awaited before each prune is answered: a test holds the answer back with it (a relay that is
   * slow to prune), so a Cloudly can be killed while it waits for one.
   */
  public beforePrune: ((requestArg: { nodeId: string; retention: IArchiveRetentionPolicy; dryRun?: boolean }) => Promise<void>) | null = null;

  constructor(
    public readonly name: string,
    private readonly token: string,
    private readonly index: number,
    private readonly context: ISimFleetContext,
  ) {
    this.nodeIds = Array.from({ length: context.config.nodes }, (_unused, nodeIndex) => `node-${nodeIndex + 1}`);
  }

  private get config(): ISimConfig {
    return this.context.config;
  }

  /** Moves to a new state; one log line per change. */
  private setState(stateArg: TSimClusterState, detailArg: Record<string, unknown> = {}): void {
    if (this.state === stateArg) {
      return;
    }
    const from = this.state;
    this.state = stateArg;
    this.context.log({ cluster: this.name, clusterId: this.clusterId, from, to: stateArg, ...detailArg }, `cluster ${this.name}: ${from} -> ${stateArg}`);
  }

  /**
   * Connects (retrying with full jitter while Cloudly is not there yet), registers, and from then
   * on the relay client reconnects by itself. Resolves once the first registration was accepted,
   * or the token was refused.
   */
  public start(): Promise<void> {
    this.starting ??= this.connectLoop();
    return this.starting;
  }

  private async connectLoop(): Promise<void> {
    const policy: Required<IRelayReconnectPolicy> = { ...defaultRelayReconnectPolicy, baseMs: this.config.reconnectBaseMs, capMs: this.config.reconnectCapMs };
    let advisedMs: number | null = null;
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        const relay = await CloudlyRelayClient.connect(this.config.url, this.token, {
          reconnect: policy,
          registration: {
            origin: `http://10.${Math.floor(this.index / 250) % 250}.${this.index % 250}.1:8080`,
            version: 'cloudly-sim/1',
            protocol: 'cluster-relay/1',
          },
          onRegistrationRetry: (retryArg: IRelayRegistrationRetry) => {
            this.context.log({ cluster: this.name, attempt: retryArg.attempt, delayMs: retryArg.delayMs, retryAfterMs: retryArg.retryAfterMs, reason: retryArg.reason }, `cluster ${this.name}: registration refused, retrying`);
          },
          // Before the socket opens: Cloudly calls an elected relay at once (a prune, a backup).
          handlers: (clientArg) => this.addHandlers(clientArg),
          onConnected: async (clientArg) => this.afterConnect(clientArg),
        });
        if (this.stopped) {
          relay.close();
          return;
        }
        this.relay = relay;
        relay.onClose(() => {
          if (!this.stopped && relay.gaveUp === null) {
            this.setState('disconnected');
          }
        });
        relay.onReconnecting((attemptArg, delayMsArg) => {
          if (attemptArg === 0 || attemptArg % 10 === 0) {
            this.context.log({ cluster: this.name, attempt: attemptArg, delayMs: delayMsArg }, `cluster ${this.name}: reconnecting`);
          }
        });
        relay.onReconnected(() => {
          this.context.counters.reconnects++;
        });
        relay.onGiveUp((giveUpArg) => this.setState('gave-up', { reason: giveUpArg.reason }));
        return;
      } catch (error) {
        if (error instanceof CloudlyTransportError && error.status === 401) {
          this.setState('gave-up', { reason: 'token-refused' });
          return;
        }
        advisedMs = error instanceof CloudlyTransportError ? error.retryAfterMs : null;
        // The relay client's own rules (docs/relay-protocol.md, "Reconnecting"): while connections
        // are refused the window stops at 4 s, so a fleet started before Cloudly listens tries
        // again within seconds of it listening, not over the 30 s cap.
        const delayMs = delayAfterFailureMs(attempt, policy, error, advisedMs);
        if (attempt === 0 || attempt % 10 === 0) {
          this.context.log({ cluster: this.name, attempt, delayMs, error: errorText(error) }, `cluster ${this.name}: cannot connect yet`);
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delayMs);
          this.wakeRetry = () => { clearTimeout(timer); resolve(); };
        });
        this.wakeRetry = null;
      }
    }
  }

  /**
   * Closes the socket with a normal close code (1000) and stops every timer. A first connect still
   * under way (registered, reporting its nodes) is waited for (at most 10 s), so its socket is
   * closed normally too rather than cut when the process exits.
   */
  public async stop(): Promise<void> {
    this.stopped = true;
    this.wakeRetry?.();
    for (const service of this.services.values()) {
      if (service.timer) {
        clearTimeout(service.timer);
      }
    }
    if (this.reportTimer) {
      clearTimeout(this.reportTimer);
    }
    const bound = (promiseArg: Promise<unknown>) => {
      let timer: NodeJS.Timeout | undefined;
      return Promise.race([promiseArg, new Promise((resolve) => { timer = setTimeout(resolve, 10_000); })]).finally(() => clearTimeout(timer));
    };
    if (this.starting) {
      await bound(this.starting.catch(() => undefined));
    }
    const socket = this.relay?.peer.socket;
    const closed = socket && socket.readyState !== socket.CLOSED
      ? new Promise<void>((resolve) => socket.once('close', () => resolve()))
      : Promise.resolve();
    this.relay?.close();
    this.setState('stopped');
    // The close handshake: Cloudly answers the close frame, then the socket is closed.
    await bound(closed);
  }

  /** After every connect and registration: nodes, the secret recipient, the desired state (the handlers are added before the socket opens). */
  private async afterConnect(clientArg: CloudlyRelayClient): Promise<void> {
    this.context.counters.registrations++;
    // The client is known from its first registration on (before connect() returns), so a stop
    // during the first node reports closes it.
    this.relay = clientArg;
    for (const nodeId of this.nodeIds) {
      const { node } = await clientArg.fire<TAnyCall>('reportClusterNode', { report: { nodeId, name: nodeId } });
      this.clusterId = node.clusterId ?? this.clusterId;
    }
    this.setState('registered');
    // Everything after the registration is the cluster's own work: a failure there is logged, and
    // must not close the socket (which a throwing onConnected would).
    // After a reconnect the desired state is often unchanged; the report that follows tells the
    // (possibly restarted) Cloudly what runs and moves this cluster back to its converged state.
    void this.enroll(clientArg).then(() => {
      this.requestSync();
      // Hints sent while this relay was away are lost: read the certificates once.
      this.requestCertificates();
      this.scheduleReport(0);
    });
  }

  private addHandlers(clientArg: CloudlyRelayClient): void {
    const handlers: Record<string, (requestArg: any) => Promise<unknown>> = {
      pushClusterPlatformDesiredStateChanged: async (request) => {
        if (request.revision !== this.appliedRevision) {
          this.requestSync();
        }
        return { acknowledged: true };
      },
      pushClusterIngressRouteTableChanged: async () => ({}),
      pushClusterRouteCertificatesChanged: async () => {
        this.requestCertificates();
        return {};
      },
      getClusterCorestoreLegacyResources: async (request) => this.inventory(request.nodeId),
      getClusterTrafficStatistics: async (request) => this.traffic(request),
      pruneClusterNodeArchive: async (request) => {
        await this.beforePrune?.(request);
        return this.pruneArchive(request);
      },
      backupClusterService: async (request) => this.backup(request),
      restoreClusterService: async (request) => this.restore(request),
      coreflowPrepareIsolatedRestore: async (request) => this.prepareIsolated(request),
      stageIsolatedRestoreArchive: async (request) => this.stageIsolated(request, clientArg),
      coreflowGetIsolatedRestoreStatus: async (request) => {
        const restore = this.isolatedOf(request);
        // A stall holds the status answer (a test drops the relay meanwhile).
        if (this.config.faultDrillStallMs > 0 && restore.state.phase === 'ready') {
          await new Promise((resolve) => setTimeout(resolve, this.config.faultDrillStallMs));
        }
        return { state: restore.state };
      },
      coreflowExecuteIsolatedRestore: async (request) => this.executeIsolated(request),
      coreflowCleanupIsolatedRestore: async (request) => this.cleanupIsolated(request),
    };
    for (const [method, handler] of Object.entries(handlers)) {
      clientArg.addHandler<TAnyCall>(method, handler);
    }
  }

  private isolatedOf(requestArg: { restoreId: string; targetNodeName: string }): ISimIsolatedRestore {
    const restore = this.isolatedRestores.get(requestArg.restoreId);
    if (!restore || restore.state.targetNodeName !== requestArg.targetNodeName) {
      throw refuseNamed('not-found', 'isolated-restore-not-found', `node ${requestArg.targetNodeName} holds no restore ${requestArg.restoreId}`);
    }
    return restore;
  }

  /** The next state of a restore, at the revision the caller named (a stale one is refused, as the contract asks). */
  private advanceIsolated(restoreArg: ISimIsolatedRestore, expectedRevisionArg: number, changeArg: Partial<IIsolatedRestoreNodeState>) {
    if (restoreArg.state.revision !== expectedRevisionArg) {
      throw refuseNamed('conflict', 'isolated-restore-revision-mismatch', `the restore is at revision ${restoreArg.state.revision}, not ${expectedRevisionArg}`);
    }
    restoreArg.state = { ...restoreArg.state, ...changeArg, revision: restoreArg.state.revision + 1 };
    return { state: restoreArg.state };
  }

  private prepareIsolated(requestArg: { clusterId: string; targetNodeName: string; restoreId: string; manifest: IBackupArchiveObject[] }) {
    if (!this.nodeIds.includes(requestArg.targetNodeName)) {
      throw refuseNamed('not-found', 'node-not-found', `cluster ${this.name} has no node ${requestArg.targetNodeName}`);
    }
    const existing = this.isolatedRestores.get(requestArg.restoreId);
    if (existing) {
      return { state: existing.state };
    }
    const restore: ISimIsolatedRestore = {
      state: { clusterId: requestArg.clusterId, targetNodeName: requestArg.targetNodeName, restoreId: requestArg.restoreId, revision: 1, phase: 'prepared', stagedObjects: [] },
      manifest: requestArg.manifest,
      stagedSha256: new Map(),
    };
    this.isolatedRestores.set(requestArg.restoreId, restore);
    return { state: restore.state };
  }

  /** Stages one object: its bytes read in full and hashed here (the client also proves length and sha256 against the object). */
  private async stageIsolated(requestArg: any, clientArg: CloudlyRelayClient) {
    const restore = this.isolatedOf(requestArg);
    const hash = createHash('sha256');
    let bytes = 0;
    for await (const chunk of receiveStagedArchiveObject(this.relay ?? clientArg, requestArg.archive, requestArg.object, { transientChunks: true })) {
      hash.update(chunk);
      bytes += chunk.byteLength;
    }
    restore.stagedSha256.set(requestArg.object.path, hash.digest('hex'));
    this.context.counters.drillObjectsStaged++;
    this.context.counters.drillBytesStaged += bytes;
    const stagedObjects = [...restore.state.stagedObjects.filter((objectArg) => objectArg.path !== requestArg.object.path), requestArg.object];
    const complete = restore.manifest.every((objectArg) => stagedObjects.some((stagedArg) => stagedArg.path === objectArg.path));
    return this.advanceIsolated(restore, requestArg.expectedRevision, { stagedObjects, phase: complete ? 'ready' : 'staging' });
  }

  private executeIsolated(requestArg: { restoreId: string; targetNodeName: string; expectedRevision: number }) {
    const restore = this.isolatedOf(requestArg);
    if (restore.state.phase !== 'ready') {
      throw refuseNamed('conflict', 'isolated-restore-not-ready', `the restore is ${restore.state.phase}`);
    }
    if (this.config.faultDrillFail) {
      this.context.counters.drillsFailed++;
      return this.advanceIsolated(restore, requestArg.expectedRevision, { phase: 'failed', reason: 'simulated restore failure (--fault-drill-fail)' });
    }
    this.context.counters.drillsExecuted++;
    return this.advanceIsolated(restore, requestArg.expectedRevision, { phase: 'executed' });
  }

  private cleanupIsolated(requestArg: { restoreId: string; targetNodeName: string; expectedRevision: number }) {
    const restore = this.isolatedOf(requestArg);
    if (restore.state.phase === 'cleaned-up') {
      return { state: restore.state };
    }
    this.context.counters.drillsCleanedUp++;
    const { reason: _reason, ...kept } = restore.state;
    restore.state = kept;
    return this.advanceIsolated(restore, requestArg.expectedRevision, { phase: 'cleaned-up', stagedObjects: [] });
  }

  /** The relay's current client: calls go to the socket open now. */
  private get client(): CloudlyRelayClient | null {
    return this.relay;
  }

  /** Enrolls this cluster's X25519 key once per process (Cloudly keeps the enrollment). */
  private async enroll(clientArg: CloudlyRelayClient): Promise<void> {
    if (this.enrolled) {
      return;
    }
    try {
      this.keys ??= await generateSecretRecipientKeyPair();
      const begun = await clientArg.fire<TAnyCall>('beginSecretRecipientEnrollment', { recipient: { algorithm: 'x25519', publicKey: this.keys.publicKey } });
      const proof = toBase64Url(await openSealedSecret(this.keys.keyPair, begun.challenge));
      await clientArg.fire<TAnyCall>('completeSecretRecipientEnrollment', { enrollmentId: begun.enrollmentId, proof });
      this.enrolled = true;
    } catch (error) {
      this.fail('secret recipient enrollment', error);
    }
  }

  private fail(whatArg: string, errorArg: unknown): void {
    this.context.counters.errors++;
    this.context.log({ cluster: this.name, error: errorText(errorArg) }, `cluster ${this.name}: ${whatArg} failed`);
  }

  /** Reads the desired state (one read at a time; a hint during a read asks for one more). */
  private requestSync(): void {
    if (this.stopped) {
      return;
    }
    if (this.syncing) {
      this.syncAgain = true;
      return;
    }
    this.syncing = (async () => {
      do {
        this.syncAgain = false;
        await this.sync().catch((error: unknown) => {
          if (this.relay?.isOpen) {
            this.fail('desired state sync', error);
          }
        });
      } while (this.syncAgain && !this.stopped);
      // Cleared in the same turn as the last check: a hint after it starts a new loop, not a lost flag.
      this.syncing = null;
    })();
  }

  private async sync(): Promise<void> {
    const client = this.client;
    if (!client?.isOpen) {
      return;
    }
    this.context.counters.desiredStateReads++;
    const answer = await client.fire<TAnyCall>('getClusterPlatformDesiredState', this.appliedRevision === null ? {} : { knownRevision: this.appliedRevision });
    if (answer.unchanged) {
      this.context.counters.desiredStateUnchanged++;
      // A hint may have run the first read before the secret recipient was enrolled: open what
      // that read named now.
      if (this.credentialRefs) {
        await this.openCredentials(client, this.credentialRefs);
      }
      return;
    }
    const desired = answer.desiredState as IClusterPlatformDesiredState;
    this.clusterId = desired.clusterId;
    this.apply(desired);
    this.appliedRevision = desired.revision;
    this.scheduleReport(0);
    await this.confirmLeases(client, desired);
    await this.applyProjections(client);
    // Only what the credentials need is kept, not the whole desired state.
    this.credentialRefs = { nodes: desired.nodes, ingress: desired.ingress };
    await this.openCredentials(client, this.credentialRefs);
  }

  /** Where each replica of a service runs: Cloudly's leases when it allocated, else round robin over the placement. */
  private placementOf(serviceArg: IClusterPlatformDesiredState['services'][number], desiredArg: IClusterPlatformDesiredState): Map<string, number> {
    const perNode = new Map<string, number>();
    const leases = desiredArg.leases.filter((lease) => lease.serviceId === serviceArg.serviceId);
    if (leases.length > 0) {
      for (const lease of leases) {
        perNode.set(lease.nodeId, (perNode.get(lease.nodeId) ?? 0) + 1);
      }
      return perNode;
    }
    const known = desiredArg.nodes.map((node) => node.nodeId).sort();
    const named = serviceArg.runtime.placement.nodeIds;
    const eligible = named.length > 0 ? known.filter((nodeId) => named.includes(nodeId)) : known;
    for (let replica = 0; replica < serviceArg.runtime.replicas && eligible.length > 0; replica++) {
      const nodeId = eligible[replica % eligible.length];
      perNode.set(nodeId, (perNode.get(nodeId) ?? 0) + 1);
    }
    return perNode;
  }

  /** Starts what is new or changed, stops what is removed, forgets what Cloudly forgot. */
  private apply(desiredArg: IClusterPlatformDesiredState): void {
    const wanted = new Set<string>();
    for (const service of desiredArg.services) {
      wanted.add(service.serviceId);
      const perNode = this.placementOf(service, desiredArg);
      const current = this.services.get(service.serviceId);
      const samePlacement = current && current.perNode.size === perNode.size
        && [...perNode].every(([nodeId, replicas]) => current.perNode.get(nodeId) === replicas);
      if (current && !current.removing && current.specRevision === service.specRevision && samePlacement) {
        continue;
      }
      if (current?.timer) {
        clearTimeout(current.timer);
      }
      const entry: ISimService = { specRevision: service.specRevision, perNode, state: 'starting', removing: false, timer: null };
      this.services.set(service.serviceId, entry);
      if (service.runtime.replicas === 0 || perNode.size === 0) {
        entry.state = 'stopped';
        continue;
      }
      entry.timer = setTimeout(() => {
        entry.timer = null;
        void this.openManifest(service).then((manifestArg) => {
          if (this.services.get(service.serviceId) !== entry) {
            return;
          }
          entry.manifest = manifestArg;
          const fails = seededFraction(this.config.seed, 'start', service.serviceId, service.specRevision) < this.config.failureRate;
          entry.state = fails ? 'failed' : 'ready';
          entry.reason = fails ? 'simulated start failure (cloudly-sim --failure-rate)' : undefined;
          this.scheduleReport(0);
        });
      }, this.config.startDelayMs);
    }
    for (const removal of desiredArg.removals) {
      const current = this.services.get(removal.serviceId);
      if (current?.timer) {
        clearTimeout(current.timer);
      }
      const perNode = current && current.perNode.size > 0 ? current.perNode : new Map([[desiredArg.nodes[0]?.nodeId ?? this.nodeIds[0], 0]]);
      this.services.set(removal.serviceId, { specRevision: current?.specRevision ?? 1, perNode, state: 'stopped', removing: true, timer: null });
      wanted.add(removal.serviceId);
    }
    // Deleted at once (force) or moved to another cluster: nothing left to report.
    for (const [serviceId, service] of this.services) {
      if (!wanted.has(serviceId)) {
        if (service.timer) {
          clearTimeout(service.timer);
        }
        this.services.delete(serviceId);
      }
    }
  }

  private scheduleReport(delayMsArg: number): void {
    if (this.reportTimer || this.stopped) {
      return;
    }
    this.reportTimer = setTimeout(() => {
      this.reportTimer = null;
      void this.report();
    }, delayMsArg);
  }

  /**
   * Reports one at a time: two reports of the same revision in flight could be stored in the
   * other order, and an older observation ("starting") would then overwrite a newer ("ready").
   * A report asked for while one is in flight is sent after it, with the state of that moment.
   */
  private async report(): Promise<void> {
    if (this.reporting) {
      this.reportAgain = true;
      return;
    }
    this.reporting = true;
    try {
      do {
        this.reportAgain = false;
        await this.reportOnce();
      } while (this.reportAgain && !this.stopped);
    } finally {
      this.reporting = false;
    }
  }

  /**
   * The service's secret manifest as a relay makes it: each secret opened with this cluster's key
   * against the binding built from the cluster, the version reference and number (docs/secrets.md,
   * section 7); one that does not open is left out. The simulator fetches no binding credentials,
   * so it lists the enabled bindings it was told to deliver.
   */
  private async openManifest(serviceArg: IClusterPlatformDesiredState['services'][number]): Promise<IServiceSecretManifest> {
    const secrets: IServiceSecretManifest['secrets'] = [];
    for (const secret of serviceArg.secrets ?? []) {
      if (!this.keys) {
        break;
      }
      try {
        const opened = await openSealedSecret(this.keys.keyPair, secret.sealed, {
          clusterId: this.clusterId ?? '', nodeId: null, purpose: 'service-secret', secretVersion: secret.secretVersion, version: secret.version, enrollmentId: null,
        });
        opened.fill(0);
        secrets.push({ name: secret.name, secretVersionId: secret.secretVersion.secretVersionId });
        this.context.counters.secretsOpened++;
      } catch (error) {
        this.fail(`opening secret ${secret.name} of ${serviceArg.serviceId}`, error);
      }
    }
    return { secrets, bindingIds: serviceArg.platformBindings.filter((binding) => binding.enabled).map((binding) => binding.bindingId) };
  }

  /** One observed-state report of everything the cluster runs, at the revision it applied. */
  private async reportOnce(): Promise<void> {
    const client = this.client;
    if (!client?.isOpen || this.appliedRevision === null) {
      return;
    }
    const entries: IClusterPlatformObservedService[] = [];
    for (const [serviceId, service] of this.services) {
      for (const [nodeId, replicas] of service.perNode) {
        const entry: IClusterPlatformObservedService = {
          serviceId, nodeId, specRevision: service.specRevision, replicas: service.state === 'ready' ? replicas : 0, state: service.state,
        };
        if (service.reason) {
          entry.reason = service.reason;
        }
        if (service.manifest && service.state !== 'stopped') {
          entry.manifest = service.manifest;
        }
        entries.push(entry);
      }
    }
    try {
      const answer = await client.fire<TAnyCall>('reportClusterPlatformObservedState', { desiredRevision: this.appliedRevision, services: entries });
      this.context.counters.observedReports++;
      for (const removed of answer.removed as string[]) {
        this.services.delete(removed);
      }
    } catch (error) {
      const data = (error as { errorData?: { code?: string; reasons?: string[] } }).errorData;
      if (data?.code === 'conflict' && data.reasons?.includes('desired-revision-stale')) {
        return;
      }
      // The desired state moved under the report (a spec changed meanwhile): read it again.
      this.fail('observed-state report', error);
      this.requestSync();
      return;
    }
    this.updateConvergence();
  }

  private updateConvergence(): void {
    const live = [...this.services.values()].filter((service) => !service.removing);
    const counts = { ready: 0, starting: 0, failed: 0, stopped: 0 };
    for (const service of live) {
      counts[service.state]++;
    }
    const detail = { revision: this.appliedRevision, services: live.length, ...counts };
    if (counts.starting > 0) {
      this.setState('converging', detail);
    } else if (counts.failed > 0) {
      this.setState('degraded', detail);
    } else {
      this.setState('converged', detail);
    }
  }

  /** Confirms the leases Cloudly allocated, per node, when they changed. */
  private async confirmLeases(clientArg: CloudlyRelayClient, desiredArg: IClusterPlatformDesiredState): Promise<void> {
    const byNode = new Map<string, Array<{ lease: { id: string; generation: number }; serviceId: string; address: string }>>();
    for (const lease of desiredArg.leases) {
      const list = byNode.get(lease.nodeId) ?? [];
      list.push({ lease: lease.lease, serviceId: lease.serviceId, address: lease.address });
      byNode.set(lease.nodeId, list);
    }
    for (const nodeId of new Set([...byNode.keys(), ...this.confirmedLeases.keys()])) {
      const leases = byNode.get(nodeId) ?? [];
      const key = createHash('sha256').update(JSON.stringify(leases)).digest('hex');
      if (this.confirmedLeases.get(nodeId) === key) {
        continue;
      }
      try {
        await clientArg.fire<TAnyCall>('reportRuntimeNetworkLeases', { nodeId, leases });
        this.confirmedLeases.set(nodeId, key);
        this.context.counters.leaseConfirmations++;
      } catch (error) {
        this.fail(`lease confirmation of ${nodeId}`, error);
      }
    }
  }

  /** Fetches each node's signed projection, verifies it against Cloudly's JWKS and reports it applied. */
  private async applyProjections(clientArg: CloudlyRelayClient): Promise<void> {
    for (const nodeId of this.nodeIds) {
      let answer: any;
      try {
        answer = await clientArg.fire<TAnyCall>('getClusterNodeRuntimeNetworkProjection', { nodeId });
      } catch (error) {
        // Without an address plan there is no projection to apply.
        if ((error as { errorData?: { code?: string } }).errorData?.code !== 'not-found') {
          this.fail(`projection read of ${nodeId}`, error);
        }
        continue;
      }
      const projection = answer.projection;
      if (this.appliedProjections.get(nodeId) === `${projection.id}:${projection.generation}:${projection.digest}`) {
        continue;
      }
      let check = await verifyRuntimeNetworkProjectionSignature(projection, answer.signature, await this.context.jwks());
      if (!check.ok) {
        // A key Cloudly rotated in since the keys were read: read them again once.
        check = await verifyRuntimeNetworkProjectionSignature(projection, answer.signature, await this.context.jwks(true));
      }
      if (!check.ok) {
        this.context.counters.projectionsRejected++;
        this.fail(`projection of ${nodeId} (signature: ${check.reason})`, new Error('refused'));
        continue;
      }
      this.context.counters.projectionsVerified++;
      try {
        await clientArg.fire<TAnyCall>('reportRuntimeNetworkProjectionApplication', {
          application: { projectionId: projection.id, nodeId: projection.nodeId, generation: projection.generation, digest: projection.digest },
        });
        this.appliedProjections.set(nodeId, `${projection.id}:${projection.generation}:${projection.digest}`);
      } catch (error) {
        this.fail(`projection application of ${nodeId}`, error);
      }
    }
  }

  /** Opens each node's sealed Corestore credential (and the ingress bearer) when a new version is named. */
  private async openCredentials(clientArg: CloudlyRelayClient, desiredArg: Pick<IClusterPlatformDesiredState, 'nodes' | 'ingress'>): Promise<void> {
    if (!this.enrolled || !this.keys) {
      return;
    }
    for (const node of desiredArg.nodes) {
      const versionId = node.corestoreCredential.secretVersion.secretVersionId;
      if (this.openedCredentials.get(node.nodeId) === versionId) {
        continue;
      }
      try {
        const answer = await clientArg.fire<TAnyCall>('getCorestoreControlCredentialMaterial', { nodeId: node.nodeId, recipientId: this.keys.recipientId });
        await openSealedSecret(this.keys.keyPair, answer.material);
        this.openedCredentials.set(node.nodeId, versionId);
        this.context.counters.credentialsOpened++;
      } catch (error) {
        this.fail(`corestore credential of ${node.nodeId}`, error);
      }
    }
    for (const nodeSpec of desiredArg.ingress?.spec?.nodes ?? []) {
      for (const value of Object.values(nodeSpec.environment)) {
        if (!('secret' in value) || this.openedBearers.has(value.secret.secretVersionId)) {
          continue;
        }
        try {
          const answer = await clientArg.fire<TAnyCall>('resolveClusterIngressBearer', { secretVersion: value.secret, recipientId: this.keys.recipientId });
          await openSealedSecret(this.keys.keyPair, answer.material);
          this.openedBearers.add(value.secret.secretVersionId);
          this.context.counters.ingressBearersOpened++;
        } catch (error) {
          this.fail('ingress bearer', error);
        }
      }
    }
  }

  /** The HTTP-01 key authorization Cloudly holds for `tokenArg` in this cluster, or null (docs/relay-protocol.md). */
  public async acmeChallenge(tokenArg: string): Promise<string | null> {
    const client = this.client;
    if (!client?.isOpen) {
      return null;
    }
    try {
      const answer = await client.fire<TAnyCall>('getClusterAcmeChallenge', { token: tokenArg });
      this.context.counters.acmeChallengesAnswered++;
      return answer.keyAuthorization as string;
    } catch {
      // `acme-challenge-not-found`: an order of another cluster, or none.
      return null;
    }
  }

  /** Reads the route certificates (one read at a time; a hint during a read asks for one more). */
  private requestCertificates(): void {
    if (this.stopped) {
      return;
    }
    if (this.readingCertificates) {
      this.readCertificatesAgain = true;
      return;
    }
    this.readingCertificates = (async () => {
      do {
        this.readCertificatesAgain = false;
        await this.readCertificates().catch((error: unknown) => {
          if (this.relay?.isOpen) {
            this.fail('route certificates', error);
          }
        });
      } while (this.readCertificatesAgain && !this.stopped);
      this.readingCertificates = null;
    })();
  }

  /**
   * Opens each new certificate's sealed key against the binding this cluster expects for its
   * hostname and version, and checks that the key belongs to the certificate, as an ingress must
   * before serving it. Hostnames no longer answered are dropped.
   */
  private async readCertificates(): Promise<void> {
    const client = this.client;
    if (!client?.isOpen || !this.enrolled || !this.keys || !this.clusterId) {
      return;
    }
    const answer = await client.fire<TAnyCall>('getClusterRouteCertificates', { recipientId: this.keys.recipientId });
    const answered = new Set<string>();
    for (const material of answer.certificates as Array<{ hostname: string; version: number; certificatePem: string; notAfter: string; key: Parameters<typeof openSealedSecret>[1] }>) {
      answered.add(material.hostname);
      if (this.routeCertificates.get(material.hostname)?.version === material.version) {
        continue;
      }
      const keyPem = Buffer.from(await openSealedSecret(this.keys.keyPair, material.key, {
        clusterId: this.clusterId,
        nodeId: null,
        purpose: 'route-certificate-key',
        secretVersion: { secretId: `route-certificate/${material.hostname}`, secretVersionId: `v${material.version}` },
        version: material.version,
        enrollmentId: null,
      })).toString('utf8');
      const certificate = new X509Certificate(material.certificatePem);
      if (!certificate.checkPrivateKey(createPrivateKey(keyPem))) {
        throw new Error(`the key delivered for ${material.hostname} does not belong to its certificate`);
      }
      this.routeCertificates.set(material.hostname, { version: material.version, fingerprint256: certificate.fingerprint256, notAfter: material.notAfter });
      this.context.counters.routeCertificatesOpened++;
      this.context.log({ cluster: this.name, hostname: material.hostname, version: material.version, notAfter: material.notAfter }, `cluster ${this.name}: route certificate opened`);
    }
    for (const hostname of [...this.routeCertificates.keys()]) {
      if (!answered.has(hostname)) {
        this.routeCertificates.delete(hostname);
        this.context.log({ cluster: this.name, hostname }, `cluster ${this.name}: route certificate dropped`);
      }
    }
  }

  /** A small legacy Corestore inventory per node: `--legacy-services` databases, none adopted. */
  private inventory(nodeIdArg: string) {
    this.context.counters.inventoriesAnswered++;
    const services = Array.from({ length: this.config.legacyServices }, (_unused, indexArg) => {
      const serviceId = `legacy-${String(indexArg + 1).padStart(4, '0')}`;
      return { serviceId, resources: [{ capability: 'database', databaseName: `${serviceId.replace('-', '_')}_db`, adoption: { state: 'unadopted', blocker: null } }] };
    });
    return { reachable: true, nodeId: nodeIdArg, readAt: Date.now(), services };
  }

  /** Deterministic daily traffic per node, paged by an offset cursor. */
  private traffic(requestArg: { fromDayUtc: string; toDayUtc: string; cursor?: string; limit: number }) {
    this.context.counters.trafficAnswered++;
    const records: unknown[] = [];
    for (let day = dayOf(requestArg.fromDayUtc); day <= dayOf(requestArg.toDayUtc) && records.length < 100_000; day += 86_400_000) {
      const dayUtc = new Date(day).toISOString().slice(0, 10);
      for (const nodeId of this.nodeIds) {
        const count = (partArg: string, maxArg: number) => seededInteger(maxArg, this.config.seed, this.name, nodeId, dayUtc, partArg);
        const requests = count('requests', 100_000);
        records.push({
          dayUtc, nodeId, hostname: `${this.name}.sim.example`, requests,
          bytesIn: requests * (200 + count('in', 800)), bytesOut: requests * (1000 + count('out', 9000)),
          connections: Math.ceil(requests / 4), backendFailures: { connect: count('connect', 5), handshake: count('handshake', 3), request: count('request', 10) },
        });
      }
    }
    const offset = requestArg.cursor ? Number(requestArg.cursor) || 0 : 0;
    const page = records.slice(offset, offset + requestArg.limit);
    return offset + page.length < records.length ? { statistics: page, nextCursor: String(offset + page.length) } : { statistics: page };
  }

  /**
   * A backup: the service's "database closure" is generated from the seed and streamed to
   * Cloudly until its receipt, then the snapshot is answered. Faults (slow, abort, wrong digest)
   * are chosen per backup from the seed.
   */
  private async backup(requestArg: { nodeId: string; backupId: string; service: { id: string } }) {
    const client = this.client!;
    const { seed, closureBytes } = this.config;
    const serviceId = requestArg.service.id;
    const aborts = seededFraction(seed, 'abort', requestArg.backupId) < this.config.faultAbortRate;
    const wrongDigest = seededFraction(seed, 'digest', requestArg.backupId) < this.config.faultWrongDigestRate;
    const sha256 = await generatedClosureSha256(seed, serviceId, requestArg.backupId, closureBytes);
    try {
      const sent = await sendServiceDatabaseClosure(client, {
        backupId: requestArg.backupId, serviceId, nodeId: requestArg.nodeId,
        descriptor: {
          format: 'corestore-database-closure-v1', byteLength: closureBytes,
          sha256: wrongDigest ? createHash('sha256').update(sha256).digest('hex') : sha256,
          receipt: { receiptId: `export-${requestArg.backupId.slice(-16)}`, receiptSha256: createHash('sha256').update(`receipt:${requestArg.backupId}`).digest('hex') },
        },
      }, generatedClosureBytes(seed, serviceId, requestArg.backupId, closureBytes, {
        pauseMs: this.config.faultSlowMs,
        stopAfterBytes: aborts ? Math.floor(closureBytes / 2) : undefined,
      }));
      if (!sent.accepted) {
        throw new Error('closure not accepted');
      }
    } catch (error) {
      this.context.counters.backupsFailed++;
      this.context.log({ cluster: this.name, backupId: requestArg.backupId, aborts, wrongDigest, error: errorText(error) }, `cluster ${this.name}: backup upload failed`);
      throw refuse('unavailable', ['closure-upload-failed'], { causes: [{ message: errorText(error).slice(0, 500) }] });
    }
    this.context.counters.backupsStored++;
    const snapshot = { snapshotId: `snap-${requestArg.backupId.slice(-24)}`, serviceId, createdAt: Date.now(), sizeBytes: closureBytes };
    const archive = this.nodeArchives.get(requestArg.nodeId) ?? [];
    archive.push(snapshot);
    this.nodeArchives.set(requestArg.nodeId, archive);
    return {
      snapshots: [{
        type: 'database', snapshotId: snapshot.snapshotId, resourceName: 'db', databaseName: 'app',
        createdAt: snapshot.createdAt, sizeBytes: closureBytes,
      }],
    };
  }

  /**
   * A node's prune: the retention applies to each service's snapshots apart (as restic's `forget`
   * groups by host and paths), with restic's keep-last/daily/weekly/monthly rule. A node with no
   * archive answers `found: false`; a dry run answers what would go and removes nothing.
   */
  private pruneArchive(requestArg: { nodeId: string; retention: IArchiveRetentionPolicy; dryRun?: boolean }): { found: boolean; result?: IArchivePruneResult } {
    const archive = this.nodeArchives.get(requestArg.nodeId);
    if (!archive) {
      return { found: false };
    }
    const removed = new Set<string>();
    for (const serviceId of new Set(archive.map((snapshotArg) => snapshotArg.serviceId))) {
      const candidates = archive.filter((snapshotArg) => snapshotArg.serviceId === serviceId)
        .map((snapshotArg) => ({ backupId: snapshotArg.snapshotId, createdAt: snapshotArg.createdAt, state: 'completed' as const }));
      for (const decision of planRetention(candidates, requestArg.retention, new Map())) {
        if (decision.action === 'remove') {
          removed.add(decision.backupId);
        }
      }
    }
    const kept = archive.filter((snapshotArg) => !removed.has(snapshotArg.snapshotId));
    const reclaimedBytes = archive.filter((snapshotArg) => removed.has(snapshotArg.snapshotId)).reduce((sum, snapshotArg) => sum + snapshotArg.sizeBytes, 0);
    if (requestArg.dryRun !== true) {
      this.nodeArchives.set(requestArg.nodeId, kept);
    }
    return {
      found: true,
      result: {
        dryRun: requestArg.dryRun === true,
        keptSnapshotIds: kept.map((snapshotArg) => snapshotArg.snapshotId),
        removedSnapshotIds: [...removed],
        reclaimedBytes,
      },
    };
  }

  /** A restore: the closure comes back from Cloudly and must be the bytes the seed generates, byte for byte. */
  private async restore(requestArg: { nodeId: string; backupId: string; service: { id: string }; snapshots: unknown[] }) {
    const client = this.client!;
    const fetched = await fetchServiceDatabaseClosure(client, { backupId: requestArg.backupId, serviceId: requestArg.service.id, nodeId: requestArg.nodeId }, { transientChunks: true });
    const hash = createHash('sha256');
    let length = 0;
    for await (const chunk of fetched.bytes) {
      hash.update(chunk);
      length += chunk.byteLength;
    }
    const got = hash.digest('hex');
    // The descriptor's length, not the config's: a sim restarted with another --closure-bytes
    // still checks the closure it uploaded then.
    const expected = await generatedClosureSha256(this.config.seed, requestArg.service.id, requestArg.backupId, fetched.descriptor.byteLength);
    if (got !== expected || length !== fetched.descriptor.byteLength) {
      this.context.counters.restoresMismatched++;
      this.context.log({ cluster: this.name, backupId: requestArg.backupId, got, expected }, `cluster ${this.name}: restored bytes differ from the generated closure`);
      throw refuseNamed('conflict', 'restored-closure-mismatch', 'the bytes are not the closure this backup uploaded');
    }
    this.context.counters.restoresVerified++;
    this.context.log({ cluster: this.name, backupId: requestArg.backupId, bytes: length, sha256: got }, `cluster ${this.name}: restore verified byte for byte`);
    return { restored: requestArg.snapshots };
  }
}
