import { contractRefusal, refuse, refuseNamed } from '../core/errors.js';
import type { TDecision } from '../core/store.js';
import {
  clusterIngressEnvironmentNames,
  type IClusterIngressPreparedSpec,
  type IClusterIngressResolvedRoute,
} from '../interfaces/data/clusteringress.js';
import {
  clusterIngressDesignationContract,
  type IClusterIngressDesignation,
  type IClusterIngressDesignationRequest,
  type IFleetCutoverIngressDesignation,
} from '../interfaces/data/clusteringressdesignation.js';
import type { TClusterRuntimePhase } from '../interfaces/data/clusterruntime.js';
import type { ISecretVersionReference } from '../interfaces/data/secret.js';
import type { IService } from '../interfaces/data/service.js';
import { canonicalizeJson, computeDomainDigestHex, sha256Hex } from '../interfaces/private/canonicaljson.js';
import type {
  IClusterIngressRouteTableDocument,
  IClusterIngressSlotDocument,
  INodeRuntimeAssignmentsDocument,
  IStoredBearer,
  IStoredDesignationAnswer,
} from './documents.js';

/**
 * The ingress domain's decisions as pure functions over what was read: each answers the
 * `store.mutate` decision of one write (the registration's verdict is ./judge.ts). Randomness and
 * the clock come in as arguments, so the same inputs always decide the same.
 */

/** The service's spec with the three ingress environment names filled per placement node. */
export const prepareClusterIngressSpec = (
  serviceArg: IService,
  secretVersionArg: ISecretVersionReference,
  relayOriginArg: string,
): IClusterIngressPreparedSpec => ({
  serviceId: serviceArg.id,
  specRevision: serviceArg.specRevision,
  runtime: serviceArg.runtime,
  nodes: [...serviceArg.runtime.placement.nodeIds].sort().map((nodeId) => ({
    nodeId,
    environment: {
      [clusterIngressEnvironmentNames.bearer]: { secret: { ...secretVersionArg } },
      [clusterIngressEnvironmentNames.relayOrigin]: { value: relayOriginArg },
      [clusterIngressEnvironmentNames.nodeId]: { value: nodeId },
    },
  })),
});

/** Stable, id-safe tag of a cluster id for names derived from it (ids may be up to 128 characters). */
export const clusterIngressTag = (clusterIdArg: string): string => sha256Hex(clusterIdArg).slice(0, 32);

/** The slot a cluster has before anything was recorded for it: no designation, born on Pallet. */
export const emptyClusterIngressSlot = (clusterIdArg: string): Omit<IClusterIngressSlotDocument, 'generation'> => ({
  id: clusterIdArg,
  clusterId: clusterIdArg,
  kind: 'none',
  designation: null,
  fleetCutover: null,
  bearer: null,
  runtime: { phase: 'pallet', generation: 1 },
});

// --- designation -----------------------------------------------------------------------------

/** Everything a designation is decided on, read before the decision; the minted parts are this call's own. */
export interface IDesignationFacts {
  intent: IClusterIngressDesignationRequest;
  /** Digest of the request, stored with the answer so a reused mutationId must repeat it. */
  requestDigest: string;
  actorId: string;
  /** The cluster's slot as read before the service (null: none yet); the write commits only on this read. */
  slot: IClusterIngressSlotDocument | null;
  service: IService | null;
  relayOrigin: string | null;
  /** The new credential's secret version and its bearer, encrypted where it is stored. */
  minted: { secretVersion: ISecretVersionReference; bearer: IStoredBearer };
  now: number;
}

export interface IDesignationDecision {
  /** `refuse`, or the write (`create` when the cluster had no slot yet). */
  decision: TDecision<IClusterIngressSlotDocument>;
  /** What the call answers and a replay repeats; null when refused. */
  answer: IStoredDesignationAnswer | null;
}

/** The designation with its digest over every other member (the contract's digest domain). */
export const sealClusterIngressDesignation = (unsealedArg: Omit<IClusterIngressDesignation, 'digest'>): IClusterIngressDesignation => ({
  ...unsealedArg,
  digest: computeDomainDigestHex(clusterIngressDesignationContract.digestDomain, unsealedArg),
});

