import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly } from './helpers/cloudly.js';
import { clusterKind } from '../ts/manager.cluster/documents.js';

/**
 * A page of the cluster list asked for while the snapshot must be read again (a write on this
 * instance, or the bound ran out) is read from the database directly, with the write in it,
 * instead of waiting for a read of the whole collection; the snapshot is read once in the
 * background and answers the pages after it (ts/core/readcache.ts).
 */

describe('cluster list pages while the snapshot is read again', () => {
  test('a page after a write is read from the database with the write in it, one background read follows, and the next pages come from memory', async () => {
    const t = await startTestCloudly({ readCacheMs: 60_000, logLevel: 'silent' });
    try {
      const reader = t.cloudly.clusterManager.listReader;
      for (const name of ['page-a', 'page-b', 'page-c']) {
        await t.createCluster(name);
      }
      // The whole list: read into a snapshot.
      assert.equal((await t.admin.call('getClusters', {})).clusters.length, 3);
      const loadsBefore = reader.loads;
      const pageReadsBefore = reader.pageReads;

      const { cluster } = await t.createCluster('page-d');
      const firstPage = await t.admin.call('getClusters', { limit: 10 });
      assert.ok(firstPage.clusters.some((entry) => entry.id === cluster.id), 'the page has the write made before it');
      assert.equal(reader.pageReads, pageReadsBefore + 1, 'the page was read from the database directly');
      assert.equal(reader.loads, loadsBefore + 1, 'and it started one read of the collection');

      await reader.loaded(clusterKind);
      const hitsBefore = reader.hits;
      for (let index = 0; index < 5; index++) {
        const page = await t.admin.call('getClusters', { limit: 2 });
        assert.deepEqual(page.clusters.map((entry) => entry.id), firstPage.clusters.slice(0, 2).map((entry) => entry.id), 'the same first two as the database answered');
      }
      assert.equal(reader.hits, hitsBefore + 5, 'the next pages were answered from the snapshot');
      assert.equal(reader.pageReads, pageReadsBefore + 1, 'none of them read the database');
      assert.equal(reader.loads, loadsBefore + 1, 'nor the collection again');
    } finally {
      await t.stop();
    }
  });
});
