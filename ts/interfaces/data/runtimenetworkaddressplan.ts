import { isCanonicalId, isRecord, hasExactKeys } from '../private/dataproperties.js';
import { isIpv4InPrefix, isPlausibleUnicastIpv4, parseIpv4Prefix } from '../private/ipv4.js';
import { compareCodeUnits, snapshotRuntimeNetworkPlainData } from '../private/runtimenetworkplaindata.js';

/**
 * The address plan of one runtime network authority: which IPv4 space it owns, which parts of it
 * workload leases are drawn from, where the managed VPN lives, which address each cluster's hub
 * binds, and where the authority's own platform endpoints (a relay listener, a Corestore) listen.
 *
 * The upstream text describes the plan's rules but not its full shape, so the shape below is the
 * smallest one those rules need. Project's own definition.
 */

/** Transport protocols a platform endpoint or a workload ingress grant may name. */
export const runtimeNetworkProtocols = Object.freeze(['tcp', 'udp'] as const);
export type TRuntimeNetworkProtocol = typeof runtimeNetworkProtocols[number];

/**
 * Limits of an address plan. `maximumPlatformEndpoints` is the contract's 64 per authority, and a
 * hub counts against it like any other platform endpoint (so 64 clusters fit one authority). The
 * prefix and pool limits are the project's own bounds on the work one plan can cause.
 */
export const runtimeNetworkAddressPlanContract = Object.freeze({
  maximumPlatformEndpoints: 64,
  maximumPrefixes: 64,
  maximumPools: 256,
  minimumPort: 1,
  maximumPort: 65_535,
} as const);

/** One platform endpoint of the authority: `{ id, address, protocol, port }`; it names no node. */
export interface IRuntimeNetworkPlatformEndpoint {
  id: string;
  address: string;
  protocol: TRuntimeNetworkProtocol;
  port: number;
}

/** One range workload leases are drawn from. Project's own definition. */
export interface IRuntimeNetworkAddressPool {
  id: string;
  prefix: string;
}

/**
 * The managed VPN's two ranges: `hubPrefix` holds every cluster hub's address, `peerPrefix` the
 * addresses the VPN hands to nodes. Project's own definition (the text speaks of "both VPN
 * prefixes" and names only `hubPrefix`).
 */
export interface IRuntimeNetworkVpnPrefixes {
  hubPrefix: string;
  peerPrefix: string;
}

/** The address one cluster's hub binds inside `vpn.hubPrefix`. Project's own definition. */
export interface IRuntimeNetworkHub {
  clusterId: string;
  address: string;
}

/** One revision of an authority's address plan. Project's own definition. */
export interface IRuntimeNetworkAddressPlan {
  authorityId: string;
  /** 1 for the first plan, then exactly one more on every change. */
  revision: number;
  /** The IPv4 space the authority owns; platform endpoints sit inside it. */
  prefixes: string[];
  pools: IRuntimeNetworkAddressPool[];
  vpn: IRuntimeNetworkVpnPrefixes;
  /** May be empty: an authority whose clusters have no hub yet. */
  hubs: IRuntimeNetworkHub[];
  platformEndpoints: IRuntimeNetworkPlatformEndpoint[];
}

const planKeys = ['authorityId', 'revision', 'prefixes', 'pools', 'vpn', 'hubs', 'platformEndpoints'] as const;

type TPrefix = { network: number; length: number };

const prefixesOverlap = (leftArg: TPrefix, rightArg: TPrefix): boolean => {
  const shorter = leftArg.length <= rightArg.length ? leftArg : rightArg;
  const longer = shorter === leftArg ? rightArg : leftArg;
  const mask = shorter.length === 0 ? 0 : (0xffffffff << (32 - shorter.length)) >>> 0;
  return ((longer.network & mask) >>> 0) === shorter.network;
};

const prefixInside = (innerArg: TPrefix, outerArg: TPrefix): boolean =>
  innerArg.length >= outerArg.length && prefixesOverlap(innerArg, outerArg);

