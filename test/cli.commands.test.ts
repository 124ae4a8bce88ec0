import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { startTestCloudly, testAdminPassword, refusalOf, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { prepareIngressCluster } from './ingress.fixture.js';
import { createCli, type ICli, type ICliRun } from './cli.fixture.js';
import { validateServiceWritableSpec } from '../ts/interfaces/data/service.js';
import { platformBindingCapabilities } from '../ts/interfaces/data/platformbinding.js';
import { operationStates } from '../ts/interfaces/requests/operation.js';

/**
 * The `cloudly` commands against a real server on a real port, run in this process through the
 * command runner (test/cli.fixture.ts: own stdout, stderr, stdin, environment and signals; real
 * HTTP and socket to the server). The scenarios share one server and one config directory and
 * run in order. test/cli.binary.test.ts runs the real executable as a child process.
 */

let t: ITestCloudly;
let cli: ICli;
let configDir: string;

type IRun = ICliRun;

const cloudly = (argsArg: string[], inputArg = ''): Promise<IRun> => cli.run(argsArg, inputArg);

type TLooseContract = { method: string; request: any; response: any };
const api = (methodArg: string, requestArg: Record<string, unknown>): Promise<any> => t.caller.call<TLooseContract>(methodArg, requestArg);

const json = (runArg: IRun): any => {
  assert.equal(runArg.code, 0, `exit ${runArg.code}: ${runArg.stderr}`);
  return JSON.parse(runArg.stdout);
};

before(async () => {
  t = await startTestCloudly();
  cli = await createCli();
  configDir = cli.configDir;
});

after(async () => {
  await t.stop().catch(() => undefined);
  await cli.dispose();
});

test('login reads the password from stdin and keeps the identity in a 0600 file in a 0700 directory', async () => {
  const run = await cloudly(['login', '--url', `${t.baseUrl}/`, '--username', 'admin'], `${testAdminPassword}\n`);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stderr, /logged in to http:\/\/127\.0\.0\.1:\d+ as admin/);
  assert.equal(run.stdout, '');
  const file = path.join(configDir, 'credentials.json');
  assert.equal((await fsp.stat(file)).mode & 0o777, 0o600);
  assert.equal((await fsp.stat(configDir)).mode & 0o777, 0o700);
  const stored = JSON.parse(await fsp.readFile(file, 'utf8'));
  const contextName = `admin@${new URL(t.baseUrl).host}`;
  assert.equal(stored.currentContext, contextName);
  assert.equal(stored.contexts[contextName].server, t.baseUrl, 'the URL is kept without its trailing slash');
  assert.equal(stored.contexts[contextName].identity.name, 'admin');
  assert.ok(!(await fsp.readFile(file, 'utf8')).includes(testAdminPassword), 'the password is never stored');

  const wrong = await cloudly(['login', '--url', t.baseUrl], 'not-the-password-at-all\n');
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /^refused: unauthenticated/m);
});

test('usage errors exit 2 and send nothing', async () => {
  const missing = await cloudly(['clusters', 'create']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /--name/);
  const format = await cloudly(['clusters', 'list', '--output', 'xml']);
  assert.equal(format.code, 2);
  const expectation = await cloudly(['clusters', 'rotate-relay-token', '--cluster', 'c1']);
  assert.equal(expectation.code, 2);
  assert.match(expectation.stderr, /--expect <generation>.*or --expect-current/);
  // A login URL that is not an http(s) URL is a usage error, told by its error class, not its text.
  const notHttp = await cloudly(['login', '--url', 'ftp://127.0.0.1:1'], 'password\n');
  assert.equal(notHttp.code, 2, notHttp.stderr);
  assert.match(notHttp.stderr, /--url must be an http or https URL/);
  const notUrl = await cloudly(['login', '--url', 'nowhere'], 'password\n');
  assert.equal(notUrl.code, 2, notUrl.stderr);
  assert.deepEqual((await api('getClusters', {})).clusters, []);
});

test('an input refusal prints its tokens, then every problem as path: message, and exits 1', async () => {
  const refused = await cloudly(['clusters', 'create', '--name', 'x'.repeat(65)]);
  assert.equal(refused.code, 1);
  assert.equal(refused.stdout, '');
  assert.equal(refused.stderr, 'refused: invalid-request\n  field-too-long\n  request.name: must be a string of 1 to 64 characters\n');
  assert.deepEqual((await api('getClusters', {})).clusters, []);
});

