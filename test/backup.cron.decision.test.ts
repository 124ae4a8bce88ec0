import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jitterOffsetMs, latestOccurrenceBetween, nextOccurrence, parseCron, type ICronSchedule } from '../ts/manager.backup/cron.js';
import { checkBackupScheduleSpec } from '../ts/manager.backup/schedules.js';

/** The five-field UTC cron parser, the occurrence arithmetic and the schedule spec's checks, as pure functions. */

const parsed = (expressionArg: string): ICronSchedule => {
  const result = parseCron(expressionArg);
  assert.ok('schedule' in result, `${expressionArg} parses: ${JSON.stringify(result)}`);
  return result.schedule;
};
const at = (isoArg: string): number => Date.parse(isoArg);
const iso = (msArg: number | null): string | null => (msArg === null ? null : new Date(msArg).toISOString());

test('next occurrences in UTC: every minute, a daily time, steps, lists, weekdays, both day fields', () => {
  assert.equal(iso(nextOccurrence(parsed('* * * * *'), at('2026-03-01T10:00:30Z'))), '2026-03-01T10:01:00.000Z');
  assert.equal(iso(nextOccurrence(parsed('* * * * *'), at('2026-03-01T10:01:00Z'))), '2026-03-01T10:02:00.000Z', 'strictly after');
  assert.equal(iso(nextOccurrence(parsed('30 2 * * *'), at('2026-03-01T10:00:00Z'))), '2026-03-02T02:30:00.000Z');
  assert.equal(iso(nextOccurrence(parsed('*/15 * * * *'), at('2026-03-01T10:16:00Z'))), '2026-03-01T10:30:00.000Z');
  assert.equal(iso(nextOccurrence(parsed('0 9-17/4 * * *'), at('2026-03-01T10:00:00Z'))), '2026-03-01T13:00:00.000Z');
  assert.equal(iso(nextOccurrence(parsed('0 0 * * 0'), at('2026-03-02T00:00:00Z'))), '2026-03-08T00:00:00.000Z', 'the next Sunday');
  assert.equal(iso(nextOccurrence(parsed('0 0 * * 7'), at('2026-03-02T00:00:00Z'))), '2026-03-08T00:00:00.000Z', '7 is Sunday too');
  assert.equal(iso(nextOccurrence(parsed('0 0 1,15 * *'), at('2026-03-02T00:00:00Z'))), '2026-03-15T00:00:00.000Z');
  // Both day fields restricted: either matches (the 13th, or a Friday).
  assert.equal(iso(nextOccurrence(parsed('0 0 13 * 5'), at('2026-03-01T00:00:00Z'))), '2026-03-06T00:00:00.000Z');
  assert.equal(iso(nextOccurrence(parsed('0 0 29 2 *'), at('2026-03-01T00:00:00Z'))), '2028-02-29T00:00:00.000Z', 'a leap day');
  assert.equal(iso(nextOccurrence(parsed('0 0 1 1 *'), at('2026-12-31T23:59:00Z'))), '2027-01-01T00:00:00.000Z');
});

test('after downtime the latest missed occurrence is the one owed, and the count says how many fell in the gap', () => {
  const everyMinute = parsed('* * * * *');
  assert.deepEqual(latestOccurrenceBetween(everyMinute, at('2026-03-01T10:00:00Z') - 1, at('2026-03-01T10:05:30Z')),
    { latest: at('2026-03-01T10:05:00Z'), count: 6 });
  assert.equal(latestOccurrenceBetween(everyMinute, at('2026-03-01T10:00:00Z'), at('2026-03-01T10:00:59Z')), null, 'none owed yet');
  // Weeks of downtime on a per-minute schedule: still the last minute, and a count that is at least the steps walked.
  const long = latestOccurrenceBetween(everyMinute, at('2026-01-01T00:00:00Z'), at('2026-03-01T10:05:30Z'));
  assert.equal(iso(long!.latest), '2026-03-01T10:05:00.000Z');
  assert.ok(long!.count >= 20_000);
});

test('a malformed expression is refused with every problem, each naming its field', () => {
  const problems = (expressionArg: string) => {
    const result = parseCron(expressionArg);
    assert.ok('problems' in result, `${expressionArg} is refused`);
    return result.problems.map((problemArg) => `${problemArg.field ?? '-'}: ${problemArg.message}`);
  };
  assert.deepEqual(problems('0 0 * * * *'), ['-: must have exactly 5 fields (minute hour day-of-month month day-of-week, in UTC), got 6']);
  assert.deepEqual(problems('0 0 *'), ['-: must have exactly 5 fields (minute hour day-of-month month day-of-week, in UTC), got 3']);
  assert.deepEqual(problems('61 24 0 13 8'), [
    'minute: 61 is outside 0–59',
    'hour: 24 is outside 0–23',
    'day-of-month: 0 is outside 1–31',
    'month: 13 is outside 1–12',
    'day-of-week: 8 is outside 0–7',
  ]);
  assert.deepEqual(problems('*/0 5-2 1,,2 JAN ?'), [
    'minute: step "0" in "*/0" must be a whole number from 1 to 59',
    'hour: range "5-2" ends before it starts',
    'day-of-month: has an empty list item in "1,,2"',
    'month: "JAN" is not a number, a range a-b, * or a step',
    'day-of-week: "?" is not a number, a range a-b, * or a step',
  ]);
  assert.deepEqual(problems('0 0 31 2 *'), ['day-of-month: no day in "31" exists in the months "2"']);
});

test('jitter is a fixed offset below the bound, the same on every look, and none without jitter', () => {
  const offset = jitterOffsetMs('schedule-a', at('2026-03-01T02:00:00Z'), 300);
  assert.ok(offset >= 0 && offset < 300_000);
  assert.equal(jitterOffsetMs('schedule-a', at('2026-03-01T02:00:00Z'), 300), offset);
  assert.equal(jitterOffsetMs('schedule-a', at('2026-03-01T02:00:00Z'), 0), 0);
  const spread = new Set(Array.from({ length: 50 }, (_, index) => jitterOffsetMs(`schedule-${index}`, at('2026-03-01T02:00:00Z'), 300)));
  assert.ok(spread.size > 40, 'fifty schedules at one time spread out');
});

test('a schedule spec is checked whole: target, every cron field, the jitter and a retention that keeps nothing', () => {
  const problems = checkBackupScheduleSpec({
    target: { serviceId: 'a', clusterId: 'b' },
    cron: '61 * * * * *',
    jitterSeconds: -1,
    retention: { keepLast: 0, keepDaily: 0 },
    colour: 'blue',
  }, 'request.schedule');
  assert.deepEqual(problems.map((problemArg) => `${problemArg.path} ${problemArg.reason}`), [
    'request.schedule.colour field-unknown',
    'request.schedule.target field-invalid',
    'request.schedule.cron field-invalid',
    'request.schedule.jitterSeconds field-invalid',
    'request.schedule.retention field-invalid',
  ]);
  assert.match(problems[4]!.message, /keeps nothing/);
  const fields = checkBackupScheduleSpec({ target: { clusterId: 'c' }, cron: '61 25 * * *' }, 'request.schedule');
  assert.deepEqual(fields.map((problemArg) => problemArg.path), ['request.schedule.cron.minute', 'request.schedule.cron.hour']);
  assert.deepEqual(checkBackupScheduleSpec({ target: { organizationId: 'org-1' }, cron: '0 2 * * *', retention: { keepLast: 3 } }, 'request.schedule'), []);
});
