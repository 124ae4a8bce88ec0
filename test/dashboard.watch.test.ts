import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';
import { openWatcher as openWatcherAt } from './helpers/watch.js';
import { assertFieldProblems } from './helpers/refusals.js';

let t: ITestCloudly;

before(async () => {
  t = await startTestCloudly();
});

after(async () => {
  await t.stop();
});

const watchedKinds = ['CloudlyCluster', 'CloudlyClusterNode'];

const openWatcher = (sinceRevisionArg?: number) => openWatcherAt(t.baseUrl, {
  kinds: watchedKinds,
  ...(sinceRevisionArg === undefined ? {} : { sinceRevision: sinceRevisionArg }),
});

const waitFor = async (conditionArg: () => boolean, whatArg: string) => {
  for (let wait = 0; wait < 500 && !conditionArg(); wait++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.ok(conditionArg(), whatArg);
};

type TExpected = [kind: string, id: string, change: string, generation: number];

/** 200 mutations, one after another, and the change each one makes. */
const burst = async (expectedArg: TExpected[], prefixArg: string, clustersArg: number) => {
  const clusters: Array<{ id: string; generation: number }> = [];
  for (let index = 0; index < clustersArg; index++) {
    const { cluster } = await t.createCluster(`${prefixArg}-${index}`);
    clusters.push({ id: cluster.id, generation: cluster.generation });
    expectedArg.push(['CloudlyCluster', cluster.id, 'created', 1]);
  }
  for (const cluster of clusters) {
    for (let node = 0; node < 4; node++) {
      await t.addNodes(cluster.id, `n${node}`);
      expectedArg.push(['CloudlyClusterNode', `${cluster.id}/n${node}`, 'created', 1]);
    }
  }
  for (let round = 0; round < 3; round++) {
    for (const cluster of clusters) {
      const { cluster: next } = await t.caller.call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: cluster.generation });
      cluster.generation = next.generation;
      expectedArg.push(['CloudlyCluster', cluster.id, 'updated', next.generation]);
    }
  }
  for (const cluster of clusters) {
    for (const node of ['n0', 'n1']) {
      await t.caller.call('removeClusterNode', { clusterId: cluster.id, nodeId: node });
      expectedArg.push(['CloudlyClusterNode', `${cluster.id}/${node}`, 'removed', 2]);
    }
  }
};

test('a watcher sees every change of a 200-mutation burst exactly once, in commit order, public documents only; it resumes after reconnecting', async () => {
  const first = await openWatcher();
  const expected: TExpected[] = [];
  await burst(expected, 'watched', 20);
  assert.equal(expected.length, 200);
  await waitFor(() => first.events.length >= 200, 'every change arrived');
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(first.events.length, 200, 'nothing twice');
  const revisions = first.events.map((event) => event.revision);
  assert.ok(revisions.every((revision, index) => index === 0 || revision > revisions[index - 1]), 'revisions increase');
  assert.ok(revisions[0] > first.answer.revision);
  assert.ok(first.events.every((event) => event.watchId === first.answer.watchId));
  const actual = first.events.map((event): TExpected => [event.kind, event.id, event.change, event.generation]);
  assert.deepEqual(actual, expected);
  const text = JSON.stringify(first.events);
  assert.ok(!text.includes('relayTokenHash') && !text.includes('szrelay_'), 'no secret in a change event');
  for (const event of first.events.filter((entry) => entry.change !== 'removed')) {
    assert.ok(event.document, `${event.kind} ${event.change} carries its public document`);
  }

  // Reconnect after the socket dropped part-way: resume from the last revision seen.
  const seenBeforeDrop = first.events.slice(0, 150);
  first.client.close();
  const resumed = await openWatcher(seenBeforeDrop[seenBeforeDrop.length - 1].revision);
  const more: TExpected[] = [];
  await burst(more, 'resumed', 2);
  await waitFor(() => resumed.events.length >= 50 + more.length, 'the rest and the new changes arrived');
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(resumed.events.length, 50 + more.length);
  assert.deepEqual(resumed.events.slice(0, 50).map((event) => event.revision), revisions.slice(150));
  resumed.client.close();
});

test('changes made while nobody watched are replayed; a revision this instance no longer keeps is refused revision-gone; watchChanges needs the socket', async () => {
  const watcher = await openWatcher();
  const gone = await refusalOf(() => watcher.client.call('watchChanges', { sinceRevision: 1 }));
  assert.equal(gone.code, 'conflict');
  assert.deepEqual(gone.reasons, ['revision-gone']);
  assert.deepEqual((gone.causes as Array<{ path?: string }>).map((causeArg) => causeArg.path), ['request.sinceRevision']);
  const ahead = await refusalOf(() => watcher.client.call('watchChanges', { sinceRevision: watcher.answer.revision + 1_000_000 }));
  assertFieldProblems(ahead, [['request.sinceRevision', 'field-invalid', /^is ahead of this instance's revision \d+$/]]);
  watcher.client.close();
  // Changes made while nobody watches are replayed from the revision the watcher had.
  await waitFor(() => (t.cloudly as unknown as { managers: Array<{ watchers?: Map<string, unknown> }> }).managers.every((manager) => !manager.watchers || manager.watchers.size === 0), 'watchers gone');
  const unwatched = await t.createCluster('unwatched');
  await t.addNodes(unwatched.cluster.id, 'u1');
  const back = await openWatcher(watcher.answer.revision);
  await waitFor(() => back.events.length >= 2, 'changes made while nobody watched');
  assert.deepEqual(back.events.map((event) => [event.kind, event.id, event.change]), [
    ['CloudlyCluster', unwatched.cluster.id, 'created'],
    ['CloudlyClusterNode', `${unwatched.cluster.id}/u1`, 'created'],
  ]);
  assert.equal((back.events[1].document as { id: string }).id, 'u1');
  back.client.close();
  const overHttp = await refusalOf(() => t.caller.call('watchChanges', {}));
  assert.deepEqual(overHttp.reasons, ['admin-socket-only']);
});
