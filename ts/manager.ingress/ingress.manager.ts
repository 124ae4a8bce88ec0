import type { Cloudly } from '../classes.cloudly.js';
import { registerOperations } from '../core/operations.js';
import type { IRelaySession } from '../core/relaysessions.js';
import { clusterNodeDocumentId } from '../manager.cluster/clusternodes.js';
import type { IClusterIngressResolvedRoute, IClusterIngressRouteTable } from '../interfaces/data/clusteringress.js';
import type { IClusterIngressDesignation, IFleetCutoverIngressDesignation } from '../interfaces/data/clusteringressdesignation.js';
import { clusterRuntimePhases, type IClusterRuntimeReference, type TClusterRuntimePhase } from '../interfaces/data/clusterruntime.js';
import type {
  IReq_Cloudly_Relay_PushClusterIngressRouteTableChanged,
  IReq_Relay_Cloudly_ReportClusterNodeRuntimeAssignments,
} from '../interfaces/requests/ingress.js';
import type { IIngressDependencies } from './dependencies.js';
import {
  clusterIngressRouteTableKind,
  clusterIngressSlotKind,
  type IClusterIngressSlotDocument,
  type IStoredBearer,
  nodeRuntimeAssignmentsKind,
} from './documents.js';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  clusterIngressTag,
  decideAssignmentReport,
  decideFleetCutover,
  decideRouteTableComputation,
  decideRuntimePhase,
  emptyClusterIngressSlot,
} from './decide.js';
import {
  clusterIngressBearerBytes,
  ingressBearerContext,
  ingressOperations,
  type IIngressPorts,
  readClusterIngressDesignation,
  isComputedRouteTable,
  readClusterRuntimeReference,
  toRouteTable,
} from './operations.js';

/**
 * Cluster ingress: designations, the cluster runtime, route tables and the registration judge. The
 * methods are declared operations (./operations.ts, decisions in ./decide.ts and ./judge.ts); this
 * class wires their ports and owns what is not a request: the route-table hints to relays, the
 * start-up encryption of bearers kept in clear, and the reads and writes other domains use.
 */

export { prepareClusterIngressSpec } from './decide.js';
export {
  clusterIngressBearerBytes,
  ingressBearerContext,
  maximumReportedAssignments,
  nodeAssignmentReportShape,
} from './operations.js';

export class IngressManager {
  private running = false;
  private readonly ports: IIngressPorts;

  /**
   * `dependencies` is the manager's declared port to the cluster and service domains, wired by the
   * composition root (ts/classes.cloudly.ts); tests reach the races they need through failpoints.
   */
  constructor(private readonly cloudly: Cloudly, dependencies: IIngressDependencies) {
    this.ports = {
      store: cloudly.store,
      logger: cloudly.logger,
      needs: dependencies,
      isReady: () => this.running && cloudly.started,
      readSlot: (clusterIdArg) => this.readSlot(clusterIdArg),
      encryptBearer: (clusterIdArg, secretVersionIdArg, valueArg) =>
        cloudly.secrets.encrypt(valueArg, ingressBearerContext(clusterIdArg, secretVersionIdArg)),
      readBearer: (clusterIdArg, bearerArg) => this.readBearer(clusterIdArg, bearerArg),
      sealToClusterRecipient: (clusterIdArg, recipientIdArg, bindingArg, valueArg) =>
        cloudly.secretManager.sealToClusterRecipient(clusterIdArg, recipientIdArg, bindingArg, valueArg),
    };
    registerOperations(cloudly, ingressOperations(this.ports));
    cloudly.relays.onSessionOpened((sessionArg) => this.hintNewSession(sessionArg));
  }

  public async start(): Promise<void> {
    await this.encryptClearBearers();
    this.running = true;
  }

  public async stop(): Promise<void> {
    this.running = false;
  }

  /** The bearer's value, decrypted; a stored bearer that fails authentication is refused (and logged without it). */
  private readBearer(clusterIdArg: string, bearerArg: IStoredBearer): string {
    if (bearerArg.encryptedValue) {
      return this.cloudly.secrets.decryptText(bearerArg.encryptedValue, ingressBearerContext(clusterIdArg, bearerArg.secretVersionId));
    }
    // Written by a version that kept it in clear and not yet encrypted by encryptClearBearers.
    return bearerArg.value ?? '';
  }