const refused = (refusalArg: ReturnType<typeof refuse>): IDesignationDecision =>
  ({ decision: { kind: 'refuse', refusal: refusalArg }, answer: null });

/**
 * Judges a designation request on the facts, in the contract's order: the runtime, the service
 * and its revision, the relay origin, the designation kind, the expected designation. Accepted, it
 * seals the next designation (the credential moves one generation on) and prepares the spec.
 */
export const decideDesignation = (factsArg: IDesignationFacts): IDesignationDecision => {
  const { intent, service, relayOrigin } = factsArg;
  const clusterId = intent.clusterId;
  const slot = factsArg.slot ?? emptyClusterIngressSlot(clusterId);
  const runtime = slot.runtime;
  if (runtime.phase !== 'pallet' || runtime.generation !== intent.currentRuntime.generation) {
    return refused(refuseNamed('conflict', 'runtime-changed', `is not the cluster's current runtime (${runtime.phase}, generation ${runtime.generation})`,
      'request.designation.currentRuntime'));
  }
  if (!service || service.clusterId !== clusterId) {
    return refused(refuseNamed('not-found', 'service-not-found', 'names no service of this cluster', 'request.designation.ingressServiceId'));
  }
  if (service.specRevision !== intent.expectedSpecRevision) {
    return refused(refuseNamed('conflict', 'spec-revision-changed', `is not the service's runtime spec revision (${service.specRevision})`,
      'request.designation.expectedSpecRevision'));
  }
  if (relayOrigin === null) {
    return refused(refuseNamed('unavailable', 'relay-origin-unknown', 'the cluster has no accepted relay registration, so its relay origin is unknown'));
  }
  if (slot.kind === 'fleet-cutover') {
    return refused(contractRefusal('The cluster holds a fleet-cutover ingress designation.', {
      code: 'conflict',
      retryable: false,
      reasons: ['fleet-cutover-designated'],
      causes: [{ message: 'the cluster holds a fleet-cutover ingress designation; a cluster holds one kind of designation only' }],
    }));
  }
  const current = slot.designation;
  const expected = intent.expectedDesignation;
  const matches = current === null
    ? expected === null
    : expected !== null && expected.id === current.id && expected.generation === current.generation
      && expected.digest === current.digest;
  if (!matches) {
    return refused(refuseNamed('conflict', 'designation-changed', 'is not the cluster\'s current designation', 'request.designation.expectedDesignation'));
  }
  const { secretVersion, bearer } = factsArg.minted;
  const designation = sealClusterIngressDesignation({
    id: clusterId,
    generation: current ? current.generation + 1 : 1,
    previous: current ? { id: current.id, generation: current.generation, digest: current.digest } : null,
    clusterId,
    runtime: { id: clusterId, phase: 'pallet', generation: runtime.generation },
    ingressServiceId: service.id,
    preparedSpecRevision: service.specRevision,
    credential: {
      credentialId: `ingress-credential-${clusterIngressTag(clusterId)}`,
      generation: current ? current.credential.generation + 1 : 1,
      secretVersion,
    },
    actorId: factsArg.actorId,
    acceptedAt: factsArg.now,
  });
  const spec = prepareClusterIngressSpec(service, secretVersion, relayOrigin);
  const set = { kind: 'pallet' as const, designation, bearer };
  return {
    decision: factsArg.slot ? { kind: 'write', change: { set } } : { kind: 'create', doc: { ...slot, ...set } },
    answer: { requestDigest: factsArg.requestDigest, designation, spec },
  };
};

/**
 * The decided designation commits only on the slot it was decided on: a designation, a runtime
 * step or anything else that moved the slot since makes it lose (`conflict`), as in the read the
 * facts were judged on.
 */
export const decideDesignationCommit = (
  currentArg: IClusterIngressSlotDocument | null,
  readArg: IClusterIngressSlotDocument | null,
  decidedArg: TDecision<IClusterIngressSlotDocument>,
): TDecision<IClusterIngressSlotDocument> =>
  ((currentArg?.generation ?? 0) === (readArg?.generation ?? 0)
    ? decidedArg
    : { kind: 'refuse', refusal: refuseNamed('conflict', 'kept-changing', 'the cluster\'s ingress designation or runtime changed while the request was decided') });