test('an option value or a JSON body the contract would not take is a usage error (exit 2) saying what it takes; nothing is sent', async () => {
  const state = await cloudly(['operations', 'list', '--state', 'finished']);
  assert.equal(state.code, 2, state.stderr);
  assert.equal(state.stderr, `cloudly: --state must be one of ${operationStates.join(', ')}, not "finished"\n`);
  const capability = await cloudly(['bindings', 'upsert', '--service', 'service-1', '--capability', 'cache', '--expect', 'none']);
  assert.equal(capability.code, 2, capability.stderr);
  assert.equal(capability.stderr, `cloudly: --capability must be one of ${platformBindingCapabilities.join(', ')}, not "cache"\n`);
  const resourceType = await cloudly(['backups', 'restore', '--backup', 'backup-1', '--resource-type', 'disk']);
  assert.equal(resourceType.code, 2, resourceType.stderr);
  assert.match(resourceType.stderr, /^cloudly: --resource-type must be one of volume, database, bucket, not "disk"$/m);
  const adoption = await cloudly(['corestore', 'adopt', '--cluster', 'c1', '--node', 'n1', '--resource', 'service-1:cache', '--expect', 'a'.repeat(64)]);
  assert.equal(adoption.code, 2, adoption.stderr);
  assert.match(adoption.stderr, /--resource "service-1:cache": the capability must be one of database, objectstorage/);

  // A spec file is judged by the contract's own validator: every reason, in its order.
  const spec = { service: { name: '', organizationId: 'org1', runtime: { image: 'app:1' } } };
  const specPath = path.join(configDir, 'bad-spec.json');
  await fsp.writeFile(specPath, JSON.stringify(spec));
  const servicesBefore = (await api('getServices', {})).services;
  const badSpec = await cloudly(['services', 'create', '--file', specPath]);
  assert.equal(badSpec.code, 2, badSpec.stderr);
  const reasons = validateServiceWritableSpec(spec.service);
  assert.ok(reasons.length >= 3, 'the spec is wrong in several ways');
  assert.equal(badSpec.stderr, `cloudly: the spec in ${specPath} is not what the contract takes:\n${reasons.map((reasonArg) => `  ${reasonArg}\n`).join('')}`);
  assert.deepEqual((await api('getServices', {})).services, servicesBefore);

  const planPath = path.join(configDir, 'bad-plan.json');
  await fsp.writeFile(planPath, JSON.stringify({ plan: { revision: 0 } }));
  const badPlan = await cloudly(['network', 'set-plan', '--file', planPath]);
  assert.equal(badPlan.code, 2, badPlan.stderr);
  assert.match(badPlan.stderr, new RegExp(`^cloudly: the plan in ${planPath} is not what the contract takes:\n  `));
  assert.equal((await api('getRuntimeNetworkAddressPlan', {})).plan, null);

  const designationPath = path.join(configDir, 'bad-designation.json');
  await fsp.writeFile(designationPath, JSON.stringify({ designation: { clusterId: 'c1' } }));
  const badDesignation = await cloudly(['ingress', 'designate', '--file', designationPath]);
  assert.equal(badDesignation.code, 2, badDesignation.stderr);
  assert.match(badDesignation.stderr, /^cloudly: the designation in .* is not what the contract takes: it must hold exactly mutationId, clusterId/);
  await Promise.all([specPath, planPath, designationPath].map((fileArg) => fsp.rm(fileArg)));
});

test('clusters create and list: the JSON output is exactly the API answer', async () => {
  const created = json(await cloudly(['clusters', 'create', '--name', 'cli-alpha', '--output', 'json']));
  assert.match(created.relayToken, /^szrelay_/);
  assert.deepEqual(created.cluster, (await api('getClusterById', { clusterId: created.cluster.id })).cluster);
  const listed = json(await cloudly(['clusters', 'list', '-o', 'json']));
  assert.deepEqual(listed, await api('getClusters', {}));
  const table = await cli.run(['clusters', 'list'], '', { terminalColumns: 80 });
  assert.equal(table.code, 0);
  const lines = table.stdout.trimEnd().split('\n');
  assert.match(lines[0], /^ID\s+NAME\s+GEN\s+CREATED$/);
  assert.ok(lines[1].startsWith(created.cluster.id), 'the id column is not clipped');
  assert.ok(lines.every((lineArg) => lineArg.length <= 80), 'the table fits an 80-column terminal');
  const overview = json(await cloudly(['clusters', 'overview', '--cluster', created.cluster.id, '-o', 'json']));
  assert.deepEqual(overview, await api('getClusterOverview', { clusterId: created.cluster.id }));
  const yaml = await cloudly(['clusters', 'get', '--cluster', created.cluster.id, '-o', 'yaml']);
  assert.equal(yaml.code, 0);
  assert.match(yaml.stdout, new RegExp(`^cluster:\\n  id: ${created.cluster.id}\\n  name: cli-alpha\\n  generation: 1\\n`));
});

