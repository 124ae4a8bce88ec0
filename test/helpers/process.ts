import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { seedSigningKey } from './signingkeys.js';
import { minimumScryptN } from '../../ts/config.js';
import { CloudlyAdminClient } from '../../ts/client/admin.js';

/** Runs `npm start`'s entry point as a real child process, for crash and start-up tests. */

const projectRoot = path.resolve(import.meta.dirname, '..', '..');
/**
 * The launcher every start goes through (it holds the server's node flags and execs node, so the
 * child is the server process itself): `--source` is what `npm start` runs, `--node <args>`
 * runs node with the same flags on other arguments.
 */
export const serverLauncher = path.join(projectRoot, 'bin', 'cloudly-server');
/**
 * The loader of the server the test runner bundled for this run (scripts/testserver.ts,
 * CLOUDLY_TEST_SERVER), or null when there is none (a file run on its own). Read at each start, so
 * a bench that bundles the server itself (bench/fleet.bench.ts) can set it after import.
 */
export const runServerBundle = (): string | null => {
  const testServer = process.env.CLOUDLY_TEST_SERVER;
  return testServer && fs.existsSync(testServer) ? testServer : null;
};

/**
 * The launcher's arguments for the server: `npm start`'s (`--source`, the checkout's own bundle), or the run's
 * bundle under the same launcher and flags, which starts in far less time.
 */
const cliArguments = (): string[] => {
  const bundle = runServerBundle();
  return bundle ? ['--node', bundle] : ['--source'];
};

export interface ICloudlyProcess {
  child: ChildProcess;
  baseUrl: string;
  output: () => string;
}

/** The first administrator's password of a process started with `cloudlyProcessEnv`. */
export const processAdminPassword = 'process-admin-password';

export const cloudlyProcessEnv = (dataDirArg: string, extraArg: Record<string, string> = {}): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  CLOUDLY_PORT: '0',
  CLOUDLY_HOST: '127.0.0.1',
  CLOUDLY_DATA_DIR: dataDirArg,
  CLOUDLY_ADMIN_USERNAME: 'admin',
  CLOUDLY_ADMIN_PASSWORD: processAdminPassword,
  // Passwords hashed at the lowest cost the setting allows: 16 times cheaper than the default
  // (docs/testing.md); auth.passwordcost proves the default and a changed setting.
  CLOUDLY_PASSWORD_SCRYPT_N: String(minimumScryptN),
  ...extraArg,
});

/**
 * Administrator sessions to processes started with `cloudlyProcessEnv`: a restarted process needs
 * a new login, and a test's `finally` closes every session it opened with `closeAll`.
 */
export const processAdminLogins = () => {
  const admins: CloudlyAdminClient[] = [];
  return {
    login: async (baseUrlArg: string): Promise<CloudlyAdminClient> => {
      const admin = new CloudlyAdminClient(baseUrlArg);
      await admin.login('admin', processAdminPassword);
      admins.push(admin);
      return admin;
    },
    closeAll: (): void => {
      for (const admin of admins.splice(0)) {
        admin.close();
      }
    },
  };
};

/**
 * Starts the CLI and waits for its "listening" line; rejects with its output if it exits first.
 * `openFilesLimit` starts it under that open-files limit (`ulimit -n`).
 * A data directory that is new (missing or empty) gets a signing key from the run's pool
 * (test/helpers/signingkeys.ts), on the embedded database or a shared one.
 */
export const startCloudlyProcess = async (envArg: NodeJS.ProcessEnv, optionsArg: { openFilesLimit?: number } = {}): Promise<ICloudlyProcess> => {
  const dataDir = envArg.CLOUDLY_DATA_DIR;
  if (dataDir) {
    await seedSigningKey(dataDir);
  }
  if (optionsArg.openFilesLimit !== undefined) {
    // `ulimit -n` in a shell that then becomes the server (exec): the limit is the server's own.
    return startListening('bash', ['-c', `ulimit -n ${optionsArg.openFilesLimit} && exec "$0" "$@"`, serverLauncher, ...cliArguments()], envArg);
  }
  return startListening(serverLauncher, cliArguments(), envArg);
};

/**
 * Starts Cloudly the way the readme says, `npm start`; the child is the npm process. With
 * `processGroupArg` npm leads a process group of its own, as a terminal's foreground job or a
 * systemd unit's processes are one: `process.kill(-child.pid, signal)` then reaches npm and the
 * server at once, as Ctrl-C does.
 */
