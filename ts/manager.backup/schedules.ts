import { refuseNamed } from '../core/errors.js';
import { generatedOnCommit } from '../core/operationcontext.js';
import { adminMutation, adminQuery, type IDeclaredOperation } from '../core/operations.js';
import { defineDocumentKind, type DocumentStore, type IStoredDocument, type TDecision } from '../core/store.js';
import { fieldProblem, fieldProblemReasons, invalidField, isIdString, isNonNegativeInteger, problemsOfSentences, type IFieldProblem, type TFieldCheck } from '../core/validation.js';
import { findPage, nextCursorMember, oldestFirst, orderedPageShape } from '../core/pagination.js';
import { isPlainDataRecord } from '../interfaces/private/dataproperties.js';
import { validateArchiveRetentionPolicy } from '../interfaces/data/backup.js';
import type { IBackupSchedule, IBackupScheduleSpec, IBackupScheduleStatus } from '../interfaces/data/backupschedule.js';
import { randomUUID } from 'node:crypto';
import { parseCron } from './cron.js';
import { computeRetentionPlan, serviceBackupDeletionKind, toDeletionState } from './retentionplan.js';

/**
 * Backup schedules: the spec an administrator writes (`CloudlyBackupSchedule`, its generation is
 * what `updateBackupSchedule` and `deleteBackupSchedule` compare) and what the schedules
 * controller records of it (`CloudlyBackupScheduleState`, written only by that controller: the
 * next occurrence, the last run, the counts). Kept apart so the controller's writes never move
 * the generation an administrator read.
 */

export interface IBackupScheduleDocument extends IStoredDocument, IBackupScheduleSpec {
  createdAt: number;
  updatedAt: number;
  /** The target's service and cluster, when it names them, for the list's filters and the change feed's owners. */
  serviceId?: string;
  clusterId?: string;
}

export interface IBackupScheduleStateDocument extends IStoredDocument, IBackupScheduleStatus {
  /** Equal to the schedule's id. */
  scheduleId: string;
  /** The schedule generation this state was computed for: another one means the spec changed. */
  specGeneration: number;
  /**
   * The occurrence fired last whose backups may not all be ordered yet: set in the same write that
   * moves `nextRunAt` past it, cleared once every backup of it is ordered. A start finds it and
   * orders what is missing (each backup's id is derived from the occurrence, so none twice).
   */
  ordering?: { occurrenceAt: number; services: Array<{ serviceId: string; clusterId: string; nodeId: string; backupId: string; verify?: boolean }> };
}

export const backupScheduleKind = defineDocumentKind<IBackupScheduleDocument>('CloudlyBackupSchedule', {
  auditedFields: ['target', 'cron', 'jitterSeconds', 'startingDeadlineSeconds', 'verify', 'retention', 'drill'],
});
export const backupScheduleStateKind = defineDocumentKind<IBackupScheduleStateDocument>('CloudlyBackupScheduleState');

export const backupScheduleReasons = {
  scheduleNotFound: 'backup-schedule-not-found',
  scheduleExists: 'backup-schedule-exists',
  generationMismatch: 'generation-mismatch',
  targetNotFound: 'backup-schedule-target-not-found',
  drillNodeNotFound: 'backup-schedule-drill-node-not-found',
} as const;

/** Most seconds of jitter, and of starting deadline: a day. */
export const maximumJitterSeconds = 3_600;
export const maximumStartingDeadlineSeconds = 86_400 * 31;
/** Most backups between two drills of a schedule's service. */
export const maximumDrillEveryNth = 1_000;

const specKeys = ['target', 'cron', 'jitterSeconds', 'startingDeadlineSeconds', 'verify', 'retention', 'drill'] as const;
const targetKeys = ['serviceId', 'nodeId', 'clusterId', 'organizationId'] as const;

const boundedInteger = (valueArg: unknown, pathArg: string, maxArg: number): IFieldProblem[] =>
  (Number.isSafeInteger(valueArg) && (valueArg as number) >= 0 && (valueArg as number) <= maxArg
    ? []
    : [invalidField(pathArg, `must be an integer from 0 to ${maxArg}`)]);

