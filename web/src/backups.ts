/**
 * The Backups page's and the service page's backup decisions as pure functions (no DOM, no Lit),
 * tested in the unit lane (test/dashboard.backups.decision.test.ts): a schedule's target, status and
 * last run in words, a retention plan as rows, and a backup's verification badge.
 */
import type { IArchiveRetentionPolicy } from '../../ts/interfaces/data/backup.js';
import type { IBackupSchedule, IBackupScheduleRun, IBackupScheduleSpec, TBackupScheduleTarget } from '../../ts/interfaces/data/backupschedule.js';
import type { IBackupRetentionDecision, IServiceBackupRecord } from '../../ts/interfaces/requests/backup.js';
import type { IChangeEvent } from '../../ts/interfaces/requests/watch.js';

/** A schedule's target in words; `nameOf` names a service or cluster id when the page knows it. */
export const describeScheduleTarget = (targetArg: TBackupScheduleTarget, nameOfArg: (idArg: string) => string = (idArg) => idArg): string => {
  if ('serviceId' in targetArg) {
    return `service ${nameOfArg(targetArg.serviceId)}${targetArg.nodeId ? ` on node ${targetArg.nodeId}` : ''}`;
  }
  if ('clusterId' in targetArg) {
    return `every service of cluster ${nameOfArg(targetArg.clusterId)}`;
  }
  return `every service of organization ${targetArg.organizationId}`;
};

/** What the page says of a schedule's state: `enabled`, `disabled` with the controller's reason, or not looked at yet. */
export interface IScheduleStateView {
  state: 'enabled' | 'disabled' | 'pending';
  text: string;
}

export const scheduleStateOf = (scheduleArg: IBackupSchedule): IScheduleStateView => {
  const status = scheduleArg.status;
  if (!status) {
    return { state: 'pending', text: 'not looked at by the schedules controller yet' };
  }
  if (status.state === 'disabled') {
    return { state: 'disabled', text: `disabled: ${status.disabledReason ?? 'no reason recorded'}` };
  }
  return { state: 'enabled', text: 'enabled' };
};

/**
 * The last occurrence's outcome as far as the schedule records it: the backups it ordered and the
 * services it skipped with their reasons. `undefined` run: it never fired.
 */
export const describeLastRun = (runArg: IBackupScheduleRun | undefined): { outcome: 'never' | 'ordered' | 'partly-skipped' | 'skipped'; text: string } => {
  if (!runArg) {
    return { outcome: 'never', text: 'has not fired yet' };
  }
  const ordered = runArg.backupIds.length;
  const skips = runArg.skipped.map((skip) => `${skip.serviceId ?? skip.clusterId ?? 'schedule'}: ${skip.reason}${skip.detail ? ` (${skip.detail})` : ''}`);
  const outcome = skips.length === 0 ? 'ordered' : ordered === 0 ? 'skipped' : 'partly-skipped';
  return {
    outcome,
    text: `${ordered} backup(s) ordered${skips.length > 0 ? `; skipped ${skips.join(', ')}` : ''}`,
  };
};

/** A retention policy in the restic words it follows. */
export const describeRetention = (policyArg: IArchiveRetentionPolicy | undefined): string => {
  if (!policyArg) {
    return 'no retention: every backup of it is kept';
  }
  const parts = [
    policyArg.keepLast ? `last ${policyArg.keepLast}` : '',
    policyArg.keepDaily ? `${policyArg.keepDaily} daily` : '',
    policyArg.keepWeekly ? `${policyArg.keepWeekly} weekly` : '',
    policyArg.keepMonthly ? `${policyArg.keepMonthly} monthly` : '',
  ].filter((part) => part !== '');
  return `keep ${parts.join(', ')}`;
};

/** One row of a retention dry run. */
export interface IRetentionRow extends IBackupRetentionDecision {
  serviceId: string;
}

/** A retention plan as rows, newest first per service, and the counts the heading says. */
export const retentionRowsOf = (
  servicesArg: ReadonlyArray<{ serviceId: string; decisions: IBackupRetentionDecision[] }>,
): { rows: IRetentionRow[]; keep: number; remove: number } => {
  const rows = servicesArg.flatMap((service) => [...service.decisions]
    .sort((a, b) => b.createdAt - a.createdAt)
    .map((decision) => ({ ...decision, serviceId: service.serviceId })));
  return { rows, keep: rows.filter((row) => row.action === 'keep').length, remove: rows.filter((row) => row.action === 'remove').length };
};

