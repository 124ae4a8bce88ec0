import { test } from 'node:test';
import assert from 'node:assert/strict';
import { commitinfo, data, mirroredInterfacesVersion, requests } from '../ts/interfaces/index.js';
import { computeDomainDigestHex } from '../ts/interfaces/private/canonicaljson.js';
import { bindApplyRuntimeLocalStorageClaimRequest, bindApplyRuntimeLocalStorageClaimResponse } from '../ts/interfaces/requests/runtimesession.js';

const {
  deriveServiceVolumeClaimInitialization,
  validateServiceVolumeInitialization,
  serviceVolumeInitializationContract,
  snapshotServiceRuntimeStatus,
  serviceRuntimeWaitingReasons,
  serviceRuntimeRefusals,
  runtimeLocalStorageClaimContract,
  snapshotRuntimeLocalStorageClaim,
  computeRuntimeLocalStorageClaimDigest,
  validateRuntimeLocalStorageClaim,
  getRuntimeLocalStorageClaimReference,
  bindRuntimeLocalStorageClaimToAssignment,
  sealRuntimeLocalStorageClaim,
  validateServiceWritableVolume,
  validateServiceWritableSpec,
  validateServiceName,
  validateServiceImageReference,
  judgeServiceVolumeInitializationUse,
} = data;

// ---------------------------------------------------------------- derive rule, row by row

test('derive: an absent initialization is refused volume-initialization-unknown under any runAs', () => {
  assert.deepEqual(deriveServiceVolumeClaimInitialization(undefined, null), {
    refused: true, reason: 'volume-initialization-unknown',
  });
  assert.deepEqual(deriveServiceVolumeClaimInitialization(undefined, { user: 1000, group: 1000 }), {
    refused: true, reason: 'volume-initialization-unknown',
  });
});

test('derive: empty + explicit gives empty with the stated owner and mode under any runAs', () => {
  const initialization = { kind: 'empty', ownership: { kind: 'explicit', uid: 70, gid: 71, mode: 0o750 } } as const;
  const expected = { refused: false, initialization: 'empty', initialOwnership: { uid: 70, gid: 71, mode: 0o750 } };
  assert.deepEqual(deriveServiceVolumeClaimInitialization(initialization, null), expected);
  assert.deepEqual(deriveServiceVolumeClaimInitialization(initialization, { user: 1000, group: 2000 }), expected);
});

test('derive: empty + run-as with a numeric runAs takes uid from user and gid from group', () => {
  const initialization = { kind: 'empty', ownership: { kind: 'run-as', mode: 0o2770 } } as const;
  assert.deepEqual(deriveServiceVolumeClaimInitialization(initialization, { user: 1001, group: 1002 }), {
    refused: false, initialization: 'empty', initialOwnership: { uid: 1001, gid: 1002, mode: 0o2770 },
  });
});

test('derive: empty + run-as under runAs null is refused volume-ownership-unknown', () => {
  assert.deepEqual(
    deriveServiceVolumeClaimInitialization({ kind: 'empty', ownership: { kind: 'run-as', mode: 0o700 } }, null),
    { refused: true, reason: 'volume-ownership-unknown' },
  );
});

test('derive: import gives import with null ownership under any runAs', () => {
  const initialization = { kind: 'import', source: { kind: 'docker-volume', volumeName: 'legacy_db-data' } } as const;
  const expected = { refused: false, initialization: 'import', initialOwnership: null };
  assert.deepEqual(deriveServiceVolumeClaimInitialization(initialization, null), expected);
  assert.deepEqual(deriveServiceVolumeClaimInitialization(initialization, { user: 0, group: 0 }), expected);
});

test('derive: an invalid initialization or runAs is not silently turned into a claim', () => {
  assert.throws(() => deriveServiceVolumeClaimInitialization(
    { kind: 'empty', ownership: { kind: 'explicit', uid: 1, gid: 1, mode: 0o4755 } }, null));
  assert.throws(() => deriveServiceVolumeClaimInitialization(
    { kind: 'empty', ownership: { kind: 'run-as', mode: 0o700 } }, { user: -1, group: 0 }));
});

// ---------------------------------------------------------------- initialization validation

