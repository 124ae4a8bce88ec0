import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { createCli, jsonOf, type ICli } from './cli.fixture.js';
import { judgeAuditEventsShown } from '../ts/cli/commands.js';
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
  const table = await cli.run(['audit', '--limit', '5'], '', { terminalColumns: 40 });
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
  assert.match(wide, /^ID\s+NAME\s+GEN\s+CREATED\s+UPDATED$/);
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
