import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { ObjectId, type Document } from 'mongodb';
import { CloudlyDatabase, isDatabaseUnavailableError } from '../ts/core/database.js';
import { createLogger } from '../ts/core/logger.js';
import { seededRandom, withEmbeddedStore } from './helpers/embedded.js';
import { defineDocumentKind, DocumentStore, type IStoredDocument } from '../ts/core/store.js';

/**
 * The store's writes to the embedded database are handed to its command router in the process
 * (ts/core/directwrite.ts). These tests run the same writes on the real embedded database both
 * ways, in the process and through the driver, and require the same answers and the same stored
 * documents; then that a compare-and-swap still has exactly one winner, that nothing a caller
 * holds is shared with what is stored, and that a refusing journal refuses the write.
 */

interface IItem extends IStoredDocument {
  clusterId?: string;
  n: number;
  spec?: Document;
  note?: string | null;
  at?: Date;
}

const itemKind = defineDocumentKind<IItem>('DirectWriteItem', {
  audited: true,
  auditedFields: ['n', 'note'],
});

/** Not audited: every swap of a race is its own conditional write, none is answered by a read before it. */
const raceKind = defineDocumentKind<IItem>('DirectWriteRace', { audited: false });

type TWrite = { label: string; run: (storeArg: DocumentStore) => Promise<unknown> };

/** One random write of `idsArg`'s documents, read back as its caller sees it. */
const writeOf = (randomArg: ReturnType<typeof seededRandom>, idsArg: string[], stepArg: number): TWrite => {
  const id = randomArg.pick(idsArg);
  const n = Math.floor(randomArg.next() * 10);
  switch (Math.floor(randomArg.next() * 6)) {
    case 0: {
      const doc = { id, clusterId: randomArg.pick(['c1', 'c2']), n, spec: { image: `i:${stepArg}`, ports: [80, { tcp: 443 }] }, at: new Date(1_700_000_000_000 + stepArg) };
      return { label: `insert ${id}`, run: (store) => store.insert(itemKind, doc) };
    }
    case 1:
    case 2: {
      // The generation the caller believes: the current one, or one behind (a lost race).
      const behind = randomArg.next() < 0.3 ? 1 : 0;
      const set: Document = { n, spec: { image: `i:${stepArg}`, nested: { list: [n, null, 'x'], flag: n % 2 === 0 } } };
      if (randomArg.next() < 0.3) {
        set.note = undefined;
      }
      const unset = randomArg.next() < 0.3 ? ['at'] : [];
      return {
        label: `swap ${id} ${behind ? 'behind' : ''}`,
        run: async (store) => {
          const current = await store.get(itemKind, id);
          return current ? store.swap(itemKind, id, current.generation - behind, { set: set as Partial<IItem>, unset: unset as never }) : null;
        },
      };
    }
    case 3:
      return {
        label: `mutate ${id}`,
        run: (store) => store.mutate(itemKind, id, (currentArg) => currentArg
          ? { kind: 'write', change: { set: { n: currentArg.n + n } } }
          : { kind: 'create', doc: { id, n } }),
      };
    case 4:
      return {
        label: `remove ${id}`,
        run: async (store) => {
          const current = await store.get(itemKind, id);
          return current ? store.remove(itemKind, id, current.generation - (randomArg.next() < 0.3 ? 1 : 0)) : null;
        },
      };
    default:
      return { label: `get ${id}`, run: (store) => store.get(itemKind, id) };
  }
};

/** Every stored document of the kind, and its audit events, with what differs between two runs (times, random incarnations) taken out. */
const storedOf = async (storeArg: DocumentStore, databaseArg: CloudlyDatabase): Promise<{ items: Document[]; events: Document[] }> => {
  const items = await storeArg.collection(itemKind).find({}, { sort: { id: 1 } }).toArray();
  const events = await databaseArg.mongoDb.collection('CloudlyAuditEvent').find({ 'target.kind': 'DirectWriteItem' }).toArray();
  const incarnations = new Map<string, string>();
  const stable = (incarnationArg: unknown): string => {
    const key = String(incarnationArg);
    if (!incarnations.has(key)) {
      incarnations.set(key, `incarnation-${incarnations.size}`);
    }
    return incarnations.get(key)!;
  };
  return {
    items: items.map((item) => ({ ...item, _id: String(item._id), _incarnation: stable(item._incarnation), _audit: { ...item._audit, at: 0 } })),
    events: events
      .map((event) => ({ ...event, _id: undefined, at: 0, id: String(event.id).replace(/:[0-9a-f]{24}:/, ':incarnation:') }))
      .sort((a, b) => String(a.id).localeCompare(String(b.id))),
  };
};

const withStore = (fnArg: (storeArg: DocumentStore, databaseArg: CloudlyDatabase) => Promise<void>): Promise<void> =>
  withEmbeddedStore('cloudly-directwrite-', fnArg);

