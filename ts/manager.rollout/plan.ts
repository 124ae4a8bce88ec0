import { currentOperation, runInOperation } from '../core/operationcontext.js';
import type { DocumentStore } from '../core/store.js';
import { isSameServiceExecution, snapshotServicePorts, snapshotServiceRoutes, snapshotServiceRuntimeSpec, validateServiceWritableSpec } from '../interfaces/data/service.js';
import type { IRolloutChange, IRolloutPlan, IRolloutStoredTarget, IRolloutVerdict } from '../interfaces/data/rollout.js';
import { clusterKind } from '../manager.cluster/documents.js';
import { clusterFilterOf } from '../manager.cluster/labels.js';
import { clusterLivenessKind } from '../manager.cluster/liveness.js';
import type { IJudgedVerdict } from '../manager.service/decide.js';
import { serviceKind, toPublicService, type IServiceDocument } from '../manager.service/documents.js';
import { applyRolloutChange } from './decide.js';
import { formatLabelSelector } from '../interfaces/data/clusterlabels.js';
import { selectorOf } from '../manager.cluster/labels.js';
import { writableSpecOfService } from '../interfaces/data/servicewritable.js';

/**
 * The fleet plan: per selected cluster and service, what the change makes of the spec and the
 * verdict Cloudly's own judge gives the proposed spec against the cluster's facts as stored now.
 * It runs in a dry-run context, so nothing it touches is written.
 */

export interface IRolloutPlanPorts {
  store: DocumentStore;
  /** The verdict controller's judgement of a service document (ts/manager.service/verdict.controller.ts). */
  judgeService: (docArg: IServiceDocument) => Promise<IJudgedVerdict>;
}

export interface IRolloutPlanRequest {
  selector: string;
  organizationId?: string;
  serviceName: string;
  change: IRolloutChange;
}

export interface IComputedRolloutPlan {
  plan: IRolloutPlan;
  /** The targets as a rollout keeps them (wave 0 until the waves divide them), in cluster order. */
  targets: Array<Omit<IRolloutStoredTarget, 'wave'>>;
  clustersSelected: number;
}

export const planRollout = async (portsArg: IRolloutPlanPorts, requestArg: IRolloutPlanRequest): Promise<IComputedRolloutPlan> => {
  const { store } = portsArg;
  const clusters = await store.find(clusterKind, clusterFilterOf(requestArg.selector) as never, { sort: { createdAt: 1, id: 1 } });
  const ids = clusters.map((cluster) => cluster.id);
  const [services, liveness] = ids.length === 0 ? [[], []] : await Promise.all([
    store.findIn(serviceKind, 'clusterId', ids, {
      name: requestArg.serviceName,
      ...(requestArg.organizationId === undefined ? {} : { organizationId: requestArg.organizationId }),
    } as never),
    store.findIn(clusterLivenessKind, 'id', ids),
  ]);
  const servicesOf = new Map<string, IServiceDocument[]>();
  for (const service of [...services].sort((left, right) => left.createdAt - right.createdAt || left.id.localeCompare(right.id))) {
    servicesOf.set(service.clusterId, [...(servicesOf.get(service.clusterId) ?? []), service]);
  }
  const unknownOf = new Map(liveness.filter((doc) => doc.unknown !== null).map((doc) => [doc.id, doc.unknown!]));
  const plan: IRolloutPlan = {
    selector: formatLabelSelector(selectorOf(requestArg.selector)),
    serviceName: requestArg.serviceName,
    organizationId: requestArg.organizationId ?? null,
    change: requestArg.change,
    targets: [],
    skipped: [],
  };
  const targets: IComputedRolloutPlan['targets'] = [];
  // The judge reads and never writes; in a dry-run context the store would refuse to even if it tried.
  const judge = (docArg: IServiceDocument) => runInOperation({ ...currentOperation(), dryRun: true }, () => portsArg.judgeService(docArg));
  for (const cluster of clusters) {
    const base = { clusterId: cluster.id, clusterName: cluster.name };
    const unknown = unknownOf.get(cluster.id);
    if (unknown) {
      plan.skipped.push({ ...base, reason: 'cluster-unknown', causes: [`${unknown.reason} since ${new Date(unknown.since).toISOString()}`] });
      continue;
    }
    const own = servicesOf.get(cluster.id) ?? [];
    if (own.length === 0) {
      plan.skipped.push({ ...base, reason: 'service-missing' });
      continue;
    }
    for (const doc of own) {
      if (doc.deletionRequestedAt !== undefined) {
        plan.skipped.push({ ...base, serviceId: doc.id, reason: 'service-pending-removal' });
        continue;
      }
      const service = toPublicService(doc);
      const previousSpec = writableSpecOfService(service);
      const nextSpec = applyRolloutChange(previousSpec, requestArg.change);
      const refused = validateServiceWritableSpec(nextSpec, 'change');
      if (refused.length > 0) {
        plan.skipped.push({ ...base, serviceId: doc.id, reason: 'change-refused', causes: refused });
        continue;
      }
      const runtime = snapshotServiceRuntimeSpec(nextSpec.runtime);
      const ports = snapshotServicePorts(nextSpec.ports ?? []);
      const routes = snapshotServiceRoutes(nextSpec.routes ?? []);
      const newSpecRevision = isSameServiceExecution(service, { runtime, ports, routes }) ? doc.specRevision : doc.specRevision + 1;
      const judged = await judge({ ...doc, runtime, ports, routes, specRevision: newSpecRevision });
      const predicted: IRolloutVerdict = { state: judged.state, reason: judged.reason };
      plan.targets.push({ ...base, serviceId: doc.id, generation: doc.generation, specRevision: doc.specRevision, newSpecRevision, predicted });
      targets.push({ ...base, serviceId: doc.id, generation: doc.generation, specRevision: doc.specRevision, nextSpecRevision: newSpecRevision, previousSpec, nextSpec });
    }
  }
  return { plan, targets, clustersSelected: clusters.length };
};
