import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { refusalOf, waitFor } from './helpers/cloudly.js';
import { chunked, descriptorOf, sha256Of, startBackupWorld, type IBackupWorld } from './backup.fixture.js';
import { assertRefusedLikeApi, cliExecutable, createCli, jsonOf, withoutProgressStamp, type ICli } from './cli.fixture.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { pushImageVersion } from '../ts/client/relayimages.js';
import type { ICorestoreLegacyResourceInventoryService } from '../ts/interfaces/data/index.js';
import type {
  IReq_Cloudly_Relay_BackupClusterService,
  IReq_Cloudly_Relay_PruneClusterNodeArchive,
  IReq_Cloudly_Relay_RestoreClusterService,
} from '../ts/interfaces/requests/backup.js';
import type { IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources } from '../ts/interfaces/requests/corestore.js';

/**
 * `cloudly backups create|list|restore|prune` and `cloudly corestore inventory|adopt`, the real
 * executable against a real server with a test relay on the cluster's socket that streams a real
 * closure and answers inventories. Dry runs first (nothing stored, no relay call), JSON output
 * equal to the API answer, refusals with their code, every reason and exit code 1.
 */

let world: IBackupWorld;
let cli: ICli;
const closureBytes = randomBytes(512 * 1024 + 3);
const relayCalls: Record<string, unknown[]> = {};
const corestore: ICorestoreLegacyResourceInventoryService[] = [];

type TLooseContract = { method: string; request: any; response: any };
const api = (methodArg: string, requestArg: Record<string, unknown>): Promise<any> => world.t.caller.call<TLooseContract>(methodArg, requestArg);
const callsOf = (methodArg: string): unknown[] => (relayCalls[methodArg] ??= []);

before(async () => {
  world = await startBackupWorld();
  cli = await createCli();
  const { relay } = world;
  relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    callsOf('backupClusterService').push(request);
    await sendServiceDatabaseClosure(relay, {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closureBytes),
    }, chunked(closureBytes, 64 * 1024));
    return { snapshots: [{ type: 'database', snapshotId: `snap-${request.backupId}`, resourceName: 'db', databaseName: 'app', createdAt: 1, sizeBytes: closureBytes.byteLength }] };
  });
  relay.addHandler<IReq_Cloudly_Relay_RestoreClusterService>('restoreClusterService', async (request) => {
    callsOf('restoreClusterService').push(request);
    return { restored: request.snapshots };
  });
  relay.addHandler<IReq_Cloudly_Relay_PruneClusterNodeArchive>('pruneClusterNodeArchive', async (request) => {
    callsOf('pruneClusterNodeArchive').push(request);
    return { found: true, result: { dryRun: request.dryRun ?? false, keptSnapshotIds: ['snap-cli-1'], removedSnapshotIds: [], reclaimedBytes: 0 } };
  });
  relay.addHandler<IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources>('getClusterCorestoreLegacyResources', async ({ nodeId }) => {
    callsOf('getClusterCorestoreLegacyResources').push({ nodeId });
    return { reachable: true, nodeId, readAt: Date.now(), services: structuredClone(corestore) };
  });
  await waitFor(() => world.t.cloudly.relays.activeSession(world.clusterId) !== null, 'relay session');
  await cli.login(world.t);
});

after(async () => {
  await world.t.stop();
  await cli.dispose();
});

const backupArgs = (backupIdArg: string): string[] =>
  ['backups', 'create', '--cluster', world.clusterId, '--node', world.nodeId, '--service', world.service.id, '--backup-id', backupIdArg, '--tag', 'reason=cli'];

