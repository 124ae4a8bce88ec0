import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  describeRolloutChange,
  rolloutActions,
  rolloutIdOfChange,
  rolloutRequestOfForm,
  rolloutWaveSummaries,
  withRollout,
  labelsOfText,
  labelsText,
  selectorReasons,
  type IRolloutFormFields,
} from '../web/src/rollouts.js';
import { parseRoute } from '../web/src/decide.js';
import type { IRollout, IRolloutTargetProgress, IRolloutWaveProgress } from '../ts/interfaces/data/rollout.js';

/** The Rollouts page's pure decisions: the form as a request, the waves' counts, the actions offered. */

const form = (fieldsArg: Partial<IRolloutFormFields> = {}): IRolloutFormFields => ({
  selector: 'env=prod', serviceName: 'web', image: 'registry.example/app:2', replicas: '', waves: '1, 50%, 50%',
  approveEachWave: false, onFailure: 'halt', ...fieldsArg,
});

const wave = (indexArg: number, stateArg: IRolloutWaveProgress['state'], requiresApprovalArg = false): IRolloutWaveProgress => ({
  index: indexArg, state: stateArg, clusterIds: [], pauseMs: 0, requiresApproval: requiresApprovalArg, startedAt: null, endedAt: null,
});
const target = (waveArg: number, stateArg: IRolloutTargetProgress['state'], reasonArg: string | null = null, nameArg = 'c'): IRolloutTargetProgress => ({
  clusterId: `${nameArg}-id`, clusterName: nameArg, serviceId: `${nameArg}-web`, wave: waveArg, state: stateArg, reason: reasonArg,
  previousSpecRevision: 1, newSpecRevision: null, revertedSpecRevision: null, restoredFromRevision: null, updatedAt: null,
});
const rollout = (fieldsArg: Partial<IRollout>): IRollout => ({
  id: 'r1', operationId: 'r1', generation: 1, selector: 'env=prod', serviceName: 'web', organizationId: null, change: { image: 'x:2' },
  gate: { timeoutMs: 60_000, maxFailures: 0 }, onFailure: 'halt', maxConcurrent: 4, createdBy: 'u1', createdAt: 1,
  paused: false, approvedWaves: [], abort: null, state: 'running', currentWave: 0, failures: 0,
  waves: [], targets: [], skipped: [], endedAt: null, ...fieldsArg,
});

test('the rollouts page has its own address', () => {
  assert.deepEqual(parseRoute('#/rollouts'), { page: 'rollouts' });
  assert.deepEqual(parseRoute('#/rollouts/x'), { page: 'not-found', path: 'rollouts/x' });
});

test('the form becomes a request: counts and percentages, approval after the canary, the change given', () => {
  assert.deepEqual(rolloutRequestOfForm(form({ replicas: '3', approveEachWave: true, onFailure: 'revert' })), {
    request: {
      selector: 'env=prod', serviceName: 'web', change: { image: 'registry.example/app:2', replicas: 3 },
      waves: [{ clusters: 1 }, { percent: 50, requiresApproval: true }, { percent: 50, requiresApproval: true }],
      onFailure: 'revert',
    },
    reasons: [],
  });
});

test('a form that cannot be sent names every reason at once', () => {
  const judged = rolloutRequestOfForm(form({ serviceName: ' ', image: '', replicas: 'two', waves: '1, half' }));
  assert.equal(judged.request, undefined);
  assert.deepEqual(judged.reasons, [
    'serviceName: a service name is required',
    'replicas: "two" is not a whole number',
    'waves[1]: "half" is neither a cluster count nor a percentage',
  ]);
  assert.deepEqual(rolloutRequestOfForm(form({ image: '', waves: '' })).reasons, [
    'change: name a new image or a replica count',
    'waves: at least one wave is required',
  ]);
});

test('a change reads as a sentence', () => {
  assert.equal(describeRolloutChange({ image: 'a:2', replicas: 0 }), 'image a:2, replicas 0');
  assert.equal(describeRolloutChange({}), 'nothing');
});

