import type { IClusterIngressRoute } from '../interfaces/data/clusteringress.js';
import {
  admitRuntimeNetworkProjection,
  compareRuntimeNetworkWorkloadIngressGrants,
  deriveRuntimeNetworkWorkloadGrantWithdrawals,
  deriveRuntimeNetworkWorkloadIngressWithdrawals,
  runtimeNetworkProjectionContract,
  describeRuntimeNetworkProjectionApplication,
  runtimeNetworkWorkloadIngressContract,
  sealRuntimeNetworkProjection,
  type IRuntimeNetworkEndpoint,
  type IRuntimeNetworkProjection,
  type IRuntimeNetworkProjectionApplication,
  type IRuntimeNetworkWorkloadGrant,
  type IRuntimeNetworkWorkloadIngressGrant,
  type IRuntimeNetworkWorkloadLease,
  type TRuntimeNetworkProjectionContent,
} from '../interfaces/data/runtimenetwork.js';
import {
  listRuntimeNetworkPlatformEndpointIds,
  type IRuntimeNetworkAddressPlan,
  type TRuntimeNetworkProtocol,
} from '../interfaces/data/runtimenetworkaddressplan.js';
import { canonicalizeJson, sha256Hex } from '../interfaces/private/canonicaljson.js';
import { isCanonicalId } from '../interfaces/private/dataproperties.js';
import { isIpv4InPrefix, parseIpv4Prefix } from '../interfaces/private/ipv4.js';

/**
 * The pure half of the runtime network manager: from the facts Cloudly holds about one node (the
 * address plan, the node's reported host addresses, the workload leases every node of the cluster
 * reported, the cluster's ingress designation and route table) to that node's next projection.
 */

/** Everything Cloudly knows that shapes one node's projection. */
export interface IRuntimeNetworkNodeFacts {
  clusterId: string;
  nodeId: string;
  plan: IRuntimeNetworkAddressPlan | null;
  /** Absent states nothing, and then no platform endpoint is named local. */
  hostAddresses: readonly string[] | undefined;
  /** The latest lease statement of every node of the cluster that made one. */
  leasesByNode: ReadonlyArray<{ nodeId: string; leases: readonly IRuntimeNetworkWorkloadLease[] }>;
  /** The designated cluster ingress service, or null when the cluster has no ingress designation. */
  ingressServiceId: string | null;
  /** The cluster's route table, or null when none was computed yet. */
  routes: readonly IClusterIngressRoute[] | null;
  /** The cluster's live services as the full mesh sees them: who owns each workload and what it declares. */
  workloads: readonly IRuntimeNetworkMeshWorkload[];
}

/**
 * A service as the full mesh sees it. The organization is the service's `organizationId` as stored:
 * two services are of one organization exactly when they name the same id (the organization
 * registry decides only whether that id exists, `organization-missing`); the ports are the ones it declares.
 */
export interface IRuntimeNetworkMeshWorkload {
  serviceId: string;
  organizationId: string;
  ports: ReadonlyArray<{ protocol: TRuntimeNetworkProtocol; port: number }>;
  /**
   * False when the service's network policy requests an egress other than its organization's mesh
   * (`none`, or named destinations only): its workloads open no mesh connection, though others of
   * the organization still reach its ports. Absent: true (no policy requested).
   */
  meshEgress?: boolean;
}

/** The projection id of a node: readable when it fits the id rule, otherwise a digest of the pair. */
export const runtimeNetworkProjectionIdFor = (clusterIdArg: string, nodeIdArg: string): string => {
  const readable = `${clusterIdArg}.${nodeIdArg}`;
  return isCanonicalId(readable)
    ? readable
    : `rnp-${sha256Hex(`${clusterIdArg}/${nodeIdArg}`).slice(0, 40)}`;
};

/** A route's id inside a grant authorization: its hostname when that is a valid id, else a digest of it. */
export const runtimeNetworkRouteIdFor = (hostnameArg: string): string =>
  isCanonicalId(hostnameArg) ? hostnameArg : `route-${sha256Hex(hostnameArg).slice(0, 32)}`;

