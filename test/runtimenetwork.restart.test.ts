import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { cloudlyProcessEnv, killHard, startCloudlyProcess, type ICloudlyProcess } from './helpers/process.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IRuntimeNetworkAddressPlan } from '../ts/interfaces/data/runtimenetworkaddressplan.js';
import type { IClusterPlatformDesiredState } from '../ts/interfaces/data/desiredstate.js';

/**
 * A real Cloudly child process is killed (kill -9) the instant it logs that it committed workload
 * leases, which is before the desired state naming them is computed and published. After the
 * restart every lease it committed is still held by the same workload, every workload has exactly
 * one lease, and no address is handed out twice. Three rounds, each killed in a new burst.
 */

const plan: IRuntimeNetworkAddressPlan = {
  authorityId: 'restart-authority',
  revision: 1,
  prefixes: ['10.0.0.0/8'],
  pools: [{ id: 'workloads', prefix: '10.64.0.0/22' }],
  vpn: { hubPrefix: '10.0.0.0/28', peerPrefix: '10.1.0.0/16' },
  hubs: [],
  platformEndpoints: [{ id: 'relay', address: '10.2.0.1', protocol: 'tcp', port: 443 }],
};

/** Kills the child synchronously when its output shows a lease allocation after `fromArg` characters; answers the line. */
const killOnAllocation = (processArg: ICloudlyProcess, fromArg: number): Promise<string> => new Promise((resolve) => {
  const stdout = processArg.child.stdout!;
  let seen = '';
  const onData = (chunkArg: Buffer) => {
    seen += chunkArg.toString();
    const text = processArg.output().slice(fromArg) + seen;
    const line = text.split('\n').find((candidate) => candidate.includes('"msg":"workload leases allocated"'));
    if (line) {
      processArg.child.kill('SIGKILL');
      stdout.off('data', onData);
      resolve(line);
    }
  };
  stdout.on('data', onData);
});

test('a restart between lease allocation and desired-state publication hands no address out twice', { timeout: 180_000 }, async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-leases-restart-'));
  const env = cloudlyProcessEnv(dataDir, { CLOUDLY_LOG_LEVEL: 'info' });
  const committed = new Map<string, string>();
  let clusterId = '';
  let relayToken = '';
  try {
    for (let round = 0; round < 3; round++) {
      const child = await startCloudlyProcess(env);
      const admin = new CloudlyAdminClient(child.baseUrl);
      await admin.login('admin', 'process-admin-password');
      if (round === 0) {
        await admin.call('setRuntimeNetworkAddressPlan', { plan });
        const created = await admin.call('createCluster', { name: 'restart-leases' });
        clusterId = created.cluster.id;
        relayToken = created.relayToken;
        for (const nodeId of ['n1', 'n2', 'n3']) {
          await admin.call('addClusterNode', { clusterId, name: nodeId, nodeId });
        }
      }
      const killed = killOnAllocation(child, child.output().length);
      // A burst of services; the first commit of leases ends the process.
      const burst = Array.from({ length: 20 }, (_, index) => admin.call('createService', {
        service: {
          name: `round-${round}-${index}`, organizationId: 'org-1', clusterId,
          runtime: { image: 'registry.example/app:1', replicas: 3, profile: { runAs: null }, placement: { nodeIds: [] } },
          volumes: [],
        },
      }).catch(() => null));
      const line = await killed;
      await killHard(child.child);
      await Promise.all(burst);
      admin.close();
      const logged = JSON.parse(line) as { leases: string[]; allocated: number };
      assert.ok(logged.allocated > 0);
      for (const entry of logged.leases) {
        const [workload, address] = entry.split('=');
        committed.set(workload, address);
      }
    }

    // Restart once more and read what the relay is told.
    const child = await startCloudlyProcess(env);
    try {
      const admin = new CloudlyAdminClient(child.baseUrl);
      await admin.login('admin', 'process-admin-password');
      const services = (await admin.call('getServices', {})).services.filter((service) => service.clusterId === clusterId);
      const relay = await CloudlyRelayClient.connect(child.baseUrl, relayToken, { reconnect: false });
      let desired: IClusterPlatformDesiredState | null = null;
      for (let attempt = 0; attempt < 100 && desired === null; attempt++) {
        try {
          const answer = await relay.fire('getClusterPlatformDesiredState', {});
          desired = answer.unchanged ? null : answer.desiredState;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
      assert.ok(desired, 'the relay reads the desired state after the restart');
      const leases = desired.leases;
      // Every workload of every stored service has exactly one lease ...
      const wanted = services.reduce((sum, service) => sum + service.runtime.replicas, 0);
      assert.equal(leases.length, wanted);
      assert.equal(new Set(leases.map((lease) => `${lease.serviceId}/${lease.nodeId}/${lease.replica}`)).size, wanted);
      // ... no address twice ...
      assert.equal(new Set(leases.map((lease) => lease.address)).size, leases.length, 'no address is handed out twice');
      // ... and every lease committed before a kill is still the same workload's.
      const now = new Map(leases.map((lease) => [`${lease.serviceId}/${lease.nodeId}/${lease.replica}`, lease.address]));
      assert.ok(committed.size > 0);
      for (const [workload, address] of committed) {
        if (services.some((service) => workload.startsWith(`${service.id}/`))) {
          assert.equal(now.get(workload), address, `workload ${workload} kept the address committed before the kill`);
        }
      }
      relay.close();
      admin.close();
    } finally {
      await killHard(child.child);
    }
  } finally {
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
