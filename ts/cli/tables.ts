import { isDrawingWide, renderRecord, renderTable } from './output.js';

/** Table views of the API's answers. JSON and YAML output never go through here (they keep raw values). */

type TRow = Record<string, any>;

/**
 * A column: its header, what it shows, and `'wide'` when only `-o wide` shows it. A type of
 * its own so the lists of every command say the same thing.
 */
export type TColumn<T = TRow> = [string, (itemArg: T) => unknown, 'wide'?];

/** Every time the tables show, in one form: UTC to the second, as `2026-12-01 17:02:03`. */
export const formatTime = (epochMsArg: unknown): string =>
  (typeof epochMsArg === 'number' && Number.isFinite(epochMsArg) ? new Date(epochMsArg).toISOString().slice(0, 19).replace('T', ' ') : '-');

/** The contract names every epoch-milliseconds member `…At` (createdAt, readAt, heartbeatAt, …). */
const isTimeKey = (keyArg: string): boolean => keyArg === 'at' || /[a-z]At$/.test(keyArg);

/** A copy of an answer for the eye: every `…At` number, however deep, as `formatTime` writes it. */
export const withFormattedTimes = (valueArg: unknown): unknown => {
  if (Array.isArray(valueArg)) {
    return valueArg.map(withFormattedTimes);
  }
  if (typeof valueArg === 'object' && valueArg !== null) {
    return Object.fromEntries(Object.entries(valueArg).map(([key, value]) =>
      [key, isTimeKey(key) && typeof value === 'number' ? formatTime(value) : withFormattedTimes(value)]));
  }
  return valueArg;
};

const pageFooter = (answerArg: TRow): string =>
  (typeof answerArg.nextCursor === 'string' ? `\n(more: --cursor ${answerArg.nextCursor})` : '');

export const listTable = <T extends TRow>(
  itemsArg: T[] | undefined,
  columnsArg: Array<TColumn<T>>,
  answerArg: TRow = {},
  emptyArg = '(none)',
): string => {
  const items = itemsArg ?? [];
  if (items.length === 0) {
    return `${emptyArg}${pageFooter(answerArg)}`;
  }
  const wide = isDrawingWide();
  const columns = columnsArg.filter(([, , onlyWide]) => wide || onlyWide !== 'wide');
  return renderTable(columns.map(([header]) => header), items.map((itemArg) => columns.map(([, pick]) => pick(itemArg))))
    + pageFooter(answerArg);
};

export const clusterColumns: TColumn[] = [
  ['ID', (c) => c.id],
  ['NAME', (c) => c.name],
  ['GEN', (c) => c.generation],
  ['LABELS', (c) => Object.entries(c.labels ?? {}).map(([key, value]) => `${key}=${value}`).join(','), 'wide'],
  ['CREATED', (c) => formatTime(c.createdAt)],
  ['UPDATED', (c) => formatTime(c.updatedAt), 'wide'],
];

export const nodeColumns: TColumn[] = [
  ['ID', (n) => n.id],
  ['NAME', (n) => n.name],
  ['SOURCE', (n) => n.source],
  ['GEN', (n) => n.generation],
  ['CORESTORE', (n) => n.corestore?.endpoint],
  ['ADDRESSES', (n) => n.hostAddresses?.join(',')],
  ['CLUSTER', (n) => n.clusterId, 'wide'],
  ['CREATED', (n) => formatTime(n.createdAt), 'wide'],
];

/**
 * The verdict a list shows for a service: `unknown <reason>` while what Cloudly shows of it is not
 * current (the overview's `unknown`), else the stored state with its reason, `-` before the first.
 */
export const serviceVerdictText = (runtimeStatusArg: { state: string; reason: string | null } | null, unknownArg: { reason: string } | null): string =>
  unknownArg ? `unknown ${unknownArg.reason}` : runtimeStatusArg ? [runtimeStatusArg.state, runtimeStatusArg.reason].filter(Boolean).join(' ') : '-';

