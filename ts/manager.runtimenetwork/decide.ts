import { refuse, refuseNamed } from '../core/errors.js';
import { problemsOfSentences, refuseFields } from '../core/validation.js';
import type { TDecision } from '../core/store.js';
import type { IRuntimeNetworkProjectionApplication, IRuntimeNetworkWorkloadLease } from '../interfaces/data/runtimenetwork.js';
import {
  admitRuntimeNetworkAddressPlanChange,
  type IRuntimeNetworkAddressPlan,
} from '../interfaces/data/runtimenetworkaddressplan.js';
import { canonicalizeJson } from '../interfaces/private/canonicaljson.js';
import { isIpv4InPrefix, parseIpv4Prefix } from '../interfaces/private/ipv4.js';
import { judgeLeaseConfirmation } from './allocation.js';
import type { TRuntimeNetworkProjectionStep } from './derive.js';
import {
  addressPlanDocumentId,
  detach,
  type IRuntimeNetworkAddressPlanDocument,
  type IRuntimeNetworkLeasesDocument,
  type IRuntimeNetworkProjectionDocument,
} from './documents.js';

/**
 * The runtime network's decisions as pure functions over what the store read and the facts
 * gathered before: each answers the `store.mutate` decision for one write.
 */

/** Most stranded leases a refusal names one by one; the rest are counted. */
const maximumNamedStrandedLeases = 32;

/** A lease of the allocation, as the stranded-lease check reads it. */
export interface IAllocatedLeaseEntry {
  poolId: string;
  address: string;
  lease: { id: string };
  clusterId: string;
  serviceId: string;
  nodeId: string;
  releasedAt?: number;
}

/**
 * Every reason a plan would strand allocated leases: a lease (held, or withdrawing inside its
 * window) whose pool the plan no longer has, or has under another prefix.
 */
export const strandedLeaseReasons = (
  planArg: IRuntimeNetworkAddressPlan,
  entriesArg: ReadonlyArray<IAllocatedLeaseEntry>,
  nowArg: number,
  windowMsArg: number,
): string[] => {
  const prefixes = new Map(planArg.pools.map((pool) => [pool.id, pool.prefix]));
  const stranded = entriesArg.filter((entry) => (entry.releasedAt === undefined || entry.releasedAt + windowMsArg > nowArg)
    && !((): boolean => {
      const prefix = parseIpv4Prefix(prefixes.get(entry.poolId));
      return prefix !== null && isIpv4InPrefix(entry.address, prefix);
    })());
  if (stranded.length === 0) {
    return [];
  }
  const named = stranded.slice(0, maximumNamedStrandedLeases).map((entry) =>
    `request.plan would strand lease ${entry.lease.id} (${entry.address} in pool ${entry.poolId}, service ${entry.serviceId}, `
    + `node ${entry.nodeId}, cluster ${entry.clusterId}${entry.releasedAt !== undefined ? ', withdrawing' : ''})`);
  return stranded.length > maximumNamedStrandedLeases
    ? [...named, `request.plan would strand ${stranded.length - maximumNamedStrandedLeases} more leases`]
    : named;
};

export interface IAddressPlanWriteFacts {
  /** Every lease entry of the allocation (held, and released ones still in their window). */
  entries: ReadonlyArray<IAllocatedLeaseEntry>;
  /** The withdrawal window, ms. */
  windowMs: number;
  /** The administrator writing. */
  actor: string;
}

/**
 * An administrator writes the plan at exactly the next revision. The revision is the
 * compare-and-swap token: the write commits on the generation that held the previous revision, so
 * of two administrators writing the same next revision exactly one wins; the other reads again and
 * is refused `conflict` (or told `replayed` when the winner wrote exactly its plan). Writing the
 * stored plan again is kept (`replayed`). A revision that breaks the contract's rules, or that drops
 * a pool or changes its prefix under allocated leases, is refused with every reason, the contract's
 * own first (leases are never migrated by a plan write; see docs/desired-state.md).
 */
export const decideAddressPlanWrite = (
  currentArg: IRuntimeNetworkAddressPlanDocument | null,
  planArg: IRuntimeNetworkAddressPlan,
  factsArg: IAddressPlanWriteFacts,
  nowArg: number,
): TDecision<IRuntimeNetworkAddressPlanDocument> => {
  const previous = currentArg?.plan ?? null;
  if (previous !== null && canonicalizeJson(previous) === canonicalizeJson(planArg)) {
    return { kind: 'keep' };
  }
  const expectedRevision = previous === null ? 1 : previous.revision + 1;
  if (planArg.revision !== expectedRevision) {
    return {
      kind: 'refuse',
      refusal: refuseNamed('conflict', 'plan-revision-mismatch', `must be ${expectedRevision}, the revision after the stored plan`
        + (previous === null ? ' (none is stored yet)' : ` (${previous.revision})`), 'request.plan.revision'),
    };
  }
  const admission = admitRuntimeNetworkAddressPlanChange(previous, planArg);
  const stranded = strandedLeaseReasons(planArg, factsArg.entries, nowArg, factsArg.windowMs);
  if (!admission.admitted || stranded.length > 0) {
    return {
      kind: 'refuse',
      refusal: refuseFields(problemsOfSentences([
        ...(admission.admitted ? [] : admission.reasons.map((reason) => reason.replace(/^next/, 'request.plan'))),
        ...stranded,
      ], 'request')),
    };
  }
  const plan = detach(admission.plan);
  return currentArg
    ? { kind: 'write', change: { set: { plan, writtenAt: nowArg, writtenBy: factsArg.actor } } }
    : { kind: 'create', doc: { id: addressPlanDocumentId, plan, writtenAt: nowArg, writtenBy: factsArg.actor } };
};

