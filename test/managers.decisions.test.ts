import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TypedResponseError } from '@api.global/typedrequest';
import type { TDecision, IStoredDocument } from '../ts/core/store.js';
import type { TServiceVolumeInitialization } from '../ts/interfaces/data/servicevolume.js';
import type { IService } from '../ts/interfaces/data/service.js';
import { decideBackupOrder, decideBackupSettlement, decideClosureRecord, type IBackupOrder } from '../ts/manager.backup/decide.js';
import type { IServiceBackupDocument } from '../ts/manager.backup/backup.manager.js';
import {
  decideLeaseElection,
  decideLeaseRelease,
  decideNodeCorestore,
  decideNodeRemoval,
  decideNodeReport,
  type ILeaseElectionFacts,
} from '../ts/manager.cluster/decide.js';
import type { IClusterNodeDocument } from '../ts/manager.cluster/clusternodes.js';
import type { IClusterRelayLeaseDocument } from '../ts/manager.cluster/relayelection.js';
import {
  decideClaimAnswer,
  decideHistoricalSupersession,
  decideRuntimeStatus,
  decideUncertainRelease,
  decideVolumeInitialization,
  isHeldHistorical,
} from '../ts/manager.service/decide.js';
import { judgeServiceRuntime } from '../ts/manager.service/runtimestatus.js';
import type { IRuntimeLocalStorageClaimRecord } from '../ts/interfaces/data/runtimelocalstorageclaim.js';
import type { IRuntimeLocalStorageClaimDocument, IServiceDocument, IServiceRuntimeStatusDocument } from '../ts/manager.service/service.manager.js';

/**
 * The managers' decisions are pure: what the store read in, the `store.mutate` decision out. These
 * tables hold each one to its contract without a server.
 */

/** The error data of a refusal decision, or null when the decision is not a refusal. */
const refusalOf = <T extends IStoredDocument>(decisionArg: TDecision<T>): Record<string, unknown> | null =>
  (decisionArg.kind === 'refuse' ? (decisionArg.refusal as TypedResponseError).errorData as Record<string, unknown> : null);

describe('backup decisions', () => {
  const order: IBackupOrder = {
    backupId: 'b-1', clusterId: 'c-1', nodeId: 'n-1', serviceId: 's-1', orderSha256: 'a'.repeat(64), now: 10_000, attemptTimeoutMs: 1_000,
  };
  const stored = (overridesArg: Partial<IServiceBackupDocument>): IServiceBackupDocument => ({
    id: 'b-1', generation: 3, clusterId: 'c-1', nodeId: 'n-1', serviceId: 's-1', createdAt: 1, state: 'running',
    attemptStartedAt: order.now, orderSha256: order.orderSha256, snapshots: [], ...overridesArg,
  });

  test('an order: new id created, completed kept, live attempt in progress, dead or failed ordered again, other order refused', () => {
    assert.equal(decideBackupOrder(null, order).kind, 'create');
    assert.deepEqual(decideBackupOrder(stored({ state: 'completed' }), order), { kind: 'keep' });
    assert.deepEqual(refusalOf(decideBackupOrder(stored({ state: 'running' }), order))?.reasons, ['backup-in-progress']);
    assert.deepEqual(decideBackupOrder(stored({ state: 'running', attemptStartedAt: order.now - 1_001 }), order), {
      kind: 'write', change: { set: { state: 'running', attemptStartedAt: order.now }, unset: ['failureReason'] },
    });
    assert.equal(decideBackupOrder(stored({ state: 'failed', failureReason: 'x' }), order).kind, 'write');
    assert.deepEqual(refusalOf(decideBackupOrder(stored({ orderSha256: 'b'.repeat(64) }), order))?.reasons, ['backup-id-in-use']);
  });

  test('settling a backup that is gone is not-found, never backup-in-progress', () => {
    const refusal = refusalOf(decideBackupSettlement(null, { state: 'completed' }));
    assert.equal(refusal?.code, 'not-found');
    assert.deepEqual(refusal?.reasons, ['backup-not-found']);
    assert.deepEqual(decideBackupSettlement(stored({}), { state: 'failed' }), { kind: 'write', change: { set: { state: 'failed' } } });
  });

  test('a closure is recorded once, and not on a backup that is gone', () => {
    const closure = { blobKey: 'k', descriptor: {} } as NonNullable<IServiceBackupDocument['closure']>;
    assert.equal(decideClosureRecord(stored({}), closure).kind, 'write');
    assert.equal(decideClosureRecord(stored({ closure }), closure).kind, 'keep');
    assert.equal(decideClosureRecord(null, closure).kind, 'keep');
  });
});

