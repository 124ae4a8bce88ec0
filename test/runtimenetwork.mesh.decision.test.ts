import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  composeNextRuntimeNetworkProjection,
  deriveWorkloadMeshGrants,
  type IRuntimeNetworkMeshWorkload,
  type IRuntimeNetworkNodeFacts,
} from '../ts/manager.runtimenetwork/derive.js';
import { describeRuntimeNetworkProjectionApplication, type IRuntimeNetworkWorkloadLease } from '../ts/interfaces/data/runtimenetwork.js';

/** Full-mesh grants, one fact broken per row: who reaches whom, on which port, on which node's projection. */

const placed = (idArg: string, serviceIdArg: string, nodeIdArg: string, addressArg: string, generationArg = 1) => ({
  lease: { id: idArg, generation: generationArg }, serviceId: serviceIdArg, address: addressArg, nodeId: nodeIdArg,
});
const workload = (serviceIdArg: string, organizationArg: string, portsArg: Array<[number, 'tcp' | 'udp']> = []): IRuntimeNetworkMeshWorkload => ({
  serviceId: serviceIdArg, organizationId: organizationArg, ports: portsArg.map(([port, protocol]) => ({ port, protocol })),
});
const show = (grantsArg: ReturnType<typeof deriveWorkloadMeshGrants>): string[] =>
  grantsArg.map((grant) => `${grant.source.id}->${grant.destination.id} ${grant.protocol}/${grant.port}`);

const leases = [placed('a1', 'api', 'n1', '10.0.0.1'), placed('a2', 'api', 'n2', '10.0.0.2'), placed('d1', 'db', 'n2', '10.0.0.3'), placed('x1', 'other', 'n2', '10.0.0.4')];

for (const [label, nodeId, workloads, expected] of [
  ['one organization: each reaches the other on every port the destination declares, ordered', 'n1',
    [workload('api', 'org', [[8080, 'tcp']]), workload('db', 'org', [[5432, 'tcp'], [53, 'udp']])],
    ['a1->a2 tcp/8080', 'a1->d1 tcp/5432', 'a1->d1 udp/53', 'a2->a1 tcp/8080', 'd1->a1 tcp/8080']],
  ['another organization reaches nothing and is reached by nothing', 'n2',
    [workload('db', 'org', [[5432, 'tcp']]), workload('other', 'org-b', [[80, 'tcp']])],
    []],
  ['a destination that declares no port is reached by nobody', 'n1',
    [workload('api', 'org'), workload('db', 'org', [[5432, 'tcp']])],
    ['a1->d1 tcp/5432']],
  ['a grant between two leases both on other nodes is not this node\'s', 'n1',
    [workload('db', 'org', [[5432, 'tcp']]), workload('other', 'org', [[80, 'tcp']])],
    []],
  ['a lease of a service the mesh does not know (deleted) gets nothing', 'n2',
    [workload('db', 'org', [[5432, 'tcp']])],
    []],
  ['replicas of one service reach each other', 'n2',
    [workload('api', 'org', [[8080, 'tcp']])],
    ['a1->a2 tcp/8080', 'a2->a1 tcp/8080']],
  ['a service whose network policy keeps it out of the mesh\'s egress opens nothing, and is still reached', 'n1',
    [{ ...workload('api', 'org', [[8080, 'tcp']]), meshEgress: false }, workload('db', 'org', [[5432, 'tcp']])],
    ['d1->a1 tcp/8080']],
] as const) {
  test(`full-mesh grants: ${label}`, () => {
    assert.deepEqual(show(deriveWorkloadMeshGrants(nodeId, leases, workloads)), expected);
  });
}

const facts = (workloadsArg: IRuntimeNetworkMeshWorkload[], statementsArg: Array<{ nodeId: string; leases: IRuntimeNetworkWorkloadLease[] }>): IRuntimeNetworkNodeFacts => ({
  clusterId: 'c1', nodeId: 'n1', plan: null, hostAddresses: undefined,
  leasesByNode: statementsArg, ingressServiceId: null, routes: null, workloads: workloadsArg,
});
const statement = (nodeIdArg: string, ...leasesArg: ReturnType<typeof placed>[]) =>
  ({ nodeId: nodeIdArg, leases: leasesArg.map(({ nodeId: _nodeId, ...lease }) => lease) });

test('a projection carries the mesh grants, names their far ends as endpoints, and withdraws a grant it stops carrying until the node applied that', () => {
  const mesh = [workload('api', 'org', [[8080, 'tcp']]), workload('db', 'org', [[5432, 'tcp']])];
  const statements = [statement('n1', leases[0]), statement('n2', leases[2])];
  const first = composeNextRuntimeNetworkProjection(null, null, facts(mesh, statements));
  assert.equal(first.kind, 'next');
  if (first.kind !== 'next') return;
  assert.deepEqual(show(first.projection.grants), ['a1->d1 tcp/5432', 'd1->a1 tcp/8080']);
  assert.deepEqual(first.projection.endpoints.map((endpoint) => endpoint.lease.id), ['a1', 'd1']);
  assert.equal('withdrawals' in first.projection, false);

  // db leaves the organization: both grants go, each withdrawn at the next generation.
  const moved = [workload('api', 'org', [[8080, 'tcp']]), workload('db', 'org-2', [[5432, 'tcp']])];
  const second = composeNextRuntimeNetworkProjection(first.projection, null, facts(moved, statements));
  assert.equal(second.kind, 'next');
  if (second.kind !== 'next') return;
  assert.deepEqual(second.projection.grants, []);
  assert.deepEqual(show(second.projection.withdrawals ?? []), ['a1->d1 tcp/5432', 'd1->a1 tcp/8080']);
  assert.ok((second.projection.withdrawals ?? []).every((withdrawal) => withdrawal.generation === 2));
  assert.deepEqual(second.projection.endpoints.map((endpoint) => endpoint.lease.id), ['a1'], 'a far lease no grant names is no endpoint');

  // Nothing new, not applied yet: the withdrawals stay as they are.
  assert.equal(composeNextRuntimeNetworkProjection(second.projection, null, facts(moved, statements)).kind, 'unchanged');
  // Applied: the next projection carries them no longer.
  const third = composeNextRuntimeNetworkProjection(second.projection, describeRuntimeNetworkProjectionApplication(second.projection), facts(moved, statements));
  assert.equal(third.kind, 'next');
  assert.equal(third.kind === 'next' && 'withdrawals' in third.projection, false);
});

test('more full-mesh grants than a projection may carry block the projection with the reason', () => {
  const many = Array.from({ length: 70 }, (_, index) => placed(`l${String(index).padStart(3, '0')}`, 'api', 'n1', `10.0.1.${index + 1}`));
  const ports: Array<[number, 'tcp']> = [[1, 'tcp']];
  const step = composeNextRuntimeNetworkProjection(null, null, facts([workload('api', 'org', ports)], [statement('n1', ...many)]));
  assert.deepEqual(step, { kind: 'blocked', reasons: ['the node would carry 4830 full-mesh workload grants, more than 4096'] });
});
