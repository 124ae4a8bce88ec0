import type { TDecision } from '../core/store.js';
import { refuse, refuseNamed } from '../core/errors.js';
import { fieldProblem, fieldProblemReasons, refuseFields } from '../core/validation.js';
import { canonicalizeJson } from '../interfaces/private/canonicaljson.js';
import type { IClusterNodeCorestore, IClusterNodeReport } from '../interfaces/data/clusternode.js';
import type { IClusterNodeDocument } from './clusternodes.js';
import type { IClusterRelayLeaseDocument } from './relayelection.js';

/**
 * The cluster manager's decisions as pure functions over what the store read: each answers the
 * `store.mutate` decision for one write, so tests call them directly.
 */

const nodeNotFound = (clusterIdArg: string, nodeIdArg: string) =>
  refuseNamed('not-found', 'node-not-found', `node ${nodeIdArg} does not exist in cluster ${clusterIdArg}`);

const sameCorestore = (aArg: IClusterNodeCorestore | null, bArg: IClusterNodeCorestore | null): boolean =>
  canonicalizeJson(aArg) === canonicalizeJson(bArg);

/** An administrator removes a node that exists. */
export const decideNodeRemoval = (
  currentArg: IClusterNodeDocument | null,
  clusterIdArg: string,
  nodeIdArg: string,
): TDecision<IClusterNodeDocument> =>
  (currentArg ? { kind: 'remove' } : { kind: 'refuse', refusal: nodeNotFound(clusterIdArg, nodeIdArg) });

/**
 * Compare-and-swap on the endpoint value: the write commits only while the stored endpoint is
 * the one the caller read. A generation that moved for another reason (a report) is decided
 * again on the new read, so only a real change of the endpoint makes the caller lose.
 */
export const decideNodeCorestore = (
  currentArg: IClusterNodeDocument | null,
  clusterIdArg: string,
  nodeIdArg: string,
  expectedArg: IClusterNodeCorestore | null,
  corestoreArg: IClusterNodeCorestore | null,
): TDecision<IClusterNodeDocument> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: nodeNotFound(clusterIdArg, nodeIdArg) };
  }
  if (!sameCorestore(currentArg.corestore ?? null, expectedArg)) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'corestore-changed', 'is not the node\'s current corestore; read the node again', 'request.expected') };
  }
  if (sameCorestore(currentArg.corestore ?? null, corestoreArg)) {
    return { kind: 'keep' };
  }
  return {
    kind: 'write',
    change: corestoreArg ? { set: { corestore: { endpoint: corestoreArg.endpoint } } } : { unset: ['corestore'] },
  };
};

/**
 * One relay report on the relay's own cluster: introduces the node when it is new (then `name`
 * is required), and replaces `name` and `hostAddresses` only where the report states them.
 */
export const decideNodeReport = (
  currentArg: IClusterNodeDocument | null,
  idArg: string,
  clusterIdArg: string,
  reportArg: IClusterNodeReport,
  nowArg: number,
): TDecision<IClusterNodeDocument> => {
  if (!currentArg) {
    if (reportArg.name === undefined) {
      return {
        kind: 'refuse',
        refusal: refuseFields([fieldProblem('request.report.name', fieldProblemReasons.required, `is required: node ${reportArg.nodeId} is new to cluster ${clusterIdArg}`)]),
      };
    }
    const doc: Omit<IClusterNodeDocument, 'generation'> = {
      id: idArg,
      nodeId: reportArg.nodeId,
      clusterId: clusterIdArg,
      name: reportArg.name,
      createdAt: nowArg,
      source: 'relay-report',
      reportedAt: nowArg,
    };
    if (reportArg.hostAddresses) {
      doc.hostAddresses = [...reportArg.hostAddresses];
    }
    return { kind: 'create', doc };
  }
  const set: Partial<IClusterNodeDocument> = { reportedAt: nowArg };
  if (reportArg.name !== undefined) {
    set.name = reportArg.name;
  }
  if (reportArg.hostAddresses) {
    set.hostAddresses = [...reportArg.hostAddresses];
  }
  return { kind: 'write', change: { set } };
};

export interface ILeaseElectionFacts {
  clusterId: string;
  /** This Cloudly instance. */
  instanceId: string;
  /** The socket of this instance that would take the lease (the oldest open one of the cluster). */
  candidateSessionId: string;
  /** Every open socket of the cluster on this instance. */
  liveSessionIds: readonly string[];
  now: number;
  leaseTtlMs: number;
}

export interface ILeaseElection {
  decision: TDecision<IClusterRelayLeaseDocument>;
  /** The socket the written lease names, when the decision writes one. */
  winnerSessionId: string | null;
  /** A live socket on another instance holds the lease. */
  heldElsewhere: boolean;
}

/**
 * One election round on the cluster's lease: nobody's lease is created for the candidate; a lease
 * that is unexpired and held by another instance stays; otherwise a socket of this instance that
 * still lives keeps (renews) the lease, or the candidate takes one that is free or names a socket
 * of this instance that is gone.
 */