/** The plan platform endpoints whose address the node's host carries, sorted; empty when none. */
export const deriveHostPlatformEndpointIds = (
  planArg: IRuntimeNetworkAddressPlan | null,
  hostAddressesArg: readonly string[] | undefined,
): string[] => {
  if (planArg === null || hostAddressesArg === undefined) {
    return [];
  }
  const carried = new Set(hostAddressesArg);
  const ids = new Set(planArg.platformEndpoints.filter((endpoint) => carried.has(endpoint.address)).map((endpoint) => endpoint.id));
  return listRuntimeNetworkPlatformEndpointIds(planArg).filter((id) => ids.has(id));
};

type TPlacedLease = IRuntimeNetworkWorkloadLease & { nodeId: string };

/**
 * The workload ingress grants a node's projection carries: from every lease of the designated
 * ingress service to every lease of each routed service, on the route's port over tcp, wherever
 * at least one of the two is placed on this node. Several hostnames routed to one service port
 * make one grant, authorized by the first hostname in table order.
 */
export const deriveWorkloadIngressGrants = (
  nodeIdArg: string,
  leasesArg: readonly TPlacedLease[],
  ingressServiceIdArg: string | null,
  routesArg: readonly IClusterIngressRoute[] | null,
): IRuntimeNetworkWorkloadIngressGrant[] => {
  if (ingressServiceIdArg === null || routesArg === null) {
    return [];
  }
  const sources = leasesArg.filter((lease) => lease.serviceId === ingressServiceIdArg);
  const grants = new Map<string, IRuntimeNetworkWorkloadIngressGrant>();
  for (const route of routesArg) {
    for (const destination of leasesArg.filter((lease) => lease.serviceId === route.serviceId)) {
      for (const source of sources) {
        if (source.lease.id === destination.lease.id
          || (source.nodeId !== nodeIdArg && destination.nodeId !== nodeIdArg)) {
          continue;
        }
        const key = `${source.lease.id}\u0000${destination.lease.id}\u0000${route.port}`;
        if (!grants.has(key)) {
          grants.set(key, {
            source: { id: source.lease.id, generation: source.lease.generation },
            destination: { id: destination.lease.id, generation: destination.lease.generation },
            protocol: 'tcp',
            port: route.port,
            authorization: { kind: 'cluster-ingress-route', routeId: runtimeNetworkRouteIdFor(route.hostname) },
          });
        }
      }
    }
  }
  return [...grants.values()].sort(compareRuntimeNetworkWorkloadIngressGrants);
};

/**
 * The full-mesh workload grants a node's projection carries: between every two leases of services of
 * one organization (two replicas of one service too), one grant per port the destination's service
 * declares, wherever at least one of the two is placed on this node: the admission rule of workload
 * ingress grants. A lease of a service the mesh does not know (deleted, or of another cluster) gets
 * nothing, and a service whose network policy keeps it out of the mesh's egress is no source.
 * Sorted in the contract's order.
 */
export const deriveWorkloadMeshGrants = (
  nodeIdArg: string,
  leasesArg: readonly TPlacedLease[],
  workloadsArg: readonly IRuntimeNetworkMeshWorkload[],
): IRuntimeNetworkWorkloadGrant[] => {
  const workloads = new Map(workloadsArg.map((workload) => [workload.serviceId, workload]));
  const grants: IRuntimeNetworkWorkloadGrant[] = [];
  for (const destination of leasesArg) {
    const target = workloads.get(destination.serviceId);
    if (!target || target.ports.length === 0) {
      continue;
    }
    for (const source of leasesArg) {
      const origin = workloads.get(source.serviceId);
      if (!origin || origin.meshEgress === false || origin.organizationId !== target.organizationId || source.lease.id === destination.lease.id
        || (source.nodeId !== nodeIdArg && destination.nodeId !== nodeIdArg)) {
        continue;
      }
      for (const port of target.ports) {
        grants.push({
          source: { id: source.lease.id, generation: source.lease.generation },
          destination: { id: destination.lease.id, generation: destination.lease.generation },
          protocol: port.protocol,
          port: port.port,
        });
      }
    }
  }
  return grants.sort(compareRuntimeNetworkWorkloadIngressGrants);
};

