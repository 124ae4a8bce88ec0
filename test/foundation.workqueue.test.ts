import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { WorkQueue, type IWorkQueueRetry } from '../ts/core/workqueue.js';
import { WorkGate } from '../ts/core/workgate.js';
import { armFailpoint, failpoint } from '../ts/core/failpoints.js';

/** A gate a test opens by hand, so a run can be held in the middle without any timing. */
const gate = () => {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => { open = resolve; });
  return { opened, open };
};

/** A queue that records its runs and whose processing a test can hold. */
const recordingQueue = (optionsArg: { retry?: IWorkQueueRetry; failTimes?: number } = {}) => {
  const runs: string[] = [];
  const errors: Array<{ key: unknown; failures: unknown }> = [];
  const holds = new Map<string, Promise<void>>();
  const started = new Map<string, () => void>();
  let failuresLeft = optionsArg.failTimes ?? 0;
  let running = 0;
  let mostAtOnce = 0;
  const queue = new WorkQueue({
    name: 'test work',
    logger: { error: (objectArg) => errors.push(objectArg as { key: unknown; failures: unknown }) },
    retry: optionsArg.retry,
    process: async (keyArg) => {
      running++;
      mostAtOnce = Math.max(mostAtOnce, running);
      runs.push(keyArg);
      started.get(keyArg)?.();
      try {
        await holds.get(keyArg);
        if (failuresLeft > 0) {
          failuresLeft--;
          throw new Error(`run of ${keyArg} failed`);
        }
      } finally {
        running--;
      }
    },
  });
  return {
    queue,
    runs,
    errors,
    mostAtOnce: () => mostAtOnce,
    /** Holds the next runs of a key until the returned gate opens; resolves `running` when one starts. */
    hold(keyArg: string) {
      const held = gate();
      const start = gate();
      holds.set(keyArg, held.opened);
      started.set(keyArg, start.open);
      return { release: held.open, running: start.opened };
    },
  };
};

describe('work queue: one run per key at a time, the last trigger always seen', () => {
  test('a key added several times while it waits runs once', async () => {
    const q = recordingQueue();
    await Promise.all([q.queue.add('a'), q.queue.add('a'), q.queue.add('a')]);
    assert.deepEqual(q.runs, ['a']);
  });

  test('a key added while it is processed runs once more afterwards, never twice at once', async () => {
    const q = recordingQueue();
    const held = q.hold('a');
    const first = q.queue.add('a');
    await held.running;
    // Three adds during the run: owed exactly one more run, which starts after this one ends.
    const during = [q.queue.add('a'), q.queue.add('a'), q.queue.add('a')];
    assert.deepEqual(q.runs, ['a']);
    held.release();
    await Promise.all([first, ...during]);
    assert.deepEqual(q.runs, ['a', 'a']);
    assert.equal(q.mostAtOnce(), 1);
    assert.equal(q.queue.isBusy('a'), false);
  });

  test('a caller is answered only after a run that started after its add', async () => {
    const q = recordingQueue();
    const held = q.hold('a');
    const first = q.queue.add('a');
    await held.running;
    let secondDone = false;
    const second = q.queue.add('a').then(() => { secondDone = true; });
    held.release();
    await first;
    await second;
    assert.equal(secondDone, true);
    assert.equal(q.runs.length, 2, 'the second caller waited for the second run');
  });

  test('different keys run concurrently', async () => {
    const q = recordingQueue();
    const a = q.hold('a');
    const b = q.hold('b');
    const done = Promise.all([q.queue.add('a'), q.queue.add('b')]);
    await Promise.all([a.running, b.running]);
    assert.equal(q.mostAtOnce(), 2);
    a.release();
    b.release();
    await done;
  });

  test('idle waits for the key to finish, including the run it is owed', async () => {
    const q = recordingQueue();
    await q.queue.idle('never-added');
    const held = q.hold('a');
    void q.queue.add('a');
    await held.running;
    void q.queue.add('a');
    let idle = false;
    const waiting = q.queue.idle('a').then(() => { idle = true; });
    await Promise.resolve();
    assert.equal(idle, false);
    held.release();
    await waiting;
    assert.deepEqual(q.runs, ['a', 'a']);
  });
});

describe('work queue: drain on stop', () => {
  test('drain waits for the run in progress, drops the owed run, and takes no new work', async () => {
    const q = recordingQueue();
    const held = q.hold('a');
    const first = q.queue.add('a');
    await held.running;
    const owed = q.queue.add('a');
    let drained = false;
    const draining = q.queue.drain().then(() => { drained = true; });
    await Promise.resolve();
    assert.equal(drained, false, 'the running work is still going');
    held.release();
    await draining;
    await Promise.all([first, owed]);
    assert.deepEqual(q.runs, ['a'], 'the owed run was dropped');
    await q.queue.add('b');
    assert.deepEqual(q.runs, ['a'], 'no new work after the drain');
    q.queue.resume();
    await q.queue.add('b');
    assert.deepEqual(q.runs, ['a', 'b'], 'resumed');
  });
});