describe('writes to the embedded database in the process', () => {
  test('300 random inserts, swaps, mutations and removals answer and store exactly what the driver path does', async () => {
    const ids = Array.from({ length: 12 }, (_unused, index) => `item-${index}`);
    const run = async (inProcessArg: boolean): Promise<{ answers: unknown[]; stored: Awaited<ReturnType<typeof storedOf>>; commands: number }> => {
      let result!: { answers: unknown[]; stored: Awaited<ReturnType<typeof storedOf>>; commands: number };
      await withStore(async (store, database) => {
        store.writes.enabled = inProcessArg;
        const random = seededRandom(58);
        const answers: unknown[] = [];
        for (let step = 0; step < 300; step++) {
          const write = writeOf(random, ids, step);
          try {
            answers.push({ label: write.label, answer: await write.run(store) });
          } catch (error) {
            answers.push({ label: write.label, refused: (error as Error).message });
          }
        }
        result = { answers, stored: await storedOf(store, database), commands: store.writes.commands };
      });
      return result;
    };
    const inProcess = await run(true);
    const throughDriver = await run(false);
    assert.equal(throughDriver.commands, 0, 'the baseline sent no write in the process');
    assert.ok(inProcess.commands > 300, `the writes went through the process (${inProcess.commands} commands)`);
    assert.deepEqual(inProcess.answers, throughDriver.answers);
    assert.deepEqual(inProcess.stored.items, throughDriver.stored.items);
    assert.deepEqual(inProcess.stored.events, throughDriver.stored.events);
    assert.ok(inProcess.stored.items.length > 0 && inProcess.stored.events.length > 100, 'the sequence stored documents and events');
    const types = (valueArg: unknown): string => Object.prototype.toString.call(valueArg);
    const answered = inProcess.answers.map((entry) => (entry as { answer?: unknown }).answer).filter((answer): answer is IItem => typeof answer === 'object' && answer !== null && 'spec' in answer && 'at' in answer);
    assert.ok(answered.length > 0 && answered.every((item) => types(item.at) === '[object Date]'), 'dates come back as dates');
  });

  test('an undefined in a write is stored as null, as the driver encodes it, and nothing the caller holds is shared with what is stored', async () => {
    await withStore(async (store) => {
      const spec = { image: 'a', ports: [80] };
      const created = await store.insert(itemKind, { id: 'shared', n: 1, spec, note: undefined });
      assert.ok(created);
      spec.ports.push(81);
      created.spec!.image = 'changed by the caller';
      const change = { n: 2, spec: { image: 'b', ports: [443] } };
      const written = await store.swap(itemKind, 'shared', 1, { set: change });
      assert.ok(written);
      change.spec.ports.push(8443);
      written.spec!.image = 'changed again';
      const stored = await store.collection(itemKind).findOne({ id: 'shared' });
      assert.deepEqual(stored?.spec, { image: 'b', ports: [443] });
      assert.equal(stored?.generation, 2);
      const raw = await store.collection(itemKind).findOne({ id: 'shared', note: { $type: 'null' } } as never);
      assert.ok(raw, 'the undefined note was stored as null');
      assert.ok(store.writes.commands >= 3);
    });
  });

  test('an ObjectId below the top level comes back as the driver\'s ObjectId', async () => {
    await withStore(async (store) => {
      const ref = new ObjectId();
      await store.insert(itemKind, { id: 'typed', n: 1, spec: { ref } });
      const written = await store.swap(itemKind, 'typed', 1, { set: { n: 2 } });
      assert.ok(written?.spec?.ref instanceof ObjectId, 'the driver\'s class');
      assert.equal((written.spec.ref as ObjectId).toHexString(), ref.toHexString());
    });
  });

  test('a swap of an audited document and its audit event share one journal sync in the process; through the driver they take two', async () => {
    for (const inProcess of [true, false]) {
      await withStore(async (store, database) => {
        store.writes.enabled = inProcess;
        await store.insert(itemKind, { id: 'synced', n: 0 });
        const journal = database.journal!;
        const syncsBefore = journal.syncs;
        const lsnBefore = journal.lastAppendedLsn;
        const written = await store.swap(itemKind, 'synced', 1, { set: { n: 1 } });
        assert.equal(written?.generation, 2);
        assert.equal(journal.lastAppendedLsn - lsnBefore, 2, 'two records: the document and its audit event');
        assert.equal(journal.syncs - syncsBefore, inProcess ? 1 : 2, inProcess ? 'one sync in the process' : 'two through the driver');
        const events = await database.mongoDb.collection('CloudlyAuditEvent').find({ 'target.id': 'synced' }).toArray();
        assert.deepEqual(events.map((event) => event.generationAfter).sort(), [1, 2]);
      });
    }
  });

  test('100 concurrent compare-and-swaps from one generation in the process: exactly one winner', async () => {
    await withStore(async (store) => {
      await store.insert(raceKind, { id: 'raced', n: 0 });
      const commandsBefore = store.writes.commands;
      const results = await Promise.all(Array.from({ length: 100 }, (_unused, index) => store.swap(raceKind, 'raced', 1, { set: { n: index + 1 } })));
      assert.equal(store.writes.commands - commandsBefore, 100, 'each swap was a conditional write in the process');
      const winners = results.filter((result) => result !== null);
      assert.equal(winners.length, 1);
      const stored = await store.get(raceKind, 'raced');
      assert.equal(stored?.generation, 2);
      assert.equal(stored?.n, winners[0]!.n);
      const inserts = await Promise.all(Array.from({ length: 50 }, () => store.insert(itemKind, { id: 'created-once', n: 7 })));
      assert.equal(inserts.filter((inserted) => inserted !== null).length, 1);
    });
  });

  test('a journal that refuses writes refuses a write in the process as the database unavailable, and stores nothing', async () => {
    const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-directwrite-full-'));
    const failpoint = path.join(dataDir, '..', `${path.basename(dataDir)}.failpoint`);
    const database = new CloudlyDatabase({ mongoDbUrl: null, mongoDbName: 'cloudly', dataDir, logger: createLogger('silent'), journalFailpointFile: failpoint });
    await database.start();
    try {
      const store = new DocumentStore(database);
      await store.insert(itemKind, { id: 'kept', n: 1 });
      await fsp.writeFile(failpoint, 'ENOSPC');
      const commandsBefore = store.writes.commands;
      await assert.rejects(store.swap(itemKind, 'kept', 1, { set: { n: 2 } }), (error: unknown) => isDatabaseUnavailableError(error));
      await assert.rejects(store.insert(itemKind, { id: 'refused', n: 1 }), (error: unknown) => isDatabaseUnavailableError(error));
      assert.ok(store.writes.commands > commandsBefore, 'the refused writes went through the process');
      assert.equal(store.auditAppendFailures, 0, 'a refused change is no audit event that failed to append');
      await fsp.rm(failpoint);
      assert.equal((await store.get(itemKind, 'kept'))?.generation, 1);
      assert.equal(await store.get(itemKind, 'refused'), null);
    } finally {
      await database.stop();
      await fsp.rm(failpoint, { force: true });
      await fsp.rm(dataDir, { recursive: true, force: true });
    }
  });
});

