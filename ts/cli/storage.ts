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
  storage.command('recover')
    .description('skip only the damaged journal records and keep the intact ones after them, where that is provable; names every lost record (exit 0 done or nothing to do, 1 refused: nothing changed)')
    .option('--data-dir <dir>', 'the data directory (default: $CLOUDLY_DATA_DIR, else ./.nogit/data)')
    .option('--skip-damaged', 'the recovery to run: replace each damaged record by a marker and replay every intact record after it (required)')
    .option('--dry-run', 'say what would be skipped and kept, and change nothing')
    .action(async (_options: unknown, commandArg: Command) => {
      const options = commandArg.optsWithGlobals() as { dataDir?: string; skipDamaged?: boolean; dryRun?: boolean; output: 'table' | 'json' | 'yaml' };
      if (!options.skipDamaged) {
        throw new UsageError('name the recovery: --skip-damaged (the strict choice, truncating at the damage, is the advice of `cloudly storage verify`)');
      }
      try {
        const { formatRecoverResult, recoverSkippingDamaged } = await import('../core/storagerecover.js');
        const result = await recoverSkippingDamaged(dataDirOf(options), options.dryRun === true);
        printAnswer(result, options.output, () => formatRecoverResult(result));
        setExitCode(result.refused === null ? exitCodes.ok : exitCodes.refused);
      } catch (error) {
        writeErr(`cloudly: ${(error as Error).message}`);
        setExitCode(exitCodes.refused);
      }
    });
};