const drillKeys = ['nodeId', 'everyNth'] as const;

/** Every problem of a schedule's drill: its members, and a target that spans clusters (one drill node cannot serve them). */
const drillProblems = (drillArg: unknown, pathArg: string, organizationTargetArg: boolean): IFieldProblem[] => {
  if (!isPlainDataRecord(drillArg)) {
    return [invalidField(pathArg, 'must be an object')];
  }
  const problems: IFieldProblem[] = [];
  for (const key of Object.keys(drillArg)) {
    if (!(drillKeys as readonly string[]).includes(key)) {
      problems.push(fieldProblem(`${pathArg}.${key.slice(0, 64)}`, fieldProblemReasons.unknown, 'is not a drill field'));
    }
  }
  if (drillArg.nodeId === undefined) {
    problems.push(fieldProblem(`${pathArg}.nodeId`, fieldProblemReasons.required, 'is required'));
  } else {
    problems.push(...isIdString(drillArg.nodeId, `${pathArg}.nodeId`));
  }
  if (drillArg.everyNth !== undefined && !(Number.isSafeInteger(drillArg.everyNth) && (drillArg.everyNth as number) >= 1 && (drillArg.everyNth as number) <= maximumDrillEveryNth)) {
    problems.push(invalidField(`${pathArg}.everyNth`, `must be an integer from 1 to ${maximumDrillEveryNth}`));
  }
  if (organizationTargetArg) {
    problems.push(fieldProblem(pathArg, fieldProblemReasons.forbidden, 'names a node of one cluster: the target must name a service or a cluster'));
  }
  return problems;
};

/** Every problem of a schedule's spec, each with its path: the target, each cron field, the retention. */
export const checkBackupScheduleSpec: TFieldCheck = (valueArg, pathArg) => {
  if (!isPlainDataRecord(valueArg)) {
    return [invalidField(pathArg, 'must be an object')];
  }
  const problems: IFieldProblem[] = [];
  for (const key of Object.keys(valueArg)) {
    if (!(specKeys as readonly string[]).includes(key)) {
      problems.push(fieldProblem(`${pathArg}.${key.slice(0, 64)}`, fieldProblemReasons.unknown, 'is not a schedule field'));
    }
  }
  const target = valueArg.target;
  if (!isPlainDataRecord(target)) {
    problems.push(valueArg.target === undefined
      ? fieldProblem(`${pathArg}.target`, fieldProblemReasons.required, 'is required')
      : invalidField(`${pathArg}.target`, 'must be an object'));
  } else {
    for (const key of Object.keys(target)) {
      if (!(targetKeys as readonly string[]).includes(key)) {
        problems.push(fieldProblem(`${pathArg}.target.${key.slice(0, 64)}`, fieldProblemReasons.unknown, 'is not a target field'));
      }
    }
    const named = (['serviceId', 'clusterId', 'organizationId'] as const).filter((keyArg) => target[keyArg] !== undefined);
    if (named.length !== 1) {
      problems.push(invalidField(`${pathArg}.target`, 'must name exactly one of serviceId, clusterId or organizationId'));
    }
    for (const key of targetKeys) {
      if (target[key] !== undefined) {
        problems.push(...isIdString(target[key], `${pathArg}.target.${key}`));
      }
    }
    if (target.nodeId !== undefined && target.serviceId === undefined) {
      problems.push(fieldProblem(`${pathArg}.target.nodeId`, fieldProblemReasons.forbidden, 'names a node only with serviceId'));
    }
  }
  if (typeof valueArg.cron !== 'string') {
    problems.push(valueArg.cron === undefined
      ? fieldProblem(`${pathArg}.cron`, fieldProblemReasons.required, 'is required')
      : invalidField(`${pathArg}.cron`, 'must be a string'));
  } else {
    const parsed = parseCron(valueArg.cron);
    if ('problems' in parsed) {
      problems.push(...parsed.problems.map((problemArg) =>
        invalidField(problemArg.field ? `${pathArg}.cron.${problemArg.field}` : `${pathArg}.cron`, problemArg.message)));
    }
  }
  if (valueArg.jitterSeconds !== undefined) {
    problems.push(...boundedInteger(valueArg.jitterSeconds, `${pathArg}.jitterSeconds`, maximumJitterSeconds));
  }
  if (valueArg.startingDeadlineSeconds !== undefined) {
    problems.push(...boundedInteger(valueArg.startingDeadlineSeconds, `${pathArg}.startingDeadlineSeconds`, maximumStartingDeadlineSeconds));
  }
  if (valueArg.verify !== undefined && typeof valueArg.verify !== 'boolean') {
    problems.push(invalidField(`${pathArg}.verify`, 'must be a boolean'));
  }
  if (valueArg.retention !== undefined) {
    const retentionProblems = problemsOfSentences(validateArchiveRetentionPolicy(valueArg.retention, `${pathArg}.retention`), `${pathArg}.retention`);
    problems.push(...retentionProblems);
    const retention = valueArg.retention;
    if (retentionProblems.length === 0 && isPlainDataRecord(retention) && Object.values(retention).every((countArg) => countArg === 0)) {
      problems.push(invalidField(`${pathArg}.retention`, 'keeps nothing: at least one count must be above 0'));
    }
  }
  if (valueArg.drill !== undefined) {
    problems.push(...drillProblems(valueArg.drill, `${pathArg}.drill`, isPlainDataRecord(target) && target.organizationId !== undefined));
  }
  return problems;
};