/** A transport port a platform endpoint or a workload ingress grant may name: an integer from 1 to 65535. */
export const isRuntimeNetworkPort = (valueArg: unknown): valueArg is number => Number.isSafeInteger(valueArg)
  && (valueArg as number) >= runtimeNetworkAddressPlanContract.minimumPort
  && (valueArg as number) <= runtimeNetworkAddressPlanContract.maximumPort;

/** One of `runtimeNetworkProtocols`. */
export const isRuntimeNetworkProtocol = (valueArg: unknown): valueArg is TRuntimeNetworkProtocol =>
  (runtimeNetworkProtocols as readonly unknown[]).includes(valueArg);

/**
 * Every reason the value is not a valid address plan, in a stable order (the plan's fields in
 * declaration order, entries by index). Never throws.
 */
export const validateRuntimeNetworkAddressPlan = (valueArg: unknown, pathArg = 'plan'): string[] => {
  const snapshot = snapshotRuntimeNetworkPlainData(valueArg, pathArg);
  if (!snapshot.ok) {
    return [snapshot.reason];
  }
  const plan = snapshot.value;
  if (!isRecord(plan) || !hasExactKeys(plan, planKeys)) {
    return [`${pathArg} must be an object with exactly the keys ${planKeys.join(', ')}`];
  }
  const reasons: string[] = [];
  if (!isCanonicalId(plan.authorityId)) {
    reasons.push(`${pathArg}.authorityId must be a canonical id`);
  }
  if (!Number.isSafeInteger(plan.revision) || (plan.revision as number) < 1) {
    reasons.push(`${pathArg}.revision must be a positive integer`);
  }

  // Prefixes the authority owns: valid, within the limit, no two overlapping.
  const ownedPrefixes: TPrefix[] = [];
  if (!Array.isArray(plan.prefixes) || plan.prefixes.length === 0
    || plan.prefixes.length > runtimeNetworkAddressPlanContract.maximumPrefixes) {
    reasons.push(`${pathArg}.prefixes must be a list of 1 to `
      + `${runtimeNetworkAddressPlanContract.maximumPrefixes} IPv4 prefixes`);
  } else {
    plan.prefixes.forEach((entry, index) => {
      const prefix = parseIpv4Prefix(entry);
      if (prefix === null) {
        reasons.push(`${pathArg}.prefixes[${index}] must be an IPv4 prefix a.b.c.d/n naming its network address`);
        return;
      }
      const clash = ownedPrefixes.findIndex((other) => prefixesOverlap(other, prefix));
      if (clash >= 0) {
        reasons.push(`${pathArg}.prefixes[${index}] overlaps another owned prefix`);
      }
      ownedPrefixes.push(prefix);
    });
  }

  // The managed VPN's two prefixes.
  let hubPrefix: TPrefix | null = null;
  let peerPrefix: TPrefix | null = null;
  if (!isRecord(plan.vpn) || !hasExactKeys(plan.vpn, ['hubPrefix', 'peerPrefix'])) {
    reasons.push(`${pathArg}.vpn must be an object with exactly the keys hubPrefix, peerPrefix`);
  } else {
    hubPrefix = parseIpv4Prefix(plan.vpn.hubPrefix);
    peerPrefix = parseIpv4Prefix(plan.vpn.peerPrefix);
    if (hubPrefix === null) {
      reasons.push(`${pathArg}.vpn.hubPrefix must be an IPv4 prefix a.b.c.d/n naming its network address`);
    }
    if (peerPrefix === null) {
      reasons.push(`${pathArg}.vpn.peerPrefix must be an IPv4 prefix a.b.c.d/n naming its network address`);
    }
    if (hubPrefix !== null && peerPrefix !== null && prefixesOverlap(hubPrefix, peerPrefix)) {
      reasons.push(`${pathArg}.vpn.peerPrefix must not overlap ${pathArg}.vpn.hubPrefix`);
    }
  }

  // Workload pools: inside owned space, apart from each other and from the VPN.
  const poolPrefixes: TPrefix[] = [];
  if (!Array.isArray(plan.pools) || plan.pools.length > runtimeNetworkAddressPlanContract.maximumPools) {
    reasons.push(`${pathArg}.pools must be a list of at most ${runtimeNetworkAddressPlanContract.maximumPools} pools`);
  } else {
    const poolIds = new Set<string>();
    plan.pools.forEach((entry, index) => {
      const path = `${pathArg}.pools[${index}]`;
      if (!isRecord(entry) || !hasExactKeys(entry, ['id', 'prefix'])) {
        reasons.push(`${path} must be an object with exactly the keys id, prefix`);
        return;
      }
      if (!isCanonicalId(entry.id)) {
        reasons.push(`${path}.id must be a canonical id`);
      } else if (poolIds.has(entry.id)) {
        reasons.push(`${path}.id must be unique among pools`);
      } else {
        poolIds.add(entry.id);
      }
      const prefix = parseIpv4Prefix(entry.prefix);
      if (prefix === null) {
        reasons.push(`${path}.prefix must be an IPv4 prefix a.b.c.d/n naming its network address`);
        return;
      }
      if (ownedPrefixes.length > 0 && !ownedPrefixes.some((owned) => prefixInside(prefix, owned))) {
        reasons.push(`${path}.prefix must lie inside one of ${pathArg}.prefixes`);
      }
      if (poolPrefixes.some((other) => prefixesOverlap(other, prefix))) {
        reasons.push(`${path}.prefix overlaps another pool`);
      }
      if (hubPrefix !== null && prefixesOverlap(hubPrefix, prefix)) {
        reasons.push(`${path}.prefix must not overlap ${pathArg}.vpn.hubPrefix`);
      }
      if (peerPrefix !== null && prefixesOverlap(peerPrefix, prefix)) {
        reasons.push(`${path}.prefix must not overlap ${pathArg}.vpn.peerPrefix`);
      }
      poolPrefixes.push(prefix);
    });
  }

  // Hubs: one per cluster, each bound inside the hub prefix.
  let hubCount = 0;
  if (!Array.isArray(plan.hubs) || plan.hubs.length > runtimeNetworkAddressPlanContract.maximumPlatformEndpoints) {
    reasons.push(`${pathArg}.hubs must be a list of at most `
      + `${runtimeNetworkAddressPlanContract.maximumPlatformEndpoints} hubs`);
  } else {
    hubCount = plan.hubs.length;
    const clusterIds = new Set<string>();
    const hubAddresses = new Set<string>();
    plan.hubs.forEach((entry, index) => {
      const path = `${pathArg}.hubs[${index}]`;
      if (!isRecord(entry) || !hasExactKeys(entry, ['clusterId', 'address'])) {
        reasons.push(`${path} must be an object with exactly the keys clusterId, address`);
        return;
      }
      if (!isCanonicalId(entry.clusterId)) {
        reasons.push(`${path}.clusterId must be a canonical id`);
      } else if (clusterIds.has(entry.clusterId)) {
        reasons.push(`${path}.clusterId must name each cluster once`);
      } else {
        clusterIds.add(entry.clusterId);
      }
      if (!isPlausibleUnicastIpv4(entry.address)) {
        reasons.push(`${path}.address must be a unicast IPv4 address`);
        return;
      }
      if (hubPrefix !== null && !isIpv4InPrefix(entry.address, hubPrefix)) {
        reasons.push(`${path}.address must lie inside ${pathArg}.vpn.hubPrefix`);
      }
      if (hubAddresses.has(entry.address)) {
        reasons.push(`${path}.address must differ from every other hub's address`);
      }
      hubAddresses.add(entry.address);
    });
  }

  // Platform endpoints: inside owned space, outside pools and the VPN, address:port:protocol unique.
  if (!Array.isArray(plan.platformEndpoints)
    || plan.platformEndpoints.length > runtimeNetworkAddressPlanContract.maximumPlatformEndpoints) {
    reasons.push(`${pathArg}.platformEndpoints must be a list of at most `
      + `${runtimeNetworkAddressPlanContract.maximumPlatformEndpoints} endpoints`);
  } else {
    reasons.push(...validatePlatformEndpoints(plan.platformEndpoints, `${pathArg}.platformEndpoints`, {
      ownedPrefixes, poolPrefixes, hubPrefix, peerPrefix, planPath: pathArg,
    }));
    if (hubCount + plan.platformEndpoints.length > runtimeNetworkAddressPlanContract.maximumPlatformEndpoints) {
      reasons.push(`${pathArg} must hold at most ${runtimeNetworkAddressPlanContract.maximumPlatformEndpoints} `
        + `platform endpoints counting each hub as one (has ${hubCount + plan.platformEndpoints.length})`);
    }
  }
  return reasons;
};

