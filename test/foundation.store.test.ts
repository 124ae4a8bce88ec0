import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { refuse } from '../ts/core/errors.js';
import { defineDocumentKind, retainedMutationAnswers, type IStoredDocument } from '../ts/core/store.js';

interface ICounterDoc extends IStoredDocument {
  value: number;
  note?: string;
}

const counterKind = defineDocumentKind<ICounterDoc>('TestCounter');
const volatileKind = defineDocumentKind<ICounterDoc>('TestVolatile', { audited: false });

describe('store: compare-and-swap on one document, decided by the database', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly(); });
  after(async () => { await t.stop(); });

  test('100 concurrent swaps with the same expected generation: exactly one winner', async () => {
    await t.cloudly.store.insert(counterKind, { id: 'race', value: 0 });
    const results = await Promise.all(Array.from({ length: 100 }, (_, index) =>
      t.cloudly.store.swap(counterKind, 'race', 1, { set: { value: index + 1 } })));
    const winners = results.filter((result) => result !== null);
    assert.equal(winners.length, 1);
    const stored = await t.cloudly.store.get(counterKind, 'race');
    assert.equal(stored?.generation, 2);
    assert.equal(stored?.value, winners[0]!.value);
  });

  test('100 concurrent inserts of one id: exactly one document', async () => {
    const results = await Promise.all(Array.from({ length: 100 }, (_, index) =>
      t.cloudly.store.insert(counterKind, { id: 'single', value: index })));
    assert.equal(results.filter((result) => result !== null).length, 1);
    assert.equal((await t.cloudly.store.find(counterKind, { id: 'single' })).length, 1);
  });

  test('findIn answers the documents one $in query answers, over lists longer than a chunk, with duplicates and a filter', async () => {
    const { store } = t.cloudly;
    await Promise.all(Array.from({ length: 90 }, (_, index) =>
      store.insert(counterKind, { id: `in-${index}`, value: index, ...(index % 3 === 0 ? { note: 'third' } : {}) })));
    const wanted = [...Array.from({ length: 80 }, (_, index) => `in-${index * 1}`), 'in-5', 'in-missing'];
    const sorted = (docsArg: ICounterDoc[]) => docsArg.map((doc) => doc.id).sort();
    const direct = await store.find(counterKind, { id: { $in: wanted } });
    const chunked = await store.findIn(counterKind, 'id', wanted);
    assert.equal(direct.length, 80);
    assert.deepEqual(sorted(chunked), sorted(direct));
    assert.deepEqual(chunked.find((doc) => doc.id === 'in-7'), direct.find((doc) => doc.id === 'in-7'));
    const filtered = await store.findIn(counterKind, 'id', wanted, { note: 'third' });
    assert.deepEqual(sorted(filtered), sorted(await store.find(counterKind, { id: { $in: wanted }, note: 'third' })));
    assert.equal(filtered.length, 27);
    assert.deepEqual(await store.findIn(counterKind, 'id', []), []);
  });

  test('a stale generation changes nothing; unset removes a field', async () => {
    await t.cloudly.store.insert(counterKind, { id: 'stale', value: 1, note: 'x' });
    assert.equal(await t.cloudly.store.swap(counterKind, 'stale', 7, { set: { value: 99 } }), null);
    assert.equal((await t.cloudly.store.get(counterKind, 'stale'))?.value, 1);
    const next = await t.cloudly.store.swap(counterKind, 'stale', 1, { set: { value: 2 }, unset: ['note'] });
    assert.deepEqual(next, { id: 'stale', generation: 2, value: 2 });
  });

  test('a mutation answer is stored in the committing write and found for a replay; old ones age out', async () => {
    await t.cloudly.store.insert(counterKind, { id: 'replay', value: 0 }, { mutation: { mutationId: 'm-0', answer: { value: 0 } } });
    let generation = 1;
    for (let index = 1; index <= retainedMutationAnswers + 1; index++) {
      const next = await t.cloudly.store.swap(counterKind, 'replay', generation, { set: { value: index } }, { mutation: { mutationId: `m-${index}`, answer: { value: index } } });
      generation = next!.generation;
    }
    assert.deepEqual((await t.cloudly.store.findMutation(counterKind, `m-${retainedMutationAnswers}`))?.answer, { value: retainedMutationAnswers });
    assert.equal(await t.cloudly.store.findMutation(counterKind, 'm-0'), null);
    assert.equal(await t.cloudly.store.findMutation(counterKind, 'never'), null);
  });

  test('mutate says what it did: created, written, kept, removed, and a refusal leaves as it was decided', async () => {
    const { store } = t.cloudly;
    const created = await store.mutate(counterKind, 'm-1', (current) => (current ? { kind: 'keep' } : { kind: 'create', doc: { id: 'm-1', value: 1 } }));
    assert.equal(created.outcome, 'created');
    assert.equal(created.doc?.generation, 1);
    assert.equal(created.previousGeneration, 0);
    const written = await store.mutate(counterKind, 'm-1', (current) => ({ kind: 'write', change: { set: { value: current!.value + 1 } } }));
    assert.deepEqual([written.outcome, written.doc?.value, written.doc?.generation, written.previousGeneration], ['written', 2, 2, 1]);
    const kept = await store.mutate(counterKind, 'm-1', () => ({ kind: 'keep' }));
    assert.deepEqual([kept.outcome, kept.doc?.generation], ['kept', 2]);
    await assert.rejects(
      store.mutate(counterKind, 'm-1', () => ({ kind: 'refuse', refusal: refuse('invalid-request', ['request.value is wrong']) })),
      (error: { errorData?: { code?: string; reasons?: string[] } }) => error.errorData?.code === 'invalid-request'
        && error.errorData.reasons?.[0] === 'request.value is wrong',
    );
    assert.equal((await store.get(counterKind, 'm-1'))?.generation, 2);
    const removed = await store.mutate(counterKind, 'm-1', () => ({ kind: 'remove' }));
    assert.deepEqual([removed.outcome, removed.doc, removed.previousGeneration], ['removed', null, 2]);
    assert.equal(await store.get(counterKind, 'm-1'), null);
    const removedAgain = await store.mutate(counterKind, 'm-1', () => ({ kind: 'remove' }));
    assert.equal(removedAgain.outcome, 'kept');
  });

  test('mutate: 20 concurrent increments all land; a document that keeps changing is refused conflict after its rounds', async () => {
    const { store } = t.cloudly;
    await store.insert(counterKind, { id: 'm-race', value: 0 });
    const results = await Promise.all(Array.from({ length: 20 }, () =>
      store.mutate(counterKind, 'm-race', (current) => ({ kind: 'write', change: { set: { value: current!.value + 1 } } }), { rounds: 100 })));
    assert.equal(results.filter((result) => result.outcome === 'written').length, 20);
    assert.equal((await store.get(counterKind, 'm-race'))?.value, 20);
    let decisions = 0;
    await assert.rejects(
      store.mutate(counterKind, 'm-race', async (current) => {
        decisions++;
        // Another writer lands between every read and its write.
        await store.swap(counterKind, 'm-race', current!.generation, { set: { value: current!.value } });
        return { kind: 'write', change: { set: { value: -1 } } };
      }, { rounds: 3 }),
      (error: { errorData?: { code?: string; retryable?: boolean } }) => error.errorData?.code === 'conflict' && error.errorData.retryable === true,
    );
    assert.equal(decisions, 3);
    assert.notEqual((await store.get(counterKind, 'm-race'))?.value, -1);
  });

  test('mutate: 100 concurrent creators of one id, exactly one creates and the others decide again and keep', async () => {
    const results = await Promise.all(Array.from({ length: 100 }, (_, index) =>
      t.cloudly.store.mutate(counterKind, 'm-create', (current) => (current ? { kind: 'keep' } : { kind: 'create', doc: { id: 'm-create', value: index } }))));
    assert.equal(results.filter((result) => result.outcome === 'created').length, 1);
    assert.equal(results.filter((result) => result.outcome === 'kept').length, 99);
  });

  test('remove is conditional on the generation too', async () => {
    await t.cloudly.store.insert(counterKind, { id: 'gone', value: 0 });
    assert.equal(await t.cloudly.store.remove(counterKind, 'gone', 5), false);
    assert.equal(await t.cloudly.store.remove(counterKind, 'gone', 1), true);
    assert.equal(await t.cloudly.store.get(counterKind, 'gone'), null);
  });

  test('every write, of any kind, is synced to the embedded journal before it is answered', async () => {
    // A lease-like kind (no audit events) is journaled like everything else.
    const journal = t.cloudly.database.journal!;
    const beforeVolatile = journal.lastAppendedLsn;
    await t.cloudly.store.insert(volatileKind, { id: 'lease-like', value: 0 });
    assert.ok(journal.durableLsn > beforeVolatile, 'the insert is on disk when it is answered');
    const beforeSwap = journal.lastAppendedLsn;
    assert.ok(await t.cloudly.store.swap(volatileKind, 'lease-like', 1, { set: { value: 1 } }));
    assert.ok(journal.durableLsn > beforeSwap, 'the swap is on disk when it is answered');
    const beforeDurable = journal.lastAppendedLsn;
    await t.cloudly.store.insert(counterKind, { id: 'durable', value: 0 });
    assert.ok(journal.durableLsn > beforeDurable);
  });
});