test('validate: valid values answer no reasons', () => {
  assert.deepEqual(validateServiceVolumeInitialization({ kind: 'empty', ownership: { kind: 'explicit', uid: 0, gid: 0, mode: 0o3777 } }), []);
  assert.deepEqual(validateServiceVolumeInitialization({ kind: 'empty', ownership: { kind: 'run-as', mode: 0 } }), []);
  assert.deepEqual(validateServiceVolumeInitialization({ kind: 'import', source: { kind: 'docker-volume', volumeName: 'ab' } }), []);
  assert.equal(serviceVolumeInitializationContract.directoryModeBits, 0o3777);
});

test('validate: every reason, each naming its path', () => {
  const cases: Array<[unknown, string[]]> = [
    [null, ['initialization must be a plain object']],
    [[], ['initialization must be a plain object']],
    [new (class Initialization { kind = 'empty'; })(), ['initialization must be a plain object']],
    [{ kind: 'copy' }, ["initialization.kind must be 'empty' or 'import'"]],
    [{ kind: 'empty' }, ['initialization.ownership must be a plain object']],
    [{ kind: 'empty', ownership: { kind: 'root', mode: 0o700 } }, ["initialization.ownership.kind must be 'explicit' or 'run-as'"]],
    [{ kind: 'empty', ownership: { kind: 'run-as' } }, ['initialization.ownership.mode must be a non-negative integer']],
    [{ kind: 'empty', ownership: { kind: 'run-as', mode: 1.5 } }, ['initialization.ownership.mode must be a non-negative integer']],
    [{ kind: 'empty', ownership: { kind: 'run-as', mode: -1 } }, ['initialization.ownership.mode must be a non-negative integer']],
    [{ kind: 'empty', ownership: { kind: 'run-as', mode: 0o4700 } }, ['initialization.ownership.mode must not set the setuid bit (0o4000)']],
    [{ kind: 'empty', ownership: { kind: 'run-as', mode: 0o10000 } }, ['initialization.ownership.mode must hold only directory permission bits (0o3777)']],
    [{ kind: 'empty', ownership: { kind: 'run-as', mode: 0o14700 } }, [
      'initialization.ownership.mode must not set the setuid bit (0o4000)',
      'initialization.ownership.mode must hold only directory permission bits (0o3777)',
    ]],
    [{ kind: 'empty', ownership: { kind: 'run-as', mode: 2 ** 40 } }, ['initialization.ownership.mode must hold only directory permission bits (0o3777)']],
    [{ kind: 'empty', ownership: { kind: 'run-as', mode: 0o700, uid: 1 } }, ['initialization.ownership.uid is not a known member']],
    [{ kind: 'empty', ownership: { kind: 'explicit', uid: -1, gid: 'x', mode: 0o700 } }, [
      'initialization.ownership.uid must be an integer from 0 to 4294967294',
      'initialization.ownership.gid must be an integer from 0 to 4294967294',
    ]],
    [{ kind: 'empty', ownership: { kind: 'explicit', uid: 4294967295, gid: 0, mode: 0o700 } }, ['initialization.ownership.uid must be an integer from 0 to 4294967294']],
    [{ kind: 'empty', ownership: { kind: 'explicit', gid: 0, mode: 0o700 } }, ['initialization.ownership.uid must be an integer from 0 to 4294967294']],
    [{ kind: 'empty', ownership: { kind: 'run-as', mode: 0o700 }, extra: true }, ['initialization.extra is not a known member']],
    [{ kind: 'import' }, ['initialization.source must be a plain object']],
    [{ kind: 'import', source: { kind: 'bind', volumeName: 'data' } }, ["initialization.source.kind must be 'docker-volume'"]],
    [{ kind: 'import', source: { kind: 'docker-volume' } }, ['initialization.source.volumeName must be a string']],
    [{ kind: 'import', source: { kind: 'docker-volume', volumeName: 'a' } }, ['initialization.source.volumeName must be a Docker volume name ([A-Za-z0-9][A-Za-z0-9_.-]+)']],
    [{ kind: 'import', source: { kind: 'docker-volume', volumeName: '-data' } }, ['initialization.source.volumeName must be a Docker volume name ([A-Za-z0-9][A-Za-z0-9_.-]+)']],
    [{ kind: 'import', source: { kind: 'docker-volume', volumeName: 'x'.repeat(10_000_000) } }, ['initialization.source.volumeName must be at most 255 characters']],
    [{ kind: 'import', source: { kind: 'docker-volume', volumeName: 'data', path: '/var' } }, ['initialization.source.path is not a known member']],
  ];
  for (const [value, reasons] of cases) {
    assert.deepEqual(validateServiceVolumeInitialization(value), reasons, JSON.stringify(value)?.slice(0, 200));
  }
});

