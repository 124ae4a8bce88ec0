import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Binary, ObjectId, type Document } from 'mongodb';
import type { CloudlyDatabase } from '../ts/core/database.js';
import { seededRandom, withEmbeddedStore } from './helpers/embedded.js';
import { defineDocumentKind, DocumentStore, type IStoredDocument } from '../ts/core/store.js';

/**
 * The store's reads of the embedded database are answered in the process (ts/core/directread.ts).
 * These tests ask the same reads of the real embedded database both ways, in the process and
 * through the driver, and require the same answers, in the same order, with the same types.
 */

interface IProbe extends IStoredDocument {
  clusterId?: unknown;
  state?: string | null;
  n: number;
  tags: string[];
  at?: Date;
  nested?: Document;
}

const probeKind = defineDocumentKind<IProbe>('DirectReadProbe', { audited: false });

const clusters = ['c1', 'c2', 'c3', 'c-none'];

const probeOf = (randomArg: ReturnType<typeof seededRandom>, numberArg: number): Document => {
  const doc: Document = {
    _id: new ObjectId(),
    id: `p-${numberArg}`,
    generation: 1,
    n: Math.floor(randomArg.next() * 20),
    tags: randomArg.next() < 0.5 ? ['a'] : ['a', 'b'],
    nested: { depth: { list: [1, { two: 2 }], flag: randomArg.next() < 0.5 } },
    mutations: [{ mutationId: 'm', answer: { ok: true } }],
    _incarnation: 'i-1',
  };
  const roll = randomArg.next();
  if (roll < 0.8) {
    doc.clusterId = randomArg.pick(clusters.slice(0, 3));
  } else if (roll < 0.9) {
    doc.clusterId = [randomArg.pick(clusters), randomArg.pick(clusters)];
  }
  // Missing, null or a string: what a filter's null (and an undefined the driver sends as null) matches.
  const stateRoll = randomArg.next();
  if (stateRoll < 0.6) {
    doc.state = randomArg.pick(['new', 'ready']);
  } else if (stateRoll < 0.8) {
    doc.state = null;
  }
  if (randomArg.next() < 0.5) {
    doc.at = new Date(1_700_000_000_000 + Math.floor(randomArg.next() * 1e6));
  }
  return doc;
};

type TRead = { label: string; run: (storeArg: DocumentStore) => Promise<unknown> };

const readOf = (randomArg: ReturnType<typeof seededRandom>, idsArg: string[]): TRead => {
  const id = randomArg.next() < 0.9 ? randomArg.pick(idsArg) : 'p-missing';
  const cluster = randomArg.pick(clusters);
  const n = Math.floor(randomArg.next() * 20);
  switch (Math.floor(randomArg.next() * 10)) {
    case 0: return { label: `get ${id}`, run: (store) => store.get(probeKind, id) };
    case 1: return { label: `findOne clusterId ${cluster}`, run: (store) => store.findOne(probeKind, { clusterId: cluster }) };
    case 2: return { label: `find clusterId ${cluster} by n`, run: (store) => store.find(probeKind, { clusterId: cluster }, { sort: { n: -1, id: 1 } }) };
    case 3: return { label: `find n >= ${n} limit 3 by at`, run: (store) => store.find(probeKind, { n: { $gte: n } }, { sort: { at: 1, id: -1 }, limit: 3 }) };
    case 4: return { label: 'find state undefined', run: (store) => store.find(probeKind, { state: undefined } as never) };
    case 5: return { label: `find id $in`, run: (store) => store.find(probeKind, { id: { $in: [id, 'p-missing', idsArg[0]] } }) };
    case 6: return { label: `find tags b, nested flag`, run: (store) => store.find(probeKind, { tags: 'b', 'nested.depth.flag': true } as never) };
    case 7: return { label: `findFields id, n of ${cluster}`, run: (store) => store.findFields(probeKind, { clusterId: cluster }, ['id', 'n', 'at'], { sort: { id: 1 } }) };
    case 8: return { label: 'find all', run: (store) => store.find(probeKind, {}) };
    default: return { label: `find $or`, run: (store) => store.find(probeKind, { $or: [{ clusterId: cluster }, { n: { $lt: n } }] } as never, { limit: 5 }) };
  }
};

