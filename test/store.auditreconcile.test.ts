import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly } from './helpers/cloudly.js';
import { auditEventKind } from '../ts/core/store.js';

/**
 * The start-up audit reconcile (ts/core/store.ts, `reconcileAudit`) asks for the events of every
 * stamped document in batches by their object ids: it must find each recorded event (appending
 * nothing when none is missing) and append exactly the missing ones.
 */

describe('audit reconcile at start-up', () => {
  test('with 30 clusters it finds every recorded event and appends exactly the one missing', async () => {
    const t = await startTestCloudly({ logLevel: 'silent' });
    try {
      const clusters = [];
      for (let index = 0; index < 30; index++) {
        clusters.push((await t.createCluster(`reconciled-${index}`)).cluster);
      }
      assert.deepEqual(await t.cloudly.store.reconcileAudit(), { appended: 0, removalsFinished: 0 }, 'nothing missing, nothing appended');
      const raw = t.cloudly.database.mongoDb.collection(auditEventKind.collectionName);
      assert.equal((await raw.deleteMany({ 'target.id': clusters[7].id })).deletedCount, 1);
      assert.deepEqual(await t.cloudly.store.reconcileAudit(), { appended: 1, removalsFinished: 0 }, 'the one missing event appended');
      assert.equal(await raw.countDocuments({ 'target.id': clusters[7].id }), 1);
      assert.deepEqual(await t.cloudly.store.reconcileAudit(), { appended: 0, removalsFinished: 0 }, 'and not again');
    } finally {
      await t.stop();
    }
  });
});
