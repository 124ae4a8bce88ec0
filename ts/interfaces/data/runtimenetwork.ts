import { computeDomainDigestHex } from '../private/canonicaljson.js';
import {
  hasKeysWithin,
  isCanonicalId,
  isPositiveCounter,
  isRecord,
  isSha256Hex,
  type TPlainRecord,
} from '../private/dataproperties.js';
import { isPlausibleUnicastIpv4 } from '../private/ipv4.js';
import { compareCodeUnits, snapshotRuntimeNetworkPlainData } from '../private/runtimenetworkplaindata.js';
import {
  isRuntimeNetworkPort as isPort,
  isRuntimeNetworkProtocol as isProtocol,
  runtimeNetworkAddressPlanContract,
  runtimeNetworkProtocols,
  type TRuntimeNetworkProtocol,
} from './runtimenetworkaddressplan.js';

/**
 * A runtime network projection: what one node must enforce for the runtime network, as its
 * controller computed it. Each generation names its exact predecessor by digest, so a node can tell
 * the next projection from a replay, a fork or a gap.
 *
 * The upstream text references `IRuntimeNetworkProjection` without defining it. The shape here is
 * the smallest one the described behaviour needs (endpoints, full-mesh grants, workload ingress
 * grants and their withdrawals, host platform endpoints, a digest over the rest).
 * Project's own definition.
 */

/** Who computed a projection. Only `cloudly` projections may carry `workloadIngress`. Project's own definition. */
export const runtimeNetworkControllerKinds = Object.freeze(['cloudly', 'onebox'] as const);
export type TRuntimeNetworkControllerKind = typeof runtimeNetworkControllerKinds[number];

/**
 * Limits of workload ingress. `maximumGrants` (1,024) is the contract's limit on `grants`;
 * `maximumRetainedWithdrawals` (4,096) bounds the withdrawals one projection carries forward.
 */
export const runtimeNetworkWorkloadIngressContract = Object.freeze({
  maximumGrants: 1_024,
  maximumRetainedWithdrawals: 4_096,
} as const);

/**
 * The projection's own digest domain and size bounds. Project's own definition: the upstream text
 * names no domain for it, and the endpoint and full-mesh limits bound the work one projection costs.
 */
export const runtimeNetworkProjectionContract = Object.freeze({
  digestDomain: 'serve.zone/runtime-network-projection',
  maximumEndpoints: 2_048,
  maximumWorkloadGrants: 4_096,
} as const);

/** The exact reference of one workload address lease. Project's own definition. */
export interface IRuntimeNetworkLeaseReference {
  id: string;
  generation: number;
}

/**
 * The controller's readiness evidence for one endpoint's workload: what its latest observation of
 * the workload's readiness target said (`ready`), and which observation that was (`observation`, a
 * counter per lease generation that never goes back). It is evidence a node may act on (for
 * example, route only to ready endpoints), so a later projection may not carry older evidence than
 * the one before it. Project's own definition: the upstream text names readiness evidence without
 * shaping it.
 */
export interface IRuntimeNetworkEndpointReadiness {
  observation: number;
  ready: boolean;
}

/**
 * One workload endpoint: a lease, the node it is placed on and its address. The lease generation is
 * the endpoint's membership evidence (the generation of the lease that makes the workload a member
 * of the runtime network). `readiness` is optional: omitted, the projection states no readiness
 * evidence and keeps its canonical bytes. Project's own definition.
 */
export interface IRuntimeNetworkEndpoint {
  lease: IRuntimeNetworkLeaseReference;
  nodeId: string;
  address: string;
  readiness?: IRuntimeNetworkEndpointReadiness;
}

/**
 * A full-mesh workload grant: `source` may open connections to one declared listening port of
 * `destination`, two workloads of one organization. One grant per declared port of the destination,
 * so a node installs exactly what the destination declared and nothing more. Project's own definition.
 */
export interface IRuntimeNetworkWorkloadGrant {
  source: IRuntimeNetworkLeaseReference;
  destination: IRuntimeNetworkLeaseReference;
  protocol: TRuntimeNetworkProtocol;
  port: number;
}

/**
 * The explicit withdrawal of a full-mesh grant an earlier generation carried, with the generation
 * that first omitted it: the same host rules as workload ingress withdrawals. Project's own definition.
 */
export interface IRuntimeNetworkWorkloadGrantWithdrawal {
  source: IRuntimeNetworkLeaseReference;
  destination: IRuntimeNetworkLeaseReference;
  protocol: TRuntimeNetworkProtocol;
  port: number;
  generation: number;
}

/**
 * What authorizes a workload ingress grant: the cluster ingress route it serves. It is signed content
 * of the projection, not part of the grant's identity. Project's own definition.
 */
export interface IRuntimeNetworkWorkloadIngressAuthorization {
  kind: 'cluster-ingress-route';
  routeId: string;
}

/**
 * One-way permission for the cluster ingress workload (`source`) to open connections to exactly one
 * listening port of a target workload (`destination`); only replies flow back.
 */
export interface IRuntimeNetworkWorkloadIngressGrant {
  source: IRuntimeNetworkLeaseReference;
  destination: IRuntimeNetworkLeaseReference;
  protocol: TRuntimeNetworkProtocol;
  port: number;
  authorization: IRuntimeNetworkWorkloadIngressAuthorization;
}

/**
 * The explicit withdrawal of a grant an earlier generation carried: the grant's identity and the
 * generation that first omitted it. Project's own definition of the host rules' withdrawals.
 */
export interface IRuntimeNetworkWorkloadIngressWithdrawal {
  source: IRuntimeNetworkLeaseReference;
  destination: IRuntimeNetworkLeaseReference;
  protocol: TRuntimeNetworkProtocol;
  port: number;
  generation: number;
}

/** The `workloadIngress` member: present only on `cloudly` projections. */
export interface IRuntimeNetworkWorkloadIngress {
  grants: IRuntimeNetworkWorkloadIngressGrant[];
  /** Omitted when there is nothing to withdraw; never empty when present. Project's own definition. */
  withdrawals?: IRuntimeNetworkWorkloadIngressWithdrawal[];
}

/** The exact predecessor a projection builds on. Project's own definition. */
export interface IRuntimeNetworkProjectionPredecessor {
  generation: number;
  digest: string;
}

export interface IRuntimeNetworkProjectionController {
  kind: TRuntimeNetworkControllerKind;
}

