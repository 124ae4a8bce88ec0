import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { data, protocol } from '../ts/interfaces/index.js';
import { computeDomainDigestHex } from '../ts/interfaces/private/canonicaljson.js';

const offer = { name: 'serve.zone/cluster-ingress', minimumVersion: 1, maximumVersion: 1 };
const bearer = 'b'.repeat(43);
const registration = () => ({ bearer, version: '1.2.3', nodeId: 'node-1', capabilities: ['h2'], protocol: { ...offer } });

const designationRequest = () => ({
  mutationId: 'mutation-1',
  clusterId: 'cluster-1',
  ingressServiceId: 'service-ingress',
  currentRuntime: { id: 'cluster-1', phase: 'pallet', generation: 3 },
  expectedSpecRevision: 7,
  expectedDesignation: null,
});

const unsealedDesignation = () => ({
  id: 'cluster-1',
  generation: 2,
  previous: { id: 'cluster-1', generation: 1, digest: 'a'.repeat(64) },
  clusterId: 'cluster-1',
  runtime: { id: 'cluster-1', phase: 'pallet' as const, generation: 3 },
  ingressServiceId: 'service-ingress',
  preparedSpecRevision: 7,
  credential: {
    credentialId: 'credential-1',
    generation: 2,
    secretVersion: { secretId: 'secret-1', secretVersionId: 'secret-1-v2' },
  },
  actorId: 'admin',
  acceptedAt: 1_700_000_000_000,
  digest: '0'.repeat(64),
});

const sealedDesignation = async () => {
  const designation = unsealedDesignation();
  designation.digest = await data.computeClusterIngressDesignationDigest(designation);
  return designation;
};

/** Rebuilds an object with its keys in reverse order, recursively. */
const reverseKeys = (valueArg: unknown): unknown => {
  if (Array.isArray(valueArg)) {
    return valueArg.map(reverseKeys);
  }
  if (valueArg !== null && typeof valueArg === 'object') {
    return Object.fromEntries(Object.entries(valueArg).reverse().map(([key, item]) => [key, reverseKeys(item)]));
  }
  return valueArg;
};

const hostileValues: unknown[] = [
  undefined, null, 0, 'text', [], [1, 2], new Date(), new Map(), Symbol('s'), () => 1,
  Object.create({ inherited: 1 }),
  new Proxy({}, { ownKeys: () => { throw new Error('trap'); } }),
  { get bearer() { throw new Error('getter'); } },
];

describe('cluster ingress environment and refusal constants', () => {
  it('spells the three environment names exactly', () => {
    assert.deepEqual({ ...data.clusterIngressEnvironmentNames }, {
      bearer: 'SERVEZONE_CLUSTER_INGRESS_BEARER',
      relayOrigin: 'SERVEZONE_CLUSTER_RELAY_ORIGIN',
      nodeId: 'SERVEZONE_CLUSTER_NODE_ID',
    });
    assert.ok(Object.isFrozen(data.clusterIngressEnvironmentNames));
  });

  it('lists the refusal reasons in the order Cloudly judges them', () => {
    assert.deepEqual([...data.clusterIngressRegistrationRefusalReasons], [
      'not-ready', 'registration-invalid', 'relay-not-connected', 'ingress-not-designated',
      'node-mismatch', 'assignment-not-running', 'bearer-refused', 'conflict',
    ]);
    assert.deepEqual({ ...data.clusterIngressRegistrationContract }, {
      refusalCode: 'cluster-ingress-registration-refused',
      minimumRetryAfterMs: 1000,
      maximumRetryAfterMs: 300000,
    });
  });
});