/** A fleet cutover records its designation only in a slot that holds none of either kind. */
export const decideFleetCutover = (
  currentArg: IClusterIngressSlotDocument | null,
  fleetCutoverArg: IFleetCutoverIngressDesignation,
  bearerArg: IStoredBearer,
): TDecision<IClusterIngressSlotDocument> =>
  (currentArg?.kind === 'none'
    ? { kind: 'write', change: { set: { kind: 'fleet-cutover', fleetCutover: fleetCutoverArg, bearer: bearerArg } } }
    : { kind: 'keep' });

/** A runtime phase change, compare-and-swap on the runtime generation the caller read (not the slot's). */
export const decideRuntimePhase = (
  currentArg: IClusterIngressSlotDocument | null,
  expectedGenerationArg: number,
  phaseArg: TClusterRuntimePhase,
): TDecision<IClusterIngressSlotDocument> =>
  (currentArg?.runtime.generation === expectedGenerationArg
    ? { kind: 'write', change: { set: { runtime: { phase: phaseArg, generation: expectedGenerationArg + 1 } } } }
    : { kind: 'keep' });

// --- route table and node reports --------------------------------------------------------------

/**
 * The one route table after the desired state was computed: written (its revision, the document's
 * generation, moves by one) only when the resolved routes differ from the stored ones, created on
 * the first computation. Equal routes keep the table, so a recomputation that changed nothing else
 * costs the ingress no pull. Routes arrive sorted and detached from the resolution.
 */
export const decideRouteTableComputation = (
  currentArg: IClusterIngressRouteTableDocument | null,
  clusterIdArg: string,
  routesArg: readonly IClusterIngressResolvedRoute[],
  nowArg: number,
): TDecision<IClusterIngressRouteTableDocument> => {
  const routes = routesArg.map((route) => ({
    hostname: route.hostname,
    serviceId: route.serviceId,
    port: route.port,
    ...(route.certificate === 'acme' ? { certificate: 'acme' as const } : {}),
    targets: route.targets.map((target) => ({
      lease: { id: target.lease.id, generation: target.lease.generation },
      nodeId: target.nodeId,
      address: target.address,
      port: target.port,
    })),
  }));
  if (!currentArg) {
    return { kind: 'create', doc: { id: clusterIdArg, clusterId: clusterIdArg, routes, computedAt: nowArg } };
  }
  return canonicalizeJson(currentArg.routes) === canonicalizeJson(routes)
    ? { kind: 'keep' }
    : { kind: 'write', change: { set: { routes, computedAt: nowArg } } };
};

export type TNodeAssignmentReport = Omit<INodeRuntimeAssignmentsDocument, 'id' | 'generation' | 'clusterId' | 'reportedAt'>;

/**
 * A node's assignment report replaces the last one whole; one that lost to a concurrent report of
 * the node is decided again on that one and replaces it (never `conflict` to the relay).
 */
export const decideAssignmentReport = (
  currentArg: INodeRuntimeAssignmentsDocument | null,
  idArg: string,
  clusterIdArg: string,
  reportArg: TNodeAssignmentReport,
  nowArg: number,
): TDecision<INodeRuntimeAssignmentsDocument> => {
  const report = {
    clusterId: clusterIdArg,
    nodeId: reportArg.nodeId,
    sessionId: reportArg.sessionId,
    assignments: reportArg.assignments.map((assignment) => ({
      assignmentId: assignment.assignmentId,
      serviceId: assignment.serviceId,
      sessionId: assignment.sessionId,
      state: assignment.state,
      secretVersions: assignment.secretVersions.map((version) => ({
        secretId: version.secretId, secretVersionId: version.secretVersionId,
      })),
    })),
    reportedAt: nowArg,
  };
  return currentArg ? { kind: 'write', change: { set: report } } : { kind: 'create', doc: { id: idArg, ...report } };
};
