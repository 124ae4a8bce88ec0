/**
 * Writes ts/interfaces/schema/contract.generated.ts: JSON Schema (draft 2020-12) for the request
 * and the answer of every method Cloudly serves and of every call Cloudly makes, generated from
 * the contracts module's own TypeScript types (the method maps in
 * ts/interfaces/requests/methodmap.ts) by ts-json-schema-generator. Run after changing a contract:
 *
 *   node --import tsx scripts/contract-schema.ts
 *
 * test/contracts.schema.test.ts regenerates it and fails while the committed file is stale. The
 * server serves it, with each method's caller and access, at GET /schema (ts/core/schema.ts).
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createGenerator, type Config } from 'ts-json-schema-generator';
import type { IContractSchemaDocument } from '../ts/interfaces/schema/document.js';

const projectDir = join(dirname(fileURLToPath(import.meta.url)), '..');
export const contractSchemaFile = join(projectDir, 'ts', 'interfaces', 'schema', 'contract.generated.ts');

type TSchema = Record<string, unknown>;

const generatorConfig: Config = {
  path: join(projectDir, 'ts', 'interfaces', 'requests', 'methodmap.ts'),
  tsconfig: join(projectDir, 'tsconfig.json'),
  type: 'ICloudlyMethods',
  // The project's own `npm run check` type-checks; the generator only reads the types.
  skipTypeCheck: true,
  expose: 'export',
  topRef: true,
  // The contracts are closed: a member the type does not name is refused, as the validators do.
  additionalProperties: false,
  jsDoc: 'basic',
  sortProps: true,
};

const isObject = (valueArg: unknown): valueArg is TSchema =>
  typeof valueArg === 'object' && valueArg !== null && !Array.isArray(valueArg);

/** Draft-07 references (`#/definitions/<encoded name>`) become 2020-12 ones (`#/$defs/<name>`). */
const definitionName = (refArg: string): string => decodeURIComponent(refArg.replace(/^#\/definitions\//, ''));

/** A deep copy with every reference re-pointed; the generator writes no tuples, so nothing else differs. */
const toDraft2020 = (valueArg: unknown): unknown => {
  if (Array.isArray(valueArg)) {
    return valueArg.map(toDraft2020);
  }
  if (!isObject(valueArg)) {
    return valueArg;
  }
  const copy: TSchema = {};
  for (const [key, member] of Object.entries(valueArg)) {
    if (key === 'items' && Array.isArray(member)) {
      throw new Error('a tuple schema: translate items[] to prefixItems before committing');
    }
    copy[key] = key === '$ref' && typeof member === 'string'
      ? `#/$defs/${encodeURIComponent(definitionName(member))}`
      : toDraft2020(member);
  }
  return copy;
};

/** The contract (`ITypedContract<method, request, response>`) a method map member names, resolved. */
const contractOf = (definitionsArg: TSchema, memberArg: TSchema): { request: unknown; response: unknown } => {
  let schema: unknown = memberArg;
  for (let hops = 0; isObject(schema) && typeof schema.$ref === 'string'; hops += 1) {
    if (hops > 8) throw new Error('a reference chain longer than 8');
    schema = definitionsArg[definitionName(schema.$ref)];
  }
  const properties = isObject(schema) && isObject(schema.properties) ? schema.properties : null;
  if (!properties || !('request' in properties) || !('response' in properties)) {
    throw new Error(`not a typed contract: ${JSON.stringify(memberArg)}`);
  }
  return { request: properties.request, response: properties.response };
};

/** Every definition a schema reaches, by name (so the document keeps only what it uses). */
const collectReferences = (valueArg: unknown, definitionsArg: TSchema, seenArg: Set<string>): void => {
  if (Array.isArray(valueArg)) {
    valueArg.forEach((itemArg) => collectReferences(itemArg, definitionsArg, seenArg));
    return;
  }
  if (!isObject(valueArg)) return;
  for (const [key, member] of Object.entries(valueArg)) {
    if (key === '$ref' && typeof member === 'string') {
      const name = definitionName(member);
      if (!seenArg.has(name)) {
        seenArg.add(name);
        collectReferences(definitionsArg[name], definitionsArg, seenArg);
      }
    } else {
      collectReferences(member, definitionsArg, seenArg);
    }
  }
};

/**
 * The request as the wire carries it: an administrator's request (it carries `identity`) also
 * takes `dryRun`, which the guard takes off before the method's own validation.
 */
const withDryRun = (requestArg: unknown, definitionsArg: TSchema): unknown => {
  const request = isObject(requestArg) && typeof requestArg.$ref === 'string' ? definitionsArg[definitionName(requestArg.$ref)] : requestArg;
  if (!isObject(request) || !isObject(request.properties) || !('identity' in request.properties) || 'dryRun' in request.properties) {
    return requestArg;
  }
  return {
    ...request,
    properties: { ...request.properties, dryRun: { type: 'boolean', description: 'Decide without writing (every administrator mutation).' } },
  };
};

export const contractSchemaId = 'https://serve.zone/cloudly/contract.schema.json';

/** The schema document for the contracts as they are now. */
export const generateContractSchema = (): IContractSchemaDocument => {
  const generator = createGenerator(generatorConfig);
  const defs: Record<string, unknown> = {};
  const reached = new Set<string>();
  const directions: Record<'served' | 'called', string[]> = { served: [], called: [] };
  const maps = [['served', 'ICloudlyMethods'], ['called', 'ICloudlyOutboundMethods']] as const;
  for (const [direction, mapType] of maps) {
    const generated = generator.createSchema(mapType) as TSchema;
    const definitions = generated.definitions as TSchema;
    const map = definitions[mapType] as { properties: Record<string, TSchema> };
    for (const method of Object.keys(map.properties).sort()) {
      const { request, response } = contractOf(definitions, map.properties[method]);
      const prefix = direction === 'served' ? method : `call.${method}`;
      const requestSchema = direction === 'served' ? withDryRun(request, definitions) : request;
      defs[`${prefix}.request`] = requestSchema;
      defs[`${prefix}.answer`] = response;
      collectReferences([requestSchema, response], definitions, reached);
      directions[direction].push(method);
    }
    for (const name of reached) {
      if (name in definitions && !(name in defs)) {
        defs[name] = definitions[name];
      }
    }
  }
  const sortedDefs = Object.fromEntries(Object.keys(defs).sort().map((nameArg) => [nameArg, toDraft2020(defs[nameArg])]));
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: contractSchemaId,
    $defs: sortedDefs,
    served: directions.served,
    called: directions.called,
  };
};

/** The text the generated module must hold. */
export const renderContractSchema = (documentArg: IContractSchemaDocument): string => [
  '// Generated by scripts/contract-schema.ts from the contracts module\'s types; do not edit by hand.',
  'import type { IContractSchemaDocument } from \'./document.js\';',
  '',
  `export const contractSchema: IContractSchemaDocument = ${JSON.stringify(documentArg, null, 1)};`,
  '',
].join('\n');

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  writeFileSync(contractSchemaFile, renderContractSchema(generateContractSchema()));
  process.stdout.write(`wrote ${contractSchemaFile} in ${Date.now() - started} ms\n`);
}
