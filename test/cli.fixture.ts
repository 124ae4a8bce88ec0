import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCaller, testAdminPassword, type ITestCloudly } from './helpers/cloudly.js';
import { runCli } from '../ts/cli/run.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';

/**
 * Running `cloudly …` for the CLI tests against a real server, with its own config directory:
 *
 * - in process (the default): the command runner (ts/cli/run.ts) is called in the test's
 *   process with its own stdout, stderr, stdin, environment and signals; its calls to the logged-in
 *   test server go through `cloudly.dispatch` (helpers/cloudly.ts, `createCaller`), its sockets
 *   (`watch`) to the server's real port. Everything the binary does but starting a process.
 * - `{ binary: true }`: the real executable (bin/cloudly.js, as `npx cloudly` runs it) as a child
 *   process; test/cli.binary.test.ts keeps the paths only a process shows (exit codes as the
 *   shell sees them, real stdin, signals, an unreachable server).
 */

export const cliExecutable = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'cloudly.js');

export interface ICliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A running command: its stdin (left open by `start`) and a way to send it a signal. */
export interface ICliProcess {
  stdin: { end(inputArg?: string): void };
  kill(signalArg?: NodeJS.Signals): boolean;
}

export interface ICliChild {
  child: ICliProcess;
  /** Output so far. */
  readonly stdout: string;
  readonly stderr: string;
  closed: Promise<ICliRun>;
}

export interface ICliRunOptions {
  env?: Record<string, string>;
  terminalColumns?: number;
}

export interface ICli {
  configDir: string;
  /**
   * Runs `cloudly <args>` to its end, `inputArg` on stdin; `optionsArg.env` adds to its environment
   * and `optionsArg.terminalColumns` makes its stdout a terminal that wide (in process only).
   */
  run(argsArg: string[], inputArg?: string, optionsArg?: ICliRunOptions): Promise<ICliRun>;
  /** Starts `cloudly <args>` and hands back the running command (stdin left open). */
  start(argsArg: string[], envArg?: Record<string, string>, optionsArg?: Omit<ICliRunOptions, 'env'>): ICliChild;
  /** Logs in to the server as the test administrator. */
  login(tArg: ITestCloudly): Promise<void>;
  dispose(): Promise<void>;
}

const childEnv = (configDirArg: string, extraArg: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const { CLOUDLY_URL: _ignored, ...env } = process.env;
  return { ...env, CLOUDLY_CONFIG_DIR: configDirArg, ...extraArg };
};