const validatePlatformEndpoints = (
  entriesArg: readonly unknown[],
  pathArg: string,
  spaceArg: {
    ownedPrefixes: TPrefix[];
    poolPrefixes: TPrefix[];
    hubPrefix: TPrefix | null;
    peerPrefix: TPrefix | null;
    planPath: string;
  },
): string[] => {
  const reasons: string[] = [];
  const ids = new Set<string>();
  const sockets = new Set<string>();
  entriesArg.forEach((entry, index) => {
    const path = `${pathArg}[${index}]`;
    if (!isRecord(entry) || !hasExactKeys(entry, ['id', 'address', 'protocol', 'port'])) {
      reasons.push(`${path} must be an object with exactly the keys id, address, protocol, port`);
      return;
    }
    if (!isCanonicalId(entry.id)) {
      reasons.push(`${path}.id must be a canonical id`);
    } else if (ids.has(entry.id)) {
      reasons.push(`${path}.id must be unique among platform endpoints`);
    } else {
      ids.add(entry.id);
    }
    const addressValid = isPlausibleUnicastIpv4(entry.address);
    if (!addressValid) {
      reasons.push(`${path}.address must be a unicast IPv4 address`);
    }
    if (!isRuntimeNetworkProtocol(entry.protocol)) {
      reasons.push(`${path}.protocol must be one of ${runtimeNetworkProtocols.join(', ')}`);
    }
    if (!isRuntimeNetworkPort(entry.port)) {
      reasons.push(`${path}.port must be an integer from ${runtimeNetworkAddressPlanContract.minimumPort} `
        + `to ${runtimeNetworkAddressPlanContract.maximumPort}`);
    }
    if (!addressValid) {
      return;
    }
    const address = entry.address as string;
    if (spaceArg.ownedPrefixes.length > 0
      && !spaceArg.ownedPrefixes.some((owned) => isIpv4InPrefix(address, owned))) {
      reasons.push(`${path}.address must lie inside one of ${spaceArg.planPath}.prefixes`);
    }
    if (spaceArg.poolPrefixes.some((pool) => isIpv4InPrefix(address, pool))) {
      reasons.push(`${path}.address must lie outside every pool`);
    }
    if (spaceArg.hubPrefix !== null && isIpv4InPrefix(address, spaceArg.hubPrefix)) {
      reasons.push(`${path}.address must lie outside ${spaceArg.planPath}.vpn.hubPrefix`);
    }
    if (spaceArg.peerPrefix !== null && isIpv4InPrefix(address, spaceArg.peerPrefix)) {
      reasons.push(`${path}.address must lie outside ${spaceArg.planPath}.vpn.peerPrefix`);
    }
    if (isRuntimeNetworkProtocol(entry.protocol) && isRuntimeNetworkPort(entry.port)) {
      const socket = `${address}:${entry.port}:${entry.protocol}`;
      if (sockets.has(socket)) {
        reasons.push(`${path} repeats ${socket}: each address:port:protocol must be unique`);
      }
      sockets.add(socket);
    }
  });
  return reasons;
};

