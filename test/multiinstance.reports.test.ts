import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startSharedDatabase, startTestCloudly, waitFor } from './helpers/cloudly.js';
import { clusterDesiredStateKind } from '../ts/manager.desiredstate/documents.js';
import { reportingCluster } from './helpers/desiredstate.js';
import type { IReq_Relay_Cloudly_ReportClusterPlatformObservedState } from '../ts/interfaces/requests/desiredstate.js';
import { assertFieldProblems } from './helpers/refusals.js';

/**
 * An unchanged observed-state report is answered from what the instance holding the relay stored
 * last (docs/desired-state.md); a change committed on another instance reaches it with the
 * publication of the desired state (by the instance that reconciles), and the same report is
 * judged again.
 */

describe('an unchanged report and a change made on another instance', () => {
  test('a service deleted through B: once the deletion is published, the report A remembered is judged again and refused', async () => {
    const database = await startSharedDatabase();
    const a = await startTestCloudly({ ...database.shared });
    const b = await startTestCloudly({ ...database.shared });
    try {
      const { cluster, service, relay, revision } = await reportingCluster(a, 'across', ['n1']);
      const report: IReq_Relay_Cloudly_ReportClusterPlatformObservedState['request'] = {
        desiredRevision: revision,
        services: [{ serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'ready' }],
      };
      const fire = () => relay.fire('reportClusterPlatformObservedState', report);
      assert.deepEqual(await fire(), { accepted: 1, removed: [] });
      const memo = a.cloudly.desiredStateManager.observedMemo;
      const hits = memo.hits;
      assert.deepEqual(await fire(), { accepted: 1, removed: [] });
      assert.equal(memo.hits, hits + 1, 'the repeated report was answered from what A stored');

      await b.admin.call('deleteService', { serviceId: service.id, expectedGeneration: service.generation, force: true });
      // The instance that reconciles publishes the deletion (its change feed reads B's commit from the shared log).
      await waitFor(async () => ((await a.cloudly.store.get(clusterDesiredStateKind, cluster.id))?.revision ?? 0) > revision, 'the deletion is published', 10_000);
      const refusal = await refusalOf(fire);
      assert.equal(refusal.code, 'invalid-request');
      assertFieldProblems(refusal, [['request.services[0].serviceId', 'field-not-found', 'names no service of this cluster']]);
      assert.equal(memo.hits, hits + 1, 'the report after the change was not answered from memory');
    } finally {
      await a.stop();
      await b.stop();
      await database.stop();
    }
  });
});
