import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { deriveServiceRuntimeAssignmentViews, type IServiceAssignmentFacts } from '../ts/manager.service/assignmentviews.js';

/** The pure derivation of the assignment views (docs/api/services.md, "Assignment views"). */

describe('deriveServiceRuntimeAssignmentViews', () => {
  const facts = (overrides: Partial<IServiceAssignmentFacts> = {}): IServiceAssignmentFacts => ({
    service: { id: 'svc', specRevision: 3, replicas: 2, placementNodeIds: [], leaving: false },
    clusterNodeIds: ['n1', 'n2'],
    leases: [],
    confirmedLeaseIds: new Set(),
    sessions: [],
    placements: [],
    nodeAssignments: [],
    claims: [],
    unknown: null,
    ...overrides,
  });

  test('a slot follows its lease\'s node, and a slot without one takes the placement rule\'s node', () => {
    const views = deriveServiceRuntimeAssignmentViews(facts({
      leases: [{ lease: { id: 'l0', generation: 1 }, nodeId: 'n2', replica: 0, address: '10.0.0.5' }],
    }));
    assert.deepEqual(views.map((view) => [view.replica, view.nodeId, view.lease?.id ?? null]), [[0, 'n2', 'l0'], [1, 'n1', null]]);
  });

  test('two leases of one replica show the lower address, the one the allocator keeps', () => {
    const views = deriveServiceRuntimeAssignmentViews(facts({
      service: { id: 'svc', specRevision: 1, replicas: 1, placementNodeIds: [], leaving: false },
      leases: [
        { lease: { id: 'high', generation: 1 }, nodeId: 'n1', replica: 0, address: '10.0.0.10' },
        { lease: { id: 'low', generation: 1 }, nodeId: 'n1', replica: 0, address: '10.0.0.9' },
      ],
    }));
    assert.equal(views[0].lease?.id, 'low');
  });

  test('conditions, in their order', () => {
    const placement = (state: 'starting' | 'ready' | 'failed' | 'stopped', specRevision = 3, replicas = 1) =>
      ({ nodeId: 'n1', specRevision, replicas, state, reportedAt: 1 });
    const only = (overrides: Partial<IServiceAssignmentFacts>) => deriveServiceRuntimeAssignmentViews(facts({
      service: { id: 'svc', specRevision: 3, replicas: 1, placementNodeIds: ['n1'], leaving: false },
      ...overrides,
    }))[0]?.condition;
    const cases: Array<[string, Partial<IServiceAssignmentFacts>, string | undefined]> = [
      ['no eligible node', { clusterNodeIds: [] }, 'unassigned'],
      ['dark even though reported ready', { placements: [placement('ready')], unknown: { state: 'unknown', reason: 'observed-state-stale', since: 5 } }, 'stale'],
      ['no report', {}, 'awaiting-report'],
      ['a report counting no replica', { placements: [placement('ready', 3, 0)] }, 'awaiting-report'],
      ['an older revision', { placements: [placement('ready', 2)] }, 'outdated'],
      ['starting', { placements: [placement('starting')] }, 'starting'],
      ['ready', { placements: [placement('ready')] }, 'running'],
      ['failed', { placements: [placement('failed')] }, 'failed'],
      ['stopped', { placements: [placement('stopped')] }, 'stopped'],
    ];
    for (const [name, overrides, condition] of cases) {
      assert.equal(only(overrides), condition, name);
    }
  });

  test('a slot shows the service\'s claims on its node only, each at its current generation', () => {
    const claim = (idArg: string, nodeIdArg: string) => ({
      nodeId: nodeIdArg,
      mountPath: '/data',
      current: {
        claim: { id: idArg, generation: 2, lifecycle: 'bound' },
        delivery: 'answered', nodeState: 'ready', answerStatus: 'accepted', lastDeliveryError: null, issuedAt: 1, answeredAt: 2,
      },
    }) as unknown as IServiceAssignmentFacts['claims'][number];
    const views = deriveServiceRuntimeAssignmentViews(facts({ claims: [claim('c1', 'n1'), claim('c2', 'n2')] }));
    assert.deepEqual(views.map((view) => [view.nodeId, view.claims]), [
      ['n1', [{ id: 'c1', generation: 2, mountPath: '/data', lifecycle: 'bound', nodeState: 'ready' }]],
      ['n2', [{ id: 'c2', generation: 2, mountPath: '/data', lifecycle: 'bound', nodeState: 'ready' }]],
    ]);
  });

  test('a leaving service has no slots', () => {
    assert.deepEqual(deriveServiceRuntimeAssignmentViews(facts({ service: { id: 'svc', specRevision: 1, replicas: 2, placementNodeIds: [], leaving: true } })), []);
  });
});
