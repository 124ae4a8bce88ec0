import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { createCli, jsonOf, type ICli } from './cli.fixture.js';
import { auditKindOf, judgeAuditEventsShown } from '../ts/cli/commands.js';
import { isAuditReadMethod } from '../ts/interfaces/data/audit.js';

/**
 * How `cloudly` answers read: tables fit a terminal, use the whole width when piped (or the
 * width `COLUMNS` names) and never cut an id; `-o wide` adds columns; every time is formatted one
 * way while JSON keeps the raw values; the audit log names administrators by username and hides
 * the events of methods that only read unless asked.
 */

let t: ITestCloudly;
let cli: ICli;
const longName = `a-cluster-with-a-rather-long-name-${'x'.repeat(30)}`;
let clusterId: string;

type TLooseContract = { method: string; request: any; response: any };
const api = (methodArg: string, requestArg: Record<string, unknown>): Promise<any> => t.caller.call<TLooseContract>(methodArg, requestArg);

before(async () => {
  t = await startTestCloudly();
  cli = await createCli();
  await cli.login(t);
  clusterId = (await t.createCluster(longName)).cluster.id;
});

after(async () => {
  await t.stop();
  await cli.dispose();
});

const linesOf = (textArg: string): string[] => textArg.trimEnd().split('\n');

test('piped without COLUMNS: the whole width, nothing clipped', async () => {
  const table = await cli.run(['clusters', 'list']);
  assert.equal(table.code, 0, table.stderr);
  assert.doesNotMatch(table.stdout, /…/);
  const row = linesOf(table.stdout).find((lineArg) => lineArg.startsWith(clusterId));
  assert.ok(row, table.stdout);
  assert.ok(row.includes(longName), 'the long name is whole');
  assert.ok(row.length > 80, 'wider than the 80 columns it was cut to before');
});

test('piped with COLUMNS: the table fits that width, and ids stay whole', async () => {
  const table = await cli.run(['clusters', 'list'], '', { env: { COLUMNS: '70' } });
  assert.equal(table.code, 0, table.stderr);
  const lines = linesOf(table.stdout);
  assert.ok(lines.every((lineArg) => lineArg.length <= 70), table.stdout);
  assert.ok(lines.some((lineArg) => lineArg.startsWith(`${clusterId} `)), `the id is whole: ${table.stdout}`);
  assert.match(table.stdout, /…/, 'the name gave way');
});

test('on a narrow terminal ids stay whole even when the line cannot fit', async () => {
  const table = await cli.run(['audit', '--limit', '5', '--all'], '', { terminalColumns: 40 });
  assert.equal(table.code, 0, table.stderr);
  const events = (await api('getAuditEvents', { limit: 5 })).events as Array<{ method: string }>;
  for (const event of events.filter((eventArg) => !isAuditReadMethod(eventArg.method))) {
    assert.match(table.stdout, new RegExp(`\\s${event.method}(\\s|$)`, 'm'), `method ${event.method} whole: ${table.stdout}`);
  }
});

test('-o wide adds columns; -o json is the raw answer with epoch milliseconds', async () => {
  const plain = linesOf((await cli.run(['clusters', 'list'])).stdout)[0];
  const wide = linesOf((await cli.run(['clusters', 'list', '-o', 'wide'])).stdout)[0];
  assert.match(plain, /^ID\s+NAME\s+GEN\s+CREATED$/);
  assert.match(wide, /^ID\s+NAME\s+GEN\s+LABELS\s+CREATED\s+UPDATED$/);
  const users = linesOf((await cli.run(['users', 'list', '-o', 'wide'])).stdout)[0];
  assert.match(users, /\sCREATED\s+PASSWORD CHANGED$/);
  const listed = jsonOf(await cli.run(['clusters', 'list', '-o', 'json']));
  assert.deepEqual(listed, await api('getClusters', {}));
  assert.equal(typeof listed.clusters[0].createdAt, 'number');
});

test('times: one format in lists and records, no epoch milliseconds beside them', async () => {
  const cluster = (await api('getClusterById', { clusterId })).cluster;
  const formatted = new Date(cluster.createdAt).toISOString().slice(0, 19).replace('T', ' ');
  const list = await cli.run(['clusters', 'list']);
  const record = await cli.run(['clusters', 'get', '--cluster', clusterId]);
  for (const output of [list.stdout, record.stdout]) {
    assert.ok(output.includes(formatted), `${formatted} in ${output}`);
    assert.doesNotMatch(output, /\b1\d{12}\b/, `no epoch milliseconds: ${output}`);
  }
});