/** A detached, frozen copy of a valid plan, or null when the value is not one. */
export const snapshotRuntimeNetworkAddressPlan = (valueArg: unknown): IRuntimeNetworkAddressPlan | null => {
  if (validateRuntimeNetworkAddressPlan(valueArg).length > 0) {
    return null;
  }
  const snapshot = snapshotRuntimeNetworkPlainData(valueArg, 'plan');
  return snapshot.ok ? (snapshot.value as unknown as IRuntimeNetworkAddressPlan) : null;
};

/** The answer of `admitRuntimeNetworkAddressPlanChange`. Project's own definition. */
export type TRuntimeNetworkAddressPlanAdmission =
  | { admitted: true; plan: IRuntimeNetworkAddressPlan }
  | { admitted: false; reasons: string[] };

/**
 * The pure decision for writing `next` over `previous` (null when the authority has no plan yet).
 *
 * A plan is written only at the following revision: 1 for the first, then the previous revision
 * plus one; any other revision is refused. Leases and the managed VPN outlive a plan revision, so
 * next must keep the authority, both VPN prefixes, every pool of the previous revision with its
 * prefix (leases were drawn from it), and the address of every hub whose cluster stays. Platform
 * endpoints, owned prefixes and new pools or hubs may change freely within the plan's own rules.
 * (The upstream text lists its answers after this point and our copy of it is cut there; these
 * are the rules the sentence itself implies.) Never throws.
 */