export interface IRuntimeNetworkProjection {
  id: string;
  /** 1 for the first projection of `id`, then exactly one more per change. */
  generation: number;
  /** null exactly at generation 1. */
  previous: IRuntimeNetworkProjectionPredecessor | null;
  controller: IRuntimeNetworkProjectionController;
  nodeId: string;
  /** Sorted by `lease.id`, unique by lease id and by address. */
  endpoints: IRuntimeNetworkEndpoint[];
  /** Sorted by `[source.id, destination.id, protocol, port]`, unique. */
  grants: IRuntimeNetworkWorkloadGrant[];
  /**
   * Withdrawals of full-mesh grants, ordered like workload ingress withdrawals. Omitted when there is
   * nothing to withdraw (never empty when present), so a projection without it keeps its canonical
   * bytes. Project's own definition.
   */
  withdrawals?: IRuntimeNetworkWorkloadGrantWithdrawal[];
  workloadIngress?: IRuntimeNetworkWorkloadIngress;
  /** Platform endpoint ids whose address this node's host carries: sorted, unique, never empty. */
  hostPlatformEndpointIds?: string[];
  /** Domain digest over every other member. */
  digest: string;
}

/** A projection before its digest is computed. */
export type TRuntimeNetworkProjectionContent = Omit<IRuntimeNetworkProjection, 'digest'>;

/** A detached grant as a host installs it into its packet filter. */
export interface IRuntimeNetworkWorkloadIngressPacketGrant {
  source: IRuntimeNetworkLeaseReference;
  destination: {
    lease: IRuntimeNetworkLeaseReference;
    protocol: TRuntimeNetworkProtocol;
    port: number;
  };
}

/**
 * A node's statement that it applied exactly one projection (the "joined application": it names the
 * projection by id, node, generation and digest together). Until the application of the preceding
 * projection is supplied, its withdrawals must carry forward. Project's own definition.
 */
export interface IRuntimeNetworkProjectionApplication {
  projectionId: string;
  nodeId: string;
  generation: number;
  digest: string;
}

/** Options shared by the projection judges. */
export interface IRuntimeNetworkProjectionJudgingOptions {
  /**
   * The ids of the authority's current platform endpoints. When given, every
   * `hostPlatformEndpointIds` entry must be one of them; without it only the list's form is judged.
   */
  platformEndpointIds?: readonly string[];
}

const projectionRequiredKeys = ['id', 'generation', 'previous', 'controller', 'nodeId', 'endpoints', 'grants', 'digest'] as const;
const projectionOptionalKeys = ['withdrawals', 'workloadIngress', 'hostPlatformEndpointIds'] as const;

const isLeaseReference = (valueArg: unknown): valueArg is IRuntimeNetworkLeaseReference =>
  isRecord(valueArg) && hasKeysWithin(valueArg, ['id', 'generation'], [])
  && isCanonicalId(valueArg.id) && isPositiveCounter(valueArg.generation);

const leaseKey = (leaseArg: IRuntimeNetworkLeaseReference): string => `${leaseArg.id}\u0000${leaseArg.generation}`;

/** Grant identity: the authorization is content, not identity. */
const ingressIdentityKey = (entryArg: {
  source: IRuntimeNetworkLeaseReference;
  destination: IRuntimeNetworkLeaseReference;
  protocol: string;
  port: number;
}): string => `${leaseKey(entryArg.source)}\u0001${leaseKey(entryArg.destination)}\u0001${entryArg.protocol}\u0001${entryArg.port}`;

/**
 * The contract's order of workload ingress grants: `[source.id, destination.id, protocol, port]`,
 * ids and protocol by UTF-16 code units, port numerically.
 */
export const compareRuntimeNetworkWorkloadIngressGrants = (
  leftArg: Pick<IRuntimeNetworkWorkloadIngressGrant, 'source' | 'destination' | 'protocol' | 'port'>,
  rightArg: Pick<IRuntimeNetworkWorkloadIngressGrant, 'source' | 'destination' | 'protocol' | 'port'>,
): number => compareCodeUnits(leftArg.source.id, rightArg.source.id)
  || compareCodeUnits(leftArg.destination.id, rightArg.destination.id)
  || compareCodeUnits(leftArg.protocol, rightArg.protocol)
  || leftArg.port - rightArg.port;

/**
 * Withdrawals are ordered like grants, then by the lease generations, because a lease id may have
 * been granted and withdrawn under more than one generation. Project's own definition.
 */
export const compareRuntimeNetworkWorkloadIngressWithdrawals = (
  leftArg: Pick<IRuntimeNetworkWorkloadIngressWithdrawal, 'source' | 'destination' | 'protocol' | 'port'>,
  rightArg: Pick<IRuntimeNetworkWorkloadIngressWithdrawal, 'source' | 'destination' | 'protocol' | 'port'>,
): number => compareRuntimeNetworkWorkloadIngressGrants(leftArg, rightArg)
  || leftArg.source.generation - rightArg.source.generation
  || leftArg.destination.generation - rightArg.destination.generation;

/**
 * The projection's digest: the domain digest of its canonical JSON without `digest`. Optional
 * members that are absent are simply not in the JSON, so a projection without `workloadIngress` and
 * `hostPlatformEndpointIds` has exactly the canonical bytes and digest it had before they existed.
 */
export const computeRuntimeNetworkProjectionDigest = (
  projectionArg: TRuntimeNetworkProjectionContent | IRuntimeNetworkProjection,
): string => {
  const content: Record<string, unknown> = { ...projectionArg };
  delete content.digest;
  return computeDomainDigestHex(runtimeNetworkProjectionContract.digestDomain, content);
};

/** The content with its digest attached, detached from the argument. */
export const sealRuntimeNetworkProjection = (
  contentArg: TRuntimeNetworkProjectionContent,
): IRuntimeNetworkProjection => {
  const snapshot = snapshotRuntimeNetworkPlainData(contentArg, 'projection');
  if (!snapshot.ok) {
    throw new Error(snapshot.reason);
  }
  const content = snapshot.value as unknown as TRuntimeNetworkProjectionContent;
  return Object.freeze({ ...content, digest: computeRuntimeNetworkProjectionDigest(content) });
};

/**
 * Every reason the value is not a valid projection, in the order of its members. It reads a
 * detached plain copy, so it never throws and never invokes a getter.
 */
export const validateRuntimeNetworkProjection = (
  valueArg: unknown,
  optionsArg: IRuntimeNetworkProjectionJudgingOptions & { path?: string } = {},
): string[] => {
  const path = optionsArg.path ?? 'projection';
  const snapshot = snapshotRuntimeNetworkPlainData(valueArg, path);
  if (!snapshot.ok) {
    return [snapshot.reason];
  }
  return judgeProjectionData(snapshot.value, path, optionsArg);
};

