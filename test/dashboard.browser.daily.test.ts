import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Page } from 'playwright-core';
import { refusalOf, startTestCloudly, testAdminPassword, testAdminUsername, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { chromiumAvailable, chromiumPath, launchBrowser, recordPageErrors, type IBrowser } from './helpers/browser.js';
import { chunked, collect, descriptorOf, scratchRehearsalMappings } from './backup.fixture.js';
import { receiveStagedArchiveObject, sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import type { IIsolatedRestoreNodeState } from '../ts/interfaces/data/isolatedrestore.js';
import type {
  IReq_Cloudly_Coreflow_CleanupIsolatedRestore,
  IReq_Cloudly_Coreflow_ExecuteIsolatedRestore,
  IReq_Cloudly_Coreflow_GetIsolatedRestoreStatus,
  IReq_Cloudly_Coreflow_PrepareIsolatedRestore,
  IReq_Cloudly_Relay_StageIsolatedRestoreArchive,
} from '../ts/interfaces/requests/backup.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IService } from '../ts/interfaces/data/service.js';
import type {
  IReq_Cloudly_Relay_BackupClusterService,
  IReq_Cloudly_Relay_RestoreClusterService,
} from '../ts/interfaces/requests/backup.js';
import { upstreamExamplePlan } from './runtimenetwork.fixture.js';
import type { IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources } from '../ts/interfaces/requests/corestore.js';

/**
 * The operator's day in the dashboard, in headless Chromium against a real Cloudly (embedded
 * database) and a real relay client: the bugs issue 35 found on the service, cluster and login
 * pages, and the flows that let the dashboard do the whole job (clusters and nodes, services,
 * operations, users), each change through its dry run and confirmation, each refusal with its
 * code and reasons.
 */

/** The page's globals, for the functions that run inside it (the test's own lib has no DOM). */
declare const location: { hash: string };
/** The page's document, as the functions passed to `page.evaluate` see it (this file compiles without the DOM's types). */
declare const document: { querySelector(selectorArg: string): unknown };

const skip = chromiumAvailable() ? false : `${chromiumPath} is missing (apt-get install -y chromium; .ci/run installs it)`;

let t: ITestCloudly;
let browser: IBrowser;
let page: Page;
let clusterId: string;
let relay: CloudlyRelayClient;
let service: IService;
const consoleErrors: string[] = [];
/** The relay answers a backup once this settles; a test replaces it to keep one running. */
let holdBackups: Promise<void> = Promise.resolve();
/** The service whose database the relay's legacy inventory lists on node-1 (set by its test). */
let legacyServiceId: string | null = null;
/** The isolated restore steps the node was asked to take. */
const restoreSteps: string[] = [];
/** The backups the relay was asked to restore. */
const restoresAsked: string[] = [];

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
  service = (await t.admin.call('createService', {
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
    await holdBackups;
    await sendServiceDatabaseClosure(relay, {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closure),
    }, chunked(closure));
    return { snapshots: [{ type: 'database', snapshotId: `snap-${request.backupId}`, resourceName: 'db', databaseName: 'app', createdAt: Date.now(), sizeBytes: closure.byteLength }] };
  });
  relay.addHandler<IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources>('getClusterCorestoreLegacyResources', async ({ nodeId }) => ({
    reachable: true, nodeId, readAt: Date.now(),
    services: legacyServiceId && nodeId === 'node-1'
      ? [{ serviceId: legacyServiceId, resources: [{ capability: 'database', databaseName: 'legacy_db', adoption: { state: 'unadopted', blocker: null } }] }]
      : [],
  }));
  // The node's side of an isolated restore (a coreflow stand-in): prepared, staged, then each step.
  const nodeState = (requestArg: { clusterId: string; targetNodeName: string; restoreId: string }, revisionArg: number, phaseArg: IIsolatedRestoreNodeState['phase']): IIsolatedRestoreNodeState => ({
    clusterId: requestArg.clusterId, targetNodeName: requestArg.targetNodeName, restoreId: requestArg.restoreId, revision: revisionArg, phase: phaseArg, stagedObjects: [],
  });
  relay.addHandler<IReq_Cloudly_Coreflow_PrepareIsolatedRestore>('coreflowPrepareIsolatedRestore', async (request) => ({ state: nodeState(request, 1, 'prepared') }));
  relay.addHandler<IReq_Cloudly_Relay_StageIsolatedRestoreArchive>('stageIsolatedRestoreArchive', async (request) => {
    await collect(receiveStagedArchiveObject(relay, request.archive, request.object));
    return { state: { ...nodeState(request, request.expectedRevision + 1, 'ready'), stagedObjects: [request.object] } };
  });
  relay.addHandler<IReq_Cloudly_Coreflow_GetIsolatedRestoreStatus>('coreflowGetIsolatedRestoreStatus', async (request) => ({ state: nodeState(request, 2, 'ready') }));
  relay.addHandler<IReq_Cloudly_Coreflow_ExecuteIsolatedRestore>('coreflowExecuteIsolatedRestore', async (request) => {
    restoreSteps.push('execute');
    return { state: nodeState(request, request.expectedRevision + 1, 'executed') };
  });
  relay.addHandler<IReq_Cloudly_Coreflow_CleanupIsolatedRestore>('coreflowCleanupIsolatedRestore', async (request) => {
    restoreSteps.push('cleanup');
    return { state: nodeState(request, request.expectedRevision + 1, 'cleaned-up') };
  });
  relay.addHandler<IReq_Cloudly_Relay_RestoreClusterService>('restoreClusterService', async (request) => {
    restoresAsked.push(request.backupId);
    return { restored: request.snapshots };
  });
  if (skip) {
    return;
  }
  browser = await launchBrowser();
  page = browser.page;
  recordPageErrors(page, consoleErrors);
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
    await waitFor(async () => (await t.admin.call('getServiceBackups', { serviceId: service.id }))
      .backups.some((backup) => backup.backupId === backupId && (backup as { state?: string }).state !== 'running'), `backup ${backupId} recorded`, 15_000);
  }
  await page.goto(`${t.baseUrl}/dashboard/#/service/${service.id}`);
  await page.locator('tr[data-backup-id=backup-a]').waitFor();
  assert.equal(await page.getByLabel('Node').inputValue(), 'node-2');
  const listed = await page.locator('tr[data-backup-id]').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-backup-id')));
  assert.deepEqual(listed, ['backup-a', 'backup-b', 'backup-c']);
});

