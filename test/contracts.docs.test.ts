import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { computeDomainDigestHex, canonicalizeJson } from '../ts/interfaces/index.js';
import { contractSchema } from '../ts/interfaces/schema/contract.generated.js';
import { findMethodStatements, type IMethodStatement } from '../scripts/doc-members.js';

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

/** The API reference: every docs/api/*.md file, the dashboard's API and the secrets reference. */
const referenceFiles = [...readdirSync('docs/api').filter((nameArg) => nameArg.endsWith('.md')).map((nameArg) => `docs/api/${nameArg}`), 'docs/api-dashboard.md', 'docs/secrets.md'];
/** Every administrator request carries these; docs/api/overview.md states them once for all. */
const statedOnceForAll = new Set(['identity', 'dryRun']);
const servedMethods = new Set(contractSchema.served);

/** The members of the method's request (and answer, where the statement gives one) that the statement does not name. */
const statementGaps = (statementArg: IMethodStatement): string[] => {
  const unnamed = (textArg: string, definitionArg: string): string[] => membersOf(definitionArg)
    .filter((memberArg) => !statedOnceForAll.has(memberArg) && !new RegExp(`\\b${memberArg}\\b`).test(textArg));
  const where = `${statementArg.file}:${statementArg.line} ${statementArg.method}`;
  return [
    ...unnamed(statementArg.request, `${statementArg.method}.request`).map((memberArg) => `${where}: request member ${memberArg}`),
    ...(statementArg.answer === null ? [] : unnamed(statementArg.answer, `${statementArg.method}.answer`).map((memberArg) => `${where}: answer member ${memberArg}`)),
  ];
};

test('every request and answer the API reference states names every member the contract schema gives it', (t) => {
  const statements = referenceFiles.flatMap((fileArg) => findMethodStatements(fileArg, read(fileArg), servedMethods));
  t.diagnostic(`${statements.length} method statements in ${referenceFiles.length} files`);
  assert.ok(statements.length >= 90, `found only ${statements.length} statements`);
  assert.deepEqual(statements.flatMap(statementGaps), []);
});

test('every administrator method is stated in the API reference with its request and its answer', () => {
  const statements = referenceFiles.flatMap((fileArg) => findMethodStatements(fileArg, read(fileArg), servedMethods));
  const adminMethods = contractSchema.served.filter((methodArg) => membersOf(`${methodArg}.request`).includes('identity'));
  assert.ok(adminMethods.length >= 60);
  assert.deepEqual(adminMethods.filter((methodArg) => !statements.some((statementArg) => statementArg.method === methodArg && statementArg.answer !== null)), []);
});

test('the statement reader finds each form, and a member a statement leaves out', () => {
  const text = [
    '`getClusterNodes { identity, clusterId }` → `{ nodes }`',
    '| `getClusters` | `{ identity, selector?, limit?, cursor? }` | `{ clusters, nextCursor? }` |',
    '| `getServiceById` | admin | `{ identity, serviceId }` → `{ service }` |',
    '| `getOperation { operationId }` | `{ operation }` |',
    '`getAuditEvents { identity, cursor?, limit? } →',
    '{ events, nextCursor? }`',
  ].join('\n');
  const statements = findMethodStatements('example.md', text, servedMethods);
  assert.deepEqual(statements.map((statementArg) => [statementArg.method, statementArg.answer !== null]),
    [['getClusterNodes', true], ['getOperation', true], ['getAuditEvents', true], ['getClusters', true], ['getServiceById', true]]);
  assert.deepEqual(statements.flatMap(statementGaps), [
    'example.md:1 getClusterNodes: request member limit',
    'example.md:1 getClusterNodes: request member cursor',
    'example.md:1 getClusterNodes: answer member nextCursor',
    'example.md:5 getAuditEvents: request member filter',
  ]);
});
