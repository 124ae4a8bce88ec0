import type { Command } from 'commander';
import { causeLines, choiceOption, exitCodes, noteDryRun, UsageError, withDryRun, type ICommandContext, type TCommandAnswer } from './context.js';
import { mutation, pageOptions, pageRequest, run, type TOptions } from './commandkit.js';
import { note, printAnswer, writeErr } from './output.js';
import { createProgressView, describeSample, formatBytes } from './progress.js';
import { formatTime, listTable, recordTable, type TColumn } from './tables.js';
import { cliIo, setExitCode } from './io.js';
import { operationStates, type IOperation } from '../interfaces/requests/operation.js';

/**
 * Long work the server answers at once with an operation (backups, restores): the CLI follows it
 * with `getOperation` until it ends, with progress on stderr (progress.ts). Ctrl-C detaches and
 * says how to follow it again; `--cancel` makes Ctrl-C cancel it instead; `--detach` returns at
 * once. `cloudly operations list|get|watch|cancel`.
 */

type TOperation = IOperation;

export interface IFollowOptions {
  /** Return at once with the command's own answer. */
  detach?: boolean;
  /** Ctrl-C cancels the operation (cancelOperation) instead of detaching. */
  cancel?: boolean;
}

/** How often a followed operation is read. */
const pollIntervalMs = 250;

const kindLabels: Record<string, string> = { 'service-backup': 'backup', 'service-restore': 'restore' };

export const operationLabel = (operationArg: TOperation): string =>
  `${kindLabels[operationArg.kind] ?? operationArg.kind ?? 'operation'} ${operationArg.backupId || operationArg.operationId}`;

/** A rollout's progress: its state, wave, and how many of its services are done. */
const rolloutText = (rolloutArg: NonNullable<TOperation['rollout']>): string => {
  const open = (rolloutArg.targets.pending ?? 0) + (rolloutArg.targets.updating ?? 0);
  return `${rolloutArg.state}${rolloutArg.reverted ? ' (reverted)' : ''}, wave ${rolloutArg.currentWave + 1}/${rolloutArg.waves}, ${rolloutArg.targetsTotal - open}/${rolloutArg.targetsTotal} services done`;
};

const progressText = (operationArg: TOperation): string => {
  if (operationArg.rollout) {
    return rolloutText(operationArg.rollout);
  }
  const progress = operationArg.progress ?? {};
  if (typeof progress.bytesDone !== 'number') {
    return '-';
  }
  return progress.bytesTotal ? `${formatBytes(progress.bytesDone)}/${formatBytes(progress.bytesTotal)}` : formatBytes(progress.bytesDone);
};

export const operationColumns: Array<TColumn<TOperation>> = [
  ['OPERATION', (o) => o.operationId],
  ['KIND', (o) => kindLabels[o.kind] ?? o.kind],
  ['STATE', (o) => (o.reason ? `${o.state} (${o.reason})` : o.state)],
  ['BACKUP', (o) => o.backupId],
  ['PHASE', (o) => o.progress?.phase],
  ['PROGRESS', progressText],
  ['STARTED', (o) => formatTime(o.startedAt)],
  ['ENDED', (o) => formatTime(o.endedAt), 'wide'],
  ['CLUSTER', (o) => o.clusterId, 'wide'],
  ['SERVICE', (o) => o.serviceId, 'wide'],
  ['NODE', (o) => o.nodeId, 'wide'],
  ['REQUESTED BY', (o) => o.requestedBy, 'wide'],
];

export const operationTable = (operationArg: TOperation): string => {
  const result = operationArg.result;
  const restored = result?.restored ? `, restored ${result.restored.length} snapshot(s)` : '';
  return recordTable({
    operationId: operationArg.operationId,
    kind: operationArg.kind,
    state: operationArg.state,
    ...(operationArg.reason ? { reason: operationArg.reason } : {}),
    clusterId: operationArg.clusterId,
    serviceId: operationArg.serviceId,
    nodeId: operationArg.nodeId,
    backupId: operationArg.backupId,
    phase: operationArg.progress?.phase,
    ...(operationArg.rollout ? { rollout: `${operationArg.rollout.rolloutId}: ${rolloutText(operationArg.rollout)} (cloudly rollouts get --rollout ${operationArg.rollout.rolloutId})` } : { bytes: progressText(operationArg) }),
    startedAt: formatTime(operationArg.startedAt),
    endedAt: formatTime(operationArg.endedAt),
    ...(result?.backup ? { result: `backup ${result.backup.backupId}: ${result.backup.snapshots?.length ?? 0} snapshot(s)${result.backup.closure ? ', closure held' : ''}${restored}` } : {}),
  });
};

