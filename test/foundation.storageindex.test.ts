import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { ObjectId, type Document } from 'mongodb';
import * as congodb from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import { openEmbeddedDatabase, seededRandom } from './helpers/embedded.js';

/**
 * The embedded database answers reads, updates and deletes with a top-level string equality
 * from an index (ts/core/storageindex.ts). These tests drive the real embedded server through the
 * MongoDB driver with random documents and random operations, and compare every answer with a
 * model: the same documents in the same order, filtered by the server's own query engine over
 * the whole collection (what the server answered before the index existed).
 */

const clusterValues = ['a', 'b', 'c', 'd'];

type TRandom = ReturnType<typeof seededRandom>;

/** A value for `clusterId`: usually one of a few strings, sometimes what an index must not trust. */
const clusterValueOf = (randomArg: TRandom): unknown => {
  const roll = randomArg.next();
  if (roll < 0.7) {
    return randomArg.pick(clusterValues);
  }
  if (roll < 0.78) {
    return [randomArg.pick(clusterValues), randomArg.pick(clusterValues)];
  }
  if (roll < 0.84) {
    return 7;
  }
  if (roll < 0.9) {
    return { nested: randomArg.pick(clusterValues) };
  }
  if (roll < 0.95) {
    return null;
  }
  return undefined;
};

const documentOf = (randomArg: TRandom, numberArg: number): Document => {
  const doc: Document = { _id: new ObjectId(), id: `doc-${numberArg}`, state: randomArg.pick(['new', 'ready', 'gone']), n: numberArg };
  const cluster = clusterValueOf(randomArg);
  if (cluster !== undefined) {
    doc.clusterId = cluster;
  }
  return doc;
};

/** Filters an index can use, filters it can use in part, and filters it must leave alone. */
const filterOf = (randomArg: TRandom, idsArg: string[]): Document => {
  const someId = (): string => (randomArg.next() < 0.9 && idsArg.length > 0 ? randomArg.pick(idsArg) : 'doc-missing');
  switch (Math.floor(randomArg.next() * 11)) {
    case 0: return { id: someId() };
    case 1: return { id: { $eq: someId() } };
    case 2: return { id: { $in: [someId(), someId(), 'doc-missing'] } };
    case 3: return { clusterId: randomArg.pick(clusterValues) };
    case 4: return { clusterId: randomArg.pick(clusterValues), state: randomArg.pick(['new', 'ready']) };
    case 5: return { $and: [{ clusterId: { $in: [randomArg.pick(clusterValues), randomArg.pick(clusterValues)] } }, { n: { $gte: 10 } }] };
    case 6: return { id: someId(), n: { $lt: 1_000_000 } };
    case 7: return { clusterId: { $ne: randomArg.pick(clusterValues) } };
    case 8: return { clusterId: 7 };
    case 9: return { 'clusterId.nested': randomArg.pick(clusterValues) };
    default: return { state: { $in: ['ready', 'gone'] } };
  }
};

const matching = (modelArg: Document[], filterArg: Document): Document[] => congodb.QueryEngine.filter(modelArg as never[], filterArg) as Document[];

/** The documents as the driver gives them back, comparable with the model's. */
const plain = (docsArg: Document[]): string[] => docsArg.map((doc) => JSON.stringify({ ...doc, _id: String(doc._id) }));

