import type { Cloudly } from '../classes.cloudly.js';
import {
  validateClusterRelayAnnouncement,
  validateClusterRelayRegistrationQueryIds,
  type IClusterRelayRegistration,
} from '../interfaces/data/clusterrelay.js';
import type {
  IReq_Any_Cloudly_GetClusterRelayRegistrations,
  IReq_Relay_Cloudly_RegisterClusterRelay,
} from '../interfaces/requests/cluster.js';
import { defineDocumentKind, type IStoredDocument } from '../core/store.js';
import { requireRequestShape } from '../core/validation.js';
import type { ClusterRelayElection, IClusterRelayLeaseDocument } from './relayelection.js';
import { nextCursorMember, pageOf, pageShape } from '../core/pagination.js';

/**
 * What each cluster's relay told Cloudly about itself (where it listens, what it runs), one
 * document per cluster that the latest accepted registration replaces. Only the socket elected
 * for the cluster may register, so a stale or duplicate relay cannot overwrite the live one's
 * origin. `connected` is never stored: it is read from the election lease at answer time.
 */

export interface IClusterRelayRegistrationDocument extends IStoredDocument {
  /** Equal to `id`. */
  clusterId: string;
  origin: string;
  version: string;
  protocol: string;
  acceptedAt: number;
  /** The socket that registered; kept for diagnosis only. */
  sessionId: string;
  /** The node whose host carries the relay listener and hub, when the relay named it. */
  nodeId?: string;
  /** The addresses that host carries, when the relay stated them (only with `nodeId`). */
  hostAddresses?: string[];
}

export const clusterRelayRegistrationKind = defineDocumentKind<IClusterRelayRegistrationDocument>('CloudlyClusterRelayRegistration');

const toPublicRegistration = (docArg: IClusterRelayRegistrationDocument, connectedArg: boolean): IClusterRelayRegistration => ({
  clusterId: docArg.clusterId,
  origin: docArg.origin,
  version: docArg.version,
  protocol: docArg.protocol,
  acceptedAt: docArg.acceptedAt,
  generation: docArg.generation,
  connected: connectedArg,
  ...(docArg.nodeId !== undefined ? { nodeId: docArg.nodeId } : {}),
  ...(docArg.hostAddresses !== undefined ? { hostAddresses: [...docArg.hostAddresses] } : {}),
});

export class ClusterRelayRegistrations {
  constructor(private readonly cloudly: Cloudly, private readonly election: ClusterRelayElection) {
    cloudly.addRelayHandler<IReq_Relay_Cloudly_RegisterClusterRelay>('registerClusterRelay', async (request, context) => {
      request = requireRequestShape(request, {
        required: { registration: (valueArg, pathArg) => validateClusterRelayAnnouncement(valueArg, pathArg) },
      });
      await this.election.requireElected(context.session);
      const stored = await this.accept(context.clusterId, context.session.id, request.registration);
      this.cloudly.logger.info({ clusterId: context.clusterId, origin: stored.origin, version: stored.version }, 'relay registration accepted');
      // Elected here a moment ago: connected, unless the socket has closed since (then read the lease).
      const connected = this.election.isElected(context.session) || await this.election.isClusterConnected(context.clusterId);
      return { registration: toPublicRegistration(stored, connected) };
    });

    cloudly.addAdminHandler<IReq_Any_Cloudly_GetClusterRelayRegistrations>('getClusterRelayRegistrations', async (request) => {
      request = requireRequestShape(request, {
        required: {},
        optional: {
          clusterIds: (valueArg, pathArg) => validateClusterRelayRegistrationQueryIds(valueArg, pathArg),
          ...pageShape('getClusterRelayRegistrations'),
        },
      });
      const page = pageOf('getClusterRelayRegistrations', await this.readRegistrations(request.clusterIds), (registrationArg) => registrationArg.clusterId, request);
      return { registrations: page.items, ...nextCursorMember(page) };
    });
  }

  /** Stores the registration as the cluster's current one (insert, or swap on the generation read). */
  private async accept(
    clusterIdArg: string,
    sessionIdArg: string,
    registrationArg: { origin: string; version: string; protocol: string; nodeId?: string; hostAddresses?: string[] },
  ): Promise<IClusterRelayRegistrationDocument> {
    const fields = {
      clusterId: clusterIdArg,
      origin: registrationArg.origin,
      version: registrationArg.version,
      protocol: registrationArg.protocol,
      sessionId: sessionIdArg,
      ...(registrationArg.nodeId !== undefined ? { nodeId: registrationArg.nodeId } : {}),
      ...(registrationArg.hostAddresses !== undefined ? { hostAddresses: [...registrationArg.hostAddresses] } : {}),
    };
    // A registration replaces the last one whole: what it no longer names is forgotten.
    const unset = (['nodeId', 'hostAddresses'] as const).filter((key) => registrationArg[key] === undefined);
    const { doc } = await this.cloudly.store.mutate(clusterRelayRegistrationKind, clusterIdArg, (currentArg) => {
      const acceptedAt = Date.now();
      return currentArg
        ? { kind: 'write', change: { set: { ...fields, acceptedAt }, unset: unset.filter((key) => currentArg[key] !== undefined) } }
        : { kind: 'create', doc: { id: clusterIdArg, ...fields, acceptedAt } };
    });
    return doc!;
  }

  /** Registrations (all, or of the named clusters) with their live `connected` flag, ordered by cluster. */
  public async readRegistrations(clusterIdsArg?: string[]): Promise<IClusterRelayRegistration[]> {
    const filter = clusterIdsArg ? { id: { $in: clusterIdsArg } } : {};
    const docs = await this.cloudly.store.find(clusterRelayRegistrationKind, filter, { sort: { clusterId: 1 } });
    const leases = new Map<string, IClusterRelayLeaseDocument>(
      (await this.election.readLeases(docs.map((doc) => doc.clusterId))).map((lease) => [lease.clusterId, lease]),
    );
    const answers: IClusterRelayRegistration[] = [];
    for (const doc of docs) {
      answers.push(toPublicRegistration(doc, await this.election.isClusterConnected(doc.clusterId, leases.get(doc.clusterId) ?? null)));
    }
    return answers;
  }

  /** The node the cluster's relay registration names and the addresses its host carries, or null. */
  public async getRelayHost(clusterIdArg: string): Promise<{ nodeId: string; hostAddresses: string[] } | null> {
    const doc = await this.cloudly.store.get(clusterRelayRegistrationKind, clusterIdArg);
    return doc?.nodeId !== undefined ? { nodeId: doc.nodeId, hostAddresses: [...(doc.hostAddresses ?? [])] } : null;
  }

  /** The origin of the cluster's accepted registration (one read, no live flag), or null. */
  public async getOrigin(clusterIdArg: string): Promise<string | null> {
    return (await this.cloudly.store.get(clusterRelayRegistrationKind, clusterIdArg))?.origin ?? null;
  }

  /** The cluster's accepted registration with its live flag, or null when its relay never registered. */
  public async getRegistration(clusterIdArg: string): Promise<IClusterRelayRegistration | null> {
    return (await this.readRegistrations([clusterIdArg]))[0] ?? null;
  }
}
