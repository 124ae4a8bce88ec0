/**
 * The Backups page's and the service page's backup decisions as pure functions (no DOM, no Lit),
 * tested in the unit lane (test/dashboard.backups.decision.test.ts): a schedule's target, status and
 * last run in words, a retention plan as rows, and a backup's verification badge.
 */
import type { IArchiveRetentionPolicy } from '../../ts/interfaces/data/backup.js';
import type { IBackupSchedule, IBackupScheduleRun, TBackupScheduleTarget } from '../../ts/interfaces/data/backupschedule.js';
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