describe('embedded database equality index', () => {
  test('random reads, updates and deletes answer exactly what a scan of the whole collection answers, in the same order', async () => {
    const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-index-'));
    const database = await openEmbeddedDatabase(dataDir);
    try {
      const collection = database.mongoDb.collection('IndexProbe');
      for (const seed of [1, 2, 3]) {
        const random = seededRandom(seed);
        await collection.deleteMany({});
        const model: Document[] = [];
        let numbered = seed * 10_000;
        for (let index = 0; index < 300; index += 1) {
          model.push(documentOf(random, numbered++));
        }
        await collection.insertMany(model.map((doc) => ({ ...doc })));
        for (let step = 0; step < 400; step += 1) {
          const ids = model.map((doc) => doc.id as string);
          const filter = filterOf(random, ids);
          const roll = random.next();
          if (roll < 0.4) {
            const found = await collection.find(filter).toArray();
            assert.deepEqual(plain(found), plain(matching(model, filter)), `seed ${seed} step ${step}: find ${JSON.stringify(filter)}`);
          } else if (roll < 0.5) {
            assert.equal(await collection.countDocuments(filter), matching(model, filter).length, `seed ${seed} step ${step}: count`);
          } else if (roll < 0.65) {
            const cluster = clusterValueOf(random);
            const target = matching(model, filter)[0];
            const answer = await collection.updateOne(filter, cluster === undefined ? { $unset: { clusterId: '' } } : { $set: { clusterId: cluster } });
            assert.equal(answer.matchedCount, target ? 1 : 0, `seed ${seed} step ${step}: updateOne matched`);
            if (target) {
              if (cluster === undefined) {
                delete target.clusterId;
              } else {
                target.clusterId = cluster;
              }
            }
          } else if (roll < 0.72) {
            const answer = await collection.updateMany(filter, { $inc: { n: 1 } });
            const targets = matching(model, filter);
            assert.equal(answer.matchedCount, targets.length, `seed ${seed} step ${step}: updateMany matched`);
            for (const target of targets) {
              target.n += 1;
            }
          } else if (roll < 0.8) {
            const target = matching(model, filter)[0];
            const answer = await collection.findOneAndUpdate(filter, { $set: { state: 'touched' } }, { returnDocument: 'after' });
            assert.equal(answer?.id ?? null, target?.id ?? null, `seed ${seed} step ${step}: findOneAndUpdate chose the same document`);
            if (target) {
              target.state = 'touched';
            }
          } else if (roll < 0.88) {
            const target = matching(model, filter)[0];
            const answer = await collection.deleteOne(filter);
            assert.equal(answer.deletedCount, target ? 1 : 0, `seed ${seed} step ${step}: deleteOne`);
            if (target) {
              model.splice(model.indexOf(target), 1);
            }
          } else if (roll < 0.9) {
            const targets = new Set(matching(model, filter));
            const answer = await collection.deleteMany(filter);
            assert.equal(answer.deletedCount, targets.size, `seed ${seed} step ${step}: deleteMany`);
            model.splice(0, model.length, ...model.filter((doc) => !targets.has(doc)));
          } else {
            const doc = documentOf(random, numbered++);
            await collection.insertOne({ ...doc });
            model.push(doc);
          }
        }
        assert.deepEqual(plain(await collection.find({}).toArray()), plain(model), `seed ${seed}: the whole collection at the end`);
      }
      assert.ok(database.storage!.narrowedReads > 500, `most equality reads used the index (${database.storage!.narrowedReads})`);
    } finally {
      await database.stop();
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });

  test('after a restart (snapshot and journal replay) the index answers from the recovered documents', async () => {
    const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-index-'));
    try {
      let database = await openEmbeddedDatabase(dataDir);
      const docs = Array.from({ length: 100 }, (_, index) => ({ _id: new ObjectId(), id: `r-${index}`, clusterId: `c-${index % 5}` }));
      await database.mongoDb.collection('IndexRestart').insertMany(docs);
      // Read once so the index exists, then change what it covers.
      assert.equal((await database.mongoDb.collection('IndexRestart').find({ clusterId: 'c-1' }).toArray()).length, 20);
      await database.mongoDb.collection('IndexRestart').updateOne({ id: 'r-1' }, { $set: { clusterId: 'c-moved' } });
      await database.mongoDb.collection('IndexRestart').deleteOne({ id: 'r-6' });
      await database.flushSnapshot();
      await database.mongoDb.collection('IndexRestart').updateOne({ id: 'r-11' }, { $set: { clusterId: 'c-moved' } });
      await database.stop();
      database = await openEmbeddedDatabase(dataDir);
      try {
        const collection = database.mongoDb.collection('IndexRestart');
        const before = database.storage!.narrowedReads;
        assert.deepEqual((await collection.find({ clusterId: 'c-moved' }).toArray()).map((doc) => doc.id), ['r-1', 'r-11']);
        assert.deepEqual((await collection.find({ clusterId: 'c-1' }).toArray()).map((doc) => doc.id),
          docs.filter((doc, index) => index % 5 === 1 && ![1, 6, 11].includes(index)).map((doc) => doc.id));
        assert.equal(await collection.findOne({ id: 'r-6' }), null);
        assert.equal(database.storage!.narrowedReads - before, 3, 'all three reads were answered from the index');
      } finally {
        await database.stop();
      }
    } finally {
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});
