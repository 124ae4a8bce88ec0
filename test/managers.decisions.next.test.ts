import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { upstreamExamplePlan } from './runtimenetwork.fixture.js';
import { TypedResponseError } from '@api.global/typedrequest';
import type { IStoredDocument, TDecision } from '../ts/core/store.js';
import type { IService, IServiceRuntimeSpec } from '../ts/interfaces/data/service.js';
import { clusterIngressEnvironmentNames } from '../ts/interfaces/data/clusteringress.js';
import type { IClusterIngressDesignationRequest, IFleetCutoverIngressDesignation } from '../ts/interfaces/data/clusteringressdesignation.js';
import type { IIsolatedRestoreNodeState } from '../ts/interfaces/data/isolatedrestore.js';
import type { IRuntimeNetworkAddressPlan } from '../ts/interfaces/data/runtimenetworkaddressplan.js';
import type { IRuntimeNetworkProjection, IRuntimeNetworkWorkloadLease } from '../ts/interfaces/data/runtimenetwork.js';
import type { IClusterPlatformObservedReport } from '../ts/interfaces/data/desiredstate.js';
import { decideRelayRegistration, type IClusterRelayRegistrationDocument } from '../ts/manager.cluster/relayregistrations.js';
import {
  clusterIngressTag,
  decideAssignmentReport,
  decideDesignation,
  decideDesignationCommit,
  decideFleetCutover,
  decideRouteTableComputation,
  decideRuntimePhase,
  sealClusterIngressDesignation,
  type IDesignationFacts,
  type TNodeAssignmentReport,
} from '../ts/manager.ingress/decide.js';
import type { IClusterIngressRouteTableDocument, IClusterIngressSlotDocument, INodeRuntimeAssignmentsDocument } from '../ts/manager.ingress/documents.js';
import {
  backupRefusalReasons,
  backupRestoreRefusal,
  closureDownloadRefusal,
  closureUploadRefusal,
  decideBackupInterrupted,
  decideBackupOrder,
  decideBackupSettlement,
  decideClosureRecord,
  decideIsolatedRestoreCreation,
  decideRestoreStateRecord,
  type IBackupOrder,
} from '../ts/manager.backup/decide.js';
import type { IIsolatedRestoreDocument, IServiceBackupDocument } from '../ts/manager.backup/documents.js';
import {
  applicationOf,
  decideAddressPlanWrite,
  decideLeaseStatement,
  decideProjectionApplication,
  decideProjectionWrite,
  strandedLeaseReasons,
  type IAllocatedLeaseEntry,
  type ILeaseStatementFacts,
} from '../ts/manager.runtimenetwork/decide.js';
import {
  addressPlanDocumentId,
  type IRuntimeNetworkAddressPlanDocument,
  type IRuntimeNetworkLeasesDocument,
  type IRuntimeNetworkProjectionDocument,
} from '../ts/manager.runtimenetwork/documents.js';
import {
  decideDesiredStatePublication,
  decideForget,
  decideObservedPlacements,
  decideObservedRevision,
  decidePendingRemoval,
  decideServiceDeletion,
  judgeObservedReport,
} from '../ts/manager.desiredstate/decide.js';
import type { IClusterDesiredStateDocument, IServiceObservedStateDocument } from '../ts/manager.desiredstate/documents.js';
import type { IServiceDocument } from '../ts/manager.service/service.manager.js';
import { assertFieldProblems } from './helpers/refusals.js';

/**
 * The decisions of the domains converted last (ingress, backup's orchestration steps, runtime
 * network, desired state), held to their contracts without a server: what the store read in, the
 * `store.mutate` decision (or the refusal) out.
 */

/** A refusal decision's error: its text and data. Fails the test when the decision is not a refusal. */
const refusalOf = <T extends IStoredDocument>(decisionArg: TDecision<T>): { text: string; data: Record<string, unknown> } => {
  assert.equal(decisionArg.kind, 'refuse', `expected a refusal, got ${JSON.stringify(decisionArg)}`);
  const refusal = (decisionArg as { refusal: TypedResponseError }).refusal;
  assert.ok(refusal instanceof TypedResponseError);
  return { text: refusal.errorText, data: refusal.errorData as Record<string, unknown> };
};

/** The error data of a `*Refusal` check's answer, or null when it lets the request go on. */
const dataOf = (refusalArg: TypedResponseError | null): Record<string, unknown> | null =>
  (refusalArg === null ? null : refusalArg.errorData as Record<string, unknown>);

// ---------------------------------------------------------------------------------------------
// Ingress

