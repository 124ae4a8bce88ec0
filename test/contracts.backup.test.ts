import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import * as interfaces from '../ts/interfaces/index.js';

const {
  validateCorestoreDatabaseClosureDescriptor,
  validateBackupArchiveObject,
  validateArchiveRetentionPolicy,
  validateIsolatedRestoreResourceMappings,
  validateIsolatedRestoreArchiveManifest,
  computeIsolatedRestoreResourceMappingsSha256,
  computeIsolatedRestoreArchiveManifestSha256,
} = interfaces.data;

const hex = (charArg: string): string => charArg.repeat(64);

const descriptor = () => ({
  format: 'corestore-database-closure-v1',
  byteLength: 1024,
  sha256: hex('a'),
  receipt: { receiptId: 'export-1', receiptSha256: hex('b') },
});

const allocation = () => ({
  purpose: 'scratch-rehearsal',
  rehearsalId: 'rehearsal-7',
  allocationId: hex('1'),
  generation: 1,
  bindingSha256: hex('2'),
  receiptSha256: hex('3'),
});

const databaseMapping = (targetExtra: Record<string, unknown> = {}) => ({
  type: 'database',
  source: { resourceName: 'main-db', databaseName: 'app' },
  target: { resourceName: 'scratch-db', databaseName: 'app_restore', ...targetExtra },
});

test('a closure descriptor with format, exact length, sha256 and receipt is accepted', () => {
  assert.deepEqual(validateCorestoreDatabaseClosureDescriptor(descriptor()), []);
});

test('a closure descriptor is refused with every reason, in key order', () => {
  assert.deepEqual(
    validateCorestoreDatabaseClosureDescriptor({
      format: 'tar', byteLength: 0, sha256: hex('A'), receipt: { receiptId: '', receiptSha256: 'x', extra: 1 }, more: true,
    }),
    [
      'descriptor.more is not a descriptor field',
      'descriptor.format must be corestore-database-closure-v1',
      `descriptor.byteLength must be an integer from 1 to ${interfaces.data.maximumCorestoreDatabaseClosureByteLength}`,
      'descriptor.sha256 must be 64 lowercase hex digits',
      'descriptor.receipt.extra is not a receipt field',
      "descriptor.receipt.receiptId must be an identifier of 1 to 128 letters, digits, '.', '_' or '-'",
      'descriptor.receipt.receiptSha256 must be 64 lowercase hex digits',
    ],
  );
  assert.deepEqual(validateCorestoreDatabaseClosureDescriptor({ ...descriptor(), byteLength: 1.5 }).length, 1);
  assert.deepEqual(validateCorestoreDatabaseClosureDescriptor([]), ['descriptor must be a plain object']);
  const withGetter = Object.defineProperty(descriptor(), 'sha256', { get: () => { throw new Error('boom'); }, enumerable: true });
  assert.deepEqual(validateCorestoreDatabaseClosureDescriptor(withGetter), ['descriptor must be a plain object']);
  class NotPlain {}
  assert.deepEqual(validateCorestoreDatabaseClosureDescriptor(new NotPlain()), ['descriptor must be a plain object']);
});

test('archive objects need a safe relative path, an exact size and a sha256', () => {
  assert.deepEqual(validateBackupArchiveObject({ path: 'data/0001.pack', size: 0, sha256: hex('c') }), []);
  assert.deepEqual(validateBackupArchiveObject({ path: '../etc/passwd', size: -1, sha256: 'no', x: 1 }, 'object'), [
    'object.x is not an archive object field',
    "object.path must be a relative path of at most 1024 characters whose segments use letters, digits, '.', '_' or '-' and are not '.' or '..'",
    'object.size must be a non-negative integer',
    'object.sha256 must be 64 lowercase hex digits',
  ]);
});

test('a retention policy needs at least one bounded count', () => {
  assert.deepEqual(validateArchiveRetentionPolicy({ keepLast: 3, keepDaily: 7 }), []);
  assert.deepEqual(validateArchiveRetentionPolicy({}), ['retention must set at least one of keepLast, keepDaily, keepWeekly, keepMonthly']);
  assert.deepEqual(validateArchiveRetentionPolicy({ keepLast: -1, keepYearly: 1 }), [
    'retention.keepYearly is not a retention field',
    'retention.keepLast must be an integer from 0 to 10000',
  ]);
});