describe('work queue: failures', () => {
  test('a failure is logged with the queue and the key, and the caller is answered, not rejected', async () => {
    const q = recordingQueue({ failTimes: 1 });
    await q.queue.add('a');
    assert.equal(q.errors.length, 1);
    assert.equal(q.errors[0].key, 'a');
    assert.equal(q.errors[0].failures, 1);
    assert.equal(q.queue.isBusy('a'), false, 'without a retry policy nothing is owed');
    await q.queue.add('a');
    assert.deepEqual(q.runs, ['a', 'a']);
  });

  test('with a retry policy a failed key is added again until it succeeds', async () => {
    const q = recordingQueue({ failTimes: 2, retry: { maximumRetries: 5, baseDelayMs: 1, maximumDelayMs: 4 } });
    await q.queue.add('a');
    // Each retry is an add of its own; wait for the runs by looking at them, not at a clock.
    while (q.runs.length < 3 || q.queue.isBusy('a')) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.deepEqual(q.runs, ['a', 'a', 'a']);
    assert.deepEqual(q.errors.map((error) => error.failures), [1, 2]);
  });

  test('retries stop after the budget', async () => {
    const q = recordingQueue({ failTimes: 100, retry: { maximumRetries: 2, baseDelayMs: 1, maximumDelayMs: 1 } });
    await q.queue.add('a');
    while (q.runs.length < 3) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    await q.queue.idle('a');
    await q.queue.drain();
    assert.equal(q.runs.length, 3, 'the first run and two retries');
  });

  test('drain cancels a waiting retry', async () => {
    const q = recordingQueue({ failTimes: 1, retry: { maximumRetries: 5, baseDelayMs: 60_000, maximumDelayMs: 60_000 } });
    await q.queue.add('a');
    await q.queue.drain();
    assert.deepEqual(q.runs, ['a']);
  });
});

describe('failpoints', () => {
  test('an unarmed point does nothing; an armed one throws or pauses, for the times asked', async () => {
    await failpoint('corestore.afterCreationCommit');
    const armed = armFailpoint('corestore.afterCreationCommit', { kind: 'throw' }, { times: 1 });
    await assert.rejects(failpoint('corestore.afterCreationCommit'), /failpoint corestore.afterCreationCommit/);
    await failpoint('corestore.afterCreationCommit');
    assert.equal(armed.hits(), 1);

    const open = gate();
    const paused = armFailpoint('corestore.afterCreationCommit', { kind: 'pause', until: open.opened });
    let passed = false;
    const reached = failpoint('corestore.afterCreationCommit').then(() => { passed = true; });
    await Promise.resolve();
    assert.equal(passed, false);
    open.open();
    await reached;
    assert.equal(passed, true);
    paused.disarm();
    await failpoint('corestore.afterCreationCommit');
    assert.equal(paused.hits(), 1);
  });
});

describe('the relay work gate', () => {
  test('runs at most its limit at once, the rest in arrival order, and hands on the slot of a run that failed', async () => {
    const lane = new WorkGate(2);
    const holds = [gate(), gate(), gate(), gate()];
    const started: number[] = [];
    const runs = holds.map((hold, index) => lane.run(async () => {
      started.push(index);
      await hold.opened;
      if (index === 0) {
        throw new Error('run 0 failed');
      }
      return index;
    }));
    await new Promise<void>((resolve) => setImmediate(resolve));
    assert.deepEqual(started, [0, 1]);
    assert.deepEqual([lane.active, lane.queued, lane.waitedTotal], [2, 2, 2]);
    holds[0].open();
    await assert.rejects(runs[0], /run 0 failed/);
    await new Promise<void>((resolve) => setImmediate(resolve));
    assert.deepEqual(started, [0, 1, 2]);
    assert.deepEqual([lane.active, lane.queued], [2, 1]);
    holds[1].open();
    holds[2].open();
    holds[3].open();
    assert.deepEqual(await Promise.all(runs.slice(1)), [1, 2, 3]);
    assert.deepEqual(started, [0, 1, 2, 3]);
    assert.deepEqual([lane.active, lane.queued, lane.waitedTotal], [0, 0, 2]);
  });

  test('a limit of 0 lets every run through at once', async () => {
    const lane = new WorkGate(0);
    const hold = gate();
    const runs = [1, 2, 3].map((value) => lane.run(async () => { await hold.opened; return value; }));
    await new Promise<void>((resolve) => setImmediate(resolve));
    assert.deepEqual([lane.queued, lane.waitedTotal], [0, 0]);
    hold.open();
    assert.deepEqual(await Promise.all(runs), [1, 2, 3]);
  });
});