export const admitRuntimeNetworkAddressPlanChange = (
  previousArg: unknown,
  nextArg: unknown,
): TRuntimeNetworkAddressPlanAdmission => {
  const nextReasons = validateRuntimeNetworkAddressPlan(nextArg, 'next');
  if (nextReasons.length > 0) {
    return { admitted: false, reasons: nextReasons };
  }
  const next = snapshotRuntimeNetworkAddressPlan(nextArg) as IRuntimeNetworkAddressPlan;
  if (previousArg === null) {
    return next.revision === 1
      ? { admitted: true, plan: next }
      : { admitted: false, reasons: ['next.revision must be 1 when there is no previous plan'] };
  }
  const previousReasons = validateRuntimeNetworkAddressPlan(previousArg, 'previous');
  if (previousReasons.length > 0) {
    return { admitted: false, reasons: previousReasons };
  }
  const previous = snapshotRuntimeNetworkAddressPlan(previousArg) as IRuntimeNetworkAddressPlan;
  const reasons: string[] = [];
  if (next.revision !== previous.revision + 1) {
    reasons.push(`next.revision must be exactly ${previous.revision + 1}, the revision after the previous plan`);
  }
  if (next.authorityId !== previous.authorityId) {
    reasons.push('next.authorityId must stay the previous plan\'s authority');
  }
  if (next.vpn.hubPrefix !== previous.vpn.hubPrefix) {
    reasons.push('next.vpn.hubPrefix must not change: the managed VPN outlives a plan revision');
  }
  if (next.vpn.peerPrefix !== previous.vpn.peerPrefix) {
    reasons.push('next.vpn.peerPrefix must not change: the managed VPN outlives a plan revision');
  }
  const nextPools = new Map(next.pools.map((pool) => [pool.id, pool.prefix]));
  for (const pool of previous.pools) {
    const prefix = nextPools.get(pool.id);
    if (prefix === undefined) {
      reasons.push(`next.pools must keep pool ${pool.id}: leases drawn from it outlive a plan revision`);
    } else if (prefix !== pool.prefix) {
      reasons.push(`next.pools pool ${pool.id} must keep prefix ${pool.prefix}: leases drawn from it outlive a plan revision`);
    }
  }
  const nextHubs = new Map(next.hubs.map((hub) => [hub.clusterId, hub.address]));
  for (const hub of previous.hubs) {
    const address = nextHubs.get(hub.clusterId);
    if (address !== undefined && address !== hub.address) {
      reasons.push(`next.hubs hub of cluster ${hub.clusterId} must keep address ${hub.address}`);
    }
  }
  return reasons.length === 0 ? { admitted: true, plan: next } : { admitted: false, reasons };
};

/** The plan's platform endpoint ids, sorted: the set `hostPlatformEndpointIds` must draw from. */
export const listRuntimeNetworkPlatformEndpointIds = (planArg: IRuntimeNetworkAddressPlan): string[] =>
  planArg.platformEndpoints.map((endpoint) => endpoint.id).sort(compareCodeUnits);
