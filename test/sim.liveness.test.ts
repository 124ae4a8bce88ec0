import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { openWatcher } from './helpers/watch.js';
import type { IRuntimeLiveness } from '../ts/interfaces/data/serviceruntimestatus.js';

/**
 * kill -9 of a simulated cluster (the `cloudly-sim` executable, a real client of the relay
 * protocol in its own process): past the liveness grace its service reads `unknown` on both
 * overviews and in the watch; the simulator started again brings it back to `converged` by itself.
 */

const projectRoot = path.resolve(import.meta.dirname, '..');
const graceMs = 2_000;

const startSim = (tArg: ITestCloudly, tokenArg: string): ChildProcess => spawn(process.execPath, [
  path.join(projectRoot, 'bin', 'cloudly-sim.js'), '--url', tArg.baseUrl, '--relay-token', tokenArg, '--nodes', '1', '--reconnect-base-ms', '100', '--reconnect-cap-ms', '500',
], { cwd: projectRoot, env: { PATH: process.env.PATH, HOME: process.env.HOME }, stdio: 'ignore' });

describe('a simulated cluster killed with kill -9', () => {
  test('its service leaves converged past the grace, everywhere; started again, it comes back by itself', async () => {
    const t = await startTestCloudly({ relayLivenessGraceMs: graceMs });
    let sim: ChildProcess | null = null;
    try {
      const { cluster, relayToken } = await t.createCluster('killed');
      await t.addNodes(cluster.id, 'node-1');
      const { service } = await t.caller.call('createService', {
        service: {
          name: 'web', organizationId: 'org-1', clusterId: cluster.id, ports: [], routes: [], volumes: [],
          runtime: { image: 'registry.example/web:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
        },
      });
      const status = () => t.caller.call('getServiceRuntimeStatus', { serviceId: service.id });
      sim = startSim(t, relayToken);
      await waitFor(async () => (await status()).status.state === 'converged' && (await status()).unknown === null, 'the simulator converged the service', 30_000);

      const { client, events } = await openWatcher(t.baseUrl, { clusterId: cluster.id });
      try {
        const killedAt = Date.now();
        sim.kill('SIGKILL');
        await waitFor(async () => (await status()).unknown !== null, 'unknown after the kill', graceMs + 20_000);
        console.log(`# simulator killed → service unknown after ${Date.now() - killedAt} ms (grace ${graceMs} ms)`);
        assert.equal((await status()).unknown?.reason, 'relay-disconnected');
        const fleet = (await t.caller.call('getFleetOverview', {})).clusters.find((entry) => entry.cluster.id === cluster.id)!;
        assert.deepEqual([fleet.services.byRuntimeState.converged, fleet.services.byRuntimeState.unknown], [0, 1]);
        const overview = (await t.caller.call('getClusterOverview', { clusterId: cluster.id })).overview;
        assert.equal(overview.services[0].unknown?.reason, 'relay-disconnected');
        await waitFor(() => events.some((event) => event.kind === 'CloudlyServiceRuntimeStatus'
          && (event.document as { unknown?: IRuntimeLiveness | null } | undefined)?.unknown?.reason === 'relay-disconnected'), 'the watcher saw unknown');

        sim = startSim(t, relayToken);
        await waitFor(async () => (await status()).unknown === null, 'current again once the simulator is back', 30_000);
        // The simulator starts its service again ('starting' first): converged once it reports it ready.
        await waitFor(async () => (await status()).status.state === 'converged', 'converged again once the simulator reports it ready', 30_000);
        assert.equal((await status()).unknown, null);
        const lastVerdict = () => events.filter((event) => event.kind === 'CloudlyServiceRuntimeStatus' && event.id === service.id).at(-1);
        await waitFor(() => (lastVerdict()?.document as { unknown?: IRuntimeLiveness | null } | undefined)?.unknown === null, 'the watcher saw it current again');
      } finally {
        client.close();
      }
    } finally {
      sim?.kill('SIGKILL');
      await t.stop();
    }
  });
});
