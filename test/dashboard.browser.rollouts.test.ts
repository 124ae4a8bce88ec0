import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { startTestCloudly, testAdminPassword, testAdminUsername, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { chromiumAvailable, chromiumPath, launchBrowser, logInToDashboard, recordPageErrors, type IBrowser } from './helpers/browser.js';
import { readSimConfig } from '../ts/sim/config.js';
import { SimFleet } from '../ts/sim/fleet.js';

/**
 * The Rollouts page, cluster labels and the fleet's label filter in a real browser (headless
 * Chromium) against a real Cloudly with three simulated clusters labelled `env=prod` (ts/sim, real
 * relay sockets) and a fourth, unlabelled, whose relay never connects. An administrator plans a
 * rollout, reads the plan as a table, starts it, watches the canary pass live and approves the next
 * wave; a read-only account sees a rollout arrive live with its buttons disabled.
 */

const skip = chromiumAvailable() ? false : `${chromiumPath} is missing (apt-get install -y chromium; .ci/run installs it)`;
const image = (tagArg: string) => `registry.example/app:${tagArg}`;
const viewerUsername = 'rollout-viewer';
const viewerPassword = 'viewer-password-0001';

let t: ITestCloudly;
let fleet: SimFleet;
let browser: IBrowser;
let page: Page;
const prodClusterIds: string[] = [];
const webServiceIds: string[] = [];
let otherClusterId = '';
const consoleErrors: string[] = [];

const verdictOf = async (serviceIdArg: string) => (await t.caller.call('getServiceRuntimeStatus', { serviceId: serviceIdArg })).status;

const login = (usernameArg: string, passwordArg: string): Promise<void> => logInToDashboard(page, t.baseUrl, usernameArg, passwordArg);

/** Confirms the open action dialog after its dry run and closes it once done. */
const confirmDialog = async (): Promise<void> => {
  const dialog = page.locator('dialog.action-dialog');
  await dialog.locator('[data-action=confirm]').waitFor({ timeout: 15_000 });
  await dialog.locator('[data-action=confirm]').click();
  await page.locator('dialog.action-dialog[data-phase=done]').waitFor({ timeout: 15_000 });
  await dialog.locator('[data-action=close]').click();
};

before(async () => {
  t = await startTestCloudly({ relayLivenessGraceMs: 1_000 });
  const tokens: Array<{ name: string; token: string }> = [];
  for (let index = 0; index < 3; index += 1) {
    const { cluster, relayToken } = await t.createCluster(`prod-${index + 1}`);
    await t.caller.call('setClusterLabels', { clusterId: cluster.id, labels: { env: 'prod' }, expectedGeneration: cluster.generation });
    await t.addNodes(cluster.id, 'node-1');
    const { service } = await t.caller.call('createService', {
      service: {
        name: 'web', organizationId: 'org-1', clusterId: cluster.id, ports: [], routes: [], volumes: [],
        runtime: { image: image('1'), replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
      },
    });
    prodClusterIds.push(cluster.id);
    webServiceIds.push(service.id);
    tokens.push({ name: cluster.name, token: relayToken });
  }
  otherClusterId = (await t.createCluster('other')).cluster.id;
  await t.caller.call('createUser', { username: viewerUsername, password: viewerPassword, role: 'user' });
  const { config } = readSimConfig(['--url', t.baseUrl, '--relay-token', tokens[0].token, '--nodes', '1', '--start-delay-ms', '20', '--reconnect-cap-ms', '1000'], {});
  config.tokens = tokens;
  fleet = new SimFleet(config, () => undefined);
  await fleet.start();
  await waitFor(async () => (await Promise.all(webServiceIds.map(verdictOf))).every((status) => status.state === 'converged'), 'the fleet converged', 60_000);
  if (skip) {
    return;
  }
  browser = await launchBrowser();
  page = browser.page;
  recordPageErrors(page, consoleErrors);
});

after(async () => {
  await browser?.close();
  await fleet?.stop();
  await t?.stop();
});

test("the fleet is filtered by a label selector, and a cluster's labels are edited on its page", { skip }, async () => {
  await login(testAdminUsername, testAdminPassword);
  await page.locator(`tr[data-cluster-id="${otherClusterId}"]`).waitFor();
  await page.getByLabel('Labels', { exact: true }).fill('env in (');
  assert.equal(await page.locator('[data-action=filter-clusters]').isDisabled(), true, 'a bad selector is not sent');
  await page.getByLabel('Labels', { exact: true }).fill('env=prod');
  await page.locator('[data-action=filter-clusters]').click();
  await page.locator('[data-applied-selector]').waitFor();
  await waitFor(async () => (await page.locator('tr[data-cluster-id]').count()) === 3, 'three clusters listed');
  assert.equal(await page.locator(`tr[data-cluster-id="${otherClusterId}"]`).count(), 0, 'the unlabelled cluster is filtered out');
  assert.equal(await page.locator(`tr[data-cluster-id="${prodClusterIds[0]}"] [data-labels]`).textContent(), 'env=prod');

  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${otherClusterId}`);
  await page.locator('[data-cluster-labels] [data-action=edit-labels]').click();
  await page.getByLabel('Labels (key=value, separated by commas)').fill('env=dev, tier=x');
  await page.locator('[data-action=review-labels]').click();
  await confirmDialog();
  await page.locator('[data-cluster-labels] [data-labels="env=dev, tier=x"]').waitFor();
  assert.deepEqual((await t.caller.call('getClusterById', { clusterId: otherClusterId })).cluster.labels, { env: 'dev', tier: 'x' });
});

test('a rollout is planned as a table, started, followed live wave by wave, and its next wave approved', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/rollouts`);
  await page.locator('[data-page=rollouts]').waitFor();
  await page.getByLabel('Clusters (label selector)').fill('env=prod');
  await page.getByLabel('Service name').fill('web');
  await page.getByLabel('New image').fill(image('2'));
  await page.getByLabel(/^Waves/).fill('1, 2');
  await page.getByLabel('Each wave after the canary waits for approval').check();
  await page.locator('[data-action=plan-rollout]').click();
  await page.locator('[data-rollout-plan]').waitFor();
  assert.deepEqual((await page.locator('[data-plan-target]').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-plan-target')))).sort(), [...webServiceIds].sort());
  assert.deepEqual(await page.locator('[data-plan-target] [data-predicted]').evaluateAll((cells) => cells.map((cell) => cell.getAttribute('data-predicted'))), ['converging', 'converging', 'converging']);
  assert.match(await page.locator('[data-rollout-plan]').textContent() ?? '', /1 → 2/);
  assert.deepEqual((await t.caller.call('getRollouts', {})).rollouts, [], 'planning started nothing');

  await page.locator('[data-action=create-rollout]').click();
  await confirmDialog();
  const { rollouts } = await t.caller.call('getRollouts', {});
  assert.equal(rollouts.length, 1);
  const rolloutId = rollouts[0].id;
  const card = page.locator(`[data-rollout-id="${rolloutId}"]`);
  // The canary passes and the next wave waits for approval: both arrive through the watch.
  await card.locator('tr[data-wave="0"][data-wave-state=passed]').waitFor({ timeout: 60_000 });
  await card.locator('tr[data-wave="1"][data-wave-state=waiting-approval]').waitFor({ timeout: 30_000 });
  assert.match(await card.locator('tr[data-wave="0"] [data-wave-counts]').textContent() ?? '', /1 converged/);
  await card.locator('[data-action=approve-rollout]').click();
  await confirmDialog();
  await page.locator(`[data-rollout-id="${rolloutId}"][data-rollout-state=completed]`).waitFor({ timeout: 60_000 });
  assert.match(await card.locator('tr[data-wave="1"] [data-wave-counts]').textContent() ?? '', /2 converged/);
  assert.equal(await card.locator('[data-action$=-rollout]').count(), 0, 'a completed rollout offers no action');
  for (const serviceId of webServiceIds) {
    assert.equal((await t.caller.call('getServiceById', { serviceId })).service.runtime.image, image('2'));
  }
  // The rollout is an operation: the operations page lists it, linking to the rollouts page, with no cancel.
  await page.goto(`${t.baseUrl}/dashboard/#/operations`);
  const row = page.locator(`tr[data-operation-id="${rolloutId}"][data-operation-state=completed]`);
  await row.waitFor();
  assert.equal(await row.locator(`a[data-rollout-id="${rolloutId}"]`).getAttribute('href'), '#/rollouts');
  assert.match(await row.textContent() ?? '', /completed, wave 2 of 2/);
  assert.equal(await row.locator('[data-action=cancel-operation]').count(), 0);
});

test('a read-only account sees a new rollout arrive live, with approve, pause and abort disabled', { skip }, async () => {
  // The administrator's session is logged out first.
  await login(viewerUsername, viewerPassword);
  await page.goto(`${t.baseUrl}/dashboard/#/rollouts`);
  await page.locator('[data-page=rollouts] [data-rollout-state=completed]').waitFor();
  const { rollout } = await t.caller.call('createRollout', {
    selector: 'env=prod', serviceName: 'web', change: { image: image('3') },
    waves: [{ clusters: 1 }, { clusters: 2, requiresApproval: true }], gate: { timeoutMs: 60_000 },
  });
  const card = page.locator(`[data-rollout-id="${rollout.id}"]`);
  await card.locator('tr[data-wave="1"][data-wave-state=waiting-approval]').waitFor({ timeout: 60_000 });
  for (const action of ['approve', 'pause', 'abort']) {
    const button = card.locator(`[data-action=${action}-rollout]`);
    assert.equal(await button.isDisabled(), true, `${action} is disabled`);
    assert.match(await button.getAttribute('title') ?? '', /read-only/);
  }
  assert.equal(await page.locator('[data-action=create-rollout]').count(), 0, 'no plan, no start button');
  await page.getByLabel('Clusters (label selector)').fill('env=prod');
  await page.getByLabel('Service name').fill('web');
  await page.getByLabel('New replica count').fill('2');
  await page.locator('[data-action=plan-rollout]').click();
  await page.locator('[data-rollout-plan]').waitFor();
  assert.equal(await page.locator('[data-action=create-rollout]').isDisabled(), true, 'a read-only account may plan but not start');
  assert.equal((await t.caller.call('getRollout', { rolloutId: rollout.id })).rollout.approvedWaves.length, 0);
});

test('no page logged a console error', { skip }, () => {
  assert.deepEqual(consoleErrors, []);
});