const followHints = (operationIdArg: string): string[] => [
  `  follow it: cloudly operations watch ${operationIdArg}`,
  `  its state: cloudly operations get ${operationIdArg}`,
  `  cancel it: cloudly operations cancel ${operationIdArg}`,
];

/** Prints how an operation ended (stderr) and answers the exit code: 0 completed, 1 failed or cancelled, 3 failed unavailable. */
const reportEnd = (operationArg: TOperation): number => {
  if (operationArg.state === 'completed') {
    return exitCodes.ok;
  }
  const error = operationArg.error;
  const code = typeof error?.code === 'string' ? error.code : operationArg.state;
  const lines = [`${operationArg.state}: ${code}${error?.retryable ? ' (retryable)' : ''}`];
  const reasons: unknown[] = Array.isArray(error?.reasons) ? error.reasons : operationArg.reason ? [operationArg.reason] : [];
  for (const reason of reasons) {
    lines.push(`  ${typeof reason === 'string' ? reason : JSON.stringify(reason)}`);
  }
  lines.push(...causeLines(error?.causes));
  if (error?.relayError !== undefined) {
    lines.push(`  relayError: ${JSON.stringify(error.relayError)}`);
  }
  writeErr(lines.join('\n'));
  return operationArg.state === 'failed' && code === 'unavailable' ? exitCodes.unavailable : exitCodes.refused;
};

const pause = (msArg: number): Promise<void> => new Promise((resolve) => { setTimeout(resolve, msArg); });

/**
 * Follows an operation until it ends, or until Ctrl-C detaches. Prints the last `getOperation`
 * answer on stdout (its table, or exactly that answer as JSON/YAML) and sets the exit code.
 */
export const followOperation = async (
  ctxArg: ICommandContext,
  operationIdArg: string,
  optionsArg: IFollowOptions = {},
  tableArg: (operationArg: TOperation) => string = operationTable,
): Promise<void> => {
  let answer = await ctxArg.call('getOperation', { operationId: operationIdArg });
  const label = operationLabel(answer.operation);
  const view = createProgressView(label, undefined, undefined, answer.operation.startedAt);
  let interrupted: 'detach' | 'cancel' | null = null;
  let cancelling: Promise<TCommandAnswer<'cancelOperation'>> | null = null;
  let wake: (() => void) | null = null;
  const onSignal = (): void => {
    if (interrupted === null && optionsArg.cancel) {
      interrupted = 'cancel';
    } else {
      interrupted = 'detach';
    }
    wake?.();
  };
  const { signals } = cliIo();
  signals.on('SIGINT', onSignal);
  try {
    for (;;) {
      const operation = answer.operation;
      if (operation.progress) {
        view.update(operation.progress);
      }
      if (operation.state !== 'running') {
        view.finish(operation.state === 'completed' ? 'completed' : `${operation.state}${operation.reason ? ` (${operation.reason})` : ''}`, operation.endedAt);
        printAnswer(answer, ctxArg.format, () => tableArg(operation));
        setExitCode(reportEnd(operation));
        return;
      }
      if (interrupted === 'detach') {
        view.clear();
        note([`detached: operation ${operation.operationId} goes on on the server (${operation.progress ? describeSample(operation.progress, null) : operation.state})`,
          ...followHints(operation.operationId)].join('\n'));
        printAnswer(answer, ctxArg.format, () => tableArg(operation));
        setExitCode(exitCodes.ok);
        return;
      }
      if (interrupted === 'cancel' && cancelling === null) {
        view.clear();
        note(`cancelling operation ${operation.operationId} (Ctrl-C again detaches)`);
        cancelling = ctxArg.call('cancelOperation', { operationId: operation.operationId });
        answer = await cancelling;
        continue;
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        void pause(pollIntervalMs).then(resolve);
      });
      wake = null;
      if (interrupted === 'detach') {
        continue;
      }
      answer = await ctxArg.call('getOperation', { operationId: operationIdArg });
    }
  } catch (error) {
    view.clear();
    note(`following operation ${operationIdArg} stopped; it may still be running:\n${followHints(operationIdArg).join('\n')}`);
    throw error;
  } finally {
    signals.removeListener('SIGINT', onSignal);
  }
};

