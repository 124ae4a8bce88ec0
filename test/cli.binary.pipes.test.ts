import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { cliExecutable, createCli, type ICli } from './cli.fixture.js';
import type { IServicePort } from '../ts/interfaces/data/service.js';

/**
 * The real `cloudly` executable writing into a shell pipe, as `cloudly … | jq` and `cloudly … |
 * head` run it: an answer far larger than a pipe's buffer (64 KiB on Linux) must reach the reader
 * whole before the process exits, and a reader that stops early must end the command quietly.
 */

let t: ITestCloudly;
let cli: ICli;
let workDir: string;

/** Services with the most ports the contract takes make `services list -o json` pass 1 MiB. */
const servicesWithManyPorts = 14;
const portsEach = 1024;

before(async () => {
  t = await startTestCloudly();
  cli = await createCli({ binary: true });
  workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-cli-pipes-'));
  const { cluster } = await t.createCluster('pipes');
  await t.addNodes(cluster.id, 'n1');
  const ports: IServicePort[] = Array.from({ length: portsEach }, (_unused, indexArg) => ({
    name: `port-${indexArg + 1}`, port: indexArg + 1, protocol: 'tcp',
  }));
  for (let index = 0; index < servicesWithManyPorts; index += 1) {
    await t.caller.call('createService', {
      service: {
        name: `wide-${index}`,
        organizationId: 'org1',
        clusterId: cluster.id,
        runtime: { image: 'app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['n1'] } },
        ports,
        volumes: [],
      },
    });
  }
  await cli.login(t);
});

after(async () => {
  await t.stop().catch(() => undefined);
  await cli.dispose();
  await fsp.rm(workDir, { recursive: true, force: true });
});

interface IShellRun {
  /** The exit code of `cloudly` itself, as `$?` saw it inside the pipeline. */
  cloudlyCode: number;
  stderr: string;
}

/**
 * Runs `cloudly <args> | <reader>` through sh (a real pipe between two processes, as a terminal's
 * shell makes it); the reader's output goes to `outputArg`, cloudly's exit code to a file.
 */
const pipeInto = async (argsArg: string[], readerArg: string, outputArg: string): Promise<IShellRun> => {
  const codeFile = path.join(workDir, `code-${Date.now()}-${Math.random().toString(16).slice(2)}`);
  const script = '( "$PIPE_NODE" "$PIPE_CLI" "$@"; echo "$?" > "$CODE_FILE" ) | ' + readerArg + ' > "$OUT_FILE"';
  const child = spawn('sh', ['-c', script, 'sh', ...argsArg], {
    env: {
      ...process.env,
      CLOUDLY_CONFIG_DIR: cli.configDir,
      PIPE_NODE: process.execPath,
      PIPE_CLI: cliExecutable,
      CODE_FILE: codeFile,
      OUT_FILE: outputArg,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunkArg: Buffer) => { stderr += chunkArg.toString(); });
  const shellCode = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (codeArg) => resolve(codeArg));
  });
  assert.equal(shellCode, 0, `the pipeline's reader ended well: ${stderr}`);
  return { cloudlyCode: Number((await fsp.readFile(codeFile, 'utf8')).trim()), stderr };
};

/** Runs `cloudly <args> > file`: stdout is the file itself. */
const intoFile = async (argsArg: string[], outputArg: string): Promise<number | null> => {
  const file = await fsp.open(outputArg, 'w');
  try {
    const child = spawn(process.execPath, [cliExecutable, ...argsArg], {
      env: { ...process.env, CLOUDLY_CONFIG_DIR: cli.configDir },
      stdio: ['ignore', file.fd, 'inherit'],
    });
    return await new Promise((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (codeArg) => resolve(codeArg));
    });
  } finally {
    await file.close();
  }
};

test('more than 1 MiB of -o json through a pipe arrives byte for byte as in a file, and cloudly exits 0', async () => {
  const args = ['services', 'list', '-o', 'json'];
  const filePath = path.join(workDir, 'list.file.json');
  assert.equal(await intoFile(args, filePath), 0);
  const fileBytes = await fsp.readFile(filePath);
  assert.ok(fileBytes.length > 1024 * 1024, `the answer is larger than 1 MiB (${fileBytes.length} bytes)`);
  assert.deepEqual(JSON.parse(fileBytes.toString()), await t.caller.call('getServices', {}));

  const pipedPath = path.join(workDir, 'list.piped.json');
  const piped = await pipeInto(args, 'cat', pipedPath);
  assert.equal(piped.cloudlyCode, 0, piped.stderr);
  assert.equal(piped.stderr, '');
  const pipedBytes = await fsp.readFile(pipedPath);
  assert.equal(pipedBytes.length, fileBytes.length, 'as many bytes through the pipe as in the file');
  assert.ok(pipedBytes.equals(fileBytes), 'the same bytes through the pipe as in the file');
});

test('-o yaml through a pipe is whole too', async () => {
  const args = ['services', 'list', '-o', 'yaml'];
  const filePath = path.join(workDir, 'list.file.yaml');
  assert.equal(await intoFile(args, filePath), 0);
  const fileBytes = await fsp.readFile(filePath);
  assert.ok(fileBytes.length > 64 * 1024, `the answer is larger than a pipe's buffer (${fileBytes.length} bytes)`);
  const pipedPath = path.join(workDir, 'list.piped.yaml');
  const piped = await pipeInto(args, 'cat', pipedPath);
  assert.equal(piped.cloudlyCode, 0, piped.stderr);
  assert.ok((await fsp.readFile(pipedPath)).equals(fileBytes), 'the same bytes through the pipe as in the file');
});

test('a reader that goes away early (head) ends cloudly quietly: no error, exit 0', async () => {
  const headPath = path.join(workDir, 'list.head.json');
  const run = await pipeInto(['services', 'list', '-o', 'json'], 'head -c 100', headPath);
  assert.equal(run.stderr, '', 'nothing on stderr: no EPIPE, no stack trace');
  assert.equal(run.cloudlyCode, 0);
  const head = await fsp.readFile(headPath, 'utf8');
  assert.equal(head.length, 100);
  assert.ok(head.startsWith('{\n  "services": [\n'), head);
});
