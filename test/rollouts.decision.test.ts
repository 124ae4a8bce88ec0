import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { advanceRollout, applyRolloutChange, initialRolloutProgress, validateRolloutChange, validateRolloutWaves, waveSizesOf, type IRolloutFacts } from '../ts/manager.rollout/decide.js';
import type { IRolloutDocument, IRolloutProgressDocument } from '../ts/manager.rollout/documents.js';
import type { IService, IServiceWritableSpec } from '../ts/interfaces/data/service.js';
import { writableSpecOfService } from '../ts/interfaces/data/servicewritable.js';

/** The rollout's pure decisions, one fact changed per row, no server. */

const spec = (imageArg: string, clusterIdArg: string): IServiceWritableSpec => ({
  name: 'web', organizationId: 'org-1', clusterId: clusterIdArg, ports: [], routes: [], volumes: [],
  runtime: { image: imageArg, replicas: 1, profile: { runAs: null }, placement: { nodeIds: ['node-1'] } },
});

/** Four clusters c0..c3, one service each (s0..s3), in waves [c0], [c1, c2, c3]. */
const rollout = (overridesArg: Partial<IRolloutDocument> = {}): IRolloutDocument => ({
  id: 'rollout-1', generation: 1, selector: 'env=prod', serviceName: 'web', organizationId: null,
  change: { image: 'app:2' }, gate: { timeoutMs: 1_000, maxFailures: 0 }, onFailure: 'halt', maxConcurrent: 2,
  waves: [{ clusterIds: ['c0'], pauseMs: 0, requiresApproval: false }, { clusterIds: ['c1', 'c2', 'c3'], pauseMs: 0, requiresApproval: false }],
  targets: [0, 1, 2, 3].map((index) => ({
    clusterId: `c${index}`, clusterName: `c${index}`, serviceId: `s${index}`, wave: index === 0 ? 0 : 1, generation: 1, specRevision: 1,
    nextSpecRevision: 2, previousSpec: spec('app:1', `c${index}`), nextSpec: spec('app:2', `c${index}`),
  })),
  skipped: [], createdBy: 'admin', createdAt: 0, paused: false, approvedWaves: [], abort: null,
  ...overridesArg,
});

const start = (docArg: IRolloutDocument): IRolloutProgressDocument => ({ ...initialRolloutProgress(docArg), generation: 1 });
const noFacts: IRolloutFacts = { verdicts: new Map(), darkClusters: new Set() };
const verdictMap = (entriesArg: Array<[string, number, string, string | null]>): IRolloutFacts['verdicts'] =>
  new Map(entriesArg.map(([id, specRevision, state, reason]) => [id, { specRevision, state, reason, unknown: false }]));
const verdicts = (entriesArg: Array<[string, number, string, string | null]>): IRolloutFacts =>
  ({ verdicts: verdictMap(entriesArg), darkClusters: new Set() });

/** Marks services applied at `atArg` (what the controller records after its compare-and-swap). */
const applied = (progressArg: IRolloutProgressDocument, idsArg: string[], atArg = 0): IRolloutProgressDocument => ({
  ...progressArg,
  targets: progressArg.targets.map((record) => (idsArg.includes(record.serviceId)
    ? { ...record, state: 'updating', applying: true, newSpecRevision: 2, updatedAt: atArg }
    : record)),
});