// ---- the operator's flows ----

/** Waits for the dialog's dry run, checks nothing was written by it, confirms, waits for the end. */
const confirmAfterDryRun = async (unchangedArg: () => Promise<void>) => {
  const dialog = page.locator('dialog.action-dialog');
  await dialog.locator('[data-action=confirm]').waitFor();
  assert.match(await dialog.locator('.dry-run').textContent() ?? '', /Dry run/);
  await unchangedArg();
  await dialog.locator('[data-action=confirm]').click();
  await page.locator('dialog.action-dialog[data-phase=done]').waitFor({ timeout: 15_000 });
  return dialog;
};

const closeDialog = async () => {
  await page.locator('dialog.action-dialog [data-action=close]').click();
  await page.locator('dialog.action-dialog').waitFor({ state: 'detached' });
};

const clusterNames = async () => (await t.admin.call('getClusters', { limit: 100 })).clusters.map((cluster: { name: string }) => cluster.name) as string[];

test('a cluster is created from the fleet page: its name checked as typed, the relay token shown once and working', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/fleet`);
  await page.locator('[data-action=new-cluster]').click();
  await page.getByLabel('Cluster name').fill('Bad Name!');
  await page.locator('[data-form-reasons]').waitFor();
  assert.match(await page.locator('[data-form-reasons]').textContent() ?? '', /name has characters that are not allowed/);
  assert.equal(await page.locator('[data-action=create-cluster]').isDisabled(), true, 'a name Cloudly would refuse cannot be sent');
  await page.getByLabel('Cluster name').fill('beta');
  assert.equal(await page.locator('[data-form-reasons]').count(), 0);
  await page.locator('[data-action=create-cluster]').click();
  const dialog = await confirmAfterDryRun(async () => assert.ok(!(await clusterNames()).includes('beta'), 'the dry run created nothing'));
  const token = await dialog.locator('.secret-value').inputValue();
  assert.ok(token.length >= 20);
  assert.equal(await dialog.locator('[data-action=copy]').count(), 1, 'a Copy button');
  const created = await t.connectRelay(token);
  created.close();
  await closeDialog();
  assert.equal(await page.locator('.secret-value').count(), 0, 'closed: the token is gone');
  await waitForText('[data-page=fleet] table[aria-label=Clusters] th a', 'beta');
});

test('nodes are added and removed on the cluster page; a refused dry run shows its code and reasons', { skip }, async () => {
  const beta = (await t.admin.call('getClusters', { limit: 100 })).clusters.find((cluster: { name: string }) => cluster.name === 'beta');
  assert.ok(beta, 'the cluster the test before created');
  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${beta.id}`);
  await page.locator('[data-action=new-node]').click();
  await page.getByLabel('Node name').fill('edge one');
  await page.getByLabel('Node id (optional)').fill('-bad');
  await page.locator('[data-form-reasons]').waitFor();
  assert.equal(await page.locator('[data-action=add-node]').isDisabled(), true);
  await page.getByLabel('Node id (optional)').fill('edge-1');
  await page.locator('[data-action=add-node]').click();
  await confirmAfterDryRun(async () => assert.equal((await t.admin.call('getClusterNodes', { clusterId: beta.id })).nodes.length, 0, 'the dry run added nothing'));
  await closeDialog();
  await page.locator('tr[data-node-id=edge-1]').waitFor();
  // The same id again: Cloudly refuses the dry run, and the dialog says how.
  await page.locator('[data-action=new-node]').click();
  await page.getByLabel('Node name').fill('edge again');
  await page.getByLabel('Node id (optional)').fill('edge-1');
  await page.locator('[data-action=add-node]').click();
  const expected = await refusalOf(() => t.admin.call('addClusterNode', { clusterId: beta.id, name: 'edge again', nodeId: 'edge-1', dryRun: true }));
  const refused = page.locator('dialog.action-dialog[data-phase=refused]');
  await refused.waitFor();
  assert.equal(await refused.locator('.refusal-code').textContent(), expected.code);
  assert.deepEqual(await refused.locator('.refusal-reasons li').allTextContents(), expected.reasons ?? []);
  await closeDialog();
  await page.locator('tr[data-node-id=edge-1] [data-action=remove-node]').click();
  await confirmAfterDryRun(async () => assert.equal((await t.admin.call('getClusterNodes', { clusterId: beta.id })).nodes.length, 1, 'the dry run removed nothing'));
  await closeDialog();
  await page.locator('tr[data-node-id=edge-1]').waitFor({ state: 'detached' });
});

