import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { createCli, type ICli } from './cli.fixture.js';

/**
 * `cloudly clusters list -l`, `clusters labels` and `cloudly rollouts …` against a real server
 * (the command runner in this process, test/cli.fixture.ts). No relay runs here, so a changed
 * service never converges: the rollout waits at its canary until it is aborted with a revert.
 */

let t: ITestCloudly;
let cli: ICli;
const serviceIds: string[] = [];

before(async () => {
  t = await startTestCloudly();
  cli = await createCli();
  await cli.login(t);
  for (const name of ['cli-r1', 'cli-r2', 'cli-r3']) {
    const { cluster } = await t.createCluster(name);
    await t.addNodes(cluster.id, 'node-1');
    const { service } = await t.caller.call('createService', {
      service: {
        name: 'web', organizationId: 'org-1', clusterId: cluster.id, ports: [], routes: [], volumes: [],
        runtime: { image: 'registry.example/app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
      },
    });
    serviceIds.push(service.id);
  }
});

after(async () => {
  await t.stop().catch(() => undefined);
  await cli.dispose();
});

test('labels from the CLI, and a selector picks the clusters', async () => {
  for (const name of ['cli-r1', 'cli-r2', 'cli-r3']) {
    const run = await cli.run(['clusters', 'labels', '--cluster', name, '--expect-current', 'env=prod', `name=${name}`]);
    assert.equal(run.code, 0, run.stderr);
  }
  const listed = await cli.run(['clusters', 'list', '-l', 'env=prod,name in (cli-r1,cli-r3)', '-o', 'json']);
  assert.equal(listed.code, 0, listed.stderr);
  assert.deepEqual(JSON.parse(listed.stdout).clusters.map((cluster: { name: string }) => cluster.name), ['cli-r1', 'cli-r3']);
  const bad = await cli.run(['clusters', 'list', '-l', '-x=1,!']);
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /selector\[0\]/);
  assert.match(bad.stderr, /selector\[1\]/);
});

test('rollouts plan, create, get, abort with a revert', async () => {
  const plan = await cli.run(['rollouts', 'plan', '-l', 'env=prod', '--service-name', 'web', '--image', 'registry.example/app:2']);
  assert.equal(plan.code, 0, plan.stderr);
  assert.match(plan.stdout, /^CLUSTER\s+SERVICE\s+REVISION\s+PREDICTED/);
  assert.equal(plan.stdout.split('\n').filter((line) => / 1 -> 2 /.test(line)).length, 3);

  const created = await cli.run(['rollouts', 'create', '-l', 'env=prod', '--service-name', 'web', '--image', 'registry.example/app:2', '--waves', '1,100%', '--timeout-ms', '600000', '-o', 'json']);
  assert.equal(created.code, 0, created.stderr);
  const rolloutId = JSON.parse(created.stdout).rollout.id as string;
  await waitFor(async () => (await t.caller.call('getRollout', { rolloutId })).rollout.targets[0].newSpecRevision === 2, 'the canary changed');

  const shown = await cli.run(['rollouts', 'get', '--rollout', rolloutId]);
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, /wave 1: running/);
  assert.match(shown.stdout, /wave 2: pending/);
  const listed = await cli.run(['rollouts', 'list']);
  assert.match(listed.stdout, new RegExp(rolloutId));

  const aborted = await cli.run(['rollouts', 'abort', '--rollout', rolloutId, '--expect-current', '--revert']);
  assert.equal(aborted.code, 0, aborted.stderr);
  const watched = await cli.run(['rollouts', 'watch', '--rollout', rolloutId, '-o', 'json']);
  assert.equal(watched.code, 0, watched.stderr);
  const done = JSON.parse(watched.stdout).rollout;
  assert.equal(done.state, 'aborted');
  assert.deepEqual(done.targets.map((target: { state: string }) => target.state), ['reverted', 'cancelled', 'cancelled']);
  assert.equal((await t.caller.call('getServiceById', { serviceId: done.targets[0].serviceId })).service.runtime.image, 'registry.example/app:1');
  assert.equal((await t.caller.call('getServiceById', { serviceId: done.targets[1].serviceId })).service.generation, 1);
  const table = await cli.run(['rollouts', 'get', '--rollout', rolloutId]);
  assert.match(table.stdout, /reverted\s+1 -> 2 -> 3 \(spec of 1\)/, 'the revert names the revision whose spec it put back');

  // The rollout is an operation: listed, read and refused a cancel like the CLI's other long work.
  const operations = await cli.run(['operations', 'list', '--state', 'cancelled']);
  assert.equal(operations.code, 0, operations.stderr);
  const row = operations.stdout.split('\n').find((line) => line.startsWith(rolloutId));
  assert.ok(row, operations.stdout);
  assert.match(row, /rollout\s+cancelled \(rollout-aborted\)/);
  assert.match(row, /aborted \(reverted\), wave 1\/2, 3\/3 services done/);
  const operation = await cli.run(['operations', 'get', rolloutId, '-o', 'json']);
  assert.deepEqual(JSON.parse(operation.stdout).operation.rollout.targets, { reverted: 1, cancelled: 2 });
  const cancel = await cli.run(['operations', 'cancel', rolloutId]);
  assert.notEqual(cancel.code, 0);
  assert.match(cancel.stderr, /operation-not-cancellable/);
});
