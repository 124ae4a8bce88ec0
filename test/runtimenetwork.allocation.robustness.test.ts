import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { startSharedDatabase, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { placeServiceReplicas, deriveServiceWorkloads, type IAddressBlockEntry } from '../ts/manager.runtimenetwork/allocation.js';
import { addressBlockKind, deriveServiceAllocation, type IAddressBlockDocument } from '../ts/manager.runtimenetwork/leases.js';
import { serviceKind } from '../ts/manager.service/service.manager.js';
import type { IRuntimeNetworkAddressPlan } from '../ts/interfaces/data/runtimenetworkaddressplan.js';
import type { IService, IServiceWritableSpec } from '../ts/interfaces/data/service.js';

/**
 * Robustness of workload lease allocation: a released address becomes free after its withdrawal
 * window even across a restart; two Cloudly instances allocating for the same workloads at once
 * leave each workload exactly one lease and agree on it; replica placement is deterministic and
 * keeps a workload's lease while its node remains.
 */

/** Pool 192.0.2.128/29: .129-.134 can be handed out. */
const plan: IRuntimeNetworkAddressPlan = {
  authorityId: 'authority-1',
  revision: 1,
  prefixes: ['192.0.2.0/24'],
  pools: [{ id: 'small', prefix: '192.0.2.128/29' }],
  vpn: { hubPrefix: '192.0.2.0/28', peerPrefix: '192.0.2.64/26' },
  hubs: [],
  platformEndpoints: [{ id: 'relay', address: '192.0.2.17', protocol: 'tcp', port: 443 }],
};
const widePlan: IRuntimeNetworkAddressPlan = { ...plan, pools: [{ id: 'wide', prefix: '198.51.100.0/24' }], prefixes: ['192.0.2.0/24', '198.51.100.0/24'] };

const serviceSpec = (clusterIdArg: string, nameArg: string, replicasArg: number): IServiceWritableSpec => ({
  name: nameArg,
  organizationId: 'org-1',
  clusterId: clusterIdArg,
  runtime: { image: 'registry.example/app:1', replicas: replicasArg, profile: { runAs: null }, placement: { nodeIds: [] } },
  volumes: [],
});

const createService = async (tArg: ITestCloudly, clusterIdArg: string, nameArg: string, replicasArg: number): Promise<IService> =>
  (await tArg.caller.call('createService', { service: serviceSpec(clusterIdArg, nameArg, replicasArg) })).service;

/** Sets the replica count directly in the store (no desired-state refresh needed for the allocator to see it). */
const setReplicas = async (tArg: ITestCloudly, serviceIdArg: string, replicasArg: number): Promise<void> => {
  await tArg.cloudly.store.mutate(serviceKind, serviceIdArg, (currentArg) => ({
    kind: 'write', change: { set: { runtime: { ...currentArg!.runtime, replicas: replicasArg } } },
  }));
};

const heldEntries = async (tArg: ITestCloudly) =>
  (await tArg.cloudly.runtimeNetworkManager.leases.readEntries()).filter((entry) => entry.releasedAt === undefined);

describe('a released address becomes free after its withdrawal window across a restart', () => {
  const withdrawalMs = 1_500;

  const fillAndRelease = async (tArg: ITestCloudly) => {
    await tArg.caller.call('setRuntimeNetworkAddressPlan', { plan });
    const { cluster } = await tArg.createCluster('restart');
    await tArg.addNodes(cluster.id, 'n1');
    const first = await createService(tArg, cluster.id, 'first', 6);
    const second = await createService(tArg, cluster.id, 'second', 1);
    const allocation = await tArg.cloudly.runtimeNetworkManager.allocateCluster(cluster.id);
    assert.equal(allocation.shortfall.get(second.id), 1, 'the pool is full: the second service is short');
    await setReplicas(tArg, first.id, 5);
    await tArg.cloudly.runtimeNetworkManager.allocateCluster(cluster.id);
    const released = (await tArg.cloudly.runtimeNetworkManager.leases.readEntries()).find((entry) => entry.releasedAt !== undefined);
    assert.ok(released, 'one lease of the first service is withdrawing');
    return { cluster, second, releasedAt: released.releasedAt!, address: released.address };
  };

  for (const when of ['while Cloudly is down', 'after the restart'] as const) {
    test(`the window ends ${when}: the short service gets the address without anyone asking`, { timeout: 60_000 }, async () => {
      const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-rn-restart-'));
      try {
        const before = await startTestCloudly({ dataDir, runtimeNetworkWithdrawalWindowMs: withdrawalMs });
        let facts: Awaited<ReturnType<typeof fillAndRelease>>;
        try {
          facts = await fillAndRelease(before);
        } finally {
          await before.stop();
        }
        if (when === 'while Cloudly is down') {
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, facts.releasedAt + withdrawalMs - Date.now()) + 100));
        }
        const after = await startTestCloudly({ dataDir, runtimeNetworkWithdrawalWindowMs: withdrawalMs });
        try {
          // Only the stored blocks are read while waiting: that runs no allocation pass.
          await waitFor(async () => (await heldEntries(after)).some((entry) => entry.serviceId === facts.second.id),
            'the short service was allocated the released address', withdrawalMs + 8_000);
          const entry = (await heldEntries(after)).find((candidate) => candidate.serviceId === facts.second.id)!;
          assert.equal(entry.address, facts.address);
          assert.ok(entry.allocatedAt >= facts.releasedAt + withdrawalMs, 'handed out only after the withdrawal window ended');
          const addresses = (await heldEntries(after)).map((candidate) => candidate.address);
          assert.equal(new Set(addresses).size, addresses.length, 'no address is held twice');
        } finally {
          await after.stop();
        }
      } finally {
        await fsp.rm(dataDir, { recursive: true, force: true });
      }
    });
  }
});

