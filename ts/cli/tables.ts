import { renderRecord, renderTable } from './output.js';

/** Table views of the API's answers. JSON and YAML output never go through here. */

type TRow = Record<string, any>;

export const formatTime = (epochMsArg: unknown): string =>
  (typeof epochMsArg === 'number' ? new Date(epochMsArg).toISOString().slice(0, 16).replace('T', ' ') : '-');

const pageFooter = (answerArg: TRow): string =>
  (typeof answerArg.nextCursor === 'string' ? `\n(more: --cursor ${answerArg.nextCursor})` : '');

export const listTable = (
  itemsArg: TRow[] | undefined,
  columnsArg: Array<[string, (itemArg: TRow) => unknown]>,
  answerArg: TRow = {},
  emptyArg = '(none)',
): string => {
  const items = itemsArg ?? [];
  if (items.length === 0) {
    return `${emptyArg}${pageFooter(answerArg)}`;
  }
  return renderTable(columnsArg.map(([header]) => header), items.map((itemArg) => columnsArg.map(([, pick]) => pick(itemArg))))
    + pageFooter(answerArg);
};

export const clusterColumns: Array<[string, (itemArg: TRow) => unknown]> = [
  ['ID', (c) => c.id],
  ['NAME', (c) => c.name],
  ['GEN', (c) => c.generation],
  ['CREATED', (c) => formatTime(c.createdAt)],
];

export const nodeColumns: Array<[string, (itemArg: TRow) => unknown]> = [
  ['ID', (n) => n.id],
  ['NAME', (n) => n.name],
  ['SOURCE', (n) => n.source],
  ['GEN', (n) => n.generation],
  ['CORESTORE', (n) => n.corestore?.endpoint],
  ['ADDRESSES', (n) => n.hostAddresses?.join(',')],
];

export const serviceColumns: Array<[string, (itemArg: TRow) => unknown]> = [
  ['ID', (s) => s.id],
  ['NAME', (s) => s.name],
  ['CLUSTER', (s) => s.clusterId],
  ['IMAGE', (s) => s.runtime?.image],
  ['REPL', (s) => s.runtime?.replicas],
  ['GEN', (s) => s.generation],
  ['REV', (s) => s.specRevision],
];

export const bindingColumns: Array<[string, (itemArg: TRow) => unknown]> = [
  ['ID', (b) => b.id],
  ['SERVICE', (b) => b.serviceId],
  ['CAPABILITY', (b) => b.capability],
  ['ON', (b) => (b.enabled ? 'yes' : 'no')],
  ['NODE', (b) => b.nodeId],
  ['STATUS', (b) => (b.statusReason ? `${b.status} (${b.statusReason})` : b.status)],
  ['GEN', (b) => b.generation],
];

export const backupColumns: Array<[string, (itemArg: TRow) => unknown]> = [
  ['BACKUP', (b) => b.backupId],
  ['SERVICE', (b) => b.serviceId],
  ['NODE', (b) => b.nodeId],
  ['STATE', (b) => (b.failureReason ? `${b.state} (${b.failureReason})` : b.state)],
  ['SNAPSHOTS', (b) => b.snapshots?.length],
  ['CLOSURE', (b) => (b.closure ? 'yes' : 'no')],
  ['CREATED', (b) => formatTime(b.createdAt)],
];

export const imageVersionColumns: Array<[string, (itemArg: TRow) => unknown]> = [
  ['DIGEST', (v) => String(v.digest).slice(0, 16)],
  ['BYTES', (v) => v.byteLength],
  ['PUSHED BY', (v) => v.pushedByClusterId ?? 'admin'],
  ['STORED', (v) => formatTime(v.storedAt)],
];

export const auditColumns: Array<[string, (itemArg: TRow) => unknown]> = [
  ['AT', (e) => formatTime(e.at)],
  ['ACTOR', (e) => `${e.actor?.kind}:${e.actor?.id}`],
  ['METHOD', (e) => e.method],
  ['TARGET', (e) => `${e.target?.kind}/${e.target?.id}`],
  ['OUTCOME', (e) => e.outcome],
  ['GEN', (e) => `${e.generationBefore}->${e.generationAfter ?? 'x'}`],
];

/** One object: its scalar members as FIELD/VALUE rows, nested ones as compact JSON. */
export const recordTable = (recordArg: TRow | null | undefined, timeKeysArg: string[] = ['createdAt', 'updatedAt', 'acceptedAt', 'changedAt', 'reportedAt', 'expiresAt', 'at']): string => {
  if (!recordArg) {
    return '(none)';
  }
  const shown: TRow = {};
  for (const [key, value] of Object.entries(recordArg)) {
    shown[key] = timeKeysArg.includes(key) && typeof value === 'number' ? formatTime(value) : value;
  }
  return renderRecord(shown);
};

export const serviceTable = (serviceArg: TRow): string => {
  const summary = recordTable({
    id: serviceArg.id,
    name: serviceArg.name,
    organizationId: serviceArg.organizationId,
    clusterId: serviceArg.clusterId,
    generation: serviceArg.generation,
    specRevision: serviceArg.specRevision,
    image: serviceArg.runtime?.image,
    replicas: serviceArg.runtime?.replicas,
    runAs: serviceArg.runtime?.profile?.runAs ? `${serviceArg.runtime.profile.runAs.user}:${serviceArg.runtime.profile.runAs.group}` : null,
    placement: (serviceArg.runtime?.placement?.nodeIds ?? []).join(',') || null,
    ports: ((serviceArg.ports ?? []) as TRow[]).map((port) => `${port.name} ${port.port}/${port.protocol}`).join(', ') || null,
    routes: ((serviceArg.routes ?? []) as TRow[]).map((route) => `${route.hostname} -> ${route.targetPort}`).join(', ') || null,
    updatedAt: serviceArg.updatedAt,
  });
  const volumes = (serviceArg.volumes ?? []) as TRow[];
  if (volumes.length === 0) {
    return summary;
  }
  return `${summary}\n\n${listTable(volumes, [
    ['MOUNT PATH', (v) => v.mountPath],
    ['DRIVER', (v) => v.driver],
    ['RO', (v) => (v.readOnly ? 'yes' : 'no')],
    ['INITIALIZATION', (v) => describeInitialization(v.initialization)],
  ])}`;
};

export const describeInitialization = (initializationArg: TRow | undefined | null): string => {
  if (!initializationArg) {
    return '-';
  }
  if (initializationArg.kind === 'import') {
    return `import docker-volume ${initializationArg.source?.volumeName}`;
  }
  const ownership = initializationArg.ownership ?? {};
  const mode = typeof ownership.mode === 'number' ? `0${ownership.mode.toString(8)}` : '?';
  return ownership.kind === 'explicit'
    ? `empty ${ownership.uid}:${ownership.gid} ${mode}`
    : `empty run-as ${mode}`;
};
