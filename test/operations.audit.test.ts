import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { clusterDesiredStateKind } from '../ts/manager.desiredstate/desiredstate.manager.js';
import { addClusterWorld, chunked, descriptorOf } from './backup.fixture.js';
import { stateDigest } from './helpers/state.js';
import { designationRequest, prepareIngressCluster } from './ingress.fixture.js';
import { auditEventKind } from '../ts/core/store.js';
import { withoutPaths } from '../ts/core/operationcontext.js';
import type { IAuditEvent } from '../ts/interfaces/data/audit.js';
import type { IReq_Admin_GetAuditEvents } from '../ts/interfaces/requests/audit.js';
import type { IReq_Relay_Cloudly_ReportClusterNode } from '../ts/interfaces/requests/cluster.js';
import type { IRuntimeNetworkAddressPlan } from '../ts/interfaces/data/runtimenetworkaddressplan.js';
import type {
  IReq_Admin_CreateServiceBackup,
  IReq_Cloudly_Relay_BackupClusterService,
  IServiceBackupRecord,
} from '../ts/interfaces/requests/backup.js';
import type { TUntypedContract } from '../ts/client/admin.js';
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { assertFieldProblems } from './helpers/refusals.js';

const auditOf = async (tArg: ITestCloudly, requestArg: Omit<IReq_Admin_GetAuditEvents['request'], 'identity'> = {}) =>
  tArg.caller.call('getAuditEvents', requestArg);

const eventsFor = async (tArg: ITestCloudly, targetIdArg: string, targetKindArg?: string): Promise<IAuditEvent[]> =>
  (await auditOf(tArg, { filter: { targetId: targetIdArg, ...(targetKindArg ? { targetKind: targetKindArg } : {}) } })).events;

const plan: IRuntimeNetworkAddressPlan = {
  authorityId: 'authority-1',
  revision: 1,
  prefixes: ['192.0.2.0/24'],
  pools: [{ id: 'workloads', prefix: '192.0.2.128/25' }],
  vpn: { hubPrefix: '192.0.2.0/28', peerPrefix: '192.0.2.64/26' },
  hubs: [],
  platformEndpoints: [{ id: 'corestore', address: '192.0.2.17', protocol: 'tcp', port: 3000 }],
};

