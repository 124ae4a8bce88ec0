import type { Command } from 'commander';
import { exitCodes, expectedGeneration, parseInteger, requireOption, UsageError, withDryRun, type ICommandContext } from './context.js';
import { generationExpectation, mutation, pageOptions, pageRequest, run, type TOptions } from './commandkit.js';
import { printAnswer } from './output.js';
import { setExitCode } from './io.js';
import { finishStartedWork, longWork } from './operations.js';
import { formatTime, listTable, recordTable, type TColumn } from './tables.js';
import type { IArchiveRetentionPolicy } from '../interfaces/data/backup.js';
import type { IBackupSchedule, IBackupScheduleSpec } from '../interfaces/data/backupschedule.js';
import type { IBackupRetentionDecision } from '../interfaces/requests/backup.js';

/**
 * `cloudly backups schedules …` (docs/api/backups.md, "Schedules") and `cloudly backups verify`:
 * the schedules Cloudly backs services up by, their retention plans, and verifying a backup's
 * stored closure against its receipt.
 */

const targetText = (scheduleArg: IBackupSchedule): string => {
  const target = scheduleArg.target;
  return 'serviceId' in target ? `service ${target.serviceId}${target.nodeId ? ` on ${target.nodeId}` : ''}`
    : 'clusterId' in target ? `cluster ${target.clusterId}` : `organization ${target.organizationId}`;
};

const lastRunText = (scheduleArg: IBackupSchedule): string | null => {
  const run = scheduleArg.status?.lastRun;
  if (!run) {
    return null;
  }
  const skipped = run.skipped.map((skipArg) => skipArg.reason);
  return `${formatTime(run.occurrenceAt)}: ${run.backupIds.length} backup(s)${skipped.length ? `, skipped ${skipped.join(', ')}` : ''}`;
};

export const scheduleColumns: Array<TColumn<IBackupSchedule>> = [
  ['SCHEDULE', (s) => s.scheduleId],
  ['CRON (UTC)', (s) => s.cron],
  ['TARGET', targetText],
  ['STATE', (s) => (s.status ? (s.status.disabledReason ? `${s.status.state} (${s.status.disabledReason})` : s.status.state) : 'not looked at yet')],
  ['NEXT RUN', (s) => (s.status?.nextRunAt !== undefined ? formatTime(s.status.nextRunAt) : null)],
  ['LAST RUN', lastRunText],
  ['GEN', (s) => s.generation],
  ['VERIFY', (s) => (s.verify ? 'yes' : 'no'), 'wide'],
  ['RETENTION', (s) => (s.retention ? Object.entries(s.retention).map(([key, value]) => `${key}=${value}`).join(',') : null), 'wide'],
  ['DRILL', (s) => (s.drill ? `on ${s.drill.nodeId}${s.drill.everyNth && s.drill.everyNth > 1 ? ` every ${s.drill.everyNth}` : ''}` : null), 'wide'],
];

/** A row of the plan: a decision, or a deletion not finished yet (action `deleting`, why it waits). */
type TPlanRow = Omit<IBackupRetentionDecision, 'action'> & { serviceId: string; action: IBackupRetentionDecision['action'] | 'deleting' };

const decisionColumns: Array<TColumn<TPlanRow>> = [
  ['SERVICE', (d) => d.serviceId],
  ['BACKUP', (d) => d.backupId],
  ['CREATED', (d) => formatTime(d.createdAt)],
  ['ACTION', (d) => d.action],
  ['WHY', (d) => d.reasons.join(', ')],
];

/** The spec options shared by create and update. */
const specOptions = (commandArg: Command): Command => commandArg
  .requiredOption('--cron <expression>', 'five fields in UTC: minute hour day-of-month month day-of-week')
  .option('--service <id>', 'back up this service')
  .option('--node <id>', 'with --service: on this node')
  .option('--cluster <id>', 'back up every service of this cluster')
  .option('--organization <id>', 'back up every service of this organization')
  .option('--jitter-seconds <n>', 'fire each occurrence at a fixed offset below n seconds after its minute')
  .option('--starting-deadline-seconds <n>', 'skip a missed occurrence found later than this')
  .option('--verify', 'verify each backup the schedule makes')
  .option('--keep-last <n>', 'retention: keep the last n')
  .option('--keep-daily <n>', 'retention: keep one a day for n days')
  .option('--keep-weekly <n>', 'retention: keep one a week for n weeks')
  .option('--keep-monthly <n>', 'retention: keep one a month for n months')
  .option('--drill-node <id>', 'restore drill: restore each new backup onto this node of the cluster')
  .option('--drill-every <n>', 'with --drill-node: drill every nth backup of a service (default 1)');

