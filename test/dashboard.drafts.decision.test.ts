import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  addressPlanFormOf,
  addressPlanRequestOfDraft,
  addressPlanRequestOfForm,
  choiceOf,
  designationRequestOfDraft,
  DraftRefused,
  isolatedRestoreRequestOfDraft,
  requestOfDraft,
  type IDesignationDraft,
} from '../web/src/drafts.js';
import { validateRuntimeNetworkAddressPlan } from '../ts/interfaces/data/runtimenetworkaddressplan.js';
import { validateIsolatedRestoreResourceMappings } from '../ts/interfaces/data/isolatedrestore.js';
import { platformBindingCapabilities } from '../ts/interfaces/data/platformbinding.js';
import { operationStates } from '../ts/interfaces/requests/operation.js';
import { upstreamExamplePlan } from './runtimenetwork.fixture.js';

/**
 * The dashboard's drafts into requests (web/src/drafts.ts): what an administrator typed, or facts
 * the contract narrows further, become the contract's request of the method, or every reason not.
 */

const volumeMapping = () => ({
  type: 'volume',
  source: { resourceName: 'data', mountPath: '/data' },
  target: { resourceName: 'scratch', mountPath: '/scratch' },
});

test('an address plan draft: text that is not JSON is named, and nothing else is judged', () => {
  const draft = addressPlanRequestOfDraft('{ "authorityId": ');
  assert.equal(draft.ok, false);
  assert.equal(draft.ok ? 0 : draft.reasons.length, 1);
  assert.match(draft.ok ? '' : draft.reasons[0], /^plan is not JSON: /);
});

test("an address plan draft the contract refuses answers the contract validator's reasons, all of them", () => {
  const broken = { ...upstreamExamplePlan(), revision: 0, pools: [{ id: 'workloads', prefix: '10.0.0.0/8' }] };
  const expected = validateRuntimeNetworkAddressPlan(broken, 'plan');
  assert.ok(expected.length >= 2, 'the broken plan has more than one fault');
  assert.deepEqual(addressPlanRequestOfDraft(JSON.stringify(broken)), { ok: false, reasons: expected });
});

test('a valid address plan draft becomes the setRuntimeNetworkAddressPlan request with the plan as typed', () => {
  const draft = addressPlanRequestOfDraft(JSON.stringify(upstreamExamplePlan(), null, 2));
  assert.ok(draft.ok);
  assert.deepEqual(Object.keys(draft.request), ['plan']);
  assert.deepEqual(draft.request.plan, upstreamExamplePlan());
});

test('an isolated restore draft names a missing node and JSON that is not JSON together', () => {
  const draft = isolatedRestoreRequestOfDraft({ backupId: 'backup-1', targetNodeName: '  ', mappings: '[{' });
  assert.deepEqual(draft, {
    ok: false,
    reasons: ['targetNodeName must name the node to restore on', 'mappings must be JSON: an array of resource mappings'],
  });
});

test("an isolated restore draft's mappings are judged by the contract's validator, path by path", () => {
  const mappings = [volumeMapping(), { type: 'volume' }, { ...volumeMapping(), type: 'file' }];
  const expected = validateIsolatedRestoreResourceMappings(mappings, 'mappings');
  assert.ok(expected.some((reason) => reason.startsWith('mappings[1]')) && expected.some((reason) => reason.startsWith('mappings[2]')));
  assert.deepEqual(isolatedRestoreRequestOfDraft({ backupId: 'backup-1', targetNodeName: 'node-2', mappings: JSON.stringify(mappings) }),
    { ok: false, reasons: expected });
  assert.deepEqual(isolatedRestoreRequestOfDraft({ backupId: 'backup-1', targetNodeName: 'node-2', mappings: '[]' }),
    { ok: false, reasons: validateIsolatedRestoreResourceMappings([], 'mappings') });
});

test('a valid isolated restore draft becomes the createIsolatedRestore request, mappings rebuilt in the contract key order', () => {
  const typed = [{ target: { mountPath: '/scratch', resourceName: 'scratch' }, source: { mountPath: '/data', resourceName: 'data' }, type: 'volume' }];
  const draft = isolatedRestoreRequestOfDraft({ backupId: 'backup-1', targetNodeName: 'node-2', mappings: JSON.stringify(typed) });
  assert.ok(draft.ok);
  assert.deepEqual(draft.request, { backupId: 'backup-1', targetNodeName: 'node-2', mappings: [volumeMapping()] });
  assert.equal(JSON.stringify(draft.request.mappings), JSON.stringify([volumeMapping()]), 'the members in the order Cloudly digests them');
});