describe('ingress decisions', () => {
  const clusterId = 'c-1';
  const service = (overridesArg: Partial<IService> = {}): IService => ({
    id: 'svc-ingress', name: 'ingress', organizationId: 'org', clusterId, generation: 4, specRevision: 3,
    runtime: { placement: { nodeIds: ['n-2', 'n-1'] } } as unknown as IServiceRuntimeSpec,
    ports: [], routes: [], volumes: [], environment: {}, secrets: {}, readiness: null, networkPolicy: null, createdAt: 1, updatedAt: 1, ...overridesArg,
  });
  const intent = (overridesArg: Partial<IClusterIngressDesignationRequest> = {}): IClusterIngressDesignationRequest => ({
    mutationId: 'm-1', clusterId, ingressServiceId: 'svc-ingress',
    currentRuntime: { id: clusterId, phase: 'pallet', generation: 1 }, expectedSpecRevision: 3, expectedDesignation: null,
    ...overridesArg,
  });
  const minted = {
    secretVersion: { secretId: 'sec-ingress', secretVersionId: 'ver-2' },
    bearer: { secretId: 'sec-ingress', secretVersionId: 'ver-2', value: 'bearer-value' },
  };
  const facts = (overridesArg: Partial<IDesignationFacts> = {}): IDesignationFacts => ({
    intent: intent(), requestDigest: 'digest-of-request', actorId: 'admin-1', slot: null, service: service(),
    relayOrigin: 'https://relay.example', minted, now: 5_000, ...overridesArg,
  });
  const slot = (overridesArg: Partial<IClusterIngressSlotDocument> = {}): IClusterIngressSlotDocument => ({
    id: clusterId, generation: 7, clusterId, kind: 'none', designation: null, fleetCutover: null, bearer: null,
    runtime: { phase: 'pallet', generation: 1 }, ...overridesArg,
  });
  const firstDesignation = () => {
    const decided = decideDesignation(facts());
    assert.ok(decided.answer);
    return decided.answer.designation;
  };

  test('a first designation creates the slot: generation 1, no previous, credential 1, sealed, spec prepared per node in order', () => {
    const decided = decideDesignation(facts());
    const expected = sealClusterIngressDesignation({
      id: clusterId, generation: 1, previous: null, clusterId,
      runtime: { id: clusterId, phase: 'pallet', generation: 1 },
      ingressServiceId: 'svc-ingress', preparedSpecRevision: 3,
      credential: { credentialId: `ingress-credential-${clusterIngressTag(clusterId)}`, generation: 1, secretVersion: minted.secretVersion },
      actorId: 'admin-1', acceptedAt: 5_000,
    });
    assert.match(expected.digest, /^[0-9a-f]{64}$/);
    assert.deepEqual(decided.decision, {
      kind: 'create',
      doc: { id: clusterId, clusterId, kind: 'pallet', designation: expected, fleetCutover: null, bearer: minted.bearer, runtime: { phase: 'pallet', generation: 1 } },
    });
    assert.equal(decided.answer?.requestDigest, 'digest-of-request');
    assert.deepEqual(decided.answer?.designation, expected);
    const environmentOf = (nodeIdArg: string) => ({
      [clusterIngressEnvironmentNames.bearer]: { secret: minted.secretVersion },
      [clusterIngressEnvironmentNames.relayOrigin]: { value: 'https://relay.example' },
      [clusterIngressEnvironmentNames.nodeId]: { value: nodeIdArg },
    });
    assert.deepEqual(decided.answer?.spec, {
      serviceId: 'svc-ingress', specRevision: 3, runtime: service().runtime,
      nodes: [{ nodeId: 'n-1', environment: environmentOf('n-1') }, { nodeId: 'n-2', environment: environmentOf('n-2') }],
    });
  });

  test('a rotation writes the next designation on the stored slot: generation and credential move one on, previous names the replaced one', () => {
    const current = firstDesignation();
    const reference = { id: current.id, generation: current.generation, digest: current.digest };
    const decided = decideDesignation(facts({
      slot: slot({ kind: 'pallet', designation: current, bearer: minted.bearer }),
      intent: intent({ expectedDesignation: reference }),
      now: 6_000,
    }));
    assert.equal(decided.decision.kind, 'write');
    const set = decided.decision.kind === 'write' ? decided.decision.change.set : undefined;
    assert.equal(set?.kind, 'pallet');
    assert.deepEqual(set?.bearer, minted.bearer);
    assert.equal(set?.designation?.generation, 2);
    assert.deepEqual(set?.designation?.previous, reference);
    assert.equal(set?.designation?.credential.generation, 2);
    assert.equal(set?.designation?.acceptedAt, 6_000);
    assert.deepEqual(set?.designation, decided.answer?.designation);
  });

  const refusalCases: Array<{ name: string; facts: () => IDesignationFacts; text?: string; data: Record<string, unknown> }> = [
    {
      name: 'a runtime that is not pallet',
      facts: () => facts({ slot: slot({ runtime: { phase: 'cutover', generation: 1 } }) }),
      data: { code: 'conflict', retryable: true, reasons: ['runtime-changed'], causes: [{ path: 'request.designation.currentRuntime', message: "is not the cluster's current runtime (cutover, generation 1)" }] },
    },
    {
      name: 'a runtime generation that moved (checked before the service, which is missing too)',
      facts: () => facts({ slot: slot({ runtime: { phase: 'pallet', generation: 2 } }), service: null }),
      data: { code: 'conflict', retryable: true, reasons: ['runtime-changed'], causes: [{ path: 'request.designation.currentRuntime', message: "is not the cluster's current runtime (pallet, generation 2)" }] },
    },
    {
      name: 'no service',
      facts: () => facts({ service: null }),
      data: { code: 'not-found', retryable: false, reasons: ['service-not-found'], causes: [{ path: 'request.designation.ingressServiceId', message: 'names no service of this cluster' }] },
    },
    {
      name: 'a service of another cluster',
      facts: () => facts({ service: service({ clusterId: 'c-2' }) }),
      data: { code: 'not-found', retryable: false, reasons: ['service-not-found'], causes: [{ path: 'request.designation.ingressServiceId', message: 'names no service of this cluster' }] },
    },
    {
      name: 'another spec revision',
      facts: () => facts({ service: service({ specRevision: 4 }) }),
      data: { code: 'conflict', retryable: true, reasons: ['spec-revision-changed'], causes: [{ path: 'request.designation.expectedSpecRevision', message: "is not the service's runtime spec revision (4)" }] },
    },
    {
      name: 'no relay origin',
      facts: () => facts({ relayOrigin: null }),
      data: { code: 'unavailable', retryable: true, reasons: ['relay-origin-unknown'], causes: [{ message: 'the cluster has no accepted relay registration, so its relay origin is unknown' }] },
    },
    {
      name: 'a fleet-cutover slot (the contract\'s own refusal)',
      facts: () => facts({ slot: slot({ kind: 'fleet-cutover' }) }),
      text: 'The cluster holds a fleet-cutover ingress designation.',
      data: { code: 'conflict', retryable: false, reasons: ['fleet-cutover-designated'], causes: [{ message: 'the cluster holds a fleet-cutover ingress designation; a cluster holds one kind of designation only' }] },
    },
    {
      name: 'an expected designation when none is stored',
      facts: () => facts({ intent: intent({ expectedDesignation: { id: clusterId, generation: 1, digest: 'a'.repeat(64) } }) }),
      data: { code: 'conflict', retryable: true, reasons: ['designation-changed'], causes: [{ path: 'request.designation.expectedDesignation', message: "is not the cluster's current designation" }] },
    },
    {
      name: 'no expected designation while one is stored',
      facts: () => facts({ slot: slot({ kind: 'pallet', designation: firstDesignation() }) }),
      data: { code: 'conflict', retryable: true, reasons: ['designation-changed'], causes: [{ path: 'request.designation.expectedDesignation', message: "is not the cluster's current designation" }] },
    },
    {
      name: 'an expected designation with another digest',
      facts: () => {
        const current = firstDesignation();
        return facts({
          slot: slot({ kind: 'pallet', designation: current }),
          intent: intent({ expectedDesignation: { id: current.id, generation: current.generation, digest: 'b'.repeat(64) } }),
        });
      },
      data: { code: 'conflict', retryable: true, reasons: ['designation-changed'], causes: [{ path: 'request.designation.expectedDesignation', message: "is not the cluster's current designation" }] },
    },
  ];
  for (const refusalCase of refusalCases) {
    test(`a designation is refused, with no answer, for ${refusalCase.name}`, () => {
      const decided = decideDesignation(refusalCase.facts());
      assert.equal(decided.answer, null);
      const refusal = refusalOf(decided.decision);
      assert.deepEqual(refusal.data, refusalCase.data);
      if (refusalCase.text) {
        assert.equal(refusal.text, refusalCase.text);
      }
    });
  }

  test('the decided designation commits only on the slot generation it was decided on', () => {
    const decided: TDecision<IClusterIngressSlotDocument> = { kind: 'write', change: { set: { kind: 'pallet' } } };
    assert.equal(decideDesignationCommit(slot(), slot(), decided), decided);
    assert.equal(decideDesignationCommit(null, null, decided), decided);
    for (const [current, read] of [[slot({ generation: 8 }), slot()], [slot(), null]] as const) {
      assert.deepEqual(refusalOf(decideDesignationCommit(current, read, decided)).data, {
        code: 'conflict', retryable: true, reasons: ['kept-changing'], causes: [{ message: "the cluster's ingress designation or runtime changed while the request was decided" }],
      });
    }
  });

  test('a fleet cutover writes only into a slot that holds no designation of either kind, with the bearer Cloudly minted for it', () => {
    const secretVersion = { secretId: 'ingress-bearer-x', secretVersionId: 'ingress-bearer-x-1' };
    const fleetCutover: IFleetCutoverIngressDesignation = {
      id: 'fc-1', generation: 1, clusterId, ingressServiceId: 'svc-ingress', acceptedAt: 9,
      credential: { credentialId: 'ingress-credential-x', generation: 1, secretVersion },
    };
    const bearer = { ...secretVersion, encryptedValue: { v: 1 } as never };
    assert.deepEqual(decideFleetCutover(slot(), fleetCutover, bearer), { kind: 'write', change: { set: { kind: 'fleet-cutover', fleetCutover, bearer } } });
    assert.deepEqual(decideFleetCutover(slot({ kind: 'pallet' }), fleetCutover, bearer), { kind: 'keep' });
    assert.deepEqual(decideFleetCutover(slot({ kind: 'fleet-cutover' }), fleetCutover, bearer), { kind: 'keep' });
    assert.deepEqual(decideFleetCutover(null, fleetCutover, bearer), { kind: 'keep' });
  });

  test('a runtime phase change writes the next runtime generation only on the one the caller read', () => {
    assert.deepEqual(decideRuntimePhase(slot(), 1, 'cutover'), { kind: 'write', change: { set: { runtime: { phase: 'cutover', generation: 2 } } } });
    assert.deepEqual(decideRuntimePhase(slot(), 2, 'cutover'), { kind: 'keep' });
    assert.deepEqual(decideRuntimePhase(null, 1, 'cutover'), { kind: 'keep' });
  });

  describe('the one route table, recorded from a computation', () => {
    const target = { lease: { id: 'wl-1', generation: 2 }, nodeId: 'n-1', address: '10.0.0.5', port: 8080 };
    const route = { hostname: 'a.example', serviceId: 'svc-1', port: 8080, targets: [target] };
    const table = (generationArg: number, routesArg: IClusterIngressRouteTableDocument['routes'] = []): IClusterIngressRouteTableDocument =>
      ({ id: clusterId, generation: generationArg, clusterId, routes: routesArg, computedAt: 1 });

    test('the first computation creates it, with only the members of each route and target', () => {
      const extra = { ...route, extra: true, targets: [{ ...target, extra: 1 }] } as unknown as typeof route;
      assert.deepEqual(decideRouteTableComputation(null, clusterId, [extra], 3), {
        kind: 'create', doc: { id: clusterId, clusterId, routes: [route], computedAt: 3 },
      });
    });

    test('changed routes are written (the revision moves); equal routes are kept (it does not)', () => {
      assert.deepEqual(decideRouteTableComputation(table(4), clusterId, [route], 3), { kind: 'write', change: { set: { routes: [route], computedAt: 3 } } });
      assert.deepEqual(decideRouteTableComputation(table(4, [route]), clusterId, [route], 3), { kind: 'keep' });
      assert.deepEqual(decideRouteTableComputation(table(4, [route]), clusterId, [], 3), { kind: 'write', change: { set: { routes: [], computedAt: 3 } } });
    });

    test('a legacy administrator table (routes without targets) is replaced by the first computation', () => {
      const legacy = table(7, [{ hostname: 'a.example', serviceId: 'svc-1', port: 8080 }] as never);
      assert.deepEqual(decideRouteTableComputation(legacy, clusterId, [route], 3), { kind: 'write', change: { set: { routes: [route], computedAt: 3 } } });
    });
  });

  test('an assignment report replaces the last one whole (created for a node\'s first), keeping only the contract\'s members', () => {
    const report = {
      nodeId: 'n-1', sessionId: 'sess-1',
      assignments: [{
        assignmentId: 'as-1', serviceId: 'svc-1', sessionId: 'sess-1', state: 'running', extra: 1,
        secretVersions: [{ secretId: 'sec-1', secretVersionId: 'ver-1', extra: 2 }],
      }],
      extra: 3,
    } as unknown as TNodeAssignmentReport;
    const stored = {
      clusterId, nodeId: 'n-1', sessionId: 'sess-1',
      assignments: [{ assignmentId: 'as-1', serviceId: 'svc-1', sessionId: 'sess-1', state: 'running', secretVersions: [{ secretId: 'sec-1', secretVersionId: 'ver-1' }] }],
      reportedAt: 8,
    };
    assert.deepEqual(decideAssignmentReport(null, 'c-1/n-1', clusterId, report, 8), { kind: 'create', doc: { id: 'c-1/n-1', ...stored } });
    const previous = { id: 'c-1/n-1', generation: 2, ...stored, assignments: [] } as INodeRuntimeAssignmentsDocument;
    assert.deepEqual(decideAssignmentReport(previous, 'c-1/n-1', clusterId, report, 8), { kind: 'write', change: { set: stored } });
  });
});