/** `services list`: a service with its cluster's name and its verdict (`serviceListRows`). */
export const serviceListColumns: TColumn[] = [
  ['ID', (s) => s.id],
  ['NAME', (s) => s.name],
  ['CLUSTER', (s) => s.clusterName ?? s.clusterId],
  ['STATUS', (s) => s.verdict],
  ['CLUSTER ID', (s) => s.clusterId, 'wide'],
  ['IMAGE', (s) => s.runtime?.image],
  ['REPL', (s) => s.runtime?.replicas],
  ['GEN', (s) => s.generation],
  ['REV', (s) => s.specRevision],
  ['ORGANIZATION', (s) => s.organizationId, 'wide'],
  ['RUN AS', (s) => (s.runtime?.profile?.runAs ? `${s.runtime.profile.runAs.user}:${s.runtime.profile.runAs.group}` : null), 'wide'],
  ['PLACEMENT', (s) => (s.runtime?.placement?.nodeIds ?? []).join(',') || null, 'wide'],
  ['VOLUMES', (s) => s.volumes?.length ?? 0, 'wide'],
  ['UPDATED', (s) => formatTime(s.updatedAt), 'wide'],
];

export const bindingColumns: TColumn[] = [
  ['ID', (b) => b.id],
  ['SERVICE', (b) => b.serviceId],
  ['CAPABILITY', (b) => b.capability],
  ['ON', (b) => (b.enabled ? 'yes' : 'no')],
  ['NODE', (b) => b.nodeId],
  ['STATUS', (b) => (b.statusReason ? `${b.status} (${b.statusReason})` : b.status)],
  ['GEN', (b) => b.generation],
  ['CLUSTER', (b) => b.clusterId, 'wide'],
  ['UPDATED', (b) => formatTime(b.updatedAt), 'wide'],
];

export const backupColumns: TColumn[] = [
  ['BACKUP', (b) => b.backupId],
  ['SERVICE', (b) => b.serviceId],
  ['NODE', (b) => b.nodeId],
  ['STATE', (b) => (b.failureReason ? `${b.state} (${b.failureReason})` : b.state)],
  ['SNAPSHOTS', (b) => b.snapshots?.length],
  ['CLOSURE', (b) => (b.closure ? 'yes' : 'no')],
  ['CREATED', (b) => formatTime(b.createdAt)],
  ['CLUSTER', (b) => b.clusterId, 'wide'],
  ['CLOSURE BYTES', (b) => b.closure?.descriptor?.byteLength, 'wide'],
  ['TAGS', (b) => Object.entries(b.tags ?? {}).map(([key, value]) => `${key}=${value}`).join(',') || null, 'wide'],
];

export const imageVersionColumns: TColumn[] = [
  ['DIGEST', (v) => String(v.digest).slice(0, 16)],
  ['BYTES', (v) => v.byteLength],
  ['PUSHED BY', (v) => v.pushedByClusterId ?? 'admin'],
  ['STORED', (v) => formatTime(v.storedAt)],
];

/**
 * The audit log's columns. `usernamesArg` names the administrators by user id: an admin actor is
 * shown by username (its id only with `-o wide`), relays and Cloudly itself by kind.
 */
/** An update's changed fields as `field: before → after`, `; ` between them; `-` when the event names none. */
export const changedText = (changedArg: Array<{ field: string; before: unknown; after: unknown }> | undefined): string =>
  (changedArg && changedArg.length > 0
    ? changedArg.map(({ field, before, after }) => `${field}: ${JSON.stringify(before)} → ${JSON.stringify(after)}`).join('; ')
    : '-');

export const auditColumns = (usernamesArg: ReadonlyMap<string, string> = new Map(), targetNamesArg: ReadonlyMap<string, string> = new Map()): TColumn[] => [
  ['AT', (e) => formatTime(e.at)],
  ['ACTOR', (e) => (e.actor?.kind === 'admin' ? usernamesArg.get(e.actor.id) ?? e.actor.id : e.actor?.kind === 'cloudly' ? 'cloudly' : e.actor?.id)],
  ['METHOD', (e) => e.method],
  ['TARGET', (e) => `${e.target?.kind}/${e.target?.id}`],
  ['NAME', (e) => targetNamesArg.get(`${e.target?.kind}/${e.target?.id}`) ?? '-'],
  ['OUTCOME', (e) => e.outcome],
  ['GEN', (e) => `${e.generationBefore}->${e.generationAfter ?? 'x'}`],
  ['CHANGED', (e) => changedText(e.changed)],
  ['ACTOR ID', (e) => `${e.actor?.kind}:${e.actor?.id}`, 'wide'],
  ['MUTATION ID', (e) => e.mutationId, 'wide'],
  ['CAUSE', (e) => (e.cause ? `${e.cause.kind}/${e.cause.id}` : null), 'wide'],
];