test('a database target may carry its Corestore allocation reference exactly as issued', () => {
  assert.deepEqual(validateIsolatedRestoreResourceMappings([databaseMapping()]), []);
  assert.deepEqual(validateIsolatedRestoreResourceMappings([databaseMapping({ databaseAllocation: allocation() })]), []);
});

test('an allocation reference is read field by field and every fault is named', () => {
  const path = 'mappings[0].target.databaseAllocation';
  assert.deepEqual(
    validateIsolatedRestoreResourceMappings([databaseMapping({
      databaseAllocation: {
        purpose: 'production', rehearsalId: 'has space', allocationId: hex('G'), generation: 0,
        bindingSha256: 'short', receiptSha256: hex('3'), uri: 'mongodb://secret',
      },
    })]),
    [
      `${path} must have exactly the keys purpose, rehearsalId, allocationId, generation, bindingSha256, receiptSha256`,
      `${path}.purpose must be scratch-rehearsal`,
      `${path}.rehearsalId must be a scoped identifier of 1 to 128 letters, digits, '.', '_' or '-'`,
      `${path}.allocationId must be 64 lowercase hex digits`,
      `${path}.generation must be a safe integer of at least 1`,
      `${path}.bindingSha256 must be 64 lowercase hex digits`,
    ],
  );
  assert.deepEqual(
    validateIsolatedRestoreResourceMappings([databaseMapping({ databaseAllocation: { ...allocation(), generation: 2 ** 53 } })]),
    [`${path}.generation must be a safe integer of at least 1`],
  );
  assert.deepEqual(validateIsolatedRestoreResourceMappings([databaseMapping({ databaseAllocation: null })]), [`${path} must be a plain object`]);
  assert.deepEqual(validateIsolatedRestoreResourceMappings([databaseMapping({ other: 1 })]), [
    'mappings[0].target must have exactly the keys resourceName, databaseName',
  ]);
});

test('the mappings digest binds the allocation reference and ignores nothing else', () => {
  const plain = computeIsolatedRestoreResourceMappingsSha256([databaseMapping()] as never);
  const allocated = computeIsolatedRestoreResourceMappingsSha256([databaseMapping({ databaseAllocation: allocation() })] as never);
  const otherGeneration = computeIsolatedRestoreResourceMappingsSha256(
    [databaseMapping({ databaseAllocation: { ...allocation(), generation: 2 } })] as never,
  );
  assert.notEqual(plain, allocated);
  assert.notEqual(allocated, otherGeneration);
  const reordered = { target: databaseMapping({ databaseAllocation: allocation() }).target, source: databaseMapping().source, type: 'database' };
  assert.equal(computeIsolatedRestoreResourceMappingsSha256([reordered] as never), allocated);
});

test('the manifest digest does not depend on listing order, and a path may appear once', () => {
  const a = { path: 'a', size: 1, sha256: hex('a') };
  const b = { path: 'b/c', size: 2, sha256: hex('b') };
  assert.equal(computeIsolatedRestoreArchiveManifestSha256([a, b]), computeIsolatedRestoreArchiveManifestSha256([b, a]));
  assert.notEqual(computeIsolatedRestoreArchiveManifestSha256([a]), computeIsolatedRestoreArchiveManifestSha256([a, b]));
  assert.deepEqual(validateIsolatedRestoreArchiveManifest([a, b, a]), ['manifest[2].path repeats an earlier object']);
});

test('validators never throw and always answer a list of strings', () => {
  const validators = [
    validateCorestoreDatabaseClosureDescriptor,
    validateBackupArchiveObject,
    validateArchiveRetentionPolicy,
    validateIsolatedRestoreResourceMappings,
    validateIsolatedRestoreArchiveManifest,
  ];
  fc.assert(fc.property(fc.anything({ withNullPrototype: true, withBigInt: true, withDate: true, withMap: true }), (value) => {
    for (const validate of validators) {
      const reasons = validate(value);
      assert.ok(Array.isArray(reasons) && reasons.every((reason) => typeof reason === 'string'));
    }
  }), { numRuns: 300 });
  const hostile = new Proxy({}, { getPrototypeOf: () => { throw new Error('trap'); } });
  for (const validate of validators) {
    assert.ok(validate(hostile).length > 0);
  }
});
