import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { IClusterNode } from '../ts/interfaces/data/clusternode.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { TUntypedContract } from '../ts/client/admin.js';
import { assertFieldProblems, problemsOf } from './helpers/refusals.js';

describe('cluster nodes and their Corestore endpoints', () => {
  let t: ITestCloudly;
  let clusterId: string;
  let relayToken: string;
  before(async () => {
    t = await startTestCloudly();
    ({ cluster: { id: clusterId }, relayToken } = await t.createCluster('nodes'));
  });
  after(async () => { await t.stop(); });

  const addNode = (nameArg: string, nodeIdArg?: string) =>
    t.caller.call('addClusterNode', { clusterId, name: nameArg, ...(nodeIdArg ? { nodeId: nodeIdArg } : {}) });
  const listNodes = async (clusterIdArg = clusterId) =>
    (await t.caller.call('getClusterNodes', { clusterId: clusterIdArg })).nodes;
  const setCorestore = (nodeIdArg: string, expectedArg: { endpoint: string } | null, corestoreArg: unknown) =>
    t.admin.fire('setClusterNodeCorestore', {
      identity: t.identity,
      clusterId,
      nodeId: nodeIdArg,
      expected: expectedArg,
      corestore: corestoreArg as { endpoint: string } | null,
    });
  const electedRelay = async (tokenArg: string): Promise<CloudlyRelayClient> => {
    const relay = await t.connectRelay(tokenArg);
    await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).some((session) => t.cloudly.clusterManager.isElected(session)), 'relay elected');
    return relay;
  };

  test('an administrator adds, lists and removes nodes', async () => {
    const { node } = await addNode('worker one', 'worker-1');
    assert.equal(node.id, 'worker-1');
    assert.equal(node.clusterId, clusterId);
    assert.equal(node.source, 'admin');
    assert.equal(node.generation, 1);
    assert.equal('corestore' in node, false, 'no corestore is defaulted');
    assert.equal('hostAddresses' in node, false, 'no hostAddresses are defaulted');
    const generated = (await addNode('worker two')).node;
    assert.match(generated.id, /^node-/);
    assert.deepEqual((await listNodes()).map((n) => n.id).sort(), ['worker-1', generated.id].sort());

    const duplicate = await refusalOf(() => addNode('again', 'worker-1'));
    assert.equal(duplicate.code, 'conflict');

    const removed = await t.caller.call('removeClusterNode', { clusterId, nodeId: generated.id });
    assert.equal(removed.node.id, generated.id);
    assert.deepEqual((await listNodes()).map((n) => n.id), ['worker-1']);
    const gone = await refusalOf(() => t.caller.call('removeClusterNode', { clusterId, nodeId: generated.id }));
    assert.equal(gone.code, 'not-found');
  });

  test('bad node requests are refused with every reason, and unknown clusters are not-found', async () => {
    const bad = await refusalOf(() => t.admin.fire<TUntypedContract>('addClusterNode', { identity: t.identity, clusterId: '', name: ' x', nodeId: 'a/b', extra: 1 }));
    assert.equal(bad.code, 'invalid-request');
    assertFieldProblems(bad, [
      ['request.clusterId', 'field-invalid', 'must be a string of 1 to 128 characters'],
      ['request.name', 'field-invalid'],
      ['request.nodeId', 'field-invalid'],
      ['request.extra', 'field-unknown', 'is not a field of this request'],
    ]);
    const unknown = await refusalOf(() => listNodes('no-such-cluster'));
    assert.equal(unknown.code, 'not-found');
    const unauthenticated = await refusalOf(() => t.admin.fire<TUntypedContract>('getClusterNodes', { clusterId }));
    assert.equal(unauthenticated.code, 'unauthenticated');
  });

  test('the Corestore endpoint: every rule is refused through the admin API and nothing changes', async () => {
    await addNode('endpoint table', 'table-node');
    const table: Array<[unknown, number]> = [
      [{ endpoint: 'http://10.0.0.1:3000/' }, 1],
      [{ endpoint: 'ftp://u:p@10.0.0.1/x' }, 3],
      [{ endpoint: '' }, 1],
      [{ endpoint: 'nope' }, 1],
      [{ endpoint: 'http://10.0.0.1', token: 'secret' }, 1],
      ['http://10.0.0.1', 1],
      [{ endpoint: 'https://x.example:443' }, 1],
    ];
    for (const [corestore, count] of table) {
      const data = await refusalOf(() => setCorestore('table-node', null, corestore));
      assert.equal(data.code, 'invalid-request', JSON.stringify(corestore));
      const problems = problemsOf(data);
      assert.equal(problems.length, count, JSON.stringify(data));
      assert.ok(problems.every(([path, reason]) => path?.startsWith('request.corestore') && reason?.startsWith('field-')), JSON.stringify(data));
    }
    // A bad `expected` and a bad `corestore` are named together.
    const both = await refusalOf(() => setCorestore('table-node', { endpoint: 'http://a/' }, { endpoint: 'http://b/' }));
    assert.deepEqual(problemsOf(both).map(([path, reason, message]) => [path, reason, message.split(' ')[0]]),
      [['request.expected', 'field-invalid', 'endpoint'], ['request.corestore', 'field-invalid', 'endpoint']]);
    const node = (await listNodes()).find((n) => n.id === 'table-node')!;
    assert.equal(node.generation, 1);
    assert.equal(node.corestore, undefined);
  });

  test('set, replace and clear the endpoint with compare-and-swap on the value read', async () => {
    await addNode('cas node', 'cas-node');
    const set = await setCorestore('cas-node', null, { endpoint: 'http://10.20.0.15:3000' });
    assert.deepEqual(set.node.corestore, { endpoint: 'http://10.20.0.15:3000' });

    const stale = await refusalOf(() => setCorestore('cas-node', null, { endpoint: 'http://10.20.0.16:3000' }));
    assert.equal(stale.code, 'conflict');
    const wrongValue = await refusalOf(() => setCorestore('cas-node', { endpoint: 'http://10.9.9.9:3000' }, null));
    assert.equal(wrongValue.code, 'conflict');
    assert.deepEqual((await listNodes()).find((n) => n.id === 'cas-node')!.corestore, { endpoint: 'http://10.20.0.15:3000' });

    const replaced = await setCorestore('cas-node', { endpoint: 'http://10.20.0.15:3000' }, { endpoint: 'https://corestore.node.example' });
    assert.deepEqual(replaced.node.corestore, { endpoint: 'https://corestore.node.example' });
    const cleared = await setCorestore('cas-node', { endpoint: 'https://corestore.node.example' }, null);
    assert.equal(cleared.node.corestore, undefined);
    assert.equal('corestore' in cleared.node, false);
    assert.equal(cleared.node.generation, set.node.generation + 2);

    const missing = await refusalOf(() => setCorestore('no-such-node', null, null));
    assert.equal(missing.code, 'not-found');
  });

  test('50 concurrent compare-and-swaps on one endpoint: exactly one wins, the rest conflict', async () => {
    await addNode('race node', 'race-node');
    const attempts = Array.from({ length: 50 }, (_, index) =>
      setCorestore('race-node', null, { endpoint: `http://10.30.0.${index + 1}:3000` }).then(
        (answer) => ({ won: true as const, node: answer.node }),
        (error: { errorData?: { code?: string } }) => ({ won: false as const, code: error.errorData?.code }),
      ));
    const outcomes = await Promise.all(attempts);
    const winners = outcomes.filter((outcome) => outcome.won);
    assert.equal(winners.length, 1);
    assert.ok(outcomes.every((outcome) => outcome.won || outcome.code === 'conflict'));
    const stored = (await listNodes()).find((n) => n.id === 'race-node')!;
    assert.deepEqual(stored.corestore, (winners[0] as { node: IClusterNode }).node.corestore);
    assert.equal(stored.generation, 2);
  });

  test('a report that moved the node\'s generation does not make a compare-and-swap on the endpoint lose', async () => {
    await addNode('reported node', 'reported-node');
    const relay = await electedRelay(relayToken);
    const reported = await relay.fire('reportClusterNode', {
      report: { nodeId: 'reported-node', hostAddresses: ['10.60.0.1'] },
    });
    assert.equal(reported.node.generation, 2, 'the report changed the node');
    const set = await setCorestore('reported-node', null, { endpoint: 'http://10.60.0.1:3000' });
    assert.deepEqual(set.node.corestore, { endpoint: 'http://10.60.0.1:3000' });
    assert.deepEqual(set.node.hostAddresses, ['10.60.0.1'], 'the report is kept');
    assert.equal(set.node.generation, 3);
    relay.close();
    await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).length === 0, 'relay closed');
  });

  test('the relay reads its own nodes\' endpoints; absent reads as null, never a guess', async () => {
    await addNode('reader a', 'reader-a');
    await addNode('reader b', 'reader-b');
    await setCorestore('reader-a', null, { endpoint: 'http://10.40.0.1:3000' });
    const relay = await electedRelay(relayToken);
    const all = await relay.fire('getClusterNodeCorestores', {});
    const byId = new Map(all.nodes.map((node) => [node.nodeId, node.corestore]));
    assert.deepEqual(byId.get('reader-a'), { endpoint: 'http://10.40.0.1:3000' });
    assert.equal(byId.get('reader-b'), null);
    const named = await relay.fire('getClusterNodeCorestores', { nodeIds: ['reader-b', 'reader-a'] });
    assert.deepEqual(named.nodes.map((node) => node.nodeId), ['reader-b', 'reader-a']);
    const bad = await refusalOf(() => relay.fire('getClusterNodeCorestores', { nodeIds: ['ok', '../x'] }));
    assert.equal(bad.code, 'invalid-request');
    relay.close();
  });

  test('admin handlers are not served on a relay socket and relay handlers not over HTTP', async () => {
    const relay = await t.connectRelay(relayToken);
    const onRelay = await refusalOf(() => relay.fire<TUntypedContract>('getClusterNodes', { clusterId }));
    assert.equal(onRelay.code, 'unauthenticated');
    const overHttp = await refusalOf(() => t.admin.fire('reportClusterNode', { report: { nodeId: 'x', name: 'x' } }));
    assert.equal(overHttp.code, 'forbidden');
    relay.close();
  });
});
