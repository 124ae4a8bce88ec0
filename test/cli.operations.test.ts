import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { waitFor } from './helpers/cloudly.js';
import { chunked, descriptorOf, startBackupWorld, type IBackupWorld } from './backup.fixture.js';
import { cliExecutable, createCli, jsonOf, withoutProgressStamp, type ICli, type ICliChild, type ICliRun } from './cli.fixture.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import type { IReq_Cloudly_Relay_BackupClusterService } from '../ts/interfaces/requests/backup.js';

/**
 * Following long work from the command line: `cloudly backups create` follows the operation the
 * server answers, with progress lines on stderr when not on a terminal and a bar on one (run
 * under `script`, a real pseudo-terminal); Ctrl-C detaches and leaves the operation running;
 * `--detach` answers at once; `--cancel` and `cloudly operations cancel` cancel;
 * `cloudly operations list|get|watch` follow it again. The test relay streams half of a real
 * closure, then holds the rest until the test opens its gate, so the work is mid-way for as long
 * as a scenario needs.
 */

let world: IBackupWorld;
let cli: ICli;
const closureBytes = randomBytes(2 * 1024 * 1024);
const gates = new Map<string, () => void>();
const gateWaits = new Map<string, Promise<void>>();
/** Resolves when the relay has answered Cloudly for that backup (sent everything). */
const relayAnswered = new Map<string, Promise<void>>();

type TLooseContract = { method: string; request: any; response: any };
const api = (methodArg: string, requestArg: Record<string, unknown>): Promise<any> => world.t.caller.call<TLooseContract>(methodArg, requestArg);

/** The relay holds this backup's second half until `openGate(backupId)`. */
const gateFor = (backupIdArg: string): Promise<void> => {
  if (!gateWaits.has(backupIdArg)) {
    gateWaits.set(backupIdArg, new Promise<void>((resolve) => gates.set(backupIdArg, resolve)));
  }
  return gateWaits.get(backupIdArg)!;
};
const openGate = (backupIdArg: string): void => {
  void gateFor(backupIdArg);
  gates.get(backupIdArg)!();
};

async function* heldHalfway(backupIdArg: string): AsyncIterable<Buffer> {
  const half = closureBytes.byteLength / 2;
  yield* chunked(closureBytes.subarray(0, half), 64 * 1024);
  await gateFor(backupIdArg);
  yield* chunked(closureBytes.subarray(half), 64 * 1024);
}

before(async () => {
  world = await startBackupWorld();
  cli = await createCli();
  const { relay } = world;
  relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    let answered: () => void = () => undefined;
    relayAnswered.set(request.backupId, new Promise<void>((resolve) => { answered = resolve; }));
    await sendServiceDatabaseClosure(relay, {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closureBytes),
    }, heldHalfway(request.backupId)).catch(() => undefined);
    setTimeout(answered, 500);
    return { snapshots: [{ type: 'database', snapshotId: `snap-${request.backupId}`, resourceName: 'db', databaseName: 'app', createdAt: 1, sizeBytes: closureBytes.byteLength }] };
  });
  await waitFor(() => world.t.cloudly.relays.activeSession(world.clusterId) !== null, 'relay session');
  await cli.login(world.t);
});

after(async () => {
  for (const release of gates.values()) {
    release();
  }
  await world.t.stop();
  await cli.dispose();
});

const createArgs = (backupIdArg: string): string[] =>
  ['backups', 'create', '--cluster', world.clusterId, '--node', world.nodeId, '--service', world.service.id, '--backup-id', backupIdArg];

/** The operation of a backup, read through the API. */
const operationOf = async (backupIdArg: string): Promise<any> => {
  const { operations } = await api('getOperations', { serviceId: world.service.id });
  return operations.find((operationArg: any) => operationArg.backupId === backupIdArg) ?? null;
};

/** Waits until the server reports half of the closure moved (the relay holds the rest). */
const waitHalfway = async (backupIdArg: string): Promise<any> => {
  let operation: any = null;
  await waitFor(async () => {
    operation = await operationOf(backupIdArg);
    return operation?.progress?.bytesDone === closureBytes.byteLength / 2;
  }, `operation of ${backupIdArg} halfway`, 60_000);
  return operation;
};

const waitForOutput = (childArg: ICliChild, patternArg: RegExp, whatArg: string): Promise<void> =>
  waitFor(() => patternArg.test(childArg.stderr), `${whatArg}: ${JSON.stringify(childArg.stderr)}`, 60_000);

