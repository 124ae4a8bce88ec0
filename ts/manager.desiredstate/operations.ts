import { refuse } from '../core/errors.js';
import { adminMutation, adminQuery, relayOrchestration, relayQuery, type IDeclaredOperation } from '../core/operations.js';
import type { IRelaySession } from '../core/relaysessions.js';
import type { DocumentStore } from '../core/store.js';
import { fieldProblem, fieldProblemReasons, type IFieldProblem, invalidField, isBoolean, isIdString, isNonNegativeInteger, isPositiveInteger, problemsOfSentences, refuseFields, type TFieldCheck } from '../core/validation.js';
import {
  observedReportLimits,
  observedServiceStates,
  type IClusterPlatformDesiredState,
  type IClusterPlatformObservedNode,
  type IClusterPlatformObservedService,
  type IClusterResolvedRouteTable,
} from '../interfaces/data/desiredstate.js';
import type { IReq_Any_Cloudly_GetClusterRouteTableResolution } from '../interfaces/requests/desiredstate.js';
import { nodeAssignmentReportShape } from '../manager.ingress/ingress.manager.js';
import { serviceKind } from '../manager.service/service.manager.js';
import {
  decideObservedPlacements,
  decideObservedRevision,
  decidePendingRemoval,
  decideServiceDeletion,
  judgeObservedReport,
} from './decide.js';
import { clusterDesiredStateKind, serviceObservedStateKind } from './documents.js';
import { ObservedReportMemo } from './observedmemo.js';
import { serviceEnvironmentNamePattern } from '../interfaces/data/serviceenvironment.js';

/**
 * The desired-state loop's methods as declared operations (ts/core/operations.ts runs them): the
 * relay's reads of the desired state and the route table, its observed-state report, the
 * administrators' route table resolution and service deletion. Decisions are in ./decide.ts; what
 * the operations need from the manager and other domains comes through `IDesiredStatePorts`.
 */

const isObservedService: TFieldCheck = (valueArg, pathArg) => {
  if (!valueArg || typeof valueArg !== 'object' || Array.isArray(valueArg)) {
    return [invalidField(pathArg, `must be an object`)];
  }
  const record = valueArg as Record<string, unknown>;
  const reasons: IFieldProblem[] = [];
  for (const key of Object.keys(record)) {
    if (!['serviceId', 'nodeId', 'specRevision', 'replicas', 'state', 'reason', 'manifest'].includes(key)) {
      reasons.push(fieldProblem(`${pathArg}.${key}`, fieldProblemReasons.unknown, `is not a field of an observed service`));
    }
  }
  reasons.push(...isIdString(record.serviceId, `${pathArg}.serviceId`));
  reasons.push(...isIdString(record.nodeId, `${pathArg}.nodeId`));
  reasons.push(...isPositiveInteger(record.specRevision, `${pathArg}.specRevision`));
  reasons.push(...isNonNegativeInteger(record.replicas, `${pathArg}.replicas`));
  if (!(observedServiceStates as readonly unknown[]).includes(record.state)) {
    reasons.push(fieldProblem(`${pathArg}.state`, fieldProblemReasons.notSupported, `must be one of ${observedServiceStates.join(', ')}`));
  }
  if (record.reason !== undefined && (typeof record.reason !== 'string' || record.reason.length > observedReportLimits.maximumReasonLength)) {
    reasons.push(fieldProblem(`${pathArg}.reason`, typeof record.reason === 'string' ? fieldProblemReasons.tooLong : fieldProblemReasons.invalid, `must be a string of at most ${observedReportLimits.maximumReasonLength} characters`));
  }
  if (record.manifest !== undefined) {
    reasons.push(...isSecretManifest(record.manifest, `${pathArg}.manifest`));
  }
  return reasons;
};