describe('cluster decisions', () => {
  const node = (overridesArg: Partial<IClusterNodeDocument> = {}): IClusterNodeDocument => ({
    id: 'c-1/n-1', generation: 2, nodeId: 'n-1', clusterId: 'c-1', name: 'one', createdAt: 1, source: 'admin', ...overridesArg,
  });
  const endpoint = (valueArg: string) => ({ endpoint: valueArg });

  test('a node is removed only when it exists', () => {
    assert.deepEqual(decideNodeRemoval(node(), 'c-1', 'n-1'), { kind: 'remove' });
    assert.equal(refusalOf(decideNodeRemoval(null, 'c-1', 'n-1'))?.code, 'not-found');
  });

  test('a Corestore endpoint: compare on the value read, keep when already so, unset for null', () => {
    assert.equal(refusalOf(decideNodeCorestore(null, 'c-1', 'n-1', null, endpoint('http://a')))?.code, 'not-found');
    assert.equal(refusalOf(decideNodeCorestore(node(), 'c-1', 'n-1', endpoint('http://b'), endpoint('http://a')))?.code, 'conflict');
    assert.deepEqual(decideNodeCorestore(node({ corestore: endpoint('http://a') }), 'c-1', 'n-1', endpoint('http://a'), endpoint('http://a')), { kind: 'keep' });
    assert.deepEqual(decideNodeCorestore(node(), 'c-1', 'n-1', null, endpoint('http://a')), {
      kind: 'write', change: { set: { corestore: endpoint('http://a') } },
    });
    assert.deepEqual(decideNodeCorestore(node({ corestore: endpoint('http://a') }), 'c-1', 'n-1', endpoint('http://a'), null), {
      kind: 'write', change: { unset: ['corestore'] },
    });
  });

  test('a report creates a new node only with a name, and changes only what it states', () => {
    assert.equal(refusalOf(decideNodeReport(null, 'c-1/n-2', 'c-1', { nodeId: 'n-2' }, 5))?.code, 'invalid-request');
    const created = decideNodeReport(null, 'c-1/n-2', 'c-1', { nodeId: 'n-2', name: 'two', hostAddresses: ['192.0.2.1'] }, 5);
    assert.deepEqual(created, {
      kind: 'create',
      doc: { id: 'c-1/n-2', nodeId: 'n-2', clusterId: 'c-1', name: 'two', createdAt: 5, source: 'relay-report', reportedAt: 5, hostAddresses: ['192.0.2.1'] },
    });
    assert.deepEqual(decideNodeReport(node(), 'c-1/n-1', 'c-1', { nodeId: 'n-1' }, 6), { kind: 'write', change: { set: { reportedAt: 6 } } });
  });

  describe('the relay lease', () => {
    const facts: ILeaseElectionFacts = {
      clusterId: 'c-1', instanceId: 'me', candidateSessionId: 's-new', liveSessionIds: ['s-new', 's-old'], now: 1_000, leaseTtlMs: 100,
    };
    const lease = (overridesArg: Partial<IClusterRelayLeaseDocument>): IClusterRelayLeaseDocument => ({
      id: 'c-1', generation: 4, clusterId: 'c-1', sessionId: 's-old', instanceId: 'me', expiresAt: 1_050, acquiredAt: 10, ...overridesArg,
    });

    test('no lease: the candidate creates it', () => {
      const election = decideLeaseElection(null, facts);
      assert.equal(election.decision.kind, 'create');
      assert.equal(election.winnerSessionId, 's-new');
    });

    test('a live lease of another instance stays', () => {
      const election = decideLeaseElection(lease({ instanceId: 'other' }), facts);
      assert.deepEqual(election.decision, { kind: 'keep' });
      assert.equal(election.heldElsewhere, true);
    });

    test('an expired lease of another instance, or a released one, goes to the candidate', () => {
      for (const taken of [lease({ instanceId: 'other', expiresAt: 999 }), lease({ sessionId: null, instanceId: null, expiresAt: 0 })]) {
        const election = decideLeaseElection(taken, facts);
        assert.equal(election.winnerSessionId, 's-new');
        assert.deepEqual(election.decision, {
          kind: 'write', change: { set: { sessionId: 's-new', instanceId: 'me', expiresAt: 1_100, acquiredAt: 1_000 } },
        });
      }
    });

    test('a live socket of this instance keeps (renews) its lease; one that is gone loses it to the candidate', () => {
      assert.deepEqual(decideLeaseElection(lease({}), facts).decision, {
        kind: 'write', change: { set: { sessionId: 's-old', instanceId: 'me', expiresAt: 1_100, acquiredAt: 10 } },
      });
      assert.equal(decideLeaseElection(lease({ sessionId: 's-gone' }), facts).winnerSessionId, 's-new');
    });

    test('a release frees only the lease of this socket of this instance', () => {
      assert.equal(decideLeaseRelease(lease({}), 'me', 's-old', 1).kind, 'write');
      assert.equal(decideLeaseRelease(lease({}), 'me', 's-new', 1).kind, 'keep');
      assert.equal(decideLeaseRelease(lease({ instanceId: 'other' }), 'me', 's-old', 1).kind, 'keep');
      assert.equal(decideLeaseRelease(null, 'me', 's-old', 1).kind, 'keep');
    });
  });
});