test('a cluster is deleted from its page after its dry run, and the fleet no longer lists it', { skip }, async () => {
  await page.locator('[data-action=delete-cluster]').click();
  await confirmAfterDryRun(async () => assert.ok((await clusterNames()).includes('beta'), 'the dry run deleted nothing'));
  await closeDialog();
  await page.locator('[data-page=fleet]').waitFor();
  assert.ok(!(await clusterNames()).includes('beta'));
  await page.locator('[data-page=fleet] table[aria-label=Clusters] th a').filter({ hasText: 'beta' }).waitFor({ state: 'detached' });
});

test('a service is created with ports, routes, run-as, placement and a volume; the form checks it as typed with the contract rules', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${clusterId}`);
  await page.locator('[data-action=new-service]').click();
  const form = page.locator('cloudly-service-form');
  await form.locator('#service-form-name').fill('daily-web');
  await form.locator('#service-form-organizationId').fill('org-1');
  await form.locator('#service-form-image').fill('registry.example.com/app/web:2');
  await form.locator('#service-form-replicas').fill('2');
  await form.locator('#service-form-runAs').fill('1000:1000');
  await form.getByLabel('node-1').check();
  await form.locator('#service-form-ports').fill('http 8080/tcp');
  // A route to a port the service does not declare: the contract's validator names it.
  await form.locator('#service-form-routes').fill('web.example.com https');
  await form.locator('#service-form-volumes').fill('/srv/data');
  await form.locator('[data-form-reasons]').waitFor();
  assert.match(await form.locator('[data-form-reasons]').textContent() ?? '', /service\.routes\[0\]/);
  assert.equal(await form.locator('[data-action=review-service]').isDisabled(), true);
  await form.locator('#service-form-routes').fill('web.example.com http');
  assert.equal(await form.locator('[data-form-reasons]').count(), 0);
  await form.locator('[data-action=review-service]').click();
  const names = async () => (await t.admin.call('getServices', { clusterId, limit: 100 })).services.map((entry: IService) => entry.name) as string[];
  const dialog = await confirmAfterDryRun(async () => assert.ok(!(await names()).includes('daily-web'), 'the dry run stored nothing'));
  const createdId = await dialog.locator('[data-created-service]').getAttribute('data-created-service');
  assert.ok(createdId, 'the result links the new service');
  const stored = (await t.admin.call('getServiceById', { serviceId: createdId })).service as IService;
  assert.deepEqual(stored.runtime.profile.runAs, { user: 1000, group: 1000 });
  assert.deepEqual(stored.runtime.placement.nodeIds, ['node-1']);
  assert.equal(stored.runtime.replicas, 2);
  assert.deepEqual(stored.ports, [{ name: 'http', port: 8080, protocol: 'tcp' }]);
  assert.deepEqual(stored.routes, [{ hostname: 'web.example.com', targetPort: 'http' }]);
  assert.deepEqual(stored.volumes.map((volume) => volume.mountPath), ['/srv/data']);
  await closeDialog();
  await page.locator(`tr[data-service-id="${createdId}"]`).waitFor();
});

test('a service is edited (a new spec revision) and deleted, each after its dry run', { skip }, async () => {
  const created = (await t.admin.call('getServices', { clusterId, limit: 100 })).services.find((entry: IService) => entry.name === 'daily-web') as IService;
  await page.goto(`${t.baseUrl}/dashboard/#/service/${created.id}`);
  await page.locator('[data-action=edit-service]').click();
  const form = page.locator('cloudly-service-form');
  assert.equal(await form.locator('#service-form-ports').inputValue(), 'http 8080/tcp', 'the form holds the stored spec');
  await form.locator('#service-form-replicas').fill('3');
  // The page reloads the service underneath, as it does on a live update of the service or of a
  // document of it (its runtime status after a relay report): what was typed stays.
  await page.evaluate(async () => {
    const servicePage = document.querySelector('cloudly-service-page') as { load(): Promise<void>; updateComplete: Promise<boolean> };
    await servicePage.load();
    await servicePage.updateComplete;
  });
  assert.equal(await form.locator('#service-form-replicas').inputValue(), '3', 'a reload of the page keeps the typed value');
  await form.locator('[data-action=review-service]').click();
  const editDialog = await confirmAfterDryRun(async () => assert.equal((await t.admin.call('getServiceById', { serviceId: created.id })).service.runtime.replicas, 2, 'the dry run changed nothing'));
  const editSaid = await editDialog.textContent() ?? '';
  await closeDialog();
  const edited = (await t.admin.call('getServiceById', { serviceId: created.id })).service as IService;
  assert.equal(edited.runtime.replicas, 3, `the edit is stored; the dialog said: ${editSaid}`);
  assert.equal(edited.specRevision, created.specRevision + 1);
  assert.deepEqual(edited.volumes.map((volume) => volume.mountPath), ['/srv/data'], 'the volumes went back as they were');
  await page.locator('[data-action=delete-service]').click();
  const dialog = await confirmAfterDryRun(async () => assert.ok((await t.admin.call('getServiceById', { serviceId: created.id })).service, 'the dry run deleted nothing'));
  // The relay is connected, so Cloudly may wait for it to report the service stopped: either
  // answer is a committed deletion, and the audit log holds exactly the real call.
  const said = await dialog.locator('.action-done').textContent() ?? '';
  const gone = await refusalOf(() => t.admin.call('getServiceById', { serviceId: created.id })).catch(() => null);
  if (/Deleted\./.test(said)) {
    assert.equal(gone?.code, 'not-found');
  } else {
    assert.match(said, /Marked for removal/);
  }
  const audited = (await t.admin.call('getAuditEvents', { filter: { method: 'deleteService', targetId: created.id } })).events;
  assert.equal(audited.length, 1, 'one deletion committed (the dry run wrote none)');
  await closeDialog();
});