const judgeProjectionData = (
  valueArg: unknown,
  pathArg: string,
  optionsArg: IRuntimeNetworkProjectionJudgingOptions,
): string[] => {
  if (!isRecord(valueArg) || !hasKeysWithin(valueArg, projectionRequiredKeys, projectionOptionalKeys)) {
    return [`${pathArg} must be an object with the keys ${projectionRequiredKeys.join(', ')} `
      + `and optionally ${projectionOptionalKeys.join(', ')}`];
  }
  const projection = valueArg;
  const reasons: string[] = [];
  if (!isCanonicalId(projection.id)) {
    reasons.push(`${pathArg}.id must be a canonical id`);
  }
  const generationValid = isPositiveCounter(projection.generation);
  if (!generationValid) {
    reasons.push(`${pathArg}.generation must be a positive integer`);
  }
  reasons.push(...judgePredecessor(projection, pathArg));
  const controllerKind = judgeController(projection.controller, `${pathArg}.controller`, reasons);
  if (!isCanonicalId(projection.nodeId)) {
    reasons.push(`${pathArg}.nodeId must be a canonical id`);
  }
  const endpoints = judgeEndpoints(projection.endpoints, `${pathArg}.endpoints`, reasons);
  // A node id that is itself refused places nothing: the grants are not judged against it.
  const nodeId = isCanonicalId(projection.nodeId) ? projection.nodeId as string : null;
  const meshGrants = judgeWorkloadGrants(projection.grants, `${pathArg}.grants`, { endpoints, nodeId }, reasons);
  if (Object.hasOwn(projection, 'withdrawals')) {
    judgeWithdrawalList(projection.withdrawals, `${pathArg}.withdrawals`, {
      current: meshGrants,
      generation: generationValid ? projection.generation as number : null,
    }, reasons);
  }
  if (Object.hasOwn(projection, 'workloadIngress')) {
    if (controllerKind !== null && controllerKind !== 'cloudly') {
      reasons.push(`${pathArg}.workloadIngress is allowed only on cloudly projections, not on ${controllerKind}`);
    }
    judgeWorkloadIngress(projection.workloadIngress, `${pathArg}.workloadIngress`, {
      endpoints,
      nodeId,
      generation: generationValid ? projection.generation as number : null,
    }, reasons);
  }
  if (Object.hasOwn(projection, 'hostPlatformEndpointIds')) {
    judgeHostPlatformEndpointIds(projection.hostPlatformEndpointIds,
      `${pathArg}.hostPlatformEndpointIds`, optionsArg.platformEndpointIds, reasons);
  }
  if (!isSha256Hex(projection.digest)) {
    reasons.push(`${pathArg}.digest must be a lowercase sha256 hex digest`);
  } else if (reasons.length === 0
    && projection.digest !== computeRuntimeNetworkProjectionDigest(projection as unknown as IRuntimeNetworkProjection)) {
    reasons.push(`${pathArg}.digest must be the digest of the projection's content`);
  }
  return reasons;
};

const judgePredecessor = (projectionArg: TPlainRecord, pathArg: string): string[] => {
  const previous = projectionArg.previous;
  const generation = projectionArg.generation;
  if (previous === null) {
    return generation === 1 || !isPositiveCounter(generation)
      ? []
      : [`${pathArg}.previous must name the predecessor of generation ${generation}`];
  }
  if (!isRecord(previous) || !hasKeysWithin(previous, ['generation', 'digest'], [])) {
    return [`${pathArg}.previous must be null or an object with exactly the keys generation, digest`];
  }
  const reasons: string[] = [];
  if (generation === 1) {
    reasons.push(`${pathArg}.previous must be null at generation 1`);
  } else if (isPositiveCounter(generation) && previous.generation !== generation - 1) {
    reasons.push(`${pathArg}.previous.generation must be ${generation - 1}`);
  }
  if (!isSha256Hex(previous.digest)) {
    reasons.push(`${pathArg}.previous.digest must be a lowercase sha256 hex digest`);
  }
  return reasons;
};

const judgeController = (valueArg: unknown, pathArg: string, reasonsArg: string[]): TRuntimeNetworkControllerKind | null => {
  if (!isRecord(valueArg) || !hasKeysWithin(valueArg, ['kind'], [])) {
    reasonsArg.push(`${pathArg} must be an object with exactly the key kind`);
    return null;
  }
  if (!(runtimeNetworkControllerKinds as readonly unknown[]).includes(valueArg.kind)) {
    reasonsArg.push(`${pathArg}.kind must be one of ${runtimeNetworkControllerKinds.join(', ')}`);
    return null;
  }
  return valueArg.kind as TRuntimeNetworkControllerKind;
};

/** Endpoint facts the grant rules need: exact lease reference → node. */
type TEndpointIndex = Map<string, { nodeId: string }>;

const judgeEndpoints = (valueArg: unknown, pathArg: string, reasonsArg: string[]): TEndpointIndex => {
  const index: TEndpointIndex = new Map();
  if (!Array.isArray(valueArg) || valueArg.length > runtimeNetworkProjectionContract.maximumEndpoints) {
    reasonsArg.push(`${pathArg} must be a list of at most ${runtimeNetworkProjectionContract.maximumEndpoints} endpoints`);
    return index;
  }
  const addresses = new Set<string>();
  let previousId: string | null = null;
  valueArg.forEach((entry: unknown, position) => {
    const path = `${pathArg}[${position}]`;
    if (!isRecord(entry) || !hasKeysWithin(entry, ['lease', 'nodeId', 'address'], ['readiness'])) {
      reasonsArg.push(`${path} must be an object with exactly the keys lease, nodeId, address and optionally readiness`);
      return;
    }
    if (Object.hasOwn(entry, 'readiness')) {
      const readiness = entry.readiness;
      if (!isRecord(readiness) || !hasKeysWithin(readiness, ['observation', 'ready'], [])
        || !isPositiveCounter(readiness.observation) || typeof readiness.ready !== 'boolean') {
        reasonsArg.push(`${path}.readiness must be { observation, ready }: a positive integer and a boolean`);
      }
    }
    const leaseValid = isLeaseReference(entry.lease);
    if (!leaseValid) {
      reasonsArg.push(`${path}.lease must be a lease reference { id, generation }`);
    }
    const nodeValid = isCanonicalId(entry.nodeId);
    if (!nodeValid) {
      reasonsArg.push(`${path}.nodeId must be a canonical id`);
    }
    if (!isPlausibleUnicastIpv4(entry.address)) {
      reasonsArg.push(`${path}.address must be a unicast IPv4 address`);
    } else if (addresses.has(entry.address)) {
      reasonsArg.push(`${path}.address must differ from every other endpoint's address`);
    } else {
      addresses.add(entry.address);
    }
    if (leaseValid) {
      const lease = entry.lease as IRuntimeNetworkLeaseReference;
      if (previousId !== null && compareCodeUnits(previousId, lease.id) >= 0) {
        reasonsArg.push(previousId === lease.id
          ? `${path}.lease.id must name each lease once`
          : `${path} must follow the endpoint before it in lease id order`);
      }
      previousId = lease.id;
      if (nodeValid) {
        index.set(leaseKey(lease), { nodeId: entry.nodeId as string });
      }
    }
  });
  return index;
};

/** Where a grant list is judged: the projection's endpoints and its node. */
interface IGrantListContext {
  endpoints: TEndpointIndex;
  nodeId: string | null;
}

/**
 * Judges the full-mesh grants under the rules of workload ingress grants (except the authorization,
 * which they do not carry); answers the identity keys of the valid ones, for the withdrawals.
 */
