import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  clusterIngressRetryAfterMs,
  type IClusterIngressRegistrationFacts,
  judgeClusterIngressRegistration,
} from '../ts/manager.ingress/judge.js';
import { data } from '../ts/interfaces/index.js';

const bearer = 'k'.repeat(43);
const ownOffer = data.clusterIngressProtocolOffer;
const secretVersion = { secretId: 'secret-1', secretVersionId: 'secret-1-v1' };

const designation = (): data.IClusterIngressDesignation => ({
  id: 'cluster-1',
  generation: 1,
  previous: null,
  clusterId: 'cluster-1',
  runtime: { id: 'cluster-1', phase: 'pallet', generation: 1 },
  ingressServiceId: 'ingress',
  preparedSpecRevision: 1,
  credential: { credentialId: 'credential-1', generation: 1, secretVersion },
  actorId: 'admin',
  acceptedAt: 1,
  digest: 'a'.repeat(64),
});

/** Facts under which a registration is accepted; each test breaks exactly what it names. */
const acceptableFacts = (): IClusterIngressRegistrationFacts => {
  const generations = { designation: 1, nodeReport: 4, nodeSessionId: 'session-1' };
  return {
    ownOffer,
    body: { bearer, version: '1.0.0', nodeId: 'node-1', protocol: { ...ownOffer } },
    ready: true,
    relaySessionId: 'relay-a',
    electedRelaySessionId: 'relay-a',
    designation: designation(),
    placementNodeIds: ['node-1', 'node-2'],
    node: {
      sessionId: 'session-1',
      assignments: [{ assignmentId: 'a-1', serviceId: 'ingress', sessionId: 'session-1', state: 'ready', secretVersions: [secretVersion] }],
    },
    currentBearer: bearer,
    routeTableRevision: 7,
    observed: { ...generations },
    reread: { ...generations },
  };
};

type TFacts = IClusterIngressRegistrationFacts;
type TBreak = (factsArg: TFacts) => TFacts;

/** One way to make each named reason true, in the contract's order. */
const breaks: Array<[data.TClusterIngressRegistrationRefusalReason, TBreak]> = [
  ['not-ready', (facts) => ({ ...facts, ready: false })],
  ['registration-invalid', (facts) => ({ ...facts, body: { ...(facts.body as object), version: '' } })],
  ['relay-not-connected', (facts) => ({ ...facts, electedRelaySessionId: 'relay-b' })],
  ['ingress-not-designated', (facts) => ({ ...facts, designation: null })],
  ['node-mismatch', (facts) => ({ ...facts, placementNodeIds: ['node-2'] })],
  ['assignment-not-running', (facts) => ({ ...facts, node: null })],
  ['bearer-refused', (facts) => ({ ...facts, body: { ...(facts.body as object), bearer: 'z'.repeat(43) } })],
  ['conflict', (facts) => ({ ...facts, reread: { ...facts.reread, designation: 2 } })],
];

const reasonOf = (factsArg: TFacts): string => {
  const verdict = judgeClusterIngressRegistration(factsArg);
  return verdict.outcome === 'refused' ? verdict.refusal.reason : verdict.outcome;
};

/** The same facts for a cluster that holds a fleet-cutover designation instead of a Pallet one. */
const fleetCutoverFacts = (credentialArg = true): IClusterIngressRegistrationFacts => ({
  ...acceptableFacts(),
  designation: null,
  fleetCutover: {
    id: 'cluster-1', generation: 1, clusterId: 'cluster-1', ingressServiceId: 'ingress', acceptedAt: 1,
    ...(credentialArg ? { credential: { credentialId: 'credential-1', generation: 1, secretVersion } } : {}),
  },
});

describe('judgeClusterIngressRegistration for a fleet-cutover designation', () => {
  it('is a designation: accepted with every fact in place, never ingress-not-designated', () => {
    assert.deepEqual(judgeClusterIngressRegistration(fleetCutoverFacts()), {
      outcome: 'accepted', acceptance: { accepted: true, revision: 7, protocol: ownOffer },
    });
  });

  it('is judged by the same reasons after the designation: node, assignment, bearer, conflict', () => {
    const reasons = breaks
      .filter(([reason]) => !['not-ready', 'registration-invalid', 'relay-not-connected', 'ingress-not-designated'].includes(reason))
      .map(([reason, broken]) => [reason, reasonOf(broken(fleetCutoverFacts()))]);
    assert.deepEqual(reasons, [
      ['node-mismatch', 'node-mismatch'],
      ['assignment-not-running', 'assignment-not-running'],
      ['bearer-refused', 'bearer-refused'],
      ['conflict', 'conflict'],
    ]);
    assert.equal(reasonOf({ ...fleetCutoverFacts(), fleetCutover: null }), 'ingress-not-designated');
  });

  it('a record without a credential Cloudly minted is judged up to the bearer, which it cannot check', () => {
    assert.equal(reasonOf({ ...fleetCutoverFacts(false), currentBearer: null }), 'bearer-refused');
    assert.equal(reasonOf({ ...fleetCutoverFacts(false), placementNodeIds: ['node-2'] }), 'node-mismatch');
  });
});

