import { randomBytes, randomUUID } from 'node:crypto';
import type { Cloudly } from '../classes.cloudly.js';
import type { ICluster } from '../interfaces/data/cluster.js';
import type {
  IReq_Admin_DeleteCluster,
  IReq_Any_Cloudly_CreateCluster,
  IReq_Any_Cloudly_GetClusterById,
  IReq_Any_Cloudly_GetClusters,
  IReq_Any_Cloudly_RotateClusterRelayToken,
} from '../interfaces/requests/admin.js';
import { refuse } from '../core/errors.js';
import { hashHighEntropySecret } from '../core/auth.js';
import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import { requireRequestShape, isIdString, isNonNegativeInteger, isString } from '../core/validation.js';
import type { IRelaySession } from '../core/relaysessions.js';
import { ClusterRelayElection } from './relayelection.js';
import { ClusterNodes } from './clusternodes.js';
import { ClusterRelayRegistrations } from './relayregistrations.js';
import { defaultRelayCallTimeouts } from '../core/relaycalls.js';
import {
  clusterNameReservationId,
  clusterNameReservationKind,
  reserveExistingClusterNames,
  settleAllClusterNameReservations,
  settleClusterNameReservation,
} from './clusternames.js';
import { decideClusterDeletion } from './decide.js';
import { clusterNodeKind } from './clusternodes.js';
import { clusterRelayRegistrationKind } from './relayregistrations.js';
import { currentOperation } from '../core/operationcontext.js';
import { findPage, nextCursorMember, pageShape } from '../core/pagination.js';

/**
 * Clusters and their relay tokens. A relay token is 256 random bits, shown once when it is made
 * and stored only as its sha256 (a guess of a 256-bit secret is hopeless, so a slow hash buys
 * nothing). Rotating it closes every socket opened with the old one.
 */

export interface IClusterDocument extends IStoredDocument {
  name: string;
  createdAt: number;
  relayTokenHash: string;
  relayTokenGeneration: number;
}

export const clusterKind = defineDocumentKind<IClusterDocument>('CloudlyCluster');

export const relayTokenPrefix = 'szrelay_';
const relayTokenBytes = 32;
const clusterNamePattern = /^[A-Za-z0-9][A-Za-z0-9._ -]*$/;

const newRelayToken = (): string => `${relayTokenPrefix}${randomBytes(relayTokenBytes).toString('base64url')}`;

export const toPublicCluster = (docArg: IClusterDocument): ICluster => ({
  id: docArg.id,
  name: docArg.name,
  generation: docArg.generation,
  createdAt: docArg.createdAt,
  relayTokenGeneration: docArg.relayTokenGeneration,
});

export class ClusterManager {
  /** Which relay socket of each cluster carries its calls (a lease in the database). */
  public readonly relayElection: ClusterRelayElection;
  /** Nodes, their Corestore endpoints and node reports. */
  public readonly nodes: ClusterNodes;
  /** What each cluster's relay registered about itself. */
  public readonly relayRegistrations: ClusterRelayRegistrations;

