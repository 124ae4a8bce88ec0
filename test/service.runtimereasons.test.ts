import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { assertFieldProblems } from './helpers/refusals.js';
import { connectHintedRelay } from './helpers/desiredstate.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import type { IService, IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import type { IServiceNetworkPolicy } from '../ts/interfaces/data/servicenetworkpolicy.js';
import type { IClusterRelayCapabilities } from '../ts/interfaces/data/clusterrelay.js';
import { serviceKind } from '../ts/manager.service/service.manager.js';
import { organizationKind } from '../ts/manager.service/organizations.js';

/**
 * A representative few of the runtime refusals and waits, through the server: the relay states its
 * runtime's capabilities in its registration and the verdicts of the cluster follow it (the
 * registration is an input of the reconciler); the limits of the runtime config; an observed
 * failure waits `failure-backoff` until the relay reports the revision ready.
 */

let t: ITestCloudly;
let clusterId: string;
let relay: CloudlyRelayClient;

const everything: IClusterRelayCapabilities = { platforms: ['database', 'objectstorage'], secrets: true, volumes: true, portProtocols: ['tcp', 'udp'] };

const register = (capabilitiesArg?: IClusterRelayCapabilities) =>
  relay.fire('registerClusterRelay', {
    registration: { origin: 'https://relay.reasons.example.com', version: '1.0.0', protocol: 'cluster-relay/1', ...(capabilitiesArg ? { capabilities: capabilitiesArg } : {}) },
  });

