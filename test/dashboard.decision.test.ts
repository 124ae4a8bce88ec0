import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  countNodeReports,
  decideBackupNodeChoices,
  describeRelayKind,
  describeRunAs,
  formatDuration,
  parseRoute,
  serviceFormOfSpec,
  serviceSpecOfForm,
  sortBackupsByTime,
  sortOperations,
  writableSpecOf,
  type IServiceFormFields,
  volumeInitializationsOfForm,
  volumeRefusalsOf,
  describeUnresolvedRoute,
  describeAssignment,
} from '../web/src/decide.js';
import { validateServiceWritableSpec, type IService } from '../ts/interfaces/data/service.js';
import { clusterUnresolvedRouteCauses } from '../ts/interfaces/data/desiredstate.js';
import { validateClusterName } from '../ts/interfaces/data/cluster.js';
import { validateNewAccount } from '../ts/interfaces/requests/account.js';
import type { IServiceBackupRecord } from '../ts/interfaces/requests/backup.js';
import type { IOperation } from '../ts/interfaces/requests/operation.js';

/** The dashboard's pure decisions (web/src/decide.ts) and the contract rules its forms share. */

test('routes: known pages by name, an empty hash is the fleet, anything else is not found', () => {
  assert.deepEqual(parseRoute(''), { page: 'fleet' });
  assert.deepEqual(parseRoute('#/'), { page: 'fleet' });
  assert.deepEqual(parseRoute('#/fleet'), { page: 'fleet' });
  assert.deepEqual(parseRoute('#/cluster/c%2D1'), { page: 'cluster', id: 'c-1' });
  assert.deepEqual(parseRoute('#/service/s-1'), { page: 'service', id: 's-1' });
  assert.deepEqual(parseRoute('#/operations'), { page: 'operations' });
  assert.deepEqual(parseRoute('#/users'), { page: 'users' });
  assert.deepEqual(parseRoute('#/network'), { page: 'network' });
  assert.deepEqual(parseRoute('#/nope'), { page: 'not-found', path: 'nope' });
  assert.deepEqual(parseRoute('#/cluster'), { page: 'not-found', path: 'cluster' });
  assert.deepEqual(parseRoute('#/audit/extra'), { page: 'not-found', path: 'audit/extra' });
  assert.deepEqual(parseRoute('#/cluster/%E0%A4%A'), { page: 'not-found', path: 'cluster/%E0%A4%A' });
});

test("run-as is said with the contract's user and group", () => {
  assert.equal(describeRunAs({ user: 1000, group: 1001 }), '1000:1001');
  assert.equal(describeRunAs(null), 'image default');
});

test('backups are listed newest first whatever their ids', () => {
  const backup = (backupIdArg: string, createdAtArg: number) => ({ backupId: backupIdArg, createdAt: createdAtArg }) as IServiceBackupRecord;
  assert.deepEqual(sortBackupsByTime([backup('a', 1), backup('c', 3), backup('b', 2), backup('d', 3)]).map((entry) => entry.backupId), ['c', 'd', 'b', 'a']);
});

test('the backup node picker offers nodes running the service first, then its placement, then the rest', () => {
  const observed = [{ nodeId: 'n-3', specRevision: 1, replicas: 1, state: 'running', reportedAt: 1 }, { nodeId: 'n-4', specRevision: 1, replicas: 0, state: 'stopped', reportedAt: 1 }] as never[];
  assert.deepEqual(decideBackupNodeChoices(['n-1', 'n-2', 'n-3', 'n-4'], ['n-2'], observed), { nodeIds: ['n-3', 'n-2', 'n-1', 'n-4'], defaultNodeId: 'n-3' });
  assert.deepEqual(decideBackupNodeChoices(['n-1', 'n-2'], ['n-2'], []), { nodeIds: ['n-2', 'n-1'], defaultNodeId: 'n-2' });
  assert.deepEqual(decideBackupNodeChoices([], [], []), { nodeIds: [], defaultNodeId: null });
});