test('not on a terminal: plain progress lines with bytes, percent and phase, up to completion', async () => {
  const running = cli.start([...createArgs('ops-lines'), '-o', 'json']);
  running.child.stdin.end();
  await waitHalfway('ops-lines');
  await waitForOutput(running, /^backup ops-lines: transfer 1\.0 MiB of 2\.0 MiB \(50%\)/m, 'a halfway line');
  openGate('ops-lines');
  const done = await running.closed;
  const answer = jsonOf(done);
  assert.equal(answer.operation.state, 'completed');
  assert.deepEqual(withoutProgressStamp(answer), withoutProgressStamp(await api('getOperation', { operationId: answer.operation.operationId })));
  const lines = done.stderr.trimEnd().split('\n');
  assert.ok(lines.every((lineArg) => lineArg.startsWith('backup ops-lines: ')), done.stderr);
  assert.match(lines.at(-1)!, /^backup ops-lines: completed \(2\.0 MiB in \d+s\)$/);
  // Bytes never go backwards, and the last transfer figure before the end is the whole closure.
  const moved = lines.map((lineArg) => /: \w+ ([\d.]+) (B|KiB|MiB)/.exec(lineArg)).filter(Boolean)
    .map((matchArg) => Number(matchArg![1]) * { B: 1, KiB: 1024, MiB: 1024 * 1024 }[matchArg![2] as 'B']);
  assert.deepEqual(moved, [...moved].sort((a, b) => a - b), done.stderr);
  assert.equal(moved.at(-1), closureBytes.byteLength, done.stderr);
});

test('Ctrl-C detaches: the CLI exits 0 and says how to follow; the operation keeps running and `operations watch` follows it to the end', async () => {
  const running = cli.start([...createArgs('ops-detach'), '-o', 'json']);
  running.child.stdin.end();
  await waitHalfway('ops-detach');
  await waitForOutput(running, /transfer 1\.0 MiB of 2\.0 MiB/, 'a halfway line');
  running.child.kill('SIGINT');
  const detached = await running.closed;
  assert.equal(detached.code, 0, detached.stderr);
  const operation = await operationOf('ops-detach');
  assert.equal(operation.state, 'running', 'detaching did not cancel');
  assert.match(detached.stderr, new RegExp(`^detached: operation ${operation.operationId} goes on on the server \\(transfer 1\\.0 MiB of 2\\.0 MiB \\(50%\\)\\)$`, 'm'));
  assert.match(detached.stderr, new RegExp(`^ {2}follow it: cloudly operations watch ${operation.operationId}$`, 'm'));
  assert.match(detached.stderr, new RegExp(`^ {2}cancel it: cloudly operations cancel ${operation.operationId}$`, 'm'));
  assert.equal(JSON.parse(detached.stdout).operation.state, 'running', 'stdout: the operation as last read');

  const got = jsonOf(await cli.run(['operations', 'get', operation.operationId, '-o', 'json']));
  assert.equal(got.operation.state, 'running');
  assert.equal(got.operation.progress.bytesDone, closureBytes.byteLength / 2);

  const watching = cli.start(['operations', 'watch', operation.operationId, '-o', 'json']);
  watching.child.stdin.end();
  await waitForOutput(watching, /^backup ops-detach: transfer/m, 'watch prints progress');
  openGate('ops-detach');
  const watched = jsonOf(await watching.closed);
  assert.equal(watched.operation.state, 'completed');
  assert.equal(watched.operation.result.backup.closure.descriptor.byteLength, closureBytes.byteLength);
  assert.deepEqual(withoutProgressStamp(watched), withoutProgressStamp(await api('getOperation', { operationId: operation.operationId })));
});

test('--detach answers at once; `operations cancel` (after a dry run) cancels; list shows it; the late bytes change nothing', async () => {
  const started = await cli.run([...createArgs('ops-cancel'), '--detach', '-o', 'json']);
  const answer = jsonOf(started);
  assert.equal(answer.operation.state, 'running');
  assert.equal(answer.backup.backupId, 'ops-cancel');
  assert.match(started.stderr, new RegExp(`^started: operation ${answer.operation.operationId} \\(running\\)\\n {2}follow it: cloudly operations watch ${answer.operation.operationId}$`, 'm'));
  const id = answer.operation.operationId;
  // The relay's first half arrives before the cancel (the late bytes are the ones behind the gate);
  // a run in process is quick enough to cancel before it, and progress written then would differ.
  await waitHalfway('ops-cancel');

  const dry = await cli.run(['operations', 'cancel', id, '--dry-run', '-o', 'json']);
  assert.equal(jsonOf(dry).dryRun, true);
  assert.match(dry.stderr, /dry run: every check passed/);
  assert.equal((await api('getOperation', { operationId: id })).operation.state, 'running');

  const cancelled = jsonOf(await cli.run(['operations', 'cancel', id, '-o', 'json']));
  assert.equal(cancelled.operation.state, 'cancelled');
  openGate('ops-cancel');
  await relayAnswered.get('ops-cancel');
  const after = (await api('getOperation', { operationId: id })).operation;
  assert.equal(after.state, 'cancelled', 'what the relay sent after the cancel changed nothing');
  assert.deepEqual(withoutProgressStamp({ operation: after }), withoutProgressStamp(cancelled));
  const listed = jsonOf(await cli.run(['operations', 'list', '--state', 'cancelled', '-o', 'json']));
  assert.deepEqual(listed, await api('getOperations', { state: 'cancelled' }));
  assert.deepEqual(listed.operations.map((operationArg: any) => operationArg.operationId), [id]);
  const table = await cli.run(['operations', 'list', '--service', world.service.id]);
  assert.equal(table.code, 0, table.stderr);
  // Piped: the whole width, so the operation id is whole.
  assert.match(table.stdout, new RegExp(`^${id}\\s`, 'm'), table.stdout);

  // Following an operation that ended cancelled: the end is reported, exit 1.
  const watched = await cli.run(['operations', 'watch', id]);
  assert.equal(watched.code, 1, watched.stderr);
  assert.match(watched.stderr, /^cancelled: /m);
});