describe('validateClusterIngressRegistrationRefusal and readClusterIngressRegistrationRefusal', () => {
  const refusal = { code: 'cluster-ingress-registration-refused', reason: 'bearer-refused', retryAfterMs: 1000 };

  it('accepts every reason at both retry bounds', () => {
    for (const reason of data.clusterIngressRegistrationRefusalReasons) {
      for (const retryAfterMs of [1000, 300000]) {
        const value = { ...refusal, reason, retryAfterMs };
        assert.deepEqual(data.validateClusterIngressRegistrationRefusal(value), []);
        assert.deepEqual(data.readClusterIngressRegistrationRefusal(JSON.parse(JSON.stringify(value))), value);
      }
    }
  });

  it('names every violation at once', () => {
    const reasons = data.validateClusterIngressRegistrationRefusal({ code: 'x', reason: 'protocol', retryAfterMs: 999 });
    assert.deepEqual(reasons, [
      'cluster ingress registration refusal code must be cluster-ingress-registration-refused',
      'cluster ingress registration refusal reason must be a cluster ingress registration refusal reason',
      'cluster ingress registration refusal retryAfterMs must be an integer from 1000 to 300000',
    ]);
  });

  it('refuses retry values out of range or not integers, extra and missing keys', () => {
    for (const retryAfterMs of [0, 999, 300001, 1000.5, '1000', Number.NaN, null]) {
      assert.equal(data.validateClusterIngressRegistrationRefusal({ ...refusal, retryAfterMs }).length, 1);
      assert.equal(data.readClusterIngressRegistrationRefusal({ ...refusal, retryAfterMs }), null);
    }
    const schema = ['cluster ingress registration refusal must use its exact schema'];
    assert.deepEqual(data.validateClusterIngressRegistrationRefusal({ ...refusal, bearer }), schema);
    assert.deepEqual(data.validateClusterIngressRegistrationRefusal({ code: refusal.code, reason: refusal.reason }), schema);
  });

  it('reads plain data only and never throws', () => {
    for (const value of hostileValues) {
      assert.equal(data.readClusterIngressRegistrationRefusal(value), null);
      assert.ok(data.validateClusterIngressRegistrationRefusal(value).length > 0);
    }
    const withGetter = { code: refusal.code, reason: refusal.reason, get retryAfterMs() { return 1000; } };
    assert.equal(data.readClusterIngressRegistrationRefusal(withGetter), null);
  });

  it('tells a protocol refusal apart from a registration refusal', () => {
    const protocolRefusal = { code: 'protocol-refused', reason: 'version-unsupported', supported: offer };
    assert.equal(data.readClusterIngressRegistrationRefusal(protocolRefusal), null);
    assert.deepEqual(protocol.readProtocolRefusal(protocolRefusal), protocolRefusal);
    assert.equal(protocol.readProtocolRefusal(refusal), null);
  });
});

describe('validateClusterIngressRouteTableChange', () => {
  it('accepts a revision alone', () => {
    assert.deepEqual(data.validateClusterIngressRouteTableChange({ revision: 0 }), []);
    assert.deepEqual(data.validateClusterIngressRouteTableChange({ revision: 42 }), []);
  });

  it('refuses a negative, fractional or missing revision and any extra member', () => {
    for (const value of [{ revision: -1 }, { revision: 1.5 }, { revision: '1' }]) {
      assert.deepEqual(data.validateClusterIngressRouteTableChange(value),
        ['cluster ingress route table change revision must be a non-negative safe integer']);
    }
    for (const value of [{}, { revision: 1, routes: [] }, ...hostileValues]) {
      assert.deepEqual(data.validateClusterIngressRouteTableChange(value),
        ['cluster ingress route table change must use its exact schema']);
    }
  });
});

describe('validateClusterIngressRegistration', () => {
  it('accepts a complete body, with and without capabilities', () => {
    assert.deepEqual(data.validateClusterIngressRegistration(registration()), []);
    const { capabilities: _unused, ...withoutCapabilities } = registration();
    assert.deepEqual(data.validateClusterIngressRegistration(withoutCapabilities), []);
  });

  it('names every broken member in a stable order and never quotes the bearer', () => {
    const secret = 'S3cr3t-bearer-value-that-must-never-leak!!';
    const reasons = data.validateClusterIngressRegistration({
      bearer: secret,
      version: '',
      nodeId: '../node',
      capabilities: ['H2', 'h2', 'h2'],
      protocol: { name: 'x', minimumVersion: 2, maximumVersion: 1 },
      extra: true,
    }, 'registration');
    assert.deepEqual(reasons.map((reason) => reason.split(' ')[0]), [
      'registration', 'registration.bearer', 'registration.version', 'registration.nodeId',
      'registration.capabilities[0]', 'registration.capabilities[2]', 'registration.protocol.minimumVersion',
    ]);
    assert.equal(reasons.length, 7);
    for (const reason of reasons) {
      assert.ok(!reason.includes(secret));
    }
  });

  it('refuses a short bearer, a missing protocol and hostile values without throwing', () => {
    assert.equal(data.validateClusterIngressRegistration({ ...registration(), bearer: 'short' }).length, 1);
    const { protocol: _unused, ...withoutProtocol } = registration();
    assert.equal(data.validateClusterIngressRegistration(withoutProtocol).length, 1);
    for (const value of hostileValues) {
      assert.ok(data.validateClusterIngressRegistration(value).length > 0);
    }
    assert.ok(data.validateClusterIngressRegistration({ ...registration(), capabilities: new Array(1_000_000) }).length > 0);
  });
});

