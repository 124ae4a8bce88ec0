import type { IArchiveRetentionPolicy } from './backup.js';

/**
 * Backup schedules: Cloudly orders backups by itself at the times a cron expression names.
 * Project's own definitions (docs/api/backups.md, "Schedules").
 */

/** What a schedule backs up: one service, or every service of a cluster or an organization as it is at each occurrence. */
export type TBackupScheduleTarget =
  | { serviceId: string; nodeId?: string }
  | { clusterId: string }
  | { organizationId: string };

/**
 * A restore drill after the schedule's backups: each new backup (once verified, when the schedule
 * verifies) is restored through the isolated-restore flow onto `nodeId`, then cleaned up.
 */
export interface IBackupScheduleDrill {
  /** The drill node: a node of the target's cluster. */
  nodeId: string;
  /** Drill every Nth backup of each service (1, the default: every one). */
  everyNth?: number;
}

/** What an administrator writes. */
export interface IBackupScheduleSpec {
  target: TBackupScheduleTarget;
  /** Five fields, UTC: `minute hour day-of-month month day-of-week`. */
  cron: string;
  /** Each occurrence fires at a fixed offset in [0, jitterSeconds) after its minute; 0 (the default): on the minute. */
  jitterSeconds?: number;
  /**
   * How late a missed occurrence may still run (Kubernetes' `startingDeadlineSeconds`); absent:
   * the latest missed occurrence always runs, once.
   */
  startingDeadlineSeconds?: number;
  /** Verify each backup of this schedule once it completes. */
  verify?: boolean;
  /** Which of this schedule's backups to keep (keep-last, daily, weekly, monthly). */
  retention?: IArchiveRetentionPolicy;
  /** Restore drills of this schedule's backups (docs/api/backups.md, "Drills"). */
  drill?: IBackupScheduleDrill;
}

/** Why one service of an occurrence was not backed up. */
export interface IBackupScheduleSkip {
  serviceId?: string;
  clusterId?: string;
  /** `cluster-unknown` (its relay is dark), `service-node-ambiguous`, `missed-starting-deadline`, `schedule-has-no-services`. */
  reason: string;
  /** The liveness reason of a dark cluster (`relay-disconnected`, `observed-state-stale`). */
  detail?: string;
}

/** One occurrence as the schedules controller handled it. */
export interface IBackupScheduleRun {
  /** The occurrence's minute, epoch ms UTC. */
  occurrenceAt: number;
  /** When the controller fired it. */
  firedAt: number;
  /** The backups ordered for it (each an ordinary backup operation carrying the schedule id). */
  backupIds: string[];
  skipped: IBackupScheduleSkip[];
}

/** What the schedules controller records of a schedule: written only by it. */
export interface IBackupScheduleStatus {
  /** `disabled`: the controller stopped firing it (`disabledReason`), until the schedule is changed. */
  state: 'active' | 'disabled';
  disabledReason?: string;
  /** The next occurrence the controller will fire (its minute, epoch ms UTC); absent while disabled. */
  nextRunAt?: number;
  lastRun?: IBackupScheduleRun;
  /** Occurrences fired (each once), and services skipped in them. */
  firedOccurrences: number;
  skippedServices: number;
  /** Occurrences that were missed whole (downtime longer than the starting deadline, or older than the latest). */
  missedOccurrences: number;
}

export interface IBackupSchedule extends IBackupScheduleSpec {
  scheduleId: string;
  /** Changes with every write of the spec; `updateBackupSchedule` and `deleteBackupSchedule` name it. */
  generation: number;
  createdAt: number;
  updatedAt: number;
  /** Absent until the controller first looked at the schedule. */
  status?: IBackupScheduleStatus;
}
