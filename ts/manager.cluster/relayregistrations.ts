import type { Cloudly } from '../classes.cloudly.js';
import { sentenceCheck } from '../core/validation.js';
import {
  validateClusterRelayAnnouncement,
  snapshotClusterRelayCapabilities,
  validateClusterRelayRegistrationQueryIds,
  type IClusterRelayAnnouncement,
  type IClusterRelayCapabilities,
  type IClusterRelayRegistration,
} from '../interfaces/data/clusterrelay.js';
import { defineDocumentKind, type IStoredDocument, type TDecision, ownedByClusterOfId } from '../core/store.js';
import { adminQuery, registerOperations, relayMutation } from '../core/operations.js';
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
  /** What the cluster's runtime supports, when the relay stated it (the runtime verdict reads it). */
  capabilities?: IClusterRelayCapabilities;
  /**
   * The generation of the last registration whose announcement (origin, version, protocol, node,
   * addresses, capabilities) differed from the one before it; the store's `inputsGeneration`
   * (ts/core/store.ts). A relay that registers again on a new socket with the same announcement
   * moves `acceptedAt` and `sessionId` only, and the reconciler and the node projections, which
   * read what it announced, are not run for it. Absent in documents stored before it existed:
   * their next registration counts as a change.
   */
  inputsGeneration?: number;
}

export const clusterRelayRegistrationKind = defineDocumentKind<IClusterRelayRegistrationDocument>('CloudlyClusterRelayRegistration', { owners: ownedByClusterOfId });

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
  ...(docArg.capabilities !== undefined ? { capabilities: snapshotClusterRelayCapabilities(docArg.capabilities) } : {}),
});

/** The registration a relay's announcement makes: it replaces the last one whole. Pure. */
export const decideRelayRegistration = (
  currentArg: IClusterRelayRegistrationDocument | null,
  clusterIdArg: string,
  sessionIdArg: string,
  registrationArg: IClusterRelayAnnouncement,
  nowArg: number,
): TDecision<IClusterRelayRegistrationDocument> => {
  const fields = {
    clusterId: clusterIdArg,
    origin: registrationArg.origin,
    version: registrationArg.version,
    protocol: registrationArg.protocol,
    sessionId: sessionIdArg,
    acceptedAt: nowArg,
    ...(registrationArg.nodeId !== undefined ? { nodeId: registrationArg.nodeId } : {}),
    ...(registrationArg.hostAddresses !== undefined ? { hostAddresses: [...registrationArg.hostAddresses] } : {}),
    ...(registrationArg.capabilities !== undefined ? { capabilities: snapshotClusterRelayCapabilities(registrationArg.capabilities) } : {}),
  };
  if (!currentArg) {
    return { kind: 'create', doc: { id: clusterIdArg, ...fields, inputsGeneration: 1 } };
  }
  // What the new registration no longer names is forgotten.
  const unset = (['nodeId', 'hostAddresses', 'capabilities'] as const).filter((key) => registrationArg[key] === undefined && currentArg[key] !== undefined);
  const announcedAgain = currentArg.inputsGeneration !== undefined && announcementOf(currentArg) === announcementOf(fields);
  return { kind: 'write', change: { set: announcedAgain ? fields : { ...fields, inputsGeneration: currentArg.generation + 1 }, unset } };
};

/** What a registration announced, as one comparable text (the members in a fixed order). */
const announcementOf = (registrationArg: Pick<IClusterRelayRegistrationDocument, 'origin' | 'version' | 'protocol' | 'nodeId' | 'hostAddresses' | 'capabilities'>): string =>
  JSON.stringify([
    registrationArg.origin,
    registrationArg.version,
    registrationArg.protocol,
    registrationArg.nodeId ?? null,
    registrationArg.hostAddresses ?? null,
    registrationArg.capabilities ? snapshotClusterRelayCapabilities(registrationArg.capabilities) : null,
  ]);

export class ClusterRelayRegistrations {
  constructor(private readonly cloudly: Cloudly, private readonly election: ClusterRelayElection) {
    registerOperations(cloudly, [
      relayMutation({
        method: 'registerClusterRelay',
        access: 'relay',
        input: { required: { registration: sentenceCheck(validateClusterRelayAnnouncement) } },
        facts: async (_request, context) => {
          // Only the elected socket registers, so a stale or duplicate relay cannot overwrite the live one.
          await this.election.requireElected(context.session);
          return { clusterId: context.clusterId, sessionId: context.session.id };
        },
        target: (_request, facts) => ({ kind: clusterRelayRegistrationKind, id: facts.clusterId }),
        decide: (current, { request, facts, now }) => decideRelayRegistration(current, facts.clusterId, facts.sessionId, request.registration, now),
        answer: async ({ doc }, _step, context) => {
          this.cloudly.relays.activity.line({ clusterId: context.clusterId, origin: doc!.origin, version: doc!.version }, 'relay registration accepted');
          // Elected here a moment ago: connected, unless the socket has closed since (then read the lease).
          const connected = this.election.isElected(context.session) || await this.election.isClusterConnected(context.clusterId);
          return { registration: toPublicRegistration(doc!, connected) };
        },
      }),
      adminQuery({
        method: 'getClusterRelayRegistrations',
        access: 'read',
        input: {
          required: {},
          optional: {
            clusterIds: sentenceCheck(validateClusterRelayRegistrationQueryIds),
            ...pageShape('getClusterRelayRegistrations'),
          },
        },
        run: async (request) => {
          const page = pageOf('getClusterRelayRegistrations', await this.readRegistrations(request.clusterIds), (registrationArg) => registrationArg.clusterId, request);
          return { registrations: page.items, ...nextCursorMember(page) };
        },
      }),
    ]);
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

  /** What the cluster's relay stated its runtime supports, or null when it stated nothing. */
  public async getCapabilities(clusterIdArg: string): Promise<IClusterRelayCapabilities | null> {
    const doc = await this.cloudly.store.get(clusterRelayRegistrationKind, clusterIdArg);
    return doc?.capabilities ? snapshotClusterRelayCapabilities(doc.capabilities) : null;
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