/** A secret manifest: `{ secrets: [{ name, secretVersionId }], bindingIds: [id] }`, names only, never a value. */
const isSecretManifest: TFieldCheck = (valueArg, pathArg) => {
  if (!valueArg || typeof valueArg !== 'object' || Array.isArray(valueArg)) {
    return [invalidField(pathArg, 'must be { secrets, bindingIds }')];
  }
  const record = valueArg as Record<string, unknown>;
  const reasons: IFieldProblem[] = Object.keys(record).filter((key) => key !== 'secrets' && key !== 'bindingIds')
    .map((key) => fieldProblem(`${pathArg}.${key}`, fieldProblemReasons.unknown, 'is not a field of a secret manifest'));
  const limit = observedReportLimits.maximumManifestEntries;
  if (!Array.isArray(record.secrets) || record.secrets.length > limit) {
    reasons.push(invalidField(`${pathArg}.secrets`, `must be an array of at most ${limit} entries`));
  } else {
    record.secrets.forEach((entry: unknown, index: number) => {
      const path = `${pathArg}.secrets[${index}]`;
      const item = entry && typeof entry === 'object' && !Array.isArray(entry) ? entry as Record<string, unknown> : null;
      if (!item || Object.keys(item).sort().join(',') !== 'name,secretVersionId'
        || typeof item.name !== 'string' || !serviceEnvironmentNamePattern.test(item.name)) {
        reasons.push(invalidField(path, 'must be exactly { name, secretVersionId } with a POSIX environment name'));
        return;
      }
      reasons.push(...isIdString(item.secretVersionId, `${path}.secretVersionId`));
    });
  }
  if (!Array.isArray(record.bindingIds) || record.bindingIds.length > limit) {
    reasons.push(invalidField(`${pathArg}.bindingIds`, `must be an array of at most ${limit} binding ids`));
  } else {
    record.bindingIds.forEach((bindingId: unknown, index: number) => reasons.push(...isIdString(bindingId, `${pathArg}.bindingIds[${index}]`)));
  }
  return reasons;
};

const isObservedServices: TFieldCheck = (valueArg, pathArg) => {
  if (!Array.isArray(valueArg)) {
    return [invalidField(pathArg, `must be an array`)];
  }
  if (valueArg.length > observedReportLimits.maximumServices) {
    return [fieldProblem(pathArg, fieldProblemReasons.tooMany, `must hold at most ${observedReportLimits.maximumServices} entries`)];
  }
  const reasons = valueArg.flatMap((entry, index) => isObservedService(entry, `${pathArg}[${index}]`));
  const seen = new Set<string>();
  valueArg.forEach((entry, index) => {
    const key = `${(entry as IClusterPlatformObservedService)?.serviceId}/${(entry as IClusterPlatformObservedService)?.nodeId}`;
    if (seen.has(key)) {
      reasons.push(fieldProblem(`${pathArg}[${index}]`, fieldProblemReasons.duplicate, `repeats the service and node of an earlier entry`));
    }
    seen.add(key);
  });
  return reasons;
};

/** The optional `nodes` member of an observed-state report: each entry shaped as `reportClusterNodeRuntimeAssignments` is. */
const isObservedNodes: TFieldCheck = (valueArg, pathArg) => {
  if (!Array.isArray(valueArg)) {
    return [invalidField(pathArg, `must be an array`)];
  }
  if (valueArg.length > observedReportLimits.maximumNodes) {
    return [fieldProblem(pathArg, fieldProblemReasons.tooMany, `must hold at most ${observedReportLimits.maximumNodes} entries`)];
  }
  const reasons: IFieldProblem[] = [];
  const seen = new Set<unknown>();
  valueArg.forEach((entry, index) => {
    const path = `${pathArg}[${index}]`;
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) {
      reasons.push(invalidField(path, `must be an object`));
      return;
    }
    const record = entry as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      if (!(key in nodeAssignmentReportShape)) {
        reasons.push(fieldProblem(`${path}.${key}`, fieldProblemReasons.unknown, `is not a field of an observed node`));
      }
    }
    for (const [key, check] of Object.entries(nodeAssignmentReportShape)) {
      reasons.push(...check(record[key], `${path}.${key}`));
    }
    if (seen.has(record.nodeId)) {
      reasons.push(fieldProblem(path, fieldProblemReasons.duplicate, `repeats the node of an earlier entry`));
    }
    seen.add(record.nodeId);
  });
  return reasons;
};