describe('two Cloudly instances allocating for the same workloads at once', () => {
  test('each workload holds exactly one lease and both instances answer the same leases', { timeout: 120_000 }, async () => {
    const { shared, stop: stopDatabase } = await startSharedDatabase();
    const a = await startTestCloudly(shared);
    const b = await startTestCloudly(shared);
    try {
      await a.admin.call('setRuntimeNetworkAddressPlan', { plan: widePlan });
      const { cluster } = await a.createCluster('two-instances');
      await a.addNodes(cluster.id, 'n1', 'n2', 'n3');
      // B reads the plan again after its cache of "no plan" runs out.
      await waitFor(async () => (await b.cloudly.runtimeNetworkManager.allocateCluster(cluster.id)).managed, 'B sees the plan', 10_000);
      const services = [await createService(a, cluster.id, 'alpha', 2), await createService(a, cluster.id, 'beta', 2)];
      const wanted = new Map(services.map((service) => [service.id, 2]));
      const allocateBoth = async () => {
        const answers = await Promise.all([a, b, a, b].map((t) => t.cloudly.runtimeNetworkManager.allocateCluster(cluster.id)));
        return answers;
      };
      for (let round = 0; round < 12; round++) {
        // Raise one service and lower the other now and then, then let both instances race.
        const service = services[round % 2];
        const replicas = round % 5 === 4 ? Math.max(1, wanted.get(service.id)! - 2) : wanted.get(service.id)! + 3;
        wanted.set(service.id, replicas);
        await setReplicas(a, service.id, replicas);
        await allocateBoth();
        const held = await heldEntries(a);
        const perReplica = new Map<string, number>();
        for (const entry of held) {
          const key = `${entry.serviceId}/${entry.replica}`;
          perReplica.set(key, (perReplica.get(key) ?? 0) + 1);
        }
        for (const [key, count] of perReplica) {
          assert.equal(count, 1, `round ${round}: replica ${key} holds ${count} leases`);
        }
        for (const [serviceId, replicas] of wanted) {
          assert.equal(held.filter((entry) => entry.serviceId === serviceId).length, replicas, `round ${round}: every replica of ${serviceId} holds a lease`);
        }
        const addresses = held.map((entry) => entry.address);
        assert.equal(new Set(addresses).size, addresses.length, `round ${round}: no address is held twice`);
        const [onA, onB] = await Promise.all([a, b].map((t) => t.cloudly.runtimeNetworkManager.allocateCluster(cluster.id)));
        assert.deepEqual(onA.leases, onB.leases, `round ${round}: both instances answer the same leases`);
      }

      // A duplicate as a race across two blocks would leave it (another instance placed the same
      // workload in another block): every instance keeps the lowest address and releases the other.
      const [victim] = (await a.cloudly.runtimeNetworkManager.allocateCluster(cluster.id)).leases;
      const duplicate: IAddressBlockEntry = {
        address: '198.51.100.250',
        lease: { id: 'wl-duplicate', generation: 1 },
        clusterId: cluster.id,
        serviceId: victim.serviceId,
        nodeId: victim.nodeId,
        replica: victim.replica,
        allocatedAt: Date.now(),
      };
      await a.cloudly.store.mutate(addressBlockKind, 'wide@198.51.100.0', (currentArg) => {
        const entries = [...(JSON.parse(currentArg!.entriesJson) as IAddressBlockEntry[]), duplicate];
        return { kind: 'write', change: { set: { entriesJson: JSON.stringify(entries) } as Partial<IAddressBlockDocument> } };
      });
      const [afterA, afterB] = await Promise.all([a, b].map((t) => t.cloudly.runtimeNetworkManager.allocateCluster(cluster.id)));
      assert.deepEqual(afterA.leases, afterB.leases);
      const kept = afterA.leases.filter((lease) => lease.serviceId === victim.serviceId && lease.replica === victim.replica);
      assert.deepEqual(kept.map((lease) => lease.lease.id), [victim.lease.id], 'the lower address is kept');
      const stored = (await a.cloudly.runtimeNetworkManager.leases.readEntries()).find((entry) => entry.lease.id === 'wl-duplicate');
      assert.equal(typeof stored?.releasedAt, 'number', 'the duplicate is released (withdrawing), not handed out');
    } finally {
      await a.stop();
      await b.stop();
      await stopDatabase();
    }
  });
});