/** The words of a retention reason token. */
export const describeRetentionReason = (reasonArg: string): string => {
  if (reasonArg.startsWith('last-')) {
    return `one of the last ${reasonArg.slice('last-'.length)}`;
  }
  const [period, key] = reasonArg.split(' ');
  if (key && (period === 'daily' || period === 'weekly' || period === 'monthly')) {
    return `newest of ${period === 'daily' ? 'day' : period === 'weekly' ? 'week' : 'month'} ${key}`;
  }
  switch (reasonArg) {
    case 'newest-verified':
      return 'the newest verified backup of the service (never removed)';
    case 'in-use':
      return 'used by a running restore or operation';
    case 'outside-policy':
      return 'outside the policy';
    case 'failed':
      return 'a failed backup';
    default:
      return reasonArg;
  }
};

/** A backup's verification as a badge: `ok`, `mismatch`, `missing`, or `not-verified`. */
export interface IVerificationBadge {
  outcome: 'ok' | 'mismatch' | 'missing' | 'not-verified';
  className: string;
  /** What the title says: when it was verified and, for a failure, the object and the problem. */
  detail: string;
  verifiedAt: number | null;
}

export const verificationBadgeOf = (backupArg: Pick<IServiceBackupRecord, 'verification'>, formatTimeArg: (msArg: number) => string): IVerificationBadge => {
  const verification = backupArg.verification;
  if (!verification) {
    return { outcome: 'not-verified', className: '', detail: 'never read back and hashed', verifiedAt: null };
  }
  const failed = verification.failedObject;
  const failure = failed ? `: ${failed.path} ${failed.problem}` : '';
  return {
    outcome: verification.outcome,
    className: verification.outcome === 'ok' ? 'state-converged' : 'state-refused',
    detail: `verified ${formatTimeArg(verification.verifiedAt)}, ${verification.checkedObjects} object(s) read${failure}`,
    verifiedAt: verification.verifiedAt,
  };
};

/** Whether a change is one the Backups page shows: a schedule, its state, or a backup. */
export const isBackupsPageChange = (changeArg: IChangeEvent): boolean =>
  changeArg.kind === 'CloudlyBackupSchedule' || changeArg.kind === 'CloudlyBackupScheduleState' || changeArg.kind === 'CloudlyServiceBackup';

/**
 * The backups a schedule's last run ordered, each with its state when the page holds that backup
 * (`unknown` when it is not among those read: on another page of the list, or removed by retention).
 */
export const lastRunBackupStates = (
  runArg: IBackupScheduleRun | undefined,
  backupsArg: ReadonlyArray<Pick<IServiceBackupRecord, 'backupId' | 'state' | 'failureReason'>>,
): Array<{ backupId: string; state: IServiceBackupRecord['state'] | 'unknown'; failureReason?: string }> =>
  (runArg?.backupIds ?? []).map((backupId) => {
    const backup = backupsArg.find((candidate) => candidate.backupId === backupId);
    return backup
      ? { backupId, state: backup.state, ...(backup.failureReason ? { failureReason: backup.failureReason } : {}) }
      : { backupId, state: 'unknown' as const };
  });

// ---- the schedule form ----

export const scheduleTargetKinds = ['service', 'cluster', 'organization'] as const;
export type TScheduleTargetKind = typeof scheduleTargetKinds[number];

/** What the schedule form holds as typed. Empty numbers are left out of the spec. */
export interface IScheduleFormFields {
  targetKind: TScheduleTargetKind;
  targetId: string;
  /** Only with a service target; empty: Cloudly picks the node. */
  nodeId: string;
  cron: string;
  jitterSeconds: string;
  startingDeadlineSeconds: string;
  verify: boolean;
  keepLast: string;
  keepDaily: string;
  keepWeekly: string;
  keepMonthly: string;
}

export const emptyScheduleForm = (): IScheduleFormFields => ({
  targetKind: 'service', targetId: '', nodeId: '', cron: '', jitterSeconds: '', startingDeadlineSeconds: '', verify: true,
  keepLast: '', keepDaily: '', keepWeekly: '', keepMonthly: '',
});

const numberText = (valueArg: number | undefined): string => (valueArg === undefined ? '' : String(valueArg));

