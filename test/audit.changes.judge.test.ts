import { test } from 'node:test';
import assert from 'node:assert/strict';
import { auditedChanges } from '../ts/core/store.js';
import { auditChangeLimits } from '../ts/interfaces/data/audit.js';

/** What an update's audit event records of its change (`changed`): listed fields only, bounded. */

test('only the listed fields, followed two levels in; an unchanged field and an unlisted one are not named', () => {
  const before = { name: 'a', secret: 'x', runtime: { image: 'app:1', profile: { runAs: { user: 1, group: 1 } } }, volumes: [] };
  const after = { name: 'a', secret: 'y', runtime: { image: 'app:1', profile: { runAs: { user: 2, group: 1 } } }, volumes: [{ mountPath: '/d' }] };
  assert.deepEqual(auditedChanges(['name', 'runtime', 'volumes'], before, after), [
    { field: 'runtime.profile.runAs', before: { user: 1, group: 1 }, after: { user: 2, group: 1 } },
    { field: 'volumes', before: [], after: [{ mountPath: '/d' }] },
  ]);
});

test('an absent value reads null; a long value is shortened; at most the limit of fields', () => {
  assert.deepEqual(auditedChanges(['disabled'], {}, { disabled: true }), [{ field: 'disabled', before: null, after: true }]);
  const [long] = auditedChanges(['image'], { image: 'a' }, { image: 'b'.repeat(1000) });
  assert.equal(typeof long.after, 'string');
  assert.equal((long.after as string).length, auditChangeLimits.valueChars);
  assert.ok((long.after as string).endsWith('…'));
  const many = Object.fromEntries(Array.from({ length: 40 }, (_, index) => [`f${index}`, index]));
  const changed = auditedChanges(Object.keys(many), {}, many);
  assert.equal(changed.length, auditChangeLimits.fields);
});