export type TRuntimeNetworkProjectionStep =
  | { kind: 'unchanged'; projection: IRuntimeNetworkProjection }
  | { kind: 'next'; projection: IRuntimeNetworkProjection }
  | { kind: 'blocked'; reasons: string[] };

const comparableContent = (projectionArg: TRuntimeNetworkProjectionContent | IRuntimeNetworkProjection): string => {
  const content: Record<string, unknown> = { ...projectionArg };
  delete content.generation;
  delete content.previous;
  delete content.digest;
  return canonicalizeJson(content);
};

/**
 * The node's next projection after `previousArg`, or `unchanged` when the facts give the same
 * content, or `blocked` with reasons when no valid next projection can be published yet (conflicting
 * lease statements, more than 1,024 grants, or more than 4,096 withdrawals to carry before the node
 * applied the preceding projection). The candidate is admitted by `admitRuntimeNetworkProjection`
 * before it is answered, so Cloudly never stores what a node would refuse.
 */
export const composeNextRuntimeNetworkProjection = (
  previousArg: IRuntimeNetworkProjection | null,
  applicationArg: IRuntimeNetworkProjectionApplication | null,
  factsArg: IRuntimeNetworkNodeFacts,
): TRuntimeNetworkProjectionStep => {
  // An application of an older generation says nothing about the preceding projection.
  const application = applicationArg !== null && previousArg !== null
    && canonicalizeJson(applicationArg) === canonicalizeJson(describeRuntimeNetworkProjectionApplication(previousArg))
    ? applicationArg
    : null;
  const reasons: string[] = [];
  const placed: TPlacedLease[] = [];
  const leaseOwners = new Map<string, string>();
  const addressOwners = new Map<string, string>();
  for (const statement of [...factsArg.leasesByNode].sort((a, b) => (a.nodeId < b.nodeId ? -1 : 1))) {
    for (const lease of statement.leases) {
      const leaseOwner = leaseOwners.get(lease.lease.id);
      const addressOwner = addressOwners.get(lease.address);
      if (leaseOwner !== undefined) {
        reasons.push(`lease ${lease.lease.id} is stated by node ${leaseOwner} and node ${statement.nodeId}`);
        continue;
      }
      if (addressOwner !== undefined) {
        reasons.push(`address ${lease.address} is stated for lease ${addressOwner} and lease ${lease.lease.id}`);
        continue;
      }
      leaseOwners.set(lease.lease.id, statement.nodeId);
      addressOwners.set(lease.address, lease.lease.id);
      placed.push({ ...lease, nodeId: statement.nodeId });
    }
  }
  if (reasons.length > 0) {
    return { kind: 'blocked', reasons };
  }
  const grants = deriveWorkloadIngressGrants(factsArg.nodeId, placed, factsArg.ingressServiceId, factsArg.routes);
  if (grants.length > runtimeNetworkWorkloadIngressContract.maximumGrants) {
    return { kind: 'blocked', reasons: [`the node would carry ${grants.length} workload ingress grants, more than `
      + `${runtimeNetworkWorkloadIngressContract.maximumGrants}`] };
  }
  const meshGrants = deriveWorkloadMeshGrants(factsArg.nodeId, placed, factsArg.workloads);
  if (meshGrants.length > runtimeNetworkProjectionContract.maximumWorkloadGrants) {
    return { kind: 'blocked', reasons: [`the node would carry ${meshGrants.length} full-mesh workload grants, more than `
      + `${runtimeNetworkProjectionContract.maximumWorkloadGrants}`] };
  }
  const generation = previousArg === null ? 1 : previousArg.generation + 1;
  const withdrawals = deriveRuntimeNetworkWorkloadIngressWithdrawals(previousArg, grants, generation, application);
  const meshWithdrawals = deriveRuntimeNetworkWorkloadGrantWithdrawals(previousArg, meshGrants, generation, application);
  if (withdrawals === null || meshWithdrawals === null) {
    return { kind: 'blocked', reasons: [`the node must apply projection generation ${previousArg?.generation} before `
      + `more than ${runtimeNetworkWorkloadIngressContract.maximumRetainedWithdrawals} withdrawals can be carried`] };
  }
  // Endpoints: every lease placed on this node, and every lease on another node a grant names.
  const granted = new Set([...grants, ...meshGrants].flatMap((grant) => [grant.source.id, grant.destination.id]));
  const endpoints: IRuntimeNetworkEndpoint[] = placed
    .filter((lease) => lease.nodeId === factsArg.nodeId || granted.has(lease.lease.id))
    .map((lease) => ({ lease: { id: lease.lease.id, generation: lease.lease.generation }, nodeId: lease.nodeId, address: lease.address }))
    .sort((a, b) => (a.lease.id < b.lease.id ? -1 : a.lease.id > b.lease.id ? 1 : 0));
  const hostPlatformEndpointIds = deriveHostPlatformEndpointIds(factsArg.plan, factsArg.hostAddresses);
  const content: TRuntimeNetworkProjectionContent = {
    id: runtimeNetworkProjectionIdFor(factsArg.clusterId, factsArg.nodeId),
    generation,
    previous: previousArg === null ? null : { generation: previousArg.generation, digest: previousArg.digest },
    controller: { kind: 'cloudly' },
    nodeId: factsArg.nodeId,
    endpoints,
    grants: meshGrants,
    ...(meshWithdrawals.length > 0 ? { withdrawals: meshWithdrawals } : {}),
    ...(grants.length > 0 || withdrawals.length > 0
      ? { workloadIngress: withdrawals.length > 0 ? { grants, withdrawals } : { grants } }
      : {}),
    ...(hostPlatformEndpointIds.length > 0 ? { hostPlatformEndpointIds } : {}),
  };
  if (previousArg !== null && comparableContent(previousArg) === comparableContent(content)) {
    return { kind: 'unchanged', projection: previousArg };
  }
  const next = sealRuntimeNetworkProjection(content);
  const admission = admitRuntimeNetworkProjection(previousArg, next, {
    application,
    platformEndpointIds: factsArg.plan === null ? [] : listRuntimeNetworkPlatformEndpointIds(factsArg.plan),
  });
  return admission.admitted ? { kind: 'next', projection: next } : { kind: 'blocked', reasons: admission.reasons };
};