/** Why a node that never had a projection gets none yet; what holds it back is in the causes. */
export const projectionBlockedReason = 'runtime-network-projection-blocked';

/**
 * What a projection step does to the node's stored projection: an unchanged one is kept; a
 * blocked one keeps the current projection, and a node that never had one is refused
 * `unavailable` with the reasons; a next one is written (or created for a node's first).
 */
export const decideProjectionWrite = (
  docArg: IRuntimeNetworkProjectionDocument | null,
  stepArg: TRuntimeNetworkProjectionStep,
  targetArg: { id: string; clusterId: string; nodeId: string; now: number },
): TDecision<IRuntimeNetworkProjectionDocument> => {
  if (stepArg.kind === 'unchanged') {
    return { kind: 'keep' };
  }
  if (stepArg.kind === 'blocked') {
    return docArg
      ? { kind: 'keep' }
      : { kind: 'refuse', refusal: refuse('unavailable', [projectionBlockedReason], { causes: stepArg.reasons.map((message) => ({ message })) }) };
  }
  const projection = detach(stepArg.projection);
  return docArg
    ? { kind: 'write', change: { set: { projection, computedAt: targetArg.now } } }
    : {
      kind: 'create',
      doc: { id: targetArg.id, clusterId: targetArg.clusterId, nodeId: targetArg.nodeId, projection, computedAt: targetArg.now },
    };
};

/** What a lease statement is judged against: the cluster's allocation and services as read before. */
export interface ILeaseStatementFacts {
  id: string;
  clusterId: string;
  nodeId: string;
  /** False while no address plan exists: Cloudly allocated no lease. */
  managed: boolean;
  /** Cloudly's held leases of the cluster, by lease id. */
  allocated: ReadonlyMap<string, IRuntimeNetworkWorkloadLease & { nodeId: string }>;
  /** Services of the relay's cluster (live or pending removal). */
  serviceIds: ReadonlySet<string>;
  /** address → holder description, for addresses Cloudly holds for leases. */
  addressHolders: ReadonlyMap<string, string>;
}

/**
 * A node's lease statement, recorded as its confirmation of what it applied. Cloudly allocated
 * every lease; a statement naming anything else (another address, another node's lease, a lease
 * of an unknown or foreign service, a lease never allocated or already released) is refused with
 * every reason and nothing is recorded. An empty statement always records (the node holds nothing).
 */
export const decideLeaseStatement = (
  currentArg: IRuntimeNetworkLeasesDocument | null,
  leasesArg: readonly IRuntimeNetworkWorkloadLease[],
  factsArg: ILeaseStatementFacts,
  nowArg: number,
): TDecision<IRuntimeNetworkLeasesDocument> => {
  const reasons = judgeLeaseConfirmation(leasesArg, {
    nodeId: factsArg.nodeId,
    allocated: factsArg.allocated,
    serviceIds: factsArg.serviceIds,
    addressHolders: factsArg.addressHolders,
  });
  if (!factsArg.managed) {
    reasons.unshift('request.leases cannot be confirmed: no address plan exists, so Cloudly allocated no lease');
  }
  if (reasons.length > 0 && leasesArg.length > 0) {
    return { kind: 'refuse', refusal: refuseFields(problemsOfSentences(reasons, 'request')) };
  }
  const leases = leasesArg.map((entry) => ({
    lease: { id: entry.lease.id, generation: entry.lease.generation },
    serviceId: entry.serviceId,
    address: entry.address,
  }));
  return currentArg
    ? { kind: 'write', change: { set: { leases, reportedAt: nowArg } } }
    : { kind: 'create', doc: { id: factsArg.id, clusterId: factsArg.clusterId, nodeId: factsArg.nodeId, leases, reportedAt: nowArg } };
};

/** The members of an application Cloudly keeps (a copy, whatever else the request carried). */
export const applicationOf = (applicationArg: IRuntimeNetworkProjectionApplication): IRuntimeNetworkProjectionApplication => ({
  projectionId: applicationArg.projectionId,
  nodeId: applicationArg.nodeId,
  generation: applicationArg.generation,
  digest: applicationArg.digest,
});

/**
 * A node applied exactly its current projection: recorded beside it (kept when already recorded).
 * An application of anything else, or of a node with no projection yet, is a `conflict`.
 */
export const decideProjectionApplication = (
  currentArg: IRuntimeNetworkProjectionDocument | null,
  applicationArg: IRuntimeNetworkProjectionApplication,
): TDecision<IRuntimeNetworkProjectionDocument> => {
  const projection = currentArg?.projection;
  if (!currentArg || !projection || projection.id !== applicationArg.projectionId || projection.generation !== applicationArg.generation
    || projection.digest !== applicationArg.digest) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'projection-changed', 'does not name the node\'s current projection; read it again', 'request.application') };
  }
  if (currentArg.application && canonicalizeJson(currentArg.application) === canonicalizeJson(applicationArg)) {
    return { kind: 'keep' };
  }
  return { kind: 'write', change: { set: { application: applicationArg } } };
};
