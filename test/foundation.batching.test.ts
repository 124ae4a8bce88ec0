import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ObjectId, type Collection, type Document } from 'mongodb';
import type { CloudlyDatabase } from '../ts/core/database.js';
import { seededRandom, withEmbeddedStore } from './helpers/embedded.js';
import { defineDocumentKind, DocumentStore, type IStoredDocument } from '../ts/core/store.js';
import { InsertBatcher, maximumInsertStatements } from '../ts/core/insertbatcher.js';
import type { DirectWriter } from '../ts/core/directwrite.js';

/**
 * Reads by one field's value asked for at once are sent as one `$in` read and split by value
 * (ts/core/readbatcher.ts), and creates asked for at once as one unordered command
 * (ts/core/insertbatcher.ts). These tests ask many at once through the real store on the real
 * embedded database and compare every answer with the same call made alone, batching off.
 */

interface IProbe extends IStoredDocument {
  clusterId?: unknown;
  state: string;
  n: number;
  tags: string[];
}

const probeKind = defineDocumentKind<IProbe>('ReadBatchProbe', { audited: false });

const clusters = ['c1', 'c2', 'c3', 'c4', 'c-none'];

const probeOf = (randomArg: ReturnType<typeof seededRandom>, numberArg: number): Document => {
  const roll = randomArg.next();
  const doc: Document = { _id: new ObjectId(), id: `p-${numberArg}`, generation: 1, state: randomArg.pick(['new', 'ready']), n: Math.floor(randomArg.next() * 50), tags: ['a'] };
  // Mostly a string, sometimes what an equality on a string still matches (an array) or does not.
  if (roll < 0.8) {
    doc.clusterId = randomArg.pick(clusters.slice(0, 4));
  } else if (roll < 0.9) {
    doc.clusterId = [randomArg.pick(clusters), randomArg.pick(clusters)];
  } else if (roll < 0.95) {
    doc.clusterId = 7;
  }
  return doc;
};

type TRead = { label: string; run: (storeArg: DocumentStore) => Promise<unknown> };

const readOf = (randomArg: ReturnType<typeof seededRandom>, idsArg: string[]): TRead => {
  const id = randomArg.next() < 0.9 ? randomArg.pick(idsArg) : 'p-missing';
  const cluster = randomArg.pick(clusters);
  const state = randomArg.pick(['new', 'ready', 'gone']);
  switch (Math.floor(randomArg.next() * 6)) {
    case 0: return { label: `get ${id}`, run: (store) => store.get(probeKind, id) };
    case 1: return { label: `findOne clusterId ${cluster}`, run: (store) => store.findOne(probeKind, { clusterId: cluster }) };
    case 2: return { label: `find clusterId ${cluster}`, run: (store) => store.find(probeKind, { clusterId: cluster }) };
    case 3: return { label: `find clusterId ${cluster} by n`, run: (store) => store.find(probeKind, { clusterId: cluster }, { sort: { n: -1, id: 1 } }) };
    case 4: return { label: `find state ${state}`, run: (store) => store.find(probeKind, { state }) };
    default: return { label: `find clusterId ${cluster} limit 2`, run: (store) => store.find(probeKind, { clusterId: cluster }, { limit: 2 }) };
  }
};

/** A store over a fresh embedded database whose reads all go through the driver: the batcher is what these tests measure. */
const withStore = (fnArg: (storeArg: DocumentStore, databaseArg: CloudlyDatabase) => Promise<void>): Promise<void> =>
  withEmbeddedStore('cloudly-readbatch-', async (store, database) => {
    store.direct.enabled = false;
    await fnArg(store, database);
  });

