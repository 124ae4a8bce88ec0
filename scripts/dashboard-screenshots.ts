/**
 * Takes the screenshots in docs/dashboard.md: a real Cloudly (embedded database, fresh data
 * directory) seeded with a small fleet through the API and a real relay client, then each page in
 * headless Chromium (Debian's package, playwright-core), 1366×768. Writes docs/images/dashboard-*.png.
 *
 *   node --import tsx scripts/dashboard-screenshots.ts
 */
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { startTestCloudly, testAdminPassword, testAdminUsername } from '../test/helpers/cloudly.js';
import { launchBrowser } from '../test/helpers/browser.js';
import { connectElectedRelay, relayOrigin } from '../test/ingress.fixture.js';
import { chunked, descriptorOf } from '../test/backup.fixture.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { sealSecretVersion } from '../ts/client/secrets.js';
import { enrollSecretRecipient } from '../test/helpers/secrets.js';
import { projectDir } from '../ts/core/dashboard.js';
import type { IReq_Cloudly_Relay_BackupClusterService, IReq_Cloudly_Relay_RestoreClusterService } from '../ts/interfaces/requests/backup.js';
import { upstreamExamplePlan } from '../test/runtimenetwork.fixture.js';
import type { IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources } from '../ts/interfaces/requests/corestore.js';
import type { Locator } from 'playwright-core';

const imagesDir = path.join(projectDir, 'docs', 'images');