describe('protocol offers', () => {
  it('reads an offer as a detached copy and refuses anything else', () => {
    const read = protocol.readProtocolOffer(JSON.parse(JSON.stringify(offer)));
    assert.deepEqual(read, offer);
    assert.ok(Object.isFrozen(read));
    for (const value of [...hostileValues, { ...offer, extra: 1 }, { ...offer, minimumVersion: 0 }]) {
      assert.equal(protocol.readProtocolOffer(value), null);
    }
  });

  it('negotiates the highest common version or names the refusal', () => {
    assert.deepEqual(protocol.negotiateProtocol(offer, { ...offer, maximumVersion: 3 }), { version: 1 });
    const refusalOf = (peer: unknown) => {
      const outcome = protocol.negotiateProtocol(offer, peer);
      return 'refusal' in outcome ? outcome.refusal.reason : null;
    };
    assert.equal(refusalOf(null), 'offer-invalid');
    assert.equal(refusalOf({ ...offer, name: 'serve.zone/other' }), 'protocol-mismatch');
    assert.equal(refusalOf({ ...offer, minimumVersion: 2, maximumVersion: 2 }), 'version-unsupported');
  });
});

describe('cluster runtime references', () => {
  it('snapshots exactly three members and refuses the rest', () => {
    assert.deepEqual(data.snapshotClusterRuntimeReference({ id: 'c', phase: 'pallet', generation: 1 }),
      { id: 'c', phase: 'pallet', generation: 1 });
    for (const value of [...hostileValues, { id: 'c', phase: 'kubernetes', generation: 1 },
      { id: 'c', phase: 'pallet', generation: 0 }, { id: 'c', phase: 'pallet', generation: 1, extra: 1 }]) {
      assert.throws(() => data.snapshotClusterRuntimeReference(value), { message: data.clusterRuntimeReferenceError });
    }
  });
});

describe('runtime assignment status', () => {
  const status = {
    assignmentId: 'a-1', serviceId: 's-1', sessionId: 'session-1', state: 'ready',
    secretVersions: [{ secretId: 'secret-1', secretVersionId: 'v-1' }],
  };
  it('accepts a status and names every broken member', () => {
    assert.deepEqual(data.validateRuntimeAssignmentStatus(status), []);
    const reasons = data.validateRuntimeAssignmentStatus({ ...status, serviceId: '', state: 'running', secretVersions: [{}] });
    assert.equal(reasons.length, 3);
    for (const value of hostileValues) {
      assert.equal(data.validateRuntimeAssignmentStatus(value).length, 1);
    }
  });
});

describe('cluster ingress designation request', () => {
  it('snapshots a creation and a replacement request', () => {
    assert.deepEqual(data.snapshotClusterIngressDesignationRequest(designationRequest()), designationRequest());
    const replacement = { ...designationRequest(), expectedDesignation: { id: 'cluster-1', generation: 1, digest: 'f'.repeat(64) } };
    assert.deepEqual(data.snapshotClusterIngressDesignationRequest(replacement), replacement);
  });

  it('is detached from the value it read', () => {
    const request = designationRequest();
    const snapshot = data.snapshotClusterIngressDesignationRequest(request);
    request.currentRuntime.generation = 99;
    assert.equal(snapshot.currentRuntime.generation, 3);
  });

  it('refuses a runtime of another cluster or phase, a bad reference and any extra member', () => {
    const refused: unknown[] = [
      { ...designationRequest(), currentRuntime: { id: 'cluster-2', phase: 'pallet', generation: 3 } },
      { ...designationRequest(), currentRuntime: { id: 'cluster-1', phase: 'cutover', generation: 3 } },
      { ...designationRequest(), expectedDesignation: { id: 'cluster-1', generation: 1, digest: 'F'.repeat(64) } },
      { ...designationRequest(), expectedSpecRevision: -1 },
      { ...designationRequest(), credential: {} },
      { ...designationRequest(), mutationId: undefined },
      ...hostileValues,
    ];
    for (const value of refused) {
      assert.throws(() => data.snapshotClusterIngressDesignationRequest(value),
        { message: data.clusterIngressDesignationContract.error });
    }
  });
});