/** The spec as stored: exactly its members, the target's ids copied out for filters and owners. */
const storedSpecOf = (specArg: IBackupScheduleSpec, serviceClusterIdArg: string | undefined) => ({
  target: specArg.target,
  cron: specArg.cron.trim().split(/\s+/).join(' '),
  ...(specArg.jitterSeconds !== undefined ? { jitterSeconds: specArg.jitterSeconds } : {}),
  ...(specArg.startingDeadlineSeconds !== undefined ? { startingDeadlineSeconds: specArg.startingDeadlineSeconds } : {}),
  ...(specArg.verify !== undefined ? { verify: specArg.verify } : {}),
  ...(specArg.retention !== undefined ? { retention: specArg.retention } : {}),
  ...(specArg.drill !== undefined ? { drill: specArg.drill } : {}),
  ...('serviceId' in specArg.target ? { serviceId: specArg.target.serviceId } : {}),
  ...('clusterId' in specArg.target ? { clusterId: specArg.target.clusterId } : serviceClusterIdArg !== undefined ? { clusterId: serviceClusterIdArg } : {}),
});

const specMembers = ['target', 'cron', 'jitterSeconds', 'startingDeadlineSeconds', 'verify', 'retention', 'drill', 'serviceId', 'clusterId'] as const;

export const toPublicBackupSchedule = (docArg: IBackupScheduleDocument, stateArg: IBackupScheduleStateDocument | null): IBackupSchedule => ({
  scheduleId: docArg.id,
  generation: docArg.generation,
  createdAt: docArg.createdAt,
  updatedAt: docArg.updatedAt,
  target: docArg.target,
  cron: docArg.cron,
  ...(docArg.jitterSeconds !== undefined ? { jitterSeconds: docArg.jitterSeconds } : {}),
  ...(docArg.startingDeadlineSeconds !== undefined ? { startingDeadlineSeconds: docArg.startingDeadlineSeconds } : {}),
  ...(docArg.verify !== undefined ? { verify: docArg.verify } : {}),
  ...(docArg.retention !== undefined ? { retention: docArg.retention } : {}),
  ...(docArg.drill !== undefined ? { drill: docArg.drill } : {}),
  ...(stateArg ? {
    status: {
      state: stateArg.state,
      ...(stateArg.disabledReason !== undefined ? { disabledReason: stateArg.disabledReason } : {}),
      ...(stateArg.nextRunAt !== undefined ? { nextRunAt: stateArg.nextRunAt } : {}),
      ...(stateArg.lastRun !== undefined ? { lastRun: stateArg.lastRun } : {}),
      firedOccurrences: stateArg.firedOccurrences,
      skippedServices: stateArg.skippedServices,
      missedOccurrences: stateArg.missedOccurrences,
    },
  } : {}),
});

