import { Command, CommanderError, Option } from 'commander';
import { addCommands } from './commands.js';
import { addCompletionCommand } from './completion.js';
import { exitCodes } from './context.js';
import { writeErr, writeOut } from './output.js';

/**
 * `cloudly …`: the administrator's command line (docs/cli.md). Started by bin/cloudly.js.
 * Exit codes: 0 ok, 1 refused, 2 usage, 3 unavailable.
 */

const program = new Command('cloudly')
  .description('Operate a Cloudly control plane: clusters, nodes, services, ingress, Corestore, backups.')
  .addOption(new Option('-u, --url <url>', 'the server (default: $CLOUDLY_URL, else the server of the last login)'))
  .addOption(new Option('-o, --output <format>', 'table, json (exactly the API answer) or yaml').choices(['table', 'json', 'yaml']).default('table'))
  .showHelpAfterError('(add --help for usage)')
  .configureOutput({ writeOut: (textArg) => writeOut(textArg), writeErr: (textArg) => writeErr(textArg) })
  .exitOverride();

addCommands(program);
addCompletionCommand(program);
program.addHelpText('after', '\nExit codes: 0 ok, 1 refused, 2 usage error, 3 server unavailable.');

const finish = (codeArg: number): never => {
  process.exit(codeArg);
};

try {
  await program.parseAsync(process.argv);
  finish(typeof process.exitCode === 'number' ? process.exitCode : exitCodes.ok);
} catch (error) {
  if (error instanceof CommanderError) {
    const ok = ['commander.helpDisplayed', 'commander.version'].includes(error.code);
    finish(ok ? exitCodes.ok : exitCodes.usage);
  }
  writeErr(`cloudly: ${(error as Error)?.message ?? String(error)}`);
  finish(exitCodes.refused);
}