test('--cancel: Ctrl-C cancels the operation instead of detaching (exit 1, cancelled)', async () => {
  const running = cli.start([...createArgs('ops-ctrlc-cancel'), '--cancel', '-o', 'json']);
  running.child.stdin.end();
  await waitHalfway('ops-ctrlc-cancel');
  await waitForOutput(running, /transfer 1\.0 MiB of 2\.0 MiB/, 'a halfway line');
  running.child.kill('SIGINT');
  const done: ICliRun = await running.closed;
  openGate('ops-ctrlc-cancel');
  assert.equal(done.code, 1, done.stderr);
  assert.match(done.stderr, /^cancelling operation op-\S+ \(Ctrl-C again detaches\)$/m);
  assert.match(done.stderr, /^cancelled: /m);
  const answer = JSON.parse(done.stdout);
  assert.equal(answer.operation.state, 'cancelled');
  assert.equal((await operationOf('ops-ctrlc-cancel')).state, 'cancelled');
});

test('`operations watch` on an operation that ended says how long it ran, not how long the watch took', async () => {
  const started = jsonOf(await cli.run([...createArgs('ops-duration'), '--detach', '-o', 'json']));
  const id = started.operation.operationId;
  await waitHalfway('ops-duration');
  // The work must last long enough to tell its own duration from the watch's, which takes under a second.
  await waitFor(() => Date.now() - started.operation.startedAt >= 2_100, 'the backup has run for two seconds', 10_000);
  openGate('ops-duration');
  let ended: any = null;
  await waitFor(async () => {
    ended = (await api('getOperation', { operationId: id })).operation;
    return ended.state !== 'running';
  }, 'the backup ends', 30_000);
  assert.equal(ended.state, 'completed');
  const seconds = Math.floor((ended.endedAt - ended.startedAt) / 1000);
  assert.ok(seconds >= 2, `it ran ${ended.endedAt - ended.startedAt} ms`);
  const watched = await cli.run(['operations', 'watch', id]);
  assert.equal(watched.code, 0, watched.stderr);
  assert.match(watched.stderr.trimEnd().split('\n').at(-1)!, new RegExp(`^backup ops-duration: completed \\(2\\.0 MiB in ${seconds}s\\)$`), watched.stderr);
});

const hasScript = spawnSync('script', ['--version']).status === 0;

test('on a terminal (a pseudo-terminal from `script`): a bar redrawn in place with percent, bytes, rate and phase',
  { skip: hasScript ? false : 'util-linux `script` is not installed: no pseudo-terminal to run the CLI on' }, async () => {
    const command = [process.execPath, cliExecutable, ...createArgs('ops-tty')].map((partArg) => `'${partArg}'`).join(' ');
    const child = spawn('script', ['-qfec', `stty cols 100 rows 30; ${command}`, '/dev/null'], {
      env: { ...process.env, CLOUDLY_CONFIG_DIR: cli.configDir },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let screen = '';
    child.stdout.on('data', (chunk: Buffer) => { screen += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { screen += chunk.toString(); });
    const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      await waitHalfway('ops-tty');
      await waitFor(() => / 50% 1\.0 MiB\/2\.0 MiB /.test(screen), `a halfway bar: ${JSON.stringify(screen)}`, 60_000);
    } finally {
      openGate('ops-tty');
    }
    assert.equal(await closed, 0, screen);
    // Each redraw returns to the line's start and clears it; the bar is 30 wide at 100 columns.
    const redraws = screen.split('\r\u001b[2K').slice(1).map((drawArg) => drawArg.split(/\r?\n/)[0]);
    assert.ok(redraws.length >= 2, JSON.stringify(screen));
    const halfway = redraws.find((drawArg) => drawArg.includes(' 50% '));
    assert.match(halfway!, /^backup ops-tty \[#{15}-{15}\]  50% 1\.0 MiB\/2\.0 MiB (-|[\d.]+ (B|KiB|MiB|GiB)\/s) transfer \d+s$/);
    assert.ok(redraws.every((drawArg) => drawArg.length < 100), 'each draw fits the terminal');
    assert.match(screen, /\r?\nbackup ops-tty: completed\r?\n/);
    // The table of the ended operation follows on stdout.
    assert.match(screen, /state\s+completed/);
  });
