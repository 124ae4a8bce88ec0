import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { upstreamExamplePlan } from './runtimenetwork.fixture.js';
import {
  admitRuntimeNetworkAddressPlanChange,
  admitRuntimeNetworkProjection,
  computeRuntimeNetworkProjectionDigest,
  deriveRuntimeNetworkWorkloadGrantWithdrawals,
  deriveRuntimeNetworkWorkloadIngressWithdrawals,
  describeRuntimeNetworkProjectionApplication,
  getRuntimeNetworkProjectionWorkloadIngressPacketGrants,
  runtimeNetworkAddressPlanContract,
  runtimeNetworkProjectionContract,
  runtimeNetworkWorkloadIngressContract,
  sealRuntimeNetworkProjection,
  validateRuntimeNetworkAddressPlan,
  validateRuntimeNetworkProjection,
  type IRuntimeNetworkAddressPlan,
  type IRuntimeNetworkEndpoint,
  type IRuntimeNetworkProjection,
  type IRuntimeNetworkWorkloadGrant,
  type IRuntimeNetworkWorkloadIngressGrant,
  type IRuntimeNetworkWorkloadIngressWithdrawal,
  type TRuntimeNetworkProjectionContent,
} from '../ts/interfaces/data/index.js';
import { canonicalizeJson, computeDomainDigestHex } from '../ts/interfaces/private/canonicaljson.js';

// ---------------------------------------------------------------------------------------------
// Fixtures: node-a's projection. The ingress workload runs on node-a; web on node-b; api on node-a;
// far and far2 both on node-c (a grant between those two has no end on node-a).

const lease = (id: string, generation = 1) => ({ id, generation });

const endpoint = (id: string, nodeId: string, address: string, generation = 1): IRuntimeNetworkEndpoint => ({
  lease: lease(id, generation), nodeId, address,
});

const baseEndpoints = (): IRuntimeNetworkEndpoint[] => [
  endpoint('api', 'node-a', '10.64.0.4'),
  endpoint('far', 'node-c', '10.64.0.5'),
  endpoint('far2', 'node-c', '10.64.0.6'),
  endpoint('ingress', 'node-a', '10.64.0.2'),
  endpoint('web', 'node-b', '10.64.0.3'),
];

const ingressGrant = (
  sourceId: string,
  destinationId: string,
  protocol: 'tcp' | 'udp',
  port: number,
  routeId = 'route-1',
): IRuntimeNetworkWorkloadIngressGrant => ({
  source: lease(sourceId), destination: lease(destinationId), protocol, port,
  authorization: { kind: 'cluster-ingress-route', routeId },
});

const withdrawal = (
  sourceId: string,
  destinationId: string,
  protocol: 'tcp' | 'udp',
  port: number,
  generation: number,
): IRuntimeNetworkWorkloadIngressWithdrawal => ({
  source: lease(sourceId), destination: lease(destinationId), protocol, port, generation,
});

const meshGrant = (sourceId: string, destinationId: string, port = 8080, protocol: 'tcp' | 'udp' = 'tcp', sourceGeneration = 1): IRuntimeNetworkWorkloadGrant => ({
  source: lease(sourceId, sourceGeneration), destination: lease(destinationId), protocol, port,
});

const baseContent = (): TRuntimeNetworkProjectionContent => ({
  id: 'cluster-1.node-a',
  generation: 1,
  previous: null,
  controller: { kind: 'cloudly' },
  nodeId: 'node-a',
  endpoints: baseEndpoints(),
  grants: [meshGrant('api', 'web')],
});

const seal = (contentArg: Partial<TRuntimeNetworkProjectionContent> = {}): IRuntimeNetworkProjection =>
  sealRuntimeNetworkProjection({ ...baseContent(), ...contentArg });

/** The projection that follows `previous` with the given changes, sealed. */
const follow = (
  previousArg: IRuntimeNetworkProjection,
  contentArg: Partial<TRuntimeNetworkProjectionContent>,
): IRuntimeNetworkProjection => {
  const { digest: _digest, workloadIngress: _ingress, hostPlatformEndpointIds: _host, withdrawals: _withdrawals, ...rest } = previousArg;
  return sealRuntimeNetworkProjection({
    ...rest,
    generation: previousArg.generation + 1,
    previous: { generation: previousArg.generation, digest: previousArg.digest },
    ...contentArg,
  });
};

/** Re-seals a projection after an edit so only the edited rule can fail. */
const reseal = (projectionArg: IRuntimeNetworkProjection, editArg: (draft: Record<string, unknown>) => void) => {
  const draft = JSON.parse(JSON.stringify(projectionArg)) as Record<string, unknown>;
  delete draft.digest;
  editArg(draft);
  return { ...draft, digest: computeDomainDigestHex(runtimeNetworkProjectionContract.digestDomain, draft) };
};

const reasonsMatching = (reasonsArg: string[], patternArg: RegExp): string[] =>
  reasonsArg.filter((reason) => patternArg.test(reason));

const assertOnlyReason = (valueArg: unknown, patternArg: RegExp, optionsArg = {}): void => {
  const reasons = validateRuntimeNetworkProjection(valueArg, optionsArg);
  assert.equal(reasons.length, 1, `expected exactly one reason, got ${JSON.stringify(reasons)}`);
  assert.match(reasons[0], patternArg);
};

const withIngress = (grantsArg: IRuntimeNetworkWorkloadIngressGrant[], withdrawalsArg?: IRuntimeNetworkWorkloadIngressWithdrawal[]) => ({
  workloadIngress: withdrawalsArg === undefined ? { grants: grantsArg } : { grants: grantsArg, withdrawals: withdrawalsArg },
});

// ---------------------------------------------------------------------------------------------

