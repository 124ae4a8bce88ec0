import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Page } from 'playwright-core';
import { startTestCloudly, testAdminPassword, testAdminUsername, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { chromiumAvailable, chromiumPath, launchBrowser, type IBrowser } from './helpers/browser.js';
import { chunked, descriptorOf } from './backup.fixture.js';
import { connectElectedRelay, relayOrigin } from './ingress.fixture.js';
import { upstreamExamplePlan } from './runtimenetwork.fixture.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IService } from '../ts/interfaces/data/service.js';
import type { IReq_Cloudly_Relay_BackupClusterService, IReq_Cloudly_Relay_RestoreClusterService } from '../ts/interfaces/requests/backup.js';

/**
 * The dashboard says only what is so and offers only what may be done (issue 54), in headless
 * Chromium against a real Cloudly and a real relay client: a read-only account finds every change
 * disabled with the reason instead of being refused at the dry run.
 */

const skip = chromiumAvailable() ? false : `${chromiumPath} is missing (apt-get install -y chromium; .ci/run installs it)`;

let t: ITestCloudly;
let browser: IBrowser;
let page: Page;
let clusterId: string;
let relay: CloudlyRelayClient;
let service: IService;
const viewerUsername = 'viewer';
const viewerPassword = 'viewer-password-0123';
/** The backups the relay was asked to restore. */
const restoresAsked: string[] = [];
/** Every method the page sent over HTTP. */
const methodsSent: string[] = [];

const login = async (usernameArg: string, passwordArg: string) => {
  await page.goto(`${t.baseUrl}/dashboard/`);
  if (await page.locator('[data-action=logout]').count() > 0) {
    await page.locator('[data-action=logout]').click();
  }
  await page.getByLabel('Username').fill(usernameArg);
  await page.getByLabel('Password').fill(passwordArg);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('[data-page=fleet]').waitFor();
  await page.locator('[data-connection=live]').waitFor();
};

before(async () => {
  t = await startTestCloudly();
  const created = await t.createCluster('truth');
  clusterId = created.cluster.id;
  await t.addNodes(clusterId, 'node-1');
  service = (await t.admin.call('createService', {
    service: {
      name: 'truth-app', organizationId: 'org-1', clusterId,
      runtime: { image: 'registry.example.com/app/web:1', replicas: 1, profile: { runAs: { user: 1000, group: 1000 } }, placement: { nodeIds: ['node-1'] } },
      volumes: [],
    },
  })).service;
  relay = await connectElectedRelay(t, clusterId, created.relayToken);
  await relay.fire('registerClusterRelay', { registration: { origin: relayOrigin, version: '1.0.0', protocol: 'cluster-relay/1' } });
  const closure = randomBytes(16 * 1024);
  relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    await sendServiceDatabaseClosure(relay, {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closure),
    }, chunked(closure));
    return { snapshots: [{ type: 'database', snapshotId: `snap-${request.backupId}`, resourceName: 'db', databaseName: 'app', createdAt: Date.now(), sizeBytes: closure.byteLength }] };
  });
  relay.addHandler<IReq_Cloudly_Relay_RestoreClusterService>('restoreClusterService', async (request) => {
    restoresAsked.push(request.backupId);
    return { restored: request.snapshots };
  });
  await t.admin.call('createServiceBackup', { clusterId, nodeId: 'node-1', serviceId: service.id, backupId: 'backup-1' });
  await waitFor(async () => (await t.admin.call('getServiceBackups', { serviceId: service.id }))
    .backups.some((backup) => backup.backupId === 'backup-1' && (backup as { state?: string }).state === 'completed'), 'backup-1 completed', 15_000);
  await t.admin.call('createUser', { username: viewerUsername, password: viewerPassword, role: 'user' });
  if (skip) {
    return;
  }
  browser = await launchBrowser();
  page = browser.page;
  page.on('request', (requestArg) => {
    const body = requestArg.postData();
    if (requestArg.url().endsWith('/typedrequest') && body) {
      methodsSent.push(String((JSON.parse(body) as { method?: unknown }).method));
    }
  });
});

after(async () => {
  await browser?.close();
  await t?.stop();
});

/** The change buttons of a page: whether each is disabled, and the reason it carries. */
const changeButtons = async (selectorsArg: string[]) => {
  const states: Record<string, { disabled: boolean; title: string | null }> = {};
  for (const selector of selectorsArg) {
    const button = page.locator(selector).first();
    await button.waitFor();
    states[selector] = { disabled: await button.isDisabled(), title: await button.getAttribute('title') };
  }
  return states;
};