const t = await startTestCloudly();
const browser = await launchBrowser({ viewport: { width: 1366, height: 768 } });
try {
  const { page } = browser;
  const alpha = await t.createCluster('alpha');
  const clusterId = alpha.cluster.id;
  await t.addNodes(clusterId, 'node-1', 'node-2');
  await t.admin.call('setClusterNodeCorestore', { clusterId, nodeId: 'node-1', expected: null, corestore: { endpoint: 'http://10.20.0.11:3000' } });
  const relay = await connectElectedRelay(t, clusterId, alpha.relayToken);
  await relay.fire('registerClusterRelay', { registration: { origin: relayOrigin, version: '1.0.0', protocol: 'cluster-relay/1' } });
  await relay.fire('reportClusterNode', { report: { nodeId: 'node-1', hostAddresses: ['192.0.2.11'] } });
  await relay.fire('reportClusterNode', { report: { nodeId: 'node-2', hostAddresses: ['192.0.2.12', '198.51.100.12'] } });
  const ingress = (await t.admin.call('createService', {
    service: {
      name: 'edge-ingress', organizationId: 'org-1', clusterId,
      runtime: { image: 'registry.example.com/serve.zone/ingress:1', replicas: 2, profile: { runAs: null }, placement: { nodeIds: ['node-1', 'node-2'] } },
      volumes: [],
    },
  })).service;
  const db = (await t.admin.call('createService', {
    service: {
      name: 'orders-db', organizationId: 'org-1', clusterId,
      runtime: { image: 'registry.example.com/shop/orders-db:4', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
      volumes: [{ mountPath: '/var/lib/data', readOnly: false, driver: 'local' }],
    },
  })).service;
  await t.admin.call('createService', {
    service: {
      name: 'storefront', organizationId: 'org-1', clusterId,
      runtime: {
        image: 'registry.example.com/shop/storefront:12', replicas: 2, profile: { runAs: null }, placement: { nodeIds: [] },
      },
      ports: [{ name: 'http', port: 8080, protocol: 'tcp' }], routes: [{ hostname: 'shop.example.com', targetPort: 'http' }],
      volumes: [],
    },
  });
  const { runtime } = await t.admin.call('getClusterRuntime', { clusterId });
  await t.admin.call('designateClusterIngress', {
    designation: {
      mutationId: 'screenshot-designation', clusterId, ingressServiceId: ingress.id, currentRuntime: runtime as never,
      expectedSpecRevision: ingress.specRevision, expectedDesignation: null,
    },
  });
  const closure = randomBytes(512 * 1024);
  relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    await sendServiceDatabaseClosure(relay, { backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closure) }, chunked(closure));
    return { snapshots: [{ type: 'database', snapshotId: `snap-${request.backupId}`, resourceName: 'db', databaseName: 'orders', createdAt: Date.now(), sizeBytes: closure.byteLength }] };
  });
  const ordered = await t.admin.call('createServiceBackup', { clusterId, nodeId: 'node-1', serviceId: db.id, backupId: 'backup-nightly-1' }) as { operation?: { operationId: string } };
  if (ordered.operation) {
    for (let state = ''; state !== 'completed' && state !== 'failed';) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      state = (await t.admin.call('getOperation' as never, { operationId: ordered.operation.operationId } as never) as { operation: { state: string } }).operation.state;
    }
  }
  relay.addHandler<IReq_Cloudly_Relay_RestoreClusterService>('restoreClusterService', async (request) => ({ restored: request.snapshots }));
  relay.addHandler<IReq_Cloudly_Relay_GetClusterCorestoreLegacyResources>('getClusterCorestoreLegacyResources', async ({ nodeId }) => ({
    reachable: true, nodeId, readAt: Date.now(),
    services: nodeId === 'node-1' ? [{ serviceId: db.id, resources: [{ capability: 'objectstorage', bucketName: 'orders-exports', retention: null, adoption: { state: 'unadopted', blocker: null } }] }] : [],
  }));
  await t.admin.call('upsertPlatformBinding', { platformBinding: { serviceId: db.id, capability: 'database', enabled: true, nodeId: 'node-1' }, expectedGeneration: null });
  await t.admin.call('createUser', { username: 'night-shift', password: 'night-shift-password-1', role: 'user' });
  await t.admin.call('setRuntimeNetworkAddressPlan', { plan: { ...upstreamExamplePlan(), hubs: [{ clusterId, address: '192.0.2.1' }] } });
  // A secret group sealed for alpha, and a schedule over orders-db whose retention has something to say.
  await enrollSecretRecipient(relay);
  await t.caller.call('createSecretGroup', { group: { key: 'orders-db-password', tags: ['team:shop'], environment: 'production', clusterIds: [clusterId] } });
  await sealSecretVersion(t.caller, 'orders-db-password', new TextEncoder().encode(randomBytes(18).toString('base64url')));
  await t.admin.call('verifyServiceBackup', { backupId: 'backup-nightly-1' });
  await t.admin.call('createBackupSchedule', { schedule: { target: { serviceId: db.id }, cron: '0 2 * * *', jitterSeconds: 300, verify: true, retention: { keepLast: 3, keepDaily: 7 } } });
  const beta = await t.createCluster('beta');
  await t.connectRelay(beta.relayToken);
  await t.createCluster('gamma');

  await fsp.mkdir(imagesDir, { recursive: true });
  const shot = async (nameArg: string, fullPageArg = false) => {
    await page.waitForTimeout(300);
    await page.screenshot({ path: path.join(imagesDir, `dashboard-${nameArg}.png`), fullPage: fullPageArg });
    console.log(`docs/images/dashboard-${nameArg}.png`);
  };
  /** One part of the page only: the images stay small and show what the text is about. */
  const shotOf = async (nameArg: string, locatorArg: Locator) => {
    await page.waitForTimeout(300);
    await locatorArg.screenshot({ path: path.join(imagesDir, `dashboard-${nameArg}.png`) });
    console.log(`docs/images/dashboard-${nameArg}.png`);
  };
  const dialog = page.locator('dialog.action-dialog');
  const closeDialog = async () => {
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
  };
  await page.goto(`${t.baseUrl}/dashboard/`);
  await page.getByLabel('Username').fill(testAdminUsername);
  await shot('login');
  await page.getByLabel('Password').fill(testAdminPassword);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('[data-connection=live]').waitFor();
  await page.waitForFunction(() => (globalThis as unknown as { document: { querySelectorAll(selectorArg: string): { length: number } } }).document.querySelectorAll('td[data-relay=loading]').length === 0);
  await shot('fleet');
  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${clusterId}`);
  await page.locator('[data-ingress=designated]').waitFor();
  await shot('cluster', true);
  await page.locator('[data-action=designate-ingress]').click();
  await page.locator('dialog.action-dialog [data-action=confirm]').waitFor();
  await page.locator('dialog.action-dialog details').evaluate((detailsArg) => { (detailsArg as unknown as { open: boolean }).open = true; });
  await shot('dry-run');
  await page.keyboard.press('Escape');
  await page.goto(`${t.baseUrl}/dashboard/#/service/${db.id}`);
  await page.locator('[data-backup-state]').first().waitFor();
  await page.locator('[data-action=edit-initialization]').click();
  await shot('service', true);
  await page.getByLabel('mode (octal)').fill('7777');
  await page.locator('[data-action=set-initialization]').click();
  await page.locator('dialog.action-dialog[data-phase=refused]').waitFor();
  await shot('refusal');
  await page.keyboard.press('Escape');
  await page.goto(`${t.baseUrl}/dashboard/#/audit`);
  await page.locator('table[aria-label="Audit events"] tbody tr').first().waitFor();
  await shot('audit');

  // The operator's day: each page and flow beyond reading.
  await page.goto(`${t.baseUrl}/dashboard/#/nope`);
  await page.locator('[data-page=not-found]').waitFor();
  await shotOf('not-found', page.locator('main'));
  await page.goto(`${t.baseUrl}/dashboard/#/fleet`);
  await page.locator('[data-action=new-cluster]').click();
  await page.getByLabel('Cluster name').fill('Bad Name!');
  await shotOf('new-cluster-check', page.locator('[data-page=fleet] .page-header'));
  await page.getByLabel('Cluster name').fill('delta');
  await page.locator('[data-action=create-cluster]').click();
  await dialog.locator('[data-action=confirm]').click();
  await page.locator('dialog.action-dialog[data-phase=done]').waitFor();
  await shotOf('new-cluster-token', dialog);
  await closeDialog();
  await page.goto(`${t.baseUrl}/dashboard/#/cluster/${clusterId}`);
  await page.locator('[data-action=new-node]').click();
  await page.getByLabel('Node name').fill('node-3');
  await page.getByLabel('Node id (optional)').fill('node-3');
  await page.locator('[data-action=add-node]').click();
  await dialog.locator('[data-action=confirm]').waitFor();
  await shotOf('add-node', dialog);
  await closeDialog();
  await page.locator('tr[data-node-id=node-1] [data-action=inventory]').click();
  await page.getByLabel(db.id).check();
  await shotOf('inventory', page.locator('section.inventory'));
  await page.locator('[data-action=adopt]').click();
  await dialog.locator('[data-action=confirm]').waitFor();
  await shotOf('adoption', dialog);
  await closeDialog();
  await page.locator('[data-action=new-service]').click();
  const form = page.locator('cloudly-service-form');
  await form.locator('#service-form-name').fill('billing');
  await form.locator('#service-form-organizationId').fill('org-1');
  await form.locator('#service-form-image').fill('registry.example.com/shop/billing:3');
  await form.locator('#service-form-runAs').fill('1000:1000');
  await form.locator('#service-form-ports').fill('http 8080/tcp');
  await form.locator('#service-form-routes').fill('billing.example.com https');
  await form.locator('#service-form-volumes').fill('/var/lib/billing');
  await shotOf('new-service', form);
  await page.goto(`${t.baseUrl}/dashboard/#/service/${db.id}`);
  await page.locator('[data-action=edit-service]').click();
  await shotOf('edit-service', page.locator('section[aria-labelledby=spec-title]'));
  await page.locator('cloudly-service-form button', { hasText: 'Cancel' }).click();
  await shotOf('bindings', page.locator('section[aria-labelledby=bindings-title]'));
  await page.locator('tr[data-backup-id=backup-nightly-1] [data-action=restore-backup]').click();
  // A restore is confirmed only once the service's name is typed (docs/dashboard.md, "Actions").
  await dialog.locator('#type-to-confirm').fill(db.name);
  await dialog.locator('[data-action=confirm]').click();
  await page.locator('dialog.action-dialog[data-phase=done]').waitFor();
  await shotOf('restore', dialog);
  await closeDialog();
  await page.locator('tr[data-backup-id=backup-nightly-1] [data-action=isolated-restore]').click();
  await page.getByLabel('Resource mappings (JSON)').fill('[{"type":"volume","source":{"resourceName":"data","mountPath":"/var/lib/data"}}]');
  await shotOf('isolated-restore', page.locator('.isolated-form'));
  await page.goto(`${t.baseUrl}/dashboard/#/operations`);
  await page.locator('tr[data-operation-id]').first().waitFor();
  await shot('operations');
  await page.goto(`${t.baseUrl}/dashboard/#/users`);
  await page.locator('tr[data-user=night-shift]').waitFor();
  await shot('users');
  await page.goto(`${t.baseUrl}/dashboard/#/network`);
  await page.locator('[data-plan-revision="1"]').waitFor();
  await page.locator('[data-action=edit-plan]').click();
  await shot('address-plan');
  await page.goto(`${t.baseUrl}/dashboard/#/secrets`);
  await page.locator('[data-secret-group=orders-db-password] [data-copy-state=sealed]').waitFor();
  await shot('secrets', true);
  await page.goto(`${t.baseUrl}/dashboard/#/backups`);
  await page.locator('[data-schedule-state=enabled]').waitFor();
  await page.locator('[data-action=retention-plan]').click();
  await page.locator('[data-retention-plan]').waitFor();
  await shot('backups', true);
} finally {
  await browser.close();
  await t.stop();
}
