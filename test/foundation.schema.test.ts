import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CloudlyAdminClient, type TUntypedContract } from '../ts/client/admin.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IServedSchemaDocument } from '../ts/core/schema.js';
import { contractValidators } from './helpers/contractschema.js';
import { dispatchInProcess, startTestCloudly, testAdminPassword, testAdminUsername, type ITestCloudly } from './helpers/cloudly.js';
import { fieldProblemReasons } from '../ts/interfaces/data/refusal.js';

/** The reasons of a refusal for the request's shape (a decision's own `invalid-request` names others). */
const fieldReasons = new Set<string>(Object.values(fieldProblemReasons));

let t: ITestCloudly;
let relay: CloudlyRelayClient;
/** An administrator on the admin socket: every administrator's method is served there (`watchChanges` only there). */
let socketAdmin: CloudlyAdminClient;
let served: IServedSchemaDocument;
let validatorOf: ReturnType<typeof contractValidators>;

before(async () => {
  t = await startTestCloudly();
  const { relayToken } = await t.createCluster('schema');
  relay = await t.connectRelay(relayToken);
  socketAdmin = new CloudlyAdminClient(t.baseUrl);
  await socketAdmin.login(testAdminUsername, testAdminPassword);
  await socketAdmin.connectSocket();
  const response = await fetch(`${t.baseUrl}/schema`);
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /^application\/schema\+json/);
  served = await response.json() as IServedSchemaDocument;
  validatorOf = contractValidators(served);
});

after(async () => {
  socketAdmin.close();
  await t.stop();
});

test('GET /schema lists every served method with its caller, access, request and answer schemas and refusal codes', () => {
  assert.equal(served.$schema, 'https://json-schema.org/draft/2020-12/schema');
  assert.deepEqual(served.untyped, [], 'every served method is in the committed schema (run scripts/contract-schema.ts)');
  assert.deepEqual(Object.keys(served.methods).sort(), [...t.cloudly.servedMethods.keys()].sort());
  for (const [method, entry] of Object.entries(served.methods)) {
    const declared = t.cloudly.servedMethods.get(method)!;
    assert.equal(entry.caller, declared.caller, method);
    assert.equal(entry.access, declared.access, method);
    assert.equal(typeof validatorOf(`${method}.request`), 'function', method);
    assert.equal(typeof validatorOf(`${method}.answer`), 'function', method);
    assert.ok(entry.refusals.includes('invalid-request'), method);
  }
  assert.deepEqual(Object.keys(served.refusalCodes).sort(), ['conflict', 'forbidden', 'internal', 'invalid-request', 'not-found', 'unauthenticated', 'unavailable']);
});

test('GET /schema names the upstream @serve.zone/interfaces releases the contracts follow, per area', () => {
  assert.equal(served.contracts.name, '@serve.zone/interfaces');
  assert.equal(served.contracts.version, '32.23.0');
  assert.deepEqual(served.contracts.mirrors.map((mirror) => [mirror.from, mirror.version]), [['31.4.0', '31.6.0'], ['32.21.0', '32.23.0']]);
  const releaseOf = (areaArg: string): string | undefined =>
    served.contracts.mirrors.find((mirror) => mirror.areas.some((entry) => entry.area === areaArg))?.version;
  assert.equal(releaseOf('backup'), '31.6.0');
  assert.equal(releaseOf('cluster-node-corestore'), '31.6.0');
  assert.equal(releaseOf('cluster-ingress'), '32.23.0');
  assert.equal(releaseOf('corestore-legacy-adoption'), '32.23.0');
});

test('GET /schema has every call Cloudly makes on a relay, with its request and answer', () => {
  for (const call of ['pushClusterPlatformDesiredStateChanged', 'backupClusterService', 'getClusterTrafficStatistics']) {
    assert.ok(served.calls[call], call);
    assert.equal(typeof validatorOf(`call.${call}.request`), 'function', call);
    assert.equal(typeof validatorOf(`call.${call}.answer`), 'function', call);
  }
});

/**
 * Methods whose body is a contract value judged whole (`input: 'judged'`): their contract refuses
 * a malformed body in its own terms instead of `invalid-request`.
 */
const judgedShapeRefusals: Record<string, (dataArg: { code?: unknown; reason?: unknown }) => boolean> = {
  // A protocol it cannot negotiate, or a body `validateClusterIngressRegistration` refuses.
  registerClusterIngress: (dataArg) => dataArg.code === 'protocol-refused' || dataArg.reason === 'registration-invalid',
  setServiceVolumeInitialization: (dataArg) => dataArg.code === 'volume-initialization-invalid',
};