test('a command is copied exactly as the server decodes the driver\'s encoding of it, for 2,000 random commands with awkward values', async () => {
  const { asServerValue } = await import('../ts/core/directwrite.js');
  const { bson: serverBson } = await import('@push.rocks/smartmongo/dist_ts/congodb/congodb.plugins.js');
  const { notPlain } = await import('../ts/core/directread.js');
  const encoded = (valueArg: Document): Document => serverBson.deserialize(serverBson.serialize(valueArg, { ignoreUndefined: false }));
  const random = seededRandom(58);
  const leaves: Array<() => unknown> = [
    () => undefined, () => null, () => -0, () => 0.5, () => 2 ** 40, () => -(2 ** 31), () => Number.NaN, () => -Infinity,
    () => true, () => '', () => 'é\n"', () => '\ud83d\ude00', () => new Date(1_700_000_000_000), () => new ObjectId(),
  ];
  const valueOf = (depthArg: number): unknown => {
    const roll = random.next();
    if (depthArg > 3 || roll < 0.5) {
      return random.pick(leaves)();
    }
    if (roll < 0.7) {
      const list = Array.from({ length: Math.floor(random.next() * 4) }, () => valueOf(depthArg + 1));
      if (random.next() < 0.1) {
        list.length += 1; // a hole at the end
      }
      return list;
    }
    const record: Record<string, unknown> = {};
    for (let index = 0; index < Math.floor(random.next() * 4); index++) {
      record[random.pick(['a', '$set', 'b.c', '10', '1', 'é', 'z'])] = valueOf(depthArg + 1);
    }
    return record;
  };
  let copied = 0;
  for (let round = 0; round < 2_000; round++) {
    const command = { findAndModify: 'Things', query: { id: `t${round}` }, update: { $set: valueOf(0) }, new: true };
    const copy = asServerValue(command);
    assert.notEqual(copy, notPlain, `round ${round}: only plain values and ObjectIds, yet not copied`);
    assert.deepStrictEqual(copy, encoded(command), `round ${round}`);
    copied += 1;
  }
  assert.equal(copied, 2_000);
  // What the encoding changes or refuses is left to it.
  for (const value of [{ text: '\ud800' }, { fn: () => 1 }, JSON.parse('{"__proto__": {"x": 1}}'), { at: new Date(Number.NaN) }, { map: new Map() }, { big: 10n }]) {
    assert.equal(asServerValue(value), notPlain, `${Object.keys(value)[0]} is left to the encoding`);
  }
  // An ObjectId comes back as the server's class, as its decoding gives it.
  const id = new ObjectId();
  const copiedId = (asServerValue({ id }) as { id: unknown }).id;
  assert.equal((copiedId as { constructor: unknown }).constructor, (encoded({ id }).id as { constructor: unknown }).constructor);
});
