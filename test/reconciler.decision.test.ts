import { test } from 'node:test';
import assert from 'node:assert/strict';
import { verdictInputs } from '../ts/manager.service/verdict.controller.js';
import { ProjectionsController } from '../ts/manager.runtimenetwork/projections.controller.js';
import { ownedByClusterOfId, ownedByClusterOfNodeId, type ICommittedOwners } from '../ts/core/store.js';
import { decideReconcilerLease } from '../ts/manager.reconciler/leadership.js';

/**
 * The reconciler's pure decisions: which keys an input change queues in a controller (from the
 * owners the change carries, as its kind declares them), and who holds the lease.
 */

type TInputs = Readonly<Record<string, (changeArg: { kind: string; id: string; owners: ICommittedOwners; here: boolean; at: number }) => readonly string[]>>;
const keysOf = (inputsArg: TInputs, kindArg: string, idArg: string, ownersArg: ICommittedOwners = {}): readonly string[] =>
  inputsArg[kindArg]?.({ kind: kindArg, id: idArg, owners: ownersArg, here: true, at: 0 }) ?? [];
const projectionInputs = new ProjectionsController({ store: null as never, refreshNode: async () => undefined, logger: { warn: () => undefined } }).inputs;

test('the verdict\'s inputs: each names the keys it affects, and the verdict itself triggers nothing', () => {
  assert.deepEqual(keysOf(verdictInputs, 'CloudlyService', 'svc-1', { serviceId: 'svc-1', clusterId: 'c1' }), ['service:svc-1']);
  // The route table is derived (written by the desired-state controller), not an input.
  assert.deepEqual(keysOf(verdictInputs, 'CloudlyClusterIngressRouteTable', 'c1'), []);
  // A relay registration states the runtime's capabilities (every verdict of the cluster).
  assert.deepEqual(keysOf(verdictInputs, 'CloudlyClusterRelayRegistration', 'c1', ownedByClusterOfId('c1')), ['cluster:c1']);
  assert.deepEqual(keysOf(verdictInputs, 'CloudlyPlatformBinding', 'pb-1', { serviceId: 'svc-1' }), ['service:svc-1']);
  assert.deepEqual(keysOf(verdictInputs, 'CloudlyPlatformBinding', 'pb-1', {}), [], 'an owner it cannot name is left to the resync');
  assert.deepEqual(keysOf(verdictInputs, 'CloudlyClusterNode', 'c1/n1', ownedByClusterOfNodeId('c1/n1', null)), ['cluster:c1']);
  assert.deepEqual(keysOf(verdictInputs, 'CloudlyClusterLiveness', 'c1', ownedByClusterOfId('c1')), ['cluster:c1']);
  assert.deepEqual(keysOf(verdictInputs, 'CloudlyRuntimeNetworkAddressPlan', 'plan'), ['all']);
  assert.deepEqual(keysOf(verdictInputs, 'CloudlyServiceRuntimeStatus', 'svc-1'), []);
  assert.deepEqual(keysOf(verdictInputs, 'CloudlyAdminUser', 'u1'), []);
  // The node projections have their own controller.
  assert.deepEqual(keysOf(projectionInputs, 'CloudlyService', 'svc-1', { serviceId: 'svc-1', clusterId: 'c1' }), ['c1']);
  assert.deepEqual(keysOf(projectionInputs, 'CloudlyRuntimeNetworkAddressPlan', 'plan'), ['all']);
});

test('a write that left the derived inputs behind its generation triggers nothing; one that moved them, or says nothing, does', () => {
  const registration = (ownersArg: ICommittedOwners) => [
    ...keysOf(verdictInputs, 'CloudlyClusterRelayRegistration', 'c1', ownersArg),
    ...keysOf(projectionInputs, 'CloudlyClusterRelayRegistration', 'c1', ownersArg),
  ];
  // A relay registering again with the same announcement on a new socket (a reconnect).
  assert.deepEqual(registration({ clusterId: 'c1', generation: 5, inputsGeneration: 4 }), []);
  // The announcement changed at this write (or at a later one, read back by another instance).
  assert.deepEqual(registration({ clusterId: 'c1', generation: 5, inputsGeneration: 5 }), ['cluster:c1', 'c1']);
  assert.deepEqual(registration({ clusterId: 'c1', generation: 5, inputsGeneration: 7 }), ['cluster:c1', 'c1']);
  // No inputsGeneration (a document stored before it, a removal), or no generation: a change.
  assert.deepEqual(registration({ clusterId: 'c1', generation: 5 }), ['cluster:c1', 'c1']);
  assert.deepEqual(registration({ clusterId: 'c1', inputsGeneration: 4 }), ['cluster:c1', 'c1']);
});

test('the reconciler lease: free or expired is taken, our own is renewed, another live holder keeps it', () => {
  assert.equal(decideReconcilerLease(null, 'a', 1_000, 500).kind, 'create');
  const held = { id: 'reconciler', generation: 3, holder: 'b', expiresAt: 2_000 };
  assert.equal(decideReconcilerLease(held, 'a', 1_999, 500).kind, 'keep');
  assert.deepEqual(decideReconcilerLease(held, 'a', 2_000, 500), { kind: 'write', change: { set: { holder: 'a', expiresAt: 2_500 } } });
  assert.deepEqual(decideReconcilerLease(held, 'b', 1_500, 500), { kind: 'write', change: { set: { holder: 'b', expiresAt: 2_000 } } });
});
