/**
 * bin/cloudly-server, the one launcher of the server process: it passes the server's node flags
 * on node's command line and execs node, so the process a caller starts is the server itself.
 * These tests look at the processes it starts (their /proc command lines, and what V8 reports
 * inside them), and check that `npm start`, `npm run start:prod`, `cloudly server` and the
 * Dockerfile go through it and that no other file carries the flags.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { cloudlyProcessEnv, exitOf, killHard, processStartBoundMs, runServerBundle, serverLauncher, startCloudlyProcess, startNpmStartProcess } from './helpers/process.js';
import { lockFileName } from '../ts/core/datadirlock.js';

const projectRoot = path.resolve(import.meta.dirname, '..');
/** What `--source` runs (`npm start`, `cloudly server`): ts/cli.ts from a bundle of the checkout, or through tsx. */
const sourceEntry = path.join('bin', 'cloudly-source.js');
/** The node flags the server must run with (their values are the launcher's to choose). */
const semiSpaceFlag = '--max-semi-space-size';
const growingFlag = '--heap-growing-percent';

/** A process's argv, from the kernel. */
const commandLineOf = (pidArg: number): string[] =>
  fs.readFileSync(`/proc/${pidArg}/cmdline`, 'utf8').split('\0').filter((wordArg) => wordArg !== '');

/** The value of `--name=value` in an argv, before the first argument that is not a node option. */
const flagValue = (argvArg: string[], nameArg: string, entryArg: string): number => {
  const entryIndex = argvArg.findIndex((wordArg) => wordArg.endsWith(entryArg));
  assert.ok(entryIndex > 0, `${entryArg} in ${argvArg.join(' ')}`);
  const index = argvArg.findIndex((wordArg) => wordArg.startsWith(`${nameArg}=`));
  assert.ok(index > 0 && index < entryIndex, `${nameArg} is a node option before ${entryArg}: ${argvArg.join(' ')}`);
  const value = Number(argvArg[index].slice(nameArg.length + 1));
  assert.ok(Number.isInteger(value) && value > 0, `${argvArg[index]}`);
  return value;
};

/** The server's two flags on a node command line (and that it is node's). */
const assertServerFlags = (argvArg: string[], entryArg: string): void => {
  assert.equal(path.basename(argvArg[0]), 'node', `node runs: ${argvArg.join(' ')}`);
  flagValue(argvArg, semiSpaceFlag, entryArg);
  flagValue(argvArg, growingFlag, entryArg);
};

/** Every process below `pidArg` (children, grandchildren, …), from /proc. */
const descendantsOf = (pidArg: number): number[] => {
  const parents = new Map<number, number>();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) {
      continue;
    }
    try {
      // "pid (comm) state ppid …": comm may hold spaces, so read after its closing parenthesis.
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      parents.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // Gone in between.
    }
  }
  const found: number[] = [];
  let frontier = [pidArg];
  while (frontier.length > 0) {
    frontier = [...parents].filter(([, parentArg]) => frontier.includes(parentArg)).map(([childArg]) => childArg);
    found.push(...frontier);
  }
  return found;
};

/**
 * Reports what V8 does in this process: the old generation's growing factor at forced full
 * collections (V8's own trace line), and the young generation's size after a burst of
 * short-lived objects (two semi-spaces). Needs no node flag of its own (gc is exposed at run time).
 */
const probeSource = `
import * as v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
const write = process.stdout.write.bind(process.stdout);
v8.setFlagsFromString('--trace-gc-verbose');
gc();
const kept = Array.from({ length: 200000 }, (_, i) => ({ i, text: 'x' + i }));
gc();
v8.setFlagsFromString('--no-trace-gc-verbose');
let young = [];
for (let i = 0; i < 3000000; i += 1) {
  young.push({ i });
  if (young.length > 100000) young = [];
}
const newSpace = v8.getHeapSpaceStatistics().find((spaceArg) => spaceArg.space_name === 'new_space');
write('PROBE ' + JSON.stringify({
  pid: process.pid, execArgv: process.execArgv, args: process.argv.slice(2), kept: kept.length, newSpaceBytes: newSpace.space_size, url: import.meta.url,
}) + '\\n');
process.exitCode = Number(process.env.PROBE_EXIT_CODE ?? 0);
`;