export const startNpmStartProcess = (envArg: NodeJS.ProcessEnv, processGroupArg = false): Promise<ICloudlyProcess> =>
  startListening('npm', ['start'], envArg, processGroupArg);

const startListening = (commandArg: string, argsArg: string[], envArg: NodeJS.ProcessEnv, processGroupArg = false): Promise<ICloudlyProcess> => new Promise((resolve, reject) => {
  const child = spawn(commandArg, argsArg, { cwd: projectRoot, env: envArg, stdio: ['ignore', 'pipe', 'pipe'], detached: processGroupArg });
  let output = '';
  let listening = false;
  const onData = (chunkArg: Buffer) => {
    output += chunkArg.toString();
    // Only until the line is seen: a busy server writes megabytes of log lines, and scanning all
    // of them again on every chunk would cost the machine more than the server does.
    const match = listening ? null : /"url":"(https?:\/\/[^"]+)".*cloudly is listening/.exec(output);
    if (match) {
      listening = true;
      resolve({ child, baseUrl: match[1], output: () => output });
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  child.once('exit', (code) => reject(Object.assign(new Error(`cloudly exited with ${code}`), { code, output })));
});

/**
 * The bound on a child Cloudly process starting (or refusing to start). About 6 s on a quiet
 * 2-core machine; test files run in parallel and the machine may be shared, so the bound is far
 * above that. Only a hung process waits this long.
 */
export const processStartBoundMs = 120_000;

/** Runs the CLI to completion (for start-up refusals); resolves with its exit code and output. */
export const runCloudlyProcessToExit = (envArg: NodeJS.ProcessEnv, timeoutMsArg = processStartBoundMs): Promise<{ code: number | null; output: string }> =>
  new Promise((resolve) => {
    const child = spawn(serverLauncher, cliArguments(), { cwd: projectRoot, env: envArg, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
    child.stderr.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMsArg);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });

export const exitOf = (childArg: ChildProcess): Promise<number | null> => new Promise((resolve) => {
  if (childArg.exitCode !== null || childArg.signalCode !== null) {
    resolve(childArg.exitCode);
    return;
  }
  childArg.once('exit', (code) => resolve(code));
});

/** SIGKILL (kill -9), then waits until the process is gone. */
export const killHard = async (childArg: ChildProcess): Promise<void> => {
  childArg.kill('SIGKILL');
  await exitOf(childArg);
};

/** Waits until the process's output matches `patternArg`; fails with the output after `timeoutMsArg`. */
export const waitForOutput = async (processArg: ICloudlyProcess, patternArg: RegExp, timeoutMsArg = 60_000): Promise<void> => {
  const deadline = Date.now() + timeoutMsArg;
  while (!patternArg.test(processArg.output())) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${patternArg} in:\n${processArg.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

export interface IProcessRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node <argsArg>` to its end (stdin closed) and answers its exit code and both outputs. */
export const runNodeToExit = (argsArg: string[], envArg?: NodeJS.ProcessEnv): Promise<IProcessRun> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argsArg, { ...(envArg ? { env: envArg } : {}), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunkArg: Buffer) => { stdout += chunkArg.toString(); });
    child.stderr.on('data', (chunkArg: Buffer) => { stderr += chunkArg.toString(); });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });

/**
 * Waits until the data directory's files stop growing for `quietMsArg`: what the controllers
 * derive after a change (a cluster's liveness, desired state, credentials) is written a moment
 * after the change is answered, so a test that compares files or fills a disk waits for it.
 */
export const waitForQuietDataDir = async (dirArg: string, quietMsArg = 400, timeoutMsArg = 20_000): Promise<void> => {
  const bytesOf = async (): Promise<number> => {
    let total = 0;
    for (const entry of await fsp.readdir(dirArg, { recursive: true, withFileTypes: true })) {
      if (entry.isFile()) {
        const full = path.join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name);
        total += (await fsp.stat(full).catch(() => ({ size: 0 }))).size;
      }
    }
    return total;
  };
  const deadline = Date.now() + timeoutMsArg;
  let last = await bytesOf();
  let quietSince = Date.now();
  while (Date.now() - quietSince < quietMsArg) {
    if (Date.now() > deadline) {
      throw new Error(`the data directory ${dirArg} kept changing for ${timeoutMsArg} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    const now = await bytesOf();
    if (now !== last) {
      last = now;
      quietSince = Date.now();
    }
  }
};