const specOf = (optionsArg: TOptions): IBackupScheduleSpec => {
  const targets = [optionsArg.service, optionsArg.cluster, optionsArg.organization].filter((valueArg) => valueArg !== undefined);
  if (targets.length !== 1) {
    throw new UsageError('give exactly one of --service, --cluster or --organization');
  }
  if (optionsArg.node !== undefined && optionsArg.service === undefined) {
    throw new UsageError('--node goes with --service');
  }
  const target: IBackupScheduleSpec['target'] = optionsArg.service !== undefined
    ? { serviceId: String(optionsArg.service), ...(optionsArg.node !== undefined ? { nodeId: String(optionsArg.node) } : {}) }
    : optionsArg.cluster !== undefined ? { clusterId: String(optionsArg.cluster) } : { organizationId: String(optionsArg.organization) };
  const retention: IArchiveRetentionPolicy = {};
  for (const key of ['keepLast', 'keepDaily', 'keepWeekly', 'keepMonthly'] as const) {
    if (optionsArg[key] !== undefined) {
      retention[key] = parseInteger(String(optionsArg[key]), `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`, 0);
    }
  }
  return {
    target,
    cron: String(optionsArg.cron),
    ...(optionsArg.jitterSeconds !== undefined ? { jitterSeconds: parseInteger(String(optionsArg.jitterSeconds), '--jitter-seconds', 0) } : {}),
    ...(optionsArg.startingDeadlineSeconds !== undefined
      ? { startingDeadlineSeconds: parseInteger(String(optionsArg.startingDeadlineSeconds), '--starting-deadline-seconds', 0) } : {}),
    ...(optionsArg.verify ? { verify: true } : {}),
    ...(Object.keys(retention).length > 0 ? { retention } : {}),
    ...drillOf(optionsArg),
  };
};

const drillOf = (optionsArg: TOptions): Pick<IBackupScheduleSpec, 'drill'> => {
  if (optionsArg.drillNode === undefined) {
    if (optionsArg.drillEvery !== undefined) {
      throw new UsageError('--drill-every goes with --drill-node');
    }
    return {};
  }
  return {
    drill: {
      nodeId: String(optionsArg.drillNode),
      ...(optionsArg.drillEvery !== undefined ? { everyNth: parseInteger(String(optionsArg.drillEvery), '--drill-every', 1) } : {}),
    },
  };
};

const currentGeneration = (ctxArg: ICommandContext, scheduleIdArg: string) => async (): Promise<number> => {
  const { schedules } = await ctxArg.call('getBackupSchedules', {});
  const schedule = schedules.find((scheduleArg) => scheduleArg.scheduleId === scheduleIdArg);
  if (!schedule) {
    throw new UsageError(`no schedule ${scheduleIdArg}`);
  }
  return schedule.generation;
};

