import type { Command } from 'commander';
import { choiceOption, expectedGeneration, noteDryRun, requireOption, UsageError, withDryRun, type ICommandContext } from './context.js';
import { generationExpectation, mutation, pageOptions, pageRequest, run, type TOptions } from './commandkit.js';
import { readCredentials, writeCredentials } from './credentials.js';
import { note, printAnswer } from './output.js';
import { readSecrets } from './prompt.js';
import type { TIdentityRole } from '../interfaces/data/user.js';
import type { IAccount } from '../interfaces/requests/account.js';
import { formatTime, listTable, recordTable, type TColumn } from './tables.js';

/**
 * `cloudly users …`: the accounts of people who operate Cloudly (`admin` may do everything,
 * `user` only reads). Passwords come from a hidden prompt or stdin, never from an argument.
 */

type TAccount = IAccount;

/** The contract's roles (`TIdentityRole`); the list must name each, and only those. */
const roles = ['admin', 'user'] as const satisfies readonly TIdentityRole[];
const everyRoleListed: Exclude<TIdentityRole, (typeof roles)[number]> extends never ? true : false = true;
void everyRoleListed;

export const userColumns: Array<TColumn<TAccount>> = [
  ['USER', (u) => u.userId],
  ['NAME', (u) => u.username],
  ['ROLE', (u) => u.role],
  ['DISABLED', (u) => (u.disabled ? 'yes' : 'no')],
  ['GEN', (u) => u.generation],
  ['CREATED', (u) => formatTime(u.createdAt)],
  ['PASSWORD CHANGED', (u) => formatTime(u.passwordChangedAt), 'wide'],
];

const userTable = (userArg: TAccount): string => recordTable({ ...userArg, passwordChangedAt: formatTime(userArg.passwordChangedAt) });

const parseRole = (valueArg: string): TIdentityRole => choiceOption(valueArg, roles, '--role');

const secrets = async (promptsArg: string[], confirmArg?: string): Promise<string[]> => {
  try {
    const values = await readSecrets(promptsArg, confirmArg);
    if (values.some((valueArg) => valueArg === '')) {
      throw new UsageError(`no password given (type it at the prompt, or pipe ${promptsArg.length === 1 ? 'it' : `${promptsArg.length} lines`} on stdin)`);
    }
    return values;
  } catch (error) {
    throw error instanceof UsageError ? error : new UsageError((error as Error).message);
  }
};

/**
 * The account a command names with `--user`: sent as given, or with `--expect-current` read first
 * (by user id or username) to learn its id and generation.
 */
const targetUser = async (ctxArg: ICommandContext, optionsArg: TOptions): Promise<{ userId: string; expectedGeneration: number }> => {
  const given = requireOption<string>(optionsArg.user, '--user');
  const typed = (optionsArg.givenNames as Record<string, string> | undefined)?.user ?? given;
  let userId = given;
  const expected = await expectedGeneration(optionsArg, async () => {
    const { users } = await ctxArg.call('getUsers', {});
    const user = users.find((userArg) => userArg.userId === given) ?? users.find((userArg) => userArg.username === given);
    if (!user) {
      throw new UsageError(`no account ${JSON.stringify(given)} (neither a user id nor a username)`);
    }
    userId = user.userId;
    return user.generation;
  }, `account ${typed}`);
  return { userId, expectedGeneration: expected };
};

export const addUserCommands = (programArg: Command): void => {
  const users = programArg.command('users').description('accounts: admin (everything) or user (read-only)');
  pageOptions(users.command('list').description('every account (admins only)'))
    .action(run(async (ctx, options) => {
      const answer = await ctx.call('getUsers', pageRequest(options));
      printAnswer(answer, ctx.format, () => listTable(answer.users, userColumns, answer, '(no accounts)'));
    }));

  mutation(users.command('create').description('create an account; its password from a hidden prompt (twice) or the first line of stdin'))
    .requiredOption('--username <name>', 'the new account\'s name (unique)')
    .option('--role <role>', 'admin or user (read-only)', 'user')
    .action(run(async (ctx, options) => {
      const role = parseRole(options.role);
      const [password] = await secrets([`password for ${options.username}: `], 'again: ');
      const answer = await ctx.call('createUser', withDryRun(options, { username: options.username, password, role }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => userTable(answer.user));
    }));

  for (const [name, disabled, description] of [
    ['disable', true, 'disable an account: it cannot log in, and its identities are refused from the next call on'],
    ['enable', false, 'enable a disabled account again'],
  ] as const) {
    generationExpectation(users.command(name).description(description), 'account')
      .requiredOption('--user <id|name>', 'user id or username')
      .action(run(async (ctx, options) => {
        const target = await targetUser(ctx, options);
        const answer = await ctx.call('setUserDisabled', withDryRun(options, { ...target, disabled }));
        noteDryRun(options, answer);
        printAnswer(answer, ctx.format, () => userTable(answer.user));
      }));
  }

  generationExpectation(users.command('set-role').description("change an account's role; its identities must log in again"), 'account')
    .requiredOption('--user <id|name>', 'user id or username')
    .requiredOption('--role <role>', 'admin or user')
    .action(run(async (ctx, options) => {
      const role = parseRole(options.role);
      const target = await targetUser(ctx, options);
      const answer = await ctx.call('setUserRole', withDryRun(options, { ...target, role }));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => userTable(answer.user));
    }));

  generationExpectation(users.command('delete').description('delete an account; its identities are refused from the next call on'), 'account')
    .requiredOption('--user <id|name>', 'user id or username')
    .action(run(async (ctx, options) => {
      const target = await targetUser(ctx, options);
      const answer = await ctx.call('deleteUser', withDryRun(options, target));
      noteDryRun(options, answer);
      printAnswer(answer, ctx.format, () => userTable(answer.user));
    }));

  users.command('passwd').description('change your own password (current, then new: hidden prompts, or two lines of stdin); keeps the fresh identity')
    .action(run(async (ctx) => {
      const [oldPassword, newPassword] = await secrets(['current password: ', 'new password: '], 'new password again: ');
      const answer = await ctx.call('changePassword', { oldPassword, newPassword });
      const credentials = await readCredentials();
      const kept = credentials.contexts[ctx.contextName];
      if (kept && answer.identity) {
        credentials.contexts[ctx.contextName] = { ...kept, identity: answer.identity, loggedInAt: Date.now() };
        await writeCredentials(credentials);
      }
      // The answer is a fresh identity, a credential: like login, nothing goes to stdout.
      note(`password changed for ${answer.identity?.name ?? 'your account'}; every session of the account was revoked, the new identity is kept`);
    }));
};