test('validate: a custom path prefixes every reason', () => {
  assert.deepEqual(validateServiceVolumeInitialization({ kind: 'x' }, 'volumes[2].initialization'), [
    "volumes[2].initialization.kind must be 'empty' or 'import'",
  ]);
});

test('validate: getters and hostile proxies are refused without running or throwing', () => {
  let ran = false;
  const withGetter = { kind: 'empty', get ownership() { ran = true; return { kind: 'run-as', mode: 0o700 }; } };
  assert.deepEqual(validateServiceVolumeInitialization(withGetter), ['initialization must be a plain object']);
  assert.equal(ran, false);
  const hostile = new Proxy({}, { ownKeys() { throw new Error('boom'); }, getPrototypeOf() { throw new Error('boom'); } });
  assert.deepEqual(validateServiceVolumeInitialization(hostile), ['initialization could not be read as plain data']);
});

// ---------------------------------------------------------------- writable volumes and specs

test('a writable volume stating initialization is refused naming the path', () => {
  const reasons = validateServiceWritableVolume({
    mountPath: '/data', readOnly: false, driver: 'local',
    initialization: { kind: 'empty', ownership: { kind: 'run-as', mode: 0o700 } },
  }, 'service.volumes[0]');
  assert.deepEqual(reasons, ['service.volumes[0].initialization is server-managed: set it with setServiceVolumeInitialization']);
});

test('writable spec: every reason in order, mount path rule included', () => {
  const reasons = validateServiceWritableSpec({
    name: '',
    organizationId: 'org 1',
    clusterId: 'c1',
    runtime: { image: 'nginx', replicas: 1, profile: {}, placement: { nodeIds: ['n1', 'n1'] } },
    volumes: [
      { mountPath: '/', readOnly: false, driver: 'local' },
      { mountPath: '/run', readOnly: false, driver: 'local' },
      { mountPath: '/data/../x/', readOnly: 'no', driver: 'local' },
      { mountPath: '/run', readOnly: false, driver: 'local' },
    ],
  });
  assert.deepEqual(reasons, [
    'service.name must be a string of 1-63 characters',
    "service.organizationId must be an id of 1-128 letters, digits, '.', '_' or '-' starting with a letter or digit",
    'service.runtime.profile.runAs must be stated ({ user, group } or null)',
    'service.runtime.placement.nodeIds must not repeat a node',
    'service.volumes[0].mountPath must not be the root directory',
    'service.volumes[1].mountPath must not overlap /run/secrets',
    "service.volumes[2].mountPath must be canonical: no empty, '.' or '..' segment and no trailing slash",
    'service.volumes[2].readOnly must be a boolean',
    'service.volumes[3].mountPath must not overlap /run/secrets',
    'service.volumes[3].mountPath repeats the mount path of an earlier volume',
  ]);
});

test('initialization use: judged usable exactly when the runtime derivation would not refuse it, with the same reason', () => {
  const initializations = [
    null,
    { kind: 'empty', ownership: { kind: 'run-as', mode: 0o750 } },
    { kind: 'empty', ownership: { kind: 'explicit', uid: 1000, gid: 1000, mode: 0o700 } },
    { kind: 'import', source: { kind: 'docker-volume', volumeName: 'app_data' } },
  ] as const;
  for (const runAs of [null, { user: 1000, group: 1000 }]) {
    for (const initialization of initializations) {
      const judged = judgeServiceVolumeInitializationUse(initialization as any, runAs);
      const derived = deriveServiceVolumeClaimInitialization((initialization ?? undefined) as any, runAs);
      assert.equal(judged.usable, !derived.refused, JSON.stringify({ initialization, runAs }));
      if (!judged.usable && derived.refused) {
        assert.equal(judged.reason, derived.reason);
        assert.ok(judged.instead.length > 0);
      }
    }
  }
  const ownerUnknown = judgeServiceVolumeInitializationUse({ kind: 'empty', ownership: { kind: 'run-as', mode: 0o750 } }, null);
  assert.equal(ownerUnknown.usable, false);
  assert.match(!ownerUnknown.usable ? ownerUnknown.instead : '', /explicit owner \(uid and gid\)/);
});