export const addBackupScheduleCommands = (backupsArg: Command): void => {
  const schedules = backupsArg.command('schedules').description('schedules Cloudly backs services up by (cron in UTC), their retention and last runs');
  pageOptions(schedules.command('list').description('schedules, with their next run and last outcome'))
    .option('--service <id>', 'only schedules naming this service')
    .option('--cluster <id>', 'only schedules naming this cluster')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getBackupSchedules', {
        ...(options.service ? { serviceId: options.service } : {}), ...(options.cluster ? { clusterId: options.cluster } : {}), ...pageRequest(options),
      });
      printAnswer(answer, ctx.format, () => listTable(answer.schedules, scheduleColumns, answer));
    }));
  specOptions(mutation(schedules.command('create').description('create a schedule')))
    .option('--schedule-id <id>', 'your own id: makes the call safe to repeat')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('createBackupSchedule', withDryRun(options, {
        schedule: specOf(options), ...(options.scheduleId ? { scheduleId: options.scheduleId } : {}),
      }));
      printAnswer(answer, ctx.format, () => recordTable({ ...answer.schedule, target: targetText(answer.schedule) }));
    }));
  specOptions(generationExpectation(schedules.command('update').description("replace a schedule's spec"), 'schedule'))
    .requiredOption('--schedule <id>', 'schedule id')
    .action(run(async (ctx, options) => {
      const scheduleId = requireOption<string>(options.schedule, '--schedule');
      const expected = await expectedGeneration(options, currentGeneration(ctx, scheduleId), `schedule ${scheduleId}`);
      const answer = await ctx.call('updateBackupSchedule', withDryRun(options, { scheduleId, expectedGeneration: expected, schedule: specOf(options) }));
      printAnswer(answer, ctx.format, () => recordTable({ ...answer.schedule, target: targetText(answer.schedule) }));
    }));
  generationExpectation(schedules.command('delete').description('delete a schedule (its backups stay)'), 'schedule')
    .requiredOption('--schedule <id>', 'schedule id')
    .action(run(async (ctx, options) => {
      const scheduleId = requireOption<string>(options.schedule, '--schedule');
      const expected = await expectedGeneration(options, currentGeneration(ctx, scheduleId), `schedule ${scheduleId}`);
      const answer = await ctx.call('deleteBackupSchedule', withDryRun(options, { scheduleId, expectedGeneration: expected }));
      printAnswer(answer, ctx.format, () => recordTable({ ...answer.schedule, target: targetText(answer.schedule) }));
    }));
  schedules.command('plan').description("what the schedule's retention keeps and would remove now, and why (changes nothing)")
    .requiredOption('--schedule <id>', 'schedule id')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getBackupRetentionPlan', { scheduleId: String(options.schedule) });
      const rows: TPlanRow[] = [
        ...answer.services.flatMap((serviceArg) => serviceArg.decisions.map((decisionArg) => ({ ...decisionArg, serviceId: serviceArg.serviceId }))),
        ...answer.deleting.map((deletionArg) => ({
          serviceId: deletionArg.serviceId, backupId: deletionArg.backupId, createdAt: deletionArg.startedAt, action: 'deleting' as const,
          reasons: deletionArg.nodePruneWaiting ? [`node prune waits: ${deletionArg.nodePruneWaiting.reason}`] : [],
        })),
      ];
      printAnswer(answer, ctx.format, () => listTable(rows, decisionColumns));
    }));
  longWork(mutation(backupsArg.command('drill').description('restore a backup onto a drill node through the isolated-restore flow and clean up, following the operation; the receipt is recorded on the backup')))
    .requiredOption('--backup <id>', 'backup id')
    .requiredOption('--node <id>', 'the drill node (a node of the backup\'s cluster)')
    .option('--drill-id <id>', 'your own drill id (drill-…): makes the call safe to repeat')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('drillServiceBackup', withDryRun(options, {
        backupId: String(options.backup), nodeId: String(options.node), ...(options.drillId !== undefined ? { drillId: String(options.drillId) } : {}),
      }));
      await finishStartedWork(ctx, options, answer, (answerArg) => recordTable({
        drillId: answerArg.drillId,
        backupId: String(options.backup),
        node: String(options.node),
        operation: answerArg.operation?.operationId ?? null,
      }));
    }));
  mutation(backupsArg.command('verify').description("read a backup's stored closure back and check it against its receipt; the outcome is recorded"))
    .requiredOption('--backup <id>', 'backup id')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('verifyServiceBackup', withDryRun(options, { backupId: String(options.backup) }));
      const verification = answer.backup.verification;
      printAnswer(answer, ctx.format, () => recordTable({
        backupId: answer.backup.backupId,
        outcome: verification?.outcome ?? null,
        verifiedAt: verification ? formatTime(verification.verifiedAt) : null,
        checkedObjects: verification?.checkedObjects ?? null,
        failedObject: verification?.failedObject ? `${verification.failedObject.path}: ${verification.failedObject.problem}` : null,
      }));
      // A damaged or missing closure is a failed check: scripts see it in the exit code.
      if (verification && verification.outcome !== 'ok') {
        setExitCode(exitCodes.refused);
      }
    }));
};
