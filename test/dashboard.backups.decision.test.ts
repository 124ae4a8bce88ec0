import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  describeLastRun,
  describeRetention,
  describeRetentionReason,
  describeScheduleTarget,
  isBackupsPageChange,
  lastRunBackupStates,
  retentionRowsOf,
  scheduleStateOf,
  verificationBadgeOf,
  emptyScheduleForm,
  scheduleFormOf,
  scheduleSpecOfForm,
  specOfSchedule,
  type IScheduleFormFields,
} from '../web/src/backups.js';
import type { IBackupSchedule } from '../ts/interfaces/data/backupschedule.js';
import type { IChangeEvent } from '../ts/interfaces/requests/watch.js';

/** The Backups page's and the service page's backup decisions (web/src/backups.ts). */

const schedule = (fieldsArg: Partial<IBackupSchedule> = {}): IBackupSchedule => ({
  scheduleId: 's1', target: { serviceId: 'svc-1' }, cron: '0 2 * * *', generation: 1, createdAt: 1, updatedAt: 1, ...fieldsArg,
});
const time = (msArg: number) => `t${msArg}`;

test('a schedule\'s target in words, naming what the page knows', () => {
  assert.equal(describeScheduleTarget({ serviceId: 'svc-1', nodeId: 'n1' }, (idArg) => (idArg === 'svc-1' ? 'shop' : idArg)), 'service shop on node n1');
  assert.equal(describeScheduleTarget({ clusterId: 'c1' }), 'every service of cluster c1');
  assert.equal(describeScheduleTarget({ organizationId: 'org-1' }), 'every service of organization org-1');
});

test('a schedule is pending until the controller looked at it, then enabled, or disabled with its reason', () => {
  assert.deepEqual(scheduleStateOf(schedule()), { state: 'pending', text: 'not looked at by the schedules controller yet' });
  const status = { firedOccurrences: 0, skippedServices: 0, missedOccurrences: 0 };
  assert.equal(scheduleStateOf(schedule({ status: { ...status, state: 'active', nextRunAt: 60_000 } })).state, 'enabled');
  assert.deepEqual(scheduleStateOf(schedule({ status: { ...status, state: 'disabled', disabledReason: 'service-not-found' } })),
    { state: 'disabled', text: 'disabled: service-not-found' });
});

test('the last run says what it ordered and whom it skipped, with the reasons', () => {
  assert.deepEqual(describeLastRun(undefined), { outcome: 'never', text: 'has not fired yet' });
  assert.deepEqual(describeLastRun({ occurrenceAt: 1, firedAt: 2, backupIds: ['b1', 'b2'], skipped: [] }), { outcome: 'ordered', text: '2 backup(s) ordered' });
  assert.deepEqual(describeLastRun({ occurrenceAt: 1, firedAt: 2, backupIds: ['b1'], skipped: [{ serviceId: 's2', reason: 'cluster-unknown', detail: 'relay-disconnected' }] }),
    { outcome: 'partly-skipped', text: '1 backup(s) ordered; skipped s2: cluster-unknown (relay-disconnected)' });
  assert.equal(describeLastRun({ occurrenceAt: 1, firedAt: 2, backupIds: [], skipped: [{ reason: 'schedule-has-no-services' }] }).outcome, 'skipped');
});

test('the last run\'s backups carry their state where the page holds them', () => {
  const run = { occurrenceAt: 1, firedAt: 2, backupIds: ['b1', 'b2', 'b3'], skipped: [] };
  assert.deepEqual(lastRunBackupStates(run, [
    { backupId: 'b1', state: 'completed' }, { backupId: 'b2', state: 'failed', failureReason: 'interrupted' }, { backupId: 'other', state: 'running' },
  ]), [{ backupId: 'b1', state: 'completed' }, { backupId: 'b2', state: 'failed', failureReason: 'interrupted' }, { backupId: 'b3', state: 'unknown' }]);
  assert.deepEqual(lastRunBackupStates(undefined, []), []);
});

test('retention in restic\'s words, and a plan as rows newest first with its counts', () => {
  assert.equal(describeRetention(undefined), 'no retention: every backup of it is kept');
  assert.equal(describeRetention({ keepLast: 2, keepDaily: 3, keepWeekly: 0, keepMonthly: 1 }), 'keep last 2, 3 daily, 1 monthly');
  const plan = retentionRowsOf([
    { serviceId: 'a', decisions: [
      { backupId: 'old', createdAt: 1, action: 'remove', reasons: ['outside-policy'] },
      { backupId: 'new', createdAt: 3, action: 'keep', reasons: ['last-1', 'newest-verified'] },
    ] },
    { serviceId: 'b', decisions: [{ backupId: 'bad', createdAt: 2, action: 'remove', reasons: ['failed'] }] },
  ]);
  assert.deepEqual(plan.rows.map((row) => [row.serviceId, row.backupId, row.action]), [['a', 'new', 'keep'], ['a', 'old', 'remove'], ['b', 'bad', 'remove']]);
  assert.equal(plan.keep, 1);
  assert.equal(plan.remove, 2);
});