/** Whether the server refused a request for its shape (the only verdict a schema can agree with). */
const serverRefusesShape = async (methodArg: string, requestArg: Record<string, unknown>): Promise<boolean> => {
  const caller = served.methods[methodArg].caller;
  try {
    if (caller === 'relay') {
      await relay.fire<TUntypedContract>(methodArg, requestArg);
    } else if (caller === 'admin') {
      // Administrators' calls are dry runs: a request the shape lets through changes nothing.
      await socketAdmin.call<TUntypedContract>(methodArg, { dryRun: true, ...requestArg });
    } else {
      await dispatchInProcess(t.cloudly)(methodArg, requestArg);
    }
    return false;
  } catch (error) {
    const data = (error as { errorData?: { code?: unknown } }).errorData;
    if (!data) throw error;
    // A decision may also answer `invalid-request` (a wrong old password): only field problems are the shape's.
    const reasons = (data as { reasons?: string[] }).reasons ?? [];
    return (data.code === 'invalid-request' && reasons.every((reasonArg) => fieldReasons.has(reasonArg)))
      || (judgedShapeRefusals[methodArg]?.(data) ?? false);
  }
};

const schemaRefuses = (methodArg: string, requestArg: Record<string, unknown>): boolean => {
  const caller = served.methods[methodArg].caller;
  const wire = caller === 'admin' ? { identity: t.identity, dryRun: true, ...requestArg } : requestArg;
  return !validatorOf(`${methodArg}.request`)(wire);
};

/**
 * The hand corpus: requests whose shape is right and requests wrong in one member, for methods of
 * every caller. Values stay within the validators' ranges, so only the shape is judged.
 */
const corpus: Array<{ method: string; request: Record<string, unknown>; shapeIsValid: boolean }> = [
  { method: 'createCluster', request: { name: 'corpus-cluster' }, shapeIsValid: true },
  { method: 'createCluster', request: { name: 5 }, shapeIsValid: false },
  { method: 'createCluster', request: {}, shapeIsValid: false },
  { method: 'getClusters', request: { limit: 10 }, shapeIsValid: true },
  { method: 'getClusters', request: { limit: 'ten' }, shapeIsValid: false },
  { method: 'getClusters', request: { limit: 0 }, shapeIsValid: false },
  { method: 'getClusters', request: { limit: 1001 }, shapeIsValid: false },
  { method: 'getClusterById', request: { clusterId: 'cluster-1' }, shapeIsValid: true },
  { method: 'getClusterById', request: { clusterId: ['cluster-1'] }, shapeIsValid: false },
  { method: 'addClusterNode', request: { clusterId: 'cluster-1', name: 'node-a', nodeId: 'node-a' }, shapeIsValid: true },
  { method: 'addClusterNode', request: { clusterId: 'cluster-1', nodeId: 'node-a' }, shapeIsValid: false },
  { method: 'addClusterNode', request: { clusterId: 'cluster-1', name: 'node-a', nodeId: 'has space' }, shapeIsValid: false },
  { method: 'addClusterNode', request: { clusterId: 'cluster-1', name: ' node-a', nodeId: 'node-a' }, shapeIsValid: false },
  { method: 'createUser', request: { username: 'corpus', password: 'corpus-password-0123', role: 'user' }, shapeIsValid: true },
  { method: 'createUser', request: { username: 'corpus', password: 'corpus-password-0123', role: 'root' }, shapeIsValid: false },
  { method: 'watchChanges', request: { kinds: ['CloudlyCluster'] }, shapeIsValid: true },
  { method: 'watchChanges', request: { kinds: 'CloudlyCluster' }, shapeIsValid: false },
  { method: 'getAuditEvents', request: { limit: 5 }, shapeIsValid: true },
  { method: 'setUserDisabled', request: { userId: 'u', disabled: 'yes', expectedGeneration: 1 }, shapeIsValid: false },
  { method: 'adminLoginWithUsernameAndPassword', request: { username: 'nobody', password: 'wrong-password' }, shapeIsValid: true },
  { method: 'adminLoginWithUsernameAndPassword', request: { username: 'nobody' }, shapeIsValid: false },
  { method: 'getClusterPlatformDesiredState', request: {}, shapeIsValid: true },
  { method: 'getClusterPlatformDesiredState', request: { knownRevision: 'one' }, shapeIsValid: false },
  { method: 'getCorestoreControlCredentialMaterial', request: { nodeId: 3 }, shapeIsValid: false },
];

test('the server\'s validation and the schema agree on a corpus of valid and invalid requests', async () => {
  const disagreements: string[] = [];
  for (const entry of corpus) {
    const schema = schemaRefuses(entry.method, entry.request);
    const server = await serverRefusesShape(entry.method, entry.request);
    if (schema === entry.shapeIsValid || server === entry.shapeIsValid) {
      disagreements.push(`${entry.method} ${JSON.stringify(entry.request)}: schema ${schema ? 'refuses' : 'accepts'}, server ${server ? 'refuses' : 'accepts'}`);
    }
  }
  assert.deepEqual(disagreements, []);
});