/** The real executable as a child process. */
const startBinary = (configDirArg: string, argsArg: string[], envArg: Record<string, string> = {}): ICliChild => {
  const child = spawn(process.execPath, [cliExecutable, ...argsArg], { env: childEnv(configDirArg, envArg), stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
  const closed = new Promise<ICliRun>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return {
    child,
    get stdout() { return stdout; },
    get stderr() { return stderr; },
    closed,
  };
};

/** stdin of an in-process run: nothing is read until `end` gives the whole input. */
const pipedStdin = () => {
  let give: (valueArg: string) => void = () => undefined;
  const input = new Promise<string>((resolve) => { give = resolve; });
  return {
    stream: {
      isTTY: false,
      async *[Symbol.asyncIterator]() {
        const text = await input;
        if (text) {
          yield Buffer.from(text);
        }
      },
    },
    end: (inputArg = '') => give(inputArg),
  };
};

export const createCli = async (optionsArg: { binary?: boolean } = {}): Promise<ICli> => {
  const configDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-cli-config-'));
  /** The test server whose calls go through dispatch (set by `login`). */
  let server: ITestCloudly | null = null;
  const startInProcess = (argsArg: string[], envArg: Record<string, string> = {}, terminalColumnsArg?: number): ICliChild => {
    let stdout = '';
    let stderr = '';
    const stdin = pipedStdin();
    const signals = new EventEmitter();
    const closed = runCli(argsArg, {
      stdout: {
        write: (textArg: string) => { stdout += textArg; return true; },
        ...(terminalColumnsArg !== undefined ? { isTTY: true, columns: terminalColumnsArg } : {}),
      },
      stderr: { write: (textArg: string) => { stderr += textArg; return true; } },
      stdin: stdin.stream,
      env: childEnv(configDir, envArg),
      signals,
      createClient: (urlArg) => (server && urlArg === server.baseUrl
        ? createCaller(server.cloudly)
        : new CloudlyAdminClient(urlArg)),
    }).then((codeArg) => ({ code: codeArg, signal: null, stdout, stderr }));
    return {
      child: {
        stdin: { end: stdin.end },
        kill: (signalArg: NodeJS.Signals = 'SIGTERM') => signals.emit(signalArg),
      },
      get stdout() { return stdout; },
      get stderr() { return stderr; },
      closed,
    };
  };
  const start = (argsArg: string[], envArg: Record<string, string> = {}, startOptionsArg: Omit<ICliRunOptions, 'env'> = {}): ICliChild => {
    if (optionsArg.binary) {
      assert.equal(startOptionsArg.terminalColumns, undefined, 'a terminal is given to commands run in process only');
      return startBinary(configDir, argsArg, envArg);
    }
    return startInProcess(argsArg, envArg, startOptionsArg.terminalColumns);
  };
  const cli: ICli = {
    configDir,
    start,
    async run(argsArg, inputArg = '', runOptionsArg = {}) {
      const running = start(argsArg, runOptionsArg.env ?? {}, { terminalColumns: runOptionsArg.terminalColumns });
      running.child.stdin.end(inputArg);
      return running.closed;
    },
    async login(tArg) {
      server = tArg;
      const login = await cli.run(['login', '--url', tArg.baseUrl, '--username', 'admin'], `${testAdminPassword}\n`);
      assert.equal(login.code, 0, login.stderr);
    },
    async dispose() {
      await fsp.rm(configDir, { recursive: true, force: true });
    },
  };
  return cli;
};

/** The parsed stdout of a run that must have succeeded. */
export const jsonOf = (runArg: ICliRun): any => {
  assert.equal(runArg.code, 0, `exit ${runArg.code}: ${runArg.stderr}`);
  return JSON.parse(runArg.stdout);
};

/**
 * Asserts a refusal on the terminal: exit 1, nothing on stdout, `refused: <code>` and then every
 * reason (and any other member) of the API's own refusal on its own line.
 */
export const assertRefusedLikeApi = (runArg: ICliRun, refusalArg: Record<string, unknown>, exitCodeArg = 1): void => {
  assert.equal(runArg.code, exitCodeArg, runArg.stderr);
  assert.equal(runArg.stdout, '');
  const lines = runArg.stderr.trimEnd().split('\n');
  const at = lines.findIndex((lineArg) => lineArg.startsWith('refused: '));
  assert.ok(at >= 0, `a refusal line in ${JSON.stringify(runArg.stderr)}`);
  assert.match(lines[at], new RegExp(`^refused: ${refusalArg.code}( \\(retryable\\))?$`));
  const reasons = (refusalArg.reasons ?? []) as unknown[];
  for (const reason of reasons) {
    const text = typeof reason === 'string' ? reason : JSON.stringify(reason);
    assert.ok(lines.includes(`  ${text}`), `reason on its own line: ${text}\n${runArg.stderr}`);
  }
  // The causes (sentences apart from the tokens) follow, each as `path: message`.
  for (const cause of (refusalArg.causes ?? []) as Array<{ path?: string; message: string }>) {
    const text = `  ${cause.path ? `${cause.path}: ` : ''}${cause.message}`;
    assert.ok(lines.includes(text), `cause on its own line: ${text}\n${runArg.stderr}`);
  }
  // Every other member of the error data follows on its own line.
  for (const [key, value] of Object.entries(refusalArg)) {
    if (!['code', 'retryable', 'reasons', 'causes', 'retryAfterMs'].includes(key)) {
      assert.ok(lines.includes(`  ${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}`), `${key} printed\n${runArg.stderr}`);
    }
  }
};

/**
 * A `getOperation` answer without its progress write time: the server's last progress write can
 * land just after the operation is recorded ended (it then stamps `progress.updatedAt` again, with
 * the same phase and bytes), so an answer read a moment later may differ in that member only.
 */
export const withoutProgressStamp = (answerArg: any): any => {
  const copy = structuredClone(answerArg);
  if (copy?.operation?.progress) {
    delete copy.operation.progress.updatedAt;
  }
  return copy;
};
