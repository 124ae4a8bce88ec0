import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serviceEnvironmentBytes, judgeServiceRuntime, type IServiceRuntimeFacts } from '../ts/manager.service/runtimestatus.js';
import { decideServiceShapeMigration } from '../ts/manager.service/migrate.js';
import type { IService } from '../ts/interfaces/data/service.js';
import type { IClusterRelayCapabilities } from '../ts/interfaces/data/clusterrelay.js';
import { data } from '../ts/interfaces/index.js';
import type { IServiceDocument } from '../ts/manager.service/service.manager.js';

/**
 * The runtime verdict's refusals and waits as pure judgements: one base of facts that judges
 * `converging`, and for each reason the one fact that breaks it. Order follows the contract: a
 * refusal before a wait, and among refusals (and among waits) the contract's order.
 */

const everything: IClusterRelayCapabilities = { platforms: ['database', 'objectstorage'], secrets: true, volumes: true, portProtocols: ['tcp', 'udp'] };

const service = (overridesArg: Partial<IService> = {}): IService => ({
  id: 'svc-1', name: 'web', organizationId: 'org-1', clusterId: 'c-1', generation: 3, specRevision: 2,
  runtime: { image: 'registry.example/web:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['n-1'] } },
  ports: [{ name: 'http', port: 8080, protocol: 'tcp' }, { name: 'dns', port: 53, protocol: 'udp' }],
  routes: [{ hostname: 'web.example.com', targetPort: 'http' }],
  volumes: [],
  environment: {},
  secrets: {},
  readiness: { kind: 'http', port: 'http', path: '/healthz' },
  networkPolicy: null,
  createdAt: 1, updatedAt: 1,
  ...overridesArg,
});

const base = (overridesArg: Partial<IServiceRuntimeFacts> = {}): IServiceRuntimeFacts => ({
  service: service(),
  organizationRegistered: true,
  claimMarkers: [],
  clusterExists: true,
  clusterRuntimePhase: 'pallet',
  clusterNodeIds: new Set(['n-1']),
  workloadLeases: { shortfall: 0, poolMissing: false },
  claims: [],
  bindings: { bindingsPending: false, legacyAdoptionPending: false },
  relayCapabilities: everything,
  bindingCapabilities: ['database'],
  routesTakenByOthers: [],
  nodeNetwork: { heldLeaseIds: new Map([['n-1', ['wl-1']]]), confirmedLeaseIds: new Set(['wl-1']) },
  observed: [{ nodeId: 'n-1', specRevision: 2, replicas: 1, state: 'ready', reportedAt: 10 }],
  ...overridesArg,
});

const meshPolicy: data.IServiceNetworkPolicy = { egress: { kind: 'mesh' } };
const destinationsPolicy: data.IServiceNetworkPolicy = { egress: { kind: 'destinations', destinations: [{ host: 'api.example.com', port: 443, protocol: 'tcp' }] } };

const volume = { id: 'vol-1', mountPath: '/data', readOnly: false, driver: 'local', initialization: { kind: 'empty' as const, ownership: { kind: 'explicit' as const, uid: 1, gid: 1, mode: 0o750 } } };

test('the base facts judge converging: nothing is refused or waited for', () => {
  assert.deepEqual(judgeServiceRuntime(base()), { state: 'converging', reason: null });
});

const refusals: Array<[string, Partial<IServiceRuntimeFacts>]> = [
  ['organization-missing', { organizationRegistered: false }],
  ['platform-unsupported', { relayCapabilities: { ...everything, platforms: ['objectstorage'] } }],
  ['secrets-unsupported', { relayCapabilities: { ...everything, secrets: false } }],
  ['volumes-unsupported', { relayCapabilities: { ...everything, volumes: false }, service: service({ volumes: [volume] }) }],
  ['port-protocol-unsupported', { relayCapabilities: { ...everything, portProtocols: ['tcp'] } }],
  ['ports-too-many', {
    service: service({
      routes: [],
      ports: Array.from({ length: data.runtimeConfigContract.maximumTargetPorts + 1 }, (_, index) => ({ name: `p${index}`, port: 1000 + index, protocol: 'tcp' as const })),
    }),
  }],
  ['replica-limit', { service: service({ runtime: { ...service().runtime, replicas: data.runtimeConfigContract.maximumReplicas + 1 } }) }],
  // A secret of the service's own needs the runtime's secret delivery as much as a binding's credentials.
  ['secrets-unsupported', {
    relayCapabilities: { ...everything, secrets: false }, bindingCapabilities: [],
    service: service({ secrets: { TOKEN: { secretId: 'api-token', secretVersionId: 'v1' } } }), secrets: [{ name: 'TOKEN', valueBytes: 10 }],
  }],
  // The only eligible node's session resolved no workload authority.
  ['node-authority-unsupported', { nodeWorkloadAuthorities: new Map([['n-1', 0]]) }],
  ['node-authority-unsupported', {
    service: service({ runtime: { ...service().runtime, placement: { nodeIds: [] } } }), clusterNodeIds: new Set(['n-1', 'n-2']),
    nodeWorkloadAuthorities: new Map([['n-1', 0], ['n-2', 0]]),
  }],
  // Routes, or the ingress designation, without a readiness target.
  ['readiness-target-undeclared', { service: service({ readiness: null }) }],
  ['readiness-target-undeclared', { service: service({ routes: [], readiness: null }), isIngressService: true }],
  // The plain entries are at the limit (the input refuses more); the secret's value tips it over.
  ['environment-too-large', {
    service: service({ environment: { A: 'x'.repeat(data.serviceEnvironmentContract.maximumTotalBytes - 4) } }),
    secrets: [{ name: 'B', valueBytes: 1 }],
  }],
  ['secret-version-missing', {
    service: service({ secrets: { TOKEN: { secretId: 'api-token', secretVersionId: 'v9' } } }), secrets: [{ name: 'TOKEN', valueBytes: null }],
  }],
  // A policy requested of a runtime whose relay states no network authority at all.
  ['network-policy-missing', { service: service({ networkPolicy: meshPolicy }) }],
  // The authority cannot express the requested egress.
  ['network-policy-mismatch', { service: service({ networkPolicy: destinationsPolicy }), relayCapabilities: { ...everything, networkPolicy: { egress: ['none', 'mesh'] } } }],
  // The placement names a node the authority does not govern.
  ['network-policy-mismatch', { service: service({ networkPolicy: meshPolicy }), relayCapabilities: { ...everything, networkPolicy: { egress: ['mesh'], nodeIds: ['n-2'] } } }],
  // No placement: every node of the cluster is eligible, and one of them is outside the authority.
  ['network-policy-mismatch', {
    service: service({ networkPolicy: { egress: { kind: 'none' } }, runtime: { ...service().runtime, placement: { nodeIds: [] } } }),
    clusterNodeIds: new Set(['n-1', 'n-2']),
    relayCapabilities: { ...everything, networkPolicy: { egress: ['none'], nodeIds: ['n-1'] } },
  }],
];

for (const [reason, broken] of refusals) {
  test(`one broken fact refuses ${reason}`, () => {
    assert.deepEqual(judgeServiceRuntime(base(broken)), { state: 'refused', reason });
  });
}

const waits: Array<[string, Partial<IServiceRuntimeFacts>]> = [
  ['node-network-pending', { nodeNetwork: { heldLeaseIds: new Map([['n-1', ['wl-1']]]), confirmedLeaseIds: new Set() } }],
  ['conflict', { routesTakenByOthers: ['web.example.com'] }],
  ['failure-backoff', { observed: [{ nodeId: 'n-1', specRevision: 2, replicas: 0, state: 'failed', reason: 'exit 1', reportedAt: 10 }] }],
];

// The secret manifest of the node running the current revision (the base's n-1, observed ready).
const manifestExpectation = { bindingIds: ['pb-1'], secrets: [{ name: 'TOKEN', secretVersionId: 'v2' }] };
const observedWith = (manifestArg: { secrets: Array<{ name: string; secretVersionId: string }>; bindingIds: string[] }) =>
  [{ nodeId: 'n-1', specRevision: 2, replicas: 1, state: 'ready' as const, reportedAt: 10, manifest: manifestArg }];
waits.push(
  ['bindings-pending', { manifestExpectation, observed: observedWith({ secrets: [{ name: 'TOKEN', secretVersionId: 'v2' }], bindingIds: [] }) }],
  ['secrets-pending', { manifestExpectation, observed: observedWith({ secrets: [{ name: 'TOKEN', secretVersionId: 'v1' }], bindingIds: ['pb-1'] }) }],
  ['secrets-pending', { manifestExpectation, observed: observedWith({ secrets: [], bindingIds: ['pb-1'] }) }],
  ['bindings-pending', { bindings: { bindingsPending: true, legacyAdoptionPending: false } }],
);

for (const [reason, broken] of waits) {
  test(`one broken fact waits ${reason}`, () => {
    assert.deepEqual(judgeServiceRuntime(base(broken)), { state: 'waiting', reason });
  });
}

test('facts that do not break: no stated capabilities refuse nothing, an older revision failing or unconfirmed waits for nothing', () => {
  assert.deepEqual(judgeServiceRuntime(base({ relayCapabilities: null, service: service({ volumes: [volume] }) })), { state: 'converging', reason: null });
  assert.deepEqual(judgeServiceRuntime(base({ relayCapabilities: { ...everything, secrets: false }, bindingCapabilities: [] })), { state: 'converging', reason: null });
  assert.deepEqual(judgeServiceRuntime(base({ observed: [{ nodeId: 'n-1', specRevision: 1, replicas: 0, state: 'failed', reportedAt: 1 }] })), { state: 'converging', reason: null });
  // A lease nobody runs yet (the relay has not started the workload) is no network wait: not started is converging.
  assert.deepEqual(judgeServiceRuntime(base({ observed: [], nodeNetwork: { heldLeaseIds: new Map([['n-1', ['wl-1']]]), confirmedLeaseIds: new Set() } })),
    { state: 'converging', reason: null });
  assert.deepEqual(judgeServiceRuntime(base({ service: service({ ports: [{ name: 'http', port: 80, protocol: 'tcp' }], routes: [] }) })), { state: 'converging', reason: null });
  // A manifest listing everything, or no manifest at all (nothing to judge), waits for nothing.
  assert.deepEqual(judgeServiceRuntime(base({ manifestExpectation, observed: observedWith({ secrets: [{ name: 'TOKEN', secretVersionId: 'v2' }], bindingIds: ['pb-1'] }) })),
    { state: 'converging', reason: null });
  assert.deepEqual(judgeServiceRuntime(base({ manifestExpectation })), { state: 'converging', reason: null });
  // One eligible node with enough authorities, or one that stated no count, is enough to admit.
  assert.deepEqual(judgeServiceRuntime(base({ nodeWorkloadAuthorities: new Map([['n-1', 1]]) })), { state: 'converging', reason: null });
  assert.deepEqual(judgeServiceRuntime(base({
    service: service({ runtime: { ...service().runtime, placement: { nodeIds: [] } } }), clusterNodeIds: new Set(['n-1', 'n-2']),
    nodeWorkloadAuthorities: new Map([['n-1', 0]]),
  })), { state: 'converging', reason: null });
  // No routes and not the ingress: no readiness target is needed.
  assert.deepEqual(judgeServiceRuntime(base({ service: service({ routes: [], readiness: null }) })), { state: 'converging', reason: null });
  // Exactly at the environment's limit, plain and secret together, is admitted: A=<value>\0 and B=<1 byte>\0.
  assert.deepEqual(judgeServiceRuntime(base({
    service: service({ environment: { A: 'x'.repeat(data.serviceEnvironmentContract.maximumTotalBytes - 7) } }),
    secrets: [{ name: 'B', valueBytes: 1 }],
  })), { state: 'converging', reason: null });
});

test('network policy: nothing requested, nothing stated, or an authority that expresses the egress on every eligible node admits the service', () => {
  const converging = { state: 'converging', reason: null };
  // No policy requested: an authority-less runtime is no reason to refuse.
  assert.deepEqual(judgeServiceRuntime(base()), converging);
  // A relay that states no capabilities claims nothing, so nothing is judged against it.
  assert.deepEqual(judgeServiceRuntime(base({ service: service({ networkPolicy: meshPolicy }), relayCapabilities: null })), converging);
  const authority = { ...everything, networkPolicy: { egress: ['none', 'mesh', 'destinations'] as data.TServiceNetworkEgressKind[] } };
  for (const policy of [meshPolicy, destinationsPolicy, { egress: { kind: 'none' as const } }]) {
    assert.deepEqual(judgeServiceRuntime(base({ service: service({ networkPolicy: policy }), relayCapabilities: authority })), converging, policy.egress.kind);
  }
  // A placement pinned to the governed node is admitted though the cluster has another node the authority does not govern.
  assert.deepEqual(judgeServiceRuntime(base({
    service: service({ networkPolicy: meshPolicy }), clusterNodeIds: new Set(['n-1', 'n-2']),
    relayCapabilities: { ...everything, networkPolicy: { egress: ['mesh'], nodeIds: ['n-1'] } },
  })), converging);
});

test('network policy in contract order: after node-authority-unsupported, before the workload pool refusals and any wait', () => {
  const missing = { service: service({ networkPolicy: meshPolicy }) };
  assert.deepEqual(judgeServiceRuntime(base({ ...missing, nodeWorkloadAuthorities: new Map([['n-1', 0]]) })), { state: 'refused', reason: 'node-authority-unsupported' });
  assert.deepEqual(judgeServiceRuntime(base({ ...missing, workloadLeases: { shortfall: 1, poolMissing: true } })), { state: 'refused', reason: 'network-policy-missing' });
  assert.deepEqual(judgeServiceRuntime(base({
    service: service({ networkPolicy: destinationsPolicy }), relayCapabilities: { ...everything, networkPolicy: { egress: ['mesh'] } },
    workloadLeases: { shortfall: 1, poolMissing: false }, routesTakenByOthers: ['web.example.com'],
  })), { state: 'refused', reason: 'network-policy-mismatch' });
  const order = data.serviceRuntimeRefusals as readonly string[];
  assert.ok(order.indexOf('node-authority-unsupported') < order.indexOf('network-policy-missing'));
  assert.ok(order.indexOf('network-policy-missing') < order.indexOf('network-policy-mismatch'));
  assert.ok(order.indexOf('network-policy-mismatch') < order.indexOf('network-workload-pool-missing'));
});

test('the environment counts NAME=value and a NUL per entry in UTF-8 bytes, plain and secret alike, skipping secrets of unknown size', () => {
  assert.equal(serviceEnvironmentBytes({ environment: { A: 'b' } }, []), 4);
  assert.equal(serviceEnvironmentBytes({ environment: { Ä: 'é' } }, []), 2 + 1 + 2 + 1);
  assert.equal(serviceEnvironmentBytes({ environment: {} }, [{ name: 'TOKEN', valueBytes: 32 }, { name: 'GONE', valueBytes: null }]), 5 + 1 + 32 + 1);
});

test('the secret-version refusal comes before the admission refusals: a secret that cannot be delivered is not judged for its size', () => {
  assert.deepEqual(judgeServiceRuntime(base({
    relayCapabilities: { ...everything, portProtocols: [] },
    service: service({ secrets: { TOKEN: { secretId: 'api-token', secretVersionId: 'v9' } } }), secrets: [{ name: 'TOKEN', valueBytes: null }],
  })), { state: 'refused', reason: 'secret-version-missing' });
});

test('contract order: among refusals the earlier reason names the verdict, and any refusal comes before any wait', () => {
  assert.deepEqual(judgeServiceRuntime(base({ relayCapabilities: { ...everything, platforms: [], secrets: false } })), { state: 'refused', reason: 'platform-unsupported' });
  assert.deepEqual(judgeServiceRuntime(base({ relayCapabilities: { ...everything, portProtocols: [] }, routesTakenByOthers: ['web.example.com'] })),
    { state: 'refused', reason: 'port-protocol-unsupported' });
  assert.deepEqual(judgeServiceRuntime(base({ clusterExists: false, relayCapabilities: { ...everything, volumes: false } })), { state: 'refused', reason: 'cluster-runtime-missing' });
  assert.deepEqual(judgeServiceRuntime(base({
    routesTakenByOthers: ['web.example.com'],
    observed: [{ nodeId: 'n-1', specRevision: 2, replicas: 0, state: 'failed', reportedAt: 10 }],
  })), { state: 'waiting', reason: 'conflict' });
  // Every reason judged here belongs to its state in the contract's pairing.
  for (const [reason] of refusals) {
    assert.ok(([...data.serviceRuntimeRefusals, ...data.serviceRuntimeOwnRefusals] as readonly string[]).includes(reason), reason);
  }
  for (const [reason] of waits) {
    assert.ok(([...data.serviceRuntimeWaitingReasons, ...data.serviceRuntimeOwnWaitingReasons] as readonly string[]).includes(reason), reason);
  }
});

test('relay capabilities: a valid statement is admitted, every broken member is named by path', () => {
  assert.deepEqual(data.validateClusterRelayCapabilities(everything), []);
  assert.deepEqual(data.validateClusterRelayCapabilities({ platforms: ['database', 'database', 'X'], secrets: 'yes', portProtocols: ['sctp'], extra: 1 }), [
    'capabilities.extra is not a member of relay capabilities',
    'capabilities.platforms[1] repeats a platform',
    'capabilities.platforms[2] must be a lowercase platform name',
    'capabilities.secrets must be true or false',
    'capabilities.volumes must be true or false',
    'capabilities.portProtocols[0] must be tcp or udp',
  ]);
  assert.deepEqual(data.validateClusterRelayCapabilities({ ...everything, networkPolicy: { egress: ['none', 'mesh', 'destinations'], nodeIds: ['n-1'] } }), []);
  assert.deepEqual(data.validateClusterRelayCapabilities({ ...everything, networkPolicy: { egress: ['mesh', 'mesh', 'open'], nodeIds: ['n-1', 'n-1', ''], extra: 1 } }), [
    'capabilities.networkPolicy.extra is not a known member',
    'capabilities.networkPolicy.egress[1] repeats an egress kind',
    'capabilities.networkPolicy.egress[2] must be none, mesh or destinations',
    'capabilities.networkPolicy.nodeIds[1] repeats a node',
    "capabilities.networkPolicy.nodeIds[2] must be an id of 1-128 letters, digits, '.', '_' or '-' starting with a letter or digit",
  ]);
  assert.deepEqual(data.validateClusterRelayCapabilities({ ...everything, networkPolicy: { nodeIds: 'n-1' } }), [
    'capabilities.networkPolicy.egress must be an array of egress kinds (none, mesh, destinations)',
    'capabilities.networkPolicy.nodeIds must be an array of at most 1024 node ids',
  ]);
});

test('the shape migration moves ports and routes out of an old runtime spec and keeps everything else', () => {
  const doc = {
    id: 'svc-1', generation: 4, name: 'web', organizationId: 'org-1', clusterId: 'c-1', specRevision: 7,
    runtime: { ...service().runtime, ports: service().ports, routes: service().routes },
    volumes: [], claimDecisions: [], createdAt: 1, updatedAt: 2,
  } as unknown as IServiceDocument;
  assert.deepEqual(decideServiceShapeMigration(doc), {
    kind: 'write',
    change: { set: { runtime: service().runtime, ports: service().ports, routes: service().routes } },
  });
  const moved = { ...doc, runtime: service().runtime, ports: service().ports, routes: service().routes } as IServiceDocument;
  assert.deepEqual(decideServiceShapeMigration(moved), { kind: 'keep' });
  assert.deepEqual(decideServiceShapeMigration(null), { kind: 'keep' });
  // Only routes left inside: ports beside it were written by this version and stay.
  const half = { ...doc, runtime: { ...service().runtime, routes: [] }, ports: [] } as unknown as IServiceDocument;
  assert.deepEqual(decideServiceShapeMigration(half), { kind: 'write', change: { set: { runtime: service().runtime, ports: [], routes: [] } } });
});
