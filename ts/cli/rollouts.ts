import type { Command } from 'commander';
import { expectedGeneration, noteDryRun, parseInteger, choiceOption, requireOption, UsageError, withDryRun, type ICommandContext } from './context.js';
import { generationExpectation, mutation, pageOptions, pageRequest, run, type TOptions } from './commandkit.js';
import { printAnswer, writeOut } from './output.js';
import { formatTime, listTable } from './tables.js';
import type { IRollout, IRolloutChange, IRolloutPlan, IRolloutWaveSpec } from '../interfaces/data/rollout.js';

/**
 * `cloudly rollouts plan|create|list|get|watch|pause|resume|approve|abort` (docs/rollouts.md): one
 * service change over the clusters a label selector selects, planned first, applied in waves.
 */

/** How often `watch` reads the rollout again. */
const watchIntervalMs = 1_000;
const finishedStates = ['completed', 'halted', 'aborted'];

/** `1,50%,50%` as waves: a count, or a percentage of the selection. */
export const parseWaves = (textArg: string, pauseMsArg: number | undefined, approvalWavesArg: number[]): IRolloutWaveSpec[] =>
  textArg.split(',').map((partArg, index) => {
    const part = partArg.trim();
    const percent = /^(\d+(\.\d+)?)%$/.exec(part);
    const wave: IRolloutWaveSpec = percent ? { percent: Number(percent[1]) } : { clusters: parseInteger(part, `--waves[${index}]`, 1) };
    return {
      ...wave,
      ...(pauseMsArg === undefined ? {} : { pauseMs: pauseMsArg }),
      ...(approvalWavesArg.includes(index) ? { requiresApproval: true } : {}),
    };
  });

const changeOf = (optionsArg: TOptions): IRolloutChange => {
  const change: IRolloutChange = {
    ...(optionsArg.image === undefined ? {} : { image: String(optionsArg.image) }),
    ...(optionsArg.replicas === undefined ? {} : { replicas: parseInteger(String(optionsArg.replicas), '--replicas') }),
  };
  if (Object.keys(change).length === 0) {
    throw new UsageError('give what to change: --image and/or --replicas');
  }
  return change;
};

const planRequest = (optionsArg: TOptions) => ({
  selector: String(requireOption(optionsArg.selector, '--selector')),
  serviceName: String(requireOption(optionsArg.serviceName, '--service-name')),
  ...(optionsArg.organization === undefined ? {} : { organizationId: String(optionsArg.organization) }),
  change: changeOf(optionsArg),
});

const planOptions = (commandArg: Command): Command => commandArg
  .option('-l, --selector <selector>', "label selector, e.g. 'env=prod,tier in (a,b)'")
  .option('--service-name <name>', 'the service name on each cluster')
  .option('--organization <id>', 'only services of this organization')
  .option('--image <image>', 'the new image')
  .option('--replicas <n>', 'the new replica count');

const planTable = (planArg: IRolloutPlan): string => [
  listTable(planArg.targets, [
    ['CLUSTER', (target) => target.clusterName],
    ['SERVICE', (target) => target.serviceId],
    ['REVISION', (target) => (target.newSpecRevision === target.specRevision ? `${target.specRevision}` : `${target.specRevision} -> ${target.newSpecRevision}`)],
    ['PREDICTED', (target) => [target.predicted.state, target.predicted.reason].filter(Boolean).join(' ')],
  ], {}, '(no service would change)'),
  ...(planArg.skipped.length === 0 ? [] : ['', listTable(planArg.skipped, [
    ['SKIPPED CLUSTER', (skip) => skip.clusterName],
    ['WHY', (skip) => skip.reason],
    ['DETAIL', (skip) => (skip.causes ?? []).join('; ')],
  ], {})]),
].join('\n');