const withStore = (fnArg: (storeArg: DocumentStore, databaseArg: CloudlyDatabase) => Promise<void>): Promise<void> =>
  withEmbeddedStore('cloudly-directread-', fnArg);

/** Every read once in the process and once through the driver (batching off, so each is its own command). */
const bothWays = async (storeArg: DocumentStore, readArg: TRead): Promise<{ direct: unknown; driver: unknown }> => {
  storeArg.direct.enabled = true;
  const readsBefore = storeArg.direct.reads;
  const direct = await readArg.run(storeArg);
  assert.equal(storeArg.direct.reads - readsBefore, 1, `${readArg.label} was answered in the process`);
  storeArg.direct.enabled = false;
  storeArg.reads.enabled = false;
  const driver = await readArg.run(storeArg);
  storeArg.direct.enabled = true;
  storeArg.reads.enabled = true;
  return { direct, driver };
};

describe('reads in the process', () => {
  test('answer exactly what the same read through the driver answers: documents, order, dates, projections, nulls', async () => {
    await withStore(async (store, database) => {
      const collection = database.mongoDb.collection(probeKind.collectionName);
      for (const seed of [21, 22]) {
        const random = seededRandom(seed);
        await collection.deleteMany({});
        // Above the equality index's minimum, so narrowed reads are compared too.
        const docs = Array.from({ length: 300 }, (_, index) => probeOf(random, seed * 1000 + index));
        await collection.insertMany(docs);
        const ids = docs.map((doc) => doc.id as string);
        for (let round = 0; round < 3; round++) {
          for (let index = 0; index < 120; index++) {
            const read = readOf(random, ids);
            const { direct, driver } = await bothWays(store, read);
            assert.deepEqual(direct, driver, `seed ${seed} round ${round}: ${read.label}`);
          }
          for (let change = 0; change < 30; change++) {
            await collection.updateOne({ id: random.pick(ids) }, { $set: { clusterId: random.pick(clusters), n: Math.floor(random.next() * 20) }, $inc: { generation: 1 } });
          }
        }
      }
      assert.equal(store.direct.fallbacks, 0);
    });
  });

  test('a caller that changes what it read changes nothing stored, and reads its own writes at once', async () => {
    await withStore(async (store) => {
      await store.insert(probeKind, { id: 'own', generation: 1, n: 1, tags: ['a'], nested: { list: [1] } } as IProbe);
      const first = (await store.get(probeKind, 'own'))!;
      first.tags.push('changed by the caller');
      (first.nested!.list as number[]).push(2);
      const again = (await store.get(probeKind, 'own'))!;
      assert.deepEqual(again.tags, ['a']);
      assert.deepEqual(again.nested, { list: [1] });
      assert.ok(store.direct.reads >= 2);
      const { outcome } = await store.mutate(probeKind, 'own', (currentArg) => ({ kind: 'write', change: { set: { n: (currentArg?.n ?? 0) + 1 } } }));
      assert.equal(outcome, 'written');
      assert.equal((await store.get(probeKind, 'own'))!.n, 2, 'the write just acknowledged is read');
    });
  });

  test('a document holding an ObjectId or a Binary below the top level is read through the driver, with the driver\'s types', async () => {
    await withStore(async (store, database) => {
      const reference = new ObjectId();
      await database.mongoDb.collection(probeKind.collectionName).insertOne({
        _id: new ObjectId(), id: 'typed', generation: 1, n: 1, tags: [], nested: { reference, bytes: new Binary(Buffer.from('abc')) },
      });
      const before = store.direct.fallbacks;
      const doc = (await store.get(probeKind, 'typed'))!;
      assert.equal(store.direct.fallbacks - before, 1, 'the read fell back to the driver');
      assert.ok(doc.nested!.reference instanceof ObjectId);
      assert.equal((doc.nested!.reference as ObjectId).toHexString(), reference.toHexString());
      assert.ok(doc.nested!.bytes instanceof Binary);
    });
  });
});
