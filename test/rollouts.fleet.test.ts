import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CloudlyAdminClient } from '../ts/client/admin.js';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { openWatcher } from './helpers/watch.js';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';
import type { IRollout } from '../ts/interfaces/data/rollout.js';
import { writableSpecOfService } from '../ts/interfaces/data/servicewritable.js';

/**
 * Rollouts over a simulated fleet (ts/sim, in this process: real relay sockets to a real server):
 * 12 clusters labelled env=prod, each running `web`, `api` and `db`, plus a 13th labelled the same
 * whose relay never connects (dark, `unknown`). On the first cluster (the canary of every rollout
 * here) `api` and `db` are placed on a node that left the cluster, so Cloudly's judge refuses them
 * `no-eligible-node`: the plan predicts it and the real rollout meets it.
 */

const clusterCount = 12;
const graceMs = 1_000;
const image = (tagArg: string) => `registry.example/app:${tagArg}`;

describe('rollouts over a simulated fleet', () => {
  let t: ITestCloudly;
  let fleet: SimFleet;
  const clusterIds: string[] = [];
  let darkClusterId = '';
  const serviceIds: Record<string, string[]> = { web: [], api: [], db: [] };

  const serviceOf = async (serviceIdArg: string) => (await t.caller.call('getServiceById', { serviceId: serviceIdArg })).service;
  const verdictOf = async (serviceIdArg: string) => (await t.caller.call('getServiceRuntimeStatus', { serviceId: serviceIdArg })).status;
  const rolloutOf = async (rolloutIdArg: string): Promise<IRollout> => (await t.caller.call('getRollout', { rolloutId: rolloutIdArg })).rollout;
  const finished = async (rolloutIdArg: string): Promise<IRollout> => {
    let rollout: IRollout | null = null;
    await waitFor(async () => {
      rollout = await rolloutOf(rolloutIdArg);
      return ['completed', 'halted', 'aborted'].includes(rollout.state);
    }, `rollout ${rolloutIdArg} finished`, 90_000);
    return rollout!;
  };

  before(async () => {
    t = await startTestCloudly({ relayLivenessGraceMs: graceMs });
    const tokens: Array<{ name: string; token: string }> = [];
    for (let index = 0; index <= clusterCount; index += 1) {
      const dark = index === clusterCount;
      const { cluster, relayToken } = await t.createCluster(dark ? 'fleet-dark' : `fleet-${String(index + 1).padStart(2, '0')}`);
      await t.caller.call('setClusterLabels', { clusterId: cluster.id, labels: { env: 'prod' }, expectedGeneration: cluster.generation });
      await t.addNodes(cluster.id, 'node-1', 'node-2');
      for (const name of ['web', 'api', 'db']) {
        // The canary's api and db go on node-2, which then leaves the cluster.
        const placement = index === 0 && name !== 'web' ? ['node-2'] : ['node-1'];
        const { service } = await t.caller.call('createService', {
          service: {
            name, organizationId: 'org-1', clusterId: cluster.id, ports: [], routes: [], volumes: [],
            runtime: { image: image('1'), replicas: 1, profile: { runAs: null }, placement: { nodeIds: placement } },
          },
        });
        if (!dark) {
          serviceIds[name].push(service.id);
        }
      }
      await t.caller.call('removeClusterNode', { clusterId: cluster.id, nodeId: 'node-2' });
      if (dark) {
        darkClusterId = cluster.id;
      } else {
        clusterIds.push(cluster.id);
        tokens.push({ name: cluster.name, token: relayToken });
      }
    }
    const { config } = readSimConfig(['--url', t.baseUrl, '--relay-token', tokens[0].token, '--nodes', '1', '--start-delay-ms', '20', '--reconnect-cap-ms', '1000'], {});
    config.tokens = tokens;
    fleet = new SimFleet(config, () => undefined);
    await fleet.start();
    const healthy = [...serviceIds.web, ...serviceIds.api.slice(1), ...serviceIds.db.slice(1)];
    await waitFor(async () => (await Promise.all(healthy.map(verdictOf))).every((status) => status.state === 'converged'), 'the fleet converged', 60_000);
    await waitFor(async () => (await t.caller.call('getFleetOverview', { selector: 'env=prod' })).clusters
      .find((summary) => summary.cluster.id === darkClusterId)?.unknown !== null, 'the dark cluster reads unknown', 30_000);
    assert.deepEqual(await verdictOf(serviceIds.api[0]).then((status) => [status.state, status.reason]), ['refused', 'no-eligible-node']);
  });

  after(async () => {
    await fleet?.stop();
    await t?.stop();
  });

  test('the plan predicts each service, skips the dark cluster, and writes nothing', async () => {
    const before = await Promise.all(serviceIds.api.map(serviceOf));
    const { plan } = await t.caller.call('planRollout', { selector: 'env=prod', serviceName: 'api', change: { image: image('2') } });
    assert.equal(plan.targets.length, clusterCount);
    assert.deepEqual(plan.skipped.map((skip) => [skip.clusterId, skip.reason]), [[darkClusterId, 'cluster-unknown']]);
    const canary = plan.targets.find((target) => target.serviceId === serviceIds.api[0])!;
    assert.deepEqual(canary.predicted, { state: 'refused', reason: 'no-eligible-node' });
    for (const target of plan.targets.filter((candidate) => candidate !== canary)) {
      assert.equal(target.newSpecRevision, target.specRevision + 1);
      assert.deepEqual(target.predicted, { state: 'converging', reason: null }, target.clusterName);
    }
    const refused = await t.caller.call('planRollout', { selector: 'env=prod', serviceName: 'api', change: { replicas: 5000 } });
    assert.equal(refused.plan.targets.length, 0);
    assert.ok(refused.plan.skipped.filter((skip) => skip.reason === 'change-refused').length === clusterCount);
    const missing = await t.caller.call('planRollout', { selector: 'env=prod', serviceName: 'nothing', change: { replicas: 2 } });
    assert.equal(missing.plan.skipped.filter((skip) => skip.reason === 'service-missing').length, clusterCount);
    assert.deepEqual(await Promise.all(serviceIds.api.map(serviceOf)), before, 'the plan changed no service');
  });

  test('all converge: three waves, the first one cluster, completed; the audit names the rollout; its operation and the watch follow it', async () => {
    const { watchChanges, events } = await openWatcher(t.baseUrl, { kinds: ['CloudlyRollout', 'CloudlyRolloutProgress', 'CloudlyOperation'] })
      .then((watcher) => ({ watchChanges: watcher, events: watcher.events }));
    try {
      const { rollout, operation } = await t.caller.call('createRollout', {
        selector: 'env=prod', serviceName: 'web', change: { image: image('2') },
        waves: [{ clusters: 1 }, { percent: 50 }, { percent: 50 }], gate: { timeoutMs: 60_000 }, maxConcurrent: 4,
      });
      assert.deepEqual([operation.operationId, operation.kind, operation.method, operation.state, operation.rollout?.rolloutId, operation.rollout?.state],
        [rollout.id, 'rollout', 'createRollout', 'running', rollout.id, 'pending']);
      assert.equal(rollout.operationId, operation.operationId);
      const listed = (await t.caller.call('getOperations', { state: 'running' })).operations.find((candidate) => candidate.operationId === rollout.id);
      assert.equal(listed?.kind, 'rollout', 'getOperations lists the running rollout');
      assert.deepEqual(rollout.waves.map((wave) => wave.clusterIds.length), [1, 6, 5]);
      assert.deepEqual(rollout.skipped.map((skip) => skip.clusterId), [darkClusterId]);
      const done = await finished(rollout.id);
      assert.equal(done.state, 'completed');
      assert.deepEqual(done.waves.map((wave) => wave.state), ['passed', 'passed', 'passed']);
      assert.ok(done.targets.every((target) => target.state === 'converged' && target.newSpecRevision === target.previousSpecRevision + 1));
      for (const serviceId of serviceIds.web) {
        const service = await serviceOf(serviceId);
        assert.equal(service.runtime.image, image('2'));
        assert.equal(service.generation, 2, 'each service was changed exactly once');
      }
      const { events: audit } = await t.caller.call('getAuditEvents', { filter: { targetId: serviceIds.web[0], method: 'rollout' } });
      assert.equal(audit.length, 1);
      assert.deepEqual([audit[0].actor.kind, (audit[0] as { cause?: unknown }).cause], ['cloudly', { kind: 'CloudlyRollout', id: rollout.id }]);
      const { operation: ended } = await t.caller.call('getOperation', { operationId: rollout.id });
      assert.deepEqual([ended.state, ended.progress.phase, ended.rollout?.state, ended.rollout?.currentWave, ended.rollout?.waves, ended.rollout?.targets, ended.rollout?.targetsTotal],
        ['completed', 'done', 'completed', 2, 3, { converged: clusterCount }, clusterCount]);
      assert.equal(ended.endedAt, done.endedAt);
      // The watch delivers the rollout's creation, its progress, and its operation's end.
      const delivered = (kindArg: string) => events.some((event) => event.kind === kindArg && event.id === rollout.id);
      await waitFor(() => delivered('CloudlyRollout') && delivered('CloudlyRolloutProgress') && delivered('CloudlyOperation'), 'the watch delivered the rollout, its progress and its operation');
    } finally {
      watchChanges.client.close();
    }
  });

  test('the canary fails: halted after wave 1, nothing else changed, and the refusal is the one the plan predicted', async () => {
    const before = await Promise.all(serviceIds.api.map(serviceOf));
    const { rollout, plan } = await t.caller.call('createRollout', {
      selector: 'env=prod', serviceName: 'api', change: { image: image('2') },
      waves: [{ clusters: 1 }, { percent: 50 }, { percent: 50 }], gate: { timeoutMs: 60_000 }, onFailure: 'halt',
    });
    const done = await finished(rollout.id);
    assert.equal(done.state, 'halted');
    const { operation } = await t.caller.call('getOperation', { operationId: rollout.id });
    assert.deepEqual([operation.state, operation.reason, operation.error?.reasons, operation.rollout?.state, operation.rollout?.reverted, operation.rollout?.failures],
      ['failed', 'rollout-halted', ['rollout-halted'], 'halted', false, 1]);
    assert.deepEqual(done.waves.map((wave) => wave.state), ['failed', 'cancelled', 'cancelled']);
    const canary = done.targets.find((target) => target.wave === 0)!;
    assert.equal(canary.state, 'failed');
    const predicted = plan.targets.find((target) => target.serviceId === canary.serviceId)!.predicted;
    assert.deepEqual(['refused', canary.reason], [predicted.state, predicted.reason]);
    assert.ok(done.targets.filter((target) => target.wave > 0).every((target) => target.state === 'cancelled'));
    const after = await Promise.all(serviceIds.api.map(serviceOf));
    assert.equal(after[0].runtime.image, image('2'));
    assert.deepEqual(after.slice(1), before.slice(1), 'no other service changed');
  });

  test('with revert, the canary goes back to its old spec and its verdict is current again', async () => {
    const before = await serviceOf(serviceIds.db[0]);
    const { rollout } = await t.caller.call('createRollout', {
      selector: 'env=prod', serviceName: 'db', change: { image: image('2') },
      waves: [{ clusters: 1 }, { percent: 50 }, { percent: 50 }], gate: { timeoutMs: 60_000 }, onFailure: 'revert',
    });
    const done = await finished(rollout.id);
    assert.equal(done.state, 'halted');
    const canary = done.targets.find((target) => target.wave === 0)!;
    assert.equal(canary.state, 'reverted');
    const reverted = await serviceOf(serviceIds.db[0]);
    assert.deepEqual(writableSpecOfService(reverted), writableSpecOfService(before), 'the spec is the old one, member for member');
    assert.equal(reverted.specRevision, before.specRevision + 2, 'the change and its revert are two revisions: revisions only go up');
    assert.deepEqual([canary.previousSpecRevision, canary.restoredFromRevision, canary.revertedSpecRevision], [before.specRevision, before.specRevision, reverted.specRevision]);
    const { operation } = await t.caller.call('getOperation', { operationId: rollout.id });
    assert.deepEqual([operation.state, operation.rollout?.state, operation.rollout?.reverted, operation.rollout?.targets.reverted], ['failed', 'halted', true, 1]);
    let verdict = await verdictOf(serviceIds.db[0]);
    await waitFor(async () => {
      verdict = await verdictOf(serviceIds.db[0]);
      return verdict.specRevision === reverted.specRevision;
    }, 'the verdict judged the reverted revision');
    // The old spec again, judged again: the canary's node is still gone, as it was before the rollout.
    assert.deepEqual([verdict.state, verdict.reason], ['refused', 'no-eligible-node']);
    for (const serviceId of serviceIds.db.slice(1)) {
      assert.equal((await serviceOf(serviceId)).generation, 1);
    }
  });

  test('refused before anything changes: nothing selected, waves short of the selection with a refused change, overlaps', async () => {
    const nothing = await refusalOf(() => t.caller.call('createRollout', { selector: 'env=nowhere', serviceName: 'web', change: { replicas: 2 }, waves: [{ percent: 100 }] }));
    assert.deepEqual([nothing.code, nothing.reasons], ['invalid-request', ['rollout-selects-nothing']]);
    const several = await refusalOf(() => t.caller.call('createRollout', {
      selector: 'env=prod', serviceName: 'web', change: { image: image('3'), routes: [{ hostname: 'a.example', port: 'none' }] } as never, waves: [{ clusters: 1 }, { clusters: 2 }],
    }));
    assert.equal(several.code, 'invalid-request');
    assert.deepEqual(several.reasons, ['rollout-change-refused', 'rollout-waves-do-not-cover']);
    const gated = await t.caller.call('createRollout', {
      selector: 'env=prod', serviceName: 'web', change: { replicas: 1 }, waves: [{ clusters: 1, requiresApproval: true }, { percent: 100 }],
    });
    await waitFor(async () => (await rolloutOf(gated.rollout.id)).state === 'waiting-approval', 'the first wave waits for its approval');
    const overlap = await refusalOf(() => t.caller.call('createRollout', { selector: 'env=prod', serviceName: 'web', change: { replicas: 2 }, waves: [{ percent: 100 }] }));
    assert.deepEqual([overlap.code, overlap.reasons], ['conflict', ['rollout-overlaps']]);
    assert.match((overlap.causes as Array<{ message: string }>)[0].message, new RegExp(`rollout ${gated.rollout.id} `));
    const notCancellable = await refusalOf(() => t.caller.call('cancelOperation', { operationId: gated.rollout.id }));
    assert.deepEqual([notCancellable.code, notCancellable.reasons], ['conflict', ['operation-not-cancellable']]);
    assert.equal((await t.caller.call('getOperation', { operationId: gated.rollout.id })).operation.rollout?.state, 'waiting-approval');
    const current = await rolloutOf(gated.rollout.id);
    await t.caller.call('abortRollout', { rolloutId: gated.rollout.id, expectedGeneration: current.generation });
    assert.equal((await finished(gated.rollout.id)).state, 'aborted');
    const { operation: aborted } = await t.caller.call('getOperation', { operationId: gated.rollout.id });
    assert.deepEqual([aborted.state, aborted.reason, aborted.rollout?.state], ['cancelled', 'rollout-aborted', 'aborted']);
    for (const serviceId of serviceIds.web) {
      assert.equal((await serviceOf(serviceId)).generation, 2, 'the aborted rollout changed nothing');
    }
  });

  test('a read-only account plans, reads and watches, and may not create, pause, resume, approve or abort', async () => {
    await t.caller.call('createUser', { username: 'rollout-viewer', password: 'rollout-viewer-password-0', role: 'user' });
    const viewer = new CloudlyAdminClient(t.baseUrl);
    await viewer.login('rollout-viewer', 'rollout-viewer-password-0');
    await viewer.call('planRollout', { selector: 'env=prod', serviceName: 'web', change: { replicas: 1 } });
    assert.ok((await viewer.call('getRollouts', {})).rollouts.length >= 3);
    // A rollout still running (its first wave waits for an approval), so only the access refuses.
    const { rollout: waiting } = await t.caller.call('createRollout', {
      selector: 'env=prod', serviceName: 'web', change: { replicas: 1 }, waves: [{ clusters: 1, requiresApproval: true }, { percent: 100 }],
    });
    try {
      await waitFor(async () => (await viewer.call('getRollout', { rolloutId: waiting.id })).rollout.state === 'waiting-approval', 'the viewer reads it waiting');
      assert.equal((await viewer.call('getOperation', { operationId: waiting.id })).operation.rollout?.state, 'waiting-approval');
      const control = { rolloutId: waiting.id, expectedGeneration: waiting.generation };
      const attempts: Array<[string, () => Promise<unknown>]> = [
        ['createRollout', () => viewer.call('createRollout', { selector: 'env=prod', serviceName: 'api', change: { replicas: 1 }, waves: [{ percent: 100 }] })],
        ['pauseRollout', () => viewer.call('pauseRollout', control)],
        ['resumeRollout', () => viewer.call('resumeRollout', control)],
        ['approveRolloutWave', () => viewer.call('approveRolloutWave', { ...control, wave: 0 })],
        ['abortRollout', () => viewer.call('abortRollout', { ...control, revert: true })],
      ];
      for (const [method, attempt] of attempts) {
        const refused = await refusalOf(attempt);
        assert.deepEqual([refused.code, refused.reasons], ['forbidden', ['role-not-allowed']], method);
      }
      const after = await viewer.call('getRollout', { rolloutId: waiting.id });
      assert.deepEqual([after.rollout.generation, after.rollout.paused, after.rollout.approvedWaves, after.rollout.abort, after.rollout.state],
        [waiting.generation, false, [], null, 'waiting-approval'], 'no refused control changed the rollout');
      const watcher = await openWatcher(t.baseUrl, { kinds: ['CloudlyRollout'] }, { username: 'rollout-viewer', password: 'rollout-viewer-password-0' });
      try {
        await t.caller.call('abortRollout', { rolloutId: waiting.id, expectedGeneration: waiting.generation });
        await waitFor(() => watcher.events.some((event) => event.id === waiting.id), 'the viewer watched the abort');
      } finally {
        watcher.client.close();
      }
    } finally {
      const current = await rolloutOf(waiting.id);
      if (!current.abort) {
        await t.caller.call('abortRollout', { rolloutId: waiting.id, expectedGeneration: current.generation });
      }
      assert.equal((await finished(waiting.id)).state, 'aborted');
    }
  });

  test('a service changed by someone else after the plan is reported as a conflict, not overwritten; approval and pause', async () => {
    const { rollout } = await t.caller.call('createRollout', {
      selector: 'env=prod', serviceName: 'web', change: { image: image('4') },
      waves: [{ clusters: 1 }, { percent: 100, requiresApproval: true }], gate: { timeoutMs: 60_000, maxFailures: 1 },
    });
    await waitFor(async () => (await rolloutOf(rollout.id)).state === 'waiting-approval', 'the second wave waits for its approval');
    const other = await serviceOf(serviceIds.web[5]);
    await t.caller.call('updateService', {
      serviceId: other.id, expectedGeneration: other.generation,
      service: { name: other.name, organizationId: other.organizationId, clusterId: other.clusterId, runtime: { ...other.runtime, image: image('mine') }, ports: [], routes: [], volumes: [] },
    });
    let current = await rolloutOf(rollout.id);
    current = (await t.caller.call('pauseRollout', { rolloutId: rollout.id, expectedGeneration: current.generation })).rollout;
    current = (await t.caller.call('approveRolloutWave', { rolloutId: rollout.id, wave: 1, expectedGeneration: current.generation })).rollout;
    await waitFor(async () => (await rolloutOf(rollout.id)).state === 'paused', 'paused');
    assert.ok((await rolloutOf(rollout.id)).targets.filter((target) => target.wave === 1).every((target) => target.state === 'pending'), 'a paused rollout changes nothing');
    await t.caller.call('resumeRollout', { rolloutId: rollout.id, expectedGeneration: current.generation });
    const done = await finished(rollout.id);
    assert.equal(done.state, 'completed');
    const conflicted = done.targets.find((target) => target.serviceId === other.id)!;
    assert.deepEqual([conflicted.state, conflicted.reason], ['conflict', 'generation-mismatch']);
    assert.equal((await serviceOf(other.id)).runtime.image, image('mine'), 'the other change was kept');
    assert.equal(done.targets.filter((target) => target.state === 'converged').length, clusterCount - 1);
  });
});