/** One object: its members as FIELD/VALUE rows (output.ts, renderRecord), every time formatted. */
export const recordTable = (recordArg: TRow | null | undefined): string => {
  if (!recordArg) {
    return '(none)';
  }
  return renderRecord(withFormattedTimes(recordArg) as TRow);
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

/** A legacy resource's adoption in a word or two: `unadopted`, `unadopted (blocker)`, `authorized <binding>`. */
const describeAdoption = (adoptionArg: TRow | undefined): string => {
  if (!adoptionArg) {
    return '-';
  }
  if (adoptionArg.state === 'authorized') {
    return `authorized ${adoptionArg.bindingId}`;
  }
  return adoptionArg.blocker ? `${adoptionArg.state} (${adoptionArg.blocker})` : String(adoptionArg.state);
};

/**
 * `getCorestoreLegacyResources` as a table: the node's read (digest, reachability, when) and one
 * row per resource of every service (the contract nests them under `inventory.services[].resources`).
 */
export const corestoreInventoryTable = (answerArg: TRow): string => {
  const inventory = (answerArg.inventory ?? {}) as TRow;
  const services = (Array.isArray(inventory.services) ? inventory.services : []) as TRow[];
  const summary = recordTable({
    digest: answerArg.inventorySha256 ?? null,
    nodeId: inventory.nodeId,
    reachable: inventory.reachable,
    ...(inventory.reachable === false ? { errorCode: inventory.errorCode } : {}),
    readAt: inventory.readAt,
    services: services.length,
  });
  const rows = services.flatMap((serviceArg) => ((serviceArg.resources ?? []) as TRow[])
    .map((resourceArg): TRow => ({ serviceId: serviceArg.serviceId, ...resourceArg })));
  return `${summary}\n\n${listTable(rows, [
    ['SERVICE', (r) => r.serviceId],
    ['CAPABILITY', (r) => r.capability],
    ['NAME', (r) => (r.capability === 'database' ? r.databaseName : r.bucketName)],
    ['ADOPTION', (r) => describeAdoption(r.adoption)],
    ['RETENTION', (r) => (r.retention ? `${r.retention.mode} ${r.retention.days}d` : '-')],
  ], {}, inventory.reachable === false ? '(the node\'s Corestore could not be read)' : '(no resources)')}`;
};

/** Every leaf of a value as `path → JSON text`: objects by their members, arrays whole. */
const flattenForDiff = (valueArg: unknown, pathArg: string, intoArg: Map<string, string>): void => {
  if (typeof valueArg === 'object' && valueArg !== null && !Array.isArray(valueArg) && Object.keys(valueArg).length > 0) {
    for (const [key, value] of Object.entries(valueArg)) {
      flattenForDiff(value, pathArg ? `${pathArg}.${key}` : key, intoArg);
    }
    return;
  }
  if (valueArg !== undefined) {
    intoArg.set(pathArg, typeof valueArg === 'string' ? valueArg : JSON.stringify(withFormattedTimes(valueArg)));
  }
};

/**
 * What differs between two versions of a record, one row per changed field (`runtime.image`,
 * `routes`: arrays are compared whole), as `before → after`, in the order of the fields; members
 * named in `skipArg` (the server's bookkeeping: generation, timestamps) are left out.
 */
export const fieldDiff = (beforeArg: TRow, afterArg: TRow, skipArg: readonly string[] = []): Array<[string, string]> => {
  const before = new Map<string, string>();
  const after = new Map<string, string>();
  flattenForDiff(beforeArg, '', before);
  flattenForDiff(afterArg, '', after);
  const paths = [...new Set([...before.keys(), ...after.keys()])].filter((pathArg) => !skipArg.includes(pathArg));
  return paths
    .filter((pathArg) => before.get(pathArg) !== after.get(pathArg))
    .map((pathArg) => [pathArg, `${before.get(pathArg) ?? '(none)'} → ${after.get(pathArg) ?? '(none)'}`]);
};

/** A dry run's changes as a FIELD / CHANGE table, or a line saying there are none. */
export const diffTable = (rowsArg: Array<[string, string]>): string =>
  (rowsArg.length === 0 ? '(no field would change)' : renderTable(['FIELD', 'CHANGE'], rowsArg, Number.POSITIVE_INFINITY));
