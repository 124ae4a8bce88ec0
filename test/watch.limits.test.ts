import { test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly } from './helpers/cloudly.js';
import { openWatcher } from './helpers/watch.js';
import { watchLimitReason } from '../ts/manager.watch/watch.manager.js';

/** One account holds at most CLOUDLY_WATCHES_PER_ACCOUNT watches, over all its sockets. */

test('an account beyond its watches is refused conflict watch-limit-reached; an unwatch makes room', async () => {
  const t = await startTestCloudly({ watchesPerAccount: 2, logLevel: 'warn' });
  const watchers: Array<Awaited<ReturnType<typeof openWatcher>>> = [];
  try {
    watchers.push(await openWatcher(t.baseUrl, {}));
    watchers.push(await openWatcher(t.baseUrl, { kinds: ['CloudlyCluster'] }));
    const third = await refusalOf(() => openWatcher(t.baseUrl, {}));
    assert.deepEqual(third.reasons, [watchLimitReason], 'the third watch of the account, on a socket of its own, is refused');
    // The same refusal on a socket that already holds a watch.
    const refusal = await refusalOf(() => watchers[0].client.call('watchChanges', {}));
    assert.equal(refusal.code, 'conflict');
    assert.deepEqual(refusal.reasons, [watchLimitReason]);
    assert.equal(refusal.retryable, true);

    const { stopped } = await watchers[1].client.call('unwatchChanges', { watchId: watchers[1].answer.watchId });
    assert.equal(stopped, true);
    const again = await watchers[0].client.call('watchChanges', { kinds: ['CloudlyService'] });
    assert.match(again.watchId, /^watch-/);
    // The watches still held deliver: a change reaches the first watcher.
    const { cluster } = await t.createCluster('after-the-limit');
    await new Promise<void>((resolve, reject) => {
      const deadline = Date.now() + 30_000;
      const poll = () => {
        if (watchers[0].events.some((eventArg) => eventArg.id === cluster.id)) {
          resolve();
        } else if (Date.now() > deadline) {
          reject(new Error('the change did not reach the watcher'));
        } else {
          setTimeout(poll, 20);
        }
      };
      poll();
    });
  } finally {
    for (const watcher of watchers) {
      watcher.client.close();
    }
    await t.stop();
  }
});
