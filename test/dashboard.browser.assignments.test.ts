import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { startTestCloudly, testAdminPassword, testAdminUsername, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { chromiumAvailable, chromiumPath, launchBrowser, type IBrowser } from './helpers/browser.js';
import { connectHintedRelay } from './helpers/desiredstate.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IService } from '../ts/interfaces/data/service.js';

/**
 * The service page's replica slots in a real browser: one row per slot with its condition as the
 * relay reports it, and, once the cluster's relay is gone past the grace, every slot stale and
 * grey (docs/api/services.md, "Assignment views").
 */

const skip = chromiumAvailable() ? false : `${chromiumPath} is missing (apt-get install -y chromium; .ci/run installs it)`;
const graceMs = 1_500;

let t: ITestCloudly;
let browser: IBrowser;
let page: Page;
let service: IService;
let relay: CloudlyRelayClient;
let revision: number;

before(async () => {
  t = await startTestCloudly({ relayLivenessGraceMs: graceMs });
  const { cluster, relayToken } = await t.createCluster('slots');
  await t.addNodes(cluster.id, 'n1', 'n2');
  service = (await t.admin.call('createService', {
    service: {
      name: 'web', organizationId: 'org-1', clusterId: cluster.id,
      runtime: { image: 'registry.example.com/web:1', replicas: 2, profile: { runAs: null }, placement: { nodeIds: [] } },
      volumes: [],
    },
  })).service;
  relay = await connectHintedRelay(t, cluster.id, relayToken, []);
  const answer = await relay.fire('getClusterPlatformDesiredState', {});
  assert.equal(answer.unchanged, false);
  revision = (answer as Extract<typeof answer, { unchanged: false }>).desiredState.revision;
  if (skip) {
    return;
  }
  browser = await launchBrowser();
  page = browser.page;
  await page.goto(`${t.baseUrl}/dashboard/`);
  await page.getByLabel('Username').fill(testAdminUsername);
  await page.getByLabel('Password').fill(testAdminPassword);
  await page.getByLabel('Password').press('Enter');
  await page.locator('[data-page=fleet]').waitFor();
});

after(async () => {
  await browser?.close();
  relay?.close();
  await t?.stop();
});

const conditions = async (): Promise<string[]> =>
  page.locator('[data-page=service] [data-assignment-slot]').evaluateAll((rowsArg) =>
    rowsArg.map((rowArg) => (rowArg as unknown as { getAttribute(nameArg: string): string | null }).getAttribute('data-assignment-condition') ?? ''));

test('each replica slot is a row with its condition; a dark cluster\'s slots turn stale and grey', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/service/${service.id}`);
  await page.locator('[data-page=service] [data-assignment-slot="1"]').waitFor();
  assert.deepEqual(await conditions(), ['awaiting-report', 'awaiting-report']);

  await relay.fire('reportClusterPlatformObservedState', {
    desiredRevision: revision,
    services: [{ serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: 1, state: 'ready' }],
  });
  await page.locator('[data-assignment-slot="0"][data-assignment-condition=running]').waitFor();
  assert.deepEqual(await conditions(), ['running', 'awaiting-report']);

  relay.close();
  await waitFor(async () => (await t.caller.call('getServiceRuntimeStatus', { serviceId: service.id })).unknown !== null, 'the service reads unknown', graceMs + 15_000);
  await page.locator('[data-assignment-slot="0"][data-assignment-condition=stale]').waitFor({ timeout: 15_000 });
  assert.deepEqual(await conditions(), ['stale', 'stale']);
  const row = page.locator('[data-assignment-slot="0"]');
  assert.match(await row.textContent() ?? '', /Stale: the cluster is not current \(relay-disconnected since .*\)\. Last known on n1: ready at spec revision 1/);
  assert.equal(await row.locator('.badge').getAttribute('class'), 'badge state-unknown', 'grey, never the green of a running slot');
});