  /** Bearers an earlier version stored in clear are encrypted in place at start. */
  private async encryptClearBearers(): Promise<void> {
    const { store } = this.cloudly;
    const slots = await store.find(clusterIngressSlotKind, { 'bearer.value': { $exists: true } } as never);
    for (const slot of slots) {
      await store.mutate(clusterIngressSlotKind, slot.id, (current) => {
        const bearer = current?.bearer;
        if (!current || !bearer || bearer.value === undefined) {
          return { kind: 'keep' };
        }
        return {
          kind: 'write',
          change: { set: { bearer: {
            secretId: bearer.secretId,
            secretVersionId: bearer.secretVersionId,
            encryptedValue: this.cloudly.secrets.encrypt(bearer.value, ingressBearerContext(current.clusterId, bearer.secretVersionId)),
          } } },
        };
      });
    }
  }

  // --- what other domains read and write -------------------------------------------------------

  /** The cluster's Pallet ingress designation, or null (also when it holds a fleet-cutover one). */
  public async getDesignation(clusterIdArg: string): Promise<IClusterIngressDesignation | null> {
    return readClusterIngressDesignation(this.cloudly.store, clusterIdArg);
  }

  /**
   * Records a fleet-cutover ingress designation for a cluster that came from a Swarm fleet. The
   * fleet cutover (outside this project) is its only writer; no request reaches it. Null when the
   * cluster already holds a designation of either kind.
   */
  public async recordFleetCutoverIngressDesignation(
    clusterIdArg: string,
    ingressServiceIdArg: string,
  ): Promise<IFleetCutoverIngressDesignation | null> {
    // The ingress of a cut-over cluster registers as a Pallet one does, with a bearer Cloudly can
    // check: minted here like a designation's, kept encrypted in the slot, handed out only sealed.
    const tag = clusterIngressTag(clusterIdArg);
    const secretVersion = { secretId: `ingress-bearer-${tag}`, secretVersionId: `ingress-bearer-${tag}-${randomUUID()}` };
    const bearerValue = randomBytes(clusterIngressBearerBytes).toString('base64url');
    const fleetCutover: IFleetCutoverIngressDesignation = {
      id: clusterIdArg, generation: 1, clusterId: clusterIdArg, ingressServiceId: ingressServiceIdArg, acceptedAt: Date.now(),
      credential: { credentialId: `ingress-credential-${tag}`, generation: 1, secretVersion },
    };
    const bearer = { ...secretVersion, encryptedValue: this.ports.encryptBearer(clusterIdArg, secretVersion.secretVersionId, bearerValue) };
    await this.readSlot(clusterIdArg);
    const { outcome } = await this.cloudly.store.mutate(clusterIngressSlotKind, clusterIdArg, (slotArg) =>
      decideFleetCutover(slotArg, fleetCutover, bearer));
    return outcome === 'written' ? fleetCutover : null;
  }

  /**
   * The cluster's slot, created on first read with an empty designation and a `pallet` runtime:
   * every cluster this Cloudly creates is born on Pallet.
   */
  private async readSlot(clusterIdArg: string): Promise<IClusterIngressSlotDocument> {
    const { store } = this.cloudly;
    const slot = await store.get(clusterIngressSlotKind, clusterIdArg)
      ?? await store.insert(clusterIngressSlotKind, emptyClusterIngressSlot(clusterIdArg))
      ?? await store.get(clusterIngressSlotKind, clusterIdArg);
    if (!slot) {
      throw new Error('cluster ingress slot vanished while it was created');
    }
    return slot;
  }

  /** The cluster's runtime reference. */
  public async readClusterRuntime(clusterIdArg: string): Promise<IClusterRuntimeReference> {
    return readClusterRuntimeReference(this.ports, clusterIdArg);
  }

  /**
   * The cluster's runtime phase without creating its slot: a cluster with no slot yet was born on
   * Pallet and never moved. For readers that must not write (the service runtime verdict).
   */
  public async peekClusterRuntimePhase(clusterIdArg: string): Promise<TClusterRuntimePhase> {
    const slot = await this.cloudly.store.get(clusterIngressSlotKind, clusterIdArg);
    return slot?.runtime.phase ?? 'pallet';
  }