test('every served method: the schema and the server both refuse a member the contract does not name', async () => {
  const disagreements: string[] = [];
  for (const method of Object.keys(served.methods)) {
    const request = { memberNoContractNames: 1 };
    const schema = schemaRefuses(method, request);
    const server = await serverRefusesShape(method, request);
    if (!schema || !server) {
      disagreements.push(`${method}: schema ${schema ? 'refuses' : 'accepts'}, server ${server ? 'refuses' : 'accepts'}`);
    }
  }
  assert.deepEqual(disagreements, []);
});

test('every served method: the schema and the server agree whether an otherwise empty request has the shape', async () => {
  const disagreements: string[] = [];
  for (const method of Object.keys(served.methods)) {
    const schema = schemaRefuses(method, {});
    const server = await serverRefusesShape(method, {});
    if (schema !== server) {
      disagreements.push(`${method}: schema ${schema ? 'refuses' : 'accepts'}, server ${server ? 'refuses' : 'accepts'}`);
    }
  }
  assert.deepEqual(disagreements, []);
});

type TSchemaNode = Record<string, unknown>;

const definitionOf = (schemaArg: unknown): TSchemaNode | undefined => {
  let schema = schemaArg as TSchemaNode | undefined;
  for (let hops = 0; schema && typeof schema.$ref === 'string' && hops < 8; hops++) {
    schema = served.$defs[decodeURIComponent((schema.$ref as string).replace(/^#\/\$defs\//, ''))] as TSchemaNode | undefined;
  }
  return schema;
};

/** Strings tried, in order, as the first value a member's schema admits. */
const sampleStrings = ['node-a', 'a', 'sample', 'a'.repeat(64), '0'.repeat(64), '0'.repeat(32), 'A'.repeat(43), '2026-01-01', 'x25519:0123456789abcdef0123456789abcdef'];

/** A value the schema admits (checked by the schema itself), or undefined when none of the simple tries is admitted. */
const sampleOf = (schemaArg: unknown, depthArg = 0): unknown => {
  const schema = definitionOf(schemaArg);
  if (!schema || depthArg > 6) return undefined;
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  for (const branches of [schema.anyOf, schema.oneOf, schema.allOf]) {
    if (Array.isArray(branches)) {
      for (const branch of branches) {
        const value = sampleOf(branch, depthArg + 1);
        if (value !== undefined) return value;
      }
    }
  }
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string': return sampleStrings.find((candidateArg) =>
      candidateArg.length >= ((schema.minLength as number | undefined) ?? 0)
      && candidateArg.length <= ((schema.maxLength as number | undefined) ?? Infinity)
      && (typeof schema.pattern !== 'string' || new RegExp(schema.pattern, 'u').test(candidateArg)));
    case 'integer':
    case 'number': return Math.max((schema.minimum as number | undefined) ?? 0, 1);
    case 'boolean': return false;
    case 'null': return null;
    case 'array': return [];
    case 'object': {
      const value: Record<string, unknown> = {};
      const properties = (schema.properties ?? {}) as Record<string, unknown>;
      for (const member of (schema.required ?? []) as string[]) {
        const memberValue = sampleOf(properties[member], depthArg + 1);
        if (memberValue === undefined) return undefined;
        value[member] = memberValue;
      }
      return value;
    }
    default: return undefined;
  }
};

/** Values at and around the edges of what a member's schema states, plus the usual wrong ones. */
const probesOf = (schemaArg: unknown): unknown[] => {
  const schema = definitionOf(schemaArg) ?? {};
  const probes: unknown[] = ['', 'has space', ' padded', 'a', 'x'.repeat(129), -1, 0, 1, 1.5, 2 ** 53, true, null];
  if (typeof schema.maxLength === 'number') probes.push('a'.repeat(schema.maxLength), 'a'.repeat(schema.maxLength + 1));
  if (typeof schema.maximum === 'number') probes.push(schema.maximum, schema.maximum + 1);
  if (typeof schema.minimum === 'number') probes.push(schema.minimum, schema.minimum - 1);
  return probes;
};

/**
 * Bases the schema's simple samples cannot give: a request the server's own rules admit (a decision
 * may still refuse it, with anything but `invalid-request`).
 */
const handBases: Record<string, Record<string, unknown>> = {
  changePassword: { oldPassword: testAdminPassword, newPassword: 'a-new-password-0123' },
  adminPruneClusterNodeArchive: { clusterId: 'cluster-a', nodeId: 'node-a', retention: { keepLast: 3 } },
  adoptCorestoreLegacyResources: {
    clusterId: 'cluster-a', nodeId: 'node-a', expectedInventorySha256: '0'.repeat(64), resources: [{ serviceId: 'service-a', capability: 'database' }],
  },
  setClusterNodeCorestore: { clusterId: 'cluster-a', nodeId: 'node-a', expected: null, corestore: { endpoint: 'http://10.50.0.1:3000' } },
  setServiceVolumeInitialization: { serviceId: 'service-a', mountPath: '/data', expected: null, initialization: null },
  reportClusterNode: { report: { nodeId: 'node-a', name: 'node-a', hostAddresses: ['10.60.0.1'] } },
  registerClusterRelay: { registration: { origin: 'http://192.0.2.10:8080', version: '1.2.0', protocol: 'cluster-relay/1' } },
  createBackupSchedule: { schedule: { target: { serviceId: 'service-a' }, cron: '0 3 * * *' } },
  updateBackupSchedule: { scheduleId: 'schedule-a', expectedGeneration: 1, schedule: { target: { serviceId: 'service-a' }, cron: '0 3 * * *' } },
  createSecretGroup: { group: { key: 'node-a', tags: [], environment: 'node-a', clusterIds: ['cluster-a'] } },
  planRollout: { selector: 'env=prod', serviceName: 'web', change: { image: 'nginx:2' } },
  createRollout: { selector: 'env=prod', serviceName: 'web', change: { image: 'nginx:2' }, waves: [{ clusters: 1 }] },
  // Another protocol's name is a negotiation the server answers (`protocol-mismatch` with what it supports), not a shape.
  registerClusterIngress: {
    bearer: 'a'.repeat(32), version: '1.0.0', nodeId: 'node-a', protocol: { name: 'serve.zone/cluster-ingress', minimumVersion: 1, maximumVersion: 1 },
  },
};

/**
 * Methods whose request holds a nested contract value with rules the served schema does not state
 * yet (a runtime of the named cluster inside a designation, prefixes naming their network address
 * inside an address plan, 1 to 64 mappings of an isolated restore, 1 to 64 sealed copies of a
 * secret version): the schema's own sample of them
 * is refused by the server. Listed so that the gap is visible and that closing one (or opening
 * another) changes this test.
 */
const nestedRulesNotInSchema = ['addSecretVersion', 'createIsolatedRestore', 'designateClusterIngress', 'setRuntimeNetworkAddressPlan'];

/**
 * A page cursor is valid only as this server handed it out, and a label selector's grammar only its
 * parser judges; the schema states their type and length. For them, only "the schema refuses, the
 * server accepts" is a disagreement.
 */
const serverOnlyMembers = new Set(['cursor', 'selector']);

test('every served method: the schema and the server agree on each member\'s edge and wrong values', async () => {
  const disagreements: string[] = [];
  const unsampled: string[] = [];
  const baseRefusedByServer: string[] = [];
  for (const method of Object.keys(served.methods)) {
    const request = definitionOf(served.$defs[`${method}.request`]);
    const properties = (request?.properties ?? {}) as Record<string, unknown>;
    const base = handBases[method] ?? sampleOf({ ...request, required: ((request?.required ?? []) as string[]).filter((memberArg) => memberArg !== 'identity') }) as Record<string, unknown> | undefined;
    if (!base) {
      unsampled.push(method);
      continue;
    }
    const verdicts = async (requestArg: Record<string, unknown>, labelArg: string, serverOnlyArg = false): Promise<void> => {
      const schema = schemaRefuses(method, requestArg);
      const server = await serverRefusesShape(method, requestArg);
      if (schema !== server && !(serverOnlyArg && server)) {
        disagreements.push(`${method} ${labelArg}: schema ${schema ? 'refuses' : 'accepts'}, server ${server ? 'refuses' : 'accepts'}`);
      }
    };
    if (!schemaRefuses(method, base) && await serverRefusesShape(method, base)) {
      // Every probe would be refused for the base's own nested value; nothing more to compare.
      baseRefusedByServer.push(method);
      continue;
    }
    await verdicts(base, JSON.stringify(base));
    // A method's probes go out together: each is a dry run or a read, and some (a signing key's
    // rotation) cost a key generation each.
    await Promise.all(Object.keys(properties).filter((memberArg) => memberArg !== 'identity' && memberArg !== 'dryRun').flatMap((member) =>
      probesOf(properties[member]).map((probe) =>
        verdicts({ ...base, [member]: probe }, `${member}=${JSON.stringify(probe)?.slice(0, 20)}`, serverOnlyMembers.has(member)))));
  }
  assert.deepEqual(unsampled, [], 'the schema gives a sample request of every method');
  assert.deepEqual(baseRefusedByServer, nestedRulesNotInSchema);
  assert.deepEqual(disagreements, []);
});
