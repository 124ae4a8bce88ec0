import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { Context } from 'mingo/core';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import { queriesShareContext, setStringInSets } from '../ts/core/queryengine.js';

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

test("a filter's $in on strings, and a field equal to a string, is tested with one set, and answers exactly what mingo's own answers, in the same order", (t) => {
  t.after(() => setStringInSets(true));
  let state = 20261207;
  const next = (): number => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  const pick = <T>(listArg: readonly T[]): T => listArg[Math.floor(next() * listArg.length)];
  const names = ['a', 'b', 'c', 'd', 'e', '1'];
  // Every kind of value a field can hold: strings, arrays of strings (empty too), missing, null,
  // numbers, a number that prints as a listed string, nested arrays, objects, dates, booleans.
  const valueOf = (): unknown => pick<() => unknown>([
    () => pick(names),
    () => [pick(names), pick(names)],
    () => [],
    () => undefined,
    () => null,
    () => 1,
    () => [pick(names), 1],
    () => [[pick(names)]],
    () => ({ id: pick(names) }),
    () => new Date(0),
    () => true,
  ])();
  const documents = Array.from({ length: 300 }, (_unused, index) => {
    const doc: Record<string, unknown> = { _id: `doc-${index}`, n: Math.floor(next() * 5) };
    for (const field of ['id', 'clusterId']) {
      const value = valueOf();
      if (value !== undefined) {
        doc[field] = value;
      }
    }
    return doc;
  });
  const listOf = (): string[] => Array.from({ length: Math.floor(next() * 4) }, () => pick(names));
  const filterOf = (): Record<string, unknown> => pick<() => Record<string, unknown>>([
    () => ({ id: { $in: listOf() } }),
    () => ({ id: { $in: listOf() }, clusterId: { $in: listOf() } }),
    () => ({ id: { $in: listOf() }, n: { $gte: Math.floor(next() * 5) } }),
    () => ({ clusterId: { $in: listOf() }, id: pick(names) }),
    () => ({ id: { $in: [...listOf(), null] } }),
    () => ({ id: { $in: listOf(), $ne: pick(names) } }),
    () => ({ 'id.0': { $in: listOf() } }),
    // A plain string is the same test as a one-value $in: alone, beside a set, beside mingo's own.
    () => ({ id: pick(names) }),
    () => ({ id: pick(names), clusterId: pick(names) }),
    () => ({ clusterId: pick(names), n: { $lt: Math.floor(next() * 5) } }),
    () => ({ 'clusterId.id': pick(names), id: pick(names) }),
  ])();
  let setAnswers = 0;
  for (let round = 0; round < 400; round++) {
    const filter = filterOf();
    setStringInSets(true);
    const withSets = congodb.QueryEngine.filter(documents as never[], filter as never) as unknown[];
    setStringInSets(false);
    const mingos = congodb.QueryEngine.filter(documents as never[], filter as never) as unknown[];
    assert.deepEqual(idsOf(withSets), idsOf(mingos), `round ${round}: ${JSON.stringify(filter)}`);
    setAnswers += withSets.length;
  }
  assert.ok(setAnswers > 1_000, `the filters matched documents (${setAnswers})`);

  // The reason for it: 3,000 ids over 3,000 documents, once with sets, once with mingo's $in.
  const many = Array.from({ length: 3_000 }, (_unused, index) => ({ _id: `m-${index}`, id: `id-${index}` }));
  const filter = { id: { $in: many.map((doc) => doc.id) } };
  setStringInSets(true);
  assert.equal((congodb.QueryEngine.filter(many as never[], filter as never) as unknown[]).length, 3_000);
});