test('clusters create --dry-run prints what would be made, never a token or an id that will not exist; a name in use is refused like the real call', async () => {
  const dry = await cloudly(['clusters', 'create', '--name', 'cli-dry', '--dry-run']);
  assert.equal(dry.code, 0, dry.stderr);
  assert.match(dry.stderr, /dry run: every check passed; nothing was changed/);
  assert.doesNotMatch(dry.stdout, /szrelay_/, 'no relay token');
  assert.doesNotMatch(dry.stdout, /cluster-[0-9a-f]{8}-/, 'no cluster id');
  assert.match(dry.stdout, /^id\s+\(made by the real call\)$/m);
  assert.match(dry.stdout, /^name\s+cli-dry$/m);
  assert.match(dry.stdout, /relay token: made by the real call and shown once then \(a dry run makes none\)/);
  const dryJson = json(await cloudly(['clusters', 'create', '--name', 'cli-dry', '--dry-run', '-o', 'json']));
  assert.equal(dryJson.relayToken, undefined);
  assert.equal(dryJson.cluster.id, undefined);
  assert.deepEqual(dryJson.generatedOnCommit, ['cluster.id', 'relayToken']);
  assert.equal((await api('getClusters', {})).clusters.some((clusterArg: { name: string }) => clusterArg.name === 'cli-dry'), false);

  await t.createCluster('cli-staging');
  const taken = await cloudly(['clusters', 'create', '--name', 'cli-staging', '--dry-run']);
  assert.equal(taken.code, 1, taken.stderr);
  assert.match(taken.stderr, /^refused: conflict/m);
  assert.deepEqual(
    await refusalOf(() => api('createCluster', { name: 'cli-staging', dryRun: true })),
    await refusalOf(() => api('createCluster', { name: 'cli-staging' })),
  );

  const { cluster } = await t.createCluster('cli-dry-rotate');
  const rotate = await cloudly(['clusters', 'rotate-relay-token', '--cluster', cluster.id, '--expect', '1', '--dry-run']);
  assert.equal(rotate.code, 0, rotate.stderr);
  assert.doesNotMatch(rotate.stdout, /szrelay_/, 'no relay token');
  assert.match(rotate.stdout, /new relay token: made by the real call and shown once then, and the current one stops working \(a dry run makes none\)/);

  const node = await cloudly(['nodes', 'add', '--cluster', cluster.id, '--name', 'made-later', '--dry-run']);
  assert.equal(node.code, 0, node.stderr);
  assert.match(node.stdout, /^id\s+\(made by the real call\)$/m);
  assert.doesNotMatch(node.stdout, /node-[0-9a-f]{8}-/);
});

test('a dry run changes nothing, the real call does, and a stale expectation is refused with its reason (exit 1)', async () => {
  const { cluster } = await t.createCluster('cli-rotate');
  const dry = await cloudly(['clusters', 'rotate-relay-token', '--cluster', cluster.id, '--expect-current', '--dry-run', '-o', 'json']);
  const dryAnswer = json(dry);
  assert.equal(dryAnswer.dryRun, true);
  assert.match(dry.stderr, new RegExp(`--expect-current: read cluster ${cluster.id} at generation 1`));
  assert.match(dry.stderr, /dry run: every check passed; nothing was changed/);
  assert.equal((await api('getClusterById', { clusterId: cluster.id })).cluster.generation, 1);

  const real = json(await cloudly(['clusters', 'rotate-relay-token', '--cluster', cluster.id, '--expect', '1', '-o', 'json']));
  assert.equal(real.cluster.generation, 2);
  assert.equal(real.dryRun, undefined);

  const stale = await cloudly(['clusters', 'rotate-relay-token', '--cluster', cluster.id, '--expect', '1']);
  assert.equal(stale.code, 1);
  assert.equal(stale.stdout, '');
  const refusal = await refusalOf(() => api('rotateClusterRelayToken', { clusterId: cluster.id, expectedGeneration: 1 }));
  const lines = stale.stderr.trimEnd().split('\n');
  assert.match(lines[0], new RegExp(`^refused: ${refusal.code}`));
  assert.ok((refusal.reasons as string[]).length > 0);
  for (const reason of refusal.reasons as string[]) {
    assert.ok(lines.includes(`  ${reason}`), `reason printed on its own line: ${reason}`);
  }
  assert.equal((await api('getClusterById', { clusterId: cluster.id })).cluster.generation, 2);
});