  /**
   * Moves the cluster's runtime to a phase (a fleet migration's step), compare-and-swap on the
   * runtime generation the caller read. Null when that generation is no longer current.
   */
  public async changeClusterRuntimePhase(
    clusterIdArg: string,
    expectedGenerationArg: number,
    phaseArg: TClusterRuntimePhase,
  ): Promise<IClusterRuntimeReference | null> {
    if (!(clusterRuntimePhases as readonly string[]).includes(phaseArg)) {
      return null;
    }
    await this.readSlot(clusterIdArg);
    // A lost swap may be a designation that moved the slot: mutate re-reads and compares the runtime again.
    const { outcome, doc } = await this.cloudly.store.mutate(clusterIngressSlotKind, clusterIdArg, (slotArg) =>
      decideRuntimePhase(slotArg, expectedGenerationArg, phaseArg));
    return outcome === 'written' ? { id: clusterIdArg, ...doc!.runtime } : null;
  }

  /**
   * Stores one node's assignment observation, replacing the last one whole: the one source of
   * truth the registration judge reads, written by `reportClusterNodeRuntimeAssignments` and by the
   * observed-state report's `nodes` member alike (docs/desired-state.md). The caller validated it.
   */
  public async storeAssignments(
    clusterIdArg: string,
    reportArg: IReq_Relay_Cloudly_ReportClusterNodeRuntimeAssignments['request'],
  ): Promise<number> {
    const id = clusterNodeDocumentId(clusterIdArg, reportArg.nodeId);
    const { doc } = await this.cloudly.store.mutate(nodeRuntimeAssignmentsKind, id, (currentArg) =>
      decideAssignmentReport(currentArg, id, clusterIdArg, reportArg, Date.now()));
    return doc!.generation;
  }

  /** The cluster's one route table, or null when none was computed yet (never an empty stand-in). */
  public async getRouteTable(clusterIdArg: string): Promise<IClusterIngressRouteTable | null> {
    const doc = await this.cloudly.store.get(clusterIngressRouteTableKind, clusterIdArg);
    return doc && isComputedRouteTable(doc) ? toRouteTable(doc) : null;
  }

  /**
   * Stores the routes the desired-state computation resolved as the cluster's one route table (one
   * compare-and-swap write, only when they changed) and hints the relay of the new revision. The
   * only writer of the table. Answers the table as it stands.
   */
  public async recordComputedRouteTable(
    clusterIdArg: string,
    routesArg: readonly IClusterIngressResolvedRoute[],
  ): Promise<IClusterIngressRouteTable> {
    const { outcome, doc } = await this.cloudly.store.mutate(clusterIngressRouteTableKind, clusterIdArg, (currentArg) =>
      decideRouteTableComputation(currentArg, clusterIdArg, routesArg, Date.now()));
    if (outcome !== 'kept') {
      // Not awaited: the ingress pulls the table anyway, so nothing waits for the hint.
      void this.hintRelay(clusterIdArg, doc!.generation);
    }
    return toRouteTable(doc!);
  }

  // --- route-table hints -----------------------------------------------------------------------

  /** Tells the cluster's relay a newer table exists. A lost hint costs nothing: the relay pulls. */
  private async hintRelay(clusterIdArg: string, revisionArg: number, sessionArg?: IRelaySession): Promise<void> {
    const hint: IReq_Cloudly_Relay_PushClusterIngressRouteTableChanged['request'] = { revision: revisionArg };
    try {
      if (sessionArg) {
        await this.cloudly.relays.callSession(sessionArg, 'pushClusterIngressRouteTableChanged', hint);
      } else {
        await this.cloudly.relays.call(clusterIdArg, 'pushClusterIngressRouteTableChanged', hint);
      }
    } catch (error) {
      const reasons = (error as { errorData?: { reasons?: unknown } }).errorData?.reasons;
      this.cloudly.logger.debug({ clusterId: clusterIdArg, revision: revisionArg, reasons }, 'route table hint not delivered');
    }
  }

  /** A relay that just connected may have missed hints: tell it the current revision once. */
  private async hintNewSession(sessionArg: IRelaySession): Promise<void> {
    if (!this.running) {
      return;
    }
    const doc = await this.cloudly.store.get(clusterIngressRouteTableKind, sessionArg.clusterId);
    if (doc && isComputedRouteTable(doc)) {
      await this.hintRelay(sessionArg.clusterId, doc.generation, sessionArg);
    }
  }
}

export type { IClusterIngressSlotDocument };
