import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { decideClusterLiveness, judgeClusterLiveness, type ILivenessFacts } from '../ts/manager.cluster/liveness.js';
import { decideRuntimeStatus } from '../ts/manager.service/decide.js';

/**
 * The liveness judgement (ts/manager.cluster/liveness.ts) as a table: each row breaks one fact.
 * Times are small numbers; the grace is 30, the lease lifetime 15, the report bound 600.
 */

const settings = { graceMs: 30, observedStaleMs: 600, leaseTtlMs: 15 };
const held = (expiresAtArg: number, acquiredAtArg = 0) => ({ sessionId: 's1', expiresAt: expiresAtArg, acquiredAt: acquiredAtArg });
const released = (releasedAtArg: number) => ({ sessionId: null, expiresAt: 0, acquiredAt: 0, releasedAt: releasedAtArg });
const facts = (partialArg: Partial<ILivenessFacts>): ILivenessFacts => ({ lease: null, lastReportAt: null, watchingSince: 0, now: 100, ...partialArg });

describe('judgeClusterLiveness', () => {
  test('a relay holding an unexpired lease with fresh reports is current until its newest report turns stale', () => {
    assert.deepEqual(judgeClusterLiveness(facts({ lease: held(110), lastReportAt: 90 }), settings), { unknown: null, recheckAt: null, staleAt: 691 });
    // The window runs from the latest of the report, the lease's acquisition and the watch's start.
    assert.equal(judgeClusterLiveness(facts({ lease: held(110, 95), lastReportAt: 90 }), settings).staleAt, 696);
    assert.equal(judgeClusterLiveness(facts({ lease: held(110), lastReportAt: 90, watchingSince: 99 }), settings).staleAt, 700);
  });

  test('released within the grace: still current, looked at again when the grace ends', () => {
    assert.deepEqual(judgeClusterLiveness(facts({ lease: released(80), now: 100 }), settings), { unknown: null, recheckAt: 110 });
  });

  test('released past the grace: relay-disconnected since the release', () => {
    assert.deepEqual(judgeClusterLiveness(facts({ lease: released(60), now: 100 }), settings),
      { unknown: { state: 'unknown', reason: 'relay-disconnected', since: 60 }, recheckAt: null });
  });

  test('a lease that ran out unreleased (its instance died) counts from its last renewal', () => {
    // Last renewed at 95 - 15 = 80: unknown from 110.
    assert.deepEqual(judgeClusterLiveness(facts({ lease: held(95), now: 100 }), settings), { unknown: null, recheckAt: 110 });
    assert.equal(judgeClusterLiveness(facts({ lease: held(95), now: 111 }), settings).unknown?.since, 80);
  });

  test('no lease at all: counted from the last report, or from when this instance started looking', () => {
    assert.equal(judgeClusterLiveness(facts({ lastReportAt: 50, now: 100, watchingSince: 0 }), settings).unknown?.since, 50);
    assert.deepEqual(judgeClusterLiveness(facts({ now: 100, watchingSince: 90 }), settings), { unknown: null, recheckAt: 120 });
  });

  test('a fresh start gives every cluster the grace, however old its last evidence', () => {
    // Released long ago, but this instance only started looking at 95: unknown from 125, since the release.
    assert.deepEqual(judgeClusterLiveness(facts({ lease: released(10), now: 100, watchingSince: 95 }), settings), { unknown: null, recheckAt: 125 });
    assert.equal(judgeClusterLiveness(facts({ lease: released(10), now: 126, watchingSince: 95 }), settings).unknown?.since, 10);
  });

  test('connected, but the newest report is older than the bound: observed-state-stale since that report', () => {
    assert.deepEqual(judgeClusterLiveness(facts({ lease: held(1_000), lastReportAt: 100, now: 701 }), settings),
      { unknown: { state: 'unknown', reason: 'observed-state-stale', since: 100 }, recheckAt: null });
  });

  test('a relay that just took its lease, or a restarted Cloudly, gets a whole report window', () => {
    assert.equal(judgeClusterLiveness(facts({ lease: held(1_000, 650), lastReportAt: 10, now: 701 }), settings).unknown, null);
    assert.equal(judgeClusterLiveness(facts({ lease: held(1_000), lastReportAt: 10, now: 701, watchingSince: 650 }), settings).unknown, null);
  });
});

describe('the stored liveness and the verdict', () => {
  test('the liveness document moves only when the judgement differs', () => {
    const unknown = { state: 'unknown' as const, reason: 'relay-disconnected' as const, since: 5 };
    assert.equal(decideClusterLiveness(null, 'c1', null).kind, 'create');
    assert.equal(decideClusterLiveness({ id: 'c1', clusterId: 'c1', unknown: null, generation: 1 }, 'c1', null).kind, 'keep');
    assert.equal(decideClusterLiveness({ id: 'c1', clusterId: 'c1', unknown, generation: 2 }, 'c1', { ...unknown }).kind, 'keep');
    assert.equal(decideClusterLiveness({ id: 'c1', clusterId: 'c1', unknown, generation: 2 }, 'c1', null).kind, 'write');
  });

  test('a verdict that turns unknown keeps the contract\'s changedAt; turning current again unsets it', () => {
    const stored = { id: 's1', clusterId: 'c1', specRevision: 1, state: 'converged' as const, reason: null, changedAt: 7, generation: 3 };
    const unknown = { state: 'unknown' as const, reason: 'relay-disconnected' as const, since: 5 };
    const dark = decideRuntimeStatus(stored, 's1', { specRevision: 1, state: 'converged', reason: null, unknown }, 99);
    assert.equal(dark.kind, 'write');
    assert.deepEqual(dark.kind === 'write' && dark.change.set, { specRevision: 1, state: 'converged', reason: null, changedAt: 7, unknown });
    const back = decideRuntimeStatus({ ...stored, unknown }, 's1', { specRevision: 1, state: 'converged', reason: null }, 120);
    assert.equal(back.kind, 'write');
    assert.deepEqual(back.kind === 'write' && back.change.unset, ['unknown']);
    assert.equal(decideRuntimeStatus({ ...stored, unknown }, 's1', { specRevision: 1, state: 'converged', reason: null, unknown: { ...unknown } }, 120).kind, 'keep');
  });
});