test('services: create from flags, set a volume initialization with --expect-current, a value conflict exits 1', async () => {
  const { cluster } = await t.createCluster('cli-services');
  await t.addNodes(cluster.id, 'n1');
  const createArgs = [
    'services', 'create', '--name', 'app', '--organization', 'org1', '--cluster', cluster.id, '--image', 'app:1',
    '--run-as', '1000:1000', '--node', 'n1', '--volume', '/data',
  ];
  // A dry run shows the service it would create, without an id that would never exist.
  const dry = await cloudly([...createArgs, '--dry-run']);
  assert.equal(dry.code, 0, dry.stderr);
  assert.match(dry.stdout, /^id\s+\(made by the real call\)$/m);
  assert.match(dry.stdout, /^image\s+app:1$/m);
  assert.doesNotMatch(dry.stdout, /svc-[0-9a-f]{8}-/);
  const created = json(await cloudly([...createArgs, '-o', 'json']));
  assert.deepEqual(created.service, (await api('getServiceById', { serviceId: created.service.id })).service);
  assert.deepEqual(created.service.volumes.map((v: any) => [v.mountPath, v.readOnly, v.driver]), [['/data', false, 'local']]);

  const set = await cloudly(['services', 'set-volume-initialization', '--service', created.service.id, '--mount-path', '/data',
    '--empty', '--mode', '0750', '--expect-current', '-o', 'json']);
  const answer = json(set);
  assert.match(set.stderr, /--expect-current: read the initialization as none/);
  const stored = (await api('getServiceById', { serviceId: created.service.id })).service;
  assert.deepEqual(answer.service, stored);
  assert.deepEqual(stored.volumes[0].initialization, { kind: 'empty', ownership: { kind: 'run-as', mode: 0o750 } });

  const conflict = await cloudly(['services', 'set-volume-initialization', '--service', created.service.id, '--mount-path', '/data',
    '--import-docker-volume', 'app_data', '--expect', 'none']);
  assert.equal(conflict.code, 1);
  assert.match(conflict.stderr, /^refused: conflict\n {2}\S/);
  assert.deepEqual((await api('getServiceById', { serviceId: created.service.id })).service.volumes[0].initialization,
    { kind: 'empty', ownership: { kind: 'run-as', mode: 0o750 } });
});

test('services update --dry-run shows what would change, field by field (on a terminal too); the real update then changes exactly that', async () => {
  const { cluster } = await t.createCluster('cli-diff');
  await t.addNodes(cluster.id, 'n1', 'n2');
  const created = json(await cloudly([
    'services', 'create', '--name', 'diffed', '--organization', 'org1', '--cluster', cluster.id, '--image', 'registry.example.com/app:1',
    '--node', 'n1', '-o', 'json',
  ])).service;
  const update = ['services', 'update', '--service', created.id, '--image', 'registry.example.com/app:2', '--replicas', '2', '--expect-current'];
  const dry = await cli.run([...update, '--dry-run'], '', { terminalColumns: 100 });
  assert.equal(dry.code, 0, dry.stderr);
  const lines = dry.stdout.trimEnd().split('\n');
  assert.equal(lines[0], `service ${created.id}: generation 1 → 2`);
  assert.match(lines[1], /^FIELD\s+CHANGE$/);
  assert.deepEqual(lines.slice(2).map((lineArg) => lineArg.split(/\s{2,}/)), [
    ['specRevision', '1 → 2'],
    ['runtime.image', 'registry.example.com/app:1 → registry.example.com/app:2'],
    ['runtime.replicas', '1 → 2'],
  ]);
  assert.equal((await api('getServiceById', { serviceId: created.id })).service.runtime.image, 'registry.example.com/app:1', 'a dry run changes nothing');
  // A placement is an array: compared whole.
  const moved = await cloudly(['services', 'update', '--service', created.id, '--node', 'n2', '--expect', '1', '--dry-run']);
  assert.match(moved.stdout, /^runtime\.placement\.nodeIds\s+\["n1"\] → \["n2"\]$/m);
  // Nothing to change says so.
  const same = await cloudly(['services', 'update', '--service', created.id, '--image', 'registry.example.com/app:1', '--expect', '1', '--dry-run']);
  assert.match(same.stdout, /^\(no field would change\)$/m);
  // -o json stays exactly the API's answer.
  assert.equal(json(await cloudly([...update, '--dry-run', '-o', 'json'])).service.runtime.image, 'registry.example.com/app:2');
  const real = json(await cloudly([...update, '-o', 'json'])).service;
  assert.equal(real.runtime.image, 'registry.example.com/app:2');
  assert.equal(real.runtime.replicas, 2);
});

