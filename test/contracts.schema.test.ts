import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { contractSchemaFile, generateContractSchema, renderContractSchema } from '../scripts/contract-schema.js';
import { contractSchema } from '../ts/interfaces/schema/contract.generated.js';
import type { ICloudlyMethods, ICloudlyOutboundMethods } from '../ts/interfaces/requests/methodmap.js';
import { contractValidators } from './helpers/contractschema.js';

test('the committed contract schema is what the contracts module\'s types generate (regenerate with scripts/contract-schema.ts)', () => {
  // Generating reads the whole contracts module through the TypeScript compiler (seconds, not
  // milliseconds), which is why this file is listed early in scripts/test.ts.
  assert.equal(readFileSync(contractSchemaFile, 'utf8'), renderContractSchema(generateContractSchema()));
});

test('the schema has a request and an answer for every method of both method maps', () => {
  // One entry per method of each map: a spot check that a map member did not vanish on the way.
  const servedSample: Array<keyof ICloudlyMethods> = ['createCluster', 'registerClusterRelay', 'adminLoginWithUsernameAndPassword'];
  const calledSample: Array<keyof ICloudlyOutboundMethods> = ['pushClusterPlatformDesiredStateChanged', 'backupClusterService'];
  for (const method of servedSample) assert.ok(contractSchema.served.includes(method), method);
  for (const method of calledSample) assert.ok(contractSchema.called.includes(method), method);
  const validatorOf = contractValidators(contractSchema);
  for (const method of contractSchema.served) {
    assert.equal(typeof validatorOf(`${method}.request`), 'function');
    assert.equal(typeof validatorOf(`${method}.answer`), 'function');
  }
  for (const method of contractSchema.called) {
    assert.equal(typeof validatorOf(`call.${method}.request`), 'function');
  }
  assert.ok(contractSchema.served.length >= 79 && contractSchema.called.length >= 15);
});

test('an administrator\'s request takes dryRun and identity; a relay\'s request takes neither', () => {
  const validatorOf = contractValidators(contractSchema);
  const identity = { name: 'admin', userId: 'u', type: 'user', role: 'admin', expiresAt: 1, jwt: 'x' };
  assert.equal(validatorOf('createCluster.request')({ identity, name: 'c', dryRun: true }), true);
  assert.equal(validatorOf('createCluster.request')({ name: 'c' }), false);
  assert.equal(validatorOf('getClusterPlatformDesiredState.request')({ knownRevision: 3 }), true);
  assert.equal(validatorOf('getClusterPlatformDesiredState.request')({ knownRevision: 3, dryRun: true }), false);
});
