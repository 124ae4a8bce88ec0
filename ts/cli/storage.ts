import type { Command } from 'commander';
import { cliIo, setExitCode } from './io.js';
import { exitCodes, UsageError } from './context.js';
import { printAnswer, writeErr } from './output.js';

/**
 * `cloudly storage …`: offline tools for the embedded database's files (docs/storage.md). They
 * read the data directory directly and need no server and no login.
 */

/** The data directory as the server finds it: --data-dir, else $CLOUDLY_DATA_DIR, else the default. */
const dataDirOf = (optionsArg: { dataDir?: string }): string => optionsArg.dataDir ?? cliIo().env.CLOUDLY_DATA_DIR ?? './.nogit/data';

export const addStorageCommands = (programArg: Command): void => {
  const storage = programArg.command('storage').description('offline checks of the embedded database files (no server needed)');
  storage.command('verify')
    .description('check every snapshot and journal segment; name what is damaged and what can be recovered (changes nothing); exit 0 intact, 1 damaged')
    .option('--data-dir <dir>', 'the data directory (default: $CLOUDLY_DATA_DIR, else ./.nogit/data)')
    .action(async (_options: unknown, commandArg: Command) => {
      const options = commandArg.optsWithGlobals() as { dataDir?: string; output: 'table' | 'json' | 'yaml' };
      try {
        // Loaded here: the storage code reads BSON through the mongodb driver (see snapshot.ts).
        const { formatStorageReport, verifyDataDirectory } = await import('../core/storageverify.js');
        const report = await verifyDataDirectory(dataDirOf(options));
        printAnswer(report, options.output, () => formatStorageReport(report));
        setExitCode(report.healthy ? exitCodes.ok : exitCodes.refused);
      } catch (error) {
        if (error instanceof UsageError) {
          throw error;
        }
        writeErr(`cloudly: ${(error as Error).message}`);
        setExitCode(exitCodes.refused);
      }
    });
};
