import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { testAdminPassword, testAdminUsername, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { chromiumAvailable, chromiumPath, launchBrowser, logInToDashboard, recordPageErrors, type IBrowser } from './helpers/browser.js';
import { waitForQuietDataDir } from './helpers/process.js';
import { enrollSecretRecipient, openSealedText } from './helpers/secrets.js';
import { addClusterWorld, chunked, descriptorOf } from './backup.fixture.js';
import { followOperation, outcomeOf } from '../ts/client/operations.js';
import { sendServiceDatabaseClosure } from '../ts/client/relayclosures.js';
import { closureBlobKey } from '../ts/manager.backup/backup.manager.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { ISecretRecipientKeyPair } from '../ts/core/sealing.js';
import type { IService } from '../ts/interfaces/data/service.js';
import type { IReq_Cloudly_Relay_BackupClusterService, IServiceBackupRecord } from '../ts/interfaces/requests/backup.js';

/**
 * The Secrets and Backups pages in a real browser (headless Chromium) against a real Cloudly with
 * two clusters whose relays are connected and enrolled. A secret group is created, a value typed
 * in the page is sealed in the browser and only ciphertext leaves it (every request body and
 * socket frame is recorded and searched for the value; so are the data directory and the log),
 * each cluster's relay opens its copy with its own key; a new enrollment shows `reseal-required`
 * live and the re-seal typed in the page makes it `sealed` again; a group is deleted. Backups: a
 * schedule created from the form (its clock 60 times faster) fires, its retention dry run is read
 * as a table, it is changed from its card; a schedule of a deleted service shows disabled with the
 * reason, a change to it is refused, and it is deleted; each backup
 * carries its verification badge (ok, mismatch on a damaged file, not verified), and Verify… shows
 * the outcome of the dry run before recording it. A read-only account may read but change nothing.
 */

const skip = chromiumAvailable() ? false : `${chromiumPath} is missing (apt-get install -y chromium; .ci/run installs it)`;
const viewerUsername = 'secrets-viewer';
const viewerPassword = 'viewer-password-0002';
/** The value typed in the browser: it must reach the relays and nothing else. */
const marker = `browser-sealed-${randomBytes(6).toString('hex')}`;
const closureBytes = randomBytes(64 * 1024);

interface IWorld {
  clusterId: string;
  nodeId: string;
  service: IService;
  relay: CloudlyRelayClient;
  keys: ISecretRecipientKeyPair;
}

let t: ITestCloudly;
let alpha: IWorld;
let beta: IWorld;
let browser: IBrowser;
let page: Page;
const consoleErrors: string[] = [];
/** Every request body the page sent to Cloudly and every socket frame it wrote. */
const sent: string[] = [];

const connect = async (nameArg: string): Promise<IWorld> => {
  const world = await addClusterWorld(t, nameArg);
  await waitFor(() => t.cloudly.relays.sessionsOf(world.clusterId).some((session) => t.cloudly.clusterManager.isElected(session)), 'relay elected');
  return { ...world, keys: await enrollSecretRecipient(world.relay) };
};

const login = (usernameArg: string, passwordArg: string): Promise<void> => logInToDashboard(page, t.baseUrl, usernameArg, passwordArg);

/** Waits for the open dialog's dry run, runs `beforeConfirmArg` (nothing is stored yet), confirms and closes once done. */
const confirmDialog = async (beforeConfirmArg: () => Promise<void> = async () => undefined): Promise<void> => {
  const dialog = page.locator('dialog.action-dialog');
  await dialog.locator('[data-action=confirm]').waitFor({ timeout: 15_000 });
  await beforeConfirmArg();
  await dialog.locator('[data-action=confirm]').click();
  await page.locator('dialog.action-dialog[data-phase=done]').waitFor({ timeout: 15_000 });
  await dialog.locator('[data-action=close]').click();
};

const groupOf = async (idArg: string) => (await t.caller.call('getSecretGroups', {})).groups.find((group) => group.id === idArg);

/** The copy of `versionIdArg` the cluster's relay gets in its desired state for a service naming it, opened with the relay's key. */
const openedByRelay = async (worldArg: IWorld, serviceIdArg: string): Promise<string> => {
  await t.cloudly.desiredStateManager.settled(worldArg.clusterId);
  const answer = await worldArg.relay.fire('getClusterPlatformDesiredState', {});
  assert.equal(answer.unchanged, false);
  const service = answer.desiredState!.services.find((candidate) => candidate.serviceId === serviceIdArg);
  assert.ok(service && service.secrets.length === 1, 'the service carries its secret');
  return openSealedText(worldArg.keys, service.secrets[0].sealed);
};

const scheduleById = async (scheduleIdArg: string) => (await t.caller.call('getBackupSchedules', {})).schedules.find((entry) => entry.scheduleId === scheduleIdArg);

const backUp = async (backupIdArg: string): Promise<IServiceBackupRecord> => {
  const answer = await t.caller.call('createServiceBackup', { clusterId: alpha.clusterId, nodeId: alpha.nodeId, serviceId: alpha.service.id, backupId: backupIdArg });
  const { backup } = await outcomeOf(await followOperation(t.admin, answer.operation!.operationId, { timeoutMs: 30_000 })) as { backup: IServiceBackupRecord };
  return backup;
};

before(async () => {
  // The schedule clock runs 60 times faster: a schedule every 5 minutes fires every 5 seconds.
  t = await startTestCloudly({ scheduleClockFactor: 60 });
  alpha = await connect('alpha');
  beta = await connect('beta');
  alpha.relay.addHandler<IReq_Cloudly_Relay_BackupClusterService>('backupClusterService', async (request) => {
    await sendServiceDatabaseClosure(alpha.relay, {
      backupId: request.backupId, serviceId: request.service.id, nodeId: request.nodeId, descriptor: descriptorOf(closureBytes),
    }, chunked(closureBytes));
    return { snapshots: [] };
  });
  await t.caller.call('createUser', { username: viewerUsername, password: viewerPassword, role: 'user' });
  if (skip) {
    return;
  }
  browser = await launchBrowser();
  page = browser.page;
  recordPageErrors(page, consoleErrors);
  page.on('request', (requestArg) => {
    const body = requestArg.postData();
    if (body !== null) {
      sent.push(body);
    }
  });
  page.on('websocket', (socketArg) => {
    socketArg.on('framesent', (frameArg) => sent.push(typeof frameArg.payload === 'string' ? frameArg.payload : frameArg.payload.toString('latin1')));
  });
});

after(async () => {
  await browser?.close();
  await t?.stop();
});

test('a group is created, a value typed in the page is sealed in the browser, and each cluster\'s relay opens its copy', { skip }, async () => {
  await login(testAdminUsername, testAdminPassword);
  await page.goto(`${t.baseUrl}/dashboard/#/secrets`);
  await page.locator('[data-page=secrets]').waitFor();
  await page.locator(`[data-cluster-choice="${beta.clusterId}"]`).waitFor();
  await page.locator('[data-action=create-group]').click();
  assert.match(await page.locator('[data-form-reasons]').textContent() ?? '', /key: a key is required/, 'an empty form is not sent');
  await page.getByLabel('Key').fill('db-password');
  await page.getByLabel('Environment').fill('production');
  await page.getByLabel('Tags (separated by commas)').fill('team:payments');
  await page.locator(`[data-cluster-choice="${alpha.clusterId}"]`).check();
  await page.locator(`[data-cluster-choice="${beta.clusterId}"]`).check();
  await page.locator('[data-action=create-group]').click();
  await confirmDialog(async () => assert.equal(await groupOf('db-password'), undefined, 'the dry run stored nothing'));
  const card = page.locator('[data-secret-group="db-password"]');
  await card.locator('[data-no-versions]').waitFor();
  assert.deepEqual((await groupOf('db-password'))!.clusterIds, [alpha.clusterId, beta.clusterId]);

  await card.locator('[data-action=add-version]').click();
  await card.locator('[data-secret-value]').fill(marker);
  await card.locator('[data-action=seal-value]').click();
  await confirmDialog(async () => assert.deepEqual((await groupOf('db-password'))!.versions, [], 'the dry run stored no version'));
  await card.locator(`[data-copy="${alpha.clusterId}"][data-copy-state=sealed]`).waitFor();
  await card.locator(`[data-copy="${beta.clusterId}"][data-copy-state=sealed]`).waitFor();
  assert.equal(await card.locator('[data-secret-value]').count(), 0, 'the value form is gone with what was typed');
  const [version] = (await groupOf('db-password'))!.versions;
  assert.equal(version.version, 1);
  assert.equal(version.valueBytes, marker.length);

  // Each cluster's relay gets its own copy and opens it with its own key: the browser sealed it as the CLI does.
  for (const world of [alpha, beta]) {
    const { service } = await t.caller.call('createService', { service: {
      name: 'api', organizationId: 'org-1', clusterId: world.clusterId, volumes: [],
      runtime: { image: 'registry.example/api:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
      secrets: { DB_PASSWORD: { secretId: 'db-password', secretVersionId: version.secretVersionId } },
    } });
    assert.equal(await openedByRelay(world, service.id), marker);
  }
});

test('a new enrollment shows reseal-required live, and the value typed again re-seals the same version', { skip }, async () => {
  const card = page.locator('[data-secret-group="db-password"]');
  const { secretVersionId } = (await groupOf('db-password'))!.versions[0];
  alpha.keys = await enrollSecretRecipient(alpha.relay);
  await card.locator(`[data-copy="${alpha.clusterId}"][data-copy-state=reseal-required]`).waitFor({ timeout: 15_000 });
  await card.locator('[data-reseal-required]').waitFor();
  await card.locator(`tr[data-version="${secretVersionId}"] [data-action=reseal-version]`).click();
  await card.locator('[data-secret-value]').fill(marker);
  await card.locator('[data-action=seal-value]').click();
  await confirmDialog();
  await card.locator(`[data-copy="${alpha.clusterId}"][data-copy-state=sealed]`).waitFor();
  const group = (await groupOf('db-password'))!;
  assert.equal(group.versions.length, 1, 'the same version, sealed again');
  assert.notEqual(group.versions[0].resealedAt, null);
  const services = (await t.caller.call('getServices', { clusterId: alpha.clusterId })).services;
  const api = services.find((service) => service.name === 'api')!;
  await waitFor(async () => {
    await t.cloudly.desiredStateManager.settled(alpha.clusterId);
    const answer = await alpha.relay.fire('getClusterPlatformDesiredState', {});
    return !answer.unchanged && answer.desiredState!.services.find((service) => service.serviceId === api.id)?.secrets[0]?.sealed.recipientId === alpha.keys.recipientId;
  }, 'the re-sealed copy is delivered');
  assert.equal(await openedByRelay(alpha, api.id), marker, 'the new key opens the re-sealed copy');
});

test('a group no service names is deleted after its dry run', { skip }, async () => {
  await t.caller.call('createSecretGroup', { group: { key: 'temp-group', tags: [], environment: 'staging', clusterIds: [beta.clusterId] } });
  const card = page.locator('[data-secret-group="temp-group"]');
  await card.waitFor({ timeout: 15_000 });
  await card.locator('[data-action=delete-group]').click();
  await confirmDialog(async () => assert.ok(await groupOf('temp-group'), 'the dry run deleted nothing'));
  await waitFor(async () => (await card.count()) === 0, 'the group leaves the page');
  assert.equal(await groupOf('temp-group'), undefined);
});

test('the value never left the browser in clear: not in a request body, a socket frame, the data directory or the log', { skip }, async () => {
  const forms = [marker, Buffer.from(marker).toString('base64'), Buffer.from(marker).toString('base64url'), Buffer.from(marker).toString('hex')];
  const versions = sent.filter((body) => body.includes('"addSecretVersion"'));
  assert.equal(versions.length, 4, 'two dry runs and two real calls were recorded');
  for (const body of versions) {
    assert.match(body, /"ciphertext":"[A-Za-z0-9_-]+"/, 'what was sent is sealed copies');
  }
  for (const body of sent) {
    for (const form of forms) {
      assert.equal(body.includes(form), false, 'no request or frame carries the value');
    }
  }
  await waitFor(() => t.cloudly.reconciler.busyKeys === 0, 'the controllers are done');
  await waitForQuietDataDir(t.dataDir);
  for (const entry of await fsp.readdir(t.dataDir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) {
      const bytes = await fsp.readFile(path.join(entry.parentPath, entry.name));
      for (const form of forms) {
        assert.equal(bytes.includes(form), false, `the data directory's ${entry.name} never holds it`);
      }
    }
  }
  assert.equal(t.logs.join('').includes(marker), false, 'the log never holds it');
});

test('backups: a schedule created and changed from the form (a bad cron named by the dry run), its next and last run, its retention dry run, a schedule of a deleted service disabled (a change refused) and deleted, and each backup\'s verification', { skip }, async () => {
  await page.goto(`${t.baseUrl}/dashboard/#/backups`);
  const form = page.locator('[data-schedule-form]');
  await form.waitFor();
  await form.getByLabel('The service\'s id').fill(alpha.service.id);
  await form.getByLabel('Cron (five fields, UTC)').fill('61 * * * *');
  await form.getByLabel('Keep last').fill('2');
  await form.locator('[data-action=review-schedule]').click();
  const dialog = page.locator('dialog.action-dialog');
  await dialog.locator('.refusal').waitFor({ timeout: 15_000 });
  assert.match(await dialog.locator('.refusal').textContent() ?? '', /request\.schedule\.cron\.minute/, 'the dry run names the cron field');
  await dialog.locator('[data-action=close]').click();
  await form.getByLabel('Cron (five fields, UTC)').fill('*/5 * * * *');
  await form.locator('[data-action=review-schedule]').click();
  await confirmDialog(async () => assert.deepEqual((await t.caller.call('getBackupSchedules', {})).schedules, [], 'the dry run stored nothing'));
  const [schedule] = (await t.caller.call('getBackupSchedules', {})).schedules;
  assert.deepEqual(schedule.target, { serviceId: alpha.service.id });
  assert.deepEqual(schedule.retention, { keepLast: 2 });
  assert.equal(schedule.verify, true);
  const { service: shortLived } = await t.caller.call('createService', { service: {
    name: 'short-lived', organizationId: 'org-1', clusterId: alpha.clusterId, volumes: [],
    runtime: { image: 'registry.example/db:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } },
  } });
  const { schedule: orphan } = await t.caller.call('createBackupSchedule', { schedule: { target: { serviceId: shortLived.id }, cron: '0 0 1 1 *' } });
  const card = page.locator(`[data-schedule-id="${schedule.scheduleId}"]`);
  await card.locator('[data-last-run=ordered]').waitFor({ timeout: 60_000 });
  assert.equal(await card.getAttribute('data-schedule-state'), 'enabled');
  assert.equal(await card.locator('[data-cron]').textContent(), '*/5 * * * *');
  assert.notEqual((await card.locator('[data-next-run]').textContent())?.trim(), '—');
  assert.equal(await card.locator('[data-retention]').textContent(), 'keep last 2');
  await card.locator('[data-action=retention-plan]').click();
  const plan = card.locator(`[data-retention-plan="${schedule.scheduleId}"]`);
  await plan.locator('tr[data-retention-backup]').first().waitFor();
  const rows = await plan.locator('tr[data-retention-backup]').evaluateAll((cells) => cells.map((cell) => ({
    backupId: cell.getAttribute('data-retention-backup'), action: cell.getAttribute('data-retention-action'), text: cell.textContent ?? '',
  })));
  assert.ok(rows.every((row) => row.backupId?.startsWith('backup-s-') && (row.action === 'keep' || row.action === 'remove')), 'only the schedule\'s own backups, each kept or removed');
  assert.ok(rows.some((row) => row.action === 'keep' && row.text.includes('last-1')), 'the newest is kept as last-1');

  // Changed from its card: the review shows only what changes, against the generation read.
  await card.locator('[data-action=edit-schedule]').click();
  await form.getByLabel('Keep last').fill('3');
  await form.locator('[data-action=review-schedule]').click();
  await confirmDialog(async () => {
    assert.deepEqual(await dialog.locator('[data-diff-path]').evaluateAll((cells) => cells.map((cell) => cell.getAttribute('data-diff-path'))), ['retention.keepLast']);
    assert.deepEqual((await scheduleById(schedule.scheduleId))?.retention, { keepLast: 2 }, 'the dry run changed nothing');
  });
  await card.locator('[data-retention]', { hasText: 'keep last 3' }).waitFor();
  assert.ok((await scheduleById(schedule.scheduleId))!.generation > schedule.generation, 'a new generation');

  await t.caller.call('deleteService', { serviceId: shortLived.id, expectedGeneration: shortLived.generation, force: true });
  await page.locator(`[data-schedule-id="${orphan.scheduleId}"][data-schedule-state=disabled] [data-disabled-reason]`).waitFor({ timeout: 20_000 });
  const orphanCard = page.locator(`[data-schedule-id="${orphan.scheduleId}"]`);
  assert.equal(await orphanCard.locator('[data-disabled-reason]').textContent(), 'service-not-found');
  // Its service is gone: a change is refused by the dry run, naming why; deleting it is what is left.
  await orphanCard.locator('[data-action=edit-schedule]').click();
  await form.getByLabel('Cron (five fields, UTC)').fill('30 1 * * *');
  await form.locator('[data-action=review-schedule]').click();
  await dialog.locator('.refusal').waitFor({ timeout: 15_000 });
  assert.match(await dialog.locator('.refusal').textContent() ?? '', /backup-schedule-target-not-found/);
  await dialog.locator('[data-action=close]').click();
  await form.locator('[data-action=cancel-edit]').click();
  await orphanCard.locator('[data-action=delete-schedule]').click();
  await confirmDialog();
  await waitFor(async () => (await orphanCard.count()) === 0, 'the deleted schedule leaves the page');
  assert.deepEqual((await t.caller.call('getBackupSchedules', {})).schedules.map((entry) => entry.scheduleId), [schedule.scheduleId]);

  // Three backups taken by hand: one verified ok, one whose stored file is then damaged, one never verified.
  await backUp('manual-ok');
  await t.caller.call('verifyServiceBackup', { backupId: 'manual-ok' });
  await backUp('manual-damaged');
  const blob = path.join(t.dataDir, 'blobs', 'objects', `${createHash('sha256').update(closureBlobKey(alpha.clusterId, 'manual-damaged'), 'utf8').digest('hex')}.blob`);
  const bytes = await fsp.readFile(blob);
  bytes[1_000] = bytes[1_000]! ^ 0xff;
  await fsp.writeFile(blob, bytes);
  await t.caller.call('verifyServiceBackup', { backupId: 'manual-damaged' });
  await backUp('manual-unverified');
  await page.goto(`${t.baseUrl}/dashboard/#/service/${alpha.service.id}`);
  const row = (backupIdArg: string) => page.locator(`tr[data-backup-id="${backupIdArg}"]`);
  await row('manual-unverified').waitFor({ timeout: 15_000 });
  await page.locator(`[data-service-schedule="${schedule.scheduleId}"][data-schedule-state=enabled]`).waitFor();
  await row('manual-ok').locator('[data-verification=ok]').waitFor();
  assert.ok(await row('manual-ok').locator('[data-verified-at]').count() === 1, 'when it was verified');
  await row('manual-damaged').locator('[data-verification=mismatch]').waitFor();
  assert.match(await row('manual-damaged').textContent() ?? '', /closure\/database\.closure blob-corrupt/);
  await row('manual-unverified').locator('[data-verification=not-verified]').waitFor();
  await row('manual-unverified').locator('[data-action=verify-backup]').click();
  await confirmDialog(async () => {
    assert.equal(await page.locator('dialog.action-dialog [data-verify-outcome]').getAttribute('data-verify-outcome'), 'ok', 'the dry run shows the outcome');
    const listed = (await t.caller.call('getServiceBackups', { serviceId: alpha.service.id })).backups.find((backup) => backup.backupId === 'manual-unverified');
    assert.equal(listed?.verification, undefined, 'the dry run recorded nothing');
  });
  await row('manual-unverified').locator('[data-verification=ok]').waitFor();
});

test('a read-only account reads secrets and retention but may change nothing', { skip }, async () => {
  await login(viewerUsername, viewerPassword);
  await page.goto(`${t.baseUrl}/dashboard/#/secrets`);
  const card = page.locator('[data-secret-group="db-password"]');
  await card.waitFor();
  for (const button of [page.locator('[data-action=create-group]'), card.locator('[data-action=add-version]'), card.locator('[data-action=delete-group]')]) {
    assert.equal(await button.isDisabled(), true);
    assert.match(await button.getAttribute('title') ?? '', /read-only/);
  }
  await page.goto(`${t.baseUrl}/dashboard/#/backups`);
  await page.locator('[data-schedule-state=enabled]').first().waitFor();
  for (const button of [page.locator('[data-action=review-schedule]'), page.locator('[data-action=edit-schedule]').first(), page.locator('[data-action=delete-schedule]').first()]) {
    assert.equal(await button.isDisabled(), true);
    assert.match(await button.getAttribute('title') ?? '', /read-only/);
  }
  const retention = page.locator('[data-schedule-state=enabled] [data-action=retention-plan]').first();
  await retention.click();
  await page.locator('[data-retention-plan] tr[data-retention-backup]').first().waitFor();
  await page.goto(`${t.baseUrl}/dashboard/#/service/${alpha.service.id}`);
  const verify = page.locator('tr[data-backup-id="manual-ok"] [data-action=verify-backup]');
  await verify.waitFor();
  assert.equal(await verify.isDisabled(), true);
  assert.match(await verify.getAttribute('title') ?? '', /read-only/);
});

test('no page logged a console error', { skip }, () => {
  assert.deepEqual(consoleErrors, []);
});