const fleetActions = ['[data-action=new-cluster]'];
const clusterActions = ['[data-action=new-service]', '[data-action=new-node]', '[data-action=remove-node]', '[data-action=rotate-relay-token]'];
const serviceActions = ['[data-action=edit-service]', '[data-action=delete-service]', 'tr[data-backup-id=backup-1] [data-action=restore-backup]',
  'tr[data-backup-id=backup-1] [data-action=isolated-restore]', '[data-action=start-backup]'];

const visitEach = async (checkArg: (statesArg: Record<string, { disabled: boolean; title: string | null }>) => void) => {
  await page.goto(`${t.baseUrl}/dashboard/#/fleet`);
  checkArg(await changeButtons(fleetActions));
  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${clusterId}`);
  checkArg(await changeButtons(clusterActions));
  await page.goto(`${t.baseUrl}/dashboard/#/service/${service.id}`);
  await page.locator('tr[data-backup-id=backup-1]').waitFor();
  checkArg(await changeButtons(serviceActions));
};

test('an administrator finds every change button enabled', { skip }, async () => {
  await login(testAdminUsername, testAdminPassword);
  await visitEach((statesArg) => {
    for (const [selector, state] of Object.entries(statesArg)) {
      assert.equal(state.disabled, false, `${selector} is enabled for an administrator`);
      assert.equal(state.title, null, `${selector} carries no read-only reason`);
    }
  });
});

test('a read-only account finds every change button disabled with the reason, and sends no dry run', { skip }, async () => {
  await login(viewerUsername, viewerPassword);
  assert.match(await page.locator('[data-read-only]').textContent() ?? '', /read-only account: actions are disabled/);
  methodsSent.length = 0;
  await visitEach((statesArg) => {
    for (const [selector, state] of Object.entries(statesArg)) {
      assert.equal(state.disabled, true, `${selector} is disabled for a read-only account`);
      assert.match(state.title ?? '', /read-only \(role user\): only an administrator can change things/, `${selector} says why`);
    }
  });
  // A disabled button cannot be clicked into a dialog: nothing asks Cloudly for a dry run.
  await page.locator('[data-action=edit-service]').click({ force: true });
  assert.equal(await page.locator('dialog.action-dialog').count(), 0);
  assert.equal(await page.locator('[data-action=edit-service]').getAttribute('aria-describedby'), 'read-only-note');
  assert.ok(methodsSent.length > 0, 'the pages were read');
  assert.ok(methodsSent.every((methodArg) => methodArg.startsWith('get')), `only reads were sent: ${methodsSent.join(', ')}`);
});

// ---- restore confirmation ----

test('a restore over the service\'s data is confirmed only once the service\'s name is typed', { skip }, async () => {
  await login(testAdminUsername, testAdminPassword);
  await page.goto(`${t.baseUrl}/dashboard/#/service/${service.id}`);
  await page.locator('tr[data-backup-id=backup-1] [data-action=restore-backup]').click();
  const dialog = page.locator('dialog.action-dialog');
  const confirm = dialog.locator('[data-action=confirm]');
  await confirm.waitFor();
  assert.match(await dialog.locator('[data-type-to-confirm]').textContent() ?? '', /replaces the data of truth-app on node node-1 and cannot be undone\. Type truth-app to confirm/);
  assert.equal(await confirm.isDisabled(), true, 'nothing typed: Confirm is disabled');
  await dialog.locator('#type-to-confirm').fill('truth-ap');
  await dialog.locator('[data-type-to-confirm-mismatch]').waitFor();
  assert.equal(await confirm.isDisabled(), true, 'a name that does not match: Confirm stays disabled');
  await confirm.click({ force: true });
  assert.equal(await dialog.getAttribute('data-phase'), 'confirm', 'a click on the disabled button did nothing');
  await dialog.locator('#type-to-confirm').fill('TRUTH-APP');
  assert.equal(await confirm.isDisabled(), true, 'the name is matched exactly');
  assert.deepEqual(restoresAsked, [], 'nothing was restored yet');
  await dialog.locator('#type-to-confirm').fill(service.name);
  assert.equal(await confirm.isDisabled(), false, 'the name typed: Confirm is enabled');
  await confirm.click();
  await page.locator('dialog.action-dialog[data-phase=done]').waitFor({ timeout: 15_000 });
  assert.deepEqual(restoresAsked, ['backup-1']);
  await dialog.locator('[data-action=close]').click();
  await dialog.waitFor({ state: 'detached' });
});