const designationDraft = (overridesArg: Partial<IDesignationDraft> = {}): IDesignationDraft => ({
  mutationId: 'mutation-1',
  clusterId: 'cluster-1',
  ingressService: { id: 'service-1', specRevision: 3 },
  runtime: { id: 'cluster-1', phase: 'pallet', generation: 2 },
  current: null,
  ...overridesArg,
});

test('a designation draft on a cluster whose runtime is not Pallet is said, not sent', () => {
  for (const phase of ['swarm', 'cutover'] as const) {
    const draft = designationRequestOfDraft(designationDraft({ runtime: { id: 'cluster-1', phase, generation: 2 } }));
    assert.deepEqual(draft, {
      ok: false,
      reasons: [`currentRuntime.phase is ${phase}: an ingress is designated only on a cluster in phase pallet`],
    });
  }
});

test('a designation draft on a Pallet cluster becomes the designateClusterIngress request, members exactly the contract', () => {
  const first = designationRequestOfDraft(designationDraft());
  assert.deepEqual(first, {
    ok: true,
    request: {
      designation: {
        mutationId: 'mutation-1',
        clusterId: 'cluster-1',
        ingressServiceId: 'service-1',
        currentRuntime: { id: 'cluster-1', phase: 'pallet', generation: 2 },
        expectedSpecRevision: 3,
        expectedDesignation: null,
      },
    },
  });
  // The designation replaced is named by its id, generation and digest only, whatever else the page holds.
  const current = { id: 'designation-1', generation: 4, digest: 'd'.repeat(64), clusterId: 'cluster-1', acceptedAt: 1 };
  const replacing = designationRequestOfDraft(designationDraft({ current }));
  assert.ok(replacing.ok);
  assert.deepEqual(replacing.request.designation.expectedDesignation, { id: 'designation-1', generation: 4, digest: 'd'.repeat(64) });
});

test('requestOfDraft answers the request, or throws DraftRefused carrying every reason', () => {
  assert.deepEqual(requestOfDraft({ ok: true, request: { plan: 1 } }), { plan: 1 });
  assert.throws(() => requestOfDraft({ ok: false, reasons: ['a', 'b'] }), (errorArg: unknown) =>
    errorArg instanceof DraftRefused && errorArg.reasons.join() === 'a,b' && errorArg.message === 'a; b');
});

test("a select's value is read as the contract's literal, or null for a value the contract does not list", () => {
  assert.equal(choiceOf(platformBindingCapabilities, 'objectstorage'), 'objectstorage');
  assert.equal(choiceOf(operationStates, 'cancelled'), 'cancelled');
  assert.equal(choiceOf(platformBindingCapabilities, 'Database'), null);
  assert.equal(choiceOf(operationStates, ''), null);
});

test('the address plan form: a stored plan read into the form at its next revision, and back into the same plan', () => {
  const plan = upstreamExamplePlan();
  const form = addressPlanFormOf(plan);
  assert.equal(form.revision, 2);
  assert.equal(form.pools, 'workloads 192.0.2.128/25');
  assert.equal(form.platformEndpoints, 'corestore 192.0.2.17:3000/tcp\nrelay 192.0.2.17:443/tcp');
  const drafted = addressPlanRequestOfForm({ ...form, revision: 1 });
  assert.ok(drafted.ok);
  assert.deepEqual(drafted.request.plan, plan);
  const empty = addressPlanFormOf(null);
  assert.equal(empty.revision, 1);
  assert.equal(addressPlanRequestOfForm(empty).ok, false, 'an empty plan is not a plan');
});

test('the address plan form: a line that cannot be read is named with its path; the rest is judged by the contract', () => {
  const form = { ...addressPlanFormOf(upstreamExamplePlan()), revision: 1 };
  const unreadable = addressPlanRequestOfForm({ ...form, pools: 'workloads', platformEndpoints: 'corestore 192.0.2.17' });
  assert.deepEqual(unreadable.ok ? [] : unreadable.reasons, [
    'plan.pools[0] must be written "<id> <prefix>"',
    'plan.platformEndpoints[0] must be written "<id> <address>:<port>/<protocol>"',
  ]);
  const outside = addressPlanRequestOfForm({ ...form, pools: 'workloads 10.0.0.0/8' });
  const expected = validateRuntimeNetworkAddressPlan({ ...upstreamExamplePlan(), pools: [{ id: 'workloads', prefix: '10.0.0.0/8' }] }, 'plan');
  assert.ok(expected.length > 0);
  assert.deepEqual(outside.ok ? [] : outside.reasons, expected, 'the contract\'s own reasons');
});
