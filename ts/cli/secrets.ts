import type { Command } from 'commander';
import { expectedGeneration, noteDryRun, requireOption, UsageError, withDryRun, type ICommandContext } from './context.js';
import { generationExpectation, mutation, pageOptions, pageRequest, run } from './commandkit.js';
import { cliIo } from './io.js';
import { note, printAnswer } from './output.js';
import { formatTime, listTable, recordTable, type TColumn } from './tables.js';
import type { ISecretGroup } from '../interfaces/data/secret.js';

/**
 * `cloudly secrets …`: secret groups Cloudly cannot read (docs/secrets.md, section 7). A value is
 * read from stdin (one trailing newline dropped), sealed here to each cluster's recipient and sent
 * only sealed; it is never an argument, never printed.
 */

const groupColumns: Array<TColumn<ISecretGroup>> = [
  ['KEY', (group) => group.key],
  ['ENVIRONMENT', (group) => group.environment],
  ['CLUSTERS', (group) => group.clusterIds.join(',')],
  ['LATEST', (group) => (group.versions[0] ? `${group.versions[0].secretVersionId} (v${group.versions[0].version})` : '-')],
  ['RESEAL', (group) => (group.versions.some((version) => version.clusters.some((cluster) => cluster.state !== 'sealed')) ? 'required' : '-')],
  ['GEN', (group) => group.generation],
  ['TAGS', (group) => group.tags.join(','), 'wide'],
  ['UPDATED', (group) => formatTime(group.updatedAt), 'wide'],
];

/** The value on stdin as bytes, without one trailing newline (as `echo` or a heredoc adds). */
const readValue = async (): Promise<Uint8Array> => {
  const io = cliIo();
  if (io.stdin.isTTY) {
    throw new UsageError('give the value on stdin (e.g. `cloudly secrets set <key> < value-file`), never as an argument');
  }
  const chunks: Buffer[] = [];
  for await (const chunk of io.stdin) {
    chunks.push(Buffer.from(chunk));
  }
  const value = Buffer.concat(chunks);
  const end = value.length > 0 && value[value.length - 1] === 0x0a ? value.length - 1 : value.length;
  if (end === 0) {
    throw new UsageError('no value on stdin: give the value on stdin, never as an argument');
  }
  return value.subarray(0, end);
};

// The sealing library (HPKE) is loaded by the commands that seal, so every other command starts without it.
const secretsClient = () => import('../client/secrets.js');

const sealFromStdin = async (ctx: ICommandContext, keyArg: string, optionsArg: { reseal?: string; dryRun?: boolean }) => {
  const value = await readValue();
  const { SecretSealingError, sealSecretVersion } = await secretsClient();
  try {
    return await sealSecretVersion(ctx, keyArg, value, optionsArg);
  } catch (error) {
    if (error instanceof SecretSealingError) {
      throw new UsageError(error.message);
    }
    throw error;
  } finally {
    value.fill(0);
  }
};

export const addSecretCommands = (programArg: Command): void => {
  const secrets = programArg.command('secrets').description('secret groups: values sealed in this client to each cluster, which Cloudly cannot read');
  pageOptions(secrets.command('list').description('every secret group, metadata only (versions, and which need a re-seal)'))
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getSecretGroups', pageRequest(options));
      printAnswer(answer, ctx.format, () => listTable(answer.groups, groupColumns, answer, '(no secret groups)'));
    }));
  mutation(secrets.command('create').description('create a secret group (no value yet: `secrets set` adds one)').argument('<key>'))
    .option('--cluster <id...>', 'a cluster every version is sealed for (repeat for several)')
    .option('--environment <name>', 'the environment it belongs to, e.g. production')
    .option('--tag <tag...>', 'a tag (repeat for several)')
    .option('--retain <n>', 'how many versions to keep (default 10)')
    .action(run(async (ctx, options) => {
      const [key] = options.args as string[];
      const answer = await ctx.call('createSecretGroup', withDryRun(options, {
        group: {
          key,
          tags: (options.tag as string[] | undefined) ?? [],
          environment: requireOption(options.environment as string | undefined, '--environment'),
          clusterIds: requireOption(options.cluster as string[] | undefined, '--cluster'),
          ...(options.retain !== undefined ? { retainedVersions: Number(options.retain) } : {}),
        },
      }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => recordTable(answer.group));
    }));
  mutation(secrets.command('set').description('add the next version of a group: the value is read from stdin and sealed here').argument('<key>').allowExcessArguments(false))
    .action(run(async (ctx, options) => {
      const [key] = options.args as string[];
      const sealed = await sealFromStdin(ctx, key, { dryRun: Boolean(options.dryRun) });
      noteDryRun(options, sealed);
      note(`version ${sealed.version} (${sealed.secretVersionId}) of ${key}: name it in a service as { "secretId": "${key}", "secretVersionId": "${sealed.secretVersionId}" }`);
      printAnswer(sealed.group, ctx.format, () => recordTable(sealed.group));
    }));
  mutation(secrets.command('reseal').description('seal an existing version again (after a cluster enrolled a new recipient): the same value, from stdin').argument('<key>').allowExcessArguments(false))
    .requiredOption('--version <secretVersionId>', 'the version to re-seal')
    .action(run(async (ctx, options) => {
      const [key] = options.args as string[];
      const sealed = await sealFromStdin(ctx, key, { reseal: options.version as string, dryRun: Boolean(options.dryRun) });
      noteDryRun(options, sealed);
      printAnswer(sealed.group, ctx.format, () => recordTable(sealed.group));
    }));
  generationExpectation(secrets.command('delete').description('delete a group no service names').argument('<key>'), 'secret group')
    .action(run(async (ctx, options) => {
      const [key] = options.args as string[];
      const expected = await expectedGeneration(options, async () => {
        const group = await (await secretsClient()).findSecretGroup(ctx, key);
        if (!group) {
          throw new UsageError(`no secret group ${key}`);
        }
        return group.generation;
      }, `secret group ${key}`);
      const answer = await ctx.call('deleteSecretGroup', withDryRun(options, { secretGroupId: key, expectedGeneration: expected }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => recordTable(answer));
    }));
};