const fields = (overridesArg: Partial<IServiceFormFields> = {}): IServiceFormFields => ({
  name: 'web', organizationId: 'org-1', clusterId: 'cluster-1', image: 'registry.example.com/app:1', replicas: '2', runAs: '1000:1000',
  placementNodeIds: ['node-1'], ports: 'http 8080/tcp\nmetrics 9090', routes: 'web.example.com http', volumes: '/data\n/config:ro', initializations: '', ...overridesArg,
});

test('the service form reads into a spec the contract accepts, and back into the same fields', () => {
  const { spec, reasons } = serviceSpecOfForm(fields());
  assert.deepEqual(reasons, []);
  assert.deepEqual(validateServiceWritableSpec(spec), []);
  assert.deepEqual(spec.runtime.profile.runAs, { user: 1000, group: 1000 });
  assert.deepEqual(spec.ports, [{ name: 'http', port: 8080, protocol: 'tcp' }, { name: 'metrics', port: 9090, protocol: 'tcp' }]);
  assert.deepEqual(spec.volumes, [{ mountPath: '/data', readOnly: false, driver: 'local' }, { mountPath: '/config', readOnly: true, driver: 'local' }]);
  assert.deepEqual(serviceFormOfSpec(spec), { ...fields(), ports: 'http 8080/tcp\nmetrics 9090/tcp' });
  const empty = serviceSpecOfForm(fields({ runAs: '', ports: '', routes: '' })).spec;
  assert.equal(empty.runtime.profile.runAs, null);
  assert.equal('ports' in empty, false, 'no ports: the member is left out, as the CLI does');
});

test('the service form names every line it cannot read, by path; the contract names the rest', () => {
  const { spec, reasons } = serviceSpecOfForm(fields({ runAs: 'root', ports: 'http', routes: 'only-a-hostname', replicas: 'two' }));
  assert.deepEqual(reasons, [
    'service.runtime.profile.runAs must be written user:group (two numbers), or left empty',
    'service.ports[0] must be written "name port/protocol", e.g. "http 8080/tcp"',
    'service.routes[0] must be written "hostname port-name", e.g. "app.example.com http"',
  ]);
  const contract = validateServiceWritableSpec(spec);
  assert.ok(contract.some((reason) => reason.startsWith('service.runtime.replicas')), contract.join('; '));
});

test('an edited service goes back without the members the server owns', () => {
  const stored = {
    ...serviceSpecOfForm(fields()).spec,
    volumes: [{ id: 'vol-1', mountPath: '/data', readOnly: false, driver: 'local', initialization: { kind: 'import', source: { kind: 'docker-volume', volumeName: 'x' } } }],
  } as unknown as IService;
  assert.deepEqual(writableSpecOf(stored).volumes, [{ mountPath: '/data', readOnly: false, driver: 'local' }]);
  assert.deepEqual(validateServiceWritableSpec(writableSpecOf(stored)), []);
});

test('operations: running first (longest waiting first), then the ended ones newest first', () => {
  const operation = (idArg: string, stateArg: IOperation['state'], startedArg: number, endedArg?: number) =>
    ({ operationId: idArg, state: stateArg, startedAt: startedArg, endedAt: endedArg }) as IOperation;
  const sorted = sortOperations([operation('done-old', 'completed', 1, 2), operation('run-new', 'running', 9), operation('failed-new', 'failed', 3, 8), operation('run-old', 'running', 4)]);
  assert.deepEqual(sorted.map((entry) => entry.operationId), ['run-old', 'run-new', 'failed-new', 'done-old']);
});

test('durations read in the unit that fits', () => {
  assert.equal(formatDuration(850), '850 ms');
  assert.equal(formatDuration(7_240), '7.2 s');
  assert.equal(formatDuration(184_000), '3 min 04 s');
  assert.equal(formatDuration(-1), '—');
});

