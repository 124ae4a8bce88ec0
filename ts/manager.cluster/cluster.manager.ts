import type { Cloudly } from '../classes.cloudly.js';
import { refuse, refuseNamed } from '../core/errors.js';
import type { IRelaySession } from '../core/relaysessions.js';
import { registerOperations } from '../core/operations.js';
import { ClusterRelayElection } from './relayelection.js';
import { SnapshotReadCache } from '../core/readcache.js';
import { ClusterNodes, clusterNodeKind } from './clusternodes.js';
import { ClusterRelayRegistrations, clusterRelayRegistrationKind } from './relayregistrations.js';
import { defaultRelayCallTimeouts } from '../core/relaycalls.js';
import {
  clusterNameReservationId,
  clusterNameReservationKind,
  settleClusterNamesAtStart,
} from './clusternames.js';
import { currentOperation } from '../core/operationcontext.js';
import { clusterKind, type IClusterDocument } from './documents.js';
import { clusterOperations, relayTokenPrefix } from './operations.js';
import { hashHighEntropySecret } from '../core/auth.js';

/**
 * Clusters and their relay tokens, nodes, relay registrations and election. The methods are
 * declared operations (./operations.ts); this class wires their ports and owns the background
 * work (orphan clean-up, name reservations) and the reads other domains use.
 */

export { clusterKind, toPublicCluster, type IClusterDocument } from './documents.js';

export class ClusterManager {
  /** Which relay socket of each cluster carries its calls (a lease in the database). */
  public readonly relayElection: ClusterRelayElection;
  /** Nodes, their Corestore endpoints and node reports. */
  public readonly nodes: ClusterNodes;
  /** What each cluster's relay registered about itself. */
  public readonly relayRegistrations: ClusterRelayRegistrations;
  /** Administrators' cluster lists, from a snapshot (ts/core/readcache.ts). */
  public readonly listReader: SnapshotReadCache;

  constructor(private readonly cloudly: Cloudly) {
    // The per-method timeouts of calls to relays (the table in relaycalls.ts), by class from the config.
    cloudly.relays.setCallTimeouts({
      hint: defaultRelayCallTimeouts.hint,
      ordinary: cloudly.config.relayCallTimeoutMs,
      archive: cloudly.config.relayArchiveCallTimeoutMs,
      backup: cloudly.config.relayBackupCallTimeoutMs,
    });
    this.listReader = new SnapshotReadCache(cloudly.store, [clusterKind], cloudly.config.readCacheMs);
    this.relayElection = new ClusterRelayElection(cloudly);
    this.nodes = new ClusterNodes(cloudly);
    this.relayRegistrations = new ClusterRelayRegistrations(cloudly, this.relayElection);
    registerOperations(cloudly, [
      ...clusterOperations({
        store: cloudly.store,
        listReader: this.listReader,
        logger: cloudly.logger,
        requireCluster: (clusterIdArg) => this.requireCluster(clusterIdArg),
        listNodes: (clusterIdArg) => this.nodes.listNodes(clusterIdArg),
        listServiceIds: async (clusterIdArg) =>
          (await cloudly.serviceManager.listServices({ clusterId: clusterIdArg })).map((serviceArg) => serviceArg.id),
        requireElected: (sessionArg) => this.relayElection.requireElected(sessionArg),
        closeRelaySessionsBefore: (clusterIdArg, generationArg) => cloudly.relays.closeSessionsBefore(clusterIdArg, generationArg),
        finishClusterDeletion: (clusterIdArg, nameArg) => this.finishClusterDeletion(clusterIdArg, nameArg),
      }),
    ]);
  }