export const decideBackupScheduleCreation = (
  currentArg: IBackupScheduleDocument | null,
  scheduleIdArg: string,
  specArg: IBackupScheduleSpec,
  serviceClusterIdArg: string | undefined,
  nowArg: number,
): TDecision<IBackupScheduleDocument> => (currentArg
  ? { kind: 'refuse', refusal: refuseNamed('conflict', backupScheduleReasons.scheduleExists, `schedule ${scheduleIdArg} already exists`, 'request.scheduleId') }
  : { kind: 'create', doc: { id: scheduleIdArg, createdAt: nowArg, updatedAt: nowArg, ...storedSpecOf(specArg, serviceClusterIdArg) } });

const requireGeneration = (currentArg: IBackupScheduleDocument | null, scheduleIdArg: string, expectedGenerationArg: number): TDecision<IBackupScheduleDocument> | null => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', backupScheduleReasons.scheduleNotFound, `schedule ${scheduleIdArg} does not exist`, 'request.scheduleId') };
  }
  if (currentArg.generation !== expectedGenerationArg) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', backupScheduleReasons.generationMismatch, "is not the schedule's current generation", 'request.expectedGeneration') };
  }
  return null;
};

export const decideBackupScheduleUpdate = (
  currentArg: IBackupScheduleDocument | null,
  requestArg: { scheduleId: string; expectedGeneration: number; schedule: IBackupScheduleSpec },
  serviceClusterIdArg: string | undefined,
  nowArg: number,
): TDecision<IBackupScheduleDocument> => {
  const refused = requireGeneration(currentArg, requestArg.scheduleId, requestArg.expectedGeneration);
  if (refused) {
    return refused;
  }
  const next = storedSpecOf(requestArg.schedule, serviceClusterIdArg) as Record<string, unknown>;
  const unset = specMembers.filter((memberArg) => next[memberArg] === undefined && (currentArg as unknown as Record<string, unknown>)[memberArg] !== undefined);
  return { kind: 'write', change: { set: { ...next, updatedAt: nowArg } as Partial<IBackupScheduleDocument>, unset } };
};

export const decideBackupScheduleDeletion = (
  currentArg: IBackupScheduleDocument | null,
  requestArg: { scheduleId: string; expectedGeneration: number },
): TDecision<IBackupScheduleDocument> => requireGeneration(currentArg, requestArg.scheduleId, requestArg.expectedGeneration) ?? { kind: 'remove' };

export interface IBackupSchedulePorts {
  store: DocumentStore;
  /** The cluster of a service that exists and is not being deleted, else null. */
  clusterOfService(serviceIdArg: string): Promise<string | null>;
  clusterExists(clusterIdArg: string): Promise<boolean>;
  organizationExists(organizationIdArg: string): Promise<boolean>;
  nodeExists(clusterIdArg: string, nodeIdArg: string): Promise<boolean>;
}

/** Refuses a drill node its target's cluster does not have: a drill restores onto a node of the backups' cluster. */
const requireDrillNode = async (portsArg: IBackupSchedulePorts, specArg: IBackupScheduleSpec, clusterIdArg: string): Promise<void> => {
  if (specArg.drill && !(await portsArg.nodeExists(clusterIdArg, specArg.drill.nodeId))) {
    throw refuseNamed('not-found', backupScheduleReasons.drillNodeNotFound, `cluster ${clusterIdArg} has no node ${specArg.drill.nodeId}`, 'request.schedule.drill.nodeId');
  }
};

/** Refuses a target that names nothing that exists: a schedule is made for something. */
const targetFacts = async (portsArg: IBackupSchedulePorts, specArg: IBackupScheduleSpec): Promise<{ serviceClusterId?: string }> => {
  const target = specArg.target;
  const missing = (pathArg: string, messageArg: string) =>
    refuseNamed('not-found', backupScheduleReasons.targetNotFound, messageArg, `request.schedule.target.${pathArg}`);
  if ('serviceId' in target) {
    const clusterId = await portsArg.clusterOfService(target.serviceId);
    if (clusterId === null) {
      throw missing('serviceId', `service ${target.serviceId} does not exist`);
    }
    await requireDrillNode(portsArg, specArg, clusterId);
    return { serviceClusterId: clusterId };
  }
  if ('clusterId' in target) {
    if (!(await portsArg.clusterExists(target.clusterId))) {
      throw missing('clusterId', `cluster ${target.clusterId} does not exist`);
    }
    await requireDrillNode(portsArg, specArg, target.clusterId);
    return {};
  }
  if (!(await portsArg.organizationExists(target.organizationId))) {
    throw missing('organizationId', `organization ${target.organizationId} does not exist`);
  }
  return {};
};