describe('runtime network projection: shape and base members', () => {
  test('a sealed projection without optional members is valid', () => {
    assert.deepEqual(validateRuntimeNetworkProjection(seal()), []);
  });

  test('a projection carrying workload ingress and host platform endpoints is valid', () => {
    const projection = seal({
      ...withIngress([ingressGrant('ingress', 'api', 'tcp', 8080), ingressGrant('ingress', 'web', 'tcp', 80)]),
      hostPlatformEndpointIds: ['corestore', 'relay'],
    });
    assert.deepEqual(validateRuntimeNetworkProjection(projection, { platformEndpointIds: ['corestore', 'relay', 'x'] }), []);
  });

  test('non-objects, arrays and unknown members are refused with one shape reason', () => {
    for (const value of [null, 1, 'x', [], [seal()], new Date()]) {
      const reasons = validateRuntimeNetworkProjection(value);
      assert.equal(reasons.length, 1);
    }
    assertOnlyReason({ ...seal(), extra: true }, /^projection must be an object with the keys/);
    const { grants: _grants, ...missing } = seal();
    assertOnlyReason(missing, /^projection must be an object with the keys/);
  });

  test('id, generation, nodeId and controller are judged each with its own path', () => {
    assertOnlyReason(reseal(seal(), (d) => { d.id = '-bad'; }), /^projection\.id must be a canonical id/);
    assertOnlyReason(reseal(seal(), (d) => { d.generation = 0; }), /^projection\.generation must be a positive integer/);
    assertOnlyReason(reseal(seal(), (d) => { d.nodeId = ''; }), /^projection\.nodeId must be a canonical id/);
    assertOnlyReason(reseal(seal(), (d) => { d.controller = { kind: 'coreflow' }; }), /^projection\.controller\.kind must be one of cloudly, onebox/);
    assertOnlyReason(reseal(seal(), (d) => { d.controller = { kind: 'cloudly', extra: 1 }; }), /^projection\.controller must be an object/);
  });

  test('previous is null exactly at generation 1 and names generation - 1 otherwise', () => {
    const first = seal();
    assertOnlyReason(reseal(first, (d) => { d.generation = 2; }), /^projection\.previous must name the predecessor of generation 2/);
    assertOnlyReason(reseal(first, (d) => { d.previous = { generation: 1, digest: first.digest }; }), /^projection\.previous must be null at generation 1/);
    const second = follow(first, {});
    assert.deepEqual(validateRuntimeNetworkProjection(second), []);
    assertOnlyReason(reseal(second, (d) => { d.previous = { generation: 5, digest: first.digest }; }), /^projection\.previous\.generation must be 1/);
    assertOnlyReason(reseal(second, (d) => { d.previous = { generation: 1, digest: 'ABC' }; }), /^projection\.previous\.digest must be a lowercase sha256/);
    assertOnlyReason(reseal(second, (d) => { d.previous = { generation: 1 }; }), /^projection\.previous must be null or an object/);
  });

  test('the digest must be a sha256 hex of exactly the content', () => {
    assertOnlyReason({ ...seal(), digest: 'nope' }, /^projection\.digest must be a lowercase sha256 hex digest/);
    assertOnlyReason({ ...seal(), digest: '0'.repeat(64) }, /^projection\.digest must be the digest of the projection's content/);
  });
});

describe('runtime network projection: endpoints and full-mesh grants', () => {
  test('every endpoint rule is refused with its own reason', () => {
    const cases: Array<[(d: Record<string, unknown>) => void, RegExp]> = [
      [(d) => { d.endpoints = {}; }, /^projection\.endpoints must be a list of at most 2048 endpoints/],
      [(d) => { (d.endpoints as unknown[])[0] = { lease: lease('api'), nodeId: 'node-a' }; }, /^projection\.endpoints\[0\] must be an object with exactly the keys lease, nodeId, address/],
      [(d) => { (d.endpoints as IRuntimeNetworkEndpoint[])[1].address = '127.0.0.1'; }, /^projection\.endpoints\[1\]\.address must be a unicast IPv4 address/],
      [(d) => { (d.endpoints as IRuntimeNetworkEndpoint[])[1].address = '10.64.0.4'; }, /^projection\.endpoints\[1\]\.address must differ from every other endpoint's address/],
      [(d) => { (d.endpoints as IRuntimeNetworkEndpoint[])[1].nodeId = 'node c'; }, /^projection\.endpoints\[1\]\.nodeId must be a canonical id/],
    ];
    for (const [edit, pattern] of cases) {
      assertOnlyReason(reseal(seal({ grants: [] }), edit), pattern);
    }
    const badLease = validateRuntimeNetworkProjection(reseal(seal({ grants: [] }), (d) => {
      (d.endpoints as IRuntimeNetworkEndpoint[])[1].lease = { id: 'far', generation: 0 };
    }));
    assert.deepEqual(badLease, ['projection.endpoints[1].lease must be a lease reference { id, generation }']);
  });

  test('endpoints are unique and sorted by lease id', () => {
    const reordered = baseEndpoints().reverse();
    const reasons = validateRuntimeNetworkProjection(seal({ endpoints: reordered, grants: [] }));
    assert.equal(reasonsMatching(reasons, /must follow the endpoint before it in lease id order/).length, 4);
    const duplicated = [...baseEndpoints().slice(0, 1), endpoint('api', 'node-a', '10.64.0.9')];
    assertOnlyReason(seal({ endpoints: duplicated, grants: [] }), /^projection\.endpoints\[1\]\.lease\.id must name each lease once/);
  });

  test('full-mesh grants join two different endpoints on one declared port, unique and ordered', () => {
    assertOnlyReason(seal({ grants: [meshGrant('api', 'api')] }), /^projection\.grants\[0\]\.destination must be a different lease/);
    assertOnlyReason(seal({ grants: [meshGrant('api', 'gone')] }), /^projection\.grants\[0\]\.destination must be exactly the lease of one of the projection's endpoints/);
    assertOnlyReason(seal({ grants: [meshGrant('api', 'web', 8080, 'tcp', 2)] }), /^projection\.grants\[0\]\.source must be exactly the lease/);
    const pair = meshGrant('api', 'web');
    assertOnlyReason(seal({ grants: [pair, pair] }), /^projection\.grants\[1\] repeats the grant before it/);
    assertOnlyReason(seal({ grants: [pair, meshGrant('api', 'far')] }), /^projection\.grants\[1\] must follow the grant before it in \[source\.id, destination\.id, protocol, port\] order/);
    assertOnlyReason(seal({ grants: [meshGrant('api', 'web', 9090), meshGrant('api', 'web', 8080)] }), /^projection\.grants\[1\] must follow the grant before it/);
    assertOnlyReason(seal({ grants: [{ source: lease('api'), destination: lease('web') }] as never }), /^projection\.grants\[0\] must be an object with exactly the keys source, destination, protocol, port/);
    assertOnlyReason(seal({ grants: [meshGrant('api', 'web', 0)] }), /^projection\.grants\[0\]\.port must be the destination's listening port/);
    assertOnlyReason(seal({ grants: [meshGrant('api', 'web', 80, 'sctp' as never)] }), /^projection\.grants\[0\]\.protocol must be one of/);
  });

  test('a full-mesh grant between two endpoints of other nodes is refused: one end must be on the projection\'s node', () => {
    assertOnlyReason(seal({ grants: [meshGrant('far', 'web')] }), /^projection\.grants\[0\] must have its source or its destination placed on the projection's node/);
  });
});

describe('runtime network projection: workloadIngress', () => {
  test('only cloudly projections may carry it', () => {
    const onebox = seal({ controller: { kind: 'onebox' }, ...withIngress([]) });
    assertOnlyReason(onebox, /^projection\.workloadIngress is allowed only on cloudly projections, not on onebox/);
    assert.deepEqual(validateRuntimeNetworkProjection(seal({ controller: { kind: 'onebox' } })), []);
  });

  test('its shape is { grants, withdrawals? }', () => {
    assertOnlyReason(seal({ workloadIngress: { grants: [], extra: 1 } as never }), /^projection\.workloadIngress must be an object with the key grants/);
    assertOnlyReason(seal({ workloadIngress: [] as never }), /^projection\.workloadIngress must be an object/);
  });

  test('each grant rule is refused with its own reason', () => {
    const cases: Array<[IRuntimeNetworkWorkloadIngressGrant[], RegExp]> = [
      [[ingressGrant('ingress', 'gone', 'tcp', 80)], /^projection\.workloadIngress\.grants\[0\]\.destination must be exactly the lease of one of the projection's endpoints/],
      [[{ ...ingressGrant('ingress', 'web', 'tcp', 80), source: lease('ingress', 7) }], /^projection\.workloadIngress\.grants\[0\]\.source must be exactly the lease of one of the projection's endpoints/],
      [[ingressGrant('ingress', 'ingress', 'tcp', 80)], /^projection\.workloadIngress\.grants\[0\]\.destination must be a different lease than/],
      [[ingressGrant('far', 'far2', 'tcp', 80)], /^projection\.workloadIngress\.grants\[0\] must have its source or its destination placed on the projection's node/],
      [[ingressGrant('ingress', 'web', 'sctp' as 'tcp', 80)], /^projection\.workloadIngress\.grants\[0\]\.protocol must be one of tcp, udp/],
      [[ingressGrant('ingress', 'web', 'tcp', 0)], /^projection\.workloadIngress\.grants\[0\]\.port must be the destination's listening port/],
      [[ingressGrant('ingress', 'web', 'tcp', 65_536)], /^projection\.workloadIngress\.grants\[0\]\.port must be/],
      [[ingressGrant('ingress', 'web', 'tcp', 80, '')], /^projection\.workloadIngress\.grants\[0\]\.authorization must be/],
      [[{ ...ingressGrant('ingress', 'web', 'tcp', 80), authorization: { kind: 'other', routeId: 'r' } as never }], /authorization must be/],
      [[{ source: lease('ingress'), destination: lease('web'), protocol: 'tcp', port: 80 } as never], /^projection\.workloadIngress\.grants\[0\] must be an object with exactly the keys source, destination, protocol, port, authorization/],
    ];
    for (const [grants, pattern] of cases) {
      assertOnlyReason(seal(withIngress(grants)), pattern);
    }
  });

  test('a grant with only its source on the node, or only its destination, is admitted', () => {
    assert.deepEqual(validateRuntimeNetworkProjection(seal(withIngress([ingressGrant('ingress', 'web', 'tcp', 80)]))), []);
    assert.deepEqual(validateRuntimeNetworkProjection(seal(withIngress([ingressGrant('far', 'api', 'tcp', 80)]))), []);
  });

  test('grants are unique and strictly ordered by [source.id, destination.id, protocol, port]', () => {
    const ordered = [
      ingressGrant('far', 'api', 'tcp', 80),
      ingressGrant('ingress', 'api', 'tcp', 80),
      ingressGrant('ingress', 'api', 'tcp', 443),
      ingressGrant('ingress', 'api', 'udp', 53),
      ingressGrant('ingress', 'web', 'tcp', 80),
    ];
    assert.deepEqual(validateRuntimeNetworkProjection(seal(withIngress(ordered))), []);
    for (let index = 1; index < ordered.length; index++) {
      const swapped = [...ordered];
      [swapped[index - 1], swapped[index]] = [swapped[index], swapped[index - 1]];
      assertOnlyReason(seal(withIngress(swapped)), new RegExp(`^projection\\.workloadIngress\\.grants\\[${index}\\] must follow the grant before it in \\[source\\.id, destination\\.id, protocol, port\\] order`));
    }
    // The authorization is content, not identity: the same grant twice is a repeat.
    assertOnlyReason(seal(withIngress([ingressGrant('ingress', 'web', 'tcp', 80, 'r1'), ingressGrant('ingress', 'web', 'tcp', 80, 'r2')])),
      /^projection\.workloadIngress\.grants\[1\] repeats the grant before it/);
    // Ports order numerically, not as text ("443" < "80" as text).
    assertOnlyReason(seal(withIngress([ingressGrant('ingress', 'web', 'tcp', 443), ingressGrant('ingress', 'web', 'tcp', 80)])),
      /grants\[1\] must follow the grant before it/);
  });

  test('1,024 grants are admitted and 1,025 refused', () => {
    assert.equal(runtimeNetworkWorkloadIngressContract.maximumGrants, 1_024);
    const maximal = buildManyGrantProjection(1_024);
    assert.deepEqual(validateRuntimeNetworkProjection(maximal), []);
    const over = buildManyGrantProjection(1_025);
    assertOnlyReason(over, /^projection\.workloadIngress\.grants must be a list of at most 1024 grants/);
  });
});

/** One ingress lease on node-a granted to `countArg` targets on node-b, port 8080 each. */
const buildManyGrantProjection = (countArg: number): IRuntimeNetworkProjection => {
  const targets = Array.from({ length: countArg }, (_, index) => `target-${String(index).padStart(5, '0')}`);
  const endpoints = [
    endpoint('ingress', 'node-a', '10.63.255.254'),
    ...targets.map((id, index) => endpoint(id, 'node-b', `10.64.${Math.floor(index / 250)}.${(index % 250) + 1}`)),
  ];
  return seal({
    endpoints,
    grants: [],
    ...withIngress(targets.map((id) => ingressGrant('ingress', id, 'tcp', 8080))),
  });
};

describe('runtime network projection: withdrawals in one projection', () => {
  const second = (withdrawalsArg: unknown, grantsArg = [ingressGrant('ingress', 'web', 'tcp', 80)]) =>
    follow(seal(), { workloadIngress: { grants: grantsArg, withdrawals: withdrawalsArg as IRuntimeNetworkWorkloadIngressWithdrawal[] } });

  test('withdrawals are never empty when present and name a generation from 2 to the projection\'s', () => {
    assert.deepEqual(validateRuntimeNetworkProjection(second([withdrawal('ingress', 'api', 'tcp', 80, 2)])), []);
    assertOnlyReason(second([]), /^projection\.workloadIngress\.withdrawals must be omitted or a list of 1 to 4096 withdrawals/);
    assertOnlyReason(second([withdrawal('ingress', 'api', 'tcp', 80, 3)]), /withdrawals\[0\]\.generation must name a generation from 2 to the projection's own/);
    assertOnlyReason(second([withdrawal('ingress', 'api', 'tcp', 80, 1)]), /withdrawals\[0\]\.generation must name a generation/);
    assertOnlyReason(reseal(second([withdrawal('ingress', 'api', 'tcp', 80, 2)]), (d) => {
      ((d.workloadIngress as { withdrawals: Record<string, unknown>[] }).withdrawals[0]).authorization = {};
    }), /^projection\.workloadIngress\.withdrawals\[0\] must be an object with exactly the keys source, destination, protocol, port, generation/);
  });

  test('a withdrawal may name leases that are no longer endpoints', () => {
    assert.deepEqual(validateRuntimeNetworkProjection(second([withdrawal('ingress', 'gone', 'tcp', 80, 2)])), []);
  });

  test('a withdrawal of a grant the projection still carries is a current denial', () => {
    assertOnlyReason(second([withdrawal('ingress', 'web', 'tcp', 80, 2)]), /^projection\.workloadIngress\.withdrawals\[0\] denies a grant the projection still carries/);
  });

  test('withdrawals are unique and ordered, lease generations breaking ties', () => {
    const ordered = [
      { ...withdrawal('ingress', 'gone', 'tcp', 80, 2), destination: lease('gone', 1) },
      { ...withdrawal('ingress', 'gone', 'tcp', 80, 2), destination: lease('gone', 2) },
      withdrawal('ingress', 'gone', 'udp', 80, 2),
    ];
    assert.deepEqual(validateRuntimeNetworkProjection(second(ordered)), []);
    assertOnlyReason(second([ordered[1], ordered[0]]), /withdrawals\[1\] must follow the withdrawal before it/);
    assertOnlyReason(second([ordered[0], ordered[0]]), /withdrawals\[1\] repeats the withdrawal before it/);
  });

  test('4,096 withdrawals are admitted and 4,097 refused', () => {
    assert.equal(runtimeNetworkWorkloadIngressContract.maximumRetainedWithdrawals, 4_096);
    assert.deepEqual(validateRuntimeNetworkProjection(second(manyWithdrawals(4_096, 2))), []);
    assertOnlyReason(second(manyWithdrawals(4_097, 2)), /^projection\.workloadIngress\.withdrawals must be omitted or a list of 1 to 4096 withdrawals/);
  });
});

const manyWithdrawals = (countArg: number, generationArg: number): IRuntimeNetworkWorkloadIngressWithdrawal[] =>
  Array.from({ length: countArg }, (_, index) =>
    withdrawal('ingress', `gone-${String(index).padStart(5, '0')}`, 'tcp', 8080, generationArg));

describe('runtime network projection: withdrawals of full-mesh grants', () => {
  const meshWithdrawal = (sourceId: string, destinationId: string, generation: number, port = 8080) => ({ ...meshGrant(sourceId, destinationId, port), generation });

  test('a withdrawn full-mesh grant is stamped, may name gone leases, never denies a carried grant, and is ordered', () => {
    const first = seal();
    assert.deepEqual(validateRuntimeNetworkProjection(follow(first, { grants: [], withdrawals: [meshWithdrawal('api', 'web', 2)] })), []);
    assert.deepEqual(validateRuntimeNetworkProjection(follow(first, { withdrawals: [meshWithdrawal('api', 'gone', 2)] })), []);
    assertOnlyReason(follow(first, { withdrawals: [meshWithdrawal('api', 'web', 2)] }), /^projection\.withdrawals\[0\] denies a grant the projection still carries/);
    assertOnlyReason(follow(first, { grants: [], withdrawals: [meshWithdrawal('api', 'web', 3)] }), /^projection\.withdrawals\[0\]\.generation must name a generation from 2/);
    assertOnlyReason(follow(first, { withdrawals: [] }), /^projection\.withdrawals must be omitted or a list of 1 to 4096 withdrawals/);
    assertOnlyReason(follow(first, { withdrawals: [meshWithdrawal('api', 'gone', 2, 90), meshWithdrawal('api', 'gone', 2, 80)] }), /^projection\.withdrawals\[1\] must follow the withdrawal before it/);
  });

  test('an omitted full-mesh grant needs its exact withdrawal; the derived withdrawals are admitted', () => {
    const first = seal({ grants: [meshGrant('api', 'web', 8080), meshGrant('web', 'api', 9090)] });
    const silent = follow(first, { grants: [meshGrant('web', 'api', 9090)] });
    assert.deepEqual(admitRuntimeNetworkProjection(first, silent), {
      admitted: false, reasons: ['next.withdrawals must withdraw the omitted grant api -> web tcp/8080 at generation 2'],
    });
    const withdrawals = deriveRuntimeNetworkWorkloadGrantWithdrawals(first, [meshGrant('web', 'api', 9090)], 2, null);
    assert.deepEqual(withdrawals, [meshWithdrawal('api', 'web', 2)]);
    assert.equal(admitRuntimeNetworkProjection(first, follow(first, { grants: [meshGrant('web', 'api', 9090)], withdrawals: withdrawals! })).admitted, true);
  });

  test('mesh withdrawals carry forward until the node applied the projection that first carried them', () => {
    const first = seal();
    const second = follow(first, { grants: [], withdrawals: [meshWithdrawal('api', 'web', 2)] });
    const dropped = follow(second, { grants: [] });
    assert.deepEqual(admitRuntimeNetworkProjection(second, dropped), {
      admitted: false,
      reasons: ['next.withdrawals must carry forward the withdrawal of api -> web tcp/8080 (generation 2) until the preceding projection\'s application is supplied'],
    });
    assert.deepEqual(deriveRuntimeNetworkWorkloadGrantWithdrawals(second, [], 3, null), [meshWithdrawal('api', 'web', 2)]);
    const application = describeRuntimeNetworkProjectionApplication(second);
    assert.deepEqual(deriveRuntimeNetworkWorkloadGrantWithdrawals(second, [], 3, application), []);
    assert.equal(admitRuntimeNetworkProjection(second, dropped, { application }).admitted, true);
    // Granted again: the withdrawal is not carried, and none is needed.
    assert.deepEqual(deriveRuntimeNetworkWorkloadGrantWithdrawals(second, [meshGrant('api', 'web')], 3, null), []);
  });
});

describe('runtime network projection: hostPlatformEndpointIds', () => {
  test('sorted, unique, never empty, canonical ids, each a current platform endpoint', () => {
    assert.deepEqual(validateRuntimeNetworkProjection(seal({ hostPlatformEndpointIds: ['corestore', 'relay'] })), []);
    assertOnlyReason(seal({ hostPlatformEndpointIds: [] }), /^projection\.hostPlatformEndpointIds must be omitted or a list of 1 to 64/);
    assertOnlyReason(seal({ hostPlatformEndpointIds: ['relay', 'corestore'] }), /^projection\.hostPlatformEndpointIds\[1\] must follow the id before it in sorted order/);
    assertOnlyReason(seal({ hostPlatformEndpointIds: ['relay', 'relay'] }), /^projection\.hostPlatformEndpointIds\[1\] repeats the id before it/);
    assertOnlyReason(seal({ hostPlatformEndpointIds: ['no spaces'] }), /^projection\.hostPlatformEndpointIds\[0\] must be a canonical id/);
    assertOnlyReason(seal({ hostPlatformEndpointIds: ['corestore', 'relay'] }),
      /^projection\.hostPlatformEndpointIds\[0\] must be a current platform endpoint of the authority/, { platformEndpointIds: ['relay'] });
  });
});

describe('runtime network projection: canonical bytes and digest', () => {
  test('a projection without the optional members keeps exactly its base canonical bytes and digest', () => {
    const projection = seal();
    const baseLiteral = {
      id: 'cluster-1.node-a',
      generation: 1,
      previous: null,
      controller: { kind: 'cloudly' },
      nodeId: 'node-a',
      endpoints: baseEndpoints(),
      grants: [{ source: lease('api'), destination: lease('web'), protocol: 'tcp', port: 8080 }],
    };
    const { digest, ...content } = projection;
    assert.equal(canonicalizeJson(content), canonicalizeJson(baseLiteral));
    assert.equal(digest, computeDomainDigestHex('serve.zone/runtime-network-projection', baseLiteral));
    assert.equal(digest, computeRuntimeNetworkProjectionDigest(baseLiteral as TRuntimeNetworkProjectionContent));
    // Pinned: a change to the canonical form or the domain would silently re-digest every projection.
    assert.equal(digest, 'd41767bde2bf0df2939481f7212373851440ebb1603a60822e30613898acb8b8');
    // The pin from before full-mesh grants named their port: the same bytes still give the same digest.
    const beforePorts = { ...baseLiteral, grants: [{ source: lease('api'), destination: lease('web') }] };
    assert.equal(computeDomainDigestHex('serve.zone/runtime-network-projection', beforePorts), 'b5bf913ec16934e1aa28285aee6ced39f481d103bedef2a6c5a4d763ff9342ae');
  });

  test('adding the optional members changes the digest; omitting them restores it exactly', () => {
    const plain = seal();
    const withMembers = seal({ ...withIngress([ingressGrant('ingress', 'web', 'tcp', 80)]), hostPlatformEndpointIds: ['relay'] });
    assert.notEqual(withMembers.digest, plain.digest);
    const { workloadIngress: _w, hostPlatformEndpointIds: _h, digest: _d, ...stripped } = withMembers;
    assert.equal(sealRuntimeNetworkProjection(stripped).digest, plain.digest);
  });

  test('the authorization is signed content: changing it changes the digest', () => {
    const one = seal(withIngress([ingressGrant('ingress', 'web', 'tcp', 80, 'r1')]));
    const two = seal(withIngress([ingressGrant('ingress', 'web', 'tcp', 80, 'r2')]));
    assert.notEqual(one.digest, two.digest);
  });
});

describe('getRuntimeNetworkProjectionWorkloadIngressPacketGrants', () => {
  test('answers detached packet grants of a valid projection', () => {
    const input = JSON.parse(JSON.stringify(seal(withIngress([ingressGrant('ingress', 'api', 'tcp', 8080), ingressGrant('ingress', 'web', 'udp', 53)]))));
    const answer = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(input);
    assert.equal(answer.valid, true);
    if (!answer.valid) return;
    assert.deepEqual(answer.grants, [
      { source: { id: 'ingress', generation: 1 }, destination: { lease: { id: 'api', generation: 1 }, protocol: 'tcp', port: 8080 } },
      { source: { id: 'ingress', generation: 1 }, destination: { lease: { id: 'web', generation: 1 }, protocol: 'udp', port: 53 } },
    ]);
    assert.deepEqual(answer.withdrawals, []);
    input.workloadIngress.grants[0].source.id = 'changed';
    assert.equal(answer.grants[0].source.id, 'ingress');
    assert.ok(Object.isFrozen(answer.grants[0]) && Object.isFrozen(answer.grants[0].destination.lease));
  });

  test('a projection without workloadIngress answers no packet grants', () => {
    assert.deepEqual(getRuntimeNetworkProjectionWorkloadIngressPacketGrants(seal()), { valid: true, grants: [], withdrawals: [] });
  });

  test('validates the complete projection, not only its workload ingress', () => {
    const answer = getRuntimeNetworkProjectionWorkloadIngressPacketGrants({ ...seal(withIngress([ingressGrant('ingress', 'web', 'tcp', 80)])), id: 'cluster-1.node-z' });
    assert.equal(answer.valid, false);
    if (answer.valid) return;
    assert.match(answer.reasons.join('\n'), /digest must be the digest of the projection's content/);
  });

  test('an omitted grant needs its exact withdrawal', () => {
    const first = seal(withIngress([ingressGrant('ingress', 'api', 'tcp', 80), ingressGrant('ingress', 'web', 'tcp', 80)]));
    const silent = follow(first, withIngress([ingressGrant('ingress', 'web', 'tcp', 80)]));
    const refused = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(silent, { previous: first });
    assert.equal(refused.valid, false);
    assert.deepEqual(refused.valid ? [] : refused.reasons, [
      'next.workloadIngress.withdrawals must withdraw the omitted grant ingress -> api tcp/80 at generation 2',
    ]);
    const explicit = follow(first, withIngress([ingressGrant('ingress', 'web', 'tcp', 80)], [withdrawal('ingress', 'api', 'tcp', 80, 2)]));
    const admitted = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(explicit, { previous: first });
    assert.equal(admitted.valid, true);
    assert.deepEqual(admitted.valid ? admitted.withdrawals : null, [
      { source: { id: 'ingress', generation: 1 }, destination: { lease: { id: 'api', generation: 1 }, protocol: 'tcp', port: 80 } },
    ]);
  });

  test('a withdrawal that is not exact, or of something never granted, is an unknown denial', () => {
    const first = seal(withIngress([ingressGrant('ingress', 'api', 'tcp', 80)]));
    const wrongPort = follow(first, withIngress([], [withdrawal('ingress', 'api', 'tcp', 81, 2)]));
    const answer = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(wrongPort, { previous: first });
    assert.deepEqual(answer.valid ? [] : answer.reasons, [
      'next.workloadIngress.withdrawals[0] withdraws a grant the preceding projection neither carried nor withdrew (unknown denial)',
      'next.workloadIngress.withdrawals must withdraw the omitted grant ingress -> api tcp/80 at generation 2',
    ]);
    const oldStamp = follow(follow(first, withIngress([ingressGrant('ingress', 'api', 'tcp', 80)])),
      withIngress([], [withdrawal('ingress', 'web', 'tcp', 80, 2)]));
    const previous = follow(first, withIngress([ingressGrant('ingress', 'api', 'tcp', 80)]));
    const unknown = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(oldStamp, { previous });
    assert.equal(unknown.valid, false);
    assert.match(unknown.valid ? '' : unknown.reasons[0], /withdrawals\[0\] withdraws a grant the preceding projection neither carried nor withdrew/);
  });

  test('retained withdrawals carry forward until the exact joined application of the preceding projection', () => {
    const first = seal(withIngress([ingressGrant('ingress', 'api', 'tcp', 80)]));
    const second = follow(first, withIngress([], [withdrawal('ingress', 'api', 'tcp', 80, 2)]));
    const carried = follow(second, withIngress([], [withdrawal('ingress', 'api', 'tcp', 80, 2)]));
    const dropped = follow(second, {});
    assert.equal(getRuntimeNetworkProjectionWorkloadIngressPacketGrants(carried, { previous: second }).valid, true);
    const early = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(dropped, { previous: second });
    assert.deepEqual(early.valid ? [] : early.reasons, [
      'next.workloadIngress.withdrawals must carry forward the withdrawal of ingress -> api tcp/80 (generation 2) '
      + 'until the preceding projection\'s application is supplied',
    ]);
    const application = describeRuntimeNetworkProjectionApplication(second);
    assert.equal(getRuntimeNetworkProjectionWorkloadIngressPacketGrants(dropped, { previous: second, application }).valid, true);
    const wrong = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(dropped, {
      previous: second, application: { ...application, digest: first.digest },
    });
    assert.deepEqual(wrong.valid ? [] : wrong.reasons, [
      'application must be the exact joined application of the preceding projection (its projectionId, nodeId, generation and digest)',
    ]);
    const malformed = getRuntimeNetworkProjectionWorkloadIngressPacketGrants(dropped, {
      previous: second, application: { ...application, generation: 0 },
    });
    assert.deepEqual(malformed.valid ? [] : malformed.reasons, ['application.generation must be a positive integer']);
  });

  test('a grant granted again needs no carried withdrawal', () => {
    const first = seal(withIngress([ingressGrant('ingress', 'api', 'tcp', 80)]));
    const second = follow(first, withIngress([], [withdrawal('ingress', 'api', 'tcp', 80, 2)]));
    const regranted = follow(second, withIngress([ingressGrant('ingress', 'api', 'tcp', 80)]));
    assert.equal(getRuntimeNetworkProjectionWorkloadIngressPacketGrants(regranted, { previous: second }).valid, true);
  });

  test('an exact replay of the enforced projection is judged as itself', () => {
    const first = seal(withIngress([ingressGrant('ingress', 'api', 'tcp', 80)]));
    assert.equal(getRuntimeNetworkProjectionWorkloadIngressPacketGrants(first, { previous: first }).valid, true);
  });
});

describe('admitRuntimeNetworkProjection', () => {
  test('a node\'s first projection is generation 1', () => {
    const first = seal();
    assert.deepEqual(admitRuntimeNetworkProjection(null, first), { admitted: true, replayed: false, projection: first });
    const second = follow(first, {});
    assert.deepEqual(admitRuntimeNetworkProjection(null, second), {
      admitted: false, reasons: ['next.generation must be 1 when the node has no projection yet'],
    });
  });

  test('the next generation naming its exact predecessor is admitted', () => {
    const first = seal();
    const second = follow(first, {});
    const answer = admitRuntimeNetworkProjection(first, second);
    assert.equal(answer.admitted, true);
    assert.equal(answer.admitted && answer.replayed, false);
  });

  test('an identical same-generation projection is a replay; changed content is refused', () => {
    const first = seal();
    const replay = admitRuntimeNetworkProjection(first, JSON.parse(JSON.stringify(first)));
    assert.equal(replay.admitted && replay.replayed, true);
    const changed = seal({ grants: [] });
    assert.deepEqual(admitRuntimeNetworkProjection(first, changed), {
      admitted: false, reasons: ['next changes the content of generation 1; a changed projection needs the next generation'],
    });
  });

  test('gaps, regressions and forks are refused', () => {
    const first = seal();
    const second = follow(first, {});
    const third = follow(second, {});
    assert.deepEqual(admitRuntimeNetworkProjection(first, third), {
      admitted: false, reasons: ['next.generation must be 2, the generation after the preceding projection'],
    });
    assert.deepEqual(admitRuntimeNetworkProjection(second, first), {
      admitted: false, reasons: ['next.generation must be 3, the generation after the preceding projection'],
    });
    const fork = sealRuntimeNetworkProjection({ ...baseContent(), generation: 2, previous: { generation: 1, digest: '0'.repeat(64) } });
    assert.deepEqual(admitRuntimeNetworkProjection(first, fork), {
      admitted: false, reasons: ['next.previous must name the exact preceding projection (its generation and digest)'],
    });
  });

  test('the id, node and controller kind stay', () => {
    const first = seal();
    const cases: Array<[Partial<TRuntimeNetworkProjectionContent>, string]> = [
      [{ id: 'other' }, 'next.id must stay cluster-1.node-a'],
      [{ nodeId: 'node-b', grants: [] }, 'next.nodeId must stay node-a'],
      [{ controller: { kind: 'onebox' } }, 'next.controller.kind must stay cloudly'],
    ];
    for (const [change, reason] of cases) {
      assert.deepEqual(admitRuntimeNetworkProjection(first, follow(first, change)), { admitted: false, reasons: [reason] });
    }
  });

  test('a lease keeps its address', () => {
    const first = seal();
    const moved = baseEndpoints().map((entry) => (entry.lease.id === 'web' ? { ...entry, address: '10.64.9.9' } : entry));
    assert.deepEqual(admitRuntimeNetworkProjection(first, follow(first, { endpoints: moved })), {
      admitted: false, reasons: ['next.endpoints[4].address must stay 10.64.0.3: a lease\'s address is immutable'],
    });
  });

  test('membership and readiness evidence never regress', () => {
    /** The base endpoints with `far` at the given lease generation and readiness evidence. */
    const withFar = (generationArg: number, readinessArg?: { observation: number; ready: boolean }) =>
      baseEndpoints().map((entry) => (entry.lease.id === 'far'
        ? { ...endpoint('far', 'node-c', '10.64.0.5', generationArg), ...(readinessArg ? { readiness: readinessArg } : {}) }
        : entry));
    const first = seal({ endpoints: withFar(2, { observation: 3, ready: true }) });
    assert.deepEqual(validateRuntimeNetworkProjection(first), []);
    const refusals: Array<[string, IRuntimeNetworkEndpoint[], string]> = [
      ['an older lease generation', withFar(1),
        'next.endpoints[1].lease.generation must not go below 2: the membership evidence of lease far regressed'],
      ['dropped readiness evidence', withFar(2),
        'next.endpoints[1].readiness must be stated: the preceding projection stated readiness evidence (observation 3) for lease far'],
      ['an older observation', withFar(2, { observation: 2, ready: true }),
        'next.endpoints[1].readiness.observation must not go below 3: the readiness evidence of lease far regressed'],
      ['changed evidence under one observation', withFar(2, { observation: 3, ready: false }),
        'next.endpoints[1].readiness.ready must stay true under observation 3: changed evidence needs a newer observation'],
    ];
    for (const [name, endpoints, reason] of refusals) {
      assert.deepEqual(admitRuntimeNetworkProjection(first, follow(first, { endpoints })), { admitted: false, reasons: [reason] }, name);
    }
    const admitted: Array<[string, IRuntimeNetworkEndpoint[]]> = [
      ['the same evidence', withFar(2, { observation: 3, ready: true })],
      ['a newer observation saying unready', withFar(2, { observation: 4, ready: false })],
      ['a new lease generation without evidence yet', withFar(3)],
      ['a new lease generation starting its own observations', withFar(3, { observation: 1, ready: false })],
    ];
    for (const [name, endpoints] of admitted) {
      assert.equal(admitRuntimeNetworkProjection(first, follow(first, { endpoints })).admitted, true, name);
    }
    // Several regressions at once are each named.
    const twice = withFar(1).map((entry) => (entry.lease.id === 'web' ? { ...entry, address: '10.64.9.9' } : entry));
    assert.deepEqual(admitRuntimeNetworkProjection(first, follow(first, { endpoints: twice })), {
      admitted: false,
      reasons: [
        'next.endpoints[1].lease.generation must not go below 2: the membership evidence of lease far regressed',
        'next.endpoints[4].address must stay 10.64.0.3: a lease\'s address is immutable',
      ],
    });
  });

  test('readiness evidence is judged for its form', () => {
    const broken = baseEndpoints().map((entry) => (entry.lease.id === 'far'
      ? { ...entry, readiness: { observation: 0, ready: 'yes' } } as unknown as IRuntimeNetworkEndpoint
      : entry));
    assert.deepEqual(validateRuntimeNetworkProjection({ ...seal(), endpoints: broken }).filter((reason) => reason.includes('readiness')), [
      'projection.endpoints[1].readiness must be { observation, ready }: a positive integer and a boolean',
    ]);
  });

  test('withdrawal rules apply to admission, including the application', () => {
    const first = seal(withIngress([ingressGrant('ingress', 'api', 'tcp', 80)]));
    const silent = follow(first, {});
    const refused = admitRuntimeNetworkProjection(first, silent);
    assert.equal(refused.admitted, false);
    const second = follow(first, withIngress([], [withdrawal('ingress', 'api', 'tcp', 80, 2)]));
    assert.equal(admitRuntimeNetworkProjection(first, second).admitted, true);
    const third = follow(second, {});
    assert.equal(admitRuntimeNetworkProjection(second, third).admitted, false);
    assert.equal(admitRuntimeNetworkProjection(second, third, { application: describeRuntimeNetworkProjectionApplication(second) }).admitted, true);
  });

  test('host platform endpoints are judged against the current plan', () => {
    const first = seal({ hostPlatformEndpointIds: ['relay'] });
    const answer = admitRuntimeNetworkProjection(null, first, { platformEndpointIds: ['corestore'] });
    assert.deepEqual(answer, { admitted: false, reasons: ['next.hostPlatformEndpointIds[0] must be a current platform endpoint of the authority'] });
  });

  test('an invalid predecessor is refused with its own path', () => {
    const answer = admitRuntimeNetworkProjection({ ...seal(), digest: 'x' }, seal());
    assert.deepEqual(answer, { admitted: false, reasons: ['previous.digest must be a lowercase sha256 hex digest'] });
  });
});

describe('deriveRuntimeNetworkWorkloadIngressWithdrawals', () => {
  test('withdraws omitted grants and carries retained withdrawals until the application', () => {
    const first = seal(withIngress([ingressGrant('ingress', 'api', 'tcp', 80), ingressGrant('ingress', 'web', 'tcp', 80)]));
    assert.deepEqual(deriveRuntimeNetworkWorkloadIngressWithdrawals(null, [], 1, null), []);
    const keep = [ingressGrant('ingress', 'web', 'tcp', 80)];
    assert.deepEqual(deriveRuntimeNetworkWorkloadIngressWithdrawals(first, keep, 2, null), [withdrawal('ingress', 'api', 'tcp', 80, 2)]);
    const second = follow(first, withIngress(keep, [withdrawal('ingress', 'api', 'tcp', 80, 2)]));
    assert.deepEqual(deriveRuntimeNetworkWorkloadIngressWithdrawals(second, [], 3, null), [
      withdrawal('ingress', 'api', 'tcp', 80, 2), withdrawal('ingress', 'web', 'tcp', 80, 3),
    ]);
    assert.deepEqual(deriveRuntimeNetworkWorkloadIngressWithdrawals(second, [], 3, describeRuntimeNetworkProjectionApplication(second)), [
      withdrawal('ingress', 'web', 'tcp', 80, 3),
    ]);
  });

  test('answers null when carrying forward would exceed 4,096 withdrawals', () => {
    const first = buildManyGrantProjection(1);
    const retained = follow(first, withIngress([], [...manyWithdrawals(4_095, 2), withdrawal('ingress', 'target-00000', 'tcp', 8080, 2)]
      .sort((a, b) => (a.destination.id < b.destination.id ? -1 : 1))));
    assert.deepEqual(validateRuntimeNetworkProjection(retained), []);
    const oneMoreGrant = [ingressGrant('ingress', 'target-00000', 'tcp', 8080)];
    const withGrant = follow(retained, { ...withIngress(oneMoreGrant, retained.workloadIngress?.withdrawals?.filter((w) => w.destination.id !== 'target-00000')) });
    assert.equal(admitRuntimeNetworkProjection(retained, withGrant).admitted, true);
    // 4,095 retained + 1 newly omitted = 4,096: still fits.
    assert.equal(deriveRuntimeNetworkWorkloadIngressWithdrawals(withGrant, [], 4, null)?.length, 4_096);
    // 4,096 retained + 1 newly omitted = 4,097: must wait for the application.
    const full = follow(first, withIngress(oneMoreGrant, manyWithdrawals(4_096, 2)));
    assert.equal(deriveRuntimeNetworkWorkloadIngressWithdrawals(full, [], 3, null), null);
    assert.equal(deriveRuntimeNetworkWorkloadIngressWithdrawals(full, [], 3, describeRuntimeNetworkProjectionApplication(full))?.length, 1);
  });
});

// ---------------------------------------------------------------------------------------------
// Address plans: the upstream example, hub 192.0.2.1 in 192.0.2.0/28, relay and Corestore on
// 192.0.2.17 with two ports.

const basePlan = upstreamExamplePlan;

const assertOnlyPlanReason = (valueArg: unknown, patternArg: RegExp): void => {
  const reasons = validateRuntimeNetworkAddressPlan(valueArg);
  assert.equal(reasons.length, 1, `expected exactly one reason, got ${JSON.stringify(reasons)}`);
  assert.match(reasons[0], patternArg);
};

const editedPlan = (editArg: (plan: IRuntimeNetworkAddressPlan) => void): IRuntimeNetworkAddressPlan => {
  const plan = basePlan();
  editArg(plan);
  return plan;
};

describe('runtime network address plan', () => {
  test('the upstream example is valid: several endpoints share one address on distinct ports', () => {
    assert.deepEqual(validateRuntimeNetworkAddressPlan(basePlan()), []);
    assert.deepEqual(validateRuntimeNetworkAddressPlan(editedPlan((p) => { p.hubs = []; })), []);
    assert.deepEqual(validateRuntimeNetworkAddressPlan(editedPlan((p) => {
      p.platformEndpoints.push({ id: 'relay-udp', address: '192.0.2.17', protocol: 'udp', port: 443 });
    })), []);
  });

  test('every plan rule is refused with its own reason', () => {
    const cases: Array<[(p: IRuntimeNetworkAddressPlan) => void, RegExp]> = [
      [(p) => { p.authorityId = ''; }, /^plan\.authorityId must be a canonical id/],
      [(p) => { p.revision = 0; }, /^plan\.revision must be a positive integer/],
      [(p) => { p.prefixes = []; }, /^plan\.prefixes must be a list of 1 to 64 IPv4 prefixes/],
      [(p) => { p.prefixes[1] = '198.51.100.1/24'; }, /^plan\.prefixes\[1\] must be an IPv4 prefix/],
      [(p) => { p.prefixes[1] = '192.0.2.0/25'; }, /^plan\.prefixes\[1\] overlaps another owned prefix/],
      [(p) => { p.vpn = { hubPrefix: '192.0.2.0/28' } as never; }, /^plan\.vpn must be an object with exactly the keys hubPrefix, peerPrefix/],
      [(p) => { p.vpn.hubPrefix = '192.0.2.1/28'; p.hubs = []; }, /^plan\.vpn\.hubPrefix must be an IPv4 prefix/],
      [(p) => { p.vpn.peerPrefix = 'x'; }, /^plan\.vpn\.peerPrefix must be an IPv4 prefix/],
      [(p) => { p.vpn.peerPrefix = '192.0.2.8/29'; }, /^plan\.vpn\.peerPrefix must not overlap plan\.vpn\.hubPrefix/],
      [(p) => { p.pools = {} as never; }, /^plan\.pools must be a list of at most 256 pools/],
      [(p) => { p.pools.push({ id: 'x' } as never); }, /^plan\.pools\[1\] must be an object with exactly the keys id, prefix/],
      [(p) => { p.pools.push({ id: 'workloads', prefix: '198.51.100.0/25' }); }, /^plan\.pools\[1\]\.id must be unique among pools/],
      [(p) => { p.pools.push({ id: '', prefix: '198.51.100.0/25' }); }, /^plan\.pools\[1\]\.id must be a canonical id/],
      [(p) => { p.pools.push({ id: 'more', prefix: '198.51.100.0/33' }); }, /^plan\.pools\[1\]\.prefix must be an IPv4 prefix/],
      [(p) => { p.pools.push({ id: 'more', prefix: '203.0.113.0/25' }); }, /^plan\.pools\[1\]\.prefix must lie inside one of plan\.prefixes/],
      [(p) => { p.pools.push({ id: 'more', prefix: '192.0.2.192/26' }); }, /^plan\.pools\[1\]\.prefix overlaps another pool/],
      [(p) => { p.pools.push({ id: 'more', prefix: '192.0.2.0/29' }); }, /^plan\.pools\[1\]\.prefix must not overlap plan\.vpn\.hubPrefix/],
      [(p) => { p.pools.push({ id: 'more', prefix: '192.0.2.96/27' }); }, /^plan\.pools\[1\]\.prefix must not overlap plan\.vpn\.peerPrefix/],
      [(p) => { p.hubs = {} as never; }, /^plan\.hubs must be a list of at most 64 hubs/],
      [(p) => { p.hubs.push({ clusterId: 'cluster-2' } as never); }, /^plan\.hubs\[1\] must be an object with exactly the keys clusterId, address/],
      [(p) => { p.hubs.push({ clusterId: 'cluster 2', address: '192.0.2.2' }); }, /^plan\.hubs\[1\]\.clusterId must be a canonical id/],
      [(p) => { p.hubs.push({ clusterId: 'cluster-1', address: '192.0.2.2' }); }, /^plan\.hubs\[1\]\.clusterId must name each cluster once/],
      [(p) => { p.hubs.push({ clusterId: 'cluster-2', address: '0.0.0.0' }); }, /^plan\.hubs\[1\]\.address must be a unicast IPv4 address/],
      [(p) => { p.hubs.push({ clusterId: 'cluster-2', address: '192.0.2.17' }); }, /^plan\.hubs\[1\]\.address must lie inside plan\.vpn\.hubPrefix/],
      [(p) => { p.hubs.push({ clusterId: 'cluster-2', address: '192.0.2.1' }); }, /^plan\.hubs\[1\]\.address must differ from every other hub's address/],
      [(p) => { p.platformEndpoints = {} as never; }, /^plan\.platformEndpoints must be a list of at most 64 endpoints/],
      [(p) => { p.platformEndpoints.push({ id: 'x', address: '198.51.100.1' } as never); }, /^plan\.platformEndpoints\[2\] must be an object with exactly the keys id, address, protocol, port/],
      [(p) => { p.platformEndpoints[1].id = 'corestore'; }, /^plan\.platformEndpoints\[1\]\.id must be unique among platform endpoints/],
      [(p) => { p.platformEndpoints[1].id = '.relay'; }, /^plan\.platformEndpoints\[1\]\.id must be a canonical id/],
      [(p) => { p.platformEndpoints[1].address = '255.255.255.255'; }, /^plan\.platformEndpoints\[1\]\.address must be a unicast IPv4 address/],
      [(p) => { p.platformEndpoints[1].protocol = 'icmp' as never; }, /^plan\.platformEndpoints\[1\]\.protocol must be one of tcp, udp/],
      [(p) => { p.platformEndpoints[1].port = 70_000; }, /^plan\.platformEndpoints\[1\]\.port must be an integer from 1 to 65535/],
      [(p) => { p.platformEndpoints[1].address = '203.0.113.5'; }, /^plan\.platformEndpoints\[1\]\.address must lie inside one of plan\.prefixes/],
      [(p) => { p.platformEndpoints[1].address = '192.0.2.200'; }, /^plan\.platformEndpoints\[1\]\.address must lie outside every pool/],
      [(p) => { p.platformEndpoints[1].address = '192.0.2.1'; }, /^plan\.platformEndpoints\[1\]\.address must lie outside plan\.vpn\.hubPrefix/],
      [(p) => { p.platformEndpoints[1].address = '192.0.2.70'; }, /^plan\.platformEndpoints\[1\]\.address must lie outside plan\.vpn\.peerPrefix/],
      [(p) => { p.platformEndpoints[1].port = 3000; }, /^plan\.platformEndpoints\[1\] repeats 192\.0\.2\.17:3000:tcp: each address:port:protocol must be unique/],
    ];
    for (const [edit, pattern] of cases) {
      assertOnlyPlanReason(editedPlan(edit), pattern);
    }
    assertOnlyPlanReason({ ...basePlan(), extra: 1 }, /^plan must be an object with exactly the keys/);
  });

  test('at most 64 platform endpoints per authority, each hub costing one', () => {
    assert.equal(runtimeNetworkAddressPlanContract.maximumPlatformEndpoints, 64);
    const fill = (countArg: number) => editedPlan((p) => {
      p.platformEndpoints = Array.from({ length: countArg }, (_, index) => ({
        id: `endpoint-${String(index).padStart(2, '0')}`, address: '198.51.100.10', protocol: 'tcp' as const, port: 1000 + index,
      }));
    });
    assert.deepEqual(validateRuntimeNetworkAddressPlan(fill(63)), []);
    assertOnlyPlanReason(fill(64), /^plan must hold at most 64 platform endpoints counting each hub as one \(has 65\)/);
    assert.deepEqual(validateRuntimeNetworkAddressPlan(editedPlan((p) => {
      p.hubs = [];
      p.platformEndpoints = fill(64).platformEndpoints;
    })), []);
    assertOnlyPlanReason(editedPlan((p) => { p.hubs = []; p.platformEndpoints = [...fill(64).platformEndpoints, ...fill(1).platformEndpoints.map((e) => ({ ...e, id: 'extra', port: 9 }))]; }),
      /^plan\.platformEndpoints must be a list of at most 64 endpoints/);
  });
});

describe('admitRuntimeNetworkAddressPlanChange', () => {
  const next = (editArg: (plan: IRuntimeNetworkAddressPlan) => void = () => {}) =>
    editedPlan((p) => { p.revision = 2; editArg(p); });

  test('the first plan is revision 1', () => {
    assert.equal(admitRuntimeNetworkAddressPlanChange(null, basePlan()).admitted, true);
    assert.deepEqual(admitRuntimeNetworkAddressPlanChange(null, next()), {
      admitted: false, reasons: ['next.revision must be 1 when there is no previous plan'],
    });
  });

  test('a change is admitted only at the following revision', () => {
    const admitted = admitRuntimeNetworkAddressPlanChange(basePlan(), next((p) => { p.platformEndpoints.pop(); }));
    assert.equal(admitted.admitted, true);
    for (const revision of [1, 3, 100]) {
      assert.deepEqual(admitRuntimeNetworkAddressPlanChange(basePlan(), editedPlan((p) => { p.revision = revision; })), {
        admitted: false, reasons: ['next.revision must be exactly 2, the revision after the previous plan'],
      });
    }
  });

  test('the authority, the managed VPN, existing pools and staying hubs outlive a revision', () => {
    const cases: Array<[(p: IRuntimeNetworkAddressPlan) => void, string]> = [
      [(p) => { p.authorityId = 'authority-2'; }, 'next.authorityId must stay the previous plan\'s authority'],
      [(p) => { p.vpn.hubPrefix = '192.0.2.0/29'; },
        'next.vpn.hubPrefix must not change: the managed VPN outlives a plan revision'],
      [(p) => { p.vpn.peerPrefix = '10.0.0.0/24'; }, 'next.vpn.peerPrefix must not change: the managed VPN outlives a plan revision'],
      [(p) => { p.pools = []; }, 'next.pools must keep pool workloads: leases drawn from it outlive a plan revision'],
      [(p) => { p.pools = [{ id: 'workloads', prefix: '192.0.2.192/26' }]; }, 'next.pools pool workloads must keep prefix 192.0.2.128/25: leases drawn from it outlive a plan revision'],
      [(p) => { p.hubs = [{ clusterId: 'cluster-1', address: '192.0.2.2' }]; }, 'next.hubs hub of cluster cluster-1 must keep address 192.0.2.1'],
    ];
    for (const [edit, reason] of cases) {
      assert.deepEqual(admitRuntimeNetworkAddressPlanChange(basePlan(), next(edit)), { admitted: false, reasons: [reason] });
    }
  });

  test('hubs may leave, new pools and endpoints may arrive', () => {
    const answer = admitRuntimeNetworkAddressPlanChange(basePlan(), next((p) => {
      p.hubs = [];
      p.pools.push({ id: 'more', prefix: '198.51.100.128/25' });
      p.platformEndpoints.push({ id: 'metrics', address: '198.51.100.5', protocol: 'tcp', port: 9100 });
    }));
    assert.equal(answer.admitted, true);
  });

  test('an invalid next or previous is refused with every reason and its path', () => {
    assert.deepEqual(admitRuntimeNetworkAddressPlanChange(basePlan(), next((p) => { p.revision = 0; p.authorityId = ''; })), {
      admitted: false, reasons: ['next.authorityId must be a canonical id', 'next.revision must be a positive integer'],
    });
    assert.deepEqual(admitRuntimeNetworkAddressPlanChange({ ...basePlan(), revision: -1 }, next()), {
      admitted: false, reasons: ['previous.revision must be a positive integer'],
    });
  });
});

describe('hostile input never throws', () => {
  test('getters, class instances, proxies, cycles and huge arrays answer reasons', () => {
    let reads = 0;
    const withGetter = { ...seal() };
    Object.defineProperty(withGetter, 'nodeId', { get: () => { reads += 1; throw new Error('boom'); }, enumerable: true });
    assert.deepEqual(validateRuntimeNetworkProjection(withGetter), ['projection.nodeId must be a data property, not an accessor']);
    assert.equal(reads, 0);
    class Projection { id = 'x'; }
    assert.deepEqual(validateRuntimeNetworkProjection(new Projection()), ['projection must be a plain object']);
    const hostile = new Proxy({}, { ownKeys: () => { throw new Error('trap'); } });
    assert.deepEqual(validateRuntimeNetworkProjection(hostile), ['projection could not be read as plain data']);
    const cyclic: Record<string, unknown> = { ...seal() };
    cyclic.controller = cyclic;
    assert.deepEqual(validateRuntimeNetworkProjection(cyclic), ['projection.controller refers to itself']);
    const huge = { ...seal(), endpoints: new Array(10_000_000) };
    assert.deepEqual(validateRuntimeNetworkProjection(huge), ['projection.endpoints has more than 65536 entries']);
    assert.deepEqual(validateRuntimeNetworkAddressPlan(Object.create({ authorityId: 'x' })), ['plan must be a plain object']);
    assert.equal(getRuntimeNetworkProjectionWorkloadIngressPacketGrants(withGetter).valid, false);
    assert.equal(admitRuntimeNetworkProjection(withGetter, withGetter).admitted, false);
    assert.equal(admitRuntimeNetworkAddressPlanChange(hostile, basePlan()).admitted, false);
  });
});
