import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestCloudly } from './helpers/cloudly.js';
import { createCli } from './cli.fixture.js';

/**
 * The completion scripts `cloudly completion bash|zsh|fish` prints, run in the real shells: bash
 * calls the completion function as readline would (COMP_WORDS / COMP_CWORD), zsh completes typed
 * lines with TAB in an interactive shell on a pseudo-terminal (zsh/zpty) after compinit, fish
 * answers `complete -C <line>`. Names (`--cluster`, `--service`, `--context`) are completed from a
 * real server through a `cloudly` on PATH logged in to it. The zsh and fish tests skip, saying so,
 * when the shell is not installed (`apt-get install -y zsh fish`).
 */

const executable = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'cloudly.js');
const hasShell = (nameArg: string): boolean => spawnSync(nameArg, ['-c', 'exit 0']).status === 0;
const zshMissing = hasShell('zsh') ? false : 'zsh is not installed (apt-get install -y zsh); the zsh completion was not run';
const fishMissing = hasShell('fish') ? false : 'fish is not installed (apt-get install -y fish); the fish completion was not run';

let dir: string;
let bashScript: string;
let zshScript: string;
let fishScript: string;

const run = (fileArg: string, argsArg: string[], inputArg?: string): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    const child = execFile(fileArg, argsArg, { timeout: 60_000, maxBuffer: 8 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
    if (inputArg !== undefined) {
      child.stdin?.end(inputArg);
    }
  });

before(async () => {
  dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-completion-'));
  const bash = await run(process.execPath, [executable, 'completion', 'bash']);
  const zsh = await run(process.execPath, [executable, 'completion', 'zsh']);
  const fish = await run(process.execPath, [executable, 'completion', 'fish']);
  assert.equal(bash.code, 0, bash.stderr);
  assert.equal(zsh.code, 0, zsh.stderr);
  assert.equal(fish.code, 0, fish.stderr);
  bashScript = path.join(dir, 'cloudly.bash');
  zshScript = path.join(dir, '_cloudly');
  fishScript = path.join(dir, 'cloudly.fish');
  await fsp.writeFile(bashScript, bash.stdout);
  await fsp.writeFile(zshScript, zsh.stdout);
  await fsp.writeFile(fishScript, fish.stdout);
});

after(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

/** Calls bash's completion function for the words typed so far (the last one is being completed). */
const bashComplete = async (wordsArg: string[], pathArg?: string): Promise<string[]> => {
  const program = [
    ...(pathArg ? [`export PATH=${JSON.stringify(pathArg)}:"$PATH"`] : []),
    `source ${JSON.stringify(bashScript)}`,
    `COMP_WORDS=(${wordsArg.map((wordArg) => `'${wordArg.replace(/'/g, `'\\''`)}'`).join(' ')})`,
    `COMP_CWORD=${wordsArg.length - 1}`,
    '_cloudly',
    'printf "%s\\n" "${COMPREPLY[@]}"',
  ].join('\n');
  const result = await run('bash', ['--norc', '--noprofile', '-c', program]);
  assert.equal(result.code, 0, result.stderr);
  return result.stdout.split('\n').filter(Boolean);
};

test('bash: the script registers itself for cloudly and completes commands, subcommands, flags and --output values', async () => {
  const registered = await run('bash', ['--norc', '--noprofile', '-c', `source ${JSON.stringify(bashScript)}; complete -p cloudly`]);
  assert.equal(registered.code, 0, registered.stderr);
  assert.equal(registered.stdout.trim(), 'complete -o default -F _cloudly cloudly');

  assert.deepEqual(await bashComplete(['cloudly', 'clu']), ['clusters']);
  assert.deepEqual((await bashComplete(['cloudly', 'backups', ''])).filter((wordArg) => !wordArg.startsWith('-')).sort(),
    ['create', 'drill', 'list', 'prune', 'restore', 'schedules', 'verify']);
  assert.deepEqual(await bashComplete(['cloudly', 'clusters', 'rot']), ['rotate-relay-token']);
  assert.deepEqual(await bashComplete(['cloudly', 'backups', 'create', '--rep']), ['--replication']);
  assert.deepEqual(await bashComplete(['cloudly', 'clusters', 'list', '-o', 'y']), ['yaml']);
  // readline splits `http://x:3000` at the colons; the value words are skipped, the path still found.
  assert.deepEqual(await bashComplete(['cloudly', '--url', 'http', ':', '//127.0.0.1', ':', '3000', 'services', 'set-volume-initialization', '--mou']),
    ['--mount-path']);
  // A flag's value that happens to be a command name does not change the path.
  assert.deepEqual(await bashComplete(['cloudly', 'clusters', 'create', '--name', 'backups', '--dr']), ['--dry-run']);
  // After a flag that takes a value (other than --output and the named ones) nothing is offered: readline falls back to file names.
  assert.deepEqual(await bashComplete(['cloudly', 'backups', 'restore', '--backup', '']), []);
});