const judgeWorkloadGrants = (
  valueArg: unknown,
  pathArg: string,
  contextArg: IGrantListContext,
  reasonsArg: string[],
): Set<string> => {
  const current = new Set<string>();
  if (!Array.isArray(valueArg) || valueArg.length > runtimeNetworkProjectionContract.maximumWorkloadGrants) {
    reasonsArg.push(`${pathArg} must be a list of at most ${runtimeNetworkProjectionContract.maximumWorkloadGrants} grants`);
    return current;
  }
  let previous: IRuntimeNetworkWorkloadGrant | null = null;
  valueArg.forEach((entry: unknown, position) => {
    const path = `${pathArg}[${position}]`;
    const grant = judgeIngressEntry(entry, path, null, contextArg.endpoints, reasonsArg);
    if (grant === null) {
      return;
    }
    judgePlacedOnNode(grant, path, contextArg, reasonsArg);
    if (previous !== null) {
      const order = compareRuntimeNetworkWorkloadIngressGrants(previous, grant);
      if (order === 0) {
        reasonsArg.push(`${path} repeats the grant before it`);
      } else if (order > 0) {
        reasonsArg.push(`${path} must follow the grant before it in [source.id, destination.id, protocol, port] order`);
      }
    }
    previous = grant;
    current.add(ingressIdentityKey(grant));
  });
  return current;
};

/** A grant concerns the projection's node: its source or its destination is placed there. */
const judgePlacedOnNode = (
  grantArg: { source: IRuntimeNetworkLeaseReference; destination: IRuntimeNetworkLeaseReference },
  pathArg: string,
  contextArg: IGrantListContext,
  reasonsArg: string[],
): void => {
  const sourceNode = contextArg.endpoints.get(leaseKey(grantArg.source))?.nodeId;
  const destinationNode = contextArg.endpoints.get(leaseKey(grantArg.destination))?.nodeId;
  if (contextArg.nodeId !== null && sourceNode !== undefined && destinationNode !== undefined
    && sourceNode !== contextArg.nodeId && destinationNode !== contextArg.nodeId) {
    reasonsArg.push(`${pathArg} must have its source or its destination placed on the projection's node`);
  }
};

/** Judges `source` and `destination` as two different endpoints of the projection. */
const judgeLeasePair = (
  entryArg: TPlainRecord,
  pathArg: string,
  endpointsArg: TEndpointIndex | null,
  reasonsArg: string[],
): { source: IRuntimeNetworkLeaseReference; destination: IRuntimeNetworkLeaseReference } | null => {
  let valid = true;
  for (const side of ['source', 'destination'] as const) {
    const lease = entryArg[side];
    if (!isLeaseReference(lease)) {
      reasonsArg.push(`${pathArg}.${side} must be a lease reference { id, generation }`);
      valid = false;
    } else if (endpointsArg !== null && !endpointsArg.has(leaseKey(lease))) {
      reasonsArg.push(`${pathArg}.${side} must be exactly the lease of one of the projection's endpoints`);
    }
  }
  if (!valid) {
    return null;
  }
  const source = entryArg.source as IRuntimeNetworkLeaseReference;
  const destination = entryArg.destination as IRuntimeNetworkLeaseReference;
  if (source.id === destination.id) {
    reasonsArg.push(`${pathArg}.destination must be a different lease than ${pathArg}.source`);
  }
  return { source, destination };
};

const judgeWorkloadIngress = (
  valueArg: unknown,
  pathArg: string,
  contextArg: { endpoints: TEndpointIndex; nodeId: string | null; generation: number | null },
  reasonsArg: string[],
): void => {
  if (!isRecord(valueArg) || !hasKeysWithin(valueArg, ['grants'], ['withdrawals'])) {
    reasonsArg.push(`${pathArg} must be an object with the key grants and optionally withdrawals`);
    return;
  }
  const current = new Set<string>();
  const grants = valueArg.grants;
  if (!Array.isArray(grants) || grants.length > runtimeNetworkWorkloadIngressContract.maximumGrants) {
    reasonsArg.push(`${pathArg}.grants must be a list of at most ${runtimeNetworkWorkloadIngressContract.maximumGrants} grants`);
  } else {
    let previous: IRuntimeNetworkWorkloadIngressGrant | null = null;
    grants.forEach((entry: unknown, position) => {
      const path = `${pathArg}.grants[${position}]`;
      const grant = judgeIngressEntry(entry, path, 'authorization', contextArg.endpoints, reasonsArg);
      if (grant === null) {
        return;
      }
      judgePlacedOnNode(grant, path, contextArg, reasonsArg);
      if (previous !== null) {
        const order = compareRuntimeNetworkWorkloadIngressGrants(previous, grant);
        if (order === 0) {
          reasonsArg.push(`${path} repeats the grant before it`);
        } else if (order > 0) {
          reasonsArg.push(`${path} must follow the grant before it in [source.id, destination.id, protocol, port] order`);
        }
      }
      previous = grant as IRuntimeNetworkWorkloadIngressGrant;
      current.add(ingressIdentityKey(grant));
    });
  }
  if (Object.hasOwn(valueArg, 'withdrawals')) {
    judgeWithdrawalList(valueArg.withdrawals, `${pathArg}.withdrawals`, { current, generation: contextArg.generation }, reasonsArg);
  }
};

/**
 * Judges a list of withdrawals (of workload ingress or of full-mesh grants): 1 to 4,096, each
 * stamped with a generation from 2 to the projection's own, none denying a grant still carried
 * (`currentArg` holds the carried grants' identity keys), unique and ordered.
 */
const judgeWithdrawalList = (
  valueArg: unknown,
  pathArg: string,
  contextArg: { current: ReadonlySet<string>; generation: number | null },
  reasonsArg: string[],
): void => {
  const withdrawals = valueArg;
  if (!Array.isArray(withdrawals) || withdrawals.length === 0
    || withdrawals.length > runtimeNetworkWorkloadIngressContract.maximumRetainedWithdrawals) {
    reasonsArg.push(`${pathArg} must be omitted or a list of 1 to `
      + `${runtimeNetworkWorkloadIngressContract.maximumRetainedWithdrawals} withdrawals`);
    return;
  }
  let previous: IRuntimeNetworkWorkloadIngressWithdrawal | null = null;
  withdrawals.forEach((entry: unknown, position) => {
    const path = `${pathArg}[${position}]`;
    const withdrawal = judgeIngressEntry(entry, path, 'generation', null, reasonsArg);
    if (withdrawal === null) {
      return;
    }
    const generation = (entry as TPlainRecord).generation;
    if (!isPositiveCounter(generation) || generation < 2
      || (contextArg.generation !== null && generation > contextArg.generation)) {
      reasonsArg.push(`${path}.generation must name a generation from 2 to the projection's own`);
    }
    if (contextArg.current.has(ingressIdentityKey(withdrawal))) {
      reasonsArg.push(`${path} denies a grant the projection still carries`);
    }
    if (previous !== null) {
      const order = compareRuntimeNetworkWorkloadIngressWithdrawals(previous, withdrawal);
      if (order === 0) {
        reasonsArg.push(`${path} repeats the withdrawal before it`);
      } else if (order > 0) {
        reasonsArg.push(`${path} must follow the withdrawal before it in `
          + '[source.id, destination.id, protocol, port, source.generation, destination.generation] order');
      }
    }
    previous = withdrawal as IRuntimeNetworkWorkloadIngressWithdrawal;
  });
};