describe('read batching', () => {
  test('reads asked at once answer exactly what each read alone answers, in fewer commands', async () => {
    await withStore(async (store, database) => {
      const collection = database.mongoDb.collection(probeKind.collectionName);
      for (const seed of [11, 12, 13]) {
        const random = seededRandom(seed);
        await collection.deleteMany({});
        const docs = Array.from({ length: 200 }, (_, index) => probeOf(random, seed * 1000 + index));
        await collection.insertMany(docs);
        const ids = docs.map((doc) => doc.id as string);
        for (let round = 0; round < 4; round++) {
          const reads = Array.from({ length: 150 }, () => readOf(random, ids));
          store.reads.enabled = true;
          const commandsBefore = store.reads.commands;
          const readsBefore = store.reads.reads;
          const together = await Promise.all(reads.map((read) => read.run(store)));
          const commands = store.reads.commands - commandsBefore;
          const batched = store.reads.reads - readsBefore;
          assert.ok(batched > 100, `most reads were batchable (${batched})`);
          assert.ok(commands <= 12, `${batched} reads went out in ${commands} commands`);
          store.reads.enabled = false;
          for (const [index, read] of reads.entries()) {
            assert.deepEqual(together[index], await read.run(store), `seed ${seed} round ${round}: ${read.label}`);
          }
          // Change some documents between rounds; the next round must read the changes.
          for (let change = 0; change < 20; change++) {
            const clusterId = random.next() < 0.8 ? random.pick(clusters) : [random.pick(clusters)];
            await collection.updateOne({ id: random.pick(ids) }, { $set: { clusterId, state: random.pick(['new', 'ready']) }, $inc: { generation: 1 } });
          }
        }
      }
    });
  });

  test('two callers of one value get their own copies, and a lone read is answered too', async () => {
    await withStore(async (store, database) => {
      await database.mongoDb.collection(probeKind.collectionName).insertOne({ _id: new ObjectId(), id: 'shared', generation: 1, clusterId: 'c1', state: 'new', n: 1, tags: ['a'] });
      const [first, second, list] = await Promise.all([store.get(probeKind, 'shared'), store.get(probeKind, 'shared'), store.find(probeKind, { clusterId: 'c1' })]);
      first!.tags.push('changed by the first caller');
      assert.deepEqual(second!.tags, ['a']);
      assert.deepEqual(list.map((doc) => doc.tags), [['a']]);
      const before = store.reads.commands;
      assert.equal((await store.get(probeKind, 'shared'))!.id, 'shared');
      assert.equal(await store.get(probeKind, 'nobody'), null);
      assert.equal(store.reads.commands - before, 2, 'one command per lone read');
    });
  });

  // Both ways the batched creates can go: handed to the embedded server in the process, and through
  // the driver's bulkWrite (the way with MONGODB_URL).
  for (const inProcess of [true, false]) {
    test(`creates asked at once (${inProcess ? 'in the process' : 'through the driver'}): exactly one winner per id, every caller told its own outcome, in as few commands as the statement bound allows`, async () => {
      await withStore(async (store) => {
        store.writes.enabled = inProcess;
        await store.insert(probeKind, { id: 'exists', state: 'new', n: 0, tags: [] });
        const created: string[] = [];
        store.onCommitted((kindArg, idArg) => {
          if (kindArg === probeKind) {
            created.push(idArg);
          }
        });
        // Each new id asked three times, and the existing one twice, all in the same turn.
        const ids = [...Array.from({ length: 40 }, (_, index) => `new-${index}`), 'exists'];
        const asks = ids.flatMap((id) => (id === 'exists' ? [id, id] : [id, id, id]));
        const commandsBefore = store.inserts.commands;
        const answers = await Promise.all(asks.map((id, index) => store.insert(probeKind, { id, state: `ask-${index}`, n: index, tags: [] })));
        const expectedCommands = Math.ceil(asks.length / maximumInsertStatements);
        assert.ok(expectedCommands > 1, 'the asks span more than one command, so a duplicate id can sit in two');
        assert.equal(store.inserts.commands - commandsBefore, expectedCommands, `${asks.length} creates in ${expectedCommands} commands`);
        for (const id of ids) {
          const winners = answers.filter((answer, index) => asks[index] === id && answer !== null);
          assert.equal(winners.length, id === 'exists' ? 0 : 1, `${id}: ${winners.length} winners`);
          const stored = await store.get(probeKind, id);
          assert.equal(stored!.generation, 1);
          if (id !== 'exists') {
            assert.deepEqual(stored, winners[0], `${id}: the winner's answer is what was stored`);
          }
        }
        assert.deepEqual(created.sort(), ids.filter((id) => id !== 'exists').sort(), 'one commit per created document');
        store.inserts.enabled = false;
        assert.equal(await store.insert(probeKind, { id: 'exists', state: 'again', n: 0, tags: [] }), null);
        assert.notEqual(await store.insert(probeKind, { id: 'alone', state: 'new', n: 0, tags: [] }), null);
        assert.equal(store.writes.commands > 0, inProcess, inProcess ? 'the creates went through the process' : 'no create went through the process');
      });
    });
  }
});

describe('create batching: a group commit per collection', () => {
  /** A stand-in for the embedded server in the process: each `update` command waits until the test lets it answer. */
  const heldWriter = () => {
    const commands: Array<{ collection: string; statements: number; answer: () => void }> = [];
    const direct = {
      update: (collectionArg: string, statementsArg: unknown[]) => new Promise((resolve) => {
        commands.push({
          collection: collectionArg,
          statements: statementsArg.length,
          answer: () => resolve({ upserted: new Set(statementsArg.map((_statement, index) => index)), writeErrors: new Map() }),
        });
      }),
    };
    return { commands, direct: direct as unknown as DirectWriter };
  };
  const collectionNamed = (nameArg: string) => ({ dbName: 'cloudly', collectionName: nameArg }) as unknown as Collection<Document>;
  const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

  test('creates that arrive while a command of their collection is out go together once it is back; an idle collection sends at once', async () => {
    const { commands, direct } = heldWriter();
    const batcher = new InsertBatcher();
    batcher.direct = direct;
    const events = collectionNamed('events');
    const others = collectionNamed('others');
    const answers: Array<Promise<boolean>> = [batcher.insertIfAbsent(events, new ObjectId(), { n: 0 })];
    await turn();
    assert.deepEqual(commands.map((command) => command.statements), [1], 'a lone create into an idle collection goes at the next turn');
    // Five more, each in a turn of its own, while the first is out: none goes yet.
    for (let index = 1; index <= 5; index++) {
      answers.push(batcher.insertIfAbsent(events, new ObjectId(), { n: index }));
      await turn();
    }
    // Another collection has nothing out: its create is not held by the first's.
    const other = batcher.insertIfAbsent(others, new ObjectId(), { n: 99 });
    await turn();
    assert.deepEqual(commands.map((command) => [command.collection, command.statements]), [['events', 1], ['others', 1]]);
    commands[0].answer();
    commands[1].answer();
    await turn();
    await turn();
    assert.deepEqual(commands.map((command) => [command.collection, command.statements]), [['events', 1], ['others', 1], ['events', 5]],
      'the five gathered meanwhile went as one command when the first came back');
    commands[2].answer();
    assert.deepEqual(await Promise.all(answers), [true, true, true, true, true, true]);
    assert.equal(await other, true);
    // Idle again: the next create goes at once, alone.
    const late = batcher.insertIfAbsent(events, new ObjectId(), { n: 6 });
    await turn();
    assert.deepEqual(commands.slice(3).map((command) => command.statements), [1]);
    commands[3].answer();
    assert.equal(await late, true);
    assert.equal(batcher.commands, 4);
    assert.equal(batcher.inserts, 8);
  });
});