describe('audit log: every committed change, once, with its actor', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly(); });
  after(async () => { await t.stop(); });

  test('a creation and an update each appear once, with the admin, the method and the generations; a refused change appears not at all', async () => {
    const { cluster } = await t.createCluster('audited');
    const rotated = await t.caller.call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: 1 });
    const stale = await refusalOf(() => t.caller.call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: 1 }));
    assert.equal(stale.code, 'conflict');
    const events = await eventsFor(t, cluster.id, 'CloudlyCluster');
    assert.deepEqual(events.map((event) => [event.method, event.outcome, event.generationBefore, event.generationAfter]), [
      ['rotateClusterRelayToken', 'updated', 1, 2],
      ['createCluster', 'created', 0, 1],
    ]);
    for (const event of events) {
      assert.deepEqual(event.actor, { kind: 'admin', id: t.identity.userId });
      assert.deepEqual(event.target, { kind: 'CloudlyCluster', id: cluster.id });
    }
    assert.equal(rotated.cluster.generation, 2);
    // Never a value of the document: no token hash, no token.
    assert.equal(JSON.stringify(events).includes(rotated.relayToken), false);
    assert.equal(JSON.stringify(events).includes('relayTokenHash'), false);
  });

  test('an update shows the fields it changed, before → after, for kinds that list them; never a secret', async () => {
    const { cluster } = await t.createCluster('audited-changes');
    await t.addNodes(cluster.id, 'ac-1');
    const { service } = await t.caller.call('createService', {
      service: { name: 'ac-app', organizationId: 'org1', clusterId: cluster.id, runtime: { image: 'app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['ac-1'] } }, volumes: [] },
    });
    const { name, organizationId, clusterId, runtime, volumes } = service;
    await t.caller.call('updateService', {
      serviceId: service.id, expectedGeneration: service.generation,
      service: { name, organizationId, clusterId, runtime: { ...runtime, image: 'app:2', replicas: 2 }, volumes },
    });
    const [update, creation] = await eventsFor(t, service.id, 'CloudlyService');
    assert.equal(update.outcome, 'updated');
    assert.deepEqual(update.changed, [
      { field: 'runtime.image', before: 'app:1', after: 'app:2' },
      { field: 'runtime.replicas', before: 1, after: 2 },
      { field: 'specRevision', before: 1, after: 2 },
    ]);
    assert.equal(creation.changed, undefined, 'a creation lists no change');

    // A token rotation shows which generation is current, never the hash or the token.
    const rotated = await t.caller.call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: 1 });
    const [rotation] = await eventsFor(t, cluster.id, 'CloudlyCluster');
    assert.deepEqual(rotation.changed, [{ field: 'relayTokenGeneration', before: 1, after: 2 }]);
    assert.ok(!JSON.stringify(rotation).includes(rotated.relayToken));

    // An account's role shows; its password change shows nothing of the hash.
    const { user } = await t.caller.call('createUser', { username: 'audited-changes', password: 'audited-changes-password-0', role: 'user' });
    await t.caller.call('setUserRole', { userId: user.userId, expectedGeneration: user.generation, role: 'admin' });
    const [roleChange] = await eventsFor(t, user.userId, 'CloudlyAdminUser');
    assert.deepEqual(roleChange.changed, [{ field: 'role', before: 'user', after: 'admin' }]);
    const stored = await t.cloudly.store.find(auditEventKind, { 'target.id': user.userId });
    assert.ok(!JSON.stringify(stored).includes('passwordHash') && !JSON.stringify(stored).includes('scrypt'));
  });

  test('a relay\'s change is attributed to relay:<clusterId>', async () => {
    const { cluster, relayToken } = await t.createCluster('relay-actor');
    await t.caller.call('addClusterNode', { clusterId: cluster.id, name: 'n-1', nodeId: 'relay-actor-n-1' });
    const relay = await t.connectRelay(relayToken);
    await relay.fire('reportClusterNode', {
      report: { nodeId: 'relay-actor-n-1', name: 'n-1', hostAddresses: ['192.0.2.9'] },
    } as IReq_Relay_Cloudly_ReportClusterNode['request']);
    const events = (await auditOf(t, { filter: { actorId: `relay:${cluster.id}` } })).events;
    assert.ok(events.length >= 1, 'the node report is audited');
    assert.ok(events.every((event) => event.actor.kind === 'relay' && event.method === 'reportClusterNode'));
  });

  test('an address plan write and a service deletion each appear once; a replay or a refusal does not', async () => {
    const setPlan = (planArg: IRuntimeNetworkAddressPlan) =>
      t.caller.call('setRuntimeNetworkAddressPlan', { plan: planArg });
    assert.equal((await setPlan(plan)).replayed, false);
    assert.equal((await setPlan(plan)).replayed, true);
    assert.equal((await refusalOf(() => setPlan({ ...plan, revision: 5 }))).code, 'conflict');
    const planEvents = await eventsFor(t, 'runtime-network-address-plan', 'CloudlyRuntimeNetworkAddressPlan');
    assert.deepEqual(planEvents.map((event) => [event.method, event.outcome, event.generationBefore, event.generationAfter, event.actor.id]), [
      ['setRuntimeNetworkAddressPlan', 'created', 0, 1, t.identity.userId],
    ]);

    const { cluster } = await t.createCluster('audited-deletions');
    const create = async (nameArg: string) => (await t.caller.call<TUntypedContract>('createService', {
      service: { name: nameArg, organizationId: 'org-1', clusterId: cluster.id, runtime: { image: 'registry.example/app:1', replicas: 0, profile: { runAs: null }, placement: { nodeIds: [] } }, volumes: [] },
    }) as { service: { id: string; generation: number } }).service;
    const pending = await create('audited-pending');
    const forced = await create('audited-forced');
    await t.caller.call<TUntypedContract>('deleteService', { serviceId: pending.id, expectedGeneration: pending.generation });
    // Asked again at the generation that is gone: refused, and not audited.
    assert.equal((await refusalOf(() => t.caller.call<TUntypedContract>('deleteService', { serviceId: pending.id, expectedGeneration: pending.generation }))).code, 'conflict');
    await t.caller.call<TUntypedContract>('deleteService', { serviceId: forced.id, expectedGeneration: forced.generation, force: true });
    const outcomes = async (serviceIdArg: string) => (await eventsFor(t, serviceIdArg, 'CloudlyService'))
      .map((event) => [event.method, event.outcome, event.generationBefore, event.generationAfter, event.actor.id]);
    assert.deepEqual(await outcomes(pending.id), [
      ['deleteService', 'updated', 1, 2, t.identity.userId],
      ['createService', 'created', 0, 1, t.identity.userId],
    ]);
    assert.deepEqual(await outcomes(forced.id), [
      ['deleteService', 'removed', 1, null, t.identity.userId],
      ['createService', 'created', 0, 1, t.identity.userId],
    ]);
  });

  test('pages newest first with a cursor, filters narrow, and a foreign cursor or a bad filter is refused by name', async () => {
    for (let index = 0; index < 5; index++) {
      await t.createCluster(`page-${index}`);
    }
    const created = (await auditOf(t, { filter: { method: 'createCluster' } })).events;
    const first = await auditOf(t, { limit: 2, filter: { method: 'createCluster' } });
    assert.equal(first.events.length, 2);
    assert.ok(first.nextCursor);
    const second = await auditOf(t, { limit: 2, cursor: first.nextCursor, filter: { method: 'createCluster' } });
    const rest = await auditOf(t, { limit: 1000, cursor: second.nextCursor, filter: { method: 'createCluster' } });
    assert.deepEqual([...first.events, ...second.events, ...rest.events].map((event) => event.id), created.map((event) => event.id));
    assert.equal(rest.nextCursor, undefined);
    const times = created.map((event) => event.at);
    assert.deepEqual(times, [...times].sort((a, b) => b - a));
    const until = await auditOf(t, { filter: { method: 'createCluster', until: 0 } });
    assert.deepEqual(until.events, []);
    const bad = await refusalOf(() => auditOf(t, { cursor: 'not-a-cursor', limit: 0, filter: { colour: 'red' } as never }));
    assertFieldProblems(bad, [
      ['request.cursor', 'field-invalid', 'is not a cursor this server handed out'],
      ['request.limit', 'field-invalid', 'must be an integer from 1 to 1000'],
      ['request.filter.colour', 'field-unknown', 'is not a filter of the audit log'],
    ]);
  });

  test('a backup order appears once per document it commits, with the admin; a refused order appears not at all', async () => {
    const world = await addClusterWorld(t, 'audit-backup');
    world.relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async () => ({ snapshots: [] }));
    const ordered = await t.caller.call('createServiceBackup', {
      clusterId: world.clusterId, serviceId: world.service.id, nodeId: world.nodeId, backupId: 'audited-backup',
    });
    await followOperation(t.admin, ordered.operation!.operationId, { timeoutMs: 20_000 });
    const created = (await eventsFor(t, 'audited-backup', 'CloudlyServiceBackup')).filter((event) => event.outcome === 'created');
    assert.deepEqual(created.map((event) => [event.method, event.actor, event.generationBefore, event.generationAfter]), [
      ['createServiceBackup', { kind: 'admin', id: t.identity.userId }, 0, 1],
    ]);
    const operationEvents = (await eventsFor(t, ordered.operation!.operationId)).filter((event) => event.outcome === 'created');
    assert.equal(operationEvents.length, 1, 'the operation is recorded once');
    const refused = await refusalOf(() => t.caller.call('createServiceBackup', {
      clusterId: world.clusterId, serviceId: world.service.id, nodeId: 'audit-backup-missing', backupId: 'audited-refused',
    }));
    assert.deepEqual(refused.reasons, ['node-not-found']);
    assert.deepEqual(await eventsFor(t, 'audited-refused'), []);
  });

  test('events survive a restart, and retention forgets only what is older than it', async () => {
    const { cluster } = await t.createCluster('kept');
    await t.restart();
    assert.equal((await eventsFor(t, cluster.id, 'CloudlyCluster')).length, 1);
    assert.equal(await t.cloudly.auditManager.sweep(Date.now()), 0);
    const retentionMs = t.cloudly.config.auditRetentionDays * 24 * 3600_000;
    assert.ok(await t.cloudly.auditManager.sweep(Date.now() + retentionMs + 60_000) > 0);
    assert.deepEqual(await eventsFor(t, cluster.id, 'CloudlyCluster'), []);
  });
});