test('services create states how each volume starts (--volume-init); a volume without one is warned about in the dry run, with why', async () => {
  const { cluster } = await t.createCluster('cli-volume-init');
  await t.addNodes(cluster.id, 'n1');
  const base = ['services', 'create', '--organization', 'org1', '--cluster', cluster.id, '--image', 'app:1', '--node', 'n1', '--run-as', '1000:1000', '--volume', '/data'];
  const dry = await cloudly([...base, '--name', 'no-init', '--dry-run', '-o', 'json']);
  assert.equal(dry.code, 0, dry.stderr);
  assert.match(dry.stderr, /^warning: volume \/data has no initialization: the service would be refused volume-initialization-unknown$/m);
  assert.match(dry.stderr, /--volume-init \/data=empty:0750/);

  const created = json(await cloudly([...base, '--name', 'with-init', '--volume-init', '/data=empty:0750', '-o', 'json']));
  assert.doesNotMatch((await cloudly([...base, '--name', 'with-init-dry', '--volume-init', '/data=empty:0750', '--dry-run'])).stderr, /warning:/);
  const stored = await api('getServiceById', { serviceId: created.service.id });
  assert.deepEqual(stored.service.volumes[0].initialization, { kind: 'empty', ownership: { kind: 'run-as', mode: 0o750 } });
  const { status } = await api('getServiceRuntimeStatus', { serviceId: created.service.id });
  assert.notEqual(status.reason, 'volume-initialization-unknown', 'the service is not refused for its volume');

  const bad = await cloudly([...base, '--name', 'bad-init', '--volume-init', '/elsewhere=empty:0750']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /names no --volume of the service/);
});

test('services: an initialization the service cannot use is warned about before the call, with what would work', async () => {
  const { cluster } = await t.createCluster('cli-init-warning');
  await t.addNodes(cluster.id, 'n1');
  const created = json(await cloudly([
    'services', 'create', '--name', 'no-run-as', '--organization', 'org1', '--cluster', cluster.id, '--image', 'app:1',
    '--node', 'n1', '--volume', '/data', '-o', 'json',
  ]));
  assert.equal(created.service.runtime.profile.runAs, null);
  const args = ['services', 'set-volume-initialization', '--service', created.service.id, '--mount-path', '/data', '--expect', 'none'];

  const fromRunAs = await cloudly([...args, '--empty', '--mode', '0750', '--dry-run', '-o', 'json']);
  assert.equal(fromRunAs.code, 0, fromRunAs.stderr);
  const lines = fromRunAs.stderr.split('\n');
  const at = lines.findIndex((lineArg) => lineArg.startsWith(`warning: service ${created.service.id} cannot use this initialization`));
  assert.ok(at >= 0, fromRunAs.stderr);
  assert.match(lines[at], /run-as, and the service has none \(the runtime would refuse it: volume-ownership-unknown\)$/);
  assert.match(lines[at + 1], /^ {2}instead: give an explicit owner \(uid and gid\), or give the service a run-as .*--uid <uid> --gid <gid>\)$/);
  assert.ok(at < lines.findIndex((lineArg) => lineArg.startsWith('dry run:')), 'the warning comes before the answer');

  const explicit = await cloudly([...args, '--empty', '--mode', '0750', '--uid', '1000', '--gid', '1000', '--dry-run', '-o', 'json']);
  assert.equal(explicit.code, 0, explicit.stderr);
  assert.doesNotMatch(explicit.stderr, /warning:/);
  const cleared = await cloudly([...args, '--clear', '--dry-run', '-o', 'json']);
  assert.match(cleared.stderr, /the runtime would refuse it: volume-initialization-unknown/);
});