/**
 * Every reason a node's lease statement contradicts what Cloudly knows (the address plan is the
 * authority): each address must lie in a workload pool of the plan, must not be a platform
 * endpoint's or a node host's address, and must not be held by a lease of another node of the
 * cluster; each service must be a live service of the relay's own cluster. Pure: the manager
 * gathers the facts.
 */
export const judgeRuntimeNetworkLeaseStatement = (
  leasesArg: IRuntimeNetworkWorkloadLease[],
  factsArg: {
    plan: IRuntimeNetworkAddressPlan | null;
    serviceIds: ReadonlySet<string>;
    hostAddresses: ReadonlySet<string>;
    /** address → `lease <id> on node <nodeId>` for leases of the cluster's other nodes. */
    heldElsewhere: ReadonlyMap<string, string>;
  },
  pathArg = 'request.leases',
): string[] => {
  const reasons: string[] = [];
  const pools = (factsArg.plan?.pools ?? []).map((pool) => ({ id: pool.id, prefix: parseIpv4Prefix(pool.prefix) }));
  const platformAddresses = new Set((factsArg.plan?.platformEndpoints ?? []).map((endpoint) => endpoint.address));
  leasesArg.forEach((lease, index) => {
    const path = `${pathArg}[${index}]`;
    if (!factsArg.serviceIds.has(lease.serviceId)) {
      reasons.push(`${path}.serviceId names no service of this cluster`);
    }
    if (factsArg.plan === null) {
      reasons.push(`${path}.address lies in no workload pool: the address plan does not exist yet`);
    } else if (!pools.some((pool) => pool.prefix !== null && isIpv4InPrefix(lease.address, pool.prefix))) {
      reasons.push(`${path}.address lies in no workload pool of the address plan`);
    }
    if (platformAddresses.has(lease.address)) {
      reasons.push(`${path}.address is a platform endpoint's address`);
    }
    if (factsArg.hostAddresses.has(lease.address)) {
      reasons.push(`${path}.address is a node's host address`);
    }
    const holder = factsArg.heldElsewhere.get(lease.address);
    if (holder) {
      reasons.push(`${path}.address is held by ${holder}`);
    }
  });
  return reasons;
};