test('backups create: a dry run stores nothing and calls no relay, then the real backup is exactly the API answer', async () => {
  const dry = await cli.run([...backupArgs('cli-1'), '--dry-run', '-o', 'json']);
  const dryAnswer = jsonOf(dry);
  assert.equal(dryAnswer.dryRun, true);
  assert.match(dry.stderr, /dry run: every check passed; stopped before .*; nothing was changed/);
  assert.equal(callsOf('backupClusterService').length, 0, 'no relay call on a dry run');
  assert.deepEqual((await api('getServiceBackups', { serviceId: world.service.id })).backups, []);
  // The table says what would happen, not `(none)`.
  const dryTable = await cli.run([...backupArgs('cli-1'), '--dry-run']);
  assert.equal(dryTable.code, 0, dryTable.stderr);
  assert.doesNotMatch(dryTable.stdout, /\(none\)/);
  assert.match(dryTable.stdout, new RegExp(`^would\\s+back up service ${world.service.id} on node ${world.nodeId} of cluster ${world.clusterId}$`, 'm'));
  assert.match(dryTable.stdout, /^backupId\s+cli-1$/m);
  assert.match(dryTable.stdout, /^checked\s+every check passed; stopped before relay call backupClusterService$/m);
  const madeId = await cli.run(['backups', 'create', '--cluster', world.clusterId, '--node', world.nodeId, '--service', world.service.id, '--dry-run']);
  assert.match(madeId.stdout, /^backupId\s+\(made by the real call\)$/m);
  assert.equal(callsOf('backupClusterService').length, 0, 'no relay call on a dry run');

  // Not on a terminal: the CLI follows the operation with plain progress lines on stderr.
  const real = await cli.run([...backupArgs('cli-1'), '-o', 'json']);
  const answer = jsonOf(real);
  assert.equal(callsOf('backupClusterService').length, 1);
  const { operation } = answer;
  assert.equal(operation.state, 'completed');
  assert.equal(operation.kind, 'service-backup');
  assert.equal(operation.result.backup.backupId, 'cli-1');
  assert.equal(operation.result.backup.closure.descriptor.sha256, sha256Of(closureBytes));
  assert.deepEqual(withoutProgressStamp(answer), withoutProgressStamp(await api('getOperation', { operationId: operation.operationId })), 'exactly the getOperation answer');
  const lines = real.stderr.trimEnd().split('\n');
  assert.ok(lines.every((lineArg) => lineArg.startsWith('backup cli-1: ')), real.stderr);
  assert.match(lines.at(-1)!, /^backup cli-1: completed \(512 KiB in \d+s\)$/);
  // Phases appear in their order (a phase repeats while its bytes move, at most once a second).
  const order = ['queued', 'relay', 'transfer', 'recording', 'done'];
  const phases = lines.slice(0, -1).map((lineArg) => lineArg.slice('backup cli-1: '.length).split(' ')[0]);
  assert.ok(phases.length > 0);
  assert.ok(phases.every((phaseArg) => order.includes(phaseArg)), real.stderr);
  assert.deepEqual(phases, [...phases].sort((a, b) => order.indexOf(a) - order.indexOf(b)), real.stderr);

  // Repeating the completed order answers the recorded backup and backs up nothing again.
  const repeat = await api('createServiceBackup', {
    clusterId: world.clusterId, nodeId: world.nodeId, serviceId: world.service.id, backupId: 'cli-1', tags: { reason: 'cli' },
  });
  assert.deepEqual(repeat.backup, operation.result.backup);
  assert.equal(callsOf('backupClusterService').length, 1, 'the repeat did not back up again');
  assert.deepEqual((await api('getServiceBackups', { serviceId: world.service.id })).backups, [operation.result.backup]);
});

test('backups list: JSON is exactly the API answer; the table fits a 100-column terminal, and on 80 the ids stay whole', async () => {
  const listed = jsonOf(await cli.run(['backups', 'list', '--service', world.service.id, '-o', 'json']));
  assert.deepEqual(listed, await api('getServiceBackups', { serviceId: world.service.id }));
  assert.equal(listed.backups.length, 1);
  const table = await cli.run(['backups', 'list', '--cluster', world.clusterId], '', { terminalColumns: 100 });
  assert.equal(table.code, 0, table.stderr);
  const lines = table.stdout.trimEnd().split('\n');
  assert.equal(lines.length, 2);
  assert.ok(lines[1].startsWith('cli-1'), lines[1]);
  assert.ok(lines.every((lineArg) => lineArg.length <= 100), table.stdout);
  // Too narrow for the ids and the rest: the other columns give way, the ids do not.
  const narrow = await cli.run(['backups', 'list', '--cluster', world.clusterId], '', { terminalColumns: 80 });
  assert.match(narrow.stdout, new RegExp(`^cli-1\\s+${world.service.id}\\s+${world.nodeId}\\s`, 'm'), narrow.stdout);
});

test('images list: JSON is exactly the API answer; the table shows the version the relay pushed and fits a 100-column terminal', async () => {
  const image = randomBytes(48 * 1024);
  await pushImageVersion(world.relay, { serviceId: world.service.id, digest: sha256Of(image), byteLength: image.byteLength }, chunked(image));
  const listed = jsonOf(await cli.run(['images', 'list', '--service', world.service.id, '-o', 'json']));
  assert.deepEqual(listed, await api('getServiceImageVersions', { serviceId: world.service.id }));
  assert.deepEqual(listed.imageVersions.map((version: { digest: string }) => version.digest), [sha256Of(image)]);
  const table = await cli.run(['images', 'list', '--service', world.service.id], '', { terminalColumns: 100 });
  assert.equal(table.code, 0, table.stderr);
  const lines = table.stdout.trimEnd().split('\n');
  assert.equal(lines.length, 2);
  assert.ok(lines[1].startsWith(sha256Of(image).slice(0, 16)), lines[1]);
  assert.ok(lines.every((lineArg) => lineArg.length <= 100), table.stdout);
  assertRefusedLikeApi(await cli.run(['images', 'list', '--service', 'svc-nobody']), await refusalOf(() => api('getServiceImageVersions', { serviceId: 'svc-nobody' })));
});

