import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { IClusterTrafficStatistics } from '../ts/interfaces/data/clustertraffic.js';
import type { IReq_Cloudly_Relay_GetClusterTrafficStatistics } from '../ts/interfaces/requests/traffic.js';
import { assertFieldProblems, causeSentencesOf } from './helpers/refusals.js';

/** The reasons of a refusal, as strings. */
const reasonsOf = (refusalArg: { reasons?: unknown }): string[] => (refusalArg.reasons ?? []) as string[];

let t: ITestCloudly;
let clusterId: string;
let relayToken: string;

before(async () => {
  t = await startTestCloudly();
  ({ cluster: { id: clusterId }, relayToken } = await t.createCluster('traffic'));
  await t.addNodes(clusterId, 'n1', 'n2');
});

after(async () => {
  await t.stop();
});

const record = (dayArg: string, nodeArg: string, hostArg: string, requestsArg: number): IClusterTrafficStatistics => ({
  dayUtc: dayArg, nodeId: nodeArg, hostname: hostArg, requests: requestsArg, bytesIn: requestsArg * 100,
  bytesOut: requestsArg * 900, connections: Math.ceil(requestsArg / 3), backendFailures: { connect: 0, handshake: 1, request: 2 },
});

/** What the test ingress holds: four day buckets, paged two at a time by the ingress's own cursor. */
const held = [
  record('2026-11-27', 'n1', 'shop.example.com', 10),
  record('2026-11-28', 'n1', 'shop.example.com', 20),
  record('2026-11-28', 'n2', 'api.example.com', 30),
  record('2026-11-29', 'n2', 'api.example.com', 40),
];

test('an administrator pages a cluster\'s traffic statistics through its relay, which receives exactly the asked range', async () => {
  const relay = await t.connectRelay(relayToken);
  const asked: Array<IReq_Cloudly_Relay_GetClusterTrafficStatistics['request']> = [];
  relay.addHandler<IReq_Cloudly_Relay_GetClusterTrafficStatistics>('getClusterTrafficStatistics', async (request) => {
    asked.push(request);
    const start = request.cursor === undefined ? 0 : Number(request.cursor.slice('at-'.length));
    const inRange = held.filter((item) => item.dayUtc >= request.fromDayUtc && item.dayUtc <= request.toDayUtc);
    const page = inRange.slice(start, start + request.limit);
    return start + request.limit < inRange.length ? { statistics: page, nextCursor: `at-${start + request.limit}` } : { statistics: page };
  });
  try {
    const first = await t.caller.call('getClusterTrafficStatistics', { clusterId, fromDayUtc: '2026-11-27', toDayUtc: '2026-11-30', limit: 2 });
    assert.deepEqual(first.statistics, held.slice(0, 2));
    assert.equal(first.nextCursor, 'at-2');
    const second = await t.caller.call('getClusterTrafficStatistics', {
      clusterId, fromDayUtc: '2026-11-27', toDayUtc: '2026-11-30', limit: 2, cursor: first.nextCursor,
    });
    assert.deepEqual(second.statistics, held.slice(2));
    assert.equal(Object.hasOwn(second, 'nextCursor'), false);
    const defaulted = await t.caller.call('getClusterTrafficStatistics', { clusterId, fromDayUtc: '2026-11-28', toDayUtc: '2026-11-28' });
    assert.deepEqual(defaulted.statistics, held.slice(1, 3));
    assert.deepEqual(asked, [
      { fromDayUtc: '2026-11-27', toDayUtc: '2026-11-30', limit: 2 },
      { fromDayUtc: '2026-11-27', toDayUtc: '2026-11-30', limit: 2, cursor: 'at-2' },
      { fromDayUtc: '2026-11-28', toDayUtc: '2026-11-28', limit: 100 },
    ]);
  } finally {
    await relay.close();
  }
});

