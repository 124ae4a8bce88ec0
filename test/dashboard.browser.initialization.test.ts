import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { startTestCloudly, testAdminPassword, testAdminUsername, type ITestCloudly } from './helpers/cloudly.js';
import { chromiumAvailable, chromiumPath, launchBrowser, type IBrowser } from './helpers/browser.js';
import type { IService, IServiceRunAs } from '../ts/interfaces/data/service.js';

/**
 * The volume initialization form in a real browser says, before any call and as the choice
 * changes, when the service could not use what is chosen (the contracts'
 * judgeServiceVolumeInitializationUse, as the CLI does): an owner from run-as for a service
 * without a run-as, or no initialization at all.
 */

const skip = chromiumAvailable() ? false : `${chromiumPath} is missing (apt-get install -y chromium; .ci/run installs it)`;

let t: ITestCloudly;
let browser: IBrowser;
let page: Page;
let withoutRunAs: IService;
let withRunAs: IService;

const createService = async (clusterIdArg: string, nameArg: string, runAsArg: IServiceRunAs | null): Promise<IService> =>
  (await t.admin.call('createService', {
    service: {
      name: nameArg, organizationId: 'org-1', clusterId: clusterIdArg,
      runtime: { image: 'registry.example.com/app/db:1', replicas: 1, profile: { runAs: runAsArg }, placement: { nodeIds: ['node-1'] } },
      volumes: [{ mountPath: '/data', readOnly: false, driver: 'local' }],
    },
  })).service;

before(async () => {
  t = await startTestCloudly();
  const { cluster } = await t.createCluster('init-form');
  await t.addNodes(cluster.id, 'node-1');
  withoutRunAs = await createService(cluster.id, 'no-run-as', null);
  withRunAs = await createService(cluster.id, 'with-run-as', { user: 1000, group: 1000 });
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
  await t?.stop();
});

const openForm = async (serviceArg: IService): Promise<void> => {
  await page.goto(`${t.baseUrl}/dashboard/#/service/${serviceArg.id}`);
  await page.locator('[data-page=service] [data-mount-path="/data"]').waitFor();
  await page.locator('[data-action=edit-initialization]').click();
  await page.locator('form.volume-form').waitFor();
};

const warning = () => page.locator('form.volume-form [data-initialization-warning]');

test('a service without a run-as: the form warns about an owner from run-as, and stops when the owner is explicit', { skip }, async () => {
  await openForm(withoutRunAs);
  await warning().waitFor();
  assert.equal(await warning().getAttribute('data-initialization-warning'), 'volume-ownership-unknown');
  assert.match(await warning().textContent() ?? '', /Instead: give an explicit owner \(uid and gid\)/);
  await page.locator('form.volume-form select[name=owner]').selectOption('explicit');
  await warning().waitFor({ state: 'detached' });
  await page.locator('form.volume-form select[name=kind]').selectOption('clear');
  await warning().waitFor();
  assert.equal(await warning().getAttribute('data-initialization-warning'), 'volume-initialization-unknown');
});

test('a service with a run-as: an owner from run-as draws no warning', { skip }, async () => {
  await openForm(withRunAs);
  assert.equal(await page.locator('form.volume-form select[name=owner]').inputValue(), 'run-as');
  assert.equal(await warning().count(), 0);
});