test('service names are DNS labels; images are image references', () => {
  for (const name of ['app', 'web-1', 'a', '0db', 'x'.repeat(63)]) {
    assert.deepEqual(validateServiceName(name), [], name);
  }
  for (const name of ['Bad Name!', 'Web', '-web', 'web-', 'web_1', 'web.1', 'x'.repeat(64), '', 7]) {
    assert.equal(validateServiceName(name, 'service.name').length, 1, String(name));
  }
  assert.deepEqual(validateServiceName('Bad Name!', 'service.name'),
    ["service.name must be lowercase letters, digits and '-', starting and ending with a letter or digit (a DNS label)"]);
  for (const image of ['nginx', 'nginx:1.27', 'library/nginx:latest', 'registry.example.com/shop/web:2', 'localhost:5000/a/b_c__d:v1.0-rc',
    `registry.example.com:5000/web@sha256:${'a'.repeat(64)}`, `web:1@sha256:${'0'.repeat(64)}`, '[::1]:5000/x:1']) {
    assert.deepEqual(validateServiceImageReference(image), [], image);
  }
  for (const image of ['registry.example.com/<b>x</b>:1', 'Nginx', 'nginx:', 'nginx:-x', 'a//b', 'web:1 ', 'https://registry/x', `web:${'t'.repeat(129)}`, '']) {
    assert.equal(validateServiceImageReference(image, 'service.runtime.image').length, 1, image);
  }
  assert.deepEqual(validateServiceImageReference('registry.example.com/<b>x</b>:1', 'service.runtime.image'),
    ['service.runtime.image must be an image reference: [registry[:port]/]lowercase/path[:tag][@digest]']);
});

// ---------------------------------------------------------------- runtime status pairing

test('status pairing: each reason belongs to exactly one state', () => {
  const base = { id: 'svc1', specRevision: 3, changedAt: 1000 };
  for (const state of ['converged', 'converging'] as const) {
    assert.deepEqual(snapshotServiceRuntimeStatus({ ...base, state, reason: null }), { ...base, state, reason: null });
    assert.throws(() => snapshotServiceRuntimeStatus({ ...base, state, reason: 'conflict' }));
    assert.throws(() => snapshotServiceRuntimeStatus({ ...base, state, reason: 'volume-driver-unsupported' }));
  }
  for (const reason of serviceRuntimeWaitingReasons) {
    assert.equal(snapshotServiceRuntimeStatus({ ...base, state: 'waiting', reason }).reason, reason);
    assert.throws(() => snapshotServiceRuntimeStatus({ ...base, state: 'refused', reason }));
  }
  for (const reason of serviceRuntimeRefusals) {
    assert.equal(snapshotServiceRuntimeStatus({ ...base, state: 'refused', reason }).reason, reason);
    assert.throws(() => snapshotServiceRuntimeStatus({ ...base, state: 'waiting', reason }));
  }
  assert.throws(() => snapshotServiceRuntimeStatus({ ...base, state: 'waiting', reason: null }));
  assert.throws(() => snapshotServiceRuntimeStatus({ ...base, state: 'refused', reason: 'made-up' }));
  assert.throws(() => snapshotServiceRuntimeStatus({ ...base, state: 'converged', reason: null, extra: 1 }));
  assert.throws(() => snapshotServiceRuntimeStatus(null));
});

test('status lists carry the new storage, binding and volume reasons in contract order', () => {
  assert.deepEqual(serviceRuntimeWaitingReasons.slice(3), ['storage-import-pending', 'bindings-pending', 'legacy-adoption-pending']);
  assert.deepEqual(serviceRuntimeRefusals.slice(-6), [
    'volume-driver-unsupported', 'volume-options-unsupported', 'volume-shared-unsupported',
    'volume-placement-unsupported', 'volume-initialization-unknown', 'volume-ownership-unknown',
  ]);
  assert.equal(serviceRuntimeRefusals.length, 23);
});

// ---------------------------------------------------------------- local storage claims

