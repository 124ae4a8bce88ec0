import type { Command } from 'commander';
import { openContext, parseInteger, reportFailure, UsageError, type ICommandContext } from './context.js';
import { setExitCode } from './io.js';
import { filtersByName, resolveNamedOptions } from './names.js';
import type { IPageRequest } from '../interfaces/requests/pagination.js';

/** What every subcommand is built from: the action wrapper and the shared options. */

export type TOptions = Record<string, any>;
export type TAction = (ctxArg: ICommandContext, optionsArg: TOptions) => Promise<void>;

/** Runs a command that talks to a logged-in server; any failure sets the exit code (context.ts). */
export const run = (actionArg: TAction) => async (...argsArg: unknown[]): Promise<void> => {
  const command = argsArg[argsArg.length - 1] as Command;
  // Positional arguments (e.g. `operations get <id>`) come along as `args`.
  const options = { ...command.optsWithGlobals(), args: command.processedArgs } as TOptions;
  let url: string | undefined;
  try {
    const ctx = await openContext(options);
    url = ctx.url;
    await resolveNamedOptions(ctx, options, command);
    await actionArg(ctx, options);
  } catch (error) {
    setExitCode(reportFailure(error, url));
  }
};

export const mutation = (commandArg: Command): Command => commandArg
  .option('--dry-run', 'run every check and answer what would happen; change nothing');

export const generationExpectation = (commandArg: Command, whatArg: string): Command => mutation(commandArg)
  .option('--expect <generation>', `the ${whatArg} generation you read (compare-and-swap)`)
  .option('--expect-current', `read the ${whatArg}'s current generation first and expect that`);

/** A list's page options; its id options only filter it (names.ts). */
export const pageOptions = (commandArg: Command): Command => filtersByName(commandArg)
  .option('--limit <n>', 'at most this many per page')
  .option('--cursor <cursor>', 'the page after this cursor (from the last answer)');

/**
 * A repeatable option's values (`collect`): the list commander built, checked to be one. Undefined
 * when the option has no default and was not given; anything else is a usage error.
 */
export const listOption = (valueArg: unknown, flagArg: string): string[] => {
  if (valueArg === undefined) {
    return [];
  }
  if (!Array.isArray(valueArg) || !valueArg.every((itemArg): itemArg is string => typeof itemArg === 'string')) {
    throw new UsageError(`${flagArg} must be given as text, once per value`);
  }
  return valueArg;
};

export const pageRequest = (optionsArg: TOptions): IPageRequest => ({
  ...(optionsArg.limit !== undefined ? { limit: parseInteger(optionsArg.limit, '--limit', 1) } : {}),
  ...(optionsArg.cursor !== undefined ? { cursor: optionsArg.cursor } : {}),
});
