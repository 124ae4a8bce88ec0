import { constantTimeEquals } from '../core/auth.js';
import {
  clusterIngressRegistrationContract,
  type IClusterIngressRegistrationAcceptance,
  type IClusterIngressRegistrationRefusal,
  type TClusterIngressRegistrationRefusalReason,
  validateClusterIngressRegistration,
} from '../interfaces/data/clusteringress.js';
import type { IClusterIngressDesignation, IFleetCutoverIngressDesignation } from '../interfaces/data/clusteringressdesignation.js';
import type { IRuntimeAssignmentStatus } from '../interfaces/data/runtimeassignment.js';
import { type IProtocolOffer, type IProtocolRefusal, negotiateProtocol } from '../interfaces/protocol/protocol.js';
import { readOwnDataValue } from '../interfaces/private/ownproperties.js';
import { isRecord } from '../interfaces/private/dataproperties.js';

/**
 * How long an ingress waits before registering again, per reason. Short where the fact usually
 * heals by itself within seconds (a relay re-election, a node report in flight, a lost race), long
 * where an operator has to act (a malformed ingress build, a missing designation).
 */
export const clusterIngressRetryAfterMs: Readonly<Record<TClusterIngressRegistrationRefusalReason, number>> =
  Object.freeze({
    'not-ready': 5_000,
    'registration-invalid': clusterIngressRegistrationContract.maximumRetryAfterMs,
    'relay-not-connected': 5_000,
    'ingress-not-designated': 60_000,
    'node-mismatch': 60_000,
    'assignment-not-running': 10_000,
    'bearer-refused': 30_000,
    conflict: clusterIngressRegistrationContract.minimumRetryAfterMs,
  });

/** The generations a judgement rests on; read once before and once after judging. */
export interface IClusterIngressJudgedGenerations {
  /** Generation of the cluster's designation, `null` when it has none. */
  designation: number | null;
  /** Generation of the node's runtime assignment report, `null` when the node never reported. */
  nodeReport: number | null;
  /** The node's current session id, `null` when unknown. */
  nodeSessionId: string | null;
}

/** Everything the judge needs, gathered by the manager. Holds the bearer: never log it. */
export interface IClusterIngressRegistrationFacts {
  ownOffer: IProtocolOffer;
  /** The registration body exactly as it arrived. */
  body: unknown;
  /** False while Cloudly starts, stops or lacks what it needs to judge. */
  ready: boolean;
  /** The relay socket that forwarded the body, and the one Cloudly elected for the cluster. */
  relaySessionId: string;
  electedRelaySessionId: string | null;
  /** The cluster's current Pallet ingress designation, `null` when it has none. */
  designation: IClusterIngressDesignation | null;
  /**
   * The cluster's fleet-cutover designation, when it holds that kind instead (absent or null: none).
   * It is a designation too: its registrations are judged by the same reasons, against its service
   * and its credential.
   */
  fleetCutover?: IFleetCutoverIngressDesignation | null;
  /** The node ids the ingress service's placement names, `null` when the service is unknown. */
  placementNodeIds: readonly string[] | null;
  /** The named node's current session and the assignments it reported under it. */
  node: { sessionId: string; assignments: readonly IRuntimeAssignmentStatus[] } | null;
  /** The value of the designation's current credential, `null` when it cannot be read. */
  currentBearer: string | null;
  /** The route-table revision an accepted registration answers. */
  routeTableRevision: number | null;
  /** Generations read with the facts, and re-read after the facts were judged. */
  observed: IClusterIngressJudgedGenerations;
  reread: IClusterIngressJudgedGenerations;
}

export type TClusterIngressRegistrationVerdict =
  | { outcome: 'accepted'; acceptance: IClusterIngressRegistrationAcceptance }
  | { outcome: 'protocol-refused'; refusal: IProtocolRefusal }
  | { outcome: 'refused'; refusal: IClusterIngressRegistrationRefusal };

const refused = (reasonArg: TClusterIngressRegistrationRefusalReason): TClusterIngressRegistrationVerdict => ({
  outcome: 'refused',
  refusal: Object.freeze({
    code: clusterIngressRegistrationContract.refusalCode,
    reason: reasonArg,
    retryAfterMs: clusterIngressRetryAfterMs[reasonArg],
  }),
});

/**
 * Judges one registration. Pure: same facts, same verdict. The protocol offer is read before
 * anything else (a peer that speaks another protocol cannot even be told why it was refused in a
 * shape it understands); then every named reason in the contract's order, earliest first.
 */
export const judgeClusterIngressRegistration = (
  factsArg: IClusterIngressRegistrationFacts,
): TClusterIngressRegistrationVerdict => {
  const offered = isRecord(factsArg.body) ? readOwnDataValue(factsArg.body, 'protocol') : undefined;
  const negotiated = negotiateProtocol(factsArg.ownOffer, offered);
  if ('refusal' in negotiated) {
    return { outcome: 'protocol-refused', refusal: negotiated.refusal };
  }
  if (!factsArg.ready) {
    return refused('not-ready');
  }
  if (validateClusterIngressRegistration(factsArg.body).length > 0) {
    return refused('registration-invalid');
  }
  const body = factsArg.body as { bearer: string; nodeId: string };
  if (factsArg.electedRelaySessionId === null || factsArg.electedRelaySessionId !== factsArg.relaySessionId) {
    return refused('relay-not-connected');
  }
  // Whichever kind the cluster holds: the service it designates and the credential it names (a
  // fleet-cutover record from before Cloudly minted one names none).
  const fleetCutover = factsArg.fleetCutover ?? null;
  const designation = factsArg.designation !== null
    ? { ingressServiceId: factsArg.designation.ingressServiceId, secretVersion: factsArg.designation.credential.secretVersion }
    : fleetCutover !== null
      ? { ingressServiceId: fleetCutover.ingressServiceId, secretVersion: fleetCutover.credential?.secretVersion ?? null }
      : null;
  if (designation === null) {
    return refused('ingress-not-designated');
  }
  if (factsArg.placementNodeIds === null || !factsArg.placementNodeIds.includes(body.nodeId)) {
    return refused('node-mismatch');
  }
  const node = factsArg.node;
  const secretVersion = designation.secretVersion;
  const running = node !== null && node.assignments.some((assignment) => (
    assignment.serviceId === designation.ingressServiceId
    && assignment.state === 'ready'
    && assignment.sessionId === node.sessionId
    // Without a known credential there is nothing the assignment could be checked to carry; the
    // bearer check below refuses such a registration.
    && (secretVersion === null || assignment.secretVersions.some((version) => (
      version.secretId === secretVersion.secretId && version.secretVersionId === secretVersion.secretVersionId
    )))
  ));
  if (!running) {
    return refused('assignment-not-running');
  }
  // A credential Cloudly cannot read is judged like a wrong one, still in constant time.
  const bearerMatches = constantTimeEquals(body.bearer, factsArg.currentBearer ?? '');
  if (!bearerMatches || factsArg.currentBearer === null) {
    return refused('bearer-refused');
  }
  const { observed, reread } = factsArg;
  if (
    observed.designation !== reread.designation
    || observed.nodeReport !== reread.nodeReport
    || observed.nodeSessionId !== reread.nodeSessionId
  ) {
    return refused('conflict');
  }
  return {
    outcome: 'accepted',
    acceptance: Object.freeze({ accepted: true, revision: factsArg.routeTableRevision, protocol: factsArg.ownOffer }),
  };
};