export const decideLeaseElection = (leaseArg: IClusterRelayLeaseDocument | null, factsArg: ILeaseElectionFacts): ILeaseElection => {
  const expiresAt = factsArg.now + factsArg.leaseTtlMs;
  if (!leaseArg) {
    return {
      decision: {
        kind: 'create',
        doc: {
          id: factsArg.clusterId,
          clusterId: factsArg.clusterId,
          sessionId: factsArg.candidateSessionId,
          instanceId: factsArg.instanceId,
          expiresAt,
          acquiredAt: factsArg.now,
        },
      },
      winnerSessionId: factsArg.candidateSessionId,
      heldElsewhere: false,
    };
  }
  const free = leaseArg.sessionId === null || leaseArg.expiresAt <= factsArg.now;
  const ours = leaseArg.instanceId === factsArg.instanceId;
  if (!free && !ours) {
    return { decision: { kind: 'keep' }, winnerSessionId: null, heldElsewhere: true };
  }
  const ownLiveHolder = ours && leaseArg.sessionId !== null && factsArg.liveSessionIds.includes(leaseArg.sessionId)
    ? leaseArg.sessionId
    : null;
  const winner = ownLiveHolder ?? factsArg.candidateSessionId;
  return {
    decision: {
      kind: 'write',
      change: {
        set: {
          sessionId: winner,
          instanceId: factsArg.instanceId,
          expiresAt,
          acquiredAt: winner === leaseArg.sessionId ? leaseArg.acquiredAt : factsArg.now,
        },
      },
    },
    winnerSessionId: winner,
    heldElsewhere: false,
  };
};

/** A lease is released only while it still names this socket of this instance. */
export const decideLeaseRelease = (
  leaseArg: IClusterRelayLeaseDocument | null,
  instanceIdArg: string,
  sessionIdArg: string,
  nowArg: number,
): TDecision<IClusterRelayLeaseDocument> =>
  (leaseArg && leaseArg.sessionId === sessionIdArg && leaseArg.instanceId === instanceIdArg
    ? { kind: 'write', change: { set: { sessionId: null, instanceId: null, expiresAt: 0, releasedAt: nowArg } } }
    : { kind: 'keep' });

/** Why a cluster that still has services cannot be deleted; the reason names them. */
export const clusterHasServicesReason = 'cluster-has-services';

/**
 * An administrator deletes a cluster: it must exist, still have the generation the caller read,
 * and carry no services (they are deleted first; the cluster's removal does not cascade to them).
 */
export const decideClusterDeletion = <TCluster extends { id: string; generation: number }>(
  currentArg: TCluster | null,
  clusterIdArg: string,
  expectedGenerationArg: number,
  serviceIdsArg: readonly string[],
): TDecision<TCluster> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'cluster-not-found', `cluster ${clusterIdArg} does not exist`) };
  }
  if (currentArg.generation !== expectedGenerationArg) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'generation-mismatch', "is not the cluster's current generation", 'request.expectedGeneration') };
  }
  if (serviceIdsArg.length > 0) {
    const named = serviceIdsArg.slice(0, 10).join(', ');
    return {
      kind: 'refuse',
      refusal: refuseNamed('conflict', clusterHasServicesReason,
        `still has ${serviceIdsArg.length} service(s) (${named}${serviceIdsArg.length > 10 ? ', …' : ''}); delete them first`, 'request.clusterId'),
    };
  }
  return { kind: 'remove' };
};

/** An administrator adds a node under an id no node of the cluster has yet. */
export const decideNodeCreation = (
  currentArg: IClusterNodeDocument | null,
  nodeArg: Omit<IClusterNodeDocument, 'generation'>,
): TDecision<IClusterNodeDocument> =>
  (currentArg
    ? { kind: 'refuse', refusal: refuseNamed('conflict', 'node-exists', `node ${nodeArg.nodeId} already exists in cluster ${nodeArg.clusterId}`, 'request.nodeId') }
    : { kind: 'create', doc: nodeArg });

/**
 * An administrator rotates a cluster's relay token: compare-and-swap on the generation the caller
 * read; the new token's hash and the next token generation are written together.
 */
export const decideRelayTokenRotation = <TCluster extends { id: string; generation: number; relayTokenGeneration: number }>(
  currentArg: TCluster | null,
  clusterIdArg: string,
  expectedGenerationArg: number,
  relayTokenHashArg: string,
): TDecision<TCluster> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'cluster-not-found', `cluster ${clusterIdArg} does not exist`) };
  }
  if (currentArg.generation !== expectedGenerationArg) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'generation-mismatch', "is not the cluster's current generation", 'request.expectedGeneration') };
  }
  return {
    kind: 'write',
    change: { set: { relayTokenHash: relayTokenHashArg, relayTokenGeneration: currentArg.relayTokenGeneration + 1 } as unknown as Partial<TCluster> },
  };
};

/**
 * A cluster's labels replaced, on the generation the caller read. The same labels are kept
 * without a write (no new generation for a repeated call that changes nothing).
 */
export const decideClusterLabels = <TCluster extends { id: string; generation: number; labelPairs?: string[]; labelKeys?: string[] }>(
  currentArg: TCluster | null,
  clusterIdArg: string,
  expectedGenerationArg: number,
  labelPairsArg: string[],
): TDecision<TCluster> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'cluster-not-found', `cluster ${clusterIdArg} does not exist`) };
  }
  if (currentArg.generation !== expectedGenerationArg) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'generation-mismatch', "is not the cluster's current generation", 'request.expectedGeneration') };
  }
  if ((currentArg.labelPairs ?? []).join('\n') === labelPairsArg.join('\n')) {
    return { kind: 'keep' };
  }
  const labelKeys = labelPairsArg.map((pairArg) => pairArg.slice(0, pairArg.indexOf('=')));
  return { kind: 'write', change: { set: { labelPairs: labelPairsArg, labelKeys } as unknown as Partial<TCluster> } };
};