const unsealedClaim = (overrides: Record<string, unknown> = {}) => ({
  id: 'lsc-1',
  generation: 1,
  previous: null,
  controller: { kind: 'cloudly', id: 'cloudly' },
  organizationId: 'org1',
  clusterId: 'c1',
  nodeId: 'n1',
  runtimeNamespace: 'cloudly',
  serviceId: 'svc1',
  volumeId: 'vol-1',
  source: { kind: 'directory' },
  initialization: 'empty',
  initialOwnership: { uid: 1000, gid: 1000, mode: 0o750 },
  mount: { mountPath: '/data', readOnly: false },
  accessMode: 'ReadWriteOnce',
  reclaimPolicy: 'retain',
  lifecycle: 'bound',
  ...overrides,
});

const sealed = async (overrides: Record<string, unknown> = {}) =>
  sealRuntimeLocalStorageClaim(unsealedClaim(overrides) as data.TRuntimeLocalStorageClaimUnsealed);

test('claim digest: domain-separated sha256 over the canonical claim without its digest', async () => {
  const claim = await sealed();
  assert.equal(runtimeLocalStorageClaimContract.digestDomain, 'serve.zone/runtime-local-storage-claim');
  assert.equal(claim.digest, computeDomainDigestHex('serve.zone/runtime-local-storage-claim', unsealedClaim()));
  assert.equal(await computeRuntimeLocalStorageClaimDigest(claim), claim.digest);
  assert.deepEqual(await validateRuntimeLocalStorageClaim(claim), []);
  assert.deepEqual(getRuntimeLocalStorageClaimReference(claim), { id: 'lsc-1', generation: 1, digest: claim.digest });
  const other = await sealed({ mount: { mountPath: '/data', readOnly: true } });
  assert.notEqual(other.digest, claim.digest);
  assert.deepEqual(await validateRuntimeLocalStorageClaim({ ...claim, nodeId: 'n2' }), ['claim.digest does not match the claim']);
});

test('claim snapshot is detached and exact', async () => {
  const claim = await sealed();
  const snapshot = snapshotRuntimeLocalStorageClaim(claim);
  assert.deepEqual(snapshot, claim);
  assert.notEqual(snapshot.mount, claim.mount);
  assert.throws(() => snapshotRuntimeLocalStorageClaim({ ...claim, hostPath: '/srv' }));
  assert.throws(() => snapshotRuntimeLocalStorageClaim(null));
});

test('claim schema: every reason', async () => {
  const claim = await sealed();
  const reasonsOf = async (overrides: Record<string, unknown>) => validateRuntimeLocalStorageClaim({ ...claim, ...overrides });
  assert.deepEqual(await reasonsOf({ generation: 2 }), ['claim.previous must name the prior generation when generation is above 1']);
  assert.deepEqual(await reasonsOf({ lifecycle: 'purge' }), ["claim.lifecycle 'purge' must follow a bound generation of the same claim"]);
  assert.deepEqual(await reasonsOf({ generation: 3, previous: { id: 'lsc-2', generation: 1, digest: claim.digest } }), [
    "claim.previous.id must be the claim's own id",
    'claim.previous.generation must be the generation right before claim.generation',
  ]);
  assert.deepEqual(await reasonsOf({ initialOwnership: null }), ['claim.initialOwnership must state { uid, gid, mode } for an empty claim']);
  assert.deepEqual(await reasonsOf({ initialOwnership: { uid: 1, gid: 1, mode: 0o4750 } }), ['claim.initialOwnership.mode must not set the setuid bit (0o4000)']);
  assert.deepEqual(await reasonsOf({ initialization: 'import' }), ['claim.initialOwnership must be null for an import claim']);
  assert.deepEqual(await reasonsOf({ mount: { mountPath: '/run/secrets/db', readOnly: false } }), ['claim.mount.mountPath must not overlap /run/secrets']);
  assert.deepEqual(await reasonsOf({ source: { kind: 'nfs' } }), ["claim.source.kind must be 'directory'"]);
  assert.deepEqual(await reasonsOf({ controller: { kind: 'swarm', id: 'x' } }), ["claim.controller.kind must be 'cloudly' or 'onebox'"]);
  assert.deepEqual(await reasonsOf({ accessMode: 'ReadWriteMany', reclaimPolicy: 'delete' }), [
    "claim.accessMode must be 'ReadWriteOnce'", "claim.reclaimPolicy must be 'retain'",
  ]);
  assert.deepEqual(await reasonsOf({ digest: 'ABC' }), ['claim.digest must be a lowercase hex sha256 digest']);
  const { nodeId: _nodeId, ...withoutNode } = claim;
  assert.deepEqual(await validateRuntimeLocalStorageClaim(withoutNode), [
    'claim.nodeId is missing',
    "claim.nodeId must be an id of 1-128 letters, digits, '.', '_' or '-' starting with a letter or digit",
  ]);
});