/** What fish offers for the line typed so far (`complete -C`), one candidate a line without descriptions. */
const fishComplete = async (lineArg: string, pathArg?: string): Promise<string[]> => {
  const program = `${pathArg ? `set -gx PATH ${JSON.stringify(pathArg)} $PATH; ` : ''}source ${JSON.stringify(fishScript)}; complete -C ${JSON.stringify(lineArg)}`;
  const result = await run('fish', ['--no-config', '-c', program]);
  assert.equal(result.code, 0, result.stderr);
  return result.stdout.split('\n').filter(Boolean).map((lineArg) => lineArg.split('\t')[0]);
};

test('fish: completes commands, subcommands, flags and --output values, skipping flags and their values', { skip: fishMissing }, async () => {
  assert.deepEqual(await fishComplete('cloudly clu'), ['clusters']);
  assert.deepEqual((await fishComplete('cloudly backups ')).filter((wordArg) => !wordArg.startsWith('-')).sort(), ['create', 'drill', 'list', 'prune', 'restore', 'schedules', 'verify']);
  assert.deepEqual(await fishComplete('cloudly clusters rot'), ['rotate-relay-token']);
  assert.deepEqual(await fishComplete('cloudly backups create --rep'), ['--replication']);
  assert.deepEqual(await fishComplete('cloudly clusters list -o y'), ['yaml']);
  assert.deepEqual(await fishComplete('cloudly --url http://127.0.0.1:3000 services set-volume-initialization --mou'), ['--mount-path']);
  assert.deepEqual(await fishComplete('cloudly clusters create --name backups --dr'), ['--dry-run']);
});