test('the cluster-name and account rules the forms share with Cloudly', () => {
  assert.deepEqual(validateClusterName('alpha 1'), []);
  assert.deepEqual(validateClusterName('Bad Name!'), ['name has characters that are not allowed']);
  assert.deepEqual(validateClusterName(''), ['name must be a string of 1 to 64 characters']);
  assert.deepEqual(validateNewAccount({ username: 'reader', password: 'long-enough-password', role: 'user' }), []);
  assert.deepEqual(validateNewAccount({ username: ' x', password: 'short', role: 'root' }), [
    'username has characters that are not allowed',
    'password must be a string of 12 to 1024 characters',
    'role must be admin or user',
  ]);
});

test('a relay is told apart from the simulator by its registered version', () => {
  assert.equal(describeRelayKind('cloudly-sim/1'), 'simulated');
  assert.equal(describeRelayKind('1.0.0'), 'cluster');
  assert.equal(describeRelayKind(null), 'unknown');
  // One source of truth with the node rows' "Last report": an administrator's node the relay reported counts as reported.
  assert.deepEqual(countNodeReports([{ reportedAt: 5 }, {}, { reportedAt: 7 }]), { reported: 2, unreported: 1 });
  assert.deepEqual(countNodeReports([{ source: 'admin', reportedAt: 5 } as { reportedAt?: number }]), { reported: 1, unreported: 0 });
});

test('the form\'s volume initialization lines: run-as, explicit and import, each judged by the contract', () => {
  const { initializations, reasons } = volumeInitializationsOfForm('/data empty run-as 0750\n/cache empty 1000:1001 700\n/import import legacy_vol', ['/data', '/cache', '/import']);
  assert.deepEqual(reasons, []);
  assert.deepEqual(initializations, [
    { mountPath: '/data', initialization: { kind: 'empty', ownership: { kind: 'run-as', mode: 0o750 } } },
    { mountPath: '/cache', initialization: { kind: 'empty', ownership: { kind: 'explicit', uid: 1000, gid: 1001, mode: 0o700 } } },
    { mountPath: '/import', initialization: { kind: 'import', source: { kind: 'docker-volume', volumeName: 'legacy_vol' } } },
  ]);
  assert.deepEqual(volumeInitializationsOfForm('', ['/data']), { initializations: [], reasons: [] });
});

test('a volume initialization line that is not one, names no volume, repeats one, or that the contract refuses is named', () => {
  const { initializations, reasons } = volumeInitializationsOfForm('/data nowhere\n/other empty run-as 0750\n/data empty run-as 0750\n/data import x\n/cache empty 1:1 9999', ['/data', '/cache']);
  assert.deepEqual(initializations.map((planned) => planned.mountPath), ['/data']);
  assert.match(reasons[0] ?? '', /^initializations\[0\] must be written/);
  assert.equal(reasons[1], 'initializations[1] names /other, which is not one of the volumes');
  assert.equal(reasons[2], 'initializations[3] names /data a second time');
  assert.match(reasons[3] ?? '', /^initializations\[4\]\.ownership\.mode/);
  assert.equal(reasons.length, 4);
});

test('the volume refusals a service would get: none stated, owner from a missing run-as; a planned initialization counts', () => {
  const runtime = (runAsArg: { user: number; group: number } | null) => ({ image: 'x:1', replicas: 1, profile: { runAs: runAsArg }, placement: { nodeIds: [] } }) as never;
  const volumes = [{ mountPath: '/data' }, { mountPath: '/logs', initialization: { kind: 'empty' as const, ownership: { kind: 'run-as' as const, mode: 0o750 } } }];
  assert.deepEqual(volumeRefusalsOf({ runtime: runtime(null), volumes }).map((refusal) => [refusal.mountPath, refusal.reason]),
    [['/data', 'volume-initialization-unknown'], ['/logs', 'volume-ownership-unknown']]);
  assert.deepEqual(volumeRefusalsOf({ runtime: runtime({ user: 1, group: 1 }), volumes }).map((refusal) => refusal.reason), ['volume-initialization-unknown']);
  const planned = [{ mountPath: '/data', initialization: { kind: 'import' as const, source: { kind: 'docker-volume' as const, volumeName: 'v' } } }];
  assert.deepEqual(volumeRefusalsOf({ runtime: runtime({ user: 1, group: 1 }), volumes }, planned), []);
});

