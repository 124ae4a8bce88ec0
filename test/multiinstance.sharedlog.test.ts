import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { startTestCloudly, waitFor } from './helpers/cloudly.js';
import { startDevDatabase } from './helpers/multiinstance.js';

/**
 * The reconciling instance learns of changes made through another from the shared audit log. It
 * reads the owners of the changed documents together, one query per kind for each read of the
 * log, not one per change: in a storm every relay registration is such a change.
 */

const clusterCount = 40;

test('the shared-log reader reads the owners of many changes together and still judges each', async () => {
  const databaseDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-mi-sharedlog-'));
  const database = await startDevDatabase(databaseDir);
  const shared = { mongoDbUrl: database.mongoDbUrl, secretsKeyFile: database.secretsKeyFile };
  // A starts first and reconciles; it reads the shared log every 2 s, so the changes below reach it in a few reads.
  const a = await startTestCloudly({ ...shared, sharedPollMs: 2_000 });
  const b = await startTestCloudly(shared);
  try {
    await waitFor(() => a.cloudly.reconciler.isLeader, 'A reconciles');
    assert.equal(b.cloudly.reconciler.isLeader, false, 'B does not');
    const reconciledClusters = async (): Promise<number> => {
      const text = (await a.cloudly.metrics.registry.getSingleMetricAsString('cloudly_reconciles_total'));
      return [...text.matchAll(/^cloudly_reconciles_total\{scope="cluster",outcome="[^"]+"\} (\d+)$/gm)].reduce((sum, match) => sum + Number(match[1]), 0);
    };
    const clustersBefore = await reconciledClusters();
    const queriesBefore = a.cloudly.reconciler.sharedOwnerQueries;
    const eventsBefore = a.cloudly.reconciler.sharedInputEvents;

    await Promise.all(Array.from({ length: clusterCount }, (_, index) => b.admin.call('createCluster', { name: `shared-log-${index}` })));
    // Every cluster created through B is judged by A (a cluster run each), from the shared log alone.
    await waitFor(async () => (await reconciledClusters()) - clustersBefore >= clusterCount, `A ran the ${clusterCount} clusters' reconciles`, 30_000);

    const events = a.cloudly.reconciler.sharedInputEvents - eventsBefore;
    const queries = a.cloudly.reconciler.sharedOwnerQueries - queriesBefore;
    console.log(`${events} input changes read from the shared log, their owners in ${queries} queries`);
    assert.ok(events >= clusterCount, `every created cluster is an input change A read (${events})`);
    // One query per change would be `events`; together, a few reads of the log cost a few queries each.
    assert.ok(queries * 4 <= events, `owners read together: ${queries} queries for ${events} changes`);
  } finally {
    await b.stop();
    await a.stop();
    await database.stop();
    await fsp.rm(databaseDir, { recursive: true, force: true });
  }
});