test('a relay answer outside the asked range, from a foreign node, over the limit or malformed is relay-answer-invalid, naming each flaw', async () => {
  const relay = await t.connectRelay(relayToken);
  let answer: unknown = null;
  relay.addHandler<IReq_Cloudly_Relay_GetClusterTrafficStatistics>('getClusterTrafficStatistics', async () => answer as never);
  const read = () => refusalOf(() => t.caller.call('getClusterTrafficStatistics', { clusterId, fromDayUtc: '2026-11-28', toDayUtc: '2026-11-29', limit: 2 }));
  try {
    answer = { statistics: [record('2026-11-01', 'n1', 'shop.example.com', 1), record('2026-11-28', 'n9', 'shop.example.com', 1)] };
    let refusal = await read();
    assert.equal(refusal.code, 'unavailable');
    assert.deepEqual(reasonsOf(refusal), ['relay-answer-invalid']);
    assert.ok(causeSentencesOf(refusal).some((reason) => reason.includes('answer.statistics[0].dayUtc 2026-11-01 is outside 2026-11-28..2026-11-29')), causeSentencesOf(refusal).join(' | '));
    assert.ok(causeSentencesOf(refusal).some((reason) => reason.includes('answer.statistics[1].nodeId n9 is not a node of the cluster')), causeSentencesOf(refusal).join(' | '));

    answer = { statistics: [held[1], held[2], held[3]] };
    refusal = await read();
    assert.ok(causeSentencesOf(refusal).some((reason) => reason.includes('holds 3 records; the limit asked was 2')), causeSentencesOf(refusal).join(' | '));

    answer = { statistics: [{ ...held[1], requests: -1, backendFailures: { connect: 0, handshake: 0 }, extra: true }], nextCursor: '' };
    refusal = await read();
    for (const expected of ['answer.statistics[0].requests', 'answer.statistics[0].backendFailures.request', 'answer.statistics[0].extra', 'answer.nextCursor']) {
      assert.ok(causeSentencesOf(refusal).some((reason) => reason.includes(expected)), `${expected} in ${causeSentencesOf(refusal).join(' | ')}`);
    }
  } finally {
    await relay.close();
  }
});

test('bad requests are refused with every reason before any relay is asked; an unknown cluster is not-found; no relay is relay-not-connected', async () => {
  const bad = await refusalOf(() => t.caller.call('getClusterTrafficStatistics', {
    clusterId, fromDayUtc: '2026-02-31', toDayUtc: 'yesterday', limit: 5000, cursor: '',
  }));
  assertFieldProblems(bad, [
    ['request.fromDayUtc', 'field-invalid', 'must be a UTC day YYYY-MM-DD'],
    ['request.toDayUtc', 'field-invalid', 'must be a UTC day YYYY-MM-DD'],
    ['request.cursor', 'field-invalid', /^must be a string of 1 to \d+ characters$/],
    ['request.limit', 'field-invalid', /^must be an integer from 1 to \d+$/],
  ]);
  const backwards = await refusalOf(() => t.caller.call('getClusterTrafficStatistics', { clusterId, fromDayUtc: '2026-11-29', toDayUtc: '2026-11-28' }));
  assertFieldProblems(backwards, [['request.toDayUtc', 'field-invalid', 'must not be before request.fromDayUtc']]);
  const tooLong = await refusalOf(() => t.caller.call('getClusterTrafficStatistics', { clusterId, fromDayUtc: '2025-01-01', toDayUtc: '2026-11-28' }));
  assertFieldProblems(tooLong, [['request.toDayUtc', 'field-invalid', /at most 366 days/]]);
  const unknown = await refusalOf(() => t.caller.call('getClusterTrafficStatistics', { clusterId: 'cluster-nope', fromDayUtc: '2026-11-28', toDayUtc: '2026-11-28' }));
  assert.equal(unknown.code, 'not-found');
  // The relay of the tests before closed its socket; a call that reached it while Cloudly had not
  // yet seen the close would end relay-disconnected instead.
  await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).length === 0, 'the earlier relay\'s socket closed on Cloudly\'s side');
  const noRelay = await refusalOf(() => t.caller.call('getClusterTrafficStatistics', { clusterId, fromDayUtc: '2026-11-28', toDayUtc: '2026-11-28' }));
  assert.equal(noRelay.code, 'unavailable');
  assert.ok(reasonsOf(noRelay).includes('relay-not-connected'), String(noRelay.reasons));
});
