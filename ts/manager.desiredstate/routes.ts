import type { IClusterIngressRoute } from '../interfaces/data/clusteringress.js';
import type { IClusterResolvedRoute, IClusterRouteTarget, IClusterUnresolvedRoute, TClusterUnresolvedRouteCause } from '../interfaces/data/desiredstate.js';
import type { IRuntimeNetworkProjection } from '../interfaces/data/runtimenetwork.js';

/**
 * The cluster's route table: the routes its live services declare, and their resolution to the
 * lease addresses the ingress forwards to. Pure; the desired-state manager gathers the facts.
 */

/** What a service document contributes to the route table. */
export interface IRoutedService {
  id: string;
  createdAt: number;
  /** Beside the runtime spec, absent on documents from before they existed. */
  ports?: Array<{ name: string; port: number; protocol: string }>;
  routes?: Array<{ hostname: string; targetPort: string; certificate?: 'acme' }>;
}

/**
 * What a service document contributes to its cluster's routes, as a controller's input view
 * (ts/core/controller.ts, `inputViews`): whether it is live, and what `deriveClusterRoutes` reads.
 */
export const routedServiceView = (docArg: Readonly<Record<string, unknown>>) => ({
  clusterId: docArg.clusterId,
  live: docArg.deletionRequestedAt === undefined,
  createdAt: docArg.createdAt,
  ports: docArg.ports,
  routes: docArg.routes,
});

/** The route table the services' declared routes give: one route per hostname, the oldest service's first. */
export const deriveClusterRoutes = (servicesArg: readonly IRoutedService[]): IClusterIngressRoute[] => {
  const routes = new Map<string, IClusterIngressRoute>();
  const ordered = [...servicesArg].sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
  for (const service of ordered) {
    for (const route of service.routes ?? []) {
      const port = (service.ports ?? []).find((candidate) => candidate.name === route.targetPort && candidate.protocol === 'tcp');
      if (port && !routes.has(route.hostname)) {
        routes.set(route.hostname, { hostname: route.hostname, serviceId: service.id, port: port.port, ...(route.certificate === 'acme' ? { certificate: 'acme' as const } : {}) });
      }
    }
  }
  return [...routes.values()].sort((a, b) => (a.hostname < b.hostname ? -1 : a.hostname > b.hostname ? 1 : 0));
};

export interface IRouteResolutionFacts {
  routes: readonly IClusterIngressRoute[];
  /** The designated ingress service, or null when the cluster has none. */
  ingressServiceId: string | null;
  /** Cloudly's held leases of the cluster. */
  leases: ReadonlyArray<{ lease: { id: string; generation: number }; serviceId: string; nodeId: string; address: string }>;
  /** Lease ids a node confirmed it applied (its lease statement). */
  confirmed: ReadonlySet<string>;
  /** The stored projections of the cluster's nodes. */
  projections: readonly IRuntimeNetworkProjection[];
}

/**
 * Each route with its targets: every held, confirmed lease of the routed service that some node's
 * projection grants the ingress (a workload ingress grant from an ingress lease to that lease, on
 * the route's port). A route without a target is left out of the table and answered in
 * `unresolved` with the first reason that holds, in the order the chain is built.
 */
export const resolveClusterRoutes = (factsArg: IRouteResolutionFacts): { routes: IClusterResolvedRoute[]; unresolved: IClusterUnresolvedRoute[] } => {
  const ingressLeases = new Set(factsArg.leases.filter((lease) => lease.serviceId === factsArg.ingressServiceId).map((lease) => lease.lease.id));
  const granted = new Set<string>();
  for (const projection of factsArg.projections) {
    for (const grant of projection.workloadIngress?.grants ?? []) {
      if (ingressLeases.has(grant.source.id) && grant.protocol === 'tcp') {
        granted.add(`${grant.destination.id}\u0000${grant.destination.generation}\u0000${grant.port}`);
      }
    }
  }
  const byService = new Map<string, Array<IRouteResolutionFacts['leases'][number]>>();
  for (const lease of factsArg.leases) {
    const list = byService.get(lease.serviceId);
    if (list) {
      list.push(lease);
    } else {
      byService.set(lease.serviceId, [lease]);
    }
  }
  const ingressConfirmed = [...ingressLeases].some((id) => factsArg.confirmed.has(id));
  const routes: IClusterResolvedRoute[] = [];
  const unresolved: IClusterUnresolvedRoute[] = [];
  for (const route of factsArg.routes) {
    const leases = byService.get(route.serviceId) ?? [];
    const targets: IClusterRouteTarget[] = leases
      .filter((lease) => granted.has(`${lease.lease.id}\u0000${lease.lease.generation}\u0000${route.port}`))
      .map((lease) => ({ lease: { id: lease.lease.id, generation: lease.lease.generation }, nodeId: lease.nodeId, address: lease.address, port: route.port }))
      .sort((a, b) => (a.lease.id < b.lease.id ? -1 : a.lease.id > b.lease.id ? 1 : 0));
    if (targets.length > 0) {
      routes.push({ ...route, targets });
      continue;
    }
    let cause: TClusterUnresolvedRouteCause;
    let reason: string;
    if (factsArg.ingressServiceId === null) {
      cause = 'no-ingress-designation';
      reason = 'the cluster has no ingress designation';
    } else if (ingressLeases.size === 0) {
      cause = 'ingress-without-lease';
      reason = `the ingress service ${factsArg.ingressServiceId} holds no workload lease`;
    } else if (!ingressConfirmed) {
      cause = 'ingress-lease-unconfirmed';
      reason = 'no node has confirmed a lease of the ingress service yet';
    } else if (leases.length === 0) {
      cause = 'service-without-lease';
      reason = `service ${route.serviceId} holds no workload lease`;
    } else if (!leases.some((lease) => factsArg.confirmed.has(lease.lease.id))) {
      cause = 'service-lease-unconfirmed';
      reason = `no node has confirmed a lease of service ${route.serviceId} yet`;
    } else {
      cause = 'ingress-grant-missing';
      reason = `no projection carries a workload ingress grant to service ${route.serviceId} on port ${route.port} yet`;
    }
    unresolved.push({ ...route, cause, reason });
  }
  return { routes, unresolved };
};