test('audit: administrators by username (their id with -o wide); JSON is the API answer', async () => {
  const table = await cli.run(['audit', '--method', 'createCluster']);
  assert.equal(table.code, 0, table.stderr);
  const events = (await api('getAuditEvents', { filter: { method: 'createCluster' } })).events;
  assert.ok(events.length >= 1);
  const adminId: string = events[0].actor.id;
  const row = linesOf(table.stdout).find((lineArg) => lineArg.includes(clusterId));
  assert.ok(row, table.stdout);
  assert.match(row, /\sadmin\s+createCluster\s/, row);
  assert.ok(!table.stdout.includes(adminId), 'the id is not shown by default');
  const wide = await cli.run(['audit', '--method', 'createCluster', '-o', 'wide']);
  assert.ok(wide.stdout.includes(`admin:${adminId}`), wide.stdout);
  assert.deepEqual(jsonOf(await cli.run(['audit', '--method', 'createCluster', '-o', 'json'])),
    await api('getAuditEvents', { filter: { method: 'createCluster' } }));
});

test('audit: filters by username and plain kind, shows what an update changed, and people\'s changes unless --all', async () => {
  const { cluster, relayToken } = await t.createCluster('audit-cli');
  await api('addClusterNode', { clusterId: cluster.id, name: 'audit-cli-n1', nodeId: 'audit-cli-n1' });
  const { service } = await api('createService', {
    service: { name: 'audit-cli-app', organizationId: 'org1', clusterId: cluster.id, runtime: { image: 'app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['audit-cli-n1'] } }, volumes: [] },
  });
  const { name, organizationId, runtime, volumes } = service;
  await api('updateService', { serviceId: service.id, expectedGeneration: service.generation, service: { name, organizationId, clusterId: cluster.id, runtime: { ...runtime, image: 'app:2' }, volumes } });
  const relay = await t.connectRelay(relayToken);
  await relay.fire('reportClusterNode', { report: { nodeId: 'audit-cli-n1', name: 'audit-cli-n1', hostAddresses: ['192.0.2.9'] } } as never);

  const byAdmin = await cli.run(['audit', '--user', 'admin', '--kind', 'service', '--target-id', service.id]);
  assert.equal(byAdmin.code, 0, byAdmin.stderr);
  const [header, ...rows] = linesOf(byAdmin.stdout);
  assert.match(header, /\sCHANGED$/);
  assert.equal(rows.length, 2, byAdmin.stdout);
  assert.match(rows[0], /\sadmin\s+updateService\s.*\saudit-cli-app\s.*\sruntime\.image: "app:1" → "app:2"; specRevision: 1 → 2$/);
  assert.match(rows[1], /\sadmin\s+createService\s.*\s-$/);
  const adminId = (await api('getUsers', {})).users.find((userArg: any) => userArg.username === 'admin').userId;
  assert.deepEqual(jsonOf(await cli.run(['audit', '--user', 'admin', '--kind', 'service', '--target-id', service.id, '-o', 'json'])),
    await api('getAuditEvents', { filter: { actorId: adminId, targetKind: 'CloudlyService', targetId: service.id } }));

  // The relay's node report is hidden by default, said so on stderr, and shown with --all.
  const people = await cli.run(['audit', '--kind', 'node', '--target-id', `${cluster.id}/audit-cli-n1`]);
  assert.equal(people.code, 0, people.stderr);
  assert.ok(!people.stdout.includes(`relay:${cluster.id}`), people.stdout);
  assert.match(people.stderr, /change\(s\) by relays or Cloudly itself are hidden on this page \(--all shows them\)/);
  const all = await cli.run(['audit', '--kind', 'node', '--target-id', `${cluster.id}/audit-cli-n1`, '--all']);
  assert.ok(all.stdout.includes(`relay:${cluster.id}`), all.stdout);
  assert.match(all.stdout, /reportClusterNode\s.*hostAddresses: null → \["192\.0\.2\.9"\]/);

  const nobody = await cli.run(['audit', '--user', 'nobody-at-all']);
  assert.equal(nobody.code, 1);
  assert.equal(nobody.stderr, 'cloudly: --user nobody-at-all: no user has this id or name\n');
  assert.equal((await cli.run(['audit', '--kind', 'no such!'])).code, 2);
});

test('audit: a plain kind name is the stored kind', () => {
  assert.equal(auditKindOf('service'), 'CloudlyService');
  assert.equal(auditKindOf('Cluster'), 'CloudlyCluster');
  assert.equal(auditKindOf('cluster-node'), 'CloudlyClusterNode');
  assert.equal(auditKindOf('node'), 'CloudlyClusterNode');
  assert.equal(auditKindOf('user'), 'CloudlyAdminUser');
  assert.equal(auditKindOf('CloudlyPlatformBinding'), 'CloudlyPlatformBinding');
});

test('audit: events of methods that only read are hidden unless --include-reads', () => {
  const events = [
    { method: 'createCluster' },
    { method: 'getCorestoreLegacyResources' },
    { method: 'watchChanges' },
    { method: 'reconcile' },
    { method: 'getaway' },
  ];
  assert.deepEqual(judgeAuditEventsShown(events, false), {
    shown: [{ method: 'createCluster' }, { method: 'reconcile' }, { method: 'getaway' }],
    hidden: 2,
  });
  assert.deepEqual(judgeAuditEventsShown(events, true), { shown: events, hidden: 0 });
});
