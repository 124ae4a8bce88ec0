/**
 * The dashboard's decisions as pure functions: data in, data out, no DOM and no Lit, so the unit
 * lane tests them (test/dashboard.decision.test.ts) and the pages stay views.
 */
import type { IServiceRunAs, IServicePort, IServiceRoute, IServiceRuntimeSpec, IServiceWritableSpec } from '../../ts/interfaces/data/service.js';
import type { IServiceObservedPlacement, TClusterUnresolvedRouteCause } from '../../ts/interfaces/data/desiredstate.js';
import type { IServiceBackupRecord } from '../../ts/interfaces/requests/backup.js';
import { validateServiceVolumeInitialization, type TServiceVolumeInitialization, type TServiceWritableVolume } from '../../ts/interfaces/data/servicevolume.js';
import { judgeServiceVolumeInitializationUse } from '../../ts/interfaces/data/servicevolumeuse.js';
import type { IOperation } from '../../ts/interfaces/requests/operation.js';
import type { IServiceRuntimeAssignmentView } from '../../ts/interfaces/data/serviceruntimeassignmentview.js';

// ---- routes ----

export type TRoute =
  | { page: 'fleet' }
  | { page: 'cluster'; id: string }
  | { page: 'service'; id: string }
  | { page: 'audit' }
  | { page: 'operations' }
  | { page: 'users' }
  | { page: 'network' }
  | { page: 'rollouts' }
  | { page: 'secrets' }
  | { page: 'backups' }
  | { page: 'not-found'; path: string };

/**
 * The page a location hash names. An empty hash is the fleet; anything the dashboard does not
 * know is a not-found page that names it (showing the fleet instead hid a mistyped link).
 */