test('a change that overwrites no data (a backup) asks for no name', { skip }, async () => {
  await page.locator('[data-action=start-backup]').click();
  const dialog = page.locator('dialog.action-dialog');
  const confirm = dialog.locator('[data-action=confirm]');
  await confirm.waitFor();
  assert.equal(await dialog.locator('[data-type-to-confirm]').count(), 0);
  assert.equal(await confirm.isDisabled(), false);
  await dialog.locator('[data-action=cancel]').click();
  await dialog.waitFor({ state: 'detached' });
});

// ---- the service form states volume initialization; reviews show a field-level diff ----

const fillNewService = async (nameArg: string, initializationsArg: string) => {
  // Through the fleet: a form left open on the cluster page closes when the page is left.
  await page.goto(`${t.baseUrl}/dashboard/#/fleet`);
  await page.locator('[data-page=fleet]').waitFor();
  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${clusterId}`);
  await page.locator('[data-action=new-service]').click();
  const form = page.locator('cloudly-service-form');
  await form.locator('#service-form-name').fill(nameArg);
  await form.locator('#service-form-organizationId').fill('org-1');
  await form.locator('#service-form-image').fill('registry.example.com/app/db:1');
  await form.locator('#service-form-volumes').fill('/data');
  await form.locator('#service-form-initializations').fill(initializationsArg);
  return form;
};

test('a new service with a volume and no initialization is warned as refused in the form and in the review, with the reason', { skip }, async () => {
  const form = await fillNewService('no-init', '');
  await form.locator('[data-would-be-refused] [data-refusal-reason=volume-initialization-unknown]').waitFor();
  await form.locator('[data-action=review-service]').click();
  const dialog = page.locator('dialog.action-dialog');
  await dialog.locator('[data-action=confirm]').waitFor();
  const warning = dialog.locator('[data-would-be-refused]');
  assert.match(await warning.textContent() ?? '', /runtime would refuse this service:.*\/data.*without an initialization.*volume-initialization-unknown.*Instead: start it empty/s);
  // A new service's review lists every field it would store, nothing before.
  assert.match(await dialog.locator('tr[data-diff-path="runtime.image"]').textContent() ?? '', /\(absent\)\s*→\s*"registry\.example\.com\/app\/db:1"/);
  assert.equal(await dialog.locator('pre.json').filter({ hasText: '"organizationId"' }).isVisible(), false, 'no spec as JSON in view');
  await dialog.locator('[data-action=cancel]').click();
  await dialog.waitFor({ state: 'detached' });
});

test('a new service states its volume\'s initialization in the form: no warning, and the service is stored with it', { skip }, async () => {
  const form = await fillNewService('with-init', '/data nowhere');
  await form.locator('[data-form-reasons]').waitFor();
  assert.match(await form.locator('[data-form-reasons]').textContent() ?? '', /initializations\[0\] must be written/);
  assert.equal(await form.locator('[data-action=review-service]').isDisabled(), true);
  // Owner from run-as without a run-as: the contracts' rule says the runtime would refuse it.
  await form.locator('#service-form-initializations').fill('/data empty run-as 0750');
  await form.locator('[data-would-be-refused] [data-refusal-reason=volume-ownership-unknown]').waitFor();
  await form.locator('#service-form-initializations').fill('/data empty 999:999 0700');
  await form.locator('[data-would-be-refused]').waitFor({ state: 'detached' });
  await form.locator('[data-action=review-service]').click();
  const dialog = page.locator('dialog.action-dialog');
  await dialog.locator('[data-action=confirm]').waitFor();
  assert.equal(await dialog.locator('[data-would-be-refused]').count(), 0);
  assert.match(await dialog.locator('tr[data-diff-path="volumes[0].initialization.ownership.uid"]').textContent() ?? '', /\(absent\)\s*→\s*999/);
  await dialog.locator('[data-action=confirm]').click();
  await page.locator('dialog.action-dialog[data-phase=done]').waitFor({ timeout: 15_000 });
  const serviceId = await dialog.locator('[data-created-service]').getAttribute('data-created-service');
  const stored = (await t.admin.call('getServiceById', { serviceId: serviceId ?? '' })).service;
  assert.deepEqual(stored.volumes[0]?.initialization, { kind: 'empty', ownership: { kind: 'explicit', uid: 999, gid: 999, mode: 0o700 } });
  await dialog.locator('[data-action=close]').click();
  await dialog.waitFor({ state: 'detached' });
});

test('an edit\'s review shows what changes field by field (image :1 → :2), not the whole spec', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/service/${service.id}`);
  await page.locator('[data-action=edit-service]').click();
  const form = page.locator('cloudly-service-form');
  await form.locator('#service-form-image').fill('registry.example.com/app/web:2');
  await form.locator('[data-action=review-service]').click();
  const dialog = page.locator('dialog.action-dialog');
  await dialog.locator('[data-action=confirm]').waitFor();
  const rows = await dialog.locator('tr[data-diff-path]').evaluateAll((rowsArg) => rowsArg.map((row) => row.getAttribute('data-diff-path')));
  assert.deepEqual(rows, ['runtime.image'], 'only the image changes');
  assert.match(await dialog.locator('tr[data-diff-path="runtime.image"]').textContent() ?? '', /"registry\.example\.com\/app\/web:1"\s*→\s*"registry\.example\.com\/app\/web:2"/);
  await dialog.locator('[data-action=cancel]').click();
  await dialog.waitFor({ state: 'detached' });
});