test('a route that is not ready is worded for every cause Cloudly names, with the names given and a fix', () => {
  for (const cause of clusterUnresolvedRouteCauses) {
    const words = describeUnresolvedRoute({ cause, port: 8080 }, { service: 'shop', ingress: 'edge' });
    assert.ok(words.problem.length > 0 && words.fix.length > 0, cause);
    assert.doesNotMatch(`${words.problem} ${words.fix}`, /svc-|undefined|ingress service the ingress/, cause);
  }
  assert.match(describeUnresolvedRoute({ cause: 'ingress-grant-missing', port: 8080 }, { service: 'shop', ingress: 'edge' }).problem, /edge reach shop on port 8080/);
  assert.match(describeUnresolvedRoute({ cause: 'service-without-lease', port: 8080 }, { service: 'shop', ingress: null }).fix, /address plan/);
  assert.match(describeUnresolvedRoute({ cause: 'ingress-without-lease', port: 8080 }, { service: 'shop', ingress: null }).problem, /^The ingress service has no workload address/);
  assert.match(describeUnresolvedRoute({ cause: 'ingress-without-lease', port: 8080 }, { service: 'shop', ingress: 'edge' }).problem, /^The ingress service edge has no workload address/);
});

test('a replica slot is described by its condition; a stale slot is grey and says as of when, never green', () => {
  const time = (msArg: number | null | undefined) => `t${msArg}`;
  const observed = { specRevision: 2, replicas: 1, state: 'ready' as const, reportedAt: 7 };
  const base = { nodeId: 'n1', observed, stale: null, specRevision: 2 };
  const rows: Array<[Parameters<typeof describeAssignment>[0], { tone: string; sentence: string }]> = [
    [{ ...base, condition: 'running' }, { tone: 'converged', sentence: 'On n1: ready at spec revision 2, reported t7.' }],
    [{ ...base, condition: 'stale', stale: { state: 'unknown', reason: 'relay-disconnected', since: 9 } },
      { tone: 'unknown', sentence: 'Stale: the cluster is not current (relay-disconnected since t9). Last known on n1: ready at spec revision 2, reported t7.' }],
    [{ ...base, observed: null, condition: 'stale', stale: { state: 'unknown', reason: 'observed-state-stale', since: 9 } },
      { tone: 'unknown', sentence: 'Stale: the cluster is not current (observed-state-stale since t9). Nothing was reported from n1.' }],
    [{ ...base, observed: null, condition: 'awaiting-report' }, { tone: 'waiting', sentence: 'Assigned to n1; no report of n1 covers this slot yet.' }],
    [{ ...base, specRevision: 3, condition: 'outdated' },
      { tone: 'converging', sentence: 'n1 still runs an older revision (ready at spec revision 2, reported t7); the slot wants revision 3.' }],
    [{ ...base, nodeId: null, observed: null, condition: 'unassigned' }, { tone: 'unjudged', sentence: 'No node of the cluster is eligible for this slot (see the placement).' }],
    [{ ...base, observed: { ...observed, state: 'failed' }, condition: 'failed' }, { tone: 'refused', sentence: 'On n1: failed at spec revision 2, reported t7.' }],
  ];
  for (const [view, expected] of rows) {
    assert.deepEqual(describeAssignment(view, time), expected, view.condition);
  }
});