test('claim chaining: a purge generation follows its bound generation', async () => {
  const first = await sealed();
  const purge = await sealed({ generation: 2, previous: getRuntimeLocalStorageClaimReference(first), lifecycle: 'purge' });
  assert.deepEqual(await validateRuntimeLocalStorageClaim(purge), []);
});

const assignmentFor = (claim: data.IRuntimeLocalStorageClaim, overrides: Record<string, unknown> = {}) => ({
  controller: { ...claim.controller },
  organizationId: claim.organizationId,
  clusterId: claim.clusterId,
  nodeId: claim.nodeId,
  runtimeNamespace: claim.runtimeNamespace,
  serviceId: claim.serviceId,
  workload: { storage: [getRuntimeLocalStorageClaimReference(claim)] },
  ...overrides,
});

test('assignment binding: exact reference and exact owners, purge never binds', async () => {
  const claim = await sealed();
  assert.deepEqual(
    await bindRuntimeLocalStorageClaimToAssignment(claim, assignmentFor(claim), 'c1'),
    getRuntimeLocalStorageClaimReference(claim),
  );
  await assert.rejects(bindRuntimeLocalStorageClaimToAssignment(claim, assignmentFor(claim), 'c2'), /expected cluster/);
  for (const [key, value] of [
    ['organizationId', 'org2'], ['clusterId', 'c2'], ['nodeId', 'n2'], ['runtimeNamespace', 'other'], ['serviceId', 'svc2'],
    ['controller', { kind: 'onebox', id: 'cloudly' }],
  ] as const) {
    await assert.rejects(bindRuntimeLocalStorageClaimToAssignment(claim, assignmentFor(claim, { [key]: value }), 'c1'), new RegExp(`assignment.${key}`));
  }
  await assert.rejects(
    bindRuntimeLocalStorageClaimToAssignment(claim, assignmentFor(claim, {
      workload: { storage: [{ id: claim.id, generation: 1, digest: '0'.repeat(64) }] },
    }), 'c1'),
    /seal exactly the claim reference/,
  );
  await assert.rejects(bindRuntimeLocalStorageClaimToAssignment({ ...claim, nodeId: 'n2' }, assignmentFor(claim), 'c1'), /digest/);
  const purge = await sealed({ generation: 2, previous: getRuntimeLocalStorageClaimReference(claim), lifecycle: 'purge' });
  await assert.rejects(bindRuntimeLocalStorageClaimToAssignment(purge, assignmentFor(purge), 'c1'), /purge claim binds to no assignment/);
});

const trusted = {
  session: { id: 'sess-1', generation: 4 },
  controller: { kind: 'cloudly', id: 'cloudly' },
  clusterId: 'c1',
  nodeId: 'n1',
  runtimeNamespace: 'cloudly',
} as const;

