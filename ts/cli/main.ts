import { runCli } from './run.js';

/**
 * `cloudly …`: the administrator's command line (docs/cli.md). Started by bin/cloudly.js.
 * Exit codes: 0 ok, 1 refused, 2 usage, 3 unavailable.
 */

process.exit(await runCli(process.argv.slice(2)));