test('ingress designate: --expect-current reads the facts first, a dry run stores nothing, then the real designation', async () => {
  const ingress = await prepareIngressCluster(t, 'cli-ingress');
  const args = ['ingress', 'designate', '--cluster', ingress.clusterId, '--service', ingress.service.id, '--expect-current', '-o', 'json'];
  const dry = await cloudly([...args, '--dry-run']);
  const dryAnswer = json(dry);
  assert.equal(dryAnswer.dryRun, true);
  assert.match(dry.stderr, /--expect-current: runtime .*service spec revision 1, designation none/);
  assert.deepEqual(await api('getClusterIngressDesignation', { clusterId: ingress.clusterId }), { designation: null });

  const real = json(await cloudly(args));
  assert.equal(real.replayed, false);
  const shown = json(await cloudly(['ingress', 'show', '--cluster', ingress.clusterId, '-o', 'json']));
  assert.deepEqual(shown, await api('getClusterIngressDesignation', { clusterId: ingress.clusterId }));
  assert.deepEqual(shown.designation, real.designation);
  // On an 80-column terminal the designation is shown whole: nested members that do not fit on
  // their row follow as YAML, times are formatted, nothing is clipped.
  const table = await cli.run(['ingress', 'show', '--cluster', ingress.clusterId], '', { terminalColumns: 80 });
  assert.equal(table.code, 0, table.stderr);
  assert.doesNotMatch(table.stdout, /…/, table.stdout);
  assert.doesNotMatch(table.stdout, /\b1\d{12}\b/, `no epoch milliseconds in the table: ${table.stdout}`);
  for (const [key, value] of Object.entries(real.designation as Record<string, unknown>)) {
    if (typeof value === 'string') {
      assert.ok(table.stdout.includes(value), `${key} shown whole: ${table.stdout}`);
    }
  }
});

