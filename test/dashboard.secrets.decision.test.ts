import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  clustersNeedingReseal,
  describeSealState,
  isSecretsChange,
  secretGroupRequestOfForm,
  secretValueBytesOf,
  versionsNeedingReseal,
  withSecretGroup,
  type ISecretGroupFormFields,
} from '../web/src/secrets.js';
import { parseRoute } from '../web/src/decide.js';
import type { ISecretGroup, ISecretVersionMetadata } from '../ts/interfaces/data/secret.js';
import type { IChangeEvent } from '../ts/interfaces/requests/watch.js';

/** The Secrets page's pure decisions (web/src/secrets.ts): the group form, the typed value, re-seal. */

const form = (fieldsArg: Partial<ISecretGroupFormFields> = {}): ISecretGroupFormFields => ({
  key: 'db-password', environment: 'production', tags: 'team:payments, tier:a', clusterIds: ['c1', 'c2'], retainedVersions: '', ...fieldsArg,
});

const version = (numberArg: number, statesArg: Array<'sealed' | 'reseal-required' | 'recipient-gone'>): ISecretVersionMetadata => ({
  secretVersionId: `v${numberArg}-000000000000`, version: numberArg, valueBytes: 8, createdAt: 1, createdBy: 'u1', resealedAt: null,
  clusters: statesArg.map((state, index) => ({ clusterId: `c${index + 1}`, recipientId: `x25519:${'0'.repeat(32)}`, state })),
});

const group = (idArg: string, versionsArg: ISecretVersionMetadata[] = []): ISecretGroup => ({
  id: idArg, key: idArg, tags: [], environment: 'production', clusterIds: ['c1', 'c2'], retainedVersions: 10, generation: 1,
  versions: versionsArg, createdAt: 1, updatedAt: 1,
});

const change = (kindArg: string): IChangeEvent => ({
  watchId: 'w', revision: 1, kind: kindArg, id: 'x', generation: 1, change: 'updated', actor: { kind: 'admin', id: 'u1' },
} as IChangeEvent);

test('the secrets and backups pages have their own addresses', () => {
  assert.deepEqual(parseRoute('#/secrets'), { page: 'secrets' });
  assert.deepEqual(parseRoute('#/backups'), { page: 'backups' });
  assert.deepEqual(parseRoute('#/secrets/x'), { page: 'not-found', path: 'secrets/x' });
});

test('the group form becomes createSecretGroup\'s group: trimmed, tags split, the count only when typed', () => {
  assert.deepEqual(secretGroupRequestOfForm(form({ key: ' db-password ', retainedVersions: '3' })), {
    request: { key: 'db-password', tags: ['team:payments', 'tier:a'], environment: 'production', clusterIds: ['c1', 'c2'], retainedVersions: 3 },
    reasons: [],
  });
  assert.deepEqual(secretGroupRequestOfForm(form({ tags: ' , ' })).request, {
    key: 'db-password', tags: [], environment: 'production', clusterIds: ['c1', 'c2'],
  });
});

test('a group form that cannot be sent names every reason at once', () => {
  const judged = secretGroupRequestOfForm(form({ key: ' ', environment: '', clusterIds: [], retainedVersions: '0' }));
  assert.equal(judged.request, undefined);
  assert.deepEqual(judged.reasons, [
    'key: a key is required',
    'environment: an environment name is required',
    'clusterIds: choose at least one cluster to seal the versions for',
    'retainedVersions: "0" is not a whole number from 1 to 100',
  ]);
  assert.deepEqual(secretGroupRequestOfForm(form({ retainedVersions: '101' })).reasons, ['retainedVersions: "101" is not a whole number from 1 to 100']);
  assert.deepEqual(secretGroupRequestOfForm(form({ retainedVersions: '2.5' })).reasons, ['retainedVersions: "2.5" is not a whole number from 1 to 100']);
});

test('a typed value is sealed as its UTF-8 bytes, exactly as typed; nothing or too much is not sealed', () => {
  const judged = secretValueBytesOf(' pässword ');
  assert.equal(judged.reason, null);
  assert.deepEqual(judged.bytes, new TextEncoder().encode(' pässword '), 'no trimming: a value may begin or end in a space');
  assert.deepEqual(secretValueBytesOf(''), { bytes: null, reason: 'Type the value to seal.' });
  const tooLong = secretValueBytesOf('x'.repeat(32_769));
  assert.equal(tooLong.bytes, null);
  assert.equal(tooLong.reason, 'A secret value holds at most 32768 bytes (this one has 32769).');
  assert.notEqual(secretValueBytesOf('x'.repeat(32_768)).bytes, null);
});

test('re-seal is offered for the copies that read reseal-required, and counted per group', () => {
  const needing = version(2, ['reseal-required', 'sealed']);
  assert.deepEqual(clustersNeedingReseal(needing), ['c1']);
  assert.deepEqual(clustersNeedingReseal(version(1, ['sealed', 'recipient-gone'])), [], 'a copy whose recipient is gone is not re-sealed: it needs a new version');
  assert.equal(versionsNeedingReseal(group('g', [needing, version(1, ['reseal-required', 'reseal-required']), version(0, ['sealed', 'sealed'])])), 2);
  assert.match(describeSealState('reseal-required'), /seal the value again/);
  assert.match(describeSealState('recipient-gone'), /cannot open it/);
});

test('the page reads again for a group change or a recipient enrollment, and for nothing else', () => {
  assert.equal(isSecretsChange(change('CloudlySecretGroup')), true);
  assert.equal(isSecretsChange(change('CloudlySecretRecipients')), true);
  assert.equal(isSecretsChange(change('CloudlyService')), false);
});

test('an answered group replaces its row in place, or is added at the end', () => {
  const groups = [group('a'), group('b')];
  const changed = { ...group('a'), generation: 2 };
  assert.deepEqual(withSecretGroup(groups, changed).map((entry) => [entry.id, entry.generation]), [['a', 2], ['b', 1]]);
  assert.deepEqual(withSecretGroup(groups, group('c')).map((entry) => entry.id), ['a', 'b', 'c']);
});