/**
 * Judges the members every grant and withdrawal shares; `extraKeyArg` is the one a workload ingress
 * grant (`authorization`) or a withdrawal (`generation`) adds, null for a full-mesh grant. Endpoint
 * membership is judged only for grants.
 */
const judgeIngressEntry = (
  entryArg: unknown,
  pathArg: string,
  extraKeyArg: 'authorization' | 'generation' | null,
  endpointsArg: TEndpointIndex | null,
  reasonsArg: string[],
): { source: IRuntimeNetworkLeaseReference; destination: IRuntimeNetworkLeaseReference; protocol: TRuntimeNetworkProtocol; port: number } | null => {
  const keys = ['source', 'destination', 'protocol', 'port', ...(extraKeyArg === null ? [] : [extraKeyArg])];
  if (!isRecord(entryArg) || !hasKeysWithin(entryArg, keys, [])) {
    reasonsArg.push(`${pathArg} must be an object with exactly the keys ${keys.join(', ')}`);
    return null;
  }
  const pair = judgeLeasePair(entryArg, pathArg, endpointsArg, reasonsArg);
  let valid = pair !== null;
  if (!isProtocol(entryArg.protocol)) {
    reasonsArg.push(`${pathArg}.protocol must be one of ${runtimeNetworkProtocols.join(', ')}`);
    valid = false;
  }
  if (!isPort(entryArg.port)) {
    reasonsArg.push(`${pathArg}.port must be the destination's listening port, an integer from `
      + `${runtimeNetworkAddressPlanContract.minimumPort} to ${runtimeNetworkAddressPlanContract.maximumPort}`);
    valid = false;
  }
  if (extraKeyArg === 'authorization') {
    const authorization = entryArg.authorization;
    if (!isRecord(authorization) || !hasKeysWithin(authorization, ['kind', 'routeId'], [])
      || authorization.kind !== 'cluster-ingress-route' || !isCanonicalId(authorization.routeId)) {
      reasonsArg.push(`${pathArg}.authorization must be { kind: 'cluster-ingress-route', routeId } with a canonical route id`);
    }
  }
  return valid && pair !== null
    ? { ...pair, protocol: entryArg.protocol as TRuntimeNetworkProtocol, port: entryArg.port as number }
    : null;
};

const judgeHostPlatformEndpointIds = (
  valueArg: unknown,
  pathArg: string,
  currentArg: readonly string[] | undefined,
  reasonsArg: string[],
): void => {
  if (!Array.isArray(valueArg) || valueArg.length === 0
    || valueArg.length > runtimeNetworkAddressPlanContract.maximumPlatformEndpoints) {
    reasonsArg.push(`${pathArg} must be omitted or a list of 1 to `
      + `${runtimeNetworkAddressPlanContract.maximumPlatformEndpoints} platform endpoint ids`);
    return;
  }
  const current = currentArg === undefined ? null : new Set(currentArg);
  let previous: string | null = null;
  valueArg.forEach((entry: unknown, position) => {
    const path = `${pathArg}[${position}]`;
    if (!isCanonicalId(entry)) {
      reasonsArg.push(`${path} must be a canonical id`);
      return;
    }
    if (previous !== null && compareCodeUnits(previous, entry) >= 0) {
      reasonsArg.push(previous === entry ? `${path} repeats the id before it` : `${path} must follow the id before it in sorted order`);
    }
    previous = entry;
    if (current !== null && !current.has(entry)) {
      reasonsArg.push(`${path} must be a current platform endpoint of the authority`);
    }
  });
};

/** One detached read of a projection: its frozen copy, or every reason it is refused. */
const readProjection = (
  valueArg: unknown,
  pathArg: string,
  optionsArg: IRuntimeNetworkProjectionJudgingOptions,
): { reasons: string[] } | { projection: IRuntimeNetworkProjection } => {
  const snapshot = snapshotRuntimeNetworkPlainData(valueArg, pathArg);
  if (!snapshot.ok) {
    return { reasons: [snapshot.reason] };
  }
  const reasons = judgeProjectionData(snapshot.value, pathArg, optionsArg);
  return reasons.length > 0 ? { reasons } : { projection: snapshot.value as unknown as IRuntimeNetworkProjection };
};

/** A detached, frozen copy of a valid projection, or null when the value is not one. */
export const snapshotRuntimeNetworkProjection = (
  valueArg: unknown,
  optionsArg: IRuntimeNetworkProjectionJudgingOptions = {},
): IRuntimeNetworkProjection | null => {
  const read = readProjection(valueArg, 'projection', optionsArg);
  return 'projection' in read ? read.projection : null;
};

/** Every reason the value is not a valid projection application. */
export const validateRuntimeNetworkProjectionApplication = (valueArg: unknown, pathArg = 'application'): string[] => {
  const snapshot = snapshotRuntimeNetworkPlainData(valueArg, pathArg);
  if (!snapshot.ok) {
    return [snapshot.reason];
  }
  const value = snapshot.value;
  if (!isRecord(value) || !hasKeysWithin(value, ['projectionId', 'nodeId', 'generation', 'digest'], [])) {
    return [`${pathArg} must be an object with exactly the keys projectionId, nodeId, generation, digest`];
  }
  const reasons: string[] = [];
  if (!isCanonicalId(value.projectionId)) {
    reasons.push(`${pathArg}.projectionId must be a canonical id`);
  }
  if (!isCanonicalId(value.nodeId)) {
    reasons.push(`${pathArg}.nodeId must be a canonical id`);
  }
  if (!isPositiveCounter(value.generation)) {
    reasons.push(`${pathArg}.generation must be a positive integer`);
  }
  if (!isSha256Hex(value.digest)) {
    reasons.push(`${pathArg}.digest must be a lowercase sha256 hex digest`);
  }
  return reasons;
};

/** The application that joins exactly this projection. */
export const describeRuntimeNetworkProjectionApplication = (
  projectionArg: IRuntimeNetworkProjection,
): IRuntimeNetworkProjectionApplication => Object.freeze({
  projectionId: projectionArg.id,
  nodeId: projectionArg.nodeId,
  generation: projectionArg.generation,
  digest: projectionArg.digest,
});

const isJoinedApplication = (
  applicationArg: IRuntimeNetworkProjectionApplication,
  projectionArg: IRuntimeNetworkProjection,
): boolean => applicationArg.projectionId === projectionArg.id && applicationArg.nodeId === projectionArg.nodeId
  && applicationArg.generation === projectionArg.generation && applicationArg.digest === projectionArg.digest;