test('names wherever an id is taken: clusters, services within a cluster, nodes within a cluster, users; an id wins; ambiguity exits 2 with the candidates; unknown exits 1', async () => {
  const prod = (await t.createCluster('names-prod')).cluster;
  const staging = (await t.createCluster('names-staging')).cluster;
  await api('addClusterNode', { clusterId: prod.id, name: 'alpha', nodeId: 'edge-1' });
  await api('addClusterNode', { clusterId: prod.id, name: 'edge-1', nodeId: 'edge-2' });
  await api('addClusterNode', { clusterId: prod.id, name: 'beta', nodeId: 'edge-3' });
  await api('addClusterNode', { clusterId: prod.id, name: 'beta', nodeId: 'edge-4' });
  await t.addNodes(staging.id, 'edge-9');
  const serviceOn = async (clusterIdArg: string, nodeIdArg: string, nameArg: string) => (await api('createService', {
    service: { name: nameArg, organizationId: 'org1', clusterId: clusterIdArg, runtime: { image: 'app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [nodeIdArg] } }, volumes: [] },
  })).service;
  const prodApp = await serviceOn(prod.id, 'edge-1', 'names-app');
  const stagingApp = await serviceOn(staging.id, 'edge-9', 'names-app');
  const prodSolo = await serviceOn(prod.id, 'edge-1', 'names-solo');

  // Clusters by name, in every command that takes one.
  assert.equal(json(await cloudly(['clusters', 'get', '--cluster', 'names-prod', '-o', 'json'])).cluster.id, prod.id);
  assert.deepEqual(json(await cloudly(['services', 'list', '--cluster', 'names-prod', '-o', 'json'])).services.map((s: any) => s.id).sort(),
    [prodApp.id, prodSolo.id].sort());
  assert.equal(json(await cloudly(['clusters', 'get', '--cluster', prod.id, '-o', 'json'])).cluster.id, prod.id, 'an id still works');

  // A service name unique everywhere, and one unique only within a cluster.
  assert.equal(json(await cloudly(['services', 'get', '--service', 'names-solo', '-o', 'json'])).service.id, prodSolo.id);
  assert.equal((await cloudly(['services', 'status', '--service', 'names-solo'])).code, 0);
  const ambiguous = await cloudly(['services', 'status', '--service', 'names-app']);
  assert.equal(ambiguous.code, 2, ambiguous.stderr);
  assert.match(ambiguous.stderr, /--service names-app: 2 services are named names-app; pass one of their ids:/);
  assert.ok(ambiguous.stderr.includes(`${prodApp.id}  (cluster names-prod, organization org1)`), ambiguous.stderr);
  assert.ok(ambiguous.stderr.includes(`${stagingApp.id}  (cluster names-staging, organization org1)`), ambiguous.stderr);
  assert.equal(ambiguous.stdout, '');
  assert.equal(json(await cloudly(['services', 'get', '--cluster', 'names-staging', '--service', 'names-app', '-o', 'json'])).service.id, stagingApp.id);

  // Nodes within the cluster: an id that exists wins over a node named like it; a shared name is ambiguous.
  const create = ['services', 'create', '--name', 'names-placed', '--organization', 'org1', '--cluster', 'names-prod', '--image', 'app:1', '--dry-run', '-o', 'json'];
  assert.deepEqual(json(await cloudly([...create, '--node', 'alpha'])).service.runtime.placement.nodeIds, ['edge-1']);
  assert.deepEqual(json(await cloudly([...create, '--node', 'edge-1'])).service.runtime.placement.nodeIds, ['edge-1'], 'the node with id edge-1, not the one named so');
  assert.deepEqual(json(await cloudly([...create, '--node', 'alpha', '--node', 'edge-3'])).service.runtime.placement.nodeIds, ['edge-1', 'edge-3']);
  const twoBetas = await cloudly([...create, '--node', 'beta']);
  assert.equal(twoBetas.code, 2);
  assert.match(twoBetas.stderr, /--node beta: 2 nodes in cluster names-prod are named beta; pass one of their ids:\n {2}edge-3\n {2}edge-4/);

  // Users by username.
  const viewer = (await api('createUser', { username: 'names-viewer', password: 'names-viewer-password-0', role: 'user' })).user;
  assert.equal(json(await cloudly(['users', 'disable', '--user', 'names-viewer', '--expect-current', '--dry-run', '-o', 'json'])).user.userId, viewer.userId);

  // An unknown name in a list's filter says so and exits as a refusal (1), where it used to print `(none)`.
  for (const [args, message] of [
    [['services', 'list', '--cluster', 'names-nowhere'], '--cluster names-nowhere: no cluster has this id or name'],
    [['backups', 'list', '--service', 'names-nowhere'], '--service names-nowhere: no service has this id or name'],
    [['operations', 'list', '--cluster', 'names-prod', '--service', 'names-nowhere'], '--service names-nowhere: no service in cluster names-prod has this id or name'],
  ] as const) {
    const unknown = await cloudly([...args]);
    assert.equal(unknown.code, 1, unknown.stderr);
    assert.equal(unknown.stderr.trim(), `cloudly: ${message}`);
    assert.equal(unknown.stdout, '');
  }
  // Anywhere else it is sent as given and refused by the server `not-found`, as an unknown id is (exit 1).
  for (const args of [
    ['clusters', 'get', '--cluster', 'names-nowhere'],
    ['services', 'get', '--cluster', 'names-staging', '--service', 'names-solo'],
    ['users', 'delete', '--user', 'names-nobody', '--expect', '1'],
  ]) {
    const unknown = await cloudly(args);
    assert.equal(unknown.code, 1, unknown.stderr);
    assert.match(unknown.stderr, /^refused: not-found$/m);
  }
  assert.equal((await api('getClusterNodes', { clusterId: prod.id })).nodes.length, 4);
});

test('services list shows the cluster by name and a STATUS column with the stored verdict; -o json stays the API answer', async () => {
  const table = await cloudly(['services', 'list', '--cluster', 'names-prod']);
  assert.equal(table.code, 0, table.stderr);
  const [header, ...rows] = table.stdout.trimEnd().split('\n');
  assert.match(header, /^ID\s+NAME\s+CLUSTER\s+STATUS\s+IMAGE/);
  const { services } = await api('getServices', { clusterId: (await api('getClusters', {})).clusters.find((c: any) => c.name === 'names-prod').id });
  assert.equal(rows.length, services.length);
  for (const service of services) {
    const { status, unknown } = await api('getServiceRuntimeStatus', { serviceId: service.id });
    const verdict = unknown ? `unknown ${unknown.reason}` : status ? [status.state, status.reason].filter(Boolean).join(' ') : '-';
    const row = rows.find((rowArg) => rowArg.startsWith(service.id));
    assert.ok(row, `a row for ${service.id}`);
    assert.match(row!, new RegExp(`^${service.id}\\s+${service.name}\\s+names-prod\\s+${verdict}\\s+app:1\\s`));
  }
  const wide = await cloudly(['services', 'list', '--cluster', 'names-prod', '-o', 'wide']);
  assert.match(wide.stdout.split('\n')[0], /CLUSTER ID/);
  assert.deepEqual(json(await cloudly(['services', 'list', '--cluster', 'names-prod', '-o', 'json'])), await api('getServices', { clusterId: services[0].clusterId }));
});

test('watch prints each change as one JSON line and stops on Ctrl-C with exit 0', async () => {
  const running = cli.start(['watch', '--kind', 'CloudlyCluster', '-o', 'json']);
  running.child.stdin.end();
  try {
    await waitFor(() => /watching from revision \d+/.test(running.stderr), `watch started (${running.stderr})`, 30_000);
    await t.createCluster('cli-watched');
    await waitFor(() => running.stdout.includes('\n'), 'a change printed', 10_000);
  } finally {
    running.child.kill('SIGINT');
  }
  const { code, stdout, stderr } = await running.closed;
  assert.equal(code, 0, stderr);
  const events = stdout.trimEnd().split('\n').map((lineArg) => JSON.parse(lineArg));
  assert.equal(events[0].kind, 'CloudlyCluster');
  assert.equal(events[0].change, 'created');
  assert.equal(events[0].document.name, 'cli-watched');
  assert.equal(events[0].actor.kind, 'admin');
});

test('watch lines name the document and who changed it', async () => {
  const running = cli.start(['watch', '--kind', 'CloudlyCluster']);
  running.child.stdin.end();
  let created: { id: string } | undefined;
  try {
    await waitFor(() => /watching from revision \d+/.test(running.stderr), `watch started (${running.stderr})`, 30_000);
    created = (await t.createCluster('cli-watched-table')).cluster;
    await waitFor(() => running.stdout.includes('\n'), 'a change printed', 10_000);
  } finally {
    running.child.kill('SIGINT');
  }
  const { code, stdout, stderr } = await running.closed;
  assert.equal(code, 0, stderr);
  assert.match(stdout, new RegExp(`^\\d+  \\S+ \\S+  created  CloudlyCluster/${created!.id} \\(cli-watched-table\\)  gen 1  by admin$`, 'm'));
});

test('completion scripts for bash, zsh and fish, and the names they complete (run in the shells by test/cli.completion.test.ts)', async () => {
  const bash = await cloudly(['completion', 'bash']);
  assert.equal(bash.code, 0);
  assert.match(bash.stdout, /complete -o default -F _cloudly cloudly/);
  assert.match(bash.stdout, /"services set-volume-initialization"\) _cl_words="[^"]*--mount-path/);
  const zsh = await cloudly(['completion', 'zsh']);
  assert.equal(zsh.code, 0);
  assert.match(zsh.stdout, /^#compdef cloudly/);
  const fish = await cloudly(['completion', 'fish']);
  assert.equal(fish.code, 0);
  assert.match(fish.stdout, /^complete -c cloudly -f -a '\(__cloudly_complete\)'$/m);
  assert.doesNotMatch(bash.stdout, /_cl_words="[^"]*__complete/, 'the hidden command is not offered');
  // The names the scripts complete, read through the current context.
  await t.createCluster('cli-completed');
  const names = await cloudly(['__complete', 'cluster']);
  assert.equal(names.code, 0);
  assert.deepEqual(names.stdout.split('\n').filter(Boolean), [...new Set((await api('getClusters', {})).clusters.map((c: any) => c.name))].sort());
  assert.ok(names.stdout.includes('cli-completed\n'));
});

test('a stopped server is unavailable: exit 3', async () => {
  await t.stop();
  const run = await cloudly(['clusters', 'list']);
  assert.equal(run.code, 3);
  assert.match(run.stderr, /^cloudly: unavailable: cannot reach http:\/\/127\.0\.0\.1:\d+/);
});
