import { randomBytes, randomUUID } from 'node:crypto';
import type { Cloudly } from '../classes.cloudly.js';
import type { ICluster } from '../interfaces/data/cluster.js';
import type {
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
      const stored = await this.cloudly.store.insert(clusterKind, {
        id: `cluster-${randomUUID()}`,
        name: request.name,
        createdAt: Date.now(),
        relayTokenHash: hashHighEntropySecret(relayToken),
        relayTokenGeneration: 1,
      });
      if (!stored) {
        throw refuse('conflict', ['cluster id collided; try again']);
      }
      this.cloudly.logger.info({ clusterId: stored.id, actor: context.identity.userId }, 'cluster created');
      return { cluster: toPublicCluster(stored), relayToken };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_GetClusters>('getClusters', async (request) => {
      request = requireRequestShape(request, { required: {} });
      const clusters = await this.cloudly.store.find(clusterKind, {}, { sort: { createdAt: 1 } });
      return { clusters: clusters.map(toPublicCluster) };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_GetClusterById>('getClusterById', async (request) => {
      request = requireRequestShape(request, { required: { clusterId: isIdString } });
      return { cluster: toPublicCluster(await this.requireCluster(request.clusterId)) };
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

  public async start(): Promise<void> {
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