/** The rollout's header and a table per wave: each cluster's state, reason and revisions. */
export const rolloutTable = (rolloutArg: IRollout): string => [
  `rollout ${rolloutArg.id} (generation ${rolloutArg.generation}, operation ${rolloutArg.operationId}): ${rolloutArg.state}${rolloutArg.paused ? ' (paused)' : ''}, wave ${rolloutArg.currentWave + 1} of ${rolloutArg.waves.length}, failures ${rolloutArg.failures} of ${rolloutArg.gate.maxFailures} allowed`,
  `service ${rolloutArg.serviceName} on '${rolloutArg.selector}', change ${JSON.stringify(rolloutArg.change)}, on failure ${rolloutArg.onFailure}`,
  ...rolloutArg.waves.flatMap((wave) => ['', `wave ${wave.index + 1}: ${wave.state}${wave.requiresApproval ? ' (needs approval)' : ''}`, listTable(
    rolloutArg.targets.filter((target) => target.wave === wave.index),
    [
      ['CLUSTER', (target) => target.clusterName],
      ['SERVICE', (target) => target.serviceId],
      ['STATE', (target) => target.state],
      ['REASON', (target) => target.reason ?? ''],
      ['REVISION', (target) => [target.previousSpecRevision, target.newSpecRevision, target.revertedSpecRevision].filter((value) => value !== null).join(' -> ')
        + (target.restoredFromRevision !== null ? ` (spec of ${target.restoredFromRevision})` : '')],
    ],
    {},
  )]),
  ...(rolloutArg.skipped.length === 0 ? [] : ['', `skipped: ${rolloutArg.skipped.map((skip) => `${skip.clusterName} (${skip.reason})`).join(', ')}`]),
].join('\n');

const readRollout = async (ctxArg: ICommandContext, rolloutIdArg: string): Promise<IRollout> =>
  (await ctxArg.call('getRollout', { rolloutId: rolloutIdArg })).rollout;

/** Reads the rollout every second and prints it when it changed, until it finished. */
const watchRollout = async (ctxArg: ICommandContext, rolloutIdArg: string): Promise<IRollout> => {
  let shown = '';
  for (;;) {
    const rollout = await readRollout(ctxArg, rolloutIdArg);
    const text = rolloutTable(rollout);
    if (text !== shown && ctxArg.format !== 'json' && ctxArg.format !== 'yaml') {
      writeOut(`${shown === '' ? '' : '\n'}${formatTime(Date.now())}\n${text}`);
      shown = text;
    }
    if (finishedStates.includes(rollout.state)) {
      return rollout;
    }
    await new Promise((resolve) => { setTimeout(resolve, watchIntervalMs); });
  }
};

