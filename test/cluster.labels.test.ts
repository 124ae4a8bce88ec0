import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';

describe('cluster labels and selectors', () => {
  let t: ITestCloudly;
  const ids: Record<string, string> = {};
  before(async () => {
    t = await startTestCloudly();
    const labelsOf: Record<string, Record<string, string>> = {
      'prod-eu': { env: 'prod', 'example.com/region': 'eu' },
      'prod-us': { env: 'prod', 'example.com/region': 'us', gpu: 'true' },
      staging: { env: 'staging' },
      bare: {},
    };
    for (const [name, labels] of Object.entries(labelsOf)) {
      const { cluster } = await t.createCluster(`labels-${name}`);
      ids[name] = cluster.id;
      if (Object.keys(labels).length > 0) {
        const answer = await t.caller.call('setClusterLabels', { clusterId: cluster.id, labels, expectedGeneration: cluster.generation });
        assert.deepEqual(answer.cluster.labels, labels);
        assert.equal(answer.cluster.generation, cluster.generation + 1);
      }
    }
  });
  after(async () => { await t.stop(); });

  const namesSelected = async (selectorArg: string) =>
    (await t.caller.call('getClusters', { selector: selectorArg })).clusters.map((c) => c.name.replace('labels-', '')).sort();

  test('getClusters and getFleetOverview answer only the clusters a selector selects', async () => {
    assert.deepEqual(await namesSelected('env=prod'), ['prod-eu', 'prod-us']);
    assert.deepEqual(await namesSelected('env!=prod'), ['bare', 'staging']);
    assert.deepEqual(await namesSelected('example.com/region in (eu,ap)'), ['prod-eu']);
    assert.deepEqual(await namesSelected('example.com/region notin (eu)'), ['bare', 'prod-us', 'staging']);
    assert.deepEqual(await namesSelected('gpu'), ['prod-us']);
    assert.deepEqual(await namesSelected('env,!gpu'), ['prod-eu', 'staging']);
    assert.deepEqual(await namesSelected('env=nowhere'), []);
    const page = await t.caller.call('getClusters', { selector: 'env=prod', limit: 1 });
    assert.equal(page.clusters.length, 1);
    const rest = await t.caller.call('getClusters', { selector: 'env=prod', limit: 1, cursor: page.nextCursor! });
    assert.deepEqual([page.clusters[0].name, rest.clusters[0].name].sort(), ['labels-prod-eu', 'labels-prod-us']);
    const fleet = await t.caller.call('getFleetOverview', { selector: 'env=prod,example.com/region=us' });
    assert.deepEqual(fleet.clusters.map((summary) => summary.cluster.id), [ids['prod-us']]);
  });

  test('a bad selector is refused with every reason; bad labels and a stale generation change nothing', async () => {
    const bad = await refusalOf(() => t.caller.call('getClusters', { selector: 'env=,in (x),-x' }));
    assert.equal(bad.code, 'invalid-request');
    const causes = bad.causes as Array<{ path: string }>;
    assert.deepEqual(causes.map((cause) => cause.path), ['request.selector[1]', 'request.selector[2]']);
    const fleetBad = await refusalOf(() => t.caller.call('getFleetOverview', { selector: '!' }));
    assert.equal(fleetBad.code, 'invalid-request');

    const { cluster } = await t.caller.call('getClusterById', { clusterId: ids.staging });
    const badLabels = await refusalOf(() => t.caller.call('setClusterLabels', {
      clusterId: cluster.id, labels: { ['n'.repeat(64)]: 'x', ok: 'a b' } as Record<string, string>, expectedGeneration: cluster.generation,
    }));
    assert.equal(badLabels.code, 'invalid-request');
    assert.equal((badLabels.causes as unknown[]).length, 2);
    const stale = await refusalOf(() => t.caller.call('setClusterLabels', { clusterId: cluster.id, labels: {}, expectedGeneration: cluster.generation - 1 }));
    assert.equal(stale.code, 'conflict');
    assert.deepEqual(stale.reasons, ['generation-mismatch']);
    const missing = await refusalOf(() => t.caller.call('setClusterLabels', { clusterId: 'cluster-none', labels: {}, expectedGeneration: 1 }));
    assert.equal(missing.code, 'not-found');
    assert.deepEqual((await t.caller.call('getClusterById', { clusterId: cluster.id })).cluster, cluster);

    const cleared = await t.caller.call('setClusterLabels', { clusterId: cluster.id, labels: {}, expectedGeneration: cluster.generation });
    assert.equal(cleared.cluster.labels, undefined);
    assert.deepEqual(await namesSelected('env=staging'), []);
  });
});