describe('replica placement', () => {
  const nodes = ['a', 'b', 'c'];

  test('with nothing held it is round robin over the sorted eligible nodes, and deterministic', () => {
    assert.deepEqual(placeServiceReplicas(7, nodes), ['a', 'b', 'c', 'a', 'b', 'c', 'a']);
    assert.deepEqual(placeServiceReplicas(7, nodes), placeServiceReplicas(7, nodes));
    assert.deepEqual(placeServiceReplicas(3, []), []);
    const workloads = deriveServiceWorkloads({ id: 's', runtime: { replicas: 4, placement: { nodeIds: ['c', 'x', 'a'] } } }, nodes);
    assert.deepEqual(workloads.map((workload) => workload.key), ['s/a/0', 's/c/1', 's/a/2', 's/c/3']);
  });

  test('a node added moves no replica; new replicas fill it first', () => {
    const before = placeServiceReplicas(7, nodes);
    const held = new Map(before.map((nodeId, replica) => [replica, nodeId]));
    assert.deepEqual(placeServiceReplicas(7, [...nodes, 'd'], held), before);
    assert.deepEqual(placeServiceReplicas(9, [...nodes, 'd'], held), [...before, 'd', 'd']);
  });

  test('a node removed moves only the replicas it ran, to the least loaded nodes', () => {
    const before = placeServiceReplicas(7, nodes);
    const held = new Map([...before.entries()].filter(([, nodeId]) => nodeId !== 'b'));
    const after = placeServiceReplicas(7, ['a', 'c'], held);
    before.forEach((nodeId, replica) => {
      if (nodeId !== 'b') {
        assert.equal(after[replica], nodeId, `replica ${replica} stays on ${nodeId}`);
      }
    });
    assert.deepEqual(after, ['a', 'c', 'c', 'a', 'a', 'c', 'a']);
  });

  test('deriving a service keeps each held lease whose node remains and releases a second lease of one replica', () => {
    const entry = (replicaArg: number, nodeIdArg: string, addressArg: string): IAddressBlockEntry => ({
      address: addressArg, lease: { id: `wl-${addressArg}`, generation: 1 }, clusterId: 'c', serviceId: 's', nodeId: nodeIdArg, replica: replicaArg, allocatedAt: 1,
    });
    const held = [entry(0, 'a', '10.0.0.1'), entry(1, 'b', '10.0.0.2'), entry(2, 'c', '10.0.0.3'), entry(1, 'a', '10.0.0.9')];
    const derived = deriveServiceAllocation({ id: 's', replicas: 4, placementNodeIds: [], live: true }, ['a', 'c', 'd'], held);
    assert.deepEqual(derived.leases.map((lease) => [lease.replica, lease.nodeId, lease.address]), [[0, 'a', '10.0.0.1'], [1, 'a', '10.0.0.9'], [2, 'c', '10.0.0.3']]);
    assert.deepEqual(derived.release, ['wl-10.0.0.2'], 'the lease on the removed node b is released');
    assert.deepEqual(derived.missing.map((workload) => workload.key), ['s/d/3']);
  });

  test('on a running Cloudly: adding and removing a node keeps every lease whose node remains', { timeout: 60_000 }, async () => {
    const t = await startTestCloudly({ runtimeNetworkWithdrawalWindowMs: 1_000 });
    try {
      await t.caller.call('setRuntimeNetworkAddressPlan', { plan: widePlan });
      const { cluster } = await t.createCluster('placement');
      await t.addNodes(cluster.id, 'a', 'b', 'c');
      const service = await createService(t, cluster.id, 'web', 7);
      const { runtimeNetworkManager } = t.cloudly;
      const before = (await runtimeNetworkManager.allocateCluster(cluster.id)).leases;
      assert.deepEqual(before.map((lease) => [lease.replica, lease.nodeId]).sort((x, y) => (x[0] as number) - (y[0] as number)),
        [[0, 'a'], [1, 'b'], [2, 'c'], [3, 'a'], [4, 'b'], [5, 'c'], [6, 'a']]);
      await t.addNodes(cluster.id, 'd');
      const added = (await runtimeNetworkManager.allocateCluster(cluster.id)).leases;
      assert.deepEqual(added.map((lease) => lease.lease.id).sort(), before.map((lease) => lease.lease.id).sort(), 'no lease moved when a node was added');
      await t.caller.call('removeClusterNode', { clusterId: cluster.id, nodeId: 'b' });
      const removed = (await runtimeNetworkManager.allocateCluster(cluster.id)).leases;
      const kept = new Set(removed.map((lease) => lease.lease.id));
      for (const lease of before) {
        assert.equal(kept.has(lease.lease.id), lease.nodeId !== 'b', `replica ${lease.replica} on ${lease.nodeId}`);
      }
      assert.equal(removed.length, 7);
      assert.deepEqual(removed.filter((lease) => !before.some((old) => old.lease.id === lease.lease.id)).map((lease) => lease.nodeId).sort(), ['d', 'd'],
        'the two replicas of the removed node go to the least loaded node, the one added');
      assert.equal(service.runtime.replicas, 7);
    } finally {
      await t.stop();
    }
  });
});
