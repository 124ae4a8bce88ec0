import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planRetention, type IRetentionCandidate } from '../ts/manager.backup/retention.js';

/** Retention as restic's forget --keep-*: the worked example of docs/api/backups.md, and the protections. */

const day = 86_400_000;
/** One completed backup a day at 02:00 UTC from 2026-03-01 to 2026-03-20, plus a second one on the 20th. */
const backups: IRetentionCandidate[] = [
  ...Array.from({ length: 20 }, (_, indexArg) => ({ backupId: `b${String(indexArg + 1).padStart(2, '0')}`, createdAt: Date.UTC(2026, 2, 1, 2) + indexArg * day, state: 'completed' as const })),
  { backupId: 'b20-late', createdAt: Date.UTC(2026, 2, 20, 14), state: 'completed' },
  { backupId: 'failed-1', createdAt: Date.UTC(2026, 2, 19, 14), state: 'failed' },
  { backupId: 'running-1', createdAt: Date.UTC(2026, 2, 20, 15), state: 'running' },
];
const kept = (decisionsArg: ReturnType<typeof planRetention>) =>
  Object.fromEntries(decisionsArg.filter((decisionArg) => decisionArg.action === 'keep').map((decisionArg) => [decisionArg.backupId, decisionArg.reasons]));

test('keep-last 2, daily 3, weekly 2, monthly 1: each kept backup names the rules that keep it', () => {
  const decisions = planRetention(backups, { keepLast: 2, keepDaily: 3, keepWeekly: 2, keepMonthly: 1 }, new Map());
  assert.deepEqual(kept(decisions), {
    'b20-late': ['last-1', 'daily 2026-03-20', 'weekly 2026-W12', 'monthly 2026-03'],
    b20: ['last-2'],
    b19: ['daily 2026-03-19'],
    b18: ['daily 2026-03-18'],
    b15: ['weekly 2026-W11'],
  });
  assert.equal(decisions.find((decisionArg) => decisionArg.backupId === 'failed-1')!.reasons[0], 'failed');
  assert.equal(decisions.find((decisionArg) => decisionArg.backupId === 'b01')!.reasons[0], 'outside-policy');
  assert.equal(decisions.some((decisionArg) => decisionArg.backupId === 'running-1'), false, 'a running backup is not looked at');
  assert.equal(decisions.filter((decisionArg) => decisionArg.action === 'remove').length, 17, 'sixteen completed ones and the failed one');
});

test('the newest verified backup and one in use are kept whatever the policy says', () => {
  const decisions = planRetention(backups, { keepLast: 1 }, new Map([['b03', 'newest-verified'], ['b07', 'in-use']]));
  assert.deepEqual(kept(decisions), { 'b20-late': ['last-1'], b03: ['newest-verified'], b07: ['in-use'] });
});
