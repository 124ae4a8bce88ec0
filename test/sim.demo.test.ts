import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { lockFileName } from '../ts/core/datadirlock.js';
import { minimumScryptN } from '../ts/config.js';
import { seedSigningKey } from './helpers/signingkeys.js';
import { exitOf, processStartBoundMs } from './helpers/process.js';
import { waitFor } from './helpers/cloudly.js';
import { CloudlyAdminClient } from '../ts/client/admin.js';

/**
 * `npm run demo` as the readme starts it, with a small fleet: its start-up ends with one line
 * (the dashboard URL, the login, "Ctrl-C stops"), and a Ctrl-C to its process group, as a
 * terminal sends it, stops the simulator and then Cloudly gracefully.
 */

const projectRoot = path.resolve(import.meta.dirname, '..');

/** `npm run demo -- <args>` in its own process group, and everything it prints so far. */
const startDemo = (dataDirArg: string, argsArg: string[]) => {
  const child = spawn('npm', ['run', 'demo', '--', ...argsArg], {
    cwd: projectRoot,
    detached: true,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      CLOUDLY_PORT: '0',
      CLOUDLY_DATA_DIR: dataDirArg,
      CLOUDLY_ADMIN_PASSWORD: 'demo-admin-password',
      CLOUDLY_PASSWORD_SCRYPT_N: String(minimumScryptN),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout.on('data', (chunkArg: Buffer) => { text += chunkArg.toString(); });
  child.stderr.on('data', (chunkArg: Buffer) => { text += chunkArg.toString(); });
  return { child, output: () => text };
};

test('npm run demo ends its start-up with the ready line; Ctrl-C to its process group stops Cloudly gracefully, exit 0', async () => {
  const workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-demo-'));
  const dataDir = path.join(workDir, 'data');
  await seedSigningKey(dataDir);
  const { child, output } = startDemo(dataDir, ['--clusters', '1', '--nodes', '1', '--services', '1', '--replicas', '1']);
  try {
    await waitFor(() => /\[demo\] ready: /.test(output()) || child.exitCode !== null, `the demo's ready line:\n${output()}`, 2 * processStartBoundMs);
    const demoLines = output().split('\n').filter((lineArg) => lineArg.startsWith('[demo] '));
    assert.match(demoLines.at(-1)!, /^\[demo\] ready: http:\/\/127\.0\.0\.1:\d+\/dashboard\/ \(log in as admin \/ demo-admin-password\); Ctrl-C stops$/, output());
    const url = /ready: (http:\/\/[^/]+)\//.exec(demoLines.at(-1)!)![1];
    assert.equal((await fetch(`${url}/readyz`)).status, 200);

    process.kill(-child.pid!, 'SIGINT');
    assert.equal(await exitOf(child), 0, output());
    const cloudlyLog = await fsp.readFile(`${dataDir}.cloudly.log`, 'utf8');
    assert.match(cloudlyLog, /cloudly stopped/);
    assert.doesNotMatch(cloudlyLog, /stopping at once/);
    assert.doesNotMatch(cloudlyLog, /__#/, 'no dependency console lines');
    assert.equal(fs.existsSync(path.join(dataDir, lockFileName)), false, 'the data directory lock is released');
  } finally {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // The demo's group is gone, as it should be.
    }
    await fsp.rm(workDir, { recursive: true, force: true });
  }
});

test('npm run demo -- --rollout: a rollout over the simulated clusters halts on the cluster made to fail, after the canary passed', async () => {
  const workDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-demo-'));
  const dataDir = path.join(workDir, 'data');
  await seedSigningKey(dataDir);
  const { child, output } = startDemo(dataDir, ['--rollout', '--clusters', '3', '--nodes', '1', '--services', '1', '--replicas', '1', '--start-delay-ms', '200']);
  try {
    await waitFor(() => /\[demo\] ready: /.test(output()) || child.exitCode !== null, `the demo's ready line:\n${output()}`, 4 * processStartBoundMs);
    const url = /ready: (http:\/\/[^/]+)\//.exec(output())![1];
    const rolloutId = /\[demo\] rollout (\S+) started/.exec(output())?.[1];
    assert.ok(rolloutId, output());
    assert.match(output(), /\[demo\] rollout \S+ halted\n/, output());
    assert.match(output(), /predicted refused no-eligible-node/, 'the plan printed the failure it predicts');

    const admin = new CloudlyAdminClient(url);
    await admin.login('admin', 'demo-admin-password');
    try {
      const { rollout } = await admin.call('getRollout', { rolloutId });
      assert.equal(rollout.state, 'halted');
      assert.deepEqual(rollout.waves.map((wave) => [wave.clusterIds.length, wave.state]), [[1, 'passed'], [2, 'failed']]);
      // The demo sabotages the last cluster in the plan's order; the simulator registers its clusters
      // concurrently, so which demo-N that is varies from run to run.
      const sabotaged = /\[demo\] rollout: rollout-demo on (\S+) is placed on a node that left the cluster/.exec(output())?.[1];
      assert.ok(sabotaged, output());
      assert.equal(rollout.targets.at(-1)?.clusterName, sabotaged, 'the sabotaged cluster is the last target, never the canary');
      const failed = rollout.targets.filter((target) => target.state === 'failed');
      assert.deepEqual(failed.map((target) => [target.clusterName, target.reason]), [[sabotaged, 'no-eligible-node']]);
      assert.match(output(), new RegExp(`\\[demo\\] rollout \\S+: ${sabotaged} failed \\(no-eligible-node\\)`));
      assert.equal(rollout.targets.find((target) => target.wave === 0)?.state, 'converged', 'the canary converged');
    } finally {
      admin.close();
    }
    process.kill(-child.pid!, 'SIGINT');
    assert.equal(await exitOf(child), 0, output());
  } finally {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // The demo's group is gone, as it should be.
    }
    await fsp.rm(workDir, { recursive: true, force: true });
  }
});