describe('judgeClusterIngressRegistration', () => {
  it('accepts a registration with every fact in place and answers the revision and its own offer', () => {
    const verdict = judgeClusterIngressRegistration(acceptableFacts());
    assert.deepEqual(verdict, { outcome: 'accepted', acceptance: { accepted: true, revision: 7, protocol: ownOffer } });
    const withoutTable = judgeClusterIngressRegistration({ ...acceptableFacts(), routeTableRevision: null });
    assert.equal(withoutTable.outcome === 'accepted' && withoutTable.acceptance.revision, null);
  });

  it('covers every refusal reason of the contract, in its order', () => {
    assert.deepEqual(breaks.map(([reason]) => reason), [...data.clusterIngressRegistrationRefusalReasons]);
  });

  for (const [reason, breakFacts] of breaks) {
    it(`refuses ${reason} alone, as a valid named refusal with a fitting retry`, () => {
      const verdict = judgeClusterIngressRegistration(breakFacts(acceptableFacts()));
      assert.equal(verdict.outcome, 'refused');
      if (verdict.outcome !== 'refused') {
        return;
      }
      assert.equal(verdict.refusal.reason, reason);
      assert.deepEqual(data.validateClusterIngressRegistrationRefusal(verdict.refusal), []);
      assert.equal(verdict.refusal.retryAfterMs, clusterIngressRetryAfterMs[reason]);
      assert.ok(!JSON.stringify(verdict).includes(bearer));
    });
  }

  it('answers the earliest reason whenever several hold', () => {
    for (let first = 0; first < breaks.length; first++) {
      // Break this reason and every later one at once; the earliest must win.
      let facts = acceptableFacts();
      for (const [, breakFacts] of breaks.slice(first)) {
        facts = breakFacts(facts);
      }
      assert.equal(reasonOf(facts), breaks[first][0]);
    }
  });

  it('judges the protocol before every named reason, even when Cloudly is not ready', () => {
    let facts: TFacts = { ...acceptableFacts(), body: { ...(acceptableFacts().body as object), protocol: { ...ownOffer, minimumVersion: 2, maximumVersion: 3 } } };
    for (const [, breakFacts] of breaks.filter(([reason]) => reason !== 'registration-invalid')) {
      facts = breakFacts(facts);
    }
    const verdict = judgeClusterIngressRegistration(facts);
    assert.equal(verdict.outcome, 'protocol-refused');
    assert.ok(verdict.outcome === 'protocol-refused' && data.readClusterIngressRegistrationRefusal(verdict.refusal) === null);
    assert.equal(verdict.outcome === 'protocol-refused' && verdict.refusal.reason, 'version-unsupported');
    const unreadable = judgeClusterIngressRegistration({ ...acceptableFacts(), body: { bearer } });
    assert.equal(unreadable.outcome === 'protocol-refused' && unreadable.refusal.reason, 'offer-invalid');
  });

  it('requires the assignment to be ready, of the ingress service, under the current session, with the current credential', () => {
    const assignment = acceptableFacts().node!.assignments[0];
    const variants = [
      { ...assignment, state: 'pending' as const },
      { ...assignment, serviceId: 'other' },
      { ...assignment, sessionId: 'session-0' },
      { ...assignment, secretVersions: [{ secretId: 'secret-1', secretVersionId: 'secret-1-v0' }] },
    ];
    for (const variant of variants) {
      const facts = acceptableFacts();
      assert.equal(reasonOf({ ...facts, node: { sessionId: 'session-1', assignments: [variant] } }), 'assignment-not-running');
    }
  });

  it('refuses the bearer when Cloudly cannot read the current credential', () => {
    assert.equal(reasonOf({ ...acceptableFacts(), currentBearer: null }), 'bearer-refused');
  });

  it('answers conflict when the node session or report changed while judging', () => {
    const facts = acceptableFacts();
    assert.equal(reasonOf({ ...facts, reread: { ...facts.reread, nodeReport: 5 } }), 'conflict');
    assert.equal(reasonOf({ ...facts, reread: { ...facts.reread, nodeSessionId: 'session-2' } }), 'conflict');
  });

  it('keeps every retry within the contract bounds', () => {
    for (const reason of data.clusterIngressRegistrationRefusalReasons) {
      const retry = clusterIngressRetryAfterMs[reason];
      assert.ok(retry >= data.clusterIngressRegistrationContract.minimumRetryAfterMs);
      assert.ok(retry <= data.clusterIngressRegistrationContract.maximumRetryAfterMs);
    }
  });

  it('refuses a bearer that only extends or shortens the current one', () => {
    const withBearer = (bearerArg: string): TFacts => ({ ...acceptableFacts(), body: { ...(acceptableFacts().body as object), bearer: bearerArg } });
    assert.equal(reasonOf(withBearer(`${bearer}x`)), 'bearer-refused');
    assert.equal(reasonOf(withBearer(bearer.slice(0, -1))), 'bearer-refused');
    assert.equal(reasonOf(withBearer(bearer)), 'accepted');
  });
});