/** Options for judging a projection against the one before it. */
export interface IRuntimeNetworkProjectionTransitionOptions extends IRuntimeNetworkProjectionJudgingOptions {
  /**
   * The node's application of the preceding projection. Until it is supplied, every withdrawal the
   * preceding projection carried must carry forward into the next one.
   */
  application?: IRuntimeNetworkProjectionApplication | null;
}

const ingressGrantsOf = (projectionArg: IRuntimeNetworkProjection): readonly IRuntimeNetworkWorkloadIngressGrant[] =>
  projectionArg.workloadIngress?.grants ?? [];

const ingressWithdrawalsOf = (projectionArg: IRuntimeNetworkProjection): readonly IRuntimeNetworkWorkloadIngressWithdrawal[] =>
  projectionArg.workloadIngress?.withdrawals ?? [];

/** The grant identity every grant and withdrawal shares. */
type TGrantIdentity = Pick<IRuntimeNetworkWorkloadIngressGrant, 'source' | 'destination' | 'protocol' | 'port'>;

/**
 * One list of grants with its withdrawals: workload ingress (`workloadIngress.grants` /
 * `.withdrawals`) or the full mesh (`grants` / `withdrawals`). Both follow the same host rules.
 */
interface IGrantLane {
  /** How the withdrawals are named in reasons, e.g. `next.workloadIngress.withdrawals`. */
  withdrawalsPath: string;
  grantsOf(projectionArg: IRuntimeNetworkProjection): readonly TGrantIdentity[];
  withdrawalsOf(projectionArg: IRuntimeNetworkProjection): readonly IRuntimeNetworkWorkloadIngressWithdrawal[];
}

const ingressLane: IGrantLane = {
  withdrawalsPath: 'next.workloadIngress.withdrawals',
  grantsOf: ingressGrantsOf,
  withdrawalsOf: ingressWithdrawalsOf,
};

const meshLane: IGrantLane = {
  withdrawalsPath: 'next.withdrawals',
  grantsOf: (projectionArg) => projectionArg.grants,
  withdrawalsOf: (projectionArg) => projectionArg.withdrawals ?? [],
};

const withdrawalKey = (entryArg: IRuntimeNetworkWorkloadIngressWithdrawal): string =>
  `${ingressIdentityKey(entryArg)}\u0001${entryArg.generation}`;

/**
 * The host rules for withdrawals (of workload ingress or of full-mesh grants, `laneArg`) between two
 * valid projections where `next` directly follows `previous`:
 * - a grant `previous` carried and `next` omits needs its exact withdrawal in `next`, stamped with
 *   `next`'s generation;
 * - a withdrawal stamped with `next`'s generation must withdraw such an omitted grant, and an older
 *   one must be exactly a withdrawal `previous` carried; anything else is an unknown denial;
 * - until the exact joined application of `previous` is supplied, every withdrawal of `previous`
 *   whose grant `next` does not carry again must carry forward (at most 4,096 in all).
 */
const judgeWithdrawalTransition = (
  laneArg: IGrantLane,
  previousArg: IRuntimeNetworkProjection,
  nextArg: IRuntimeNetworkProjection,
  applicationArg: IRuntimeNetworkProjectionApplication | null,
): string[] => {
  const reasons: string[] = [];
  const nextGrantKeys = new Set(laneArg.grantsOf(nextArg).map(ingressIdentityKey));
  const omitted = new Map<string, TGrantIdentity>();
  for (const grant of laneArg.grantsOf(previousArg)) {
    const key = ingressIdentityKey(grant);
    if (!nextGrantKeys.has(key)) {
      omitted.set(key, grant);
    }
  }
  const previousWithdrawals = new Set(laneArg.withdrawalsOf(previousArg).map(withdrawalKey));
  const nextWithdrawals = new Set<string>();
  laneArg.withdrawalsOf(nextArg).forEach((withdrawal, position) => {
    const key = withdrawalKey(withdrawal);
    nextWithdrawals.add(key);
    const known = withdrawal.generation === nextArg.generation
      ? omitted.has(ingressIdentityKey(withdrawal))
      : previousWithdrawals.has(key);
    if (!known) {
      reasons.push(`${laneArg.withdrawalsPath}[${position}] withdraws a grant the preceding projection `
        + 'neither carried nor withdrew (unknown denial)');
    }
  });
  for (const grant of omitted.values()) {
    const exact = withdrawalKey({ ...grant, generation: nextArg.generation });
    if (!nextWithdrawals.has(exact)) {
      reasons.push(`${laneArg.withdrawalsPath} must withdraw the omitted grant `
        + `${grant.source.id} -> ${grant.destination.id} ${grant.protocol}/${grant.port} at generation ${nextArg.generation}`);
    }
  }
  const applied = applicationArg !== null && isJoinedApplication(applicationArg, previousArg);
  if (!applied) {
    for (const withdrawal of laneArg.withdrawalsOf(previousArg)) {
      if (!nextGrantKeys.has(ingressIdentityKey(withdrawal)) && !nextWithdrawals.has(withdrawalKey(withdrawal))) {
        reasons.push(`${laneArg.withdrawalsPath} must carry forward the withdrawal of `
          + `${withdrawal.source.id} -> ${withdrawal.destination.id} ${withdrawal.protocol}/${withdrawal.port} `
          + `(generation ${withdrawal.generation}) until the preceding projection's application is supplied`);
      }
    }
  }
  return reasons;
};

/**
 * The withdrawals Cloudly must publish in a projection of `nextGenerationArg` carrying `nextGrantsArg`
 * after `previousArg`: every newly omitted grant, plus the preceding withdrawals unless the node's
 * joined application of `previousArg` is known. Answers null when that would exceed 4,096, in which
 * case the caller must wait for the application before it publishes. Project's own definition.
 */
export const deriveRuntimeNetworkWorkloadIngressWithdrawals = (
  previousArg: IRuntimeNetworkProjection | null,
  nextGrantsArg: readonly IRuntimeNetworkWorkloadIngressGrant[],
  nextGenerationArg: number,
  applicationArg: IRuntimeNetworkProjectionApplication | null,
): IRuntimeNetworkWorkloadIngressWithdrawal[] | null =>
  deriveWithdrawals(ingressLane, previousArg, nextGrantsArg, nextGenerationArg, applicationArg);

/**
 * The same for full-mesh grants: the `withdrawals` a projection of `nextGenerationArg` carrying
 * `nextGrantsArg` as its `grants` must publish after `previousArg`, or null beyond 4,096. Project's
 * own definition.
 */
export const deriveRuntimeNetworkWorkloadGrantWithdrawals = (
  previousArg: IRuntimeNetworkProjection | null,
  nextGrantsArg: readonly IRuntimeNetworkWorkloadGrant[],
  nextGenerationArg: number,
  applicationArg: IRuntimeNetworkProjectionApplication | null,
): IRuntimeNetworkWorkloadGrantWithdrawal[] | null =>
  deriveWithdrawals(meshLane, previousArg, nextGrantsArg, nextGenerationArg, applicationArg);

