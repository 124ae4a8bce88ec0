import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SpareCpu } from '../scripts/test.js';

/**
 * The test runner's extra slots (scripts/test.ts): a file starts in one only while the machine's
 * CPU was more than a third idle over the last second, at most one every two seconds.
 */

/** A machine whose ticks the test advances: `busyShare` of each step's ticks busy. */
const machine = () => {
  let busy = 0;
  let total = 0;
  let clock = 0;
  return {
    ticks: () => ({ busy, total }),
    now: () => clock,
    /** Half a second at this busy share. */
    step(busyShareArg: number) {
      total += 100;
      busy += 100 * busyShareArg;
      clock += 500;
    },
  };
};

test('an extra file starts only after a second of idle CPU, and no second one within two seconds', () => {
  const m = machine();
  const spare = new SpareCpu(m.ticks, m.now);
  assert.equal(spare.sample(), true);
  m.step(0.2);
  spare.sample();
  assert.equal(spare.take(), false, 'half a second is not enough to judge');
  m.step(0.2);
  spare.sample();
  assert.ok(Math.abs(spare.idleShare() - 0.8) < 1e-9);
  assert.equal(spare.take(), true, 'a second 80 % idle opens an extra file');
  for (let step = 0; step < 3; step++) {
    m.step(0);
    spare.sample();
    assert.equal(spare.take(), false, `still within two seconds of the last start (${(step + 1) * 500} ms)`);
  }
  m.step(0);
  spare.sample();
  assert.equal(spare.take(), true, 'two seconds later, with the CPU still idle, the next one');
});

test('a busy machine opens no extra file, however long it is watched', () => {
  const m = machine();
  const spare = new SpareCpu(m.ticks, m.now);
  spare.sample();
  for (let step = 0; step < 40; step++) {
    m.step(step % 2 === 0 ? 0.9 : 0.5);
    spare.sample();
    assert.equal(spare.take(), false, `idle share ${spare.idleShare().toFixed(2)} at step ${step}`);
  }
  assert.ok(spare.idleShare() < 0.35);
});

test('the idle CPU a start claimed is not claimed again: the next start needs a new second of samples', () => {
  const m = machine();
  const spare = new SpareCpu(m.ticks, m.now);
  spare.sample();
  m.step(0);
  spare.sample();
  m.step(0);
  spare.sample();
  assert.equal(spare.take(), true);
  // Two and a half seconds pass with no new sample: the gap is over, but the idleness seen before
  // the start was spent by it.
  for (let step = 0; step < 5; step++) {
    m.step(0);
  }
  assert.equal(spare.take(), false, 'no sample since the last start');
  spare.sample();
  assert.equal(spare.take(), false, 'half a second of samples');
  m.step(0);
  spare.sample();
  assert.equal(spare.take(), true, 'a whole idle second of samples');
});

test('a second that was busy, then idle, is judged as a whole', () => {
  const m = machine();
  const spare = new SpareCpu(m.ticks, m.now);
  spare.sample();
  m.step(1);
  spare.sample();
  m.step(0.4);
  spare.sample();
  assert.ok(Math.abs(spare.idleShare() - 0.3) < 1e-9);
  assert.equal(spare.take(), false, '30 % idle over the second');
  m.step(0);
  spare.sample();
  assert.ok(Math.abs(spare.idleShare() - 0.8) < 1e-9);
  assert.equal(spare.take(), true, '80 % idle over the last second');
});

test('where the machine\'s ticks cannot be read there are no extra slots', () => {
  const spare = new SpareCpu(() => null, () => 0);
  assert.equal(spare.start(), false);
  assert.equal(spare.take(), false);
});
