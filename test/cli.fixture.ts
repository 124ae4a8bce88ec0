import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { testAdminPassword, type ITestCloudly } from './helpers/cloudly.js';

/**
 * Running the real `cloudly` executable (bin/cloudly.js, as `npx cloudly` runs it) as a child
 * process with its own config directory, for the CLI tests against a real server.
 */

export const cliExecutable = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'cloudly.js');

export interface ICliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface ICliChild {
  child: ChildProcessWithoutNullStreams;
  /** Output so far. */
  readonly stdout: string;
  readonly stderr: string;
  closed: Promise<ICliRun>;
}

export interface ICli {
  configDir: string;
  /** Runs `cloudly <args>` to its end, `inputArg` on stdin. */
  run(argsArg: string[], inputArg?: string): Promise<ICliRun>;
  /** Starts `cloudly <args>` and hands back the running child (stdin left open). */
  start(argsArg: string[], envArg?: Record<string, string>): ICliChild;
  /** Logs in to the server as the test administrator. */
  login(tArg: ITestCloudly): Promise<void>;
  dispose(): Promise<void>;
}

const childEnv = (configDirArg: string, extraArg: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const { CLOUDLY_URL: _ignored, ...env } = process.env;
  return { ...env, CLOUDLY_CONFIG_DIR: configDirArg, ...extraArg };
};

export const createCli = async (): Promise<ICli> => {
  const configDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-cli-config-'));
  const start = (argsArg: string[], envArg: Record<string, string> = {}): ICliChild => {
    const child = spawn(process.execPath, [cliExecutable, ...argsArg], { env: childEnv(configDir, envArg), stdio: ['pipe', 'pipe', 'pipe'] });
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
  const cli: ICli = {
    configDir,
    start,
    async run(argsArg, inputArg = '') {
      const running = start(argsArg);
      running.child.stdin.end(inputArg);
      return running.closed;
    },
    async login(tArg) {
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
  // Every other member of the error data follows on its own line.
  for (const [key, value] of Object.entries(refusalArg)) {
    if (!['code', 'retryable', 'reasons', 'retryAfterMs'].includes(key)) {
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