describe('rollout decisions', () => {
  test('the canary first; the next wave only once it converged; pacing bounds the services changing at once', () => {
    const doc = rollout();
    const first = advanceRollout(doc, start(doc), noFacts, 0);
    assert.deepEqual(first.effects, [{ kind: 'apply', serviceId: 's0' }]);
    assert.equal(first.progress.waves[0].state, 'running');
    const waiting = advanceRollout(doc, applied(first.progress, ['s0']), verdicts([['s0', 2, 'converging', null]]), 10);
    assert.deepEqual(waiting.effects, []);
    assert.equal(waiting.requeueAfterMs, 990, 'looks again when the gate would time out');
    const next = advanceRollout(doc, applied(first.progress, ['s0']), verdicts([['s0', 2, 'converged', null]]), 10);
    assert.deepEqual(next.progress.waves.map((wave) => wave.state), ['passed', 'running']);
    assert.deepEqual(next.effects, [{ kind: 'apply', serviceId: 's1' }, { kind: 'apply', serviceId: 's2' }], 'at most maxConcurrent at once');
    const old = advanceRollout(doc, applied(first.progress, ['s0']), verdicts([['s0', 1, 'converged', null]]), 10);
    assert.deepEqual(old.effects, [], 'a verdict on the old revision is no pass');
  });

  test('a failure past the budget halts; with revert every changed service goes back at once; an abort cancels what is pending', () => {
    const doc = rollout();
    const started = applied(advanceRollout(doc, start(doc), noFacts, 0).progress, ['s0']);
    for (const [state, reason] of [['refused', 'no-eligible-node'], ['waiting', 'failure-backoff']] as const) {
      const halted = advanceRollout(doc, started, verdicts([['s0', 2, state, reason]]), 10);
      assert.equal(halted.progress.state, 'halted');
      assert.deepEqual([halted.progress.targets[0].state, halted.progress.targets[0].reason], ['failed', reason]);
      assert.ok(halted.progress.targets.slice(1).every((record) => record.state === 'cancelled'));
      assert.deepEqual(halted.progress.waves.map((wave) => wave.state), ['failed', 'cancelled']);
    }
    const timedOut = advanceRollout(doc, started, verdicts([['s0', 2, 'converging', null]]), 1_000);
    assert.deepEqual([timedOut.progress.state, timedOut.progress.targets[0].reason], ['halted', 'gate-timeout']);
    const budget = advanceRollout(rollout({ gate: { timeoutMs: 1_000, maxFailures: 1 } }), started, verdicts([['s0', 2, 'refused', 'no-eligible-node']]), 10);
    assert.equal(budget.progress.state, 'running', 'one failure within a budget of one goes on');
    const reverting = advanceRollout(rollout({ onFailure: 'revert' }), started, verdicts([['s0', 2, 'refused', 'no-eligible-node']]), 10);
    assert.deepEqual(reverting.effects, [{ kind: 'revert', serviceId: 's0' }]);
    const aborted = advanceRollout(rollout({ abort: { revert: false, at: 5 } }), started, noFacts, 10);
    assert.equal(aborted.progress.state, 'aborted');
    assert.deepEqual(aborted.effects, []);
  });

  test('a dark cluster is skipped, never waited for; a pause, an approval and a pause between waves hold the next change', () => {
    const doc = rollout();
    const afterCanary = advanceRollout(doc, applied(advanceRollout(doc, start(doc), noFacts, 0).progress, ['s0']), verdicts([['s0', 2, 'converged', null]]), 10).progress;
    const dark = advanceRollout(doc, afterCanary, { verdicts: verdictMap([['s0', 2, 'converged', null]]), darkClusters: new Set(['c1']) }, 20);
    assert.equal(dark.progress.targets[1].state, 'skipped');
    assert.equal(dark.progress.targets[1].reason, 'cluster-unknown');
    assert.deepEqual(dark.effects.map((effect) => effect.serviceId), ['s2', 's3']);
    const paused = advanceRollout(rollout({ paused: true }), afterCanary, noFacts, 20);
    assert.deepEqual([paused.progress.state, paused.effects], ['paused', []]);
    const gated = rollout({ waves: [doc.waves[0], { ...doc.waves[1], requiresApproval: true }] });
    const waiting = advanceRollout(gated, applied(advanceRollout(gated, start(gated), noFacts, 0).progress, ['s0']), verdicts([['s0', 2, 'converged', null]]), 20);
    assert.deepEqual([waiting.progress.state, waiting.effects], ['waiting-approval', []]);
    assert.equal(advanceRollout({ ...gated, approvedWaves: [1] }, waiting.progress, noFacts, 30).effects.length, 2);
    const paced = rollout({ waves: [{ ...doc.waves[0], pauseMs: 500 }, doc.waves[1]] });
    const pausing = advanceRollout(paced, applied(advanceRollout(paced, start(paced), noFacts, 0).progress, ['s0']), verdicts([['s0', 2, 'converged', null]]), 10);
    assert.deepEqual([pausing.effects, pausing.requeueAfterMs], [[], 500]);
  });

  test('a change whose commit is not known after a crash is settled before anything else', () => {
    const doc = rollout();
    const progress = start(doc);
    progress.targets[0] = { ...progress.targets[0], state: 'updating', applying: true };
    progress.waves[0] = { ...progress.waves[0], state: 'running' };
    assert.deepEqual(advanceRollout(rollout({ paused: true }), progress, noFacts, 0).effects, [{ kind: 'apply', serviceId: 's0' }]);
    const aborting = advanceRollout(rollout({ abort: { revert: false, at: 0 } }), progress, noFacts, 0);
    assert.notEqual(aborting.progress.state, 'aborted', 'an abort waits for the unsettled change to be recorded');
    assert.deepEqual(aborting.effects, [{ kind: 'apply', serviceId: 's0' }]);
    const settled = { ...aborting.progress, targets: aborting.progress.targets.map((record, index) => (index === 0 ? { ...record, state: 'cancelled' as const, applying: false } : record)) };
    assert.equal(advanceRollout(rollout({ abort: { revert: false, at: 0 } }), settled, noFacts, 0).progress.state, 'aborted');
  });

  test('the spec a rollout writes is the service as read with only the change applied: environment, secrets, readiness, network policy and volumes kept', () => {
    const stored: IService = {
      id: 'svc-1', name: 'web', organizationId: 'org1', clusterId: 'c1', generation: 4, specRevision: 2,
      runtime: { image: 'nginx:1', replicas: 1, profile: { runAs: { user: 101, group: 101 } }, placement: { nodeIds: ['n1'] } },
      ports: [{ name: 'http', port: 8080, protocol: 'tcp' }], routes: [{ hostname: 'web.example.com', targetPort: 'http' }],
      volumes: [{ id: 'vol-1', mountPath: '/data', initialization: null } as never],
      environment: { MODE: 'production' }, secrets: { TOKEN: { secretId: 'grp-1', secretVersionId: 'v1' } },
      readiness: { kind: 'http', port: 'http', path: '/healthz' },
      networkPolicy: { egress: { kind: 'destinations', destinations: [{ host: 'api.example.com', port: 443, protocol: 'tcp' }] } },
      createdAt: 1, updatedAt: 2,
    } as IService;
    const next = applyRolloutChange(writableSpecOfService(stored), { image: 'nginx:2' });
    assert.equal(next.runtime.image, 'nginx:2');
    assert.deepEqual(next.environment, { MODE: 'production' });
    assert.deepEqual(next.secrets, { TOKEN: { secretId: 'grp-1', secretVersionId: 'v1' } });
    assert.deepEqual(next.readiness, { kind: 'http', port: 'http', path: '/healthz' });
    assert.deepEqual(next.networkPolicy, stored.networkPolicy);
    assert.deepEqual(next.volumes, [{ mountPath: '/data' }], 'the server-managed id and initialization are left out');
    assert.deepEqual(next.routes, stored.routes);
  });

  test('changes, waves and their coverage are judged with every reason', () => {
    assert.deepEqual(applyRolloutChange(spec('a', 'c'), { image: 'b', replicas: 3 }).runtime, { ...spec('a', 'c').runtime, image: 'b', replicas: 3 });
    assert.equal(validateRolloutChange({}).length, 1);
    assert.equal(validateRolloutChange({ image: '', replicas: -1, env: {} }).length, 3);
    assert.equal(validateRolloutWaves([{ clusters: 1, percent: 5 }, { percent: 0 }, { clusters: 1, pauseMs: -1, requiresApproval: 'yes' }]).length, 4);
    assert.deepEqual(waveSizesOf([{ clusters: 1 }, { percent: 50 }, { percent: 50 }], 12), { sizes: [1, 6, 5] });
    assert.deepEqual(waveSizesOf([{ clusters: 1 }, { clusters: 2 }], 12), { reasons: ['waves cover 3 of the 12 clusters selected'] });
    assert.ok('reasons' in waveSizesOf([{ percent: 100 }, { clusters: 1 }], 4), 'a wave left with nothing is refused');
  });
});
