import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describeFieldValue, fieldDiff } from '../web/src/diff.js';

/** The field-level diff every dashboard review shows (web/src/diff.ts). */

const spec = {
  name: 'app',
  runtime: { image: 'registry.example.com/app:1', replicas: 1, placement: { nodeIds: ['node-1'] } },
  ports: [{ name: 'http', port: 8080, protocol: 'tcp' }],
  volumes: [{ mountPath: '/data', readOnly: false }],
};

test('equal values give no change', () => {
  assert.deepEqual(fieldDiff(spec, structuredClone(spec)), []);
  assert.deepEqual(fieldDiff(null, null), []);
  assert.deepEqual(fieldDiff(Number.NaN, Number.NaN), []);
});

test('a changed leaf is named by its path, before and after', () => {
  const after = structuredClone(spec);
  after.runtime.image = 'registry.example.com/app:2';
  after.runtime.replicas = 3;
  assert.deepEqual(fieldDiff(spec, after), [
    { path: 'runtime.image', before: 'registry.example.com/app:1', after: 'registry.example.com/app:2' },
    { path: 'runtime.replicas', before: 1, after: 3 },
  ]);
});

test('array elements are compared by position; added and removed elements are absent on one side', () => {
  const after = structuredClone(spec);
  after.runtime.placement.nodeIds = ['node-1', 'node-2'];
  after.ports = [];
  assert.deepEqual(fieldDiff(spec, after), [
    { path: 'runtime.placement.nodeIds[1]', before: undefined, after: 'node-2' },
    { path: 'ports[0].name', before: 'http', after: undefined },
    { path: 'ports[0].port', before: 8080, after: undefined },
    { path: 'ports[0].protocol', before: 'tcp', after: undefined },
  ]);
});

test('added and removed members; a member undefined counts as absent', () => {
  assert.deepEqual(fieldDiff({ a: 1, b: 2, c: undefined }, { a: 1, d: { e: true } }), [
    { path: 'd.e', before: undefined, after: true },
    { path: 'b', before: 2, after: undefined },
  ]);
});

test('a new value (nothing before) lists every field as added', () => {
  assert.deepEqual(fieldDiff(undefined, { name: 'app', runAs: null, tags: ['x'] }), [
    { path: 'name', before: undefined, after: 'app' },
    { path: 'runAs', before: undefined, after: null },
    { path: 'tags[0]', before: undefined, after: 'x' },
  ]);
});

test('a change of kind (null to an object, a number to a string) is one change at its path', () => {
  assert.deepEqual(fieldDiff({ runAs: null }, { runAs: { user: 1000, group: 1000 } }), [
    { path: 'runAs', before: null, after: { user: 1000, group: 1000 } },
  ]);
  assert.deepEqual(fieldDiff(1, '1'), [{ path: '(the whole value)', before: 1, after: '1' }]);
});

test('a key that is not an identifier is quoted', () => {
  assert.deepEqual(fieldDiff({ 'a-b': 1 }, { 'a-b': 2 }), [{ path: '["a-b"]', before: 1, after: 2 }]);
});

test('values are shown as JSON, absent as "(absent)"', () => {
  assert.equal(describeFieldValue('x:1'), '"x:1"');
  assert.equal(describeFieldValue(null), 'null');
  assert.equal(describeFieldValue(undefined), '(absent)');
  assert.equal(describeFieldValue({ user: 1 }), '{"user":1}');
});
