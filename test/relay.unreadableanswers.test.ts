import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { causeSentencesOf } from './helpers/refusals.js';
import { RawSocket, type IWireAnswer } from './helpers/rawwire.js';

/**
 * A relay's answer frame that cannot be read ends the call it answers at once with
 * `relay-answer-invalid` (docs/relay-protocol.md §6): the administrator is not left waiting for
 * `relay-timeout`. The relay here is a raw socket, so it can write frames no client library would.
 */

let t: ITestCloudly;
let relay: RawSocket;
let clusterId: string;

before(async () => {
  // The traffic call's timeout is 15 s: a call that ended with anything but relay-timeout ended because of the frame.
  t = await startTestCloudly();
  const created = await t.createCluster('unreadable-answers');
  clusterId = created.cluster.id;
  relay = await RawSocket.open(t.baseUrl, created.relayToken);
});

after(async () => {
  relay.close();
  await t.stop();
});

const askTraffic = () => t.caller.call('getClusterTrafficStatistics', { clusterId, fromDayUtc: '2026-01-01', toDayUtc: '2026-01-02' });

/**
 * Starts the admin call and waits until Cloudly's call reached the relay; answers the call's request.
 * Cloudly also calls the socket on its own (the desired-state hint after connecting, for one), so
 * the traffic call is found by its method, not taken as the next request.
 */
const callReachingRelay = async (): Promise<{ refusal: Promise<Record<string, unknown>>; request: IWireAnswer }> => {
  const seen = relay.requests.length;
  const refusal = refusalOf(askTraffic);
  const trafficCall = () => relay.requests.slice(seen).find((requestArg) => requestArg.method === 'getClusterTrafficStatistics');
  await waitFor(() => trafficCall() !== undefined, 'the traffic call reached the relay', 10_000);
  return { refusal, request: trafficCall()! };
};

test('an answer frame that is not JSON ends the pending call at once with relay-answer-invalid', async () => {
  const { refusal, request } = await callReachingRelay();
  assert.equal(request.method, 'getClusterTrafficStatistics');
  relay.socket.send("{'correlation': 'python repr, not JSON'}");
  const data = await refusal;
  assert.equal(data.code, 'unavailable');
  assert.deepEqual(data.reasons, ['relay-answer-invalid']);
  const causes = causeSentencesOf(data);
  assert.equal(causes[0], 'answer frame names no pending call');
  assert.ok(causes.length > 1, 'the parser\'s own reason follows');
});

test('an unreadable answer that names its call ends exactly that call, and the socket stays', async () => {
  const { refusal, request } = await callReachingRelay();
  const id = request.correlation!.id;
  relay.socket.send(`{"method":"getClusterTrafficStatistics","correlation":{"id":"${id}","phase":"response"},"response":{"statistics":[`);
  const data = await refusal;
  assert.equal(data.code, 'unavailable');
  assert.deepEqual(data.reasons, ['relay-answer-invalid']);
  assert.equal(causeSentencesOf(data).includes('answer frame names no pending call'), false);
  assert.equal(relay.closeCode, null);
});
