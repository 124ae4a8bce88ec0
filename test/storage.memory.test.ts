import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { Binary, ObjectId, type Document } from 'mongodb';
import { CloudlyDatabase } from '../ts/core/database.js';
import { openEmbeddedDatabase } from './helpers/embedded.js';

/**
 * A document the embedded database keeps must not pin more memory than its own. bson takes each
 * ObjectId's 12 bytes from node's shared 8 KiB Buffer pool and reads a Binary as a view on the
 * whole wire message, so one kept document held a whole block: memory grew by kilobytes with every
 * audited write (docs/storage.md, "Memory"). This counts the stored values that share a block.
 */

/** Every ObjectId and Binary in the stored documents, and how many of them are views on a larger block. */
const storedBytes = (databaseArg: CloudlyDatabase): { values: number; sharingABlock: number } => {
  let values = 0;
  let sharingABlock = 0;
  const visit = (valueArg: unknown): void => {
    if (valueArg === null || typeof valueArg !== 'object') {
      return;
    }
    // By `_bsontype`: the driver's bson classes and the embedded server's are different classes.
    const bsonType = (valueArg as { _bsontype?: unknown })._bsontype;
    const bytes = bsonType === 'ObjectId' ? (valueArg as ObjectId).id : bsonType === 'Binary' ? (valueArg as Binary).buffer : null;
    if (bytes) {
      values++;
      if (bytes.byteOffset !== 0 || bytes.buffer.byteLength !== bytes.byteLength) {
        sharingABlock++;
      }
      return;
    }
    for (const value of Object.values(valueArg)) {
      visit(value);
    }
  };
  for (const collection of databaseArg.storage!.capture()) {
    collection.docs.forEach(visit);
  }
  return { values, sharingABlock };
};

test('stored ObjectIds and Binary values hold memory of their own, after inserts, updates, a restart and a compaction', async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-storage-memory-'));
  let database = await openEmbeddedDatabase(dataDir);
  try {
    const collection = database.mongoDb.collection('MemoryProbe');
    await collection.insertMany(Array.from({ length: 50 }, (_, index) => ({
      id: `doc-${index}`,
      owner: new ObjectId(),
      nested: { list: [new ObjectId(), { deeper: new ObjectId() }] },
    })));
    for (let index = 0; index < 50; index++) {
      // A Binary only in documents never updated: the embedded server's update turns one into a plain object.
      await collection.insertOne({ id: `one-${index}`, payload: new Binary(Buffer.from(`bytes-${index}`)) });
      await collection.updateOne({ id: `doc-${index}` }, { $set: { touched: new ObjectId() } });
    }
    const live = storedBytes(database);
    assert.equal(live.values, 50 * 5 + 50 * 2, 'every stored ObjectId and Binary was visited');
    assert.equal(live.sharingABlock, 0, 'no stored value shares a memory block');

    await database.stop();
    database = await openEmbeddedDatabase(dataDir);
    const replayed = storedBytes(database);
    assert.equal(replayed.values, live.values);
    assert.equal(replayed.sharingABlock, 0, 'none after replaying the journal');

    await database.compact();
    await database.stop();
    database = await openEmbeddedDatabase(dataDir);
    const loaded = storedBytes(database);
    assert.equal(loaded.values, live.values);
    assert.equal(loaded.sharingABlock, 0, 'none after loading a snapshot');
    const doc = await database.mongoDb.collection('MemoryProbe').findOne({ id: 'one-7' }) as Document;
    assert.equal(Buffer.from(doc.payload.buffer).toString(), 'bytes-7', 'the bytes are the ones written');
  } finally {
    await database.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