export const addRolloutCommands = (programArg: Command): void => {
  const rollouts = programArg.command('rollouts').description('change one service over the clusters a label selector selects, in waves');
  planOptions(rollouts.command('plan').description('what a change would do on each selected cluster (writes nothing)'))
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('planRollout', planRequest(options));
      printAnswer(answer, ctx.format, () => planTable(answer.plan));
    }));
  mutation(planOptions(rollouts.command('create').description('start a rollout; the first wave is the canary')))
    .option('--waves <list>', 'cluster counts or percentages, e.g. 1,50%,50%')
    .option('--pause-ms <ms>', 'pause after each wave passed its gate')
    .option('--approval-waves <list>', 'wave numbers (from 1) that start only once approved, e.g. 2,3')
    .option('--timeout-ms <ms>', "each changed service's time to converge")
    .option('--max-failures <n>', 'failures the rollout tolerates (default 0)')
    .option('--on-failure <halt|revert>', 'what a failure past the budget does (default halt)')
    .option('--max-concurrent <n>', 'at most this many clusters changing at once')
    .option('--watch', 'follow the rollout until it finished')
    .action(run(async (ctx, options) => {
      const approvalWaves = options.approvalWaves === undefined
        ? []
        : String(options.approvalWaves).split(',').map((part, index) => parseInteger(part.trim(), `--approval-waves[${index}]`, 1) - 1);
      const request = {
        ...planRequest(options),
        waves: parseWaves(String(requireOption(options.waves, '--waves')), options.pauseMs === undefined ? undefined : parseInteger(String(options.pauseMs), '--pause-ms'), approvalWaves),
        ...(options.timeoutMs === undefined && options.maxFailures === undefined ? {} : {
          gate: {
            ...(options.timeoutMs === undefined ? {} : { timeoutMs: parseInteger(String(options.timeoutMs), '--timeout-ms', 1) }),
            ...(options.maxFailures === undefined ? {} : { maxFailures: parseInteger(String(options.maxFailures), '--max-failures') }),
          },
        }),
        ...(options.onFailure === undefined ? {} : { onFailure: choiceOption(String(options.onFailure), ['halt', 'revert'] as const, '--on-failure') }),
        ...(options.maxConcurrent === undefined ? {} : { maxConcurrent: parseInteger(String(options.maxConcurrent), '--max-concurrent', 1) }),
      };
      const answer = await ctx.call('createRollout', withDryRun(options, request));
      noteDryRun(options, answer);
      if (options.watch && !options.dryRun) {
        const done = await watchRollout(ctx, answer.rollout.id);
        if (ctx.format === 'json' || ctx.format === 'yaml') {
          printAnswer({ rollout: done }, ctx.format, () => '');
        }
        return;
      }
      printAnswer(answer, ctx.format, () => `${planTable(answer.plan)}\n\n${rolloutTable(answer.rollout)}`);
    }));
  pageOptions(rollouts.command('list').description('every rollout, newest first'))
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getRollouts', pageRequest(options));
      printAnswer(answer, ctx.format, () => listTable(answer.rollouts, [
        ['ID', (rollout) => rollout.id],
        ['SERVICE', (rollout) => rollout.serviceName],
        ['SELECTOR', (rollout) => rollout.selector],
        ['STATE', (rollout) => rollout.state],
        ['WAVE', (rollout) => `${rollout.currentWave + 1}/${rollout.waves.length}`],
        ['CREATED', (rollout) => formatTime(rollout.createdAt)],
      ], answer));
    }));
  rollouts.command('get').description('one rollout with a table per wave')
    .requiredOption('--rollout <id>', 'rollout id')
    .action(run(async (ctx, options) => {
      const rollout = await readRollout(ctx, String(options.rollout));
      printAnswer({ rollout }, ctx.format, () => rolloutTable(rollout));
    }));
  rollouts.command('watch').description('follow a rollout, printing its waves as they change, until it finished')
    .requiredOption('--rollout <id>', 'rollout id')
    .action(run(async (ctx, options) => {
      const done = await watchRollout(ctx, String(options.rollout));
      if (ctx.format === 'json' || ctx.format === 'yaml') {
        printAnswer({ rollout: done }, ctx.format, () => '');
      }
    }));
  const control = (nameArg: 'pause' | 'resume' | 'approve' | 'abort', descriptionArg: string) =>
    generationExpectation(rollouts.command(nameArg).description(descriptionArg), 'rollout').requiredOption('--rollout <id>', 'rollout id');
  const expected = (ctxArg: ICommandContext, optionsArg: TOptions) =>
    expectedGeneration(optionsArg, async () => (await readRollout(ctxArg, String(optionsArg.rollout))).generation, `rollout ${optionsArg.rollout}`);
  control('pause', 'change no further service until resumed')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('pauseRollout', withDryRun(options, { rolloutId: String(options.rollout), expectedGeneration: await expected(ctx, options) }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => rolloutTable(answer.rollout));
    }));
  control('resume', 'go on after a pause')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('resumeRollout', withDryRun(options, { rolloutId: String(options.rollout), expectedGeneration: await expected(ctx, options) }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => rolloutTable(answer.rollout));
    }));
  control('approve', 'let a wave that needs an approval start')
    .requiredOption('--wave <n>', 'the wave number (from 1)')
    .action(run(async (ctx, options) => {
      const wave = parseInteger(String(options.wave), '--wave', 1) - 1;
      const answer = await ctx.call('approveRolloutWave', withDryRun(options, { rolloutId: String(options.rollout), wave, expectedGeneration: await expected(ctx, options) }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => rolloutTable(answer.rollout));
    }));
  control('abort', 'halt the rollout; --revert puts every changed service back at once')
    .option('--revert', 'revert every service the rollout changed')
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('abortRollout', withDryRun(options, {
        rolloutId: String(options.rollout), expectedGeneration: await expected(ctx, options), ...(options.revert ? { revert: true } : {}),
      }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => rolloutTable(answer.rollout));
    }));
};