export const backupScheduleOperations = (portsArg: IBackupSchedulePorts): IDeclaredOperation[] => {
  const { store } = portsArg;
  const withStatus = async (docArg: IBackupScheduleDocument): Promise<IBackupSchedule> =>
    toPublicBackupSchedule(docArg, await store.get(backupScheduleStateKind, docArg.id));

  return [
    adminMutation({
      method: 'createBackupSchedule',
      access: 'write',
      input: { required: { schedule: checkBackupScheduleSpec }, optional: { scheduleId: isIdString } },
      async facts(request) {
        const facts = await targetFacts(portsArg, request.schedule);
        if (request.scheduleId === undefined) {
          generatedOnCommit('schedule.scheduleId');
        }
        return { ...facts, scheduleId: request.scheduleId ?? `schedule-${randomUUID()}` };
      },
      target: (_request, facts) => ({ kind: backupScheduleKind, id: facts.scheduleId }),
      decide: (current, { request, facts, now }) => decideBackupScheduleCreation(current, facts.scheduleId, request.schedule, facts.serviceClusterId, now),
      answer: ({ doc }) => ({ schedule: toPublicBackupSchedule(doc!, null) }),
    }),

    adminMutation({
      method: 'updateBackupSchedule',
      access: 'write',
      input: { required: { scheduleId: isIdString, expectedGeneration: isNonNegativeInteger, schedule: checkBackupScheduleSpec } },
      facts: (request) => targetFacts(portsArg, request.schedule),
      target: (request) => ({ kind: backupScheduleKind, id: request.scheduleId }),
      decide: (current, { request, facts, now }) => decideBackupScheduleUpdate(current, request, facts.serviceClusterId, now),
      answer: async ({ doc }) => ({ schedule: await withStatus(doc!) }),
    }),

    adminMutation({
      method: 'deleteBackupSchedule',
      access: 'write',
      input: { required: { scheduleId: isIdString, expectedGeneration: isNonNegativeInteger } },
      target: (request) => ({ kind: backupScheduleKind, id: request.scheduleId }),
      decide: (current, { request }) => decideBackupScheduleDeletion(current, request),
      answer: async ({ previous }) => ({ schedule: await withStatus(previous!) }),
    }),

    adminQuery({
      method: 'getBackupRetentionPlan',
      access: 'read',
      input: { required: { scheduleId: isIdString } },
      async run(request) {
        const plan = await computeRetentionPlan(store, request.scheduleId);
        const deleting = await store.find(serviceBackupDeletionKind, { scheduleId: request.scheduleId }, { sort: { startedAt: 1 } });
        return { scheduleId: request.scheduleId, services: plan.services, deleting: deleting.map(toDeletionState) };
      },
    }),

    adminQuery({
      method: 'getBackupSchedules',
      access: 'read',
      input: { required: {}, optional: { serviceId: isIdString, clusterId: isIdString, ...orderedPageShape('getBackupSchedules', oldestFirst('createdAt')) } },
      async run(request) {
        const filter: Record<string, string> = {};
        if (request.serviceId !== undefined) filter.serviceId = request.serviceId;
        if (request.clusterId !== undefined) filter.clusterId = request.clusterId;
        const page = await findPage(store, backupScheduleKind, filter, 'getBackupSchedules', request, oldestFirst('createdAt'));
        const states = new Map((await store.findIn(backupScheduleStateKind, 'id', page.items.map((docArg) => docArg.id))).map((stateArg) => [stateArg.id, stateArg]));
        return { schedules: page.items.map((docArg) => toPublicBackupSchedule(docArg, states.get(docArg.id) ?? null)), ...nextCursorMember(page) };
      },
    }),
  ];
};