/** A stored schedule as the form's fields, to edit it. */
export const scheduleFormOf = (scheduleArg: IBackupScheduleSpec): IScheduleFormFields => {
  const target = scheduleArg.target;
  const [targetKind, targetId] = 'serviceId' in target
    ? ['service' as const, target.serviceId]
    : 'clusterId' in target ? ['cluster' as const, target.clusterId] : ['organization' as const, target.organizationId];
  return {
    targetKind, targetId, nodeId: 'serviceId' in target ? target.nodeId ?? '' : '', cron: scheduleArg.cron,
    jitterSeconds: numberText(scheduleArg.jitterSeconds), startingDeadlineSeconds: numberText(scheduleArg.startingDeadlineSeconds),
    verify: scheduleArg.verify === true,
    keepLast: numberText(scheduleArg.retention?.keepLast), keepDaily: numberText(scheduleArg.retention?.keepDaily),
    keepWeekly: numberText(scheduleArg.retention?.keepWeekly), keepMonthly: numberText(scheduleArg.retention?.keepMonthly),
  };
};

/** The spec of a stored schedule, as `updateBackupSchedule` takes it (what the review compares). */
export const specOfSchedule = (scheduleArg: IBackupSchedule): IBackupScheduleSpec => ({
  target: scheduleArg.target,
  cron: scheduleArg.cron,
  ...(scheduleArg.jitterSeconds === undefined ? {} : { jitterSeconds: scheduleArg.jitterSeconds }),
  ...(scheduleArg.startingDeadlineSeconds === undefined ? {} : { startingDeadlineSeconds: scheduleArg.startingDeadlineSeconds }),
  ...(scheduleArg.verify === undefined ? {} : { verify: scheduleArg.verify }),
  ...(scheduleArg.retention === undefined ? {} : { retention: scheduleArg.retention }),
});

/**
 * The form as a schedule spec, or the reasons it cannot be sent: what the form itself can tell (a
 * missing target or cron, a number that is not a whole number). The cron's fields, the ranges and a
 * retention that keeps nothing are Cloudly's to judge: its dry run names each with its path.
 */
export const scheduleSpecOfForm = (fieldsArg: IScheduleFormFields): { spec?: IBackupScheduleSpec; reasons: string[] } => {
  const reasons: string[] = [];
  const whole = (nameArg: string, textArg: string): number | undefined => {
    const text = textArg.trim();
    if (text === '') {
      return undefined;
    }
    if (!/^\d+$/.test(text)) {
      reasons.push(`${nameArg}: "${text}" is not a whole number`);
      return undefined;
    }
    return Number(text);
  };
  const targetId = fieldsArg.targetId.trim();
  const nodeId = fieldsArg.nodeId.trim();
  const cron = fieldsArg.cron.trim().replace(/\s+/g, ' ');
  if (targetId === '') {
    reasons.push(`target: the ${fieldsArg.targetKind}'s id is required`);
  }
  if (nodeId !== '' && fieldsArg.targetKind !== 'service') {
    reasons.push('target.nodeId: a node is named only for a service');
  }
  if (cron === '') {
    reasons.push('cron: five fields in UTC are required, e.g. 0 2 * * *');
  }
  const jitterSeconds = whole('jitterSeconds', fieldsArg.jitterSeconds);
  const startingDeadlineSeconds = whole('startingDeadlineSeconds', fieldsArg.startingDeadlineSeconds);
  const counts = {
    keepLast: whole('retention.keepLast', fieldsArg.keepLast),
    keepDaily: whole('retention.keepDaily', fieldsArg.keepDaily),
    keepWeekly: whole('retention.keepWeekly', fieldsArg.keepWeekly),
    keepMonthly: whole('retention.keepMonthly', fieldsArg.keepMonthly),
  };
  if (reasons.length > 0) {
    return { reasons };
  }
  const target: TBackupScheduleTarget = fieldsArg.targetKind === 'service'
    ? { serviceId: targetId, ...(nodeId === '' ? {} : { nodeId }) }
    : fieldsArg.targetKind === 'cluster' ? { clusterId: targetId } : { organizationId: targetId };
  const retention = Object.fromEntries(Object.entries(counts).filter(([, count]) => count !== undefined)) as IArchiveRetentionPolicy;
  return {
    spec: {
      target,
      cron,
      ...(jitterSeconds === undefined ? {} : { jitterSeconds }),
      ...(startingDeadlineSeconds === undefined ? {} : { startingDeadlineSeconds }),
      verify: fieldsArg.verify,
      ...(Object.keys(retention).length === 0 ? {} : { retention }),
    },
    reasons,
  };
};