const deriveWithdrawals = (
  laneArg: IGrantLane,
  previousArg: IRuntimeNetworkProjection | null,
  nextGrantsArg: readonly TGrantIdentity[],
  nextGenerationArg: number,
  applicationArg: IRuntimeNetworkProjectionApplication | null,
): IRuntimeNetworkWorkloadIngressWithdrawal[] | null => {
  if (previousArg === null) {
    return [];
  }
  const nextGrantKeys = new Set(nextGrantsArg.map(ingressIdentityKey));
  const withdrawals: IRuntimeNetworkWorkloadIngressWithdrawal[] = [];
  const applied = applicationArg !== null && isJoinedApplication(applicationArg, previousArg);
  if (!applied) {
    for (const withdrawal of laneArg.withdrawalsOf(previousArg)) {
      if (!nextGrantKeys.has(ingressIdentityKey(withdrawal))) {
        withdrawals.push(withdrawal);
      }
    }
  }
  for (const grant of laneArg.grantsOf(previousArg)) {
    if (!nextGrantKeys.has(ingressIdentityKey(grant))) {
      withdrawals.push({
        source: grant.source,
        destination: grant.destination,
        protocol: grant.protocol,
        port: grant.port,
        generation: nextGenerationArg,
      });
    }
  }
  if (withdrawals.length > runtimeNetworkWorkloadIngressContract.maximumRetainedWithdrawals) {
    return null;
  }
  return withdrawals.sort(compareRuntimeNetworkWorkloadIngressWithdrawals);
};

/** The answer of `admitRuntimeNetworkProjection`. Project's own definition. */
export type TRuntimeNetworkProjectionAdmission =
  | { admitted: true; replayed: boolean; projection: IRuntimeNetworkProjection }
  | { admitted: false; reasons: string[] };

/**
 * The pure decision to accept `next` after `previous` (null when the node has none yet):
 * - `next` must be valid (against the current platform endpoints when given);
 * - with no previous projection, `next` is generation 1;
 * - the same generation is admitted only as an exact replay (same digest); changed content at the
 *   same generation is refused;
 * - otherwise `next` is exactly the following generation of the same projection id, node and
 *   controller, naming `previous`'s generation and digest as its predecessor;
 * - an endpoint lease keeps its address while it exists (addresses are immutable keys);
 * - membership and readiness evidence never regress: an endpoint's lease generation does not go
 *   below the preceding projection's for the same lease id, and while the lease generation stays,
 *   readiness evidence the preceding projection stated is neither dropped, nor older (a lower
 *   `observation`), nor changed under the same observation;
 * - withdrawals of full-mesh grants and of workload ingress grants follow the host rules (see
 *   `deriveRuntimeNetworkWorkloadGrantWithdrawals`, `deriveRuntimeNetworkWorkloadIngressWithdrawals`).
 * DNS keys are not judged: the upstream text names them without shaping them, and this projection
 * carries no DNS name.
 */
export const admitRuntimeNetworkProjection = (
  previousArg: unknown,
  nextArg: unknown,
  optionsArg: IRuntimeNetworkProjectionTransitionOptions = {},
): TRuntimeNetworkProjectionAdmission => {
  const judged = judgeTransitionInputs(previousArg, nextArg, optionsArg);
  if ('reasons' in judged) {
    return { admitted: false, reasons: judged.reasons };
  }
  const { previous, next, application } = judged;
  if (previous === null) {
    return next.generation === 1
      ? { admitted: true, replayed: false, projection: next }
      : { admitted: false, reasons: ['next.generation must be 1 when the node has no projection yet'] };
  }
  const reasons = judgeSuccession(previous, next);
  if (reasons === 'replay') {
    return { admitted: true, replayed: true, projection: previous };
  }
  if (reasons.length === 0) {
    reasons.push(...judgeWithdrawalTransition(meshLane, previous, next, application));
    reasons.push(...judgeWithdrawalTransition(ingressLane, previous, next, application));
  }
  return reasons.length === 0 ? { admitted: true, replayed: false, projection: next } : { admitted: false, reasons };
};

const judgeTransitionInputs = (
  previousArg: unknown,
  nextArg: unknown,
  optionsArg: IRuntimeNetworkProjectionTransitionOptions,
): { reasons: string[] } | {
  previous: IRuntimeNetworkProjection | null;
  next: IRuntimeNetworkProjection;
  application: IRuntimeNetworkProjectionApplication | null;
} => {
  const nextRead = readProjection(nextArg, 'next', optionsArg);
  if (!('projection' in nextRead)) {
    return nextRead;
  }
  const next = nextRead.projection;
  if (previousArg === null || previousArg === undefined) {
    return { previous: null, next, application: null };
  }
  // The predecessor is judged without the current platform endpoints: the plan may have moved on.
  const previousRead = readProjection(previousArg, 'previous', {});
  if (!('projection' in previousRead)) {
    return previousRead;
  }
  const previous = previousRead.projection;
  const applicationArg = optionsArg.application ?? null;
  if (applicationArg === null) {
    return { previous, next, application: null };
  }
  const applicationReasons = validateRuntimeNetworkProjectionApplication(applicationArg);
  if (applicationReasons.length > 0) {
    return { reasons: applicationReasons };
  }
  const application = snapshotRuntimeNetworkPlainData(applicationArg, 'application');
  const applicationValue = (application.ok ? application.value : null) as unknown as IRuntimeNetworkProjectionApplication;
  if (!isJoinedApplication(applicationValue, previous)) {
    return { reasons: ['application must be the exact joined application of the preceding projection '
      + '(its projectionId, nodeId, generation and digest)'] };
  }
  return { previous, next, application: applicationValue };
};

const judgeSuccession = (
  previousArg: IRuntimeNetworkProjection,
  nextArg: IRuntimeNetworkProjection,
): string[] | 'replay' => {
  const reasons: string[] = [];
  if (nextArg.id !== previousArg.id) {
    reasons.push(`next.id must stay ${previousArg.id}`);
  }
  if (nextArg.nodeId !== previousArg.nodeId) {
    reasons.push(`next.nodeId must stay ${previousArg.nodeId}`);
  }
  if (nextArg.controller.kind !== previousArg.controller.kind) {
    reasons.push(`next.controller.kind must stay ${previousArg.controller.kind}`);
  }
  if (reasons.length > 0) {
    return reasons;
  }
  if (nextArg.generation === previousArg.generation) {
    return nextArg.digest === previousArg.digest
      ? 'replay'
      : [`next changes the content of generation ${nextArg.generation}; a changed projection needs the next generation`];
  }
  if (nextArg.generation !== previousArg.generation + 1) {
    return [`next.generation must be ${previousArg.generation + 1}, the generation after the preceding projection`];
  }
  if (nextArg.previous === null || nextArg.previous.digest !== previousArg.digest) {
    reasons.push('next.previous must name the exact preceding projection (its generation and digest)');
  }
  const preceding = new Map(previousArg.endpoints.map((endpoint) => [endpoint.lease.id, endpoint]));
  nextArg.endpoints.forEach((endpoint, position) => {
    const before = preceding.get(endpoint.lease.id);
    if (before === undefined) {
      return;
    }
    if (before.address !== endpoint.address) {
      reasons.push(`next.endpoints[${position}].address must stay ${before.address}: a lease's address is immutable`);
    }
    reasons.push(...judgeEvidenceSuccession(before, endpoint, `next.endpoints[${position}]`));
  });
  return reasons;
};

