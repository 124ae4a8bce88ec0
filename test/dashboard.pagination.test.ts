import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { assertFieldProblems } from './helpers/refusals.js';

let t: ITestCloudly;

before(async () => {
  t = await startTestCloudly();
});

after(async () => {
  await t.stop();
});

test('node pages across inserts and deletes: no node twice, none that lived through the walk lost', async () => {
  const { cluster } = await t.createCluster('paged');
  const initial = Array.from({ length: 30 }, (_, index) => `n${String(index).padStart(2, '0')}`);
  await t.addNodes(cluster.id, ...initial);
  const seen: string[] = [];
  const removed = new Set<string>();
  const added: string[] = [];
  let cursor: string | undefined;
  let round = 0;
  do {
    const page = await t.caller.call('getClusterNodes', { clusterId: cluster.id, limit: 7, ...(cursor ? { cursor } : {}) });
    assert.ok(page.nodes.length <= 7);
    seen.push(...page.nodes.map((node) => node.id));
    cursor = page.nextCursor;
    // Between pages: one node removed that is not seen yet, one seen node removed, one node added on each side of the cursor.
    const unseen = initial.find((id) => !seen.includes(id) && !removed.has(id));
    if (unseen && round < 3) {
      await t.caller.call('removeClusterNode', { clusterId: cluster.id, nodeId: unseen });
      removed.add(unseen);
      const seenLive = seen.find((id) => !removed.has(id))!;
      await t.caller.call('removeClusterNode', { clusterId: cluster.id, nodeId: seenLive });
      removed.add(seenLive);
      for (const id of [`a${round}`, `z${round}`]) {
        await t.addNodes(cluster.id, id);
        added.push(id);
      }
    }
    round++;
  } while (cursor);
  assert.equal(new Set(seen).size, seen.length, 'no node twice');
  for (const id of initial) {
    if (!removed.has(id)) {
      assert.ok(seen.includes(id), `${id} lived through the walk and was seen`);
    }
  }
  for (const id of removed) {
    if (!seen.includes(id)) {
      assert.ok(initial.includes(id), `${id} was removed before its page and is not seen`);
    }
  }
  // Added behind the cursor ('a…') is not on later pages; added ahead of it ('z…') is.
  for (const id of added.filter((candidate) => candidate.startsWith('z'))) {
    assert.ok(seen.includes(id), `${id} was added ahead of the cursor and seen`);
  }
  assert.deepEqual([...seen].sort(), seen, 'pages are ordered by id');
});

test('a stored list has one order: the whole list and its pages are both oldest created first', async () => {
  for (let index = 0; index < 5; index++) {
    await t.createCluster(`list-${index}`);
  }
  const whole = await t.caller.call('getClusters', {});
  assert.equal(whole.nextCursor, undefined);
  const byCreation = [...whole.clusters].sort((left, right) => left.createdAt - right.createdAt);
  assert.deepEqual(whole.clusters.map((cluster) => cluster.id), byCreation.map((cluster) => cluster.id));
  const paged: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await t.caller.call('getClusters', { limit: 2, ...(cursor ? { cursor } : {}) });
    paged.push(...page.clusters.map((cluster) => cluster.id));
    cursor = page.nextCursor;
  } while (cursor);
  assert.deepEqual(paged, whole.clusters.map((cluster) => cluster.id));
});

test('audit pages are newest first and cover every event exactly once while new events arrive', async () => {
  for (let index = 0; index < 6; index++) {
    await t.createCluster(`audited-${index}`);
  }
  const existing = (await t.caller.call('getAuditEvents', {})).events;
  assert.ok(existing.length >= 6);
  const seen: string[] = [];
  const ats: number[] = [];
  let cursor: string | undefined;
  let round = 0;
  do {
    const page = await t.caller.call('getAuditEvents', { limit: 3, ...(cursor ? { cursor } : {}) });
    seen.push(...page.events.map((eventArg) => eventArg.id));
    ats.push(...page.events.map((eventArg) => eventArg.at));
    cursor = page.nextCursor;
    // New events arrive between every two pages.
    await t.createCluster(`audited-late-${round++}`);
  } while (cursor);
  assert.equal(new Set(seen).size, seen.length, 'no event is seen twice');
  const existingIds = new Set(existing.map((eventArg) => eventArg.id));
  assert.deepEqual(seen.filter((idArg) => existingIds.has(idArg)), existing.map((eventArg) => eventArg.id), 'every event that existed is seen, in order');
  assert.deepEqual(ats, [...ats].sort((left, right) => right - left), 'pages are newest first');
});

test('limit and cursor are checked by path; a cursor of another list is refused', async () => {
  const refusal = await refusalOf(() => t.caller.call('getClusters', { limit: 0, cursor: 'nope' }));
  assert.equal(refusal.code, 'invalid-request');
  assertFieldProblems(refusal, [
    ['request.limit', 'field-invalid', 'must be an integer from 1 to 1000'],
    ['request.cursor', 'field-invalid', 'is not a cursor this server handed out'],
  ]);
  const { cluster } = await t.createCluster('cursor-source');
  await t.addNodes(cluster.id, 'c1', 'c2');
  const page = await t.caller.call('getClusterNodes', { clusterId: cluster.id, limit: 1 });
  assert.ok(page.nextCursor);
  const foreign = await refusalOf(() => t.caller.call('getClusters', { cursor: page.nextCursor }));
  assertFieldProblems(foreign, [['request.cursor', 'field-invalid', 'is not a cursor this server handed out']]);
  assert.equal((await refusalOf(() => t.caller.call('getClusters', { limit: 1001 }))).code, 'invalid-request');
});

test('getServices filters by cluster', async () => {
  const first = await t.createCluster('filter-a');
  const second = await t.createCluster('filter-b');
  await t.addNodes(first.cluster.id, 'f1');
  await t.addNodes(second.cluster.id, 'f1');
  const create = (clusterIdArg: string, nameArg: string) => t.caller.call('createService', {
    service: {
      name: nameArg,
      organizationId: 'org1',
      clusterId: clusterIdArg,
      runtime: { image: 'nginx:1', replicas: 1, profile: { runAs: { user: 101, group: 101 } }, placement: { nodeIds: ['f1'] } },
      volumes: [],
    },
  });
  const a = (await create(first.cluster.id, 'a')).service;
  const b = (await create(second.cluster.id, 'b')).service;
  const onFirst = await t.caller.call('getServices', { clusterId: first.cluster.id });
  assert.deepEqual(onFirst.services.map((service) => service.id), [a.id]);
  const onSecond = await t.caller.call('getServices', { clusterId: second.cluster.id, limit: 10 });
  assert.deepEqual(onSecond.services.map((service) => service.id), [b.id]);
  assert.equal(onSecond.nextCursor, undefined);
});