test('apply request binding: current session and the session owners', async () => {
  const claim = await sealed();
  const request = { session: { id: 'sess-1', generation: 4 }, claim };
  assert.deepEqual(await bindApplyRuntimeLocalStorageClaimRequest(request, trusted), request);
  await assert.rejects(bindApplyRuntimeLocalStorageClaimRequest({ ...request, session: { id: 'sess-1', generation: 3 } }, trusted), /current session/);
  await assert.rejects(bindApplyRuntimeLocalStorageClaimRequest(request, { ...trusted, nodeId: 'n2' }), /session's node/);
  await assert.rejects(bindApplyRuntimeLocalStorageClaimRequest(request, { ...trusted, clusterId: 'c2' }), /session's cluster/);
  await assert.rejects(bindApplyRuntimeLocalStorageClaimRequest(request, { ...trusted, runtimeNamespace: 'x' }), /runtime namespace/);
  await assert.rejects(bindApplyRuntimeLocalStorageClaimRequest(request, { ...trusted, controller: { kind: 'onebox', id: 'cloudly' } }), /controller/);
  await assert.rejects(bindApplyRuntimeLocalStorageClaimRequest({ ...request, claim: { ...claim, generation: 1, nodeId: 'n1', volumeId: 'v2' } }, trusted), /digest/);
});

test('apply response binding: a mismatched answer is rejected, states must fit the claim', async () => {
  const claim = await sealed();
  const importClaim = await sealed({ initialization: 'import', initialOwnership: null });
  const purge = await sealed({ generation: 2, previous: getRuntimeLocalStorageClaimReference(claim), lifecycle: 'purge' });
  const session = { id: 'sess-1', generation: 4 };
  const answer = (sent: data.IRuntimeLocalStorageClaim, status: string, state: string, reference?: unknown) =>
    ({ status, state, claim: reference ?? getRuntimeLocalStorageClaimReference(sent) });
  const bind = (sent: data.IRuntimeLocalStorageClaim, response: unknown) =>
    bindApplyRuntimeLocalStorageClaimResponse(response, { session, claim: sent });

  assert.deepEqual(bind(claim, answer(claim, 'accepted', 'ready')), answer(claim, 'accepted', 'ready'));
  assert.equal(bind(claim, answer(claim, 'replay', 'uncertain')).state, 'uncertain');
  assert.equal(bind(importClaim, answer(importClaim, 'accepted', 'import-required')).state, 'import-required');
  assert.equal(bind(purge, answer(purge, 'accepted', 'purged')).state, 'purged');
  assert.equal(bind(purge, answer(purge, 'accepted', 'uncertain')).state, 'uncertain');

  assert.throws(() => bind(claim, answer(claim, 'accepted', 'import-required')), /not a state the sent claim can be in/);
  assert.throws(() => bind(claim, answer(claim, 'accepted', 'purged')), /not a state/);
  assert.throws(() => bind(purge, answer(purge, 'replay', 'ready')), /not a state/);
  assert.throws(() => bind(claim, answer(claim, 'accepted', 'ready', { id: claim.id, generation: 1, digest: 'f'.repeat(64) })), /sent claim reference/);
  assert.throws(() => bind(claim, answer(claim, 'accepted', 'ready', { id: 'lsc-9', generation: 1, digest: claim.digest })), /sent claim id/);
  assert.throws(() => bind(claim, { ...answer(claim, 'applied', 'ready') }), /response.status/);
  assert.throws(() => bind(claim, { ...answer(claim, 'accepted', 'ready'), extra: 1 }), /response.extra/);
  assert.throws(() => bind(claim, null), /plain object/);

  const newer = { id: claim.id, generation: 5, digest: 'a'.repeat(64) };
  assert.deepEqual(bind(claim, answer(claim, 'historical', 'ready', newer)), answer(claim, 'historical', 'ready', newer));
  assert.throws(() => bind(purge, answer(purge, 'historical', 'ready', { ...newer, generation: 2 })), /newer generation/);
});

test('request contracts are exported under the contract names', () => {
  const method: requests.runtimesession.IReq_Controller_Pallet_ApplyRuntimeLocalStorageClaim['method'] = 'applyRuntimeLocalStorageClaim';
  assert.equal(method, 'applyRuntimeLocalStorageClaim');
  assert.equal(typeof requests.runtimesession.bindApplyRuntimeLocalStorageClaimRequest, 'function');
  assert.equal(typeof requests.runtimesession.bindApplyRuntimeLocalStorageClaimResponse, 'function');
});

// ---------------------------------------------------------------- arbitrary input never throws

test('validators answer reasons for arbitrary input and never throw', async () => {
  const fc = (await import('fast-check')).default;
  await fc.assert(fc.asyncProperty(fc.anything({ withNullPrototype: true, withObjectString: true }), async (value) => {
    assert.ok(Array.isArray(validateServiceVolumeInitialization(value)));
    assert.ok(Array.isArray(validateServiceWritableVolume(value)));
    assert.ok(Array.isArray(validateServiceWritableSpec(value)));
    assert.ok(Array.isArray(await validateRuntimeLocalStorageClaim(value)));
    assert.ok(Array.isArray(data.validateRuntimeLocalStorageClaimReference(value)));
    assert.throws(() => snapshotServiceRuntimeStatus(value), TypeError);
  }), { numRuns: 300 });
});

test('service ports and routes sit beside the runtime spec: valid ones are kept exactly, every broken rule is named, and the runtime spec refuses them', () => {
  const runtime = { image: 'web:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } };
  const base = { name: 'web', organizationId: 'org-1', clusterId: 'c-1', runtime, volumes: [] };
  const network = {
    ports: [{ name: 'http', port: 8080, protocol: 'tcp' as const }, { name: 'dns', port: 53, protocol: 'udp' as const }],
    routes: [{ hostname: 'app.example.com', targetPort: 'http' }],
  };
  assert.deepEqual(data.validateServiceWritableSpec({ ...base, ...network }), []);
  assert.deepEqual(data.snapshotServicePorts(network.ports), network.ports);
  assert.deepEqual(data.snapshotServiceRoutes(network.routes), network.routes);
  // The runtime spec is execution policy only: a member of the project's own there is refused by path.
  assert.deepEqual(data.validateServiceRuntimeSpec({ ...runtime, ports: network.ports }), ['runtime.ports is not a known member']);
  assert.equal(JSON.stringify(data.snapshotServiceRuntimeSpec(runtime)), JSON.stringify(runtime));
  // A change of ports or routes is a change of what the nodes run (a new spec revision).
  const service = { runtime, ports: [], routes: [] };
  assert.equal(data.isSameServiceExecution(service, { runtime, ports: [], routes: [] }), true);
  assert.equal(data.isSameServiceExecution(service, { runtime, ...network }), false);
  assert.equal(data.isSameServiceExecution(service, { runtime, ports: [], routes: [{ hostname: 'a.example', targetPort: 'http' }] }), false);
  assert.deepEqual(data.validateServiceWritableSpec({
    ...base,
    ports: [{ name: 'http', port: 8080, protocol: 'tcp' }, { name: 'http', port: 8080, protocol: 'tcp' }, { name: '-bad', port: 0, protocol: 'sctp' }],
    routes: [
      { hostname: 'app.example.com', targetPort: 'metrics' },
      { hostname: 'app.example.com', targetPort: 'http' },
      { hostname: 'UPPER.example.com', targetPort: 'http' },
    ],
  }), [
    'service.ports[1].name repeats the name of an earlier port',
    'service.ports[1] repeats the port and protocol of an earlier port',
    "service.ports[2].name must be 1-15 lowercase letters, digits or '-', not starting or ending with '-'",
    'service.ports[2].port must be an integer from 1 to 65535',
    'service.ports[2].protocol must be tcp or udp',
    "service.routes[0].targetPort must name one of the service's ports",
    'service.routes[1].hostname repeats the hostname of an earlier route',
    'service.routes[2].hostname must be a lowercase DNS name',
  ]);
  assert.deepEqual(data.validateServiceWritableSpec({
    ...base, ports: [{ name: 'dns', port: 53, protocol: 'udp' }], routes: [{ hostname: 'a.example', targetPort: 'dns' }],
  }), ['service.routes[0].targetPort must name a tcp port']);
});

test('the contracts module states the upstream releases it mirrors per area: 31.6.0 (backup, Corestore endpoint and allocation, isolated restore, relay registrations), 32.23.0 (the rest the spec describes)', () => {
  assert.equal(commitinfo.name, '@serve.zone/interfaces');
  assert.equal(commitinfo.version, '32.23.0');
  assert.deepEqual(commitinfo.mirrors.map((mirror) => [mirror.package, mirror.from, mirror.version]), [
    ['@serve.zone/interfaces', '31.4.0', '31.6.0'],
    ['@serve.zone/interfaces', '32.21.0', '32.23.0'],
  ]);
  for (const area of ['cluster-node-corestore', 'corestore-allocation', 'isolated-restore', 'backup', 'cluster-relay-registrations']) {
    assert.equal(mirroredInterfacesVersion(area), '31.6.0', area);
  }
  for (const area of ['runtime-network', 'service-runtime-status', 'service-volume-initialization', 'runtime-local-storage-claims', 'cluster-ingress', 'corestore-legacy-adoption']) {
    assert.equal(mirroredInterfacesVersion(area), '32.23.0', area);
  }
  assert.equal(mirroredInterfacesVersion('audit'), null, 'an area no diff describes is the project\'s own');
  assert.ok(Object.isFrozen(commitinfo) && Object.isFrozen(commitinfo.mirrors) && Object.isFrozen(commitinfo.mirrors[0].areas[0]));
});