describe('audit log: a change committed just before a crash still gets its event', () => {
  test('an event missing after the commit is appended at start-up, and a stamped removal is finished', async () => {
    const t = await startTestCloudly();
    try {
      const { cluster } = await t.createCluster('crashy');
      await t.caller.call('addClusterNode', { clusterId: cluster.id, name: 'gone', nodeId: 'crashy-gone' });
      const raw = t.cloudly.database.mongoDb;
      // The state a process leaves when it dies between a commit and its audit append ...
      const deleted = await raw.collection(auditEventKind.collectionName).deleteMany({ 'target.kind': 'CloudlyCluster', 'target.id': cluster.id });
      assert.equal(deleted.deletedCount, 1);
      // ... and between a removal's stamp and its delete.
      const node = await raw.collection('CloudlyClusterNode').findOne({ nodeId: 'crashy-gone' });
      await raw.collection('CloudlyClusterNode').updateOne({ nodeId: 'crashy-gone' }, {
        $set: { generation: (node!.generation as number) + 1, _audit: { at: Date.now(), actor: { kind: 'admin', id: t.identity.userId }, method: 'removeClusterNode', generationBefore: node!.generation, removing: true } },
      });
      await t.restart();
      const clusterEvents = await eventsFor(t, cluster.id, 'CloudlyCluster');
      assert.deepEqual(clusterEvents.map((event) => [event.method, event.outcome, event.generationAfter]), [['createCluster', 'created', 1]]);
      assert.equal(await t.cloudly.database.mongoDb.collection('CloudlyClusterNode').countDocuments({ nodeId: 'crashy-gone' }), 0);
      const nodeEvents = await eventsFor(t, node!.id as string, 'CloudlyClusterNode');
      assert.deepEqual(nodeEvents.map((event) => [event.method, event.outcome, event.generationAfter]), [
        ['removeClusterNode', 'removed', null],
        ['addClusterNode', 'created', 1],
      ]);
      // Reconciling again appends nothing twice.
      await t.restart();
      assert.equal((await eventsFor(t, cluster.id, 'CloudlyCluster')).length, 1);
    } finally {
      await t.stop();
    }
  });
});