test('every retention reason token has words', () => {
  assert.equal(describeRetentionReason('last-2'), 'one of the last 2');
  assert.equal(describeRetentionReason('daily 2026-03-20'), 'newest of day 2026-03-20');
  assert.equal(describeRetentionReason('weekly 2026-W12'), 'newest of week 2026-W12');
  assert.equal(describeRetentionReason('monthly 2026-03'), 'newest of month 2026-03');
  assert.match(describeRetentionReason('newest-verified'), /never removed/);
  assert.match(describeRetentionReason('in-use'), /running restore/);
  assert.equal(describeRetentionReason('outside-policy'), 'outside the policy');
  assert.equal(describeRetentionReason('failed'), 'a failed backup');
  assert.equal(describeRetentionReason('something-new'), 'something-new', 'an unknown token is shown as it came');
});

test('the verification badge: not verified, ok, and a failure naming the object and its problem', () => {
  assert.deepEqual(verificationBadgeOf({}, time), { outcome: 'not-verified', className: '', detail: 'never read back and hashed', verifiedAt: null });
  assert.deepEqual(verificationBadgeOf({ verification: { outcome: 'ok', verifiedAt: 5, checkedObjects: 1 } }, time),
    { outcome: 'ok', className: 'state-converged', detail: 'verified t5, 1 object(s) read', verifiedAt: 5 });
  const failed = verificationBadgeOf({ verification: { outcome: 'mismatch', verifiedAt: 7, checkedObjects: 1,
    failedObject: { path: 'closure/database.closure', size: 10, sha256: 'ab', problem: 'blob-corrupt' } } }, time);
  assert.equal(failed.className, 'state-refused');
  assert.equal(failed.detail, 'verified t7, 1 object(s) read: closure/database.closure blob-corrupt');
  assert.equal(verificationBadgeOf({ verification: { outcome: 'missing', verifiedAt: 8, checkedObjects: 1 } }, time).outcome, 'missing');
});

test('the Backups page reads again for a schedule, its state or a backup', () => {
  const change = (kindArg: string) => ({ watchId: 'w', revision: 1, kind: kindArg, id: 'x', generation: 1, change: 'updated', actor: { kind: 'cloudly', id: 'cloudly' } } as IChangeEvent);
  assert.equal(isBackupsPageChange(change('CloudlyBackupSchedule')), true);
  assert.equal(isBackupsPageChange(change('CloudlyBackupScheduleState')), true);
  assert.equal(isBackupsPageChange(change('CloudlyServiceBackup')), true);
  assert.equal(isBackupsPageChange(change('CloudlyCluster')), false);
});

const scheduleForm = (fieldsArg: Partial<IScheduleFormFields>): IScheduleFormFields => ({ ...emptyScheduleForm(), ...fieldsArg });

test('the schedule form becomes a spec: the target by its kind, numbers only when typed, no retention when no count is', () => {
  assert.deepEqual(scheduleSpecOfForm(scheduleForm({ targetId: ' svc-1 ', nodeId: 'n1', cron: ' 0  2 * * * ', jitterSeconds: '300', keepLast: '3', keepDaily: '7' })), {
    spec: { target: { serviceId: 'svc-1', nodeId: 'n1' }, cron: '0 2 * * *', jitterSeconds: 300, verify: true, retention: { keepLast: 3, keepDaily: 7 } },
    reasons: [],
  });
  assert.deepEqual(scheduleSpecOfForm(scheduleForm({ targetKind: 'cluster', targetId: 'c1', cron: '*/5 * * * *', verify: false, startingDeadlineSeconds: '0' })).spec,
    { target: { clusterId: 'c1' }, cron: '*/5 * * * *', startingDeadlineSeconds: 0, verify: false });
  assert.deepEqual(scheduleSpecOfForm(scheduleForm({ targetKind: 'organization', targetId: 'org-1', cron: '0 0 * * 0' })).spec?.target, { organizationId: 'org-1' });
});

test('a schedule form that cannot be sent names every reason at once; the cron itself is left to Cloudly\'s dry run', () => {
  assert.deepEqual(scheduleSpecOfForm(scheduleForm({ targetKind: 'cluster', nodeId: 'n1', jitterSeconds: 'soon', keepLast: '-1' })).reasons, [
    'target: the cluster\'s id is required',
    'target.nodeId: a node is named only for a service',
    'cron: five fields in UTC are required, e.g. 0 2 * * *',
    'jitterSeconds: "soon" is not a whole number',
    'retention.keepLast: "-1" is not a whole number',
  ]);
  assert.deepEqual(scheduleSpecOfForm(scheduleForm({ targetId: 's', cron: '61 * * * * *' })).reasons, [], 'six fields and 61 are Cloudly\'s to name, with their paths');
});

test('a stored schedule fills the form and comes back as the same spec; its spec leaves out the server\'s members', () => {
  const stored = schedule({
    target: { serviceId: 'svc-1', nodeId: 'n1' }, cron: '0 2 * * *', jitterSeconds: 30, startingDeadlineSeconds: 600, verify: true,
    retention: { keepLast: 2, keepMonthly: 6 }, status: { state: 'active', firedOccurrences: 1, skippedServices: 0, missedOccurrences: 0 },
  });
  const spec = specOfSchedule(stored);
  assert.deepEqual(spec, { target: { serviceId: 'svc-1', nodeId: 'n1' }, cron: '0 2 * * *', jitterSeconds: 30, startingDeadlineSeconds: 600, verify: true, retention: { keepLast: 2, keepMonthly: 6 } });
  assert.deepEqual(scheduleSpecOfForm(scheduleFormOf(stored)).spec, spec);
  assert.deepEqual(scheduleFormOf(schedule({ target: { clusterId: 'c1' } })), { ...emptyScheduleForm(), targetKind: 'cluster', targetId: 'c1', cron: '0 2 * * *', verify: false });
});