export const parseRoute = (hashArg: string): TRoute => {
  const raw = hashArg.replace(/^#\/?/, '');
  if (raw === '') {
    return { page: 'fleet' };
  }
  let parts: string[];
  try {
    parts = raw.split('/').map((part) => decodeURIComponent(part));
  } catch {
    // A malformed percent escape is not a page either.
    return { page: 'not-found', path: raw };
  }
  const [first, second, ...rest] = parts;
  if (rest.length === 0) {
    if ((first === 'cluster' || first === 'service') && second) {
      return { page: first, id: second };
    }
    if (second === undefined && (first === 'fleet' || first === 'audit' || first === 'operations' || first === 'users' || first === 'network' || first === 'rollouts'
      || first === 'secrets' || first === 'backups')) {
      return { page: first };
    }
  }
  return { page: 'not-found', path: raw };
};

// ---- service facts ----

/** How the spec page states who the workload runs as (the contract's members are `user`/`group`). */
export const describeRunAs = (runAsArg: IServiceRunAs | null | undefined): string =>
  runAsArg ? `${runAsArg.user}:${runAsArg.group}` : 'image default';

/** Backups newest first by the time they were taken (ids are random, so id order says nothing). */
export const sortBackupsByTime = (backupsArg: readonly IServiceBackupRecord[]): IServiceBackupRecord[] =>
  [...backupsArg].sort((left, right) => right.createdAt - left.createdAt || (left.backupId < right.backupId ? -1 : left.backupId > right.backupId ? 1 : 0));

/**
 * The nodes offered for a backup and the one chosen first: a backup reads the service's data on
 * a node it runs on, so nodes the relay reports it running on come first, then its placement,
 * then the cluster's other nodes. The default is the first of those.
 */
export const decideBackupNodeChoices = (
  clusterNodeIdsArg: readonly string[],
  placementArg: readonly string[],
  observedArg: readonly IServiceObservedPlacement[],
): { nodeIds: string[]; defaultNodeId: string | null } => {
  const running = observedArg.filter((entry) => entry.replicas > 0).map((entry) => entry.nodeId);
  const ordered: string[] = [];
  for (const nodeId of [...running, ...placementArg, ...clusterNodeIdsArg]) {
    if (!ordered.includes(nodeId)) {
      ordered.push(nodeId);
    }
  }
  return { nodeIds: ordered, defaultNodeId: ordered[0] ?? null };
};

// ---- the service form ----

/** What the service form holds, as typed (strings), before it becomes a spec. */
export interface IServiceFormFields {
  name: string;
  organizationId: string;
  clusterId: string;
  image: string;
  replicas: string;
  /** `user:group`, or empty for the image's own user. */
  runAs: string;
  placementNodeIds: string[];
  /** One a line: `name port/protocol`, e.g. `http 8080/tcp`. */
  ports: string;
  /** One a line: `hostname portname`, e.g. `app.example.com http`. */
  routes: string;
  /** One a line: a mount path, `:ro` at the end for read-only. */
  volumes: string;
  /**
   * One a line, for a new service's volumes: `/data empty run-as 0750`, `/data empty 1000:1000 0750`
   * or `/data import <docker volume>` (set with `setServiceVolumeInitialization` once created).
   */
  initializations: string;
}

const lines = (textArg: string): string[] => textArg.split('\n').map((line) => line.trim()).filter((line) => line.length > 0);

/** Ports and routes sit beside `runtime` in a service spec (the runtime spec is execution policy only). */
export const placePortsAndRoutes = (portsArg: IServicePort[], routesArg: IServiceRoute[]): Pick<IServiceWritableSpec, 'ports' | 'routes'> => ({
  ...(portsArg.length ? { ports: portsArg } : {}),
  ...(routesArg.length ? { routes: routesArg } : {}),
});

/** The ports and routes of a stored service (the counterpart of `placePortsAndRoutes`). */
export const portsAndRoutesOf = (serviceArg: Pick<IServiceWritableSpec, 'ports' | 'routes'>): { ports: IServicePort[]; routes: IServiceRoute[] } => ({
  ports: serviceArg.ports ?? [],
  routes: serviceArg.routes ?? [],
});

/**
 * The form's text read into a writable spec, and the reasons a line could not be read at all
 * (with the field's path, like the server's). What can be read is left to the contract's
 * validator, so the form and Cloudly refuse with the same words.
 */
export const serviceSpecOfForm = (fieldsArg: IServiceFormFields): { spec: IServiceWritableSpec; reasons: string[] } => {
  const reasons: string[] = [];
  const toNumber = (textArg: string): number => (/^\s*-?\d+\s*$/.test(textArg) ? Number(textArg) : Number.NaN);
  let runAs: IServiceRunAs | null = null;
  if (fieldsArg.runAs.trim() !== '') {
    const match = /^\s*(\d+):(\d+)\s*$/.exec(fieldsArg.runAs);
    if (match) {
      runAs = { user: Number(match[1]), group: Number(match[2]) };
    } else {
      reasons.push('service.runtime.profile.runAs must be written user:group (two numbers), or left empty');
    }
  }
  const ports: IServicePort[] = lines(fieldsArg.ports).map((line, index) => {
    const match = /^(\S+)\s+(\d+)(?:\/(\S+))?$/.exec(line);
    if (!match) {
      reasons.push(`service.ports[${index}] must be written "name port/protocol", e.g. "http 8080/tcp"`);
      return { name: line, port: Number.NaN, protocol: 'tcp' };
    }
    return { name: match[1], port: Number(match[2]), protocol: (match[3] ?? 'tcp') as IServicePort['protocol'] };
  });
  const routes: IServiceRoute[] = lines(fieldsArg.routes).map((line, index) => {
    const match = /^(\S+)\s+(\S+)$/.exec(line);
    if (!match) {
      reasons.push(`service.routes[${index}] must be written "hostname port-name", e.g. "app.example.com http"`);
      return { hostname: line, targetPort: '' };
    }
    return { hostname: match[1], targetPort: match[2] };
  });
  const volumes: TServiceWritableVolume[] = lines(fieldsArg.volumes).map((line) => {
    const readOnly = line.endsWith(':ro');
    return { mountPath: readOnly ? line.slice(0, -3) : line, readOnly, driver: 'local' };
  });
  const spec: IServiceWritableSpec = {
    name: fieldsArg.name,
    organizationId: fieldsArg.organizationId.trim(),
    clusterId: fieldsArg.clusterId,
    runtime: {
      image: fieldsArg.image.trim(),
      replicas: toNumber(fieldsArg.replicas),
      profile: { runAs },
      placement: { nodeIds: fieldsArg.placementNodeIds },
    },
    ...placePortsAndRoutes(ports, routes),
    volumes,
  };
  return { spec, reasons };
};

/** The form's fields of a stored service (to edit it). */
export const serviceFormOfSpec = (specArg: IServiceWritableSpec & { runtime: IServiceRuntimeSpec }): IServiceFormFields => {
  const { ports, routes } = portsAndRoutesOf(specArg);
  const runAs = specArg.runtime.profile?.runAs ?? null;
  return {
    name: specArg.name,
    organizationId: specArg.organizationId,
    clusterId: specArg.clusterId,
    image: specArg.runtime.image,
    replicas: String(specArg.runtime.replicas),
    runAs: runAs ? `${runAs.user}:${runAs.group}` : '',
    placementNodeIds: [...(specArg.runtime.placement?.nodeIds ?? [])],
    ports: ports.map((port) => `${port.name} ${port.port}/${port.protocol}`).join('\n'),
    routes: routes.map((route) => `${route.hostname} ${route.targetPort}`).join('\n'),
    volumes: specArg.volumes.map((volume) => `${volume.mountPath}${volume.readOnly ? ':ro' : ''}`).join('\n'),
    initializations: '',
  };
};

/** A volume's initialization as the service form states it. */
export interface IPlannedVolumeInitialization {
  mountPath: string;
  initialization: TServiceVolumeInitialization;
}

/**
 * The form's initialization lines read into initializations of the spec's volumes, and every
 * reason a line cannot be one (the contract's own validator judges what was read). A line names
 * one of the volumes, once.
 */
export const volumeInitializationsOfForm = (textArg: string, mountPathsArg: readonly string[]): { initializations: IPlannedVolumeInitialization[]; reasons: string[] } => {
  const reasons: string[] = [];
  const initializations: IPlannedVolumeInitialization[] = [];
  lines(textArg).forEach((line, index) => {
    const path = `initializations[${index}]`;
    const words = line.split(/\s+/);
    const mountPath = words[0] ?? '';
    let initialization: TServiceVolumeInitialization | null = null;
    const mode = (textArg: string | undefined): number => (textArg !== undefined && /^[0-7]{3,4}$/.test(textArg) ? Number.parseInt(textArg, 8) : Number.NaN);
    if (words[1] === 'empty' && words.length === 4 && words[2] === 'run-as') {
      initialization = { kind: 'empty', ownership: { kind: 'run-as', mode: mode(words[3]) } };
    } else if (words[1] === 'empty' && words.length === 4 && /^\d+:\d+$/.test(words[2] ?? '')) {
      const [uid, gid] = (words[2] ?? '').split(':').map(Number);
      initialization = { kind: 'empty', ownership: { kind: 'explicit', uid: uid ?? Number.NaN, gid: gid ?? Number.NaN, mode: mode(words[3]) } };
    } else if (words[1] === 'import' && words.length === 3) {
      initialization = { kind: 'import', source: { kind: 'docker-volume', volumeName: words[2] ?? '' } };
    } else {
      reasons.push(`${path} must be written "<mount path> empty run-as <octal mode>", "<mount path> empty <uid>:<gid> <octal mode>" or "<mount path> import <docker volume>"`);
      return;
    }
    if (!mountPathsArg.includes(mountPath)) {
      reasons.push(`${path} names ${mountPath}, which is not one of the volumes`);
      return;
    }
    if (initializations.some((planned) => planned.mountPath === mountPath)) {
      reasons.push(`${path} names ${mountPath} a second time`);
      return;
    }
    const invalid = validateServiceVolumeInitialization(initialization, path);
    if (invalid.length > 0) {
      reasons.push(...invalid);
      return;
    }
    initializations.push({ mountPath, initialization });
  });
  return { initializations, reasons };
};

/** Why the runtime would refuse a service because of one of its volumes. */
export interface IVolumeRefusal {
  mountPath: string;
  reason: 'volume-initialization-unknown' | 'volume-ownership-unknown';
  why: string;
  instead: string;
}

/**
 * The volume refusals a service would get from the runtime, judged by the contracts' own rule
 * (`judgeServiceVolumeInitializationUse`) on the service a dry run answered, with the
 * initializations about to be set after it (a new service's, which `createService` cannot carry).
 */
export const volumeRefusalsOf = (
  serviceArg: { runtime: IServiceRuntimeSpec; volumes: Array<{ mountPath: string; initialization?: TServiceVolumeInitialization }> },
  plannedArg: readonly IPlannedVolumeInitialization[] = [],
): IVolumeRefusal[] => serviceArg.volumes.flatMap((volume) => {
  const planned = plannedArg.find((entry) => entry.mountPath === volume.mountPath)?.initialization;
  const use = judgeServiceVolumeInitializationUse(planned ?? volume.initialization ?? null, serviceArg.runtime.profile?.runAs ?? null);
  return use.usable ? [] : [{ mountPath: volume.mountPath, reason: use.reason, why: use.why, instead: use.instead }];
});

/** The writable part of a stored service (what `updateService` takes back). */
export const writableSpecOf = (serviceArg: IServiceWritableSpec & { volumes: Array<TServiceWritableVolume & { initialization?: unknown; id?: unknown }> }): IServiceWritableSpec => ({
  name: serviceArg.name,
  organizationId: serviceArg.organizationId,
  clusterId: serviceArg.clusterId,
  runtime: serviceArg.runtime,
  ...placePortsAndRoutes(serviceArg.ports ?? [], serviceArg.routes ?? []),
  // The server owns `id` and `initialization`; every other member goes back as read.
  volumes: serviceArg.volumes.map(({ initialization: _initialization, id: _id, ...writable }: TServiceWritableVolume & { initialization?: unknown; id?: unknown }) => writable),
  ...withUneditedMembersOf(serviceArg, {}),
});

/** The members the service form does not edit (environment, secrets, readiness target, network policy), as read, over a spec from the form. */
export const withUneditedMembersOf = <T extends object>(
  serviceArg: Pick<IServiceWritableSpec, 'environment' | 'secrets' | 'readiness' | 'networkPolicy'>,
  specArg: T,
): T & Pick<IServiceWritableSpec, 'environment' | 'secrets' | 'readiness' | 'networkPolicy'> => ({
  ...specArg,
  ...(serviceArg.environment && Object.keys(serviceArg.environment).length > 0 ? { environment: serviceArg.environment } : {}),
  ...(serviceArg.secrets && Object.keys(serviceArg.secrets).length > 0 ? { secrets: serviceArg.secrets } : {}),
  ...(serviceArg.readiness ? { readiness: serviceArg.readiness } : {}),
  ...(serviceArg.networkPolicy ? { networkPolicy: serviceArg.networkPolicy } : {}),
});

// ---- operations ----

/** Operations running first (oldest start first: the one waiting longest), then the others newest first. */
export const sortOperations = (operationsArg: readonly IOperation[]): IOperation[] =>
  [...operationsArg].sort((left, right) => {
    const leftRunning = left.state === 'running' ? 0 : 1;
    const rightRunning = right.state === 'running' ? 0 : 1;
    if (leftRunning !== rightRunning) {
      return leftRunning - rightRunning;
    }
    return leftRunning === 0 ? left.startedAt - right.startedAt : (right.endedAt ?? right.startedAt) - (left.endedAt ?? left.startedAt);
  });

/** A duration in words for a table cell: `850 ms`, `7.2 s`, `3 min 04 s`. */
export const formatDuration = (msArg: number): string => {
  if (!Number.isFinite(msArg) || msArg < 0) {
    return '—';
  }
  if (msArg < 1000) {
    return `${Math.round(msArg)} ms`;
  }
  if (msArg < 60_000) {
    return `${(msArg / 1000).toFixed(1)} s`;
  }
  const minutes = Math.floor(msArg / 60_000);
  const seconds = Math.floor((msArg % 60_000) / 1000);
  return `${minutes} min ${String(seconds).padStart(2, '0')} s`;
};

// ---- relays ----

/**
 * What kind of relay a registration says it is: the simulator (`cloudly-sim`, docs/simulator.md)
 * registers with version `cloudly-sim/<n>`; anything else is taken for a real cluster's relay.
 */
export const describeRelayKind = (versionArg: string | null | undefined): 'simulated' | 'cluster' | 'unknown' =>
  typeof versionArg !== 'string' ? 'unknown' : /^cloudly-sim\//.test(versionArg) ? 'simulated' : 'cluster';

/**
 * How many of a cluster's nodes the relay has reported, and how many it has not yet. Decided by
 * the node's last report (`reportedAt`), the same fact the node's row shows: a node an
 * administrator added (`source: 'admin'`) that the relay then reported counts as reported.
 */
export const countNodeReports = (nodesArg: ReadonlyArray<{ reportedAt?: number }>): { reported: number; unreported: number } => ({
  reported: nodesArg.filter((node) => node.reportedAt !== undefined).length,
  unreported: nodesArg.filter((node) => node.reportedAt === undefined).length,
});

// ---- routes of the ingress ----

/**
 * A route that is not ready, in the operator's words: what is missing, named, and what fixes it.
 * Decided by Cloudly's cause token (`getClusterRouteTableResolution`), never by its sentence.
 */
export const describeUnresolvedRoute = (
  routeArg: { cause: TClusterUnresolvedRouteCause; port: number },
  namesArg: { service: string; ingress: string | null },
): { problem: string; fix: string } => {
  const ingress = namesArg.ingress === null ? 'the ingress service' : `the ingress service ${namesArg.ingress}`;
  const runs = namesArg.ingress ?? 'the ingress service';
  switch (routeArg.cause) {
    case 'no-ingress-designation':
      return { problem: 'No service is designated as this cluster\'s ingress, so nothing answers for this hostname.', fix: 'Designate an ingress service above (Designate ingress…).' };
    case 'ingress-without-lease':
      return { problem: `${ingress.charAt(0).toUpperCase()}${ingress.slice(1)} has no workload address yet.`, fix: 'Write an address plan with a workload pool (Address plan page): Cloudly then leases it an address.' };
    case 'ingress-lease-unconfirmed':
      return { problem: `No node has applied the address of ${ingress} yet.`, fix: `Wait for the cluster's relay to report it; if it does not, check that the relay is connected and ${runs} runs.` };
    case 'service-without-lease':
      return { problem: `Service ${namesArg.service} has no workload address yet.`, fix: 'Write an address plan with a workload pool (Address plan page): Cloudly then leases it an address.' };
    case 'service-lease-unconfirmed':
      return { problem: `No node has applied the address of service ${namesArg.service} yet.`, fix: `Wait for the cluster's relay to report it; if it does not, check that the relay is connected and ${namesArg.service} runs.` };
    case 'ingress-grant-missing':
      return { problem: `No node lets ${runs} reach ${namesArg.service} on port ${routeArg.port} yet.`, fix: `Wait for the nodes' next network projection; if it stays so, check that ${namesArg.service} declares port ${routeArg.port}/tcp and the relay is connected.` };
  }
};

// ---- assignment views ----

/** The badge tone of each slot condition, one of the runtime state styles: a stale slot is grey, never green. */
const assignmentTones: Record<IServiceRuntimeAssignmentView['condition'], string> = {
  unassigned: 'unjudged',
  stale: 'unknown',
  'awaiting-report': 'waiting',
  outdated: 'converging',
  starting: 'converging',
  running: 'converged',
  failed: 'refused',
  stopped: 'unjudged',
};

/**
 * One replica slot in the operator's words, decided by its condition token: the badge tone and a
 * sentence saying what is known of the slot and as of when.
 */
export const describeAssignment = (
  viewArg: Pick<IServiceRuntimeAssignmentView, 'condition' | 'nodeId' | 'observed' | 'stale' | 'specRevision'>,
  formatTimeArg: (msArg: number | null | undefined) => string,
): { tone: string; sentence: string } => {
  const tone = assignmentTones[viewArg.condition];
  const node = viewArg.nodeId ?? 'no node';
  const reported = viewArg.observed
    ? `${viewArg.observed.state} at spec revision ${viewArg.observed.specRevision}, reported ${formatTimeArg(viewArg.observed.reportedAt)}`
    : null;
  switch (viewArg.condition) {
    case 'unassigned':
      return { tone, sentence: 'No node of the cluster is eligible for this slot (see the placement).' };
    case 'stale':
      return {
        tone,
        sentence: `Stale: the cluster is not current (${viewArg.stale?.reason ?? 'unknown'} since ${formatTimeArg(viewArg.stale?.since)}). `
          + (reported ? `Last known on ${node}: ${reported}.` : `Nothing was reported from ${node}.`),
      };
    case 'awaiting-report':
      return { tone, sentence: `Assigned to ${node}; no report of ${node} covers this slot yet.` };
    case 'outdated':
      return { tone, sentence: `${node} still runs an older revision (${reported}); the slot wants revision ${viewArg.specRevision}.` };
    default:
      return { tone, sentence: `On ${node}: ${reported}.` };
  }
};
