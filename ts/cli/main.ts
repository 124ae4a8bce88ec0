import { cliIo } from './io.js';
import { runCli } from './run.js';

/**
 * `cloudly …`: the administrator's command line (docs/cli.md). Started by bin/cloudly.js.
 * Exit codes: 0 ok, 1 refused, 2 usage, 3 unavailable.
 */

/**
 * A reader that went away (`cloudly … | head`) ends the command at once and quietly, as SIGPIPE
 * ends a Unix tool: Node ignores SIGPIPE, so the write fails with EPIPE instead, and without this
 * the error would end the process with a stack trace. The exit code is what the command had set
 * by then (it sets it right after printing), else 0.
 */
const endQuietlyWhenTheReaderLeaves = (streamArg: NodeJS.WriteStream): void => {
  streamArg.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') {
      process.exit(cliIo().exitCode ?? 0);
    }
    throw error;
  });
};

/**
 * Resolves once everything written to `streamArg` so far has been handed to the operating system.
 * On a pipe, node writes what the pipe's buffer (64 KiB) takes at once and the rest as the reader
 * reads; `process.exit` does not wait for that rest, so exiting right after the write cut every
 * piped answer at the buffer's size. An empty write's callback runs after the writes before it.
 */
const flushed = (streamArg: NodeJS.WriteStream): Promise<void> =>
  new Promise((resolve) => {
    if (streamArg.destroyed || streamArg.writableLength === 0) {
      resolve();
      return;
    }
    streamArg.write('', () => resolve());
  });

endQuietlyWhenTheReaderLeaves(process.stdout);
endQuietlyWhenTheReaderLeaves(process.stderr);
const code = await runCli(process.argv.slice(2));
await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
process.exit(code);
