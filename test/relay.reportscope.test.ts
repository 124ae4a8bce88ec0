import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import { runtimeNodeSessionKind } from '../ts/manager.service/service.manager.js';
import { nodeRuntimeAssignmentsKind } from '../ts/manager.ingress/documents.js';

/**
 * A relay's node reports are confined to its own cluster's nodes: naming another cluster's node,
 * or a node that exists nowhere, is refused `not-found` over the real relay socket, with nothing
 * stored and nothing audited. A report of its own node is stored (the control).
 */

describe('a relay reports only its own cluster\'s nodes', () => {
  let t: ITestCloudly;
  let clusterA: string;
  let clusterB: string;
  let relayA: CloudlyRelayClient;
  before(async () => {
    t = await startTestCloudly();
    const a = await t.createCluster('reports-a');
    const b = await t.createCluster('reports-b');
    clusterA = a.cluster.id;
    clusterB = b.cluster.id;
    await t.addNodes(clusterA, 'na1');
    await t.addNodes(clusterB, 'nb1');
    relayA = await t.connectRelay(a.relayToken);
  });
  after(async () => { await t.stop(); });

  const auditedReports = async (methodArg: string): Promise<number> =>
    (await t.caller.call('getAuditEvents', { filter: { method: methodArg }, limit: 1000 })).events.length;

  const storedUnder = async (nodeIdArg: string): Promise<unknown[]> => [
    ...(await t.cloudly.store.find(runtimeNodeSessionKind, { nodeId: nodeIdArg })),
    ...(await t.cloudly.store.find(nodeRuntimeAssignmentsKind, { nodeId: nodeIdArg })),
  ];

  for (const nodeId of ['nb1', 'ghost-node']) {
    test(`reportRuntimeNodeSession naming ${nodeId} is refused not-found; nothing stored, nothing audited`, async () => {
      const auditedBefore = await auditedReports('reportRuntimeNodeSession');
      const refusal = await refusalOf(() => relayA.fire('reportRuntimeNodeSession', { nodeId, session: { id: `${nodeId}-session`, generation: 1 } }));
      assert.equal(refusal.code, 'not-found');
      assert.deepEqual(refusal.reasons, ['node-not-found']);
      assert.deepEqual(refusal.causes, [{ path: 'request.nodeId', message: 'names no node of this relay\'s cluster' }]);
      assert.deepEqual(await storedUnder(nodeId), []);
      assert.equal(await auditedReports('reportRuntimeNodeSession'), auditedBefore);
    });

    test(`reportClusterNodeRuntimeAssignments naming ${nodeId} is refused not-found; nothing stored, nothing audited`, async () => {
      const auditedBefore = await auditedReports('reportClusterNodeRuntimeAssignments');
      const refusal = await refusalOf(() => relayA.fire('reportClusterNodeRuntimeAssignments', { nodeId, sessionId: `${nodeId}-session`, assignments: [] }));
      assert.equal(refusal.code, 'not-found');
      assert.deepEqual(refusal.reasons, ['node-not-found']);
      assert.deepEqual(refusal.causes, [{ path: 'request.nodeId', message: 'names no node of this relay\'s cluster' }]);
      assert.deepEqual(await storedUnder(nodeId), []);
      assert.equal(await auditedReports('reportClusterNodeRuntimeAssignments'), auditedBefore);
    });
  }

  test('reports of the relay\'s own node are stored under its cluster, and audited', async () => {
    const sessionsAudited = await auditedReports('reportRuntimeNodeSession');
    const assignmentsAudited = await auditedReports('reportClusterNodeRuntimeAssignments');
    assert.deepEqual(await relayA.fire('reportRuntimeNodeSession', { nodeId: 'na1', session: { id: 'na1-session', generation: 1 } }), { accepted: true, pushedClaims: 0 });
    await relayA.fire('reportClusterNodeRuntimeAssignments', { nodeId: 'na1', sessionId: 'na1-session', assignments: [] });
    const stored = (await storedUnder('na1')) as Array<{ clusterId: string }>;
    assert.equal(stored.length, 2);
    assert.ok(stored.every((docArg) => docArg.clusterId === clusterA));
    // The audit check of the refusals above can fail: an accepted report is audited.
    assert.equal(await auditedReports('reportRuntimeNodeSession'), sessionsAudited + 1);
    assert.equal(await auditedReports('reportClusterNodeRuntimeAssignments'), assignmentsAudited + 1);
    assert.notEqual(clusterA, clusterB);
  });
});
