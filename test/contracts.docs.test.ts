import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { computeDomainDigestHex, canonicalizeJson } from '../ts/interfaces/index.js';
import { contractSchema } from '../ts/interfaces/schema/contract.generated.js';

/**
 * The documents a relay author works from, checked against the generated contract schema: a
 * member the contract has and the document does not name fails here, so the docs cannot fall
 * behind a contract change unnoticed.
 */

type TSchemaObject = { $ref?: string; properties?: Record<string, unknown> };
const defs = contractSchema.$defs as Record<string, TSchemaObject>;
const refName = (refArg: string): string => decodeURIComponent(refArg.replace(/^#\/\$defs\//, ''));
const resolved = (schemaArg: TSchemaObject | undefined): TSchemaObject | undefined =>
  (schemaArg?.$ref ? defs[refName(schemaArg.$ref)] : schemaArg);
const membersOf = (definitionArg: string): string[] => Object.keys(resolved(defs[definitionArg])?.properties ?? {});
const read = (fileArg: string): string => readFileSync(fileArg, 'utf8');

/** Whether a table cell states a schema: it names every member, or the named type the schema is. */
const missingFrom = (cellArg: string, definitionArg: string): string[] => {
  const schema = defs[definitionArg];
  if (schema?.$ref && cellArg.includes(`\`${refName(schema.$ref)}\``)) {
    return [];
  }
  return membersOf(definitionArg).filter((memberArg) => !new RegExp(`\\b${memberArg}\\b`).test(cellArg));
};

/** The methods a relay calls: their request carries no administrator identity (login aside). */
const relayMethods = contractSchema.served.filter((methodArg) =>
  !membersOf(`${methodArg}.request`).includes('identity') && methodArg !== 'adminLoginWithUsernameAndPassword');
/** The calls Cloudly makes on a relay's socket (the admin socket's two are in docs/api-dashboard.md). */
const relayCalls = contractSchema.called.filter((methodArg) => !['changeEvent', 'watchExpired'].includes(methodArg));

test('docs/relay-protocol.md has a row for every relay method and every call on a relay, naming every request and answer member', () => {
  const rows = read('docs/relay-protocol.md').split('\n').filter((lineArg) => lineArg.startsWith('| `'));
  const gaps: string[] = [];
  const check = (methodArg: string, definitionArg: string) => {
    const row = rows.find((lineArg) => lineArg.startsWith(`| \`${methodArg}\` |`));
    if (!row) {
      gaps.push(`${methodArg}: no row`);
      return;
    }
    const [, requestCell = '', answerCell = ''] = row.split(' | ');
    for (const member of missingFrom(requestCell, `${definitionArg}.request`)) gaps.push(`${methodArg}: request member ${member}`);
    for (const member of missingFrom(answerCell, `${definitionArg}.answer`)) gaps.push(`${methodArg}: answer member ${member}`);
  };
  relayMethods.forEach((methodArg) => check(methodArg, methodArg));
  relayCalls.forEach((methodArg) => check(methodArg, `call.${methodArg}`));
  assert.ok(relayMethods.length >= 20 && relayCalls.length >= 10);
  assert.deepEqual(gaps, []);
});

test('docs/api/ingress.md names every member of the designation request', () => {
  const text = read('docs/api/ingress.md');
  assert.deepEqual(membersOf('IClusterIngressDesignationRequest').filter((memberArg) => !text.includes(`| \`${memberArg}\` |`)), []);
});

test('docs/secrets.md names every member of the sealed-secret binding and every purpose', () => {
  const text = read('docs/secrets.md');
  assert.deepEqual(membersOf('ISealedSecretBinding').filter((memberArg) => !text.includes(`\`${memberArg}\``)), []);
  const purposes = (defs.TSealedSecretPurpose as { enum?: string[] }).enum ?? [];
  assert.ok(purposes.length >= 3);
  assert.deepEqual(purposes.filter((purposeArg) => !text.includes(`| \`${purposeArg}\` |`)), []);
});

test('docs/api/backups.md names every member of the service object the backup calls carry', () => {
  const text = read('docs/api/backups.md');
  assert.deepEqual(membersOf('IService').filter((memberArg) => !text.includes(`\`${memberArg}\``)), []);
});

test('the digest example in docs/relay-protocol.md is what computeDomainDigestHex computes', () => {
  const text = read('docs/relay-protocol.md').replace(/\n/g, ' ');
  const example = /domain `([^`]+)` and value\s+`([^`]+)` give the canonical text\s+`([^`]+)` and the digest\s+`([0-9a-f]{64})`/.exec(text);
  assert.ok(example, 'the example is in the document');
  const [, domain, valueText, canonical, digest] = example;
  assert.equal(canonicalizeJson(JSON.parse(valueText)), canonical);
  assert.equal(computeDomainDigestHex(domain, JSON.parse(valueText)), digest);
});