const spec = (overridesArg: Partial<IServiceWritableSpec> = {}): IServiceWritableSpec => ({
  name: 'app',
  organizationId: 'org-1',
  clusterId,
  runtime: { image: 'registry.example/app:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['n1'] } },
  volumes: [],
  ...overridesArg,
});

const create = async (overridesArg: Partial<IServiceWritableSpec> = {}) =>
  (await t.caller.call('createService', { service: spec(overridesArg) })).service;

const verdictOf = async (serviceIdArg: string): Promise<[string, string | null]> => {
  const { status } = await t.caller.call('getServiceRuntimeStatus', { serviceId: serviceIdArg });
  return [status.state, status.reason];
};

/** The reconciler judges asynchronously after a change commits: wait, bounded, for the verdict. */
const waitForVerdict = async (serviceIdArg: string, expectedArg: [string, string | null]) => {
  await waitFor(async () => {
    try {
      const [state, reason] = await verdictOf(serviceIdArg);
      return state === expectedArg[0] && reason === expectedArg[1];
    } catch {
      return false;
    }
  }, `service ${serviceIdArg} judged ${expectedArg.join(' ')}`, 10_000);
};

before(async () => {
  t = await startTestCloudly();
  const created = await t.createCluster('reasons');
  clusterId = created.cluster.id;
  await t.addNodes(clusterId, 'n1');
  relay = await connectHintedRelay(t, clusterId, created.relayToken, []);
});

after(async () => { await t.stop(); });

test('what the relay states its runtime supports refuses a service it cannot run, and a new statement judges it again', async () => {
  await register({ ...everything, portProtocols: ['tcp'], volumes: false });
  const udp = await create({ name: 'dns', ports: [{ name: 'dns', port: 53, protocol: 'udp' }] });
  await waitForVerdict(udp.id, ['refused', 'port-protocol-unsupported']);
  const withVolume = await create({ name: 'files', volumes: [{ mountPath: '/data', readOnly: false, driver: 'local' }] });
  await waitForVerdict(withVolume.id, ['refused', 'volumes-unsupported']);

  // The relay now states it runs udp and volumes: both are judged again without any change of theirs.
  await register(everything);
  await waitForVerdict(udp.id, ['converging', null]);
  await waitForVerdict(withVolume.id, ['refused', 'volume-initialization-unknown']);

  // A relay that states nothing claims nothing: nothing is refused as unsupported.
  await register();
  const tcp = await create({ name: 'web', ports: [{ name: 'http', port: 80, protocol: 'tcp' }] });
  await waitForVerdict(tcp.id, ['converging', null]);
});

test('the runtime config limits: more than 64 target ports and more replicas than one config carries are refused', async () => {
  const ports = Array.from({ length: 65 }, (_, index) => ({ name: `p${index}`, port: 2000 + index, protocol: 'tcp' as const }));
  const wide = await create({ name: 'wide', ports });
  await waitForVerdict(wide.id, ['refused', 'ports-too-many']);
  const many = await create({ name: 'many', runtime: { ...spec().runtime, replicas: 257, placement: { nodeIds: [] } } });
  await waitForVerdict(many.id, ['refused', 'replica-limit']);
});

test('an observed failure at the current revision waits failure-backoff until the relay reports it ready', async () => {
  const service = await create({ name: 'flaky' });
  await waitForVerdict(service.id, ['converging', null]);
  await t.cloudly.desiredStateManager.settled(clusterId);
  const answer = await relay.fire('getClusterPlatformDesiredState', {});
  const revision = answer.unchanged ? answer.revision : answer.desiredState.revision;
  const report = (stateArg: 'failed' | 'ready') => relay.fire('reportClusterPlatformObservedState', {
    desiredRevision: revision,
    services: [{ serviceId: service.id, nodeId: 'n1', specRevision: 1, replicas: stateArg === 'ready' ? 1 : 0, state: stateArg, reason: 'exit status 1' }],
  });
  await report('failed');
  await waitForVerdict(service.id, ['waiting', 'failure-backoff']);
  await report('ready');
  await waitForVerdict(service.id, ['converged', null]);
});

test('a hostname two services raced for waits conflict on the newer one until it lets the hostname go', async () => {
  const ports = [{ name: 'http', port: 8080, protocol: 'tcp' as const }];
  const readiness = { kind: 'http' as const, port: 'http', path: '/healthz' };
  const older = await create({ name: 'older', ports, readiness, routes: [{ hostname: 'raced.example.com', targetPort: 'http' }] });
  const newer = await create({ name: 'newer', ports, readiness, routes: [{ hostname: 'newer.example.com', targetPort: 'http' }] });
  await waitForVerdict(newer.id, ['converging', null]);
  // Two writes that both passed the hostname check before either committed: written directly, as
  // the losing one would have landed.
  const stored = (await t.cloudly.store.get(serviceKind, newer.id))!;
  await t.cloudly.store.swap(serviceKind, newer.id, stored.generation, {
    set: { routes: [{ hostname: 'raced.example.com', targetPort: 'http' }], specRevision: stored.specRevision + 1 },
  });
  await waitForVerdict(newer.id, ['waiting', 'conflict']);
  assert.deepEqual(await verdictOf(older.id), ['converging', null], 'the older service keeps the hostname');
  const current = (await t.caller.call('getServiceById', { serviceId: newer.id })).service;
  await t.caller.call('updateService', {
    serviceId: newer.id, expectedGeneration: current.generation,
    service: { ...spec({ name: 'newer', ports, readiness }), routes: [{ hostname: 'other.example.com', targetPort: 'http' }] },
  });
  await waitForVerdict(newer.id, ['converging', null]);
});

test('a service whose organization is missing from the registry is refused organization-missing until it is registered again', async () => {
  const service = await create({ name: 'orphan', organizationId: 'org-transient' });
  await waitForVerdict(service.id, ['converging', null]);
  // Creating the service registered the organization it named.
  const { organizations } = await t.caller.call('getOrganizations', {});
  const registered = organizations.find((organization) => organization.id === 'org-transient');
  assert.ok(registered, 'the organization the service named is registered');
  // deleteOrganization is refused while a service names it; the registry loses it only when a
  // deletion raced the service's creation (or was acknowledged before such deletions were refused).
  const refusal = await t.caller.call('deleteOrganization', { organizationId: 'org-transient', expectedGeneration: registered.generation })
    .then(() => null, (error: { errorData?: { reasons?: string[] } }) => error.errorData?.reasons);
  assert.deepEqual(refusal, ['organization-has-services']);
  assert.ok(await t.cloudly.store.remove(organizationKind, 'org-transient', registered.generation));
  await waitForVerdict(service.id, ['refused', 'organization-missing']);
  const again = await t.caller.call('createOrganization', { organization: { id: 'org-transient', name: 'Transient' } });
  assert.equal(again.organization.name, 'Transient');
  await waitForVerdict(service.id, ['converging', null]);
  const taken = await t.caller.call('createOrganization', { organization: { id: 'org-transient', name: 'Twice' } })
    .then(() => null, (error: { errorData?: { code?: string } }) => error.errorData?.code);
  assert.equal(taken, 'conflict');
});

test('a node whose runtime session resolved no workload authority is refused node-authority-unsupported at admission, until a session resolves one', async () => {
  const service = await create({ name: 'authority' });
  await waitForVerdict(service.id, ['converging', null]);
  await relay.fire('reportRuntimeNodeSession', { nodeId: 'n1', session: { id: 'session-a', generation: 1 }, resolvedWorkloadAuthorities: 0 });
  await waitForVerdict(service.id, ['refused', 'node-authority-unsupported']);
  await relay.fire('reportRuntimeNodeSession', { nodeId: 'n1', session: { id: 'session-a', generation: 2 }, resolvedWorkloadAuthorities: 1 });
  await waitForVerdict(service.id, ['converging', null]);
  // A session that states no count is not judged.
  await relay.fire('reportRuntimeNodeSession', { nodeId: 'n1', session: { id: 'session-a', generation: 3 }, resolvedWorkloadAuthorities: 0 });
  await waitForVerdict(service.id, ['refused', 'node-authority-unsupported']);
  await relay.fire('reportRuntimeNodeSession', { nodeId: 'n1', session: { id: 'session-a', generation: 4 } });
  await waitForVerdict(service.id, ['converging', null]);
});

test('network policy: a policy the cluster\'s network authority does not enforce is refused network-policy-missing, one it cannot express network-policy-mismatch, and a bad policy changes nothing', async () => {
  const mesh: IServiceNetworkPolicy = { egress: { kind: 'mesh' } };
  const destinations: IServiceNetworkPolicy = { egress: { kind: 'destinations', destinations: [{ host: 'api.example.com', port: 443, protocol: 'tcp' }, { host: '192.0.2.7', port: 53, protocol: 'udp' }] } };
  // The relay states its runtime's capabilities but no network authority: nothing would enforce a policy.
  await register(everything);
  const service = await create({ name: 'egress', networkPolicy: mesh });
  assert.deepEqual(service.networkPolicy, mesh);
  await waitForVerdict(service.id, ['refused', 'network-policy-missing']);
  const plain = await create({ name: 'no-policy' });
  await waitForVerdict(plain.id, ['converging', null]);

  await register({ ...everything, networkPolicy: { egress: ['none', 'mesh'] } });
  await waitForVerdict(service.id, ['converging', null]);

  // Named destinations are a new spec revision, and an egress this authority cannot express.
  const updated = (await t.caller.call('updateService', {
    serviceId: service.id, expectedGeneration: service.generation, service: spec({ name: 'egress', networkPolicy: destinations }),
  })).service;
  assert.equal(updated.specRevision, service.specRevision + 1);
  assert.deepEqual(updated.networkPolicy, destinations);
  await waitForVerdict(service.id, ['refused', 'network-policy-mismatch']);
  // An authority that expresses every egress but governs only a node the service is not placed on disagrees with the placement.
  await register({ ...everything, networkPolicy: { egress: ['none', 'mesh', 'destinations'], nodeIds: ['n2'] } });
  await waitForVerdict(service.id, ['refused', 'network-policy-mismatch']);
  await register({ ...everything, networkPolicy: { egress: ['none', 'mesh', 'destinations'], nodeIds: ['n1'] } });
  await waitForVerdict(service.id, ['converging', null]);

  // The relay receives the policy to enforce; a service without one has no such member.
  await t.cloudly.desiredStateManager.settled(clusterId);
  const answer = await relay.fire('getClusterPlatformDesiredState', {});
  assert.ok(!answer.unchanged);
  const desired = new Map(answer.desiredState.services.map((entry) => [entry.serviceId, entry]));
  assert.deepEqual(desired.get(service.id)?.networkPolicy, destinations);
  assert.equal(Object.hasOwn(desired.get(plain.id) ?? {}, 'networkPolicy'), false);

  // The audit shows what the update changed.
  const audited = (await t.caller.call('getAuditEvents', { filter: { targetKind: 'CloudlyService', targetId: service.id } })).events;
  const update = audited.find((event) => event.method === 'updateService');
  assert.ok(update?.changed?.some((change) => change.field.startsWith('networkPolicy')), JSON.stringify(update));

  // Bad input: every reason named, nothing stored, nothing changed.
  const before: IService = (await t.caller.call('getServiceById', { serviceId: service.id })).service;
  const { services: servicesBefore } = await t.caller.call('getServices', { clusterId });
  const broken = {
    egress: {
      kind: 'destinations',
      destinations: [
        { host: 'API.example.com', port: 0, protocol: 'icmp' },
        { host: '300.1.1.1', port: 443, protocol: 'tcp', via: 'proxy' },
        { host: 'db.example.com', port: 5432, protocol: 'tcp' },
        { host: 'db.example.com', port: 5432, protocol: 'tcp' },
      ],
    },
    default: 'deny',
  } as unknown as IServiceNetworkPolicy;
  const expected = [
    ['request.service.networkPolicy.default', 'field-unknown'],
    ['request.service.networkPolicy.egress.destinations[0].host', 'field-invalid', 'must be a lowercase DNS name or an IPv4 address'],
    ['request.service.networkPolicy.egress.destinations[0].port', 'field-invalid', 'must be an integer from 1 to 65535'],
    ['request.service.networkPolicy.egress.destinations[0].protocol', 'field-invalid', 'must be tcp or udp'],
    ['request.service.networkPolicy.egress.destinations[1].via', 'field-unknown'],
    ['request.service.networkPolicy.egress.destinations[1].host', 'field-invalid'],
    ['request.service.networkPolicy.egress.destinations[3]', 'field-duplicate', 'repeats the host, port and protocol of an earlier destination'],
  ] as const;
  assertFieldProblems(await refusalOf(() => t.caller.call('createService', { service: spec({ name: 'bad-egress', networkPolicy: broken }) })), expected);
  assertFieldProblems(await refusalOf(() => t.caller.call('updateService', {
    serviceId: service.id, expectedGeneration: before.generation, service: spec({ name: 'egress', networkPolicy: broken }),
  })), expected);
  assertFieldProblems(await refusalOf(() => t.caller.call('createService', {
    service: spec({ name: 'bad-kind', networkPolicy: { egress: { kind: 'open' } } as unknown as IServiceNetworkPolicy }),
  })), [['request.service.networkPolicy.egress', 'field-invalid', "must be { kind: 'none' }, { kind: 'mesh' } or { kind: 'destinations', destinations }"]]);
  assertFieldProblems(await refusalOf(() => t.caller.call('createService', {
    service: spec({ name: 'bad-list', networkPolicy: { egress: { kind: 'destinations', destinations: [] } } }),
  })), [['request.service.networkPolicy.egress.destinations', 'field-invalid', 'must be an array of 1 to 64 destinations']]);
  assertFieldProblems(await refusalOf(() => t.caller.call('createService', {
    service: spec({ name: 'bad-none', networkPolicy: { egress: { kind: 'none', destinations: [] } } as unknown as IServiceNetworkPolicy }),
  })), [['request.service.networkPolicy.egress.destinations', 'field-unknown', 'is not a known member']]);
  // A dry run answers the policy it would store and stores nothing.
  const dry = await t.caller.call('updateService', {
    serviceId: service.id, expectedGeneration: before.generation, service: spec({ name: 'egress', networkPolicy: { egress: { kind: 'none' } } }), dryRun: true,
  } as never) as unknown as { service: IService };
  assert.deepEqual(dry.service.networkPolicy, { egress: { kind: 'none' } });
  assert.deepEqual((await t.caller.call('getServiceById', { serviceId: service.id })).service, before);
  assert.deepEqual((await t.caller.call('getServices', { clusterId })).services.map((entry) => entry.id), servicesBefore.map((entry) => entry.id));

  // Back to a relay that states nothing, for any test after this one.
  await register();
});
