import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ObservedReportMemo } from '../ts/manager.desiredstate/observedmemo.js';

/** The memo of the last stored observed-state report per cluster (ts/manager.desiredstate/observedmemo.ts). */
describe('observed report memo', () => {
  const entry = (storedAtArg = 1_000) => ({ sessionId: 's-1', digest: 'd-1', publishedGeneration: 3, storedAt: storedAtArg });

  test('matches the same socket, report and published generation until the refresh bound', () => {
    const memo = new ObservedReportMemo(10_000);
    memo.finish('c-1', memo.begin('c-1'), entry());
    assert.equal(memo.matches('c-1', 's-1', 'd-1', 3, 10_999), true);
    assert.equal(memo.matches('c-1', 's-1', 'd-1', 3, 11_000), false, 'due for a refresh');
    assert.equal(memo.matches('c-1', 's-2', 'd-1', 3, 2_000), false, 'another socket');
    assert.equal(memo.matches('c-1', 's-1', 'd-2', 3, 2_000), false, 'another report');
    assert.equal(memo.matches('c-1', 's-1', 'd-1', 4, 2_000), false, 'published again (another instance)');
    assert.equal(memo.matches('c-1', 's-1', 'd-1', null, 2_000), false, 'nothing published');
    assert.equal(memo.matches('c-2', 's-1', 'd-1', 3, 2_000), false, 'another cluster');
    assert.equal(memo.hits, 1);
  });

  test('a bound of 0 never matches', () => {
    const memo = new ObservedReportMemo(0);
    memo.finish('c-1', memo.begin('c-1'), entry());
    assert.equal(memo.matches('c-1', 's-1', 'd-1', 3, 1_000), false);
  });

  test('a commit of the cluster, or any removal, forgets; one during a report keeps it from being remembered', () => {
    const memo = new ObservedReportMemo(10_000);
    memo.finish('c-1', memo.begin('c-1'), entry());
    memo.finish('c-2', memo.begin('c-2'), entry());
    memo.invalidate('c-1');
    assert.equal(memo.matches('c-1', 's-1', 'd-1', 3, 2_000), false);
    assert.equal(memo.matches('c-2', 's-1', 'd-1', 3, 2_000), true);
    memo.invalidate(null);
    assert.equal(memo.matches('c-2', 's-1', 'd-1', 3, 2_000), false);

    const during = memo.begin('c-1');
    memo.invalidate('c-1');
    memo.finish('c-1', during, entry());
    assert.equal(memo.matches('c-1', 's-1', 'd-1', 3, 2_000), false, 'invalidated while it was stored');

    const everywhere = memo.begin('c-1');
    memo.invalidate(null);
    memo.finish('c-1', everywhere, entry());
    assert.equal(memo.matches('c-1', 's-1', 'd-1', 3, 2_000), false, 'a removal while it was stored');

    // Two reports of one cluster stored at once: neither is remembered, whichever ends first
    // (which one wrote last is not known).
    for (const order of [[0, 1], [1, 0]]) {
      const tokens = [memo.begin('c-1'), memo.begin('c-1')];
      memo.finish('c-1', tokens[order[0]], entry());
      assert.equal(memo.matches('c-1', 's-1', 'd-1', 3, 2_000), false);
      memo.finish('c-1', tokens[order[1]], { ...entry(), digest: 'd-2' });
      assert.equal(memo.matches('c-1', 's-1', 'd-1', 3, 2_000), false);
      assert.equal(memo.matches('c-1', 's-1', 'd-2', 3, 2_000), false);
    }
    // A refused report (nothing to remember) still ends its turn: the next one is remembered.
    memo.finish('c-1', memo.begin('c-1'), null);
    memo.finish('c-1', memo.begin('c-1'), entry());
    assert.equal(memo.matches('c-1', 's-1', 'd-1', 3, 2_000), true);
  });

  test('the digest is the canonical JSON: member order does not matter, any value does', () => {
    const a = ObservedReportMemo.digestOf({ desiredRevision: 2, services: [{ serviceId: 's', nodeId: 'n', state: 'ready' }] });
    const b = ObservedReportMemo.digestOf({ services: [{ state: 'ready', nodeId: 'n', serviceId: 's' }], desiredRevision: 2 });
    const c = ObservedReportMemo.digestOf({ desiredRevision: 2, services: [{ serviceId: 's', nodeId: 'n', state: 'failed' }] });
    assert.equal(a, b);
    assert.notEqual(a, c);
  });
});