test('backups restore: a dry run calls no relay, the real restore answers what the relay restored', async () => {
  const args = ['backups', 'restore', '--backup', 'cli-1', '--clear', '--resource-type', 'database', '-o', 'json'];
  const dry = await cli.run([...args, '--dry-run']);
  assert.equal(jsonOf(dry).dryRun, true);
  assert.match(dry.stderr, /dry run: every check passed; stopped before /);
  assert.equal(callsOf('restoreClusterService').length, 0);
  const dryTable = await cli.run(['backups', 'restore', '--backup', 'cli-1', '--clear', '--resource-type', 'database', '--dry-run']);
  assert.equal(dryTable.code, 0, dryTable.stderr);
  assert.doesNotMatch(dryTable.stdout, /\(none\)/);
  assert.match(dryTable.stdout, /^would\s+restore backup cli-1 onto the node it was taken on, replacing the service's data there$/m);
  assert.match(dryTable.stdout, /^clear\s+yes: the resources are cleared first$/m);
  assert.match(dryTable.stdout, /^resourceTypes\s+database$/m);
  assert.match(dryTable.stdout, /^checked\s+every check passed; stopped before relay call restoreClusterService$/m);
  assert.equal(callsOf('restoreClusterService').length, 0);

  const answer = jsonOf(await cli.run(args));
  const request = callsOf('restoreClusterService').at(-1) as IReq_Cloudly_Relay_RestoreClusterService['request'];
  assert.equal(callsOf('restoreClusterService').length, 1);
  assert.equal(request.nodeId, world.nodeId);
  assert.equal(request.clear, true);
  assert.deepEqual(request.resourceTypes, ['database']);
  assert.equal(answer.operation.state, 'completed');
  assert.equal(answer.operation.kind, 'service-restore');
  assert.deepEqual(withoutProgressStamp(answer), withoutProgressStamp(await api('getOperation', { operationId: answer.operation.operationId })));
  const stored = (await api('getServiceBackups', { serviceId: world.service.id })).backups[0];
  assert.deepEqual(answer.operation.result.restored, stored.snapshots);
});

const hasScript = spawnSync('script', ['--version']).status === 0;

/**
 * The real executable on a pseudo-terminal (util-linux `script`): stdin and stdout are a
 * terminal. `answerArg` is typed once the question shows; answers the exit code and the screen.
 */
const onTerminal = async (argsArg: string[], answerArg: string | null): Promise<{ code: number | null; screen: string }> => {
  const command = [process.execPath, cliExecutable, ...argsArg].map((partArg) => `'${partArg}'`).join(' ');
  const child = spawn('script', ['-qfec', `stty cols 160 rows 30; ${command}`, '/dev/null'], {
    env: { ...process.env, CLOUDLY_CONFIG_DIR: cli.configDir },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let screen = '';
  child.stdout.on('data', (chunkArg: Buffer) => { screen += chunkArg.toString(); });
  child.stderr.on('data', (chunkArg: Buffer) => { screen += chunkArg.toString(); });
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
  if (answerArg !== null) {
    await waitFor(() => /\[y\/N\] $/.test(screen) || child.exitCode !== null, `the question: ${JSON.stringify(screen)}`, 60_000);
    child.stdin.write(`${answerArg}\r`);
  }
  const code = await closed;
  return { code, screen };
};
const restoreOnTerminal = (argsArg: string[], answerArg: string | null) => onTerminal(['backups', 'restore', ...argsArg], answerArg);

test('backups restore on a terminal asks first (after a dry run passed); anything but yes restores nothing, --yes does not ask', { skip: hasScript ? false : 'util-linux `script` is not installed: no pseudo-terminal to run the CLI on' }, async () => {
  const restores = () => callsOf('restoreClusterService').length;
  const before = restores();
  const declined = await restoreOnTerminal(['--backup', 'cli-1', '--clear'], 'n');
  assert.equal(declined.code, 1, declined.screen);
  assert.match(declined.screen, /restore backup cli-1 onto the node it was taken on, replacing the service's data there \(its resources cleared first\)\? \[y\/N\] /);
  assert.match(declined.screen, /not restored: not confirmed; nothing was changed \(--yes restores without asking\)/);
  assert.equal(restores(), before, 'declined: no relay call');

  const confirmed = await restoreOnTerminal(['--backup', 'cli-1'], 'yes');
  assert.equal(confirmed.code, 0, confirmed.screen);
  assert.match(confirmed.screen, /\[y\/N\] /);
  assert.match(confirmed.screen, /completed/);
  assert.equal(restores(), before + 1, 'confirmed: restored once');

  const unasked = await restoreOnTerminal(['--backup', 'cli-1', '--yes'], null);
  assert.equal(unasked.code, 0, unasked.screen);
  assert.doesNotMatch(unasked.screen, /\[y\/N\]/);
  assert.equal(restores(), before + 2, '--yes: restored without a question');

  // A restore Cloudly would refuse is refused before anyone is asked.
  const refused = await restoreOnTerminal(['--backup', 'backup-that-is-not-there'], null);
  assert.equal(refused.code, 1, refused.screen);
  assert.match(refused.screen, /refused: not-found/);
  assert.doesNotMatch(refused.screen, /\[y\/N\]/);
});

test('services update --dry-run on a terminal shows the field-level diff, and changes nothing', { skip: hasScript ? false : 'util-linux `script` is not installed: no pseudo-terminal to run the CLI on' }, async () => {
  const before = (await api('getServiceById', { serviceId: world.service.id })).service;
  const { code, screen } = await onTerminal(['services', 'update', '--service', world.service.id, '--image', 'registry.example.com/diffed:2', '--expect-current', '--dry-run'], null);
  assert.equal(code, 0, screen);
  assert.match(screen, new RegExp(`service ${world.service.id}: generation ${before.generation} → ${before.generation + 1}`));
  assert.match(screen, new RegExp(`runtime\\.image\\s+${before.runtime.image.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} → registry\\.example\\.com/diffed:2`));
  assert.equal((await api('getServiceById', { serviceId: world.service.id })).service.generation, before.generation, 'a dry run changes nothing');
});

test('backups prune: --dry-run is the relay\'s own dry run; JSON is the API answer', async () => {
  const answer = jsonOf(await cli.run(['backups', 'prune', '--cluster', world.clusterId, '--node', world.nodeId, '--keep-last', '3', '--dry-run', '-o', 'json']));
  const request = callsOf('pruneClusterNodeArchive').at(-1) as IReq_Cloudly_Relay_PruneClusterNodeArchive['request'];
  assert.equal(request.dryRun, true);
  assert.deepEqual(request.retention, { keepLast: 3 });
  assert.deepEqual(answer, { found: true, result: { dryRun: true, keptSnapshotIds: ['snap-cli-1'], removedSnapshotIds: [], reclaimedBytes: 0 } });
  const usage = await cli.run(['backups', 'prune', '--cluster', world.clusterId, '--node', world.nodeId]);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /give at least one of --keep-last/);
});

test('backup refusals print the code and every reason the API gives, exit 1; nothing reaches the relay', async () => {
  const before = callsOf('backupClusterService').length;
  const unknownNode = await cli.run(['backups', 'create', '--cluster', world.clusterId, '--node', 'node-missing', '--service', world.service.id]);
  assertRefusedLikeApi(unknownNode, await refusalOf(() => api('createServiceBackup', {
    clusterId: world.clusterId, nodeId: 'node-missing', serviceId: world.service.id,
  })));
  const missingBackup = await cli.run(['backups', 'restore', '--backup', 'no-such-backup']);
  assertRefusedLikeApi(missingBackup, await refusalOf(() => api('restoreServiceBackup', { backupId: 'no-such-backup' })));
  assert.equal(callsOf('backupClusterService').length, before);
});

test('a cluster whose relay is not connected: the operation fails unavailable, the CLI prints why and exits 3', async () => {
  const { cluster } = await world.t.createCluster('cli-no-relay');
  await world.t.addNodes(cluster.id, 'lonely-node');
  const { service } = await api('createService', {
    service: {
      name: 'lonely-db', organizationId: 'org-1', clusterId: cluster.id,
      runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } }, volumes: [],
    },
  });
  const run = await cli.run(['backups', 'create', '--cluster', cluster.id, '--node', 'lonely-node', '--service', service.id, '-o', 'json']);
  assert.equal(run.code, 3, run.stderr);
  const answer = JSON.parse(run.stdout);
  assert.deepEqual(withoutProgressStamp(answer), withoutProgressStamp(await api('getOperation', { operationId: answer.operation.operationId })));
  const { operation } = answer;
  assert.equal(operation.state, 'failed');
  assert.equal(operation.error.code, 'unavailable');
  const lines = run.stderr.trimEnd().split('\n');
  const at = lines.indexOf(`failed: unavailable${operation.error.retryable ? ' (retryable)' : ''}`);
  assert.ok(at >= 0, run.stderr);
  assert.ok(operation.error.reasons.length > 0);
  assert.deepEqual(lines.slice(at + 1, at + 1 + operation.error.reasons.length), operation.error.reasons.map((reasonArg: string) => `  ${reasonArg}`));
});

test('corestore inventory and adopt: a dry run binds nothing, the adoption is the API answer, a stale digest is refused', async () => {
  corestore.push({
    serviceId: world.service.id,
    resources: [
      { capability: 'database', databaseName: 'legacy_db', adoption: { state: 'unadopted', blocker: null } },
      { capability: 'objectstorage', bucketName: 'legacy-bucket', retention: { mode: 'governance', days: 7 }, adoption: { state: 'unadopted', blocker: null } },
    ],
  });
  const inventory = jsonOf(await cli.run(['corestore', 'inventory', '--cluster', world.clusterId, '--node', world.nodeId, '-o', 'json']));
  const fromApi = await api('getCorestoreLegacyResources', { clusterId: world.clusterId, nodeId: world.nodeId });
  assert.deepEqual({ ...inventory, inventory: { ...inventory.inventory, readAt: 0 } }, { ...fromApi, inventory: { ...fromApi.inventory, readAt: 0 } },
    'the same inventory (read at another moment)');
  assert.match(inventory.inventorySha256, /^[0-9a-f]{64}$/);
  // The table shows the resources the contract nests under inventory.services[].resources.
  const table = await cli.run(['corestore', 'inventory', '--cluster', world.clusterId, '--node', world.nodeId]);
  assert.equal(table.code, 0, table.stderr);
  assert.doesNotMatch(table.stdout, /\(no resources\)/);
  assert.match(table.stdout, new RegExp(`^digest\\s+${inventory.inventorySha256}$`, 'm'));
  assert.match(table.stdout, new RegExp(`^${world.service.id}\\s+database\\s+legacy_db\\s+unadopted\\s+-$`, 'm'), table.stdout);
  assert.match(table.stdout, new RegExp(`^${world.service.id}\\s+objectstorage\\s+legacy-bucket\\s+unadopted\\s+governance 7d$`, 'm'), table.stdout);

  const args = ['corestore', 'adopt', '--cluster', world.clusterId, '--node', world.nodeId,
    '--resource', `${world.service.id}:database`, '--resource', `${world.service.id}:objectstorage`, '-o', 'json'];
  const dry = await cli.run([...args, '--expect-current', '--dry-run']);
  assert.equal(jsonOf(dry).dryRun, true);
  assert.match(dry.stderr, new RegExp(`--expect-current: read the inventory at digest ${inventory.inventorySha256}`));
  assert.match(dry.stderr, /dry run: every check passed/);
  assert.deepEqual((await api('getPlatformBindings', { serviceId: world.service.id })).platformBindings, []);

  const adopted = jsonOf(await cli.run([...args, '--expect', inventory.inventorySha256]));
  assert.equal(adopted.platformBindings.length, 2);
  assert.deepEqual(adopted.platformBindings, (await api('getPlatformBindings', { serviceId: world.service.id })).platformBindings);
  assert.deepEqual(adopted.platformBindings.map((bindingArg: any) => bindingArg.corestoreLegacyAdoption.resourceName), ['legacy_db', 'legacy-bucket']);

  // The node's Corestore changes: the digest quoted before no longer holds.
  (corestore[0].resources[0] as { databaseName: string }).databaseName = 'legacy_db_renamed';
  const stale = await cli.run([...args.slice(0, -2), '--expect', inventory.inventorySha256]);
  assert.match(stale.stderr, /^refused: legacy-inventory-changed$/m);
  assertRefusedLikeApi(stale, await refusalOf(() => api('adoptCorestoreLegacyResources', {
    clusterId: world.clusterId, nodeId: world.nodeId, expectedInventorySha256: inventory.inventorySha256,
    resources: [{ serviceId: world.service.id, capability: 'database' }, { serviceId: world.service.id, capability: 'objectstorage' }],
  })));
  assert.deepEqual((await api('getPlatformBindings', { serviceId: world.service.id })).platformBindings, adopted.platformBindings, 'nothing changed');
});