/** What the desired-state operations need, wired by the manager. */
export interface IDesiredStatePorts {
  store: DocumentStore;
  /** What this instance last stored of each cluster's observed-state report. */
  observedMemo: ObservedReportMemo;
  /** The cluster, or `not-found`. */
  requireCluster(clusterIdArg: string): Promise<unknown>;
  /** Refuses a relay socket that is not its cluster's elected one. */
  requireElected(sessionArg: IRelaySession): Promise<void>;
  /** The ids of the cluster's nodes. */
  listNodeIds(clusterIdArg: string): Promise<string[]>;
  /** Stores one node's runtime assignments (the ingress domain's one stored observation). */
  storeAssignments(clusterIdArg: string, entryArg: IClusterPlatformObservedNode): Promise<unknown>;
  /** True while the controller owes the cluster's desired state a run. */
  isRefreshBusy(clusterIdArg: string): boolean;
  /** The cluster's desired state as published (waits for the controller; never writes). */
  publishedDesiredState(clusterIdArg: string): Promise<IClusterPlatformDesiredState>;
  /** Waits (bounded) for the controller's run of the cluster owed on this instance. */
  settled(clusterIdArg: string): Promise<void>;
  /** The cluster's one route table as last recorded, or null when none was computed yet. */
  routeTable(clusterIdArg: string): Promise<IClusterResolvedRouteTable | null>;
  /** The route table and the routes left out of it. */
  routeTableResolution(clusterIdArg: string): Promise<IReq_Any_Cloudly_GetClusterRouteTableResolution['response']>;
  /** Removes what Cloudly derived from a service that is gone. */
  forgetService(serviceIdArg: string): Promise<void>;
  /** Queues a refresh of the cluster's desired state. */
  requestRefresh(clusterIdArg: string): void;
}