// ---- smaller truths ----

test('the node summary and the node rows say the same: an administrator\'s node the relay reported counts as reported', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/fleet`);
  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${clusterId}`);
  await page.locator('tr[data-node-id=node-1] [data-node-reported=no]').waitFor();
  assert.equal(await page.locator('[data-node-reports]').textContent(), '0 reported by the relay, 1 with no report yet');
  await relay.fire('reportClusterNode', { report: { nodeId: 'node-1', hostAddresses: ['10.60.0.1'] } });
  await page.locator('tr[data-node-id=node-1] [data-node-reported=yes]').waitFor();
  await waitFor(async () => await page.locator('[data-node-reports]').textContent() === '1 reported by the relay, 0 with no report yet', 'the summary counts the report');
  assert.match(await page.locator('tr[data-node-id=node-1]').textContent() ?? '', /administrator/, 'still known from the administrator');
});

test('the relay-token dialog says how to start a relay with the token, and links the relay protocol Cloudly serves', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/fleet`);
  await page.locator('[data-action=new-cluster]').click();
  await page.locator('#new-cluster-name').fill('with-token');
  await page.locator('[data-action=create-cluster]').click();
  const dialog = page.locator('dialog.action-dialog');
  await dialog.locator('[data-action=confirm]').click();
  await page.locator('dialog.action-dialog[data-phase=done]').waitFor({ timeout: 15_000 });
  const token = await dialog.locator('#one-time-secret-value').inputValue();
  assert.ok(token.length > 20);
  assert.equal(await dialog.locator('[data-relay-command]').textContent(), `npx cloudly-sim --url ${t.baseUrl} --relay-token ${token}`);
  const href = await dialog.locator('[data-relay-protocol-link]').evaluate((linkArg) => (linkArg as unknown as { href: string }).href);
  assert.equal(href, `${t.baseUrl}/dashboard/relay-protocol.md`);
  const served = await fetch(href);
  assert.equal(served.status, 200);
  assert.match(served.headers.get('content-type') ?? '', /^text\/markdown/);
  assert.match(await served.text(), /relay/i);
  await dialog.locator('[data-action=close]').click();
  await dialog.waitFor({ state: 'detached' });
});

test('a route that is not ready says, with names, what it waits for and what fixes it', { skip }, async () => {
  await t.admin.call('createService', {
    service: {
      name: 'shop', organizationId: 'org-1', clusterId,
      runtime: { image: 'registry.example.com/app/shop:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
      ports: [{ name: 'http', port: 8080, protocol: 'tcp' }], routes: [{ hostname: 'shop.example.com', targetPort: 'http' }], volumes: [],
    },
  });
  await page.goto(`${t.baseUrl}/dashboard/#/fleet`);
  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${clusterId}`);
  const row = page.locator('tr[data-route="shop.example.com"][data-route-cause=no-ingress-designation]');
  await row.waitFor();
  const text = await row.textContent() ?? '';
  assert.match(text, /shop/);
  assert.match(text, /No service is designated as this cluster's ingress/);
  assert.match(await row.locator('[data-route-fix]').textContent() ?? '', /To fix: Designate an ingress service above \(Designate ingress…\)/);
  assert.doesNotMatch(text, /svc-|projection|grant/, 'no ids and no internal words');
  assert.match(await page.locator('#routes-title').textContent() ?? '', /Routes: 0 of 1 ready, 1 waiting/);
});

test('"Change the plan…" is a form, and the page shows who holds which address', { skip }, async () => {
  const plan = { ...upstreamExamplePlan(), hubs: [{ clusterId, address: '192.0.2.1' }] };
  await t.admin.call('setRuntimeNetworkAddressPlan', { plan });
  // The cluster's services get their workload leases from the plan's pool.
  await waitFor(async () => (await t.admin.call('getClusterRouteTableResolution', { clusterId })).leases.some((lease) => lease.serviceId === service.id),
    'truth-app holds a lease', 30_000);
  const lease = (await t.admin.call('getClusterRouteTableResolution', { clusterId })).leases.find((entry) => entry.serviceId === service.id)!;
  await page.goto(`${t.baseUrl}/dashboard/#/network`);
  const row = page.locator(`[data-addresses] tr[data-address="${lease.address}"]`);
  await row.waitFor();
  const text = await row.textContent() ?? '';
  assert.match(text, /service truth-app, replica 0/);
  assert.match(text, /node node-1 of cluster truth/);
  assert.match(await page.locator('[data-addresses] tr[data-address="192.0.2.17"]').first().textContent() ?? '', /platform endpoint corestore/);
  assert.match(await page.locator('[data-addresses] tr[data-address="192.0.2.1"]').textContent() ?? '', /VPN hub/);
  await page.locator('[data-action=edit-plan]').click();
  assert.equal(await page.locator('textarea#plan-json').count(), 0, 'no raw JSON textarea');
  assert.equal(await page.locator('#plan-pools').inputValue(), 'workloads 192.0.2.128/25');
  assert.equal(await page.locator('[data-plan-form-revision]').getAttribute('data-plan-form-revision'), '2');
});