test('only rollout documents name a rollout to read again', () => {
  assert.equal(rolloutIdOfChange({ kind: 'CloudlyRolloutProgress', id: 'r1' }), 'r1');
  assert.equal(rolloutIdOfChange({ kind: 'CloudlyRollout', id: 'r2' }), 'r2');
  assert.equal(rolloutIdOfChange({ kind: 'CloudlyService', id: 's1' }), null);
  assert.equal(rolloutIdOfChange({ kind: 'CloudlyRolloutServiceClaim', id: 'r1' }), null);
});

test("each wave counts its services by state and names its failures with Cloudly's reason", () => {
  const summaries = rolloutWaveSummaries(rollout({
    waves: [wave(0, 'failed'), wave(1, 'cancelled')],
    targets: [target(0, 'failed', 'no-eligible-node', 'a'), target(0, 'converged', null, 'b'), target(0, 'conflict', 'generation-mismatch', 'c'), target(1, 'pending', null, 'd')],
  }));
  assert.deepEqual(summaries.map((summary) => [summary.index, summary.state, summary.total, summary.counts]), [
    [0, 'failed', 3, { failed: 1, converged: 1, conflict: 1 }],
    [1, 'cancelled', 1, { pending: 1 }],
  ]);
  assert.deepEqual(summaries[0].failures.map((failure) => [failure.clusterName, failure.state, failure.reason]), [
    ['a', 'failed', 'no-eligible-node'],
    ['c', 'conflict', 'generation-mismatch'],
  ]);
  assert.deepEqual(summaries[1].failures, []);
});

test('the actions follow the state: approve the waiting wave, pause or resume, abort until it ended', () => {
  assert.deepEqual(rolloutActions(rollout({ state: 'running' })), [{ action: 'pause' }, { action: 'abort' }]);
  assert.deepEqual(rolloutActions(rollout({ state: 'paused', paused: true })), [{ action: 'resume' }, { action: 'abort' }]);
  assert.deepEqual(rolloutActions(rollout({ state: 'waiting-approval', waves: [wave(0, 'passed'), wave(1, 'waiting-approval', true), wave(2, 'pending', true)] })), [
    { action: 'approve', wave: 1 }, { action: 'pause' }, { action: 'abort' },
  ]);
  for (const state of ['completed', 'halted', 'aborted'] as const) {
    assert.deepEqual(rolloutActions(rollout({ state })), [], state);
  }
});

test('a fresher read replaces its rollout in place; a new one goes first', () => {
  const older = rollout({ id: 'old', createdAt: 1 });
  const newer = rollout({ id: 'new', createdAt: 2 });
  assert.deepEqual(withRollout([older], newer).map((item) => item.id), ['new', 'old']);
  const replaced = withRollout([newer, older], { ...older, state: 'completed' });
  assert.deepEqual(replaced.map((item) => [item.id, item.state]), [['new', 'running'], ['old', 'completed']]);
});

test("labels read as one line in key order, and typed labels are judged by the contract's rules", () => {
  assert.equal(labelsText({ tier: 'web', env: 'prod' }), 'env=prod, tier=web');
  assert.equal(labelsText(undefined), '');
  assert.deepEqual(labelsOfText('env=prod, example.com/region = eu'), { labels: { env: 'prod', 'example.com/region': 'eu' }, reasons: [] });
  assert.deepEqual(labelsOfText(''), { labels: {}, reasons: [] });
  const bad = labelsOfText('env=prod, env=dev, nokey, -x=1');
  assert.equal(bad.labels, undefined);
  assert.equal(bad.reasons[0], 'labels.env is given twice');
  assert.equal(bad.reasons[1], 'labels: "nokey" is not key=value');
  assert.match(bad.reasons[2], /^labels\.-x must name/);
});

test('a typed selector is judged before it is sent; an empty one selects every cluster', () => {
  assert.deepEqual(selectorReasons(''), []);
  assert.deepEqual(selectorReasons('env=prod,tier in (a,b)'), []);
  assert.ok(selectorReasons('env in (').length > 0);
});