interface IProbe {
  pid: number;
  execArgv: string[];
  args: string[];
  newSpaceBytes: number;
  /** The probe module's own URL: which file ran it. */
  url: string;
  factors: number[];
  code: number | null;
  childPid: number;
}

const runProbe = (commandArg: string, argsArg: string[], envArg: Record<string, string> = {}): Promise<IProbe> => new Promise((resolve, reject) => {
  const child = spawn(commandArg, argsArg, { cwd: os.tmpdir(), env: { PATH: process.env.PATH, ...envArg }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  child.stderr.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
  child.once('error', reject);
  child.once('exit', (code) => {
    const line = /^PROBE (.*)$/m.exec(output)?.[1];
    if (!line) {
      reject(new Error(`the probe reported nothing (exit ${code}):\n${output}`));
      return;
    }
    // "[HeapController] Limit: old size: … KB, new limit: … KB (2.0)": the factor of the new limit.
    const factors = [...output.matchAll(/\[HeapController\] Limit: .*\(([0-9.]+)\)/g)].map((matchArg) => Number(matchArg[1]));
    resolve({ ...(JSON.parse(line) as Omit<IProbe, 'factors' | 'code' | 'childPid'>), factors, code, childPid: child.pid! });
  });
});

test('the launcher execs node on dist/cli.js (and on ts/cli.ts, bundled or through tsx, with --source) with flags V8 applies; plain node is the control', async () => {
  // A copy of the launcher in a scratch project whose entries are the probe: the launcher finds
  // its entries beside itself, as it does in the container (/app) and in a checkout.
  const scratch = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-launcher-'));
  try {
    await fsp.mkdir(path.join(scratch, 'bin'));
    await fsp.mkdir(path.join(scratch, 'dist'));
    await fsp.mkdir(path.join(scratch, 'ts'));
    await fsp.mkdir(path.join(scratch, 'node_modules'));
    await fsp.copyFile(serverLauncher, path.join(scratch, 'bin', 'cloudly-server'));
    await fsp.chmod(path.join(scratch, 'bin', 'cloudly-server'), 0o755);
    for (const name of ['cloudly-source.js', 'checkoutbundle.js']) {
      await fsp.copyFile(path.join(projectRoot, 'bin', name), path.join(scratch, 'bin', name));
    }
    await fsp.writeFile(path.join(scratch, 'tsconfig.json'), '{}');
    await fsp.writeFile(path.join(scratch, 'dist', 'cli.js'), probeSource);
    await fsp.writeFile(path.join(scratch, 'ts', 'cli.ts'), probeSource);
    await fsp.writeFile(path.join(scratch, 'package.json'), '{ "type": "module" }');
    for (const name of ['tsx', 'esbuild']) {
      await fsp.symlink(path.join(projectRoot, 'node_modules', name), path.join(scratch, 'node_modules', name));
    }

    const control = await runProbe(process.execPath, [path.join(scratch, 'dist', 'cli.js')]);
    const production = await runProbe(path.join(scratch, 'bin', 'cloudly-server'), ['one', 'two'], { PROBE_EXIT_CODE: '3' });
    const source = await runProbe(path.join(scratch, 'bin', 'cloudly-server'), ['--source']);
    const sourceThroughTsx = await runProbe(path.join(scratch, 'bin', 'cloudly-server'), ['--source'], { CLOUDLY_SERVER_SOURCE: '1' });

    for (const [name, probe] of [['dist/cli.js', production], ['--source', source], ['--source through tsx', sourceThroughTsx]] as const) {
      const entry = name.startsWith('--source') ? 'ts/cli.ts' : 'dist/cli.js';
      // exec: the process the caller started is node itself (signals reach it, its exit code is the exit code).
      assert.equal(probe.pid, probe.childPid, `${name}: the spawned pid is the node process`);
      const semiSpaceMiB = flagValue(['node', ...probe.execArgv, entry], semiSpaceFlag, entry);
      const growingPercent = flagValue(['node', ...probe.execArgv, entry], growingFlag, entry);
      // V8 applied them: the young generation is two semi-spaces of at most the flag's size, and
      // every full collection set the old generation's limit with the flag's factor.
      assert.ok(probe.newSpaceBytes <= 2 * semiSpaceMiB * 1024 * 1024, `${name}: new space ${probe.newSpaceBytes} bytes`);
      assert.ok(probe.factors.length > 0, `${name}: V8 reported no growing factor`);
      assert.deepEqual(new Set(probe.factors), new Set([1 + growingPercent / 100]), `${name}: factors ${probe.factors.join(', ')}`);
      // The control: plain node gets V8's own sizes, so the checks above do not pass for V8's own reasons.
      assert.ok(control.newSpaceBytes > 2 * semiSpaceMiB * 1024 * 1024, `control new space ${control.newSpaceBytes}`);
      assert.ok(control.factors.length > 0 && control.factors.every((factorArg) => factorArg !== 1 + growingPercent / 100), `control factors ${control.factors.join(', ')}`);
    }
    assert.deepEqual(control.execArgv, []);
    assert.deepEqual(production.args, ['one', 'two'], 'arguments after the launcher reach the entry');
    assert.equal(production.code, 3, "the entry's exit code is the launcher's");
    assert.equal(source.code, 0);
    assert.equal(sourceThroughTsx.code, 0);
    // --source ran ts/cli.ts from the bundle it built of it on first use; with
    // CLOUDLY_SERVER_SOURCE=1, ts/cli.ts itself through tsx.
    assert.equal(source.url, pathToFileURL(path.join(scratch, '.nogit', 'server', 'main.mjs')).href);
    assert.ok(fs.existsSync(path.join(scratch, '.nogit', 'server', 'manifest.json')), 'the bundle names what it was built from');
    assert.equal(sourceThroughTsx.url, pathToFileURL(path.join(scratch, 'ts', 'cli.ts')).href);
  } finally {
    await fsp.rm(scratch, { recursive: true, force: true });
  }
});

test('the server started through the launcher is the node process with the flags on its command line; SIGTERM stops it with 0', async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-launcher-server-'));
  let started: Awaited<ReturnType<typeof startCloudlyProcess>> | null = null;
  try {
    // The launcher as the other process tests start it: `--node` with the run's bundle of the
    // server, or `--source` when there is none (test/helpers/process.ts). `--source` itself, what
    // `npm start` runs, is started by the next test.
    started = await startCloudlyProcess(cloudlyProcessEnv(dataDir));
    const bundle = runServerBundle();
    const entry = bundle ? path.basename(bundle) : 'ts/cli.ts';
    assertServerFlags(commandLineOf(started.child.pid!), entry);
    assert.equal((await fetch(`${started.baseUrl}/readyz`)).status, 200);
    started.child.kill('SIGTERM');
    assert.equal(await exitOf(started.child), 0);
    assert.match(started.output(), /cloudly stopped/);
  } finally {
    if (started) {
      await killHard(started.child);
    }
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});

/** The one process below `pidArg` that runs `entryArg`: its pid and argv. */
const serverBelow = (pidArg: number, entryArg: string): { pid: number; argv: string[] } => {
  const servers = descendantsOf(pidArg).map((pidOf) => {
    try {
      return { pid: pidOf, argv: commandLineOf(pidOf) };
    } catch {
      return { pid: pidOf, argv: [] };
    }
  }).filter((serverArg) => serverArg.argv.some((wordArg) => wordArg.endsWith(entryArg)));
  assert.equal(servers.length, 1, `one process runs ${entryArg} below ${pidArg}: ${JSON.stringify(servers)}`);
  return servers[0];
};

test('`npm start` and `cloudly server` start the server through the launcher; SIGTERM to them stops it with 0 and leaves no server behind', async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-launcher-npm-'));
  /** Every server process seen, killed at the end whatever happened (SIGKILL to a gone pid is a no-op). */
  const serverPids: number[] = [];
  let cli: ChildProcess | null = null;
  try {
    const npmStarted = await startNpmStartProcess(cloudlyProcessEnv(dataDir));
    const npmServer = serverBelow(npmStarted.child.pid!, sourceEntry);
    serverPids.push(npmServer.pid);
    assertServerFlags(npmServer.argv, sourceEntry);
    const livez = `${npmStarted.baseUrl}/livez`;
    assert.equal((await fetch(livez)).status, 200);
    // SIGTERM to the npm process (as a terminal's Ctrl-C or a supervisor sends it) stops the
    // server gracefully: no orphaned server, nothing answers on its port, its lock is released.
    npmStarted.child.kill('SIGTERM');
    assert.equal(await exitOf(npmStarted.child), 0);
    assert.match(npmStarted.output(), /cloudly stopped/);
    await assert.rejects(() => fetch(livez), 'nothing answers on the port any more');
    assert.equal(fs.existsSync(path.join(dataDir, lockFileName)), false, 'the data directory lock is released');

    cli = spawn(process.execPath, [path.join(projectRoot, 'bin', 'cloudly.js'), 'server'], {
      cwd: os.tmpdir(), env: cloudlyProcessEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    cli.stdout!.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
    cli.stderr!.on('data', (chunkArg: Buffer) => { output += chunkArg.toString(); });
    const deadline = Date.now() + processStartBoundMs;
    while (!/cloudly is listening/.test(output)) {
      assert.ok(Date.now() < deadline && cli.exitCode === null, `cloudly server did not start:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const cliServer = serverBelow(cli.pid!, sourceEntry);
    serverPids.push(cliServer.pid);
    const serverArgv = cliServer.argv;
    assertServerFlags(serverArgv, sourceEntry);
    // The launcher found its entry from its own place, not from the working directory.
    assert.ok(serverArgv.includes(path.join(projectRoot, sourceEntry)), serverArgv.join(' '));
    cli.kill('SIGTERM');
    assert.equal(await exitOf(cli), 0);
    assert.match(output, /cloudly stopped/);
  } finally {
    cli?.kill('SIGKILL');
    for (const pid of serverPids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone, as it should be.
      }
    }
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});

test('npm start, npm run start:prod and the Dockerfile run the launcher; no other file names the server flags', async () => {
  const scripts = (JSON.parse(await fsp.readFile(path.join(projectRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  assert.equal(scripts.start, 'bin/cloudly-server --source');
  assert.equal(scripts['start:prod'], 'bin/cloudly-server');
  const dockerfile = await fsp.readFile(path.join(projectRoot, 'Dockerfile'), 'utf8');
  const command = /^CMD (\[.*\])$/m.exec(dockerfile)?.[1];
  assert.ok(command, 'the Dockerfile has an exec-form CMD');
  assert.deepEqual(JSON.parse(command), ['/app/bin/cloudly-server']);
  assert.match(dockerfile, /^COPY bin\/cloudly-server \.\/bin\/cloudly-server$/m);
  assert.match(dockerfile, /^WORKDIR \/app$/m);
  assert.equal((await fsp.stat(serverLauncher)).mode & 0o111, 0o111, 'the launcher is executable');

  // The code, scripts and configuration (docs may describe the flags).
  const files = ['package.json', 'Dockerfile'];
  for (const folder of ['bin', 'ts', 'scripts', 'test', 'bench', 'web']) {
    for (const name of await fsp.readdir(path.join(projectRoot, folder), { recursive: true })) {
      const file = path.join(folder, name);
      if (/\.(ts|js|mjs|cjs|json)$/.test(name) || folder === 'bin') {
        if ((await fsp.stat(path.join(projectRoot, file))).isFile()) {
          files.push(file);
        }
      }
    }
  }
  const carriers: string[] = [];
  for (const file of files) {
    const text = await fsp.readFile(path.join(projectRoot, file), 'utf8');
    if (text.includes(semiSpaceFlag) || text.includes(growingFlag)) {
      carriers.push(file);
    }
  }
  assert.deepEqual(carriers.sort(), [path.join('bin', 'cloudly-server'), path.join('test', 'foundation.launcher.test.ts')]);
});
