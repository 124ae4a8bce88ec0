import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { armFailpoint } from '../ts/core/failpoints.js';
import { connectHintedRelay, type TDesiredStateHint } from './helpers/desiredstate.js';
import { designationRequest, prepareIngressCluster, relayOrigin, type IIngressCluster } from './ingress.fixture.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import { clusterIngressEnvironmentNames } from '../ts/interfaces/data/clusteringress.js';

/**
 * A relay's registration carries its origin, which the ingress part of the desired state uses.
 * A registration that commits while a computation of its cluster runs must leave the published
 * desired state (and the relay's last hint) matching the origin stored last, and a relay that
 * reconnects with the origin it had costs no computation at all: its new socket is told the
 * published revision, and its registration, which leaves the announcement as it was, queues nothing.
 */

type THint = TDesiredStateHint;

describe('desired state when a relay registers during a computation', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly(); });
  after(async () => { await t.stop(); });

  const hintedRelay = (clusterIdArg: string, tokenArg: string, hintsArg: THint[]): Promise<CloudlyRelayClient> =>
    connectHintedRelay(t, clusterIdArg, tokenArg, hintsArg);
  const register = (relayArg: CloudlyRelayClient, originArg: string) =>
    relayArg.fire('registerClusterRelay', {
      registration: { origin: originArg, version: '1.0.0', protocol: 'cluster-relay/1' },
    });
  const designated = async (nameArg: string): Promise<IIngressCluster> => {
    const cluster = await prepareIngressCluster(t, nameArg);
    await t.admin.call('designateClusterIngress', { designation: designationRequest(cluster) });
    await t.cloudly.desiredStateManager.settled(cluster.clusterId);
    return cluster;
  };
  const fresh = async (relayArg: CloudlyRelayClient) => {
    const answer = await relayArg.fire('getClusterPlatformDesiredState', {});
    assert.equal(answer.unchanged, false);
    return (answer as Extract<typeof answer, { unchanged: false }>).desiredState;
  };
  const originIn = (stateArg: Awaited<ReturnType<typeof fresh>>): unknown =>
    stateArg.ingress?.spec?.nodes[0].environment[clusterIngressEnvironmentNames.relayOrigin];
  const paused = () => {
    let release!: () => void;
    const point = armFailpoint('desiredstate.compute.afterOriginRead', { kind: 'pause', until: new Promise<void>((resolve) => { release = resolve; }) }, { times: 1 });
    return { point, release };
  };

  test('an origin changed back while a computation that read the other one runs: the last hint carries the origin stored last', async () => {
    const cluster = await designated('back-and-forth');
    const hints: THint[] = [];
    cluster.relay.close();
    const relay = await hintedRelay(cluster.clusterId, cluster.relayToken, hints);
    await register(relay, relayOrigin);
    await t.cloudly.desiredStateManager.settled(cluster.clusterId);
    assert.deepEqual(originIn(await fresh(relay)), { value: relayOrigin }, 'the desired state starts with the first origin');

    // The change to another origin computes and stops right after reading it; meanwhile the relay
    // registers its first origin again. That commit must not be judged against what the earlier
    // computation used while the running one, which read the other origin, can still publish.
    const { point, release } = paused();
    await register(relay, 'https://relay.moved.example.com');
    await waitFor(() => point.hits() === 1, 'the computation read the moved origin');
    await register(relay, relayOrigin);
    release();
    await t.cloudly.desiredStateManager.settled(cluster.clusterId);

    const state = await fresh(relay);
    assert.deepEqual(originIn(state), { value: relayOrigin }, 'the desired state names the origin registered last');
    await waitFor(() => hints.at(-1)?.digest === state.digest, 'the last hint carries the current digest');
    assert.equal(hints.at(-1)!.revision, state.revision);
  });

  test('a relay reconnecting with its origin unchanged costs no computation: it is hinted the published revision', async () => {
    const cluster = await designated('reconnect');
    const manager = t.cloudly.desiredStateManager;
    cluster.relay.close();
    await waitFor(() => t.cloudly.relays.sessionsOf(cluster.clusterId).length === 0, 'the old socket gone');
    await manager.settled(cluster.clusterId);

    const before = manager.computations;
    const hints: THint[] = [];
    const relay = await hintedRelay(cluster.clusterId, cluster.relayToken, hints);
    await register(relay, relayOrigin);
    await waitFor(() => hints.length > 0, 'the new socket is hinted');
    await manager.settled(cluster.clusterId);
    await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the controllers have nothing owed');
    assert.equal(manager.computations - before, 0, 'no computation for the reconnect: the registration left the announcement as it was');
    const state = await fresh(relay);
    assert.equal(hints.at(-1)!.digest, state.digest, 'and the hint it got is current');
  });
});
