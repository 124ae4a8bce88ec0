import { AsyncLocalStorage } from 'node:async_hooks';
import type { EventEmitter } from 'node:events';
import type { CloudlyAdminClient } from '../client/admin.js';

/**
 * Everything the command line touches outside itself: the terminal's streams, stdin, the
 * environment, signals, the exit code and how it reaches a server. `cloudly` (main.ts) runs with
 * the process's own; `runCli` (run.ts) can be given others, so a caller (the tests) runs a
 * command in its own process with its own streams, environment and transport. Each run keeps
 * its own through AsyncLocalStorage, so runs at the same time do not mix.
 */

export interface ICliOutputStream {
  write(textArg: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface ICliIo {
  stdout: ICliOutputStream;
  stderr: ICliOutputStream;
  /** Read to its end for piped input (passwords, `-` files); a terminal reads hidden prompts. */
  stdin: AsyncIterable<Buffer | string> & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /** Where SIGINT/SIGTERM arrive (`on`/`once`/`removeListener`). */
  signals: Pick<EventEmitter, 'on' | 'once' | 'removeListener'>;
  /** The client for a server URL; the default one talks HTTP (and its socket) to that URL. */
  createClient?: (urlArg: string) => CloudlyAdminClient | Promise<CloudlyAdminClient>;
  /** Set by the commands; the run's exit code when it ends (0 when never set). */
  exitCode?: number;
}

const processIo: ICliIo = {
  get stdout() { return process.stdout; },
  get stderr() { return process.stderr; },
  get stdin() { return process.stdin; },
  get env() { return process.env; },
  signals: process,
};

const storage = new AsyncLocalStorage<ICliIo>();

/** The streams, environment and signals of the run in progress (the process's own outside one). */
export const cliIo = (): ICliIo => storage.getStore() ?? processIo;

/** Runs `fnArg` with `ioArg` as the command line's outside world. */
export const withCliIo = <T>(ioArg: ICliIo, fnArg: () => Promise<T>): Promise<T> => storage.run(ioArg, fnArg);

export const setExitCode = (codeArg: number): void => {
  cliIo().exitCode = codeArg;
};