test('the operations page lists running and recent operations, and cancels a running one after its dry run', { skip }, async () => {
  let release!: () => void;
  holdBackups = new Promise<void>((resolve) => { release = resolve; });
  try {
    await t.admin.call('createServiceBackup', { clusterId, nodeId: 'node-2', serviceId: service.id, backupId: 'backup-held' });
    await page.goto(`${t.baseUrl}/dashboard/#/operations`);
    const row = page.locator('tr[data-operation-state=running]').filter({ hasText: 'backup-held' });
    await row.waitFor();
    assert.equal(await page.locator('tr[data-operation-state=completed]').count(), 3, 'the three finished backups are listed');
    await waitForText('tr[data-operation-state=completed] [data-requested-by]', testAdminUsername);
    await row.locator('[data-action=cancel-operation]').click();
    const operationId = await row.getAttribute('data-operation-id');
    assert.ok(operationId);
    await confirmAfterDryRun(async () => assert.equal((await t.admin.call('getOperation', { operationId })).operation.state, 'running', 'the dry run cancelled nothing'));
    await closeDialog();
    assert.equal((await t.admin.call('getOperation', { operationId })).operation.state, 'cancelled');
    await page.locator(`tr[data-operation-id="${operationId}"][data-operation-state=cancelled]`).waitFor();
  } finally {
    release();
    holdBackups = Promise.resolve();
  }
});