  constructor(private readonly cloudly: Cloudly) {
    // The per-method timeouts of calls to relays (the table in relaycalls.ts), by class from the config.
    cloudly.relays.setCallTimeouts({
      hint: defaultRelayCallTimeouts.hint,
      ordinary: cloudly.config.relayCallTimeoutMs,
      archive: cloudly.config.relayArchiveCallTimeoutMs,
      backup: cloudly.config.relayBackupCallTimeoutMs,
    });
    this.relayElection = new ClusterRelayElection(cloudly);
    this.nodes = new ClusterNodes(cloudly, this.relayElection, (clusterIdArg) => this.requireCluster(clusterIdArg));
    this.relayRegistrations = new ClusterRelayRegistrations(cloudly, this.relayElection);
    cloudly.addAdminHandler<IReq_Any_Cloudly_CreateCluster>('createCluster', async (request, context) => {
      request = requireRequestShape(request, { required: { name: isString(1, 64, clusterNamePattern) } });
      const relayToken = newRelayToken();
      const cluster = {
        id: `cluster-${randomUUID()}`,
        name: request.name,
        createdAt: Date.now(),
        relayTokenHash: hashHighEntropySecret(relayToken),
        relayTokenGeneration: 1,
      };
      // The name is decided by this one insert (see clusternames.ts for the steps and the crash rules).
      const reservationId = clusterNameReservationId(request.name);
      const reservation = await this.cloudly.store.insert(clusterNameReservationKind, {
        id: reservationId,
        name: request.name,
        clusterId: cluster.id,
        state: 'pending',
        cluster,
      });
      if (!reservation) {
        // Finish or clear what an earlier creator or deleter of this name may have left half done.
        const settled = await settleClusterNameReservation(this.cloudly.store, clusterKind, reservationId);
        throw refuse('conflict', [
          settled === 'released' || settled === 'gone'
            ? `request.name: a cluster named ${request.name} was being removed; try again`
            : `request.name: a cluster named ${request.name} already exists`,
        ]);
      }
      // Null when a settlement rolled the reservation forward first: the same document, by its id.
      const stored = (await this.cloudly.store.insert(clusterKind, cluster)) ?? (await this.cloudly.store.get(clusterKind, cluster.id));
      if (!stored) {
        throw refuse('conflict', [`request.name: the cluster named ${request.name} was removed while it was being created`]);
      }
      await settleClusterNameReservation(this.cloudly.store, clusterKind, reservationId);
      this.cloudly.logger.info({ clusterId: stored.id, actor: context.identity.userId }, 'cluster created');
      return { cluster: toPublicCluster(stored), relayToken };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_GetClusters>('getClusters', async (request) => {
      request = requireRequestShape(request, { required: {}, optional: pageShape('getClusters') });
      const page = await findPage(this.cloudly.store, clusterKind, {}, 'getClusters', request, { createdAt: 1 });
      return { clusters: page.items.map(toPublicCluster), ...nextCursorMember(page) };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_GetClusterById>('getClusterById', async (request) => {
      request = requireRequestShape(request, { required: { clusterId: isIdString } });
      return { cluster: toPublicCluster(await this.requireCluster(request.clusterId)) };
    });

    cloudly.addAdminHandler<IReq_Admin_DeleteCluster>('deleteCluster', async (request, context) => {
      request = requireRequestShape(request, { required: { clusterId: isIdString, expectedGeneration: isNonNegativeInteger } });
      const existing = await this.requireCluster(request.clusterId);
      const serviceIds = (await this.cloudly.serviceManager.listServices({ clusterId: request.clusterId })).map((serviceArg) => serviceArg.id);
      // A reservation still `pending` is bound first, so the cluster removed below is never rolled forward again.
      await settleClusterNameReservation(this.cloudly.store, clusterKind, clusterNameReservationId(existing.name));
      const read: { cluster: IClusterDocument | null } = { cluster: null };
      await this.cloudly.store.mutate(clusterKind, request.clusterId, (currentArg) => {
        read.cluster = currentArg;
        return decideClusterDeletion(currentArg, request.clusterId, request.expectedGeneration, serviceIds);
      });
      const removed = read.cluster!;
      const cascade = await this.finishClusterDeletion(removed.id, removed.name);
      this.cloudly.logger.info({ clusterId: removed.id, actor: context.identity.userId, ...cascade }, 'cluster deleted');
      return { cluster: toPublicCluster(removed), ...cascade };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_RotateClusterRelayToken>('rotateClusterRelayToken', async (request, context) => {
      request = requireRequestShape(request, {
        required: { clusterId: isIdString, expectedGeneration: isNonNegativeInteger },
      });
      const current = await this.requireCluster(request.clusterId);
      const relayToken = newRelayToken();
      const next = await this.cloudly.store.swap(clusterKind, current.id, request.expectedGeneration, {
        set: { relayTokenHash: hashHighEntropySecret(relayToken), relayTokenGeneration: current.relayTokenGeneration + 1 },
      });
      if (!next) {
        throw refuse('conflict', ['request.expectedGeneration is not the cluster\'s current generation']);
      }
      const closed = this.cloudly.relays.closeSessionsBefore(next.id, next.relayTokenGeneration);
      this.cloudly.logger.info({ clusterId: next.id, actor: context.identity.userId, closedSessions: closed }, 'relay token rotated');
      return { cluster: toPublicCluster(next), relayToken };
    });
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
    const live = new Set((await store.find(clusterKind, {})).map((clusterArg) => clusterArg.id));
    for (const node of await store.find(clusterNodeKind, {})) {
      if (!live.has(node.clusterId)) {
        await store.remove(clusterNodeKind, node.id, node.generation);
      }
    }
    for (const registration of await store.find(clusterRelayRegistrationKind, {})) {
      if (!live.has(registration.clusterId)) {
        await store.remove(clusterRelayRegistrationKind, registration.id, registration.generation);
      }
    }
  }

  public async start(): Promise<void> {
    await reserveExistingClusterNames(this.cloudly.store, clusterKind);
    await settleAllClusterNameReservations(this.cloudly.store, clusterKind);
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
      await this.relayElection.elect(clusterIdArg);
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
      throw refuse('not-found', [`cluster ${clusterIdArg} does not exist`]);
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