  /**
   * What follows a cluster's removal, each step idempotent: its relay sockets closed (none in a
   * dry run), its nodes and relay registration removed, its name reservation released. A process
   * that dies part-way leaves nodes or a registration of a cluster that no longer exists; start-up
   * removes them (`removeOrphansOfDeletedClusters`) and releases the reservation.
   */
  private async finishClusterDeletion(clusterIdArg: string, nameArg: string): Promise<{ removedNodes: number; closedSockets: number }> {
    const { store } = this.cloudly;
    const closedSockets = currentOperation().dryRun ? this.cloudly.relays.sessionsOf(clusterIdArg).length
      : this.cloudly.relays.closeSessionsBefore(clusterIdArg, Number.MAX_SAFE_INTEGER);
    let removedNodes = 0;
    for (const node of await store.find(clusterNodeKind, { clusterId: clusterIdArg })) {
      if (await store.remove(clusterNodeKind, node.id, node.generation)) {
        removedNodes++;
      }
    }
    const registration = await store.get(clusterRelayRegistrationKind, clusterIdArg);
    if (registration) {
      await store.remove(clusterRelayRegistrationKind, registration.id, registration.generation);
    }
    const reservation = await store.get(clusterNameReservationKind, clusterNameReservationId(nameArg));
    if (reservation && reservation.clusterId === clusterIdArg) {
      await store.remove(clusterNameReservationKind, reservation.id, reservation.generation);
    }
    return { removedNodes, closedSockets };
  }

  /** Nodes and relay registrations whose cluster is gone: what a deletion that died part-way left. */
  private async removeOrphansOfDeletedClusters(): Promise<void> {
    const { store } = this.cloudly;
    const live = new Set((await store.findFields(clusterKind, {}, ['id'])).map((clusterArg) => clusterArg.id));
    for (const node of await store.findFields(clusterNodeKind, {}, ['id', 'clusterId', 'generation'])) {
      if (!live.has(node.clusterId)) {
        await store.remove(clusterNodeKind, node.id, node.generation);
      }
    }
    for (const registration of await store.findFields(clusterRelayRegistrationKind, {}, ['id', 'clusterId', 'generation'])) {
      if (!live.has(registration.clusterId)) {
        await store.remove(clusterRelayRegistrationKind, registration.id, registration.generation);
      }
    }
  }

  public async start(): Promise<void> {
    await settleClusterNamesAtStart(this.cloudly.store, clusterKind);
    await this.removeOrphansOfDeletedClusters();
    await this.relayElection.start();
  }

  public async stop(): Promise<void> {
    await this.relayElection.stop();
  }

  /** Whether this relay socket is the connection elected for its cluster right now. */
  public isElected(sessionArg: IRelaySession): boolean {
    return this.relayElection.isElected(sessionArg);
  }

  /** `isElected`, after waiting for an election of the socket's cluster that is still in flight. */
  public async confirmElected(sessionArg: IRelaySession): Promise<boolean> {
    return this.relayElection.confirmElected(sessionArg);
  }

  /** Refuses `unavailable` (`relay-not-elected`) unless this socket is its cluster's elected one. */
  public async requireElected(sessionArg: IRelaySession): Promise<void> {
    return this.relayElection.requireElected(sessionArg);
  }

  /**
   * The elected relay socket of a cluster on this instance, after any election still in flight
   * (a socket that just connected) has finished; null when none is elected here.
   */
  public async electedSession(clusterIdArg: string): Promise<IRelaySession | null> {
    if (this.cloudly.relays.sessionsOf(clusterIdArg).length > 0) {
      await this.relayElection.awaitElection(clusterIdArg);
    }
    return this.cloudly.relays.activeSession(clusterIdArg);
  }

  public async getCluster(clusterIdArg: string): Promise<IClusterDocument | null> {
    return this.cloudly.store.get(clusterKind, clusterIdArg);
  }

  /** The cluster, or a `not-found` refusal naming it. */
  public async requireCluster(clusterIdArg: string): Promise<IClusterDocument> {
    const cluster = await this.getCluster(clusterIdArg);
    if (!cluster) {
      throw refuseNamed('not-found', 'cluster-not-found', `cluster ${clusterIdArg} does not exist`);
    }
    return cluster;
  }

  /** The cluster a relay token belongs to, or null; used on the socket upgrade. */
  public async authenticateRelayToken(tokenArg: string): Promise<{ clusterId: string; tokenGeneration: number } | null> {
    if (!tokenArg.startsWith(relayTokenPrefix)) {
      return null;
    }
    const cluster = await this.cloudly.store.findOne(clusterKind, { relayTokenHash: hashHighEntropySecret(tokenArg) });
    return cluster ? { clusterId: cluster.id, tokenGeneration: cluster.relayTokenGeneration } : null;
  }
}