// ---- stale marking (last: the restart closes the test relay) ----

/** The page's own function, as the functions passed to `evaluate` see it (this file compiles without the DOM's types). */
declare const getComputedStyle: (elementArg: unknown) => { backgroundColor: string };

/** The computed background of an element, to tell a green badge from a grey one. */
const backgroundOf = async (selectorArg: string): Promise<string> =>
  page.locator(selectorArg).first().evaluate((elementArg) => getComputedStyle(elementArg).backgroundColor);

/** The stylesheet's green badge (--good-bg, #dcfce7). */
const green = 'rgb(220, 252, 231)';

test('while Cloudly is down the page is marked stale with no green badge; after it is back and read again the marking is gone', { skip }, async () => {
  await login(testAdminUsername, testAdminPassword);
  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${clusterId}`);
  const cluster = page.locator('cloudly-cluster-page');
  await page.locator('[data-relay-state=connected]').waitFor();
  assert.equal(await backgroundOf('[data-relay-state=connected]'), green, 'a connected relay is green while current');
  assert.equal(await cluster.getAttribute('data-stale'), null);
  assert.equal(await page.locator('[data-stale-banner]').count(), 0);
  await t.restart({
    samePort: true,
    whileStopped: async () => {
      await page.locator('[data-stale-banner]').waitFor({ timeout: 30_000 });
      assert.match(await page.locator('[data-stale-banner]').textContent() ?? '', /connection to Cloudly was lost.*may no longer be so/s);
      await page.locator('cloudly-cluster-page[data-stale].stale').waitFor();
      // The last data is still shown, but no longer green.
      assert.equal(await page.locator('[data-relay-state=connected]').count(), 1, 'the last data stays on the page');
      assert.notEqual(await backgroundOf('[data-relay-state=connected]'), green, 'a stale "connected" is not green');
      assert.notEqual(await backgroundOf('[data-connection]'), green, 'the connection badge is not green');
      // "Read again" while Cloudly is down keeps the marking: nothing was read.
      await page.locator('[data-action=read-again]').click();
      await page.locator('[data-page=cluster] .refusal[data-code=transport]').waitFor({ timeout: 15_000 });
      assert.equal(await cluster.getAttribute('data-stale'), '');
      assert.equal(await page.locator('[data-stale-banner]').count(), 1);
    },
  });
  // Back on the same port: the socket reconnects, the page reads again, the marking goes. The
  // relay closed with the old server, so the page read again shows it missing.
  await page.locator('[data-stale-banner]').waitFor({ state: 'detached', timeout: 30_000 });
  assert.equal(await cluster.getAttribute('data-stale'), null);
  await page.locator('[data-relay-state=missing]').waitFor();
  await page.locator('[data-connection=live]').waitFor();
  assert.equal(await backgroundOf('[data-connection]'), green, 'live again, and current');
  assert.match(await page.locator('[data-notice]').textContent() ?? '', /Reconnected/);
});
