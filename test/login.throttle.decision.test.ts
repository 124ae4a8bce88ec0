import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FailureThrottle } from '../ts/core/failurethrottle.js';

/** The growing delays after failures, on a clock the test moves. */

const schedule = { freeFailures: 2, firstDelayMs: 1_000, maxDelayMs: 8_000, forgetAfterMs: 60_000, maxKeys: 3 };

const throttleAt = () => {
  const clock = { now: 1_000_000 };
  return { clock, throttle: new FailureThrottle(schedule, () => clock.now) };
};

describe('FailureThrottle', () => {
  test('free failures cost nothing; each further failure doubles the wait up to the cap', () => {
    const { throttle } = throttleAt();
    assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 7, 30].map((countArg) => throttle.delayAfter(countArg)), [0, 0, 0, 1_000, 2_000, 4_000, 8_000, 8_000, 8_000]);
  });

  test('a key waits after its failures past the free ones, and may try again once its wait is over', () => {
    const { clock, throttle } = throttleAt();
    throttle.recordFailure('a');
    throttle.recordFailure('a');
    assert.equal(throttle.retryAfterMs('a'), 0);
    throttle.recordFailure('a');
    assert.equal(throttle.retryAfterMs('a'), 1_000);
    clock.now += 400;
    assert.equal(throttle.retryAfterMs('a'), 600);
    clock.now += 600;
    assert.equal(throttle.retryAfterMs('a'), 0);
    throttle.recordFailure('a');
    assert.equal(throttle.retryAfterMs('a'), 2_000);
    // Another key is not delayed by a's failures.
    assert.equal(throttle.retryAfterMs('b'), 0);
  });

  test('failures are forgotten after forgetAfterMs, and a clear forgets them at once', () => {
    const { clock, throttle } = throttleAt();
    for (let index = 0; index < 3; index++) {
      throttle.recordFailure('a');
      throttle.recordFailure('b');
    }
    clock.now += schedule.forgetAfterMs;
    throttle.recordFailure('a');
    // Counted from zero again: one failure is free.
    assert.equal(throttle.retryAfterMs('a'), 0);
    throttle.clear('b');
    assert.equal(throttle.size, 1);
  });

  test('a wait longer than forgetAfterMs is never forgotten before it is over', () => {
    const clock = { now: 0 };
    const throttle = new FailureThrottle({ ...schedule, forgetAfterMs: 500 }, () => clock.now);
    for (let index = 0; index < 4; index++) {
      throttle.recordFailure('a');
    }
    clock.now += 1_000;
    assert.equal(throttle.retryAfterMs('a'), 1_000);
  });

  test('many keys never grow it past maxKeys; the key whose last failure is the oldest goes first', () => {
    const { clock, throttle } = throttleAt();
    for (const key of ['a', 'b', 'c']) {
      for (let index = 0; index < 3; index++) {
        throttle.recordFailure(key);
      }
      clock.now += 1;
    }
    // a fails again: b is now the stalest.
    throttle.recordFailure('a');
    throttle.recordFailure('attacker-0');
    assert.equal(throttle.size, schedule.maxKeys);
    assert.equal(throttle.retryAfterMs('b'), 0, 'b, the stalest, was forgotten');
    assert.equal(throttle.retryAfterMs('a'), 2_000, 'a, the freshest, is kept');
    for (let index = 1; index < 1_000; index++) {
      throttle.recordFailure(`attacker-${index}`);
      assert.ok(throttle.size <= schedule.maxKeys);
    }
  });
});
