import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Page } from 'playwright-core';
import { refusalOf, startTestCloudly, testAdminPassword, testAdminUsername, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { chromiumAvailable, chromiumPath, launchBrowser, type IBrowser } from './helpers/browser.js';
import { chunked, descriptorOf } from './backup.fixture.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IService } from '../ts/interfaces/data/service.js';
import type { IReq_Any_Cloudly_CreateService } from '../ts/interfaces/requests/service.js';
import type { IReq_Cloudly_Relay_BackupClusterService, IReq_Admin_GetServiceBackups } from '../ts/interfaces/requests/backup.js';

/**
 * The operator's day in the dashboard, in headless Chromium against a real Cloudly (embedded
 * database) and a real relay client: the bugs issue 35 found on the service, cluster and login
 * pages, and the flows that let the dashboard do the whole job (clusters and nodes, services,
 * operations, users), each change through its dry run and confirmation, each refusal with its
 * code and reasons.
 */

/** The page's globals, for the functions that run inside it (the test's own lib has no DOM). */
declare const location: { hash: string };

const skip = chromiumAvailable() ? false : `${chromiumPath} is missing (apt-get install -y chromium; .ci/run installs it)`;

let t: ITestCloudly;
let browser: IBrowser;
let page: Page;
let clusterId: string;
let relay: CloudlyRelayClient;
let service: IService;
const consoleErrors: string[] = [];

const waitForText = async (selectorArg: string, textArg: string | RegExp, timeoutArg = 10_000) => {
  await page.locator(selectorArg).filter({ hasText: textArg }).first().waitFor({ timeout: timeoutArg });
};

const login = async () => {
  await page.goto(`${t.baseUrl}/dashboard/`);
  await page.getByLabel('Username').fill(testAdminUsername);
  await page.getByLabel('Password').fill(testAdminPassword);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('[data-page=fleet]').waitFor();
  await page.locator('[data-connection=live]').waitFor();
};

before(async () => {
  t = await startTestCloudly();
  const created = await t.createCluster('daily');
  clusterId = created.cluster.id;
  await t.addNodes(clusterId, 'node-1', 'node-2');
  service = (await t.admin.call<IReq_Any_Cloudly_CreateService>('createService', {
    service: {
      name: 'daily-app', organizationId: 'org-1', clusterId,
      // Placed on node-2 only: the backup node picker must not offer node-1 first.
      runtime: { image: 'registry.example.com/app/web:1', replicas: 1, profile: { runAs: { user: 1000, group: 1001 } }, placement: { nodeIds: ['node-2'] } },
      volumes: [{ mountPath: '/data', readOnly: false, driver: 'local' }],
    },
  })).service;
  relay = await t.connectRelay(created.relayToken);
  const closure = randomBytes(64 * 1024);
  relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    await sendServiceDatabaseClosure(relay, {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closure),
    }, chunked(closure));
    return { snapshots: [{ type: 'database', snapshotId: `snap-${request.backupId}`, resourceName: 'db', databaseName: 'app', createdAt: Date.now(), sizeBytes: closure.byteLength }] };
  });
  if (skip) {
    return;
  }
  browser = await launchBrowser();
  page = browser.page;
  page.on('console', (messageArg) => {
    if (messageArg.type() === 'error') {
      consoleErrors.push(messageArg.text());
    }
  });
  page.on('pageerror', (errorArg) => consoleErrors.push(`pageerror: ${errorArg.message}`));
});

after(async () => {
  await browser?.close();
  await t?.stop();
});

// ---- the bugs ----

test('the login form does not say only administrators may log in', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/`);
  const hint = await page.locator('[data-login-hint]').textContent() ?? '';
  assert.doesNotMatch(hint, /administrator's username/);
  assert.match(hint, /read-only/);
  await login();
});

test('an unknown route shows a not-found page naming it, not the fleet', { skip }, async () => {
  await page.evaluate(() => { location.hash = '#/nope'; });
  await page.locator('[data-page=not-found]').waitFor();
  assert.match(await page.locator('[data-page=not-found]').textContent() ?? '', /#\/nope/);
  assert.equal(await page.locator('[data-page=fleet]').count(), 0, 'the fleet is not shown instead');
});

test("the service page shows its run-as user:group, and its breadcrumb names the cluster", { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/service/${service.id}`);
  await page.locator('[data-run-as]').waitFor();
  assert.equal(await page.locator('[data-run-as]').textContent(), '1000:1001');
  await waitForText('[data-page=service] [data-crumb=cluster]', 'daily');
  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${clusterId}`);
  await waitForText('[data-page=cluster] [data-crumb=cluster]', 'daily');
});

test('the backup node picker defaults to a node the service runs on; backups are listed newest first', { skip }, async () => {
  // Ids in the reverse order of time: a table sorted by id would list them oldest first.
  for (const backupId of ['backup-c', 'backup-b', 'backup-a']) {
    await t.admin.call('createServiceBackup', { clusterId, nodeId: 'node-2', serviceId: service.id, backupId });
    await waitFor(async () => (await t.admin.call<IReq_Admin_GetServiceBackups>('getServiceBackups', { serviceId: service.id }))
      .backups.some((backup) => backup.backupId === backupId && (backup as { state?: string }).state !== 'running'), `backup ${backupId} recorded`, 15_000);
  }
  await page.goto(`${t.baseUrl}/dashboard/#/service/${service.id}`);
  await page.locator('tr[data-backup-id=backup-a]').waitFor();
  assert.equal(await page.getByLabel('Node').inputValue(), 'node-2');
  const listed = await page.locator('tr[data-backup-id]').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-backup-id')));
  assert.deepEqual(listed, ['backup-a', 'backup-b', 'backup-c']);
});
