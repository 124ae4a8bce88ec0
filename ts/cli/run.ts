import { Command, CommanderError, Option } from 'commander';
import { addCommands } from './commands.js';
import { addCompletionCommand } from './completion.js';
import { exitCodes } from './context.js';
import { cliIo, withCliIo, type ICliIo } from './io.js';
import { outputFormats, writeErr, writeOut } from './output.js';

/**
 * One `cloudly …` invocation: builds the command tree, runs the arguments (without `node` and
 * the script) and answers the exit code: 0 ok, 1 refused, 2 usage, 3 unavailable (docs/cli.md).
 * main.ts runs it with the process's own streams; given an `ICliIo`, it runs with those instead
 * (the tests run commands in their own process this way).
 */

const buildProgram = (): Command => {
  const program = new Command('cloudly')
    .description('Operate a Cloudly control plane: clusters, nodes, services, ingress, Corestore, backups.')
    .addOption(new Option('-u, --url <url>', 'the server (default: $CLOUDLY_URL, else the current context\'s)'))
    .addOption(new Option('--context <name>', 'a kept context (cloudly config get-contexts); for login, the name to keep it under'))
    .addOption(new Option('--ca-file <file>', 'CA certificates (PEM) to trust beside the system\'s for https (default: $CLOUDLY_CA_FILE)'))
    .addOption(new Option('--insecure-plain-http', 'allow sending a password or identity over plain http to a host other than this machine'))
    .addOption(new Option('-o, --output <format>', 'table, wide (every column, nothing clipped), json (exactly the API answer) or yaml').choices(outputFormats).default('table'))
    .showHelpAfterError('(add --help for usage)')
    .configureOutput({ writeOut: (textArg) => writeOut(textArg), writeErr: (textArg) => writeErr(textArg) })
    .exitOverride();
  // Each run trusts what its own flags and environment say, nothing a previous run in this process set.
  program.hook('preAction', async (_thisArg, actionArg) => {
    const options = actionArg.optsWithGlobals() as { caFile?: string; insecurePlainHttp?: boolean };
    const { allowPlainHttp, resetClientTrust, trustCaFile } = await import('../client/trust.js');
    resetClientTrust();
    const caFile = options.caFile ?? cliIo().env.CLOUDLY_CA_FILE;
    if (caFile) {
      try {
        trustCaFile(caFile);
      } catch (error) {
        const cause = (error as { errorData?: { causes?: Array<{ message: string }> } }).errorData?.causes?.[0]?.message ?? String(error);
        writeErr(`cloudly: --ca-file: ${cause}`);
        throw new CommanderError(exitCodes.usage, 'cloudly.caFile', cause);
      }
    }
    allowPlainHttp(options.insecurePlainHttp === true || cliIo().env.CLOUDLY_INSECURE_PLAIN_HTTP === '1');
  });
  addCommands(program);
  addCompletionCommand(program);
  program.addHelpText('after', '\nExit codes: 0 ok, 1 refused, 2 usage error, 3 server unavailable.');
  return program;
};

const runHere = async (argsArg: string[]): Promise<number> => {
  try {
    await buildProgram().parseAsync(argsArg, { from: 'user' });
    const code = cliIo().exitCode;
    return typeof code === 'number' ? code : exitCodes.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      const ok = ['commander.helpDisplayed', 'commander.version'].includes(error.code);
      return ok ? exitCodes.ok : exitCodes.usage;
    }
    writeErr(`cloudly: ${(error as Error)?.message ?? String(error)}`);
    return exitCodes.refused;
  }
};

export const runCli = (argsArg: string[], ioArg?: ICliIo): Promise<number> =>
  (ioArg ? withCliIo(ioArg, () => runHere(argsArg)) : runHere(argsArg));