test('an administrator manages accounts and roles; a read-only account sees no Users page', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/users`);
  await page.locator(`tr[data-user="${testAdminUsername}"]`).waitFor();
  await page.locator('[data-action=new-user]').click();
  await page.locator('#new-user-name').fill('reader');
  await page.locator('#new-user-password').fill('short');
  await page.locator('[data-form-reasons]').waitFor();
  assert.match(await page.locator('[data-form-reasons]').textContent() ?? '', /password must be a string of 12/);
  const password = 'reader-password-0123';
  await page.locator('#new-user-password').fill(password);
  await page.locator('[data-action=create-user]').click();
  const usernames = async () => (await t.admin.call('getUsers', { limit: 100 })).users.map((user: { username: string }) => user.username) as string[];
  await confirmAfterDryRun(async () => assert.ok(!(await usernames()).includes('reader'), 'the dry run created nothing'));
  await closeDialog();
  const row = page.locator('tr[data-user=reader]');
  await row.waitFor();
  assert.equal(await row.locator('[data-role]').textContent(), 'user');
  await row.locator('[data-action=set-role]').click();
  await confirmAfterDryRun(async () => {
    // The review shows the one field that changes.
    assert.match(await page.locator('dialog.action-dialog tr[data-diff-path=role]').textContent() ?? '', /"user"\s*→\s*"admin"/);
    assert.equal(await page.locator('dialog.action-dialog tr[data-diff-path]').count(), 1);
  });
  await closeDialog();
  await waitForText('tr[data-user=reader] [data-role]', 'admin');
  await page.locator('tr[data-user=reader] [data-action=set-role]').click();
  await confirmAfterDryRun(async () => undefined);
  await closeDialog();
  await waitForText('tr[data-user=reader] [data-role]', 'user');
  // The read-only account: no Users link, and the page refuses with Cloudly's code.
  await page.locator('[data-action=logout]').click();
  await page.getByLabel('Username').fill('reader');
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('[data-read-only]').waitFor();
  assert.equal(await page.getByRole('link', { name: 'Users' }).count(), 0);
  await page.goto(`${t.baseUrl}/dashboard/#/users`);
  await page.locator('[data-page=users] .refusal[data-code=forbidden]').waitFor();
  await page.locator('[data-action=logout]').click();
  await login();
  await page.goto(`${t.baseUrl}/dashboard/#/users`);
  await page.locator('tr[data-user=reader] [data-action=delete-user]').click();
  await confirmAfterDryRun(async () => assert.ok((await usernames()).includes('reader')));
  await closeDialog();
  await page.locator('tr[data-user=reader]').waitFor({ state: 'detached' });
});

