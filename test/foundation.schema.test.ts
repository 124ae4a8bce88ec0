import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CloudlyAdminClient, type TUntypedContract } from '../ts/client/admin.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IServedSchemaDocument } from '../ts/core/schema.js';
import { contractValidators } from './helpers/contractschema.js';
import { dispatchInProcess, startTestCloudly, testAdminPassword, testAdminUsername, type ITestCloudly } from './helpers/cloudly.js';

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
const judgedShapeRefusals: Record<string, string> = { registerClusterIngress: 'protocol-refused' };

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
    return data.code === 'invalid-request' || data.code === judgedShapeRefusals[methodArg];
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
  { method: 'getClusterById', request: { clusterId: 'cluster-1' }, shapeIsValid: true },
  { method: 'getClusterById', request: { clusterId: ['cluster-1'] }, shapeIsValid: false },
  { method: 'addClusterNode', request: { clusterId: 'cluster-1', name: 'node-a', nodeId: 'node-a' }, shapeIsValid: true },
  { method: 'addClusterNode', request: { clusterId: 'cluster-1', nodeId: 'node-a' }, shapeIsValid: false },
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