/**
 * Ends a command that started long work: a dry run or `--detach` prints the command's own answer
 * (and, detached, how to follow it); otherwise the operation is followed to its end.
 */
export const finishStartedWork = async <TAnswer extends { operation?: IOperation }>(
  ctxArg: ICommandContext,
  optionsArg: TOptions,
  answerArg: TAnswer,
  tableArg: (answerArg: TAnswer) => string,
  followTableArg: (operationArg: TOperation) => string = operationTable,
): Promise<void> => {
  const operation = answerArg.operation;
  if (optionsArg.dryRun || !operation?.operationId) {
    noteDryRun(optionsArg, answerArg);
    printAnswer(answerArg, ctxArg.format, () => tableArg(answerArg));
    return;
  }
  if (optionsArg.detach) {
    note([`started: operation ${operation.operationId} (${operation.state})`, ...followHints(operation.operationId)].join('\n'));
    printAnswer(answerArg, ctxArg.format, () => tableArg(answerArg));
    return;
  }
  await followOperation(ctxArg, operation.operationId, { cancel: Boolean(optionsArg.cancel) }, followTableArg);
};

/** `--detach` and `--cancel` on a command that starts long work. */
export const longWork = (commandArg: Command): Command => commandArg
  .option('--detach', 'answer at once with the operation; follow it later with `cloudly operations watch <id>`')
  .option('--cancel', 'Ctrl-C cancels the operation instead of detaching from it');

const requireId = (idArg: string | undefined): string => {
  if (!idArg) {
    throw new UsageError('give the operation id');
  }
  return idArg;
};

export const addOperationCommands = (programArg: Command): void => {
  const operations = programArg.command('operations').description('long work (backups, restores, rollouts): list, follow, cancel');
  pageOptions(operations.command('list').description('operations, newest first'))
    .option('--cluster <id|name>', 'only this cluster (id or name)')
    .option('--service <id|name>', 'only this service (id or name)')
    .option('--state <state>', 'running, completed, failed or cancelled')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getOperations', {
        ...(options.cluster ? { clusterId: options.cluster } : {}),
        ...(options.service ? { serviceId: options.service } : {}),
        ...(options.state ? { state: choiceOption(options.state, operationStates, '--state') } : {}),
        ...pageRequest(options),
      });
      printAnswer(answer, ctx.format, () => listTable(answer.operations, operationColumns, answer, '(no operations)'));
    }));
  operations.command('get').description('one operation: state, phase, bytes')
    .argument('<id>', 'operation id')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getOperation', { operationId: requireId(options.args?.[0]) });
      printAnswer(answer, ctx.format, () => operationTable(answer.operation));
    }));
  operations.command('watch').description('follow an operation with progress until it ends (Ctrl-C detaches)')
    .argument('<id>', 'operation id')
    .option('--cancel', 'Ctrl-C cancels the operation instead of detaching from it')
    .action(run(async (ctx, options) => {
      await followOperation(ctx, requireId(options.args?.[0]), { cancel: Boolean(options.cancel) });
    }));
  mutation(operations.command('cancel').description('cancel a running operation (Cloudly stops waiting for the relay and discards what it sends)'))
    .argument('<id>', 'operation id')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('cancelOperation', withDryRun(options, { operationId: requireId(options.args?.[0]) }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => (answer.operation ? operationTable(answer.operation) : recordTable(answer)));
    }));
};