/**
 * Every way `nextArg` regresses the evidence `previousArg` stated for the same lease id. A new lease
 * generation is new membership: the readiness evidence of the older generation does not bind it.
 */
const judgeEvidenceSuccession = (
  previousArg: IRuntimeNetworkEndpoint,
  nextArg: IRuntimeNetworkEndpoint,
  pathArg: string,
): string[] => {
  if (nextArg.lease.generation < previousArg.lease.generation) {
    return [`${pathArg}.lease.generation must not go below ${previousArg.lease.generation}: `
      + `the membership evidence of lease ${previousArg.lease.id} regressed`];
  }
  const before = previousArg.readiness;
  if (nextArg.lease.generation > previousArg.lease.generation || before === undefined) {
    return [];
  }
  const after = nextArg.readiness;
  if (after === undefined) {
    return [`${pathArg}.readiness must be stated: the preceding projection stated readiness evidence `
      + `(observation ${before.observation}) for lease ${previousArg.lease.id}`];
  }
  if (after.observation < before.observation) {
    return [`${pathArg}.readiness.observation must not go below ${before.observation}: `
      + `the readiness evidence of lease ${previousArg.lease.id} regressed`];
  }
  if (after.observation === before.observation && after.ready !== before.ready) {
    return [`${pathArg}.readiness.ready must stay ${before.ready} under observation ${before.observation}: `
      + 'changed evidence needs a newer observation'];
  }
  return [];
};

/** The answer of `getRuntimeNetworkProjectionWorkloadIngressPacketGrants`. Project's own definition. */
export type TRuntimeNetworkWorkloadIngressPacketGrants =
  | {
    valid: true;
    /** What the host installs: one entry per current grant, in the grants' order. */
    grants: IRuntimeNetworkWorkloadIngressPacketGrant[];
    /** What the host removes: one entry per carried withdrawal, in the withdrawals' order. */
    withdrawals: IRuntimeNetworkWorkloadIngressPacketGrant[];
  }
  | { valid: false; reasons: string[] };

const detachPacketGrant = (entryArg: {
  source: IRuntimeNetworkLeaseReference;
  destination: IRuntimeNetworkLeaseReference;
  protocol: TRuntimeNetworkProtocol;
  port: number;
}): IRuntimeNetworkWorkloadIngressPacketGrant => Object.freeze({
  source: Object.freeze({ id: entryArg.source.id, generation: entryArg.source.generation }),
  destination: Object.freeze({
    lease: Object.freeze({ id: entryArg.destination.id, generation: entryArg.destination.generation }),
    protocol: entryArg.protocol,
    port: entryArg.port,
  }),
});

/**
 * Validates the complete projection and answers its workload ingress as detached packet grants,
 * sharing nothing with the argument. When the host also supplies the projection it currently
 * enforces (`previous`) and, optionally, its application of it, the withdrawals are judged by the
 * host rules too; an exact replay of `previous` is judged as itself. Never throws.
 */
export const getRuntimeNetworkProjectionWorkloadIngressPacketGrants = (
  projectionArg: unknown,
  optionsArg: IRuntimeNetworkProjectionTransitionOptions & { previous?: unknown } = {},
): TRuntimeNetworkWorkloadIngressPacketGrants => {
  const judged = judgeTransitionInputs(optionsArg.previous ?? null, projectionArg, optionsArg);
  if ('reasons' in judged) {
    return { valid: false, reasons: judged.reasons };
  }
  const { previous, next, application } = judged;
  if (previous !== null) {
    const succession = judgeSuccession(previous, next);
    if (succession !== 'replay') {
      const reasons = succession.length > 0 ? succession : judgeWithdrawalTransition(ingressLane, previous, next, application);
      if (reasons.length > 0) {
        return { valid: false, reasons };
      }
    }
  }
  return {
    valid: true,
    grants: ingressGrantsOf(next).map(detachPacketGrant),
    withdrawals: ingressWithdrawalsOf(next).map(detachPacketGrant),
  };
};

/**
 * One workload address lease a node reports: the lease, the service whose workload holds it and
 * its address. Nothing else in Cloudly assigns workload addresses yet, so the node states them and
 * Cloudly derives projections from those statements. Project's own definition.
 */
export interface IRuntimeNetworkWorkloadLease {
  lease: IRuntimeNetworkLeaseReference;
  serviceId: string;
  address: string;
}

/** Most leases one node may report. Project's own limit. */
export const runtimeNetworkWorkloadLeaseContract = Object.freeze({
  maximumLeasesPerNode: 1_024,
} as const);

/** Every reason a node's lease list is refused: unique lease ids and addresses, each lease well formed. */
export const validateRuntimeNetworkWorkloadLeases = (valueArg: unknown, pathArg = 'leases'): string[] => {
  const snapshot = snapshotRuntimeNetworkPlainData(valueArg, pathArg);
  if (!snapshot.ok) {
    return [snapshot.reason];
  }
  const leases = snapshot.value;
  const maximum = runtimeNetworkWorkloadLeaseContract.maximumLeasesPerNode;
  if (!Array.isArray(leases) || leases.length > maximum) {
    return [`${pathArg} must be a list of at most ${maximum} leases`];
  }
  const reasons: string[] = [];
  const ids = new Set<string>();
  const addresses = new Set<string>();
  leases.forEach((entry: unknown, position) => {
    const path = `${pathArg}[${position}]`;
    if (!isRecord(entry) || !hasKeysWithin(entry, ['lease', 'serviceId', 'address'], [])) {
      reasons.push(`${path} must be an object with exactly the keys lease, serviceId, address`);
      return;
    }
    if (!isLeaseReference(entry.lease)) {
      reasons.push(`${path}.lease must be a lease reference { id, generation }`);
    } else if (ids.has(entry.lease.id)) {
      reasons.push(`${path}.lease.id must name each lease once`);
    } else {
      ids.add(entry.lease.id);
    }
    if (!isCanonicalId(entry.serviceId)) {
      reasons.push(`${path}.serviceId must be a canonical id`);
    }
    if (!isPlausibleUnicastIpv4(entry.address)) {
      reasons.push(`${path}.address must be a unicast IPv4 address`);
    } else if (addresses.has(entry.address)) {
      reasons.push(`${path}.address must differ from every other lease's address`);
    } else {
      addresses.add(entry.address);
    }
  });
  return reasons;
};
