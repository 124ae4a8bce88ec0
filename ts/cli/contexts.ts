import type { Command } from 'commander';
import { parseFormat, reportFailure, UsageError } from './context.js';
import { readCredentials, writeCredentials } from './credentials.js';
import { setExitCode } from './io.js';
import { note, printAnswer } from './output.js';
import { formatTime, listTable } from './tables.js';

/**
 * `cloudly config …`: the kept contexts (credentials.ts), as kubectl's `config get-contexts`,
 * `use-context` and `current-context`. Nothing here talks to a server, and nothing prints an
 * identity: a context is shown by its name, server, account and expiry.
 */

/** What `get-contexts -o json` answers of a context: never its identity. */
interface IContextView {
  name: string;
  current: boolean;
  server: string;
  username: string;
  expiresAt: number | null;
}

const local = (actionArg: (optionsArg: Record<string, unknown>) => Promise<void>) => async (...argsArg: unknown[]): Promise<void> => {
  const command = argsArg[argsArg.length - 1] as Command;
  try {
    await actionArg({ ...command.optsWithGlobals(), args: command.processedArgs });
  } catch (error) {
    setExitCode(reportFailure(error));
  }
};

export const addContextCommands = (programArg: Command): void => {
  const config = programArg.command('config').description('the kept contexts: each a server and an identity on it, one current');

  config.command('get-contexts').description('every kept context; * marks the current one')
    .action(local(async (optionsArg) => {
      const format = parseFormat(optionsArg.output as string | undefined);
      const credentials = await readCredentials();
      const contexts: IContextView[] = Object.entries(credentials.contexts)
        .sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0))
        .map(([name, kept]) => ({
          name, current: name === credentials.currentContext, server: kept.server, username: kept.username, expiresAt: kept.identity.expiresAt ?? null,
        }));
      printAnswer({ currentContext: credentials.currentContext, contexts }, format, () => listTable(contexts, [
        ['CURRENT', (c) => (c.current ? '*' : '')],
        ['NAME', (c) => c.name],
        ['SERVER', (c) => c.server],
        ['USER', (c) => c.username],
        ['EXPIRES', (c) => (c.expiresAt !== null && c.expiresAt <= Date.now() ? `${formatTime(c.expiresAt)} (expired)` : formatTime(c.expiresAt))],
      ], {}, '(no contexts: cloudly login --url <server>)'));
    }));

  config.command('current-context').description('the name of the current context')
    .action(local(async () => {
      const { currentContext } = await readCredentials();
      if (currentContext === null) {
        throw new UsageError('no current context: cloudly config use-context <name>, or cloudly login');
      }
      printAnswer(currentContext, 'table', () => currentContext);
    }));

  config.command('use-context').description('make a kept context the current one')
    .argument('<name>', 'the context (cloudly config get-contexts)')
    .action(local(async (optionsArg) => {
      const name = (optionsArg.args as string[])[0];
      const credentials = await readCredentials();
      const kept = credentials.contexts[name];
      if (!kept) {
        throw new UsageError(`no context ${JSON.stringify(name)}: the kept ones are ${Object.keys(credentials.contexts).sort().join(', ') || '(none)'}`);
      }
      credentials.currentContext = name;
      await writeCredentials(credentials);
      note(`switched to context ${name} (${kept.username} at ${kept.server})`);
    }));
};