describe('dry run: the same decision, nothing written', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly(); });
  after(async () => { await t.stop(); });

  test('each dry-run answer equals the real answer that follows it, less the ids and secrets only the real call makes (named in generatedOnCommit), and leaves the state and the audit log as they were', async () => {
    const { cluster } = await t.createCluster('dry');
    // Services with no replicas: deleting them changes no lease and no projection in the background.
    const dryService = async (nameArg: string) => (await t.caller.call<TUntypedContract>('createService', {
      service: { name: nameArg, organizationId: 'org-1', clusterId: cluster.id, runtime: { image: 'registry.example/app:1', replicas: 0, profile: { runAs: null }, placement: { nodeIds: [] } }, volumes: [] },
    }) as { service: { id: string; generation: number } }).service;
    const pendingDeletion = await dryService('dry-pending');
    const forcedDeletion = await dryService('dry-forced');
    const ingress = await prepareIngressCluster(t, 'dry-ingress');
    const cases: Array<{ method: string; request: Record<string, unknown>; comparable: (answerArg: Record<string, unknown>) => unknown; generated?: string[] }> = [
      {
        method: 'rotateClusterRelayToken',
        request: { clusterId: cluster.id, expectedGeneration: 1 },
        comparable: (answerArg) => answerArg,
        generated: ['relayToken'],
      },
      {
        method: 'addClusterNode',
        request: { clusterId: cluster.id, name: 'dry-node', nodeId: 'dry-node-1' },
        comparable: (answerArg) => {
          const { node } = answerArg as { node: Record<string, unknown> };
          return { node: { ...node, createdAt: typeof node.createdAt } };
        },
      },
      {
        method: 'setRuntimeNetworkAddressPlan',
        request: { plan },
        comparable: (answerArg) => answerArg,
      },
      {
        method: 'designateClusterIngress',
        request: { designation: designationRequest(ingress) },
        comparable: (answerArg) => {
          const { designation, ...rest } = answerArg as { designation: { acceptedAt: number; digest: string; credential: { secretVersion: { secretVersionId: string } } } };
          const minted = designation.credential.secretVersion.secretVersionId;
          const masked = { ...rest, designation: { ...designation, acceptedAt: typeof designation.acceptedAt, digest: typeof designation.digest } };
          return JSON.parse(JSON.stringify(masked).replaceAll(minted, 'minted-secret-version'));
        },
      },
      {
        method: 'addClusterNode',
        request: { clusterId: cluster.id, name: 'dry-node-made' },
        comparable: (answerArg) => {
          const { node } = answerArg as { node: Record<string, unknown> };
          return { node: { ...node, createdAt: typeof node.createdAt } };
        },
        generated: ['node.id'],
      },
      {
        method: 'createCluster',
        request: { name: 'dry-created' },
        comparable: (answerArg) => {
          const created = answerArg as { cluster: Record<string, unknown> };
          return { ...created, cluster: { ...created.cluster, createdAt: typeof created.cluster.createdAt } };
        },
        generated: ['cluster.id', 'relayToken'],
      },
      {
        method: 'createService',
        request: { service: { name: 'dry-service', organizationId: 'org-1', clusterId: cluster.id, runtime: { image: 'registry.example/app:1', replicas: 0, profile: { runAs: null }, placement: { nodeIds: [] } }, volumes: [] } },
        comparable: (answerArg) => {
          const { service } = answerArg as { service: Record<string, unknown> };
          return { service: { ...service, createdAt: typeof service.createdAt, updatedAt: typeof service.updatedAt } };
        },
        generated: ['service.id'],
      },
      {
        method: 'deleteService',
        request: { serviceId: pendingDeletion.id, expectedGeneration: pendingDeletion.generation },
        comparable: (answerArg) => answerArg,
      },
      {
        method: 'deleteService',
        request: { serviceId: forcedDeletion.id, expectedGeneration: forcedDeletion.generation, force: true },
        comparable: (answerArg) => answerArg,
      },
    ];
    for (const entry of cases) {
      // The real call of the case before publishes the cluster's desired state in the background.
      await t.cloudly.desiredStateManager.settled(cluster.id);
      await t.cloudly.desiredStateManager.settled(ingress.clusterId);
      // ... and the address plan's refresh of the ingress cluster's node projections: wait until nothing moves.
      let before = await stateDigest(t);
      for (let earlier = ''; earlier !== before;) {
        earlier = before;
        await new Promise((resolve) => setTimeout(resolve, 150));
        before = await stateDigest(t);
      }
      const auditBefore = (await auditOf(t, { limit: 1000 })).events.length;
      const dry = await t.caller.call<TUntypedContract>(entry.method, { ...entry.request, dryRun: true }) as Record<string, unknown>;
      assert.equal(dry.dryRun, true, entry.method);
      assert.equal(await stateDigest(t), before, `${entry.method}: a dry run wrote`);
      assert.equal((await auditOf(t, { limit: 1000 })).events.length, auditBefore, `${entry.method}: a dry run was audited`);
      const real = await t.caller.call<TUntypedContract>(entry.method, entry.request) as Record<string, unknown>;
      const { dryRun: _dryRun, generatedOnCommit, ...dryAnswer } = dry;
      const generated = entry.generated ?? [];
      assert.deepEqual(generatedOnCommit, entry.generated, `${entry.method}: what only the real call makes is named`);
      // Neither a secret nor an id that will never exist: the dry answer holds none of them.
      assert.deepEqual(withoutPaths(dry, generated), dry, `${entry.method}: the dry answer holds nothing only the real call makes`);
      assert.deepEqual(entry.comparable(dryAnswer), entry.comparable(withoutPaths(real, generated) as Record<string, unknown>), entry.method);
      for (const path of generated) {
        assert.notDeepEqual(withoutPaths(real, [path]), real, `${entry.method}: the real answer has ${path}`);
      }
    }
  });

  test('a dry run is refused exactly as the real call would be', async () => {
    const { cluster } = await t.createCluster('dry-refusals');
    const dry = await refusalOf(() => t.caller.call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: 9, dryRun: true }));
    const real = await refusalOf(() => t.caller.call('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: 9 }));
    assert.deepEqual(dry, real);
    // A name in use: the dry run meets the name's reservation as the real call does.
    const dryTaken = await refusalOf(() => t.caller.call('createCluster', { name: 'dry-refusals', dryRun: true }));
    const realTaken = await refusalOf(() => t.caller.call('createCluster', { name: 'dry-refusals' }));
    assert.equal(dryTaken.code, 'conflict');
    assert.deepEqual(dryTaken, realTaken);
    const badFlag = await refusalOf(() => t.caller.call<TUntypedContract>('createCluster', { name: 'x', dryRun: 'yes' }));
    assertFieldProblems(badFlag, [['request.dryRun', 'field-invalid', 'must be a boolean']]);
  });

  test('a dry run that would call a relay stops before the call: no relay is asked, nothing is recorded', async () => {
    const world = await addClusterWorld(t, 'drybackup');
    // The relay that just connected has its cluster's desired state published in the background;
    // let that land before the state digest is taken.
    await waitFor(async () => (await t.cloudly.store.get(clusterDesiredStateKind, world.clusterId)) !== null, 'desired state published');
    await t.cloudly.desiredStateManager.settled(world.clusterId);
    let relayCalls = 0;
    world.relay.addHandler('backupClusterService', async () => {
      relayCalls++;
      return { snapshots: [] };
    });
    const before = await stateDigest(t);
    const answer = await t.caller.call('createServiceBackup', {
      clusterId: world.clusterId, serviceId: world.service.id, nodeId: world.nodeId, dryRun: true,
    } as unknown as IReq_Admin_CreateServiceBackup['request']) as unknown as Record<string, unknown>;
    assert.deepEqual(answer, { dryRun: true, haltedBefore: 'relay call backupClusterService' });
    assert.equal(relayCalls, 0);
    assert.equal(await stateDigest(t), before);
  });

  test('every backup orchestration stops a dry run before its relay call, and refuses a dry run exactly as the real call', async () => {
    const world = await addClusterWorld(t, 'drybackups');
    await waitFor(async () => (await t.cloudly.store.get(clusterDesiredStateKind, world.clusterId)) !== null, 'desired state published');
    const closureBytes = Buffer.from('a closure to restore from');
    const relayCalls: string[] = [];
    world.relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
      relayCalls.push('backupClusterService');
      await sendServiceDatabaseClosure(world.relay, {
        backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closureBytes),
      }, chunked(closureBytes));
      return { snapshots: [{ type: 'database', snapshotId: 's1', resourceName: 'db', databaseName: 'app', createdAt: 1, sizeBytes: closureBytes.byteLength }] };
    });
    for (const method of ['restoreClusterService', 'coreflowPrepareIsolatedRestore', 'coreflowExecuteIsolatedRestore']) {
      world.relay.addHandler(method, async () => {
        relayCalls.push(method);
        throw new Error('a dry run must not reach the relay');
      });
    }
    const ordered = await t.caller.call('createServiceBackup', {
      clusterId: world.clusterId, serviceId: world.service.id, nodeId: world.nodeId, backupId: 'dry-source',
    });
    const { backup } = outcomeOf<{ backup: IServiceBackupRecord }>(await followOperation(t.admin, ordered.operation!.operationId, { timeoutMs: 20_000 }));
    assert.equal(backup.state, 'completed');
    assert.ok(backup.closure, 'the closure is stored');
    await t.cloudly.desiredStateManager.settled(world.clusterId);
    relayCalls.length = 0;
    const mappings = [{ type: 'volume', source: { resourceName: 'data', mountPath: '/data' }, target: { resourceName: 'scratch', mountPath: '/scratch' } }];
    const halting: Array<{ method: string; request: Record<string, unknown>; haltedBefore: string }> = [
      { method: 'restoreServiceBackup', request: { backupId: 'dry-source', clear: true }, haltedBefore: 'relay call restoreClusterService' },
      { method: 'createIsolatedRestore', request: { backupId: 'dry-source', targetNodeName: world.nodeId, restoreId: 'dry-restore', mappings }, haltedBefore: 'relay call coreflowPrepareIsolatedRestore' },
    ];
    for (const entry of halting) {
      const before = await stateDigest(t);
      const auditBefore = (await auditOf(t, { limit: 1000 })).events.length;
      const answer = await t.caller.call<TUntypedContract>(entry.method, { ...entry.request, dryRun: true });
      assert.deepEqual(answer, { dryRun: true, haltedBefore: entry.haltedBefore }, entry.method);
      assert.equal(await stateDigest(t), before, `${entry.method}: a dry run wrote`);
      assert.equal((await auditOf(t, { limit: 1000 })).events.length, auditBefore, `${entry.method}: a dry run was audited`);
    }
    assert.deepEqual(relayCalls, []);
    // Refusals: the same code and reasons with and without dryRun.
    const refused: Array<{ method: string; request: Record<string, unknown> }> = [
      { method: 'createServiceBackup', request: { clusterId: world.clusterId, serviceId: 'svc-missing', nodeId: world.nodeId } },
      { method: 'createServiceBackup', request: { clusterId: world.clusterId, serviceId: world.service.id, nodeId: 'node-missing' } },
      { method: 'restoreServiceBackup', request: { backupId: 'backup-missing' } },
      { method: 'createIsolatedRestore', request: { backupId: 'backup-missing', targetNodeName: world.nodeId, mappings } },
      { method: 'stepIsolatedRestore', request: { restoreId: 'restore-missing', operation: 'status' } },
      { method: 'stepIsolatedRestore', request: { restoreId: 'dry-restore', operation: 'execute' } },
    ];
    for (const entry of refused) {
      const dry = await refusalOf(() => t.caller.call<TUntypedContract>(entry.method, { ...entry.request, dryRun: true }));
      const real = await refusalOf(() => t.caller.call<TUntypedContract>(entry.method, entry.request));
      assert.deepEqual(dry, real, entry.method);
    }
    assert.deepEqual(relayCalls, []);
  });
});