describe('cluster ingress designation digest', () => {
  it('uses the contract digest domain', async () => {
    assert.equal(data.clusterIngressDesignationContract.digestDomain, 'serve.zone/cluster-ingress-designation');
    // The digest is the domain-separated digest of the canonical JSON of everything but `digest`.
    const { digest, ...covered } = await sealedDesignation();
    assert.equal(digest, computeDomainDigestHex('serve.zone/cluster-ingress-designation', covered));
    assert.notEqual(digest, computeDomainDigestHex('serve.zone/runtime-local-storage-claim', covered));
  });

  it('accepts a sealed designation', async () => {
    const designation = await sealedDesignation();
    assert.match(designation.digest, /^[0-9a-f]{64}$/);
    assert.deepEqual(await data.validateClusterIngressDesignation(designation), []);
  });

  it('never changes with key order', async () => {
    const designation = await sealedDesignation();
    const reordered = reverseKeys(designation);
    assert.notDeepEqual(Object.keys(reordered as object), Object.keys(designation));
    assert.equal(await data.computeClusterIngressDesignationDigest(reordered), designation.digest);
    assert.deepEqual(await data.validateClusterIngressDesignation(reordered), []);
  });

  it('does not cover the digest member itself', async () => {
    const designation = await sealedDesignation();
    assert.equal(await data.computeClusterIngressDesignationDigest({ ...designation, digest: 'e'.repeat(64) }),
      designation.digest);
  });

  it('refuses a tampered digest and tampered content', async () => {
    const designation = await sealedDesignation();
    const flipped = designation.digest.startsWith('0') ? `1${designation.digest.slice(1)}` : `0${designation.digest.slice(1)}`;
    assert.deepEqual(await data.validateClusterIngressDesignation({ ...designation, digest: flipped }),
      ['cluster ingress designation digest does not match']);
    for (const tampered of [
      { ...designation, ingressServiceId: 'service-other' },
      { ...designation, preparedSpecRevision: 8 },
      { ...designation, credential: { ...designation.credential, generation: 3 } },
      { ...designation, acceptedAt: designation.acceptedAt + 1 },
    ]) {
      assert.equal((await data.validateClusterIngressDesignation(tampered)).length, 1);
    }
  });

  it('refuses a broken schema without throwing', async () => {
    const designation = await sealedDesignation();
    const broken: unknown[] = [
      { ...designation, previous: null },
      { ...designation, generation: 1 },
      { ...designation, previous: { ...designation.previous, id: 'other' } },
      { ...designation, runtime: { id: 'cluster-1', phase: 'swarm', generation: 3 } },
      { ...designation, credential: { ...designation.credential, bearer } },
      { ...designation, extra: 1 },
      ...hostileValues,
    ];
    for (const value of broken) {
      assert.deepEqual(await data.validateClusterIngressDesignation(value),
        ['cluster ingress designation must use its exact canonical schema']);
      await assert.rejects(data.computeClusterIngressDesignationDigest(value),
        { message: data.clusterIngressDesignationContract.error });
    }
  });

  it('accepts a first generation without a predecessor', async () => {
    const first = { ...unsealedDesignation(), generation: 1, previous: null };
    first.digest = await data.computeClusterIngressDesignationDigest(first);
    assert.deepEqual(await data.validateClusterIngressDesignation(first), []);
    assert.deepEqual(data.referenceClusterIngressDesignation(data.snapshotClusterIngressDesignation(first)),
      { id: first.id, generation: 1, digest: first.digest });
  });
});
