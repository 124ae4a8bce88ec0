import { after, before, test } from 'node:test';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { openWatcher } from './helpers/watch.js';
import { stateDigest } from './helpers/state.js';
import type { IReq_Any_Cloudly_UpsertPlatformBinding } from '../ts/interfaces/requests/corestore.js';
import type { IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import type { IAuditEvent } from '../ts/interfaces/data/audit.js';
import type { IClusterOverviewService } from '../ts/interfaces/requests/overview.js';
import { serviceKind } from '../ts/manager.service/service.manager.js';
import { clusterKind } from '../ts/manager.cluster/documents.js';
import type { ICloudlyMethods } from '../ts/interfaces/requests/methodmap.js';
import { currentOperation } from '../ts/core/operationcontext.js';

/**
 * The reconciler keeps every verdict current without anyone reading it, its writes are Cloudly's
 * own, and reads write nothing.
 */

let t: ITestCloudly;
let clusterId: string;

before(async () => {
  // An hour-long resync: every verdict here comes from its trigger (the resync has tests of its own).
  t = await startTestCloudly({ reconcileResyncMs: 3_600_000 });
  clusterId = (await t.createCluster('reconciled')).cluster.id;
  await t.addNodes(clusterId, 'n1');
});

after(async () => {
  await t.stop();
});

const spec = (nameArg: string): IServiceWritableSpec => ({
  name: nameArg,
  organizationId: 'org1',
  clusterId,
  runtime: { image: 'app:1', replicas: 1, profile: { runAs: { user: 1000, group: 1000 } }, placement: { nodeIds: ['n1'] } },
  volumes: [],
});

const createService = async (nameArg: string) =>
  (await t.caller.call('createService', { service: spec(nameArg) })).service;

/** The verdict the cluster page shows (a read of stored state; nobody reads the service itself). */
const overviewVerdict = async (serviceIdArg: string): Promise<[string, string | null] | null> => {
  const { overview } = await t.caller.call('getClusterOverview', { clusterId }) as { overview: { services: IClusterOverviewService[] } };
  const status = overview.services.find((entry) => entry.service.id === serviceIdArg)?.runtimeStatus ?? null;
  return status ? [status.state, status.reason] : null;
};

const waitForVerdict = async (serviceIdArg: string, expectedArg: [string, string | null]): Promise<void> => {
  await waitFor(async () => JSON.stringify(await overviewVerdict(serviceIdArg)) === JSON.stringify(expectedArg),
    `verdict ${expectedArg.join('/')} on the cluster page`, 10_000);
};

/** The verdict of a cluster's first service as its cluster page shows it, `state/reason` (or `unjudged`). */
const firstVerdictOf = async (tArg: ITestCloudly, clusterIdArg: string): Promise<string> => {
  const { overview } = await tArg.caller.call('getClusterOverview', { clusterId: clusterIdArg }) as { overview: { services: IClusterOverviewService[] } };
  const status = overview.services[0]?.runtimeStatus;
  return status ? `${status.state}/${status.reason}` : 'unjudged';
};

const reconcilerIdle = () => waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the reconciler is idle', 10_000);

test('a verdict is judged without anyone reading the service: a binding moves it to waiting and back, on the cluster page', async () => {
  const service = await createService('unread');
  await waitForVerdict(service.id, ['converging', null]);
  const { platformBinding } = await t.caller.call('upsertPlatformBinding', {
    platformBinding: { serviceId: service.id, capability: 'database', enabled: true, nodeId: 'n1' } as unknown as IReq_Any_Cloudly_UpsertPlatformBinding['request']['platformBinding'],
    expectedGeneration: null,
  });
  await waitForVerdict(service.id, ['waiting', 'bindings-pending']);
  // A removal still names its owner, so the service is judged again at once.
  await t.caller.call('deletePlatformBinding', { platformBindingId: platformBinding.id, expectedGeneration: platformBinding.generation });
  await waitForVerdict(service.id, ['converging', null]);
});

test("the reconciler's writes are Cloudly's own, with the input change that caused them", async () => {
  const service = await createService('audited');
  await waitForVerdict(service.id, ['converging', null]);
  // The audit event is appended right after the write it records, so a read can see the verdict first.
  const eventsOf = async () => ((await t.caller.call('getAuditEvents', { filter: { targetKind: 'CloudlyServiceRuntimeStatus', targetId: service.id } })) as { events: IAuditEvent[] }).events;
  await waitFor(async () => (await eventsOf()).length > 0, 'the verdict write\'s audit event');
  await reconcilerIdle();
  const events = await eventsOf();
  assert.equal(events.length, 1, 'one verdict, one write');
  assert.deepEqual(events[0].actor, { kind: 'cloudly', id: 'cloudly' });
  assert.equal(events[0].method, 'reconcile');
  assert.deepEqual(events[0].cause, { kind: 'CloudlyService', id: service.id });
  assert.equal(events[0].outcome, 'created');
});

test("a watcher of the cluster sees the reconciler's verdict change, with the status and the cluster named", async () => {
  const { client, events } = await openWatcher(t.baseUrl, { clusterId });
  try {
    const service = await createService('watched');
    await waitFor(() => events.some((event) => event.kind === 'CloudlyServiceRuntimeStatus' && event.id === service.id), 'the verdict change reaches the watcher', 10_000);
    const verdict = events.find((event) => event.kind === 'CloudlyServiceRuntimeStatus' && event.id === service.id)!;
    assert.equal(verdict.clusterId, clusterId);
    assert.equal(verdict.change, 'created');
    const document = verdict.document as { state: string; reason: string | null; specRevision: number };
    assert.deepEqual([document.state, document.reason, document.specRevision], ['converging', null, 1]);
  } finally {
    client.close();
  }
});

test('every query method reads stored state and writes nothing: no document, no audit event', async () => {
  const service = await createService('read-only');
  await waitForVerdict(service.id, ['converging', null]);
  const writes: string[] = [];
  const stopListening = t.cloudly.store.onCommitted((kindArg, idArg) => {
    // Heartbeats renew leases and the instance entry on their own schedule; everything else counts.
    if (!/Lease|Instance/.test(kindArg.collectionName)) {
      writes.push(`${kindArg.collectionName}/${idArg} (${currentOperation().method})`);
    }
  });
  // Background work of the earlier writes (the reconciler, desired-state refreshes) ends first: 500 ms
  // without a write. (The resync runs every 400 ms here and, with nothing changed, writes nothing.)
  let quietSince = Date.now();
  let seen = 0;
  await waitFor(() => {
    if (writes.length !== seen) {
      seen = writes.length;
      quietSince = Date.now();
    }
    return Date.now() - quietSince >= 500;
  }, 'no background write for 500 ms', 15_000);
  writes.length = 0;
  const before = await stateDigest(t, /lease|instance/i);
  const queries: Array<[keyof ICloudlyMethods, Record<string, unknown>]> = [
    ['getClusters', {}],
    ['getClusterById', { clusterId }],
    ['getClusterNodes', { clusterId }],
    ['getClusterRuntime', { clusterId }],
    ['getClusterIngressDesignation', { clusterId }],
    ['getClusterRouteTableResolution', { clusterId }],
    ['getClusterRelayRegistrations', {}],
    ['getClusterOverview', { clusterId }],
    ['getFleetOverview', {}],
    ['getServices', {}],
    ['getServiceById', { serviceId: service.id }],
    ['getServiceRuntimeStatus', { serviceId: service.id }],
    ['getRuntimeLocalStorageClaims', { serviceId: service.id }],
    ['getPlatformBindings', {}],
    ['getServiceBackups', {}],
    ['getBackupSchedules', {}],
    ['getOperations', {}],
    ['getAuditEvents', {}],
    ['getUsers', {}],
    ['getSecretRecipients', { clusterId }],
    ['getCorestoreControlCredential', { clusterId, nodeId: 'n1' }],
    ['getRuntimeNetworkAddressPlan', {}],
    ['getRuntimeNetworkProjection', { clusterId, nodeId: 'n1' }],
  ];
  for (const [method, request] of queries) {
    await t.caller.call(method, request as never);
  }
  await reconcilerIdle();
  stopListening();
  assert.deepEqual(writes, [], 'no query committed a write');
  assert.equal(await stateDigest(t, /lease|instance/i), before, 'the stored state is exactly as it was');
  const { events } = await t.caller.call('getAuditEvents', { limit: 500 }) as { events: IAuditEvent[] };
  const readers = new Set<string>(queries.map(([method]) => method));
  assert.deepEqual(events.filter((event) => readers.has(event.method)).map((event) => event.method), [], 'no audit event names a query');
});

test('a change whose trigger was lost is judged by the next resync', async () => {
  // Its own Cloudly with a short resync, so the wait is a fraction of a second, not a minute.
  const own = await startTestCloudly({ reconcileResyncMs: 400 });
  try {
    const ownCluster = (await own.createCluster('resynced')).cluster.id;
    await own.addNodes(ownCluster, 'n1');
    const { service } = await own.admin.call('createService', { service: { ...spec('resynced'), clusterId: ownCluster } });
    const verdict = () => firstVerdictOf(own, ownCluster);
    await waitFor(async () => (await verdict()) === 'converging/null', 'judged from its trigger', 10_000);
    // Two resyncs that run nothing: every digest is recorded, so the catch-up below is the resync's own.
    const runs = countResyncRuns(own);
    await waitFor(() => runs.quietResyncs() >= 2, 'two resyncs that ran no key', 15_000);
    // Straight into the database, past the store and the feed, as a write through another instance
    // whose change the feed never delivered (it moves the generation, as every write through a store does).
    await own.cloudly.store.collection(serviceKind).updateOne({ id: service.id }, { $set: { 'runtime.placement.nodeIds': ['gone-node'] }, $inc: { generation: 1 } });
    await waitFor(async () => (await verdict()) === 'refused/no-eligible-node', 'judged by the resync', 10_000);
  } finally {
    await own.stop();
  }
});

/**
 * Counts the runs each resync caused, by the resync's cause id: a run is the resync's when its
 * cause is a resync's (`CloudlyReconcilerResync`, not a deadline or a poll). `quietResyncs` counts
 * the periodic resyncs (id `resync`) that were followed by no run at all before the next one.
 */
const countResyncRuns = (tArg: ITestCloudly) => {
  const runs: Array<{ controller: string; key: string; id: string }> = [];
  for (const controller of tArg.cloudly.reconciler.controllers) {
    const original = controller.reconcile.bind(controller);
    controller.reconcile = async (keyArg, contextArg) => {
      if (contextArg.cause.kind === 'CloudlyReconcilerResync' && !['deadline', 'poll'].includes(contextArg.cause.id)) {
        runs.push({ controller: controller.name, key: keyArg, id: contextArg.cause.id });
      }
      return original(keyArg, contextArg);
    };
  }
  let quiet = 0;
  let seen = 0;
  const timer = setInterval(() => {
    quiet = runs.length === seen && tArg.cloudly.reconciler.busyKeys === 0 ? quiet + 1 : 0;
    seen = runs.length;
  }, tArg.cloudly.config.reconcileResyncMs ?? 60_000);
  timer.unref();
  return { runs, quietResyncs: () => quiet, stop: () => clearInterval(timer) };
};

test('a resync reads digests and runs only the clusters whose inputs moved; a write that left the generation waits for the full pass', async () => {
  // Its own Cloudly with hour-long resyncs and grace, so that every resync here is one this test asks for.
  const own = await startTestCloudly({ reconcileResyncMs: 3_600_000, relayLivenessGraceMs: 3_600_000 });
  try {
    const clusters: string[] = [];
    const services: string[] = [];
    for (const name of ['digest-a', 'digest-b', 'digest-c']) {
      const ownCluster = (await own.createCluster(name)).cluster.id;
      await own.addNodes(ownCluster, 'n1');
      services.push((await own.admin.call('createService', { service: { ...spec(name), clusterId: ownCluster } })).service.id);
      clusters.push(ownCluster);
    }
    const verdict = () => firstVerdictOf(own, clusters[0]);
    await waitFor(async () => (await verdict()) === 'converging/null', 'judged from its trigger', 10_000);
    const idle = () => waitFor(() => own.cloudly.reconciler.busyKeys === 0, 'the controllers are idle', 15_000);
    const resync = async (idArg: string, fullArg = false) => {
      // It settles once its keys are queued (after its digests are read); then until they have run.
      await own.cloudly.reconciler.resync(idArg, { full: fullArg });
      await idle();
    };
    const runs = countResyncRuns(own);
    runs.stop();
    await idle();
    // The runs since the start-up pass (the services' own verdicts) moved their clusters' digests once.
    await resync('settle');
    await resync('unchanged');
    assert.deepEqual(runs.runs.filter((run) => run.id === 'unchanged'), [], 'a resync of an unchanged fleet runs no key');

    // A service's change whose trigger was lost: only its cluster's keys run, in the controllers that read services.
    await own.cloudly.store.collection(serviceKind).updateOne({ id: services[0] }, { $set: { 'runtime.placement.nodeIds': ['gone-node'] }, $inc: { generation: 1 } });
    await resync('moved');
    assert.equal(await verdict(), 'refused/no-eligible-node', 'the resync judged the change');
    const moved = runs.runs.filter((run) => run.id === 'moved');
    assert.ok(moved.some((run) => run.controller === 'verdict' && run.key === `cluster:${clusters[0]}`), 'the verdict looked at the changed cluster');
    assert.deepEqual(moved.filter((run) => run.key.includes(clusters[1]) || run.key.includes(clusters[2])), [], 'no key of an unchanged cluster ran');
    assert.deepEqual(moved.filter((run) => run.controller === 'liveness' || run.controller === 'corestore-credentials'), [], 'controllers that read no service ran nothing');

    // A write around Cloudly that left the generation as it was: no digest sees it; the full pass (once an hour) does.
    // (The verdict's own write moved its cluster's digest: one resync runs it first.)
    await resync('settle-again');
    await own.cloudly.store.collection(serviceKind).updateOne({ id: services[0] }, { $set: { 'runtime.placement.nodeIds': ['n1'] } });
    await resync('unseen');
    assert.deepEqual(runs.runs.filter((run) => run.id === 'unseen'), [], 'an unchanged generation runs nothing');
    assert.equal(await verdict(), 'refused/no-eligible-node', 'not judged by a resync from digests');
    await resync('full', true);
    assert.equal(await verdict(), 'converging/null', 'judged by the full pass');
  } finally {
    await own.stop();
  }
});

test('a reconcile that fails is logged with its key, counted, and retried with backoff until it succeeds', async () => {
  const verdict = t.cloudly.controllers.verdict;
  const original = verdict.reconcileService.bind(verdict);
  // Only the new service's runs fail (the resync looks at the earlier ones too); its first two runs throw.
  const earlier = new Set((await t.cloudly.store.find(serviceKind, {})).map((doc) => doc.id));
  const runs: string[] = [];
  verdict.reconcileService = async (serviceIdArg: string) => {
    if (earlier.has(serviceIdArg)) {
      return original(serviceIdArg);
    }
    if (runs.filter((run) => run === 'failed').length < 2) {
      runs.push('failed');
      throw new Error('injected reconcile failure');
    }
    const outcome = await original(serviceIdArg);
    runs.push(outcome);
    return outcome;
  };
  try {
    const service = await createService('retried');
    // The key is retried after 200 ms, then 400 ms; the run after the second failure succeeds.
    await waitFor(() => runs.length >= 3, 'two failed runs and one after them', 10_000);
    assert.deepEqual(runs.slice(0, 2), ['failed', 'failed']);
    assert.ok(['created', 'written', 'kept'].includes(runs[2]), `the retry succeeded (${runs[2]})`);
    await waitForVerdict(service.id, ['converging', null]);
    assert.ok(t.logs.some((line) => line.includes('injected reconcile failure') && line.includes(`service:${service.id}`)), 'the failure is logged with its key');
    const metrics = await (await fetch(`${t.baseUrl}/metrics`)).text();
    const failed = /cloudly_reconciles_total\{scope="service",outcome="failed"\} (\d+)/.exec(metrics);
    assert.ok(failed && Number(failed[1]) >= 2, 'failures are counted');
    for (const name of ['cloudly_reconcile_queue_depth', 'cloudly_reconcile_oldest_pending_seconds', 'cloudly_reconcile_duration_seconds_bucket', 'cloudly_reconcile_leader 1']) {
      assert.ok(metrics.includes(name), `/metrics shows ${name}`);
    }
  } finally {
    verdict.reconcileService = original;
  }
});

test('a service that is gone is skipped: nothing is judged or written for it', async () => {
  assert.equal(await t.cloudly.controllers.verdict.reconcileService('svc-none'), 'kept');
  assert.equal((await refusalOf(() => t.caller.call('getServiceRuntimeStatus', { serviceId: 'svc-none' }))).code, 'not-found');
});

test('after a restart the start-up pass judges every service again', async () => {
  // Its own Cloudly with an hour-long resync: only the start-up pass can catch what changed.
  const own = await startTestCloudly({ reconcileResyncMs: 3_600_000 });
  try {
    const ownCluster = (await own.createCluster('restarted')).cluster.id;
    await own.addNodes(ownCluster, 'n1');
    const { service } = await own.admin.call('createService', { service: { ...spec('restarted'), clusterId: ownCluster } });
    const verdict = () => firstVerdictOf(own, ownCluster);
    await waitFor(async () => (await verdict()) === 'converging/null', 'judged before the restart', 10_000);
    // Past the store, so no trigger fires: the lost trigger of a crash between commit and enqueue.
    await own.cloudly.store.collection(serviceKind).updateOne({ id: service.id }, { $set: { 'runtime.placement.nodeIds': ['gone-node'] } });
    assert.equal(await verdict(), 'converging/null', 'nothing judged it again before the restart');
    await own.restart();
    await waitFor(async () => (await verdict()) === 'refused/no-eligible-node', 'judged by the start-up pass', 10_000);
  } finally {
    await own.stop();
  }
});

test('every derived kind has exactly one controller writing it, and every controller lives beside its domain', async () => {
  const writers = new Map<string, string[]>();
  for (const controller of t.cloudly.reconciler.controllers) {
    assert.ok(controller.writes.length > 0, `${controller.name} says what it writes`);
    for (const kind of controller.writes) {
      writers.set(kind, [...(writers.get(kind) ?? []), controller.name]);
    }
  }
  for (const [kind, names] of writers) {
    assert.equal(names.length, 1, `${kind} is written by ${names.join(', ')}`);
  }
  assert.deepEqual([...writers.keys()].sort(), [
    'CloudlyBackupDrill', 'CloudlyBackupScheduleState', 'CloudlyClusterDesiredState', 'CloudlyClusterIngressRouteTable', 'CloudlyClusterLiveness', 'CloudlyCorestoreCredential',
    'CloudlyPlatformBindingCreationLedger', 'CloudlyRolloutProgress', 'CloudlyRouteAcmeAccount', 'CloudlyRouteAcmeChallenge', 'CloudlyRouteCertificate',
    'CloudlyRuntimeLocalStorageClaim', 'CloudlyRuntimeNetworkProjection', 'CloudlyServiceBackupDeletion', 'CloudlyServiceRuntimeStatus',
  ]);
  // A controller is a file of its domain and never holds the root object.
  const root = path.resolve(import.meta.dirname, '..', 'ts');
  const files = (await fsp.readdir(root, { recursive: true })).filter((name) => name.endsWith('.controller.ts'));
  assert.equal(files.length, t.cloudly.reconciler.controllers.length, `one file per controller: ${files.join(', ')}`);
  for (const file of files) {
    assert.match(file, /^manager\.[a-z]+\/[a-z]+\.controller\.ts$/, `${file} lives beside its domain`);
    const text = await fsp.readFile(path.join(root, file), 'utf8');
    assert.doesNotMatch(text, /classes\.cloudly/, `${file} does not import the root object`);
  }
});

test('the shape the controllers keep: one commit listener and one shared-log reader under the managers', async () => {
  const root = path.resolve(import.meta.dirname, '..', 'ts');
  const sources = await Promise.all((await fsp.readdir(root, { recursive: true }))
    .filter((name) => name.endsWith('.ts'))
    .map(async (name) => ({ name, text: await fsp.readFile(path.join(root, name), 'utf8') })));
  const managers = sources.filter((source) => source.name.startsWith('manager.'));
  const listeners = managers.flatMap((source) => [...source.text.matchAll(/store\.onCommitted\(/g)].map(() => source.name));
  assert.ok(listeners.length <= 1, `store.onCommitted callers under ts/manager.*: ${listeners.join(', ')}`);
  // The shared audit log is read in one place: the change feed.
  const readers = sources.filter((source) => /collection\(auditEventKind\)\s*\.find\(\{ at:/.test(source.text)).map((source) => source.name);
  assert.deepEqual(readers, [path.join('core', 'changefeed.ts')]);
});

test("a relay token rotation wakes no controller (it changes nothing they read); another write of the cluster does, and the rotation is still audited", async () => {
  const { cluster } = await t.createCluster();
  await reconcilerIdle();
  const woken: string[] = [];
  const restore = t.cloudly.reconciler.controllers.map((controllerArg) => {
    const reconcile = controllerArg.reconcile;
    controllerArg.reconcile = async (keyArg, contextArg) => {
      if (keyArg.includes(cluster.id)) {
        woken.push(`${controllerArg.name} ${keyArg}`);
      }
      return reconcile.call(controllerArg, keyArg, contextArg);
    };
    return () => { controllerArg.reconcile = reconcile; };
  });
  try {
    let generation = cluster.generation;
    for (let round = 0; round < 3; round++) {
      const rotated = await t.caller.call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: generation });
      assert.equal(rotated.cluster.relayTokenGeneration, round + 2);
      generation = rotated.cluster.generation;
    }
    await reconcilerIdle();
    assert.deepEqual(woken, [], 'no controller ran for the rotated cluster');
    const { events } = await t.caller.call('getAuditEvents', { filter: { targetId: cluster.id, method: 'rotateClusterRelayToken' } }) as { events: IAuditEvent[] };
    assert.equal(events.length, 3, 'every rotation is audited');
    const { cluster: read } = await t.caller.call('getClusterById', { clusterId: cluster.id });
    assert.deepEqual(Object.keys(read).sort(), ['createdAt', 'generation', 'id', 'name', 'relayTokenGeneration'], 'the bookkeeping mark is not part of the public cluster');

    // Any other change of the cluster moves the mark, and the controllers judge it again.
    const renamed = await t.cloudly.store.swap(clusterKind, cluster.id, generation, { set: { name: `${cluster.name}-renamed` } });
    assert.ok(renamed, 'the rename was written');
    await waitFor(() => woken.length > 0, 'a controller ran for the renamed cluster', 10_000);
    await reconcilerIdle();
  } finally {
    restore.forEach((undo) => undo());
  }
});

test('a change that moves nothing a controller reads wakes only those that read it: a new image runs no projection, certificate or claims run; new routes and replicas do', async () => {
  const { cluster } = await t.createCluster();
  await t.addNodes(cluster.id, 'n1');
  const first = (await t.caller.call('createService', { service: { ...spec('viewed'), clusterId: cluster.id } })).service;
  await reconcilerIdle();
  const woken: string[] = [];
  const restore = t.cloudly.reconciler.controllers.map((controllerArg) => {
    const reconcile = controllerArg.reconcile;
    controllerArg.reconcile = async (keyArg, contextArg) => {
      if (keyArg.includes(cluster.id) || keyArg.includes(first.id)) {
        woken.push(controllerArg.name);
      }
      return reconcile.call(controllerArg, keyArg, contextArg);
    };
    return () => { controllerArg.reconcile = reconcile; };
  });
  const update = async (changeArg: (specArg: IServiceWritableSpec) => IServiceWritableSpec): Promise<string[]> => {
    const { service } = await t.caller.call('getServiceById', { serviceId: first.id });
    woken.length = 0;
    await t.caller.call('updateService', { serviceId: first.id, expectedGeneration: service.generation, service: changeArg({ ...spec('viewed'), clusterId: cluster.id, runtime: service.runtime, ports: service.ports, routes: service.routes }) });
    await reconcilerIdle();
    return [...new Set(woken)].sort();
  };
  try {
    const imageOnly = await update((specArg) => ({ ...specArg, runtime: { ...specArg.runtime, image: 'app:2' } }));
    assert.ok(imageOnly.includes('verdict') && imageOnly.includes('desiredstate'), `the verdict and the desired state read the image: ${imageOnly}`);
    for (const name of ['projections', 'route-certificates', 'claims']) {
      assert.ok(!imageOnly.includes(name), `${name} does not read the image, yet ran: ${imageOnly}`);
    }
    const routed = await update((specArg) => ({ ...specArg, ports: [{ name: 'http', port: 8080, protocol: 'tcp' }], routes: [{ hostname: 'viewed.example.test', targetPort: 'http' }] }));
    assert.ok(routed.includes('projections') && routed.includes('route-certificates'), `a new route wakes the projections and the certificates: ${routed}`);
    const scaled = await update((specArg) => ({ ...specArg, runtime: { ...specArg.runtime, replicas: 2 } }));
    assert.ok(scaled.includes('projections'), `new replicas wake the projections: ${scaled}`);
    assert.ok(!scaled.includes('route-certificates'), `replicas are not read by the certificates: ${scaled}`);
  } finally {
    restore.forEach((undo) => undo());
  }
  // The skipped changes are counted for operators.
  const text = await (await fetch(`${t.baseUrl}/metrics?name=cloudly_reconcile_unchanged_inputs_total`)).text();
  assert.match(text, /cloudly_reconcile_unchanged_inputs_total\{controller="projections"\} [1-9]/);
});
