import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startSharedDatabase, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';

/**
 * Administrators' cluster lists come from a snapshot (ts/core/readcache.ts): this instance's own
 * writes are seen at once, another instance's within CLOUDLY_READ_CACHE_MS, and reads with nothing
 * changed do not go to the database.
 */

const clusterNames = async (tArg: ITestCloudly): Promise<string[]> =>
  (await tArg.admin.call('getClusters', {})).clusters.map((cluster) => cluster.name).sort();

/** Two Cloudly instances over one database, with their own read bounds. */
const twoInstances = async (aMsArg: number, bMsArg: number) => {
  const database = await startSharedDatabase();
  const a = await startTestCloudly({ ...database.shared, readCacheMs: aMsArg });
  const b = await startTestCloudly({ ...database.shared, readCacheMs: bMsArg });
  return {
    a,
    b,
    async stop() {
      await a.stop();
      await b.stop();
      await database.stop();
    },
  };
};

describe('cluster list read path', () => {
  test('an instance sees its own creates, token rotations and deletes at once, and answers repeated reads from memory', async () => {
    const t = await startTestCloudly({ readCacheMs: 60_000 });
    try {
      const reader = t.cloudly.clusterManager.listReader;
      assert.deepEqual(await clusterNames(t), []);
      const { cluster } = await t.createCluster('own-1');
      assert.deepEqual(await clusterNames(t), ['own-1'], 'a create is seen by the next read');
      const rotated = await t.admin.call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: cluster.generation });
      const listed = (await t.admin.call('getClusters', {})).clusters.find((entry) => entry.id === cluster.id);
      assert.equal(listed?.generation, rotated.cluster.generation, 'a token rotation is seen by the next read');
      const loadsBefore = reader.loads;
      const hitsBefore = reader.hits;
      for (let index = 0; index < 20; index++) {
        await t.admin.call('getClusters', { limit: 1 });
      }
      assert.equal(reader.loads, loadsBefore, 'twenty reads with nothing written read the database no more');
      assert.ok(reader.hits >= hitsBefore + 20, 'they were answered from the snapshot');
      await t.admin.call('deleteCluster', { clusterId: cluster.id, expectedGeneration: rotated.cluster.generation });
      assert.deepEqual(await clusterNames(t), [], 'a delete is seen by the next read');
    } finally {
      await t.stop();
    }
  });

  test('another instance\'s write is seen within the bound: at once with 0, not before the bound runs out with a long one', async () => {
    // A reads through (0 ms); B keeps its snapshot for a minute.
    const { a, b, stop } = await twoInstances(0, 60_000);
    try {
      await a.createCluster('first');
      assert.deepEqual(await clusterNames(b), ['first'], 'B reads the database for its first snapshot');
      await a.createCluster('second');
      assert.deepEqual(await clusterNames(a), ['first', 'second'], 'A (no snapshot) reads what is stored');
      assert.deepEqual(await clusterNames(b), ['first'], 'B answers from its snapshot within its bound');
      await b.createCluster('third');
      assert.deepEqual(await clusterNames(b), ['first', 'second', 'third'], 'B\'s own write reads the database again, with A\'s write in it');
    } finally {
      await stop();
    }
  });

  test('past half its bound the snapshot is read again in the background: the reader is answered from the old one, the next from the new', async () => {
    const { a, b, stop } = await twoInstances(0, 2_000);
    try {
      const reader = b.cloudly.clusterManager.listReader;
      assert.deepEqual(await clusterNames(b), []);
      const loadsAfterFirst = reader.loads;
      await a.createCluster('ahead');
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      assert.deepEqual(await clusterNames(b), [], 'answered from the snapshot it had, within its bound');
      assert.equal(reader.loads, loadsAfterFirst + 1, 'and that read started one read of the collection');
      await waitFor(async () => (await clusterNames(b)).includes('ahead'), 'the background read is installed', 5_000);
      assert.equal(reader.loads, loadsAfterFirst + 1, 'no reader had to read the collection itself');
    } finally {
      await stop();
    }
  });

  test('with a short bound, another instance\'s write reaches the list without any write on this instance', async () => {
    const { a, b, stop } = await twoInstances(1_000, 300);
    try {
      assert.deepEqual(await clusterNames(b), []);
      await a.createCluster('remote');
      await waitFor(async () => (await clusterNames(b)).includes('remote'), 'B lists the cluster A created', 10_000);
    } finally {
      await stop();
    }
  });
});
