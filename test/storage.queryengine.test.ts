import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { Context } from 'mingo/core';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import { queriesShareContext } from '../ts/core/queryengine.js';

/**
 * ts/core/queryengine.ts: the embedded database's queries (and the read cache's) share mingo's
 * operator table instead of copying it per query. Same answers, no copy.
 */

const documents = [
  { _id: 'a', data: { name: 'alpha', replicas: 1, tags: ['web', 'edge'], owner: { team: 'core' } } },
  { _id: 'b', data: { name: 'beta', replicas: 3, tags: ['db'], owner: { team: 'data' } } },
  { _id: 'c', data: { name: 'gamma', replicas: 0, tags: [], owner: null } },
  { _id: 'd', data: { name: 'delta', replicas: 5, tags: ['web'] } },
];

const idsOf = (docsArg: unknown[]): string[] => (docsArg as Array<{ _id: string }>).map((docArg) => docArg._id);

test('the mingo the embedded database loads is the one patched here', () => {
  const ours = createRequire(import.meta.url).resolve('mingo/core');
  const smartmongos = createRequire(createRequire(import.meta.url).resolve('@push.rocks/smartmongo/package.json')).resolve('mingo/core');
  assert.equal(smartmongos, ours, 'smartmongo resolves its own mingo: the shared context would not reach its queries');
  assert.equal(queriesShareContext, true);
});

test('Context.from of one context is that context; of two, a new one with the operators of both', () => {
  const first = Context.init({ query: { $first: () => true } } as never);
  const second = Context.init({ query: { $second: () => true } } as never);
  assert.equal(Context.from(first), first);
  const merged = Context.from(first, second);
  assert.notEqual(merged, first);
  assert.notEqual(merged, second);
  assert.ok(merged.getOperator('query' as never, '$first'));
  assert.ok(merged.getOperator('query' as never, '$second'));
  assert.equal(first.getOperator('query' as never, '$second'), null, 'merging left its inputs alone');
});

test("the embedded database's queries make no copy of the operator table and answer as before", (t) => {
  let copies = 0;
  const init = Context.init;
  t.after(() => {
    Context.init = init;
  });
  Context.init = ((...argsArg: Parameters<typeof Context.init>) => {
    copies++;
    return init.apply(Context, argsArg);
  }) as typeof Context.init;

  const cases: Array<[Record<string, unknown>, string[]]> = [
    [{ _id: 'b' }, ['b']],
    [{ _id: { $in: ['a', 'd', 'x'] } }, ['a', 'd']],
    [{ 'data.replicas': { $gte: 1, $lt: 5 } }, ['a', 'b']],
    [{ $or: [{ 'data.name': 'gamma' }, { 'data.tags': 'db' }] }, ['b', 'c']],
    [{ $and: [{ 'data.tags': 'web' }, { 'data.replicas': { $ne: 1 } }] }, ['d']],
    [{ 'data.tags': { $size: 0 } }, ['c']],
    [{ 'data.owner.team': { $exists: true } }, ['a', 'b']],
    [{ 'data.owner': null }, ['c', 'd']],
    [{ 'data.name': { $regex: '^(al|de)' } }, ['a', 'd']],
    [{ 'data.tags': { $elemMatch: { $eq: 'edge' } } }, ['a']],
    [{ $nor: [{ 'data.replicas': { $gt: 0 } }] }, ['c']],
  ];
  for (const [filter, expected] of cases) {
    assert.deepEqual(idsOf(congodb.QueryEngine.filter(documents as never[], filter as never)), expected, JSON.stringify(filter));
  }
  assert.equal(idsOf([congodb.QueryEngine.findOne(documents as never[], { 'data.replicas': 3 } as never)])[0], 'b');
  assert.equal(congodb.QueryEngine.matches(documents[2] as never, { 'data.tags': { $size: 0 } } as never), true);
  assert.equal(copies, 0, 'a query copied the operator table');
});

test('an aggregation stage that adds operators to its context leaves later queries answering the same', () => {
  const filled = congodb.AggregationEngine.aggregate(
    documents.map((docArg, index) => ({ _id: docArg._id, at: index, value: index === 1 ? null : index })) as never[],
    [{ $sort: { at: 1 } }, { $fill: { sortBy: { at: 1 }, output: { value: { method: 'locf' } } } }] as never,
  ) as Array<{ _id: string; value: number }>;
  assert.deepEqual(filled.map((docArg) => docArg.value), [0, 0, 2, 3]);
  assert.deepEqual(idsOf(congodb.QueryEngine.filter(documents as never[], { 'data.replicas': { $in: [0, 5] } } as never)), ['c', 'd']);
});
