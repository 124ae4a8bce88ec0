import { test } from 'node:test';
import assert from 'node:assert/strict';
import { reconcileKeysOf } from '../ts/manager.reconciler/triggers.js';
import { decideReconcilerLease } from '../ts/manager.reconciler/leadership.js';

/** The reconciler's pure decisions: which keys an input change affects, and who holds the lease. */

test('the trigger table: each input names the keys it affects, and the verdict itself triggers nothing', () => {
  assert.deepEqual(reconcileKeysOf('CloudlyService', 'svc-1', { clusterId: 'c1' }), ['service:svc-1', 'projections:c1']);
  // The route table is derived (written by the desired-state computation), not an input.
  assert.deepEqual(reconcileKeysOf('CloudlyClusterIngressRouteTable', 'c1'), []);
  // A relay registration states the runtime's capabilities (every verdict) and the relay's host (projections).
  assert.deepEqual(reconcileKeysOf('CloudlyClusterRelayRegistration', 'c1'), ['cluster:c1', 'projections:c1']);
  assert.deepEqual(reconcileKeysOf('CloudlyPlatformBinding', 'pb-1', { serviceId: 'svc-1' }), ['service:svc-1']);
  assert.deepEqual(reconcileKeysOf('CloudlyPlatformBinding', 'pb-1', {}), [], 'an owner it cannot name is left to the resync');
  assert.deepEqual(reconcileKeysOf('CloudlyClusterNode', 'c1/n1'), ['cluster:c1']);
  assert.deepEqual(reconcileKeysOf('CloudlyRuntimeNetworkAddressPlan', 'plan'), ['all']);
  assert.deepEqual(reconcileKeysOf('CloudlyServiceRuntimeStatus', 'svc-1'), []);
  assert.deepEqual(reconcileKeysOf('CloudlyAdminUser', 'u1'), []);
});

test('a write that left the derived inputs behind its generation triggers nothing; one that moved them, or says nothing, does', () => {
  // A relay registering again with the same announcement on a new socket (a reconnect).
  assert.deepEqual(reconcileKeysOf('CloudlyClusterRelayRegistration', 'c1', { clusterId: 'c1', generation: 5, inputsGeneration: 4 }), []);
  // The announcement changed at this write (or at a later one, read back by another instance).
  assert.deepEqual(reconcileKeysOf('CloudlyClusterRelayRegistration', 'c1', { clusterId: 'c1', generation: 5, inputsGeneration: 5 }), ['cluster:c1', 'projections:c1']);
  assert.deepEqual(reconcileKeysOf('CloudlyClusterRelayRegistration', 'c1', { clusterId: 'c1', generation: 5, inputsGeneration: 7 }), ['cluster:c1', 'projections:c1']);
  // No inputsGeneration (a document stored before it, a removal), or no generation: a change.
  assert.deepEqual(reconcileKeysOf('CloudlyClusterRelayRegistration', 'c1', { clusterId: 'c1', generation: 5 }), ['cluster:c1', 'projections:c1']);
  assert.deepEqual(reconcileKeysOf('CloudlyClusterRelayRegistration', 'c1', { clusterId: 'c1', inputsGeneration: 4 }), ['cluster:c1', 'projections:c1']);
});

test('the reconciler lease: free or expired is taken, our own is renewed, another live holder keeps it', () => {
  assert.equal(decideReconcilerLease(null, 'a', 1_000, 500).kind, 'create');
  const held = { id: 'reconciler', generation: 3, holder: 'b', expiresAt: 2_000 };
  assert.equal(decideReconcilerLease(held, 'a', 1_999, 500).kind, 'keep');
  assert.deepEqual(decideReconcilerLease(held, 'a', 2_000, 500), { kind: 'write', change: { set: { holder: 'a', expiresAt: 2_500 } } });
  assert.deepEqual(decideReconcilerLease(held, 'b', 1_500, 500), { kind: 'write', change: { set: { holder: 'b', expiresAt: 2_000 } } });
});