test('names: --cluster, --service and --context complete from the server and the kept contexts (bash, zsh and fish)', async () => {
  const server = await startTestCloudly();
  const cli = await createCli();
  try {
    await cli.login(server);
    const { cluster } = await server.createCluster('prod-eu');
    await server.createCluster('staging');
    await server.addNodes(cluster.id, 'n1');
    await server.caller.call('createService', {
      service: { name: 'app', organizationId: 'org1', clusterId: cluster.id, runtime: { image: 'app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['n1'] } }, volumes: [] },
    });
    // A `cloudly` on PATH, as an installed one is, reading the logged-in config directory.
    const binDir = path.join(dir, 'bin');
    await fsp.mkdir(binDir, { recursive: true });
    await fsp.writeFile(path.join(binDir, 'cloudly'),
      `#!/bin/sh\nCLOUDLY_CONFIG_DIR=${JSON.stringify(cli.configDir)} exec ${JSON.stringify(process.execPath)} ${JSON.stringify(executable)} "$@"\n`, { mode: 0o755 });
    const contextName = `admin@${new URL(server.baseUrl).host}`;
    assert.deepEqual(await bashComplete(['cloudly', 'clusters', 'get', '--cluster', 'pr'], binDir), ['prod-eu']);
    assert.deepEqual((await bashComplete(['cloudly', 'services', 'list', '--cluster', ''], binDir)).sort(), ['prod-eu', 'staging']);
    assert.deepEqual(await bashComplete(['cloudly', 'services', 'status', '--service', ''], binDir), ['app']);
    assert.deepEqual(await bashComplete(['cloudly', '--context', 'adm'], binDir), [contextName]);
    if (!zshMissing) {
      const typed = await zshType(['cloudly clusters get --cluster pr\t', 'cloudly services status --service \t'], { afterCompinit: `source ${zshScript}`, path: binDir });
      assert.equal(typed[0].args, 'clusters get --cluster prod-eu');
      assert.equal(typed[1].args, 'services status --service app');
    }
    if (!fishMissing) {
      assert.deepEqual((await fishComplete('cloudly services list --cluster ', binDir)).sort(), ['prod-eu', 'staging']);
      assert.deepEqual(await fishComplete('cloudly services get --service a', binDir), ['app']);
      assert.deepEqual(await fishComplete('cloudly --context ', binDir), [contextName]);
    }
  } finally {
    await server.stop();
    await cli.dispose();
  }
});

/**
 * Types each line into an interactive zsh (on a pseudo-terminal, compinit loaded, the script
 * loaded, `cloudly` a function that prints its arguments), then Enter; answers what the
 * completed line ran with and the screen text in between (where zsh lists ambiguous choices).
 */
const zshType = async (
  linesArg: string[],
  loadArg: { beforeCompinit?: string; afterCompinit?: string; path?: string } = { afterCompinit: `source ${zshScript}` },
): Promise<Array<{ args: string; screen: string }>> => {
  // `cloudly __complete` (the names) runs the real one on `path`; every other call prints its arguments.
  const stub = loadArg.path
    ? `export PATH=${loadArg.path}:\\$PATH ; cloudly() { if [[ \\$1 == __complete ]]; then command cloudly \\"\\$@\\"; else print -r -- \\"RESULT:\\"\\"[\\$*]\\"; fi }`
    : `cloudly() { print -r -- \\"RESULT:\\"\\"[\\$*]\\" }`;
  const driver = path.join(dir, 'driver.zsh');
  await fsp.writeFile(driver, [
    'zmodload zsh/zpty',
    'zpty z zsh -f -i',
    `zpty -w z "PS1='> ' ; ${loadArg.beforeCompinit ? `${loadArg.beforeCompinit} ; ` : ''}autoload -U compinit ; compinit -u -D ; ${loadArg.afterCompinit ? `${loadArg.afterCompinit} ; ` : ''}${stub}"`,
    'for line in "$@"; do',
    '  zpty -w -n z "$line"$\'\\n\'',
    "  zpty -r z out '*RESULT:\\[*\\]*'",
    '  print -r -- "CASE:${out}"',
    'done',
    'zpty -d z',
  ].join('\n'));
  const result = await run('zsh', ['-f', driver, ...linesArg]);
  assert.equal(result.code, 0, result.stderr);
  const cases = result.stdout.split('CASE:').slice(1);
  assert.equal(cases.length, linesArg.length, result.stdout);
  return cases.map((caseArg) => {
    const at = caseArg.lastIndexOf('RESULT:[');
    return {
      args: caseArg.slice(at + 'RESULT:['.length, caseArg.indexOf(']', at)),
      // Escape sequences out, so the listed words can be read.
      screen: caseArg.slice(0, at).replace(/\u001b\[[0-9;?]*[A-Za-z]/g, ' ').replace(/[\r\u0007\b]/g, ' '),
    };
  });
};

test('zsh: TAB completes commands, subcommands, flags and --output values in an interactive zsh after compinit', { skip: zshMissing }, async () => {
  const results = await zshType([
    'cloudly clus\trot\t',
    'cloudly --url http://127.0.0.1:3000 -o js\tbac\tcre\t--rep\t',
    'cloudly clusters create --name backups --dr\t',
    'cloudly services set-vol\t--mou\t/data',
    'cloudly backups \t',
  ]);
  assert.equal(results[0].args, 'clusters rotate-relay-token');
  assert.equal(results[1].args, '--url http://127.0.0.1:3000 -o json backups create --replication');
  assert.equal(results[2].args, 'clusters create --name backups --dry-run');
  assert.equal(results[3].args, 'services set-volume-initialization --mount-path /data');
  // Ambiguous: the line stays as typed and zsh lists the choices.
  assert.equal(results[4].args, 'backups');
  for (const choice of ['create', 'drill', 'list', 'prune', 'restore', 'schedules', 'verify']) {
    assert.match(results[4].screen, new RegExp(`(^|\\s)${choice}(\\s|$)`), `zsh listed ${choice}: ${JSON.stringify(results[4].screen)}`);
  }
});

test('zsh: saved as _cloudly in $fpath, compinit finds it and the very first TAB completes', { skip: zshMissing }, async () => {
  const fpathDir = path.join(dir, 'fpath');
  await fsp.mkdir(fpathDir, { recursive: true });
  await fsp.copyFile(zshScript, path.join(fpathDir, '_cloudly'));
  const results = await zshType(['cloudly back\tres\t', 'cloudly nodes set\t'], { beforeCompinit: `fpath=(${fpathDir} $fpath)` });
  assert.equal(results[0].args, 'backups restore');
  assert.equal(results[1].args, 'nodes set-corestore');
});

test('zsh: the script registers cloudly with compdef, and loads from $fpath as _cloudly', { skip: zshMissing }, async () => {
  const evaled = await run('zsh', ['-f', '-c', `autoload -U compinit; compinit -u -D; eval "$(cat ${JSON.stringify(zshScript)})"; print -r -- "\${_comps[cloudly]}"`]);
  assert.equal(evaled.code, 0, evaled.stderr);
  assert.equal(evaled.stdout.trim(), '_cloudly');
  const fromFpath = await run('zsh', ['-f', '-c', `fpath=(${JSON.stringify(dir)} $fpath); autoload -U compinit; compinit -u -D; print -r -- "\${_comps[cloudly]}"`]);
  assert.equal(fromFpath.code, 0, fromFpath.stderr);
  assert.equal(fromFpath.stdout.trim(), '_cloudly');
});