// ---------------------------------------------------------------------------------------------
// Backup and isolated restore

describe('backup decisions (orchestration steps)', () => {
  const backup = (overridesArg: Partial<IServiceBackupDocument> = {}): IServiceBackupDocument => ({
    id: 'b-1', generation: 3, clusterId: 'c-1', nodeId: 'n-1', serviceId: 's-1', createdAt: 1, state: 'running',
    attemptStartedAt: 10_000, orderSha256: 'a'.repeat(64), snapshots: [], operationId: 'op-1', ...overridesArg,
  });
  const closure = { blobKey: 'closures/c-1/b-1', storedAt: 20, descriptor: {} } as NonNullable<IServiceBackupDocument['closure']>;
  const notFound = { code: 'not-found', retryable: false, reasons: [backupRefusalReasons.backupNotFound] };

  test('an order carries its operation: on the created backup, and on a dead attempt ordered again', () => {
    const order: IBackupOrder = {
      backupId: 'b-1', clusterId: 'c-1', nodeId: 'n-1', serviceId: 's-1', orderSha256: 'a'.repeat(64), now: 10_000, attemptTimeoutMs: 1_000, operationId: 'op-2',
    };
    const created = decideBackupOrder(null, order);
    assert.equal(created.kind, 'create');
    assert.equal(created.kind === 'create' ? created.doc.operationId : undefined, 'op-2');
    assert.deepEqual(decideBackupOrder(backup({ state: 'failed', failureReason: 'x' }), order), {
      kind: 'write', change: { set: { state: 'running', attemptStartedAt: 10_000, operationId: 'op-2' }, unset: ['failureReason'] },
    });
  });

  const settlementCases: Array<{ name: string; current: IServiceBackupDocument | null; operationId?: string; outcome: 'write' | 'keep' | 'not-found' }> = [
    { name: 'a backup that is gone', current: null, operationId: 'op-1', outcome: 'not-found' },
    { name: 'the attempt of the settling operation', current: backup(), operationId: 'op-1', outcome: 'write' },
    { name: 'an attempt another operation took over', current: backup({ operationId: 'op-2' }), operationId: 'op-1', outcome: 'keep' },
    { name: 'a backup recorded before operations existed', current: backup({ operationId: undefined }), operationId: 'op-1', outcome: 'write' },
    { name: 'a settlement that names no operation', current: backup({ operationId: 'op-2' }), outcome: 'write' },
  ];
  for (const settlement of settlementCases) {
    test(`a settlement of ${settlement.name}: ${settlement.outcome}`, () => {
      const decision = decideBackupSettlement(settlement.current, { state: 'completed', snapshots: [] }, settlement.operationId);
      if (settlement.outcome === 'not-found') {
        assert.deepEqual(refusalOf(decision).data, notFound);
      } else if (settlement.outcome === 'keep') {
        assert.deepEqual(decision, { kind: 'keep' });
      } else {
        assert.deepEqual(decision, { kind: 'write', change: { set: { state: 'completed', snapshots: [] } } });
      }
    });
  }

  test('a stored closure is recorded once, on a backup that still exists', () => {
    assert.deepEqual(decideClosureRecord(backup({ state: 'completed' }), closure), { kind: 'write', change: { set: { closure } } });
    assert.deepEqual(decideClosureRecord(backup({ state: 'completed', closure }), { ...closure, storedAt: 30 }), { kind: 'keep' });
    assert.deepEqual(decideClosureRecord(null, closure), { kind: 'keep' });
  });

  test('an orphaned attempt fails interrupted only while it runs under that operation', () => {
    assert.deepEqual(decideBackupInterrupted(backup(), 'op-1'), { kind: 'write', change: { set: { state: 'failed', failureReason: 'interrupted' } } });
    assert.deepEqual(decideBackupInterrupted(backup({ operationId: 'op-2' }), 'op-1'), { kind: 'keep' });
    assert.deepEqual(decideBackupInterrupted(backup({ state: 'completed' }), 'op-1'), { kind: 'keep' });
    assert.deepEqual(decideBackupInterrupted(backup({ state: 'failed', failureReason: 'x' }), 'op-1'), { kind: 'keep' });
    assert.deepEqual(decideBackupInterrupted(null, 'op-1'), { kind: 'keep' });
  });

  test('a restore needs a completed backup, and an isolated one its closure', () => {
    const notCompleted = { code: 'conflict', retryable: true, reasons: [backupRefusalReasons.backupNotCompleted] };
    assert.deepEqual(dataOf(backupRestoreRefusal(null, { needsClosure: false })), notFound);
    assert.deepEqual(dataOf(backupRestoreRefusal(backup(), { needsClosure: false })), notCompleted);
    assert.deepEqual(dataOf(backupRestoreRefusal(backup({ state: 'failed' }), { needsClosure: false })), notCompleted);
    assert.equal(backupRestoreRefusal(backup({ state: 'completed' }), { needsClosure: false }), null);
    assert.deepEqual(dataOf(backupRestoreRefusal(backup({ state: 'completed' }), { needsClosure: true })), notCompleted);
    assert.equal(backupRestoreRefusal(backup({ state: 'completed', closure }), { needsClosure: true }), null);
  });

  describe('a relay sending a closure', () => {
    const address = { clusterId: 'c-1', serviceId: 's-1', nodeId: 'n-1' };
    const cases: Array<{ name: string; backup: IServiceBackupDocument | null; address?: typeof address; data: Record<string, unknown> | null }> = [
      { name: 'a backup of its own: may', backup: backup(), data: null },
      { name: 'a missing backup: not found', backup: null, data: notFound },
      { name: 'another cluster\'s backup: answered like a missing one', backup: backup({ clusterId: 'c-2' }), data: notFound },
      { name: 'another service\'s backup: answered like a missing one', backup: backup(), address: { ...address, serviceId: 's-2' }, data: notFound },
      { name: 'another node\'s backup: answered like a missing one', backup: backup(), address: { ...address, nodeId: 'n-2' }, data: notFound },
      {
        name: 'a closure already stored: conflict', backup: backup({ closure }),
        data: { code: 'conflict', retryable: true, reasons: [backupRefusalReasons.closureAlreadyStored] },
      },
      {
        name: 'a cancelled backup: conflict operation-cancelled', backup: backup({ state: 'failed', failureReason: 'operation-cancelled' }),
        data: { code: 'conflict', retryable: true, reasons: [backupRefusalReasons.backupCancelled] },
      },
      { name: 'a backup failed otherwise: may (the closure still arrives)', backup: backup({ state: 'failed', failureReason: 'x' }), data: null },
    ];
    for (const upload of cases) {
      test(upload.name, () => {
        assert.deepEqual(dataOf(closureUploadRefusal(upload.backup, upload.address ?? address)), upload.data);
      });
    }
  });

  test('a relay fetching a closure: only of its cluster and service (any node), and only once stored', () => {
    const address = { clusterId: 'c-1', serviceId: 's-1' };
    assert.equal(closureDownloadRefusal(backup({ closure, nodeId: 'n-9' }), address), null);
    assert.deepEqual(dataOf(closureDownloadRefusal(null, address)), notFound);
    assert.deepEqual(dataOf(closureDownloadRefusal(backup({ closure }), { ...address, clusterId: 'c-2' })), notFound);
    assert.deepEqual(dataOf(closureDownloadRefusal(backup({ closure }), { ...address, serviceId: 's-2' })), notFound);
    assert.deepEqual(dataOf(closureDownloadRefusal(backup(), address)), {
      code: 'not-found', retryable: false, reasons: [backupRefusalReasons.closureNotStored],
    });
  });

  describe('isolated restores', () => {
    const restore: Omit<IIsolatedRestoreDocument, 'generation'> = {
      id: 'r-1', backupId: 'b-1', clusterId: 'c-1', sourceServiceId: 's-1', targetNodeName: 'node-a', createdAt: 5, mappings: [], manifest: [],
    };
    const state: IIsolatedRestoreNodeState = {
      clusterId: 'c-1', targetNodeName: 'node-a', restoreId: 'r-1', revision: 2, phase: 'staging', stagedObjects: [],
    } as IIsolatedRestoreNodeState;

    test('created under a free id; an id in use is refused', () => {
      assert.deepEqual(decideIsolatedRestoreCreation(null, restore), { kind: 'create', doc: restore });
      assert.deepEqual(refusalOf(decideIsolatedRestoreCreation({ ...restore, generation: 1 }, restore)).data, {
        code: 'conflict', retryable: true, reasons: [backupRefusalReasons.restoreIdInUse],
      });
    });

    test('the node\'s answered state is recorded on the restore; a restore that is gone records nothing', () => {
      assert.deepEqual(decideRestoreStateRecord({ ...restore, generation: 1 }, state), { kind: 'write', change: { set: { lastState: state } } });
      assert.deepEqual(decideRestoreStateRecord(null, state), { kind: 'keep' });
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Runtime network

describe('runtime network decisions', () => {
  const basePlan = upstreamExamplePlan;
  const planAt = (revisionArg: number, editArg: (planArg: IRuntimeNetworkAddressPlan) => void = () => {}): IRuntimeNetworkAddressPlan => {
    const plan = basePlan();
    plan.revision = revisionArg;
    editArg(plan);
    return plan;
  };
  const stored = (planArg: IRuntimeNetworkAddressPlan): IRuntimeNetworkAddressPlanDocument =>
    ({ id: addressPlanDocumentId, generation: 3, plan: planArg, writtenAt: 1, writtenBy: 'admin-0' });
  const entry = (overridesArg: Partial<IAllocatedLeaseEntry> = {}): IAllocatedLeaseEntry => ({
    poolId: 'workloads', address: '192.0.2.130', lease: { id: 'lease-1' }, clusterId: 'cluster-1', serviceId: 'svc-1', nodeId: 'n-1', ...overridesArg,
  });
  const noLeases = { entries: [], windowMs: 1_000, actor: 'admin-1' };

  describe('stranded leases', () => {
    const moved = planAt(2, (planArg) => { planArg.pools = [{ id: 'workloads', prefix: '198.51.100.0/25' }]; });

    test('a lease inside its pool\'s prefix strands nothing', () => {
      assert.deepEqual(strandedLeaseReasons(basePlan(), [entry()], 100, 1_000), []);
    });

    test('a held lease whose pool moved, or a withdrawing one inside its window, is named; one past its window is not', () => {
      assert.deepEqual(strandedLeaseReasons(moved, [
        entry(),
        entry({ lease: { id: 'lease-2' }, address: '192.0.2.131', releasedAt: 50 }),
        entry({ lease: { id: 'lease-3' }, address: '192.0.2.132', releasedAt: 0 }),
      ], 100, 60), [
        'request.plan would strand lease lease-1 (192.0.2.130 in pool workloads, service svc-1, node n-1, cluster cluster-1)',
        'request.plan would strand lease lease-2 (192.0.2.131 in pool workloads, service svc-1, node n-1, cluster cluster-1, withdrawing)',
      ]);
    });

    test('a lease of a pool the plan no longer has is named', () => {
      assert.deepEqual(strandedLeaseReasons(basePlan(), [entry({ poolId: 'gone' })], 100, 1_000), [
        'request.plan would strand lease lease-1 (192.0.2.130 in pool gone, service svc-1, node n-1, cluster cluster-1)',
      ]);
    });

    test('past 32 stranded leases the rest are counted in one reason', () => {
      const entries = Array.from({ length: 35 }, (_, indexArg) => entry({ lease: { id: `lease-${indexArg}` }, address: `192.0.2.${130 + indexArg}` }));
      const reasons = strandedLeaseReasons(moved, entries, 100, 1_000);
      assert.equal(reasons.length, 33);
      assert.equal(reasons[31], 'request.plan would strand lease lease-31 (192.0.2.161 in pool workloads, service svc-1, node n-1, cluster cluster-1)');
      assert.equal(reasons[32], 'request.plan would strand 3 more leases');
    });
  });

  describe('an address plan write', () => {
    test('the first plan at revision 1 is created, recording who wrote it and when', () => {
      assert.deepEqual(decideAddressPlanWrite(null, basePlan(), noLeases, 9), {
        kind: 'create', doc: { id: addressPlanDocumentId, plan: basePlan(), writtenAt: 9, writtenBy: 'admin-1' },
      });
    });

    test('the next revision is written over the stored plan', () => {
      const next = planAt(2, (planArg) => { planArg.platformEndpoints.pop(); });
      assert.deepEqual(decideAddressPlanWrite(stored(basePlan()), next, noLeases, 9), {
        kind: 'write', change: { set: { plan: next, writtenAt: 9, writtenBy: 'admin-1' } },
      });
    });

    test('the stored plan written again is kept (replayed), whatever its revision says about the next one', () => {
      assert.deepEqual(decideAddressPlanWrite(stored(basePlan()), basePlan(), noLeases, 9), { kind: 'keep' });
    });

    test('any other revision is a conflict naming the revision expected', () => {
      assert.deepEqual(refusalOf(decideAddressPlanWrite(null, planAt(2), noLeases, 9)).data, {
        code: 'conflict', retryable: true, reasons: ['plan-revision-mismatch'],
        causes: [{ path: 'request.plan.revision', message: 'must be 1, the revision after the stored plan (none is stored yet)' }],
      });
      assert.deepEqual(refusalOf(decideAddressPlanWrite(stored(basePlan()), planAt(3), noLeases, 9)).data, {
        code: 'conflict', retryable: true, reasons: ['plan-revision-mismatch'],
        causes: [{ path: 'request.plan.revision', message: 'must be 2, the revision after the stored plan (1)' }],
      });
    });

    test('a plan that breaks the contract and strands a lease is refused with every reason, the contract\'s first, under request.plan', () => {
      const next = planAt(2, (planArg) => { planArg.pools = [{ id: 'other', prefix: '198.51.100.0/25' }]; });
      assertFieldProblems(refusalOf(decideAddressPlanWrite(stored(basePlan()), next, { ...noLeases, entries: [entry()] }, 9)).data, [
        ['request.plan.pools', 'field-invalid', 'must keep pool workloads: leases drawn from it outlive a plan revision'],
        ['request.plan', 'field-invalid', 'would strand lease lease-1 (192.0.2.130 in pool workloads, service svc-1, node n-1, cluster cluster-1)'],
      ]);
    });
  });

  describe('a projection step', () => {
    const projection = { id: 'proj-c-1-n-1', generation: 2, nodeId: 'n-1', digest: 'd'.repeat(64) } as IRuntimeNetworkProjection;
    const document = (overridesArg: Partial<IRuntimeNetworkProjectionDocument> = {}): IRuntimeNetworkProjectionDocument =>
      ({ id: 'c-1/n-1', generation: 4, clusterId: 'c-1', nodeId: 'n-1', projection, computedAt: 1, ...overridesArg });
    const target = { id: 'c-1/n-1', clusterId: 'c-1', nodeId: 'n-1', now: 7 };

    test('unchanged: kept', () => {
      assert.deepEqual(decideProjectionWrite(document(), { kind: 'unchanged', projection }, target), { kind: 'keep' });
    });

    test('blocked: the current projection is kept; a node that never had one is refused unavailable, what blocks it in the causes', () => {
      assert.deepEqual(decideProjectionWrite(document(), { kind: 'blocked', reasons: ['no plan'] }, target), { kind: 'keep' });
      assert.deepEqual(refusalOf(decideProjectionWrite(null, { kind: 'blocked', reasons: ['no plan', 'no hub'] }, target)).data, {
        code: 'unavailable', retryable: true, reasons: ['runtime-network-projection-blocked'], causes: [{ message: 'no plan' }, { message: 'no hub' }],
      });
    });

    test('next: written over the node\'s projection, or created for its first', () => {
      const next = { ...projection, generation: 3 };
      assert.deepEqual(decideProjectionWrite(document(), { kind: 'next', projection: next }, target), {
        kind: 'write', change: { set: { projection: next, computedAt: 7 } },
      });
      assert.deepEqual(decideProjectionWrite(null, { kind: 'next', projection: next }, target), {
        kind: 'create', doc: { id: 'c-1/n-1', clusterId: 'c-1', nodeId: 'n-1', projection: next, computedAt: 7 },
      });
    });

    describe('an application', () => {
      const application = { projectionId: projection.id, nodeId: 'n-1', generation: 2, digest: projection.digest };
      const conflict = { code: 'conflict', retryable: true, reasons: ['projection-changed'], causes: [{ path: 'request.application', message: "does not name the node's current projection; read it again" }] };

      test('applicationOf keeps only the four members', () => {
        assert.deepEqual(applicationOf({ ...application, extra: true } as typeof application), application);
      });

      test('of the current projection: written, then kept when recorded already', () => {
        assert.deepEqual(decideProjectionApplication(document(), application), { kind: 'write', change: { set: { application } } });
        assert.deepEqual(decideProjectionApplication(document({ application }), application), { kind: 'keep' });
      });

      test('of anything else, or of a node with no projection: conflict', () => {
        assert.deepEqual(refusalOf(decideProjectionApplication(null, application)).data, conflict);
        for (const other of [{ projectionId: 'other' }, { generation: 1 }, { digest: 'e'.repeat(64) }]) {
          assert.deepEqual(refusalOf(decideProjectionApplication(document(), { ...application, ...other })).data, conflict);
        }
      });
    });
  });

  describe('a lease statement', () => {
    const lease = (overridesArg: Partial<IRuntimeNetworkWorkloadLease> = {}): IRuntimeNetworkWorkloadLease =>
      ({ lease: { id: 'lease-1', generation: 1 }, serviceId: 'svc-1', address: '192.0.2.130', ...overridesArg });
    const facts = (overridesArg: Partial<ILeaseStatementFacts> = {}): ILeaseStatementFacts => ({
      id: 'c-1/n-1', clusterId: 'c-1', nodeId: 'n-1', managed: true,
      allocated: new Map([['lease-1', { ...lease(), nodeId: 'n-1' }]]),
      serviceIds: new Set(['svc-1', 'svc-2']),
      addressHolders: new Map([['192.0.2.140', 'lease lease-9 of service svc-2']]),
      ...overridesArg,
    });
    const existing: IRuntimeNetworkLeasesDocument = { id: 'c-1/n-1', generation: 2, clusterId: 'c-1', nodeId: 'n-1', leases: [], reportedAt: 1 };

    test('the allocated leases: created for the node\'s first statement, written over the last, only the contract\'s members kept', () => {
      const stated = [{ ...lease(), extra: 1 } as IRuntimeNetworkWorkloadLease];
      assert.deepEqual(decideLeaseStatement(null, stated, facts(), 5), {
        kind: 'create', doc: { id: 'c-1/n-1', clusterId: 'c-1', nodeId: 'n-1', leases: [lease()], reportedAt: 5 },
      });
      assert.deepEqual(decideLeaseStatement(existing, stated, facts(), 5), { kind: 'write', change: { set: { leases: [lease()], reportedAt: 5 } } });
    });

    test('an empty statement always records, also with no address plan', () => {
      assert.deepEqual(decideLeaseStatement(existing, [], facts({ managed: false }), 5), { kind: 'write', change: { set: { leases: [], reportedAt: 5 } } });
    });

    test('a lease with no address plan is refused, that reason first', () => {
      assertFieldProblems(refusalOf(decideLeaseStatement(existing, [lease()], facts({ managed: false, allocated: new Map() }), 5)).data, [
        ['request.leases', 'field-invalid', 'cannot be confirmed: no address plan exists, so Cloudly allocated no lease'],
        ['request.leases[0].lease.id', 'field-not-found', 'is no lease Cloudly allocated'],
      ]);
    });

    test('a statement naming anything Cloudly did not allocate is refused with every reason', () => {
      const stated = [
        lease({ lease: { id: 'lease-1', generation: 2 }, serviceId: 'svc-2', address: '192.0.2.131' }),
        lease({ lease: { id: 'lease-7', generation: 1 }, serviceId: 'svc-x', address: '192.0.2.140' }),
      ];
      const others = facts({ allocated: new Map([['lease-1', { ...lease(), nodeId: 'n-2' }]]) });
      assertFieldProblems(refusalOf(decideLeaseStatement(existing, stated, others, 5)).data, [
        ['request.leases[0]', 'field-invalid', 'names a lease Cloudly allocated on node n-2, not n-1'],
        ['request.leases[0].lease.generation', 'field-invalid', 'must be 1, the allocated generation'],
        ['request.leases[0].serviceId', 'field-invalid', 'must be svc-1, the service the lease was allocated to'],
        ['request.leases[0].address', 'field-invalid', 'must be 192.0.2.130, the allocated address'],
        ['request.leases[1].serviceId', 'field-not-found', 'names no service of this cluster'],
        ['request.leases[1].lease.id', 'field-not-found', 'is no lease Cloudly allocated; 192.0.2.140 is held by lease lease-9 of service svc-2'],
      ]);
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Desired state

describe('desired-state decisions', () => {
  const published = (overridesArg: Partial<IClusterDesiredStateDocument> = {}): IClusterDesiredStateDocument =>
    ({ id: 'c-1', generation: 5, revision: 3, digest: 'digest-3', observedRevision: 2, ...overridesArg });
  const service = (overridesArg: Partial<IServiceDocument> = {}): IServiceDocument => ({
    id: 'svc-1', generation: 4, name: 'one', organizationId: 'org', clusterId: 'c-1', specRevision: 2,
    runtime: { replicas: 2 } as IServiceDocument['runtime'], volumes: [], claimDecisions: [], createdAt: 1, updatedAt: 1, ...overridesArg,
  });

  test('publication: the first creates revision 1, the same digest is kept, a new digest is the next revision', () => {
    assert.deepEqual(decideDesiredStatePublication(null, 'c-1', 'digest-1'), {
      kind: 'create', doc: { id: 'c-1', revision: 1, digest: 'digest-1', observedRevision: 0 },
    });
    assert.deepEqual(decideDesiredStatePublication(published(), 'c-1', 'digest-3'), { kind: 'keep' });
    assert.deepEqual(decideDesiredStatePublication(published(), 'c-1', 'digest-4'), { kind: 'write', change: { set: { revision: 4, digest: 'digest-4' } } });
  });

  const deletionCases: Array<{ name: string; current: IServiceDocument | null; request: { expectedGeneration: number; force?: boolean }; decision?: TDecision<IServiceDocument>; data?: Record<string, unknown> }> = [
    {
      name: 'a service that does not exist: not-found', current: null, request: { expectedGeneration: 4 },
      data: { code: 'not-found', retryable: false, reasons: ['service-not-found'], causes: [{ path: 'request.serviceId', message: 'names no service: svc-1' }] },
    },
    {
      name: 'another generation: conflict', current: service(), request: { expectedGeneration: 3 },
      data: { code: 'conflict', retryable: true, reasons: ['generation-mismatch'], causes: [{ path: 'request.expectedGeneration', message: "is not the service's current generation" }] },
    },
    {
      name: 'another generation with force: still conflict', current: service(), request: { expectedGeneration: 3, force: true },
      data: { code: 'conflict', retryable: true, reasons: ['generation-mismatch'], causes: [{ path: 'request.expectedGeneration', message: "is not the service's current generation" }] },
    },
    { name: 'force: removed at once', current: service(), request: { expectedGeneration: 4, force: true }, decision: { kind: 'remove' } },
    { name: 'a first request: deletion requested now', current: service(), request: { expectedGeneration: 4 }, decision: { kind: 'write', change: { set: { deletionRequestedAt: 9 } } } },
    { name: 'already requested: kept', current: service({ deletionRequestedAt: 3 }), request: { expectedGeneration: 4 }, decision: { kind: 'keep' } },
    { name: 'already requested, now with force: removed', current: service({ deletionRequestedAt: 3 }), request: { expectedGeneration: 4, force: true }, decision: { kind: 'remove' } },
  ];
  for (const deletion of deletionCases) {
    test(`a service deletion of ${deletion.name}`, () => {
      const decision = decideServiceDeletion(deletion.current, { serviceId: 'svc-1', ...deletion.request }, 9);
      if (deletion.data) {
        assert.deepEqual(refusalOf(decision).data, deletion.data);
      } else {
        assert.deepEqual(decision, deletion.decision);
      }
    });
  }

  test('a derived document of a gone service is removed; a pending removal goes only when it was requested', () => {
    assert.deepEqual(decideForget(published()), { kind: 'remove' });
    assert.deepEqual(decideForget(null), { kind: 'keep' });
    assert.deepEqual(decidePendingRemoval(service({ deletionRequestedAt: 3 })), { kind: 'remove' });
    assert.deepEqual(decidePendingRemoval(service()), { kind: 'keep' });
    assert.deepEqual(decidePendingRemoval(null), { kind: 'keep' });
  });

  describe('an observed-state report', () => {
    const services = new Map([['svc-1', service()]]);
    const nodes = new Set(['n-1', 'n-2']);
    const report = (overridesArg: Partial<IClusterPlatformObservedReport> = {}): IClusterPlatformObservedReport => ({
      desiredRevision: 3,
      services: [{ serviceId: 'svc-1', nodeId: 'n-1', specRevision: 2, replicas: 2, state: 'ready' }],
      ...overridesArg,
    });

    test('a consistent report is acceptable (also at an older spec revision with more replicas)', () => {
      assert.equal(judgeObservedReport(report(), published(), services, nodes), null);
      assert.equal(judgeObservedReport(report({ desiredRevision: 2, services: [{ serviceId: 'svc-1', nodeId: 'n-2', specRevision: 1, replicas: 5, state: 'starting' }] }),
        published(), services, nodes), null);
    });

    test('ahead of the published revision: invalid-request (revision 0 when nothing is published)', () => {
      assert.deepEqual(judgeObservedReport(report({ desiredRevision: 4 }), published(), services, nodes), {
        code: 'invalid-request', reasons: ["request.desiredRevision is ahead of the cluster's desired-state revision 3"],
      });
      assert.deepEqual(judgeObservedReport(report({ desiredRevision: 1 }), null, services, nodes), {
        code: 'invalid-request', reasons: ["request.desiredRevision is ahead of the cluster's desired-state revision 0"],
      });
    });

    test('behind the highest accepted revision: conflict desired-revision-stale', () => {
      assert.deepEqual(judgeObservedReport(report({ desiredRevision: 1 }), published(), services, nodes), { code: 'conflict', reasons: ['desired-revision-stale'] });
    });

    test('every entry contradicting the cluster is named', () => {
      assert.deepEqual(judgeObservedReport(report({
        services: [
          { serviceId: 'svc-x', nodeId: 'n-1', specRevision: 1, replicas: 1, state: 'ready' },
          { serviceId: 'svc-1', nodeId: 'n-9', specRevision: 3, replicas: 1, state: 'ready' },
          { serviceId: 'svc-1', nodeId: 'n-2', specRevision: 2, replicas: 3, state: 'ready' },
        ],
        nodes: [{ nodeId: 'n-1', sessionId: 's-1', assignments: [] }, { nodeId: 'n-8', sessionId: 's-8', assignments: [] }],
      }), published(), services, nodes), {
        code: 'invalid-request',
        reasons: [
          'request.services[0].serviceId names no service of this cluster',
          "request.services[1].specRevision is ahead of the service's spec revision 2",
          'request.services[1].nodeId names no node of this cluster',
          'request.services[2].replicas contradicts the spec: more than the 2 wanted',
          'request.nodes[1].nodeId names no node of this cluster',
        ],
      });
    });
  });

  test('the observed revision moves forward only: written ahead, kept when equal or unpublished, a stale one refused', () => {
    assert.deepEqual(decideObservedRevision(published(), 3), { kind: 'write', change: { set: { observedRevision: 3 } } });
    assert.deepEqual(decideObservedRevision(published(), 2), { kind: 'keep' });
    assert.deepEqual(decideObservedRevision(null, 3), { kind: 'keep' });
    assert.deepEqual(refusalOf(decideObservedRevision(published(), 1)).data, { code: 'conflict', retryable: true, reasons: ['desired-revision-stale'] });
  });

  test('observed placements: the reported nodes\' entries replace theirs, the others stay, ordered by node; created for a first report', () => {
    const current: IServiceObservedStateDocument = {
      id: 'svc-1', generation: 2, clusterId: 'c-1',
      placements: [
        { nodeId: 'n-3', specRevision: 1, replicas: 1, state: 'ready', reportedAt: 1 },
        { nodeId: 'n-1', specRevision: 1, replicas: 1, state: 'failed', reason: 'old', reportedAt: 1 },
      ],
    };
    const entries = [
      { serviceId: 'svc-1', nodeId: 'n-2', specRevision: 2, replicas: 1, state: 'starting' as const },
      { serviceId: 'svc-1', nodeId: 'n-1', specRevision: 2, replicas: 2, state: 'failed' as const, reason: 'crash' },
    ];
    assert.deepEqual(decideObservedPlacements(current, { serviceId: 'svc-1', clusterId: 'c-1' }, entries, 9), {
      kind: 'write',
      change: {
        set: {
          placements: [
            { nodeId: 'n-1', specRevision: 2, replicas: 2, state: 'failed', reason: 'crash', reportedAt: 9 },
            { nodeId: 'n-2', specRevision: 2, replicas: 1, state: 'starting', reportedAt: 9 },
            { nodeId: 'n-3', specRevision: 1, replicas: 1, state: 'ready', reportedAt: 1 },
          ],
        },
      },
    });
    assert.deepEqual(decideObservedPlacements(null, { serviceId: 'svc-1', clusterId: 'c-1' }, [entries[0]], 9), {
      kind: 'create', doc: { id: 'svc-1', clusterId: 'c-1', placements: [{ nodeId: 'n-2', specRevision: 2, replicas: 1, state: 'starting', reportedAt: 9 }] },
    });
  });
});

describe('relay registration decision', () => {
  const announcement = { origin: 'http://192.0.2.10:8080', version: '1.2.0', protocol: 'cluster-relay/1' };

  test('a first registration creates the document with the socket, the time and the node it names', () => {
    const decision = decideRelayRegistration(null, 'c1', 's1', { ...announcement, nodeId: 'n1', hostAddresses: ['10.0.0.1'] }, 1_000);
    assert.deepEqual(decision, {
      kind: 'create',
      doc: { id: 'c1', clusterId: 'c1', origin: announcement.origin, version: '1.2.0', protocol: 'cluster-relay/1', sessionId: 's1', acceptedAt: 1_000, nodeId: 'n1', hostAddresses: ['10.0.0.1'], inputsGeneration: 1 },
    });
  });

  test('a later registration replaces the last one whole: a node it no longer names is forgotten', () => {
    const current: IClusterRelayRegistrationDocument = {
      id: 'c1', generation: 3, clusterId: 'c1', origin: 'http://192.0.2.9:8080', version: '1.1.0', protocol: 'cluster-relay/1',
      sessionId: 's0', acceptedAt: 500, nodeId: 'n1', hostAddresses: ['10.0.0.1'], inputsGeneration: 2,
    };
    assert.deepEqual(decideRelayRegistration(current, 'c1', 's2', announcement, 2_000), {
      kind: 'write',
      change: {
        // The announcement changed: the write's generation (4) is where the derived inputs moved.
        set: { clusterId: 'c1', origin: announcement.origin, version: '1.2.0', protocol: 'cluster-relay/1', sessionId: 's2', acceptedAt: 2_000, inputsGeneration: 4 },
        unset: ['nodeId', 'hostAddresses'],
      },
    });
    const withoutNode = { ...current, nodeId: undefined, hostAddresses: undefined };
    delete withoutNode.nodeId;
    delete withoutNode.hostAddresses;
    assert.deepEqual((decideRelayRegistration(withoutNode, 'c1', 's2', announcement, 2_000) as { change: { unset: string[] } }).change.unset, [],
      'nothing to forget when the stored registration named no node');
  });

  test('the same announcement on a new socket moves the socket and the time, not the derived inputs\' generation', () => {
    const capabilities = { platforms: ['linux/amd64'], secrets: true, volumes: true, portProtocols: ['tcp' as const] };
    const stated = { ...announcement, nodeId: 'n1', hostAddresses: ['10.0.0.1'], capabilities };
    const current: IClusterRelayRegistrationDocument = {
      id: 'c1', generation: 3, clusterId: 'c1', ...stated, sessionId: 's0', acceptedAt: 500, inputsGeneration: 2,
    };
    assert.deepEqual(decideRelayRegistration(current, 'c1', 's2', stated, 2_000), {
      kind: 'write',
      change: {
        set: { clusterId: 'c1', ...stated, sessionId: 's2', acceptedAt: 2_000 },
        unset: [],
      },
    });
    // Any member of the announcement that differs is a change; so is a document stored without the member.
    for (const changed of [{ ...stated, version: '1.3.0' }, { ...stated, hostAddresses: ['10.0.0.2'] }, { ...stated, capabilities: { ...capabilities, secrets: false } }]) {
      const decision = decideRelayRegistration(current, 'c1', 's2', changed, 2_000) as { change: { set: { inputsGeneration?: number } } };
      assert.equal(decision.change.set.inputsGeneration, 4, JSON.stringify(changed));
    }
    const { inputsGeneration: _stored, ...older } = current;
    assert.equal((decideRelayRegistration(older, 'c1', 's2', stated, 2_000) as { change: { set: { inputsGeneration?: number } } }).change.set.inputsGeneration, 4);
  });
});
