import { refuse, refuseNamed } from '../core/errors.js';
import type { IStoredDocument, TDecision } from '../core/store.js';
import type { IClusterPlatformObservedReport, IClusterPlatformObservedService } from '../interfaces/data/desiredstate.js';
import type { IServiceDocument } from '../manager.service/service.manager.js';
import type { IClusterDesiredStateDocument, IServiceObservedStateDocument } from './documents.js';

/**
 * The desired-state loop's decisions as pure functions over what the store read: each answers the
 * `store.mutate` decision for one write, so tests call them directly.
 */

/** The cluster's desired state is published under the next revision when its digest changed. */
export const decideDesiredStatePublication = (
  currentArg: IClusterDesiredStateDocument | null,
  clusterIdArg: string,
  digestArg: string,
): TDecision<IClusterDesiredStateDocument> => {
  if (!currentArg) {
    return { kind: 'create', doc: { id: clusterIdArg, revision: 1, digest: digestArg, observedRevision: 0 } };
  }
  return currentArg.digest === digestArg
    ? { kind: 'keep' }
    : { kind: 'write', change: { set: { revision: currentArg.revision + 1, digest: digestArg } } };
};

/**
 * An administrator removes a service at the generation they read: it leaves the desired state at
 * once (`deletionRequestedAt`, kept when already requested) and its document goes when the relay
 * reports it stopped, or at once with `force`.
 */
export const decideServiceDeletion = (
  currentArg: IServiceDocument | null,
  requestArg: { serviceId: string; expectedGeneration: number; force?: boolean },
  nowArg: number,
): TDecision<IServiceDocument> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'service-not-found', `names no service: ${requestArg.serviceId}`, 'request.serviceId') };
  }
  if (currentArg.generation !== requestArg.expectedGeneration) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'generation-mismatch', "is not the service's current generation", 'request.expectedGeneration') };
  }
  if (requestArg.force) {
    return { kind: 'remove' };
  }
  return currentArg.deletionRequestedAt !== undefined ? { kind: 'keep' } : { kind: 'write', change: { set: { deletionRequestedAt: nowArg } } };
};

/** A document Cloudly derived from a service that is gone is removed. */
export const decideForget = <T extends IStoredDocument>(currentArg: T | null): TDecision<T> =>
  (currentArg ? { kind: 'remove' } : { kind: 'keep' });

/** A service pending removal goes (once nothing of it runs anywhere the relay reported). */
export const decidePendingRemoval = (currentArg: IServiceDocument | null): TDecision<IServiceDocument> =>
  (currentArg && currentArg.deletionRequestedAt !== undefined ? { kind: 'remove' } : { kind: 'keep' });

/** Refuses a report made at a desired revision older than one already accepted. */
const staleReport = () => refuse('conflict', ['desired-revision-stale']);

/**
 * Every reason an observed-state report contradicts what Cloudly knows: a revision ahead of the
 * published one is `invalid-request`, one behind the highest accepted is `conflict`
 * (`desired-revision-stale`); then every entry naming a service or node the cluster does not have,
 * or running ahead of the service's spec, is named (`invalid-request`). Null when it is acceptable.
 */
export const judgeObservedReport = (
  reportArg: IClusterPlatformObservedReport,
  publishedArg: IClusterDesiredStateDocument | null,
  servicesArg: ReadonlyMap<string, Pick<IServiceDocument, 'specRevision' | 'runtime'>>,
  nodeIdsArg: ReadonlySet<string>,
): { code: 'invalid-request' | 'conflict'; reasons: string[] } | null => {
  const currentRevision = publishedArg?.revision ?? 0;
  if (reportArg.desiredRevision > currentRevision) {
    return { code: 'invalid-request', reasons: [`request.desiredRevision is ahead of the cluster's desired-state revision ${currentRevision}`] };
  }
  if (publishedArg && reportArg.desiredRevision < publishedArg.observedRevision) {
    return { code: 'conflict', reasons: ['desired-revision-stale'] };
  }
  const reasons: string[] = [];
  reportArg.services.forEach((entry, index) => {
    const path = `request.services[${index}]`;
    const service = servicesArg.get(entry.serviceId);
    if (!service) {
      reasons.push(`${path}.serviceId names no service of this cluster`);
    } else if (entry.specRevision > service.specRevision) {
      reasons.push(`${path}.specRevision is ahead of the service's spec revision ${service.specRevision}`);
    } else if (entry.specRevision === service.specRevision && entry.replicas > service.runtime.replicas) {
      reasons.push(`${path}.replicas contradicts the spec: more than the ${service.runtime.replicas} wanted`);
    }
    if (!nodeIdsArg.has(entry.nodeId)) {
      reasons.push(`${path}.nodeId names no node of this cluster`);
    }
  });
  (reportArg.nodes ?? []).forEach((entry, index) => {
    if (!nodeIdsArg.has(entry.nodeId)) {
      reasons.push(`request.nodes[${index}].nodeId names no node of this cluster`);
    }
  });
  return reasons.length > 0 ? { code: 'invalid-request', reasons } : null;
};

/** The highest desired revision a report was accepted at moves forward only. */
export const decideObservedRevision = (
  currentArg: IClusterDesiredStateDocument | null,
  desiredRevisionArg: number,
): TDecision<IClusterDesiredStateDocument> => {
  if (!currentArg) {
    return { kind: 'keep' };
  }
  if (desiredRevisionArg < currentArg.observedRevision) {
    return { kind: 'refuse', refusal: staleReport() };
  }
  return currentArg.observedRevision === desiredRevisionArg
    ? { kind: 'keep' }
    : { kind: 'write', change: { set: { observedRevision: desiredRevisionArg } } };
};

/** A service's observations: the reported nodes' entries replace theirs, the others' stay; ordered by node. */
export const decideObservedPlacements = (
  currentArg: IServiceObservedStateDocument | null,
  targetArg: { serviceId: string; clusterId: string },
  entriesArg: readonly IClusterPlatformObservedService[],
  nowArg: number,
): TDecision<IServiceObservedStateDocument> => {
  const kept = (currentArg?.placements ?? []).filter((placement) => !entriesArg.some((entry) => entry.nodeId === placement.nodeId));
  const placements = [...kept, ...entriesArg.map((entry) => ({
    nodeId: entry.nodeId,
    specRevision: entry.specRevision,
    replicas: entry.replicas,
    state: entry.state,
    ...(entry.reason !== undefined ? { reason: entry.reason } : {}),
    reportedAt: nowArg,
    ...(entry.manifest !== undefined
      ? { manifest: { secrets: entry.manifest.secrets.map((secret) => ({ name: secret.name, secretVersionId: secret.secretVersionId })), bindingIds: [...entry.manifest.bindingIds] } }
      : {}),
  }))].sort((a, b) => (a.nodeId < b.nodeId ? -1 : 1));
  return currentArg
    ? { kind: 'write', change: { set: { placements } } }
    : { kind: 'create', doc: { id: targetArg.serviceId, clusterId: targetArg.clusterId, placements } };
};
