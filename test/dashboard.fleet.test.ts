import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { addClusterWorld } from './backup.fixture.js';
import { followOperation } from '../ts/client/operations.js';
import type { IFleetClusterSummary, IReq_Admin_GetFleetOverview } from '../ts/interfaces/requests/overview.js';
import type { DocumentStore, IDocumentKind, IStoredDocument } from '../ts/core/store.js';
import { currentOperation } from '../ts/core/operationcontext.js';
import { assertFieldProblems } from './helpers/refusals.js';

/**
 * `getFleetOverview` against a real Cloudly: three clusters — a registered relay, a connected but
 * unregistered one, none — with their node counts, services by runtime state, running and failed
 * backups; paging; and one read per kind for the whole page, whatever the number of clusters.
 */

let t: ITestCloudly;
before(async () => { t = await startTestCloudly(); });
after(async () => { await t.stop(); });

const fleet = async (requestArg: Omit<IReq_Admin_GetFleetOverview['request'], 'identity'> = {}) =>
  t.caller.call('getFleetOverview', requestArg);

/** Counts the store's finds and gets made for `getFleetOverview` calls (not background work) while `fnArg` runs. */
const countingReads = async <T>(fnArg: () => Promise<T>): Promise<{ result: T; finds: string[]; gets: string[] }> => {
  const store = t.cloudly.store as DocumentStore & Record<string, unknown>;
  const find = store.find.bind(store);
  const get = store.get.bind(store);
  const finds: string[] = [];
  const gets: string[] = [];
  store.find = (async (kindArg: IDocumentKind<IStoredDocument>, ...restArg: unknown[]) => {
    if (currentOperation().method === 'getFleetOverview') finds.push(kindArg.collectionName);
    return (find as (...argsArg: unknown[]) => Promise<unknown>)(kindArg, ...restArg);
  }) as typeof store.find;
  store.get = (async (kindArg: IDocumentKind<IStoredDocument>, idArg: string) => {
    if (currentOperation().method === 'getFleetOverview') gets.push(kindArg.collectionName);
    return get(kindArg, idArg);
  }) as typeof store.get;
  try {
    return { result: await fnArg(), finds, gets };
  } finally {
    store.find = find;
    store.get = get;
  }
};

test('getFleetOverview: relay state, node count, services by runtime state and backups that need attention, per cluster', async () => {
  const registered = await addClusterWorld(t, 'fleet-a');
  const unregistered = await addClusterWorld(t, 'fleet-b');
  const missing = await t.createCluster('fleet-c');
  await t.addNodes(registered.clusterId, 'fleet-a-node-b');
  await registered.relay.fire('registerClusterRelay', {
    registration: { origin: 'http://192.0.2.10:8080', version: '1.0.0', protocol: 'cluster-relay/1' },
  });
  // Nobody reads either service's status: the reconciler judges both on its own.
  // A backup that fails at the relay, and one the relay holds (running).
  registered.relay.addHandler('backupClusterService', async () => { throw Object.assign(new Error('no'), {}); });
  const failed = await t.caller.call('createServiceBackup', { clusterId: registered.clusterId, nodeId: registered.nodeId, serviceId: registered.service.id });
  await followOperation(t.admin, failed.operation!.operationId, { timeoutMs: 20_000 });
  unregistered.relay.addHandler('backupClusterService', () => new Promise(() => undefined));
  await waitFor(async () => (await t.caller.call('getClusterOverview', { clusterId: unregistered.clusterId }) as { overview: { relay: { connected: boolean } } }).overview.relay.connected, 'relay b elected', 10_000);
  await t.caller.call('createServiceBackup', { clusterId: unregistered.clusterId, nodeId: unregistered.nodeId, serviceId: unregistered.service.id });

  // The reconciler judges in the background: wait (bounded) until no service of the fleet is unjudged.
  await waitFor(async () => (await fleet()).clusters.every((summary) => summary.services.byRuntimeState.unjudged === 0), 'every service judged', 10_000);
  const { clusters, nextCursor } = await fleet();
  assert.equal(nextCursor, undefined);
  const byId = new Map<string, IFleetClusterSummary>(clusters.map((summary) => [summary.cluster.id, summary]));
  assert.deepEqual(clusters.map((summary) => summary.cluster.name), ['fleet-a', 'fleet-b', 'fleet-c'], 'creation order');
  const a = byId.get(registered.clusterId)!;
  assert.deepEqual(a.relay, { state: 'connected', registered: true, socketsOpenHere: 1 });
  assert.equal(a.nodeCount, 2);
  assert.equal(a.services.total, 1);
  assert.equal(a.services.byRuntimeState.unjudged + a.services.byRuntimeState.converged + a.services.byRuntimeState.converging
    + a.services.byRuntimeState.waiting + a.services.byRuntimeState.refused, 1);
  assert.equal(a.services.byRuntimeState.unjudged, 0, 'the judged status is counted by its state');
  assert.deepEqual(a.backups, { running: 0, failed: 1 });
  const b = byId.get(unregistered.clusterId)!;
  assert.deepEqual(b.relay, { state: 'unregistered', registered: false, socketsOpenHere: 1 });
  assert.deepEqual(b.services.byRuntimeState, { converged: 0, converging: 1, waiting: 0, refused: 0, unjudged: 0, unknown: 0 },
    'a service nobody read is judged all the same');
  assert.deepEqual(b.backups, { running: 1, failed: 0 });
  const c = byId.get(missing.cluster.id)!;
  assert.deepEqual(c.relay, { state: 'missing', registered: false, socketsOpenHere: 0 });
  assert.deepEqual([c.nodeCount, c.services.total, c.backups.running, c.backups.failed], [0, 0, 0, 0]);
  assert.ok(!JSON.stringify(clusters).includes('relayTokenHash'), 'no secret of a cluster');
});

test('getFleetOverview pages by id without losing or repeating a cluster, and reads each kind once per page', async () => {
  for (let index = 0; index < 7; index++) {
    await t.createCluster(`fleet-extra-${index}`);
  }
  const all = (await fleet()).clusters.map((summary) => summary.cluster.id);
  const paged: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await fleet({ limit: 4, ...(cursor ? { cursor } : {}) });
    assert.ok(page.clusters.length <= 4);
    paged.push(...page.clusters.map((summary) => summary.cluster.id));
    cursor = page.nextCursor;
  } while (cursor);
  assert.deepEqual([...paged].sort(), [...all].sort());
  const small = await countingReads(() => fleet({ limit: 2 }));
  const large = await countingReads(() => fleet({ limit: 10 }));
  assert.equal(large.result.clusters.length, 10);
  // Which clusters land on the 2-cluster page depends on their random ids; a page whose clusters
  // have no services needs no runtime status read. No kind is read more than once either way.
  assert.ok(small.finds.every((kind) => large.finds.includes(kind)), `no read for 2 clusters that 10 do not need: ${small.finds.join(', ')} / ${large.finds.join(', ')}`);
  assert.equal(new Set(small.finds).size, small.finds.length, `one read per kind: ${small.finds.join(', ')}`);
  assert.equal(new Set(large.finds).size, large.finds.length, `one read per kind: ${large.finds.join(', ')}`);
  assert.deepEqual(large.gets, [], 'no read per cluster');
  const badLimit = await refusalOf(() => fleet({ limit: 0 }));
  assertFieldProblems(badLimit, [['request.limit', 'field-invalid', 'must be an integer from 1 to 1000']]);
});