describe('service decisions', () => {
  const empty = (modeArg: number): TServiceVolumeInitialization => ({ kind: 'empty', ownership: { kind: 'run-as', mode: modeArg } });
  const service = (overridesArg: Partial<IServiceDocument> = {}): IServiceDocument => ({
    id: 'svc-1', generation: 2, name: 'one', organizationId: 'org', clusterId: 'c-1', specRevision: 1,
    runtime: {} as IServiceDocument['runtime'],
    volumes: [{ id: 'vol-data', mountPath: '/data', readOnly: false, driver: 'local' }],
    claimDecisions: [], createdAt: 1, updatedAt: 1, ...overridesArg,
  });
  const view = (docArg: IServiceDocument): IService => ({ ...docArg }) as unknown as IService;
  const noClaims = () => [];
  const change = { serviceId: 'svc-1', mountPath: '/data', expected: null, wanted: empty(0o750), now: 7 };

  test('volume initialization: missing service or volume, another stored value, a decided claim refuse; otherwise write', () => {
    assert.equal(refusalOf(decideVolumeInitialization(null, change, view, noClaims))?.code, 'volume-not-found');
    assert.equal(refusalOf(decideVolumeInitialization(service(), { ...change, mountPath: '/other' }, view, noClaims))?.code, 'volume-not-found');
    assert.equal(refusalOf(decideVolumeInitialization(service(), { ...change, expected: empty(0o700) }, view, noClaims))?.code, 'conflict');
    const claimed = service({ claimDecisions: [{ mountPath: '/data' } as IServiceDocument['claimDecisions'][number]] });
    assert.equal(refusalOf(decideVolumeInitialization(claimed, change, view, noClaims))?.code, 'volume-initialization-bound');
    const written = decideVolumeInitialization(service(), change, view, noClaims);
    assert.equal(written.kind, 'write');
    assert.deepEqual(written.kind === 'write' ? written.change.set?.volumes?.[0].initialization : null, empty(0o750));
  });

  test('runtime status: kept while the verdict stands, so changedAt moves only when it changes', () => {
    const verdict = { specRevision: 2, state: 'running', reason: null } as unknown as Pick<IServiceRuntimeStatusDocument, 'specRevision' | 'state' | 'reason'>;
    const stored: IServiceRuntimeStatusDocument = { id: 'svc-1', generation: 1, ...verdict, changedAt: 3 };
    assert.deepEqual(decideRuntimeStatus(stored, 'svc-1', verdict, 9), { kind: 'keep' });
    assert.equal(decideRuntimeStatus(null, 'svc-1', verdict, 9).kind, 'create');
    assert.deepEqual(decideRuntimeStatus({ ...stored, specRevision: 1 }, 'svc-1', verdict, 9), {
      kind: 'write', change: { set: { ...verdict, changedAt: 9 } },
    });
  });

  test('an uncertain claim is released only at its held generation', () => {
    const claim = (nodeStateArg: string, releasedArg?: number) => ({
      id: 'lsc-1', generation: 5, serviceId: 'svc-1', clusterId: 'c-1', nodeId: 'n-1', mountPath: '/data', history: [],
      current: { claim: { generation: 2 }, nodeState: nodeStateArg },
      ...(releasedArg === undefined ? {} : { releasedUncertainGeneration: releasedArg }),
    }) as unknown as IRuntimeLocalStorageClaimDocument;
    assert.equal(refusalOf(decideUncertainRelease(null, 'lsc-1', 2))?.code, 'not-found');
    assert.deepEqual(decideUncertainRelease(claim('uncertain'), 'lsc-1', 2), { kind: 'write', change: { set: { releasedUncertainGeneration: 2 } } });
    assert.equal(refusalOf(decideUncertainRelease(claim('uncertain'), 'lsc-1', 1))?.code, 'conflict');
    assert.equal(refusalOf(decideUncertainRelease(claim('uncertain', 2), 'lsc-1', 2))?.code, 'conflict');
    assert.equal(refusalOf(decideUncertainRelease(claim('bound'), 'lsc-1', 2))?.code, 'conflict');
  });

  test('a claim answered historical makes the verdict wait on conflict, before an import that is pending', () => {
    const service = { id: 'svc-1', volumes: [], ports: [], routes: [], runtime: { image: 'x:1', replicas: 1, profile: { runAs: null }, placement: { nodeIds: [] } } } as unknown as IService;
    const record = (overridesArg: object) => ({ claim: { lifecycle: 'bound', initialization: 'import' }, nodeState: null, answerStatus: null, ...overridesArg }) as unknown as IRuntimeLocalStorageClaimRecord;
    const judge = (claimsArg: IRuntimeLocalStorageClaimRecord[]) => judgeServiceRuntime({
      service, claimMarkers: [], clusterExists: true, claims: claimsArg, bindings: { bindingsPending: false, legacyAdoptionPending: false },
    });
    assert.deepEqual(judge([record({ answerStatus: 'historical', nodeState: 'import-required' })]), { state: 'waiting', reason: 'conflict' });
    assert.deepEqual(judge([record({ answerStatus: 'accepted', nodeState: 'import-required' })]), { state: 'waiting', reason: 'storage-import-pending' });
  });

  test('a historical answer records the node\'s generation and holds the claim; only its generation is superseded, over the node\'s exact generation', () => {
    const sent = { generation: 2, digest: 'c'.repeat(64) };
    const nodeClaim = { id: 'lsc-1', generation: 7, digest: 'd'.repeat(64) };
    const doc = { id: 'lsc-1', generation: 4, history: [], current: { claim: { id: 'lsc-1', ...sent }, delivery: 'pending', nodeState: null, answerStatus: null } } as unknown as IRuntimeLocalStorageClaimDocument;
    const answered = decideClaimAnswer(doc, sent, { state: 'ready', status: 'historical', claim: nodeClaim }, 5);
    assert.equal(answered.kind, 'write');
    const recorded = { ...doc, current: (answered as { change: { set: { current: IRuntimeLocalStorageClaimDocument['current'] } } }).change.set.current };
    assert.deepEqual([recorded.current.answerStatus, recorded.current.nodeClaim], ['historical', nodeClaim]);
    assert.equal(isHeldHistorical(recorded), true);
    // An accepted answer later clears the node's generation: nothing is held.
    const accepted = decideClaimAnswer(recorded, sent, { state: 'ready', status: 'accepted', claim: { id: 'lsc-1', ...sent } }, 6);
    assert.equal('nodeClaim' in (accepted as { change: { set: { current: object } } }).change.set.current, false);

    const next = { claim: { generation: 8, previous: nodeClaim } } as unknown as IRuntimeLocalStorageClaimDocument['current'];
    assert.deepEqual(decideHistoricalSupersession(recorded, { claimId: 'lsc-1', generation: 2 }, next, 4), {
      kind: 'write', change: { set: { current: next, history: [recorded.current] } },
    });
    assert.equal(refusalOf(decideHistoricalSupersession(null, { claimId: 'lsc-1', generation: 2 }, next, 4))?.code, 'not-found');
    assert.equal(refusalOf(decideHistoricalSupersession(recorded, { claimId: 'lsc-1', generation: 1 }, next, 4))?.code, 'conflict');
    assert.equal(refusalOf(decideHistoricalSupersession(doc, { claimId: 'lsc-1', generation: 2 }, next, 4))?.code, 'conflict', 'not historical');
    const overOther = { claim: { generation: 9, previous: { ...nodeClaim, generation: 8 } } } as unknown as IRuntimeLocalStorageClaimDocument['current'];
    assert.equal(refusalOf(decideHistoricalSupersession(recorded, { claimId: 'lsc-1', generation: 2 }, overOther, 4))?.code, 'conflict', 'built over another generation');
  });
});