test('a backup is restored from the service page after its dry run, its operation followed to completion', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/service/${service.id}`);
  await page.locator('tr[data-backup-id=backup-b] [data-action=restore-backup]').click();
  await confirmAfterDryRun(async () => {
    assert.deepEqual(restoresAsked, [], 'the dry run asked the relay for nothing');
    // A restore over the service's data is confirmed by typing its name.
    await page.locator('dialog.action-dialog #type-to-confirm').fill(service.name);
  });
  assert.match(await page.locator('dialog.action-dialog .action-done').textContent() ?? '', /Restore completed: 1 snapshot\(s\) restored/);
  assert.deepEqual(restoresAsked, ['backup-b']);
  await closeDialog();
});

test('an isolated restore: mappings checked as typed, started after its dry run, then executed and cleaned up from the operations page', { skip }, async () => {
  await page.locator('tr[data-backup-id=backup-b] [data-action=isolated-restore]').click();
  await page.getByLabel('Resource mappings (JSON)').fill('[{"type":"volume"}]');
  await page.locator('[data-form-reasons]').waitFor();
  assert.match(await page.locator('[data-form-reasons]').textContent() ?? '', /mappings\[0\]/);
  assert.equal(await page.locator('[data-action=review-isolated-restore]').isDisabled(), true);
  // The backup's database snapshot (resource db, database app) into a scratch rehearsal database.
  const mappings = scratchRehearsalMappings();
  await page.getByLabel('Resource mappings (JSON)').fill(JSON.stringify(mappings));
  await page.getByLabel('Target node').fill('node-2');
  assert.equal(await page.locator('.isolated-form [data-form-reasons]').count(), 0);
  const isolatedOperations = async () => (await t.admin.call('getOperations', { serviceId: service.id, limit: 100 })).operations
    .filter((operation: { kind: string }) => operation.kind === 'isolated-restore');
  await page.locator('[data-action=review-isolated-restore]').click();
  await confirmAfterDryRun(async () => assert.equal((await isolatedOperations()).length, 0, 'the dry run started nothing'));
  const operations = await isolatedOperations();
  assert.equal(operations.length, 1);
  assert.equal(operations[0].state, 'completed');
  await closeDialog();
  // Its steps, on the operations page: status, execute, clean up, each change after its dry run.
  await page.goto(`${t.baseUrl}/dashboard/#/operations`);
  await page.locator(`tr[data-operation-id="${operations[0].operationId}"] [data-action=restore-steps]`).click();
  await page.locator('[data-restore-id] [data-restore-phase=ready]').waitFor();
  await page.locator('[data-action=execute-restore]').click();
  await confirmAfterDryRun(async () => assert.deepEqual(restoreSteps, [], 'the dry run asked the node nothing'));
  await closeDialog();
  await page.locator('[data-restore-id] [data-restore-phase=executed]').waitFor();
  await page.locator('[data-action=cleanup-restore]').click();
  await confirmAfterDryRun(async () => assert.deepEqual(restoreSteps, ['execute']));
  await closeDialog();
  await page.locator('[data-restore-id] [data-restore-phase=cleaned-up]').waitFor();
  assert.deepEqual(restoreSteps, ['execute', 'cleanup']);
  await page.goto(`${t.baseUrl}/dashboard/#/service/${service.id}`);
});

test('platform bindings of a service are created, changed and deleted from its page', { skip }, async () => {
  const bindings = async () => (await t.admin.call('getPlatformBindings', { serviceId: service.id })).platformBindings;
  await page.locator('[data-action=new-binding]').click();
  await page.locator('#binding-node').selectOption('node-2');
  await page.locator('[data-action=save-binding]').click();
  await confirmAfterDryRun(async () => assert.deepEqual(await bindings(), [], 'the dry run stored nothing'));
  await closeDialog();
  await page.locator('tr[data-binding-capability=database]').waitFor();
  assert.equal((await bindings())[0].nodeId, 'node-2');
  await page.locator('tr[data-binding-capability=database] [data-action=edit-binding]').click();
  await page.locator('#binding-node').selectOption('node-1');
  await page.locator('[data-action=save-binding]').click();
  await confirmAfterDryRun(async () => assert.equal((await bindings())[0].nodeId, 'node-2'));
  await closeDialog();
  await waitForText('tr[data-binding-capability=database]', 'node-1');
  await page.locator('tr[data-binding-capability=database] [data-action=delete-binding]').click();
  await confirmAfterDryRun(async () => assert.equal((await bindings()).length, 1));
  await closeDialog();
  await page.locator('tr[data-binding-capability=database]').waitFor({ state: 'detached' });
  assert.deepEqual(await bindings(), []);
});