export const desiredStateOperations = (portsArg: IDesiredStatePorts): IDeclaredOperation[] => [
  relayQuery({
    method: 'getClusterPlatformDesiredState',
    access: 'relay',
    input: { required: {}, optional: { knownRevision: isNonNegativeInteger } },
    async run(request, context) {
      await portsArg.requireElected(context.session);
      if (request.knownRevision !== undefined && !portsArg.isRefreshBusy(context.clusterId)) {
        // Every input of the desired state reaches its controller (commits of services, bindings,
        // the ingress slot and the relay registration queue a run that publishes a new revision), so
        // with no run owed the published revision is current: answered without recomputing.
        const published = await portsArg.store.get(clusterDesiredStateKind, context.clusterId);
        if (published && published.revision === request.knownRevision) {
          return { unchanged: true, revision: published.revision, digest: published.digest };
        }
      }
      const state = await portsArg.publishedDesiredState(context.clusterId);
      return request.knownRevision === state.revision
        ? { unchanged: true, revision: state.revision, digest: state.digest }
        : { unchanged: false, desiredState: state };
    },
  }),

  relayQuery({
    method: 'getClusterRouteTable',
    access: 'relay',
    input: { required: {} },
    async run(_request, context) {
      await portsArg.requireElected(context.session);
      // The one route table as the desired-state controller published it (the same document and
      // revision the ingress pulls), once the run this instance owes the cluster is done.
      await portsArg.settled(context.clusterId);
      const table = await portsArg.routeTable(context.clusterId);
      return { table: table ?? { clusterId: context.clusterId, revision: 0, routes: [] } };
    },
  }),

  adminQuery({
    method: 'getClusterRouteTableResolution',
    access: 'read',
    input: { required: { clusterId: isIdString } },
    async run(request) {
      await portsArg.requireCluster(request.clusterId);
      return portsArg.routeTableResolution(request.clusterId);
    },
  }),

  relayOrchestration({
    method: 'reportClusterPlatformObservedState',
    why: 'several documents: the accepted revision, the nodes\' assignments, each service\'s observations and the removal of stopped services',
    access: 'relay',
    input: {
      required: { desiredRevision: isNonNegativeInteger, services: isObservedServices },
      optional: { nodes: isObservedNodes },
    },
    // Several documents: the cluster's accepted revision, the nodes' assignments, each service's
    // observations, and the removal of services pending removal that stopped everywhere. A report
    // the same socket made before, unchanged, against the same published desired state, is
    // answered from what this instance stored last (./observedmemo.ts): one read.
    async run(request, context) {
      await portsArg.requireElected(context.session);
      const { store, observedMemo } = portsArg;
      const { clusterId } = context;
      const digest = ObservedReportMemo.digestOf(request);
      const published = await store.get(clusterDesiredStateKind, clusterId);
      if (observedMemo.matches(clusterId, context.session.id, digest, published?.generation ?? null, Date.now())) {
        return { accepted: request.services.length, removed: [] };
      }
      const token = observedMemo.begin(clusterId);
      let remembered: Parameters<ObservedReportMemo['finish']>[2] = null;
      try {
        // The services and nodes are read only when an entry names one.
        const entries = request.services.length + (request.nodes?.length ?? 0);
        const [serviceList, nodeIdList] = await Promise.all([
          request.services.length > 0 ? store.find(serviceKind, { clusterId }) : [],
          entries > 0 ? portsArg.listNodeIds(clusterId) : [],
        ]);
        const services = new Map(serviceList.map((service) => [service.id, service]));
        const nodeIds = new Set(nodeIdList);
        const verdict = judgeObservedReport(request, published, services, nodeIds);
        if (verdict) {
          // A contradiction names the report's members: an input problem each (paths under `request`).
          throw verdict.code === 'invalid-request' ? refuseFields(problemsOfSentences(verdict.reasons, 'request')) : refuse(verdict.code, verdict.reasons);
        }
        const accepted = await store.mutate(clusterDesiredStateKind, clusterId, (currentArg) => decideObservedRevision(currentArg, request.desiredRevision), { read: published });
        // The nodes' assignment observations: the one stored observation the ingress judge reads.
        for (const entry of request.nodes ?? []) {
          await portsArg.storeAssignments(clusterId, entry);
        }
        const now = Date.now();
        const byService = new Map<string, IClusterPlatformObservedService[]>();
        for (const entry of request.services) {
          byService.set(entry.serviceId, [...(byService.get(entry.serviceId) ?? []), entry]);
        }
        const removed: string[] = [];
        for (const [serviceId, serviceEntries] of byService) {
          const { doc } = await store.mutate(serviceObservedStateKind, serviceId, (currentArg) =>
            decideObservedPlacements(currentArg, { serviceId, clusterId }, serviceEntries, now));
          // A service pending removal goes once nothing of it runs anywhere the relay reported.
          if (services.get(serviceId)!.deletionRequestedAt !== undefined && doc && doc.placements.every((placement) => placement.state === 'stopped')) {
            const { outcome } = await store.mutate(serviceKind, serviceId, decidePendingRemoval);
            if (outcome === 'removed') {
              await portsArg.forgetService(serviceId);
              removed.push(serviceId);
            }
          }
        }
        if (removed.length > 0) {
          portsArg.requestRefresh(clusterId);
        } else if (accepted.doc) {
          remembered = { sessionId: context.session.id, digest, publishedGeneration: accepted.doc.generation, storedAt: now };
        }
        return { accepted: request.services.length, removed };
      } finally {
        observedMemo.finish(clusterId, token, remembered);
      }
    },
  }),

  adminMutation({
    method: 'deleteService',
    access: 'write',
    input: { required: { serviceId: isIdString, expectedGeneration: isPositiveInteger }, optional: { force: isBoolean } },
    target: (request) => ({ kind: serviceKind, id: request.serviceId }),
    decide: (current, { request, now }) => decideServiceDeletion(current, request, now),
    answer: ({ outcome }, { request }) => ({ serviceId: request.serviceId, deleted: outcome === 'removed', pendingRemoval: outcome !== 'removed' }),
    // A removed service's observations and status go; the cluster's desired state drops it.
    async after({ outcome, previous }, { request }) {
      if (outcome === 'removed') {
        await portsArg.forgetService(request.serviceId);
      }
      portsArg.requestRefresh(previous!.clusterId);
    },
  }),
];
