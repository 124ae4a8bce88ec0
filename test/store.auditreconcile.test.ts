import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, waitFor } from './helpers/cloudly.js';
import { auditEventKind } from '../ts/core/store.js';

/**
 * The start-up audit reconcile (ts/core/store.ts, `reconcileAudit`) asks which events of the
 * stamped documents exist, by one read of the ids of every event since the oldest stamp or, when
 * the log holds many times more events than stamps since then, by id in chunks: either way it must
 * find each recorded event (appending nothing when none is missing) and append exactly the missing
 * ones.
 */

describe('audit reconcile at start-up', () => {
  test('with 30 clusters it finds every recorded event and appends exactly the one missing', async () => {
    const t = await startTestCloudly({ logLevel: 'silent' });
    try {
      const clusters = [];
      for (let index = 0; index < 30; index++) {
        clusters.push((await t.createCluster(`reconciled-${index}`)).cluster);
      }
      // What the controllers derive for the new clusters is written (and audited) first.
      await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the controllers have nothing owed');
      assert.deepEqual(await t.cloudly.store.reconcileAudit(), { appended: 0, removalsFinished: 0 }, 'nothing missing, nothing appended');
      assert.equal(t.cloudly.store.lastAuditLookup.how, 'one-read', 'a log of about as many events as stamps is read in one query');
      const raw = t.cloudly.database.mongoDb.collection(auditEventKind.collectionName);
      assert.equal((await raw.deleteMany({ 'target.kind': 'CloudlyCluster', 'target.id': clusters[7].id })).deletedCount, 1);
      assert.deepEqual(await t.cloudly.store.reconcileAudit(), { appended: 1, removalsFinished: 0 }, 'the one missing event appended');
      assert.equal(await raw.countDocuments({ 'target.kind': 'CloudlyCluster', 'target.id': clusters[7].id }), 1);
      assert.deepEqual(await t.cloudly.store.reconcileAudit(), { appended: 0, removalsFinished: 0 }, 'and not again');
    } finally {
      await t.stop();
    }
  });

  test('with a long history of events since the oldest stamp it asks by id, and still appends exactly the one missing', async () => {
    const t = await startTestCloudly({ logLevel: 'silent' });
    try {
      const clusters = [];
      for (let index = 0; index < 10; index++) {
        clusters.push((await t.createCluster(`history-${index}`)).cluster);
      }
      await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the controllers have nothing owed');
      const raw = t.cloudly.database.mongoDb.collection(auditEventKind.collectionName);
      // Events of documents long gone, appended after every stamp: a log that has grown past the
      // stamps many times over.
      const at = Date.now();
      await raw.insertMany(Array.from({ length: 2_000 }, (_, index) => ({
        id: `CloudlyGone:gone-${index}:none:1`, at, actor: { kind: 'cloudly' }, method: 'history', target: { kind: 'CloudlyGone', id: `gone-${index}` },
        outcome: 'created', generationBefore: 0, generationAfter: 1, generation: 1,
      })));
      assert.equal((await raw.deleteMany({ 'target.kind': 'CloudlyCluster', 'target.id': clusters[3].id })).deletedCount, 1);
      assert.deepEqual(await t.cloudly.store.reconcileAudit(), { appended: 1, removalsFinished: 0 }, 'the one missing event appended');
      assert.equal(t.cloudly.store.lastAuditLookup.how, 'by-id', 'asked by id, not by reading the whole history');
      assert.equal(await raw.countDocuments({ 'target.kind': 'CloudlyCluster', 'target.id': clusters[3].id }), 1);
      assert.deepEqual(await t.cloudly.store.reconcileAudit(), { appended: 0, removalsFinished: 0 }, 'and not again');
    } finally {
      await t.stop();
    }
  });
});
