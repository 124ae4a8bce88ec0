import type { IArchiveRetentionPolicy } from '../interfaces/data/backup.js';
import type { IBackupRetentionDecision } from '../interfaces/requests/backup.js';

/**
 * Which of a schedule's backups of one service to keep, as restic's `forget --keep-last N
 * --keep-daily D --keep-weekly W --keep-monthly M` decides: the N newest completed backups; and for
 * each of the D (W, M) most recent days (ISO weeks, months, in UTC) that have a completed backup,
 * the newest of that period. Over that, whatever the policy says:
 * - the newest backup of the service whose verification is `ok` is kept (`newest-verified`), so
 *   retention never leaves a service without its last proven copy;
 * - a backup that a running restore, isolated restore or drill uses is kept (`in-use`);
 * - a backup still running is not looked at.
 * Everything else goes; a failed backup goes with the reason `failed`. A pure function: the
 * controller and `getBackupRetentionPlan` both ask it.
 */

export interface IRetentionCandidate {
  backupId: string;
  createdAt: number;
  state: 'running' | 'completed' | 'failed';
}

const dayKey = (msArg: number): string => new Date(msArg).toISOString().slice(0, 10);
const monthKey = (msArg: number): string => new Date(msArg).toISOString().slice(0, 7);
/** The ISO 8601 week (year and week number) of a UTC instant. */
const weekKey = (msArg: number): string => {
  const date = new Date(Date.UTC(new Date(msArg).getUTCFullYear(), new Date(msArg).getUTCMonth(), new Date(msArg).getUTCDate()));
  const weekday = date.getUTCDay() || 7;
  date.setUTCDate(date.getUTCDate() + 4 - weekday);
  const yearStart = Date.UTC(date.getUTCFullYear(), 0, 1);
  const week = Math.ceil(((date.getTime() - yearStart) / 86_400_000 + 1) / 7);
  return `${date.getUTCFullYear()}-W${String(week).padStart(2, '0')}`;
};

export const planRetention = (
  backupsArg: readonly IRetentionCandidate[],
  policyArg: IArchiveRetentionPolicy,
  protectedArg: ReadonlyMap<string, string>,
): IBackupRetentionDecision[] => {
  const newestFirst = [...backupsArg].sort((x, y) => y.createdAt - x.createdAt || (x.backupId < y.backupId ? 1 : -1));
  const completed = newestFirst.filter((backupArg) => backupArg.state === 'completed');
  const reasons = new Map<string, string[]>();
  const keep = (idArg: string, reasonArg: string) => reasons.set(idArg, [...(reasons.get(idArg) ?? []), reasonArg]);
  completed.slice(0, policyArg.keepLast ?? 0).forEach((backupArg, indexArg) => keep(backupArg.backupId, `last-${indexArg + 1}`));
  const periods: Array<[number | undefined, string, (msArg: number) => string]> = [
    [policyArg.keepDaily, 'daily', dayKey],
    [policyArg.keepWeekly, 'weekly', weekKey],
    [policyArg.keepMonthly, 'monthly', monthKey],
  ];
  for (const [count, name, keyOf] of periods) {
    const seen = new Set<string>();
    for (const backup of completed) {
      if (seen.size >= (count ?? 0)) {
        break;
      }
      const period = keyOf(backup.createdAt);
      if (!seen.has(period)) {
        seen.add(period);
        keep(backup.backupId, `${name} ${period}`);
      }
    }
  }
  return newestFirst
    .filter((backupArg) => backupArg.state !== 'running')
    .map((backupArg): IBackupRetentionDecision => {
      const kept = [...(reasons.get(backupArg.backupId) ?? [])];
      const protection = protectedArg.get(backupArg.backupId);
      if (protection) {
        kept.push(protection);
      }
      return kept.length > 0
        ? { backupId: backupArg.backupId, createdAt: backupArg.createdAt, action: 'keep', reasons: kept }
        : { backupId: backupArg.backupId, createdAt: backupArg.createdAt, action: 'remove', reasons: [backupArg.state === 'failed' ? 'failed' : 'outside-policy'] };
    });
};