test("a node's legacy Corestore resources are read and adopted from the cluster page after the plan's dry run", { skip }, async () => {
  legacyServiceId = (await t.admin.call('createService', {
    service: {
      name: 'legacy-app', organizationId: 'org-1', clusterId,
      runtime: { image: 'registry.example.com/app/legacy:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
      volumes: [],
    },
  })).service.id;
  await t.admin.call('setClusterNodeCorestore', { clusterId, nodeId: 'node-1', expected: null, corestore: { endpoint: 'http://10.20.0.11:3000' } });
  const adopted = async () => (await t.admin.call('getPlatformBindings', { serviceId: legacyServiceId! })).platformBindings;
  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${clusterId}`);
  await page.locator('tr[data-node-id=node-1] [data-action=inventory]').click();
  await page.getByLabel(legacyServiceId).check();
  await page.locator('[data-action=adopt]').click();
  const dialog = await confirmAfterDryRun(async () => {
    assert.match(await page.locator('dialog.action-dialog .dry-run table').textContent() ?? '', new RegExp(`${legacyServiceId}[\\s\\S]*database`));
    assert.deepEqual(await adopted(), [], 'the dry run adopted nothing');
  });
  assert.match(await dialog.locator('.action-done').textContent() ?? '', /Adopted/);
  const bindings = await adopted();
  assert.equal(bindings.length, 1);
  assert.equal(bindings[0].capability, 'database');
  assert.ok(bindings[0].corestoreLegacyAdoption, 'a binding created by the adoption');
  await closeDialog();
});

test('the address plan is written and read on its page; a broken plan is named before it is sent', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/network`);
  await page.locator('[data-plan-revision=none]').waitFor();
  await page.locator('[data-action=edit-plan]').click();
  // A form, a field per member of the plan (not a JSON textarea).
  const plan = upstreamExamplePlan();
  await page.locator('#plan-authorityId').fill(plan.authorityId);
  await page.locator('#plan-prefixes').fill(plan.prefixes.join('\n'));
  // A pool outside the authority's prefixes: the contract's validator names it before sending.
  await page.locator('#plan-pools').fill('workloads 10.0.0.0/8');
  await page.locator('#plan-hubPrefix').fill(plan.vpn.hubPrefix);
  await page.locator('#plan-peerPrefix').fill(plan.vpn.peerPrefix);
  await page.locator('#plan-hubs').fill(plan.hubs.map((hub) => `${hub.clusterId} ${hub.address}`).join('\n'));
  await page.locator('#plan-platformEndpoints').fill(plan.platformEndpoints.map((endpoint) => `${endpoint.id} ${endpoint.address}:${endpoint.port}/${endpoint.protocol}`).join('\n'));
  await page.locator('[data-form-reasons]').waitFor();
  assert.match(await page.locator('[data-form-reasons]').textContent() ?? '', /plan\.pools\[0\]/);
  assert.equal(await page.locator('[data-action=review-plan]').isDisabled(), true);
  await page.locator('#plan-pools').fill('workloads 192.0.2.128/25');
  assert.equal(await page.locator('[data-form-reasons]').count(), 0);
  await page.locator('[data-action=review-plan]').click();
  await confirmAfterDryRun(async () => {
    assert.equal((await t.admin.call('getRuntimeNetworkAddressPlan', {})).plan, null, 'the dry run wrote nothing');
    // The review shows the first plan field by field.
    await page.locator('dialog.action-dialog tr[data-diff-path="pools[0].prefix"]').waitFor();
  });
  await closeDialog();
  await page.locator('[data-plan-revision="1"]').waitFor();
  assert.match(await page.locator('[data-plan-revision="1"]').textContent() ?? '', /workloads 192\.0\.2\.128\/25/);
  assert.deepEqual((await t.admin.call('getRuntimeNetworkAddressPlan', {})).plan, plan, 'stored as typed');
  // The editor starts at the next revision: the compare-and-swap token is not the operator's job.
  await page.locator('[data-action=edit-plan]').click();
  assert.equal(await page.locator('[data-plan-form-revision]').getAttribute('data-plan-form-revision'), '2');
  assert.equal(await page.locator('#plan-pools').inputValue(), 'workloads 192.0.2.128/25');
});

test('no page of the day logged a console error', { skip }, () => {
  assert.deepEqual(consoleErrors, []);
});
