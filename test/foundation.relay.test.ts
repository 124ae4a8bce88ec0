import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { WebSocket } from 'ws';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { CloudlyRelayClient } from '../ts/client/relay.js';
import { CloudlyTransportError } from '../ts/client/transport.js';
import type { ITypedContract } from '../ts/interfaces/requests/admin.js';
import type { TUntypedContract } from '../ts/client/admin.js';

type IReq_TestEcho = ITypedContract<'testEcho', { value: number }, { value: number; clusterId: string }>;

/** The upgrade's HTTP status (101 when it opened) and, when refused, the body Cloudly answered. */
const upgradeAnswer = async (baseUrlArg: string, bearerArg: string | null): Promise<{ status: number; body: string }> => {
  try {
    const socket = await new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(`${baseUrlArg.replace('http', 'ws')}/typedsocket`, {
        headers: bearerArg === null ? {} : { authorization: `Bearer ${bearerArg}` },
      });
      ws.once('open', () => resolve(ws));
      ws.once('unexpected-response', (_request, response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunkArg: string) => { body += chunkArg; });
        response.on('end', () => reject(new CloudlyTransportError(response.statusCode ?? 0, body)));
      });
      ws.once('error', reject);
    });
    socket.close();
    return { status: 101, body: '' };
  } catch (error) {
    return error instanceof CloudlyTransportError ? { status: error.status, body: error.body } : { status: -1, body: String(error) };
  }
};

const upgradeStatus = async (baseUrlArg: string, bearerArg: string | null): Promise<number> => (await upgradeAnswer(baseUrlArg, bearerArg)).status;

describe('relay sockets: authentication on the upgrade, calls both ways, named failures', () => {
  let t: ITestCloudly;
  let clusterId: string;
  let relayToken: string;
  before(async () => {
    t = await startTestCloudly({ relayCallTimeoutMs: 2000 });
    ({ cluster: { id: clusterId }, relayToken } = await t.createCluster('relay-cluster'));
    t.cloudly.addRelayHandler<IReq_TestEcho>('testEcho', async (request, context) => ({ value: request.value, clusterId: context.clusterId }));
  });
  after(async () => { await t.stop(); });

  test('a missing, wrong or malformed bearer is refused with 401 before any frame', async () => {
    assert.equal(await upgradeStatus(t.baseUrl, null), 401);
    assert.equal(await upgradeStatus(t.baseUrl, 'szrelay_wrongwrongwrongwrongwrongwrongwrongwrong'), 401);
    assert.equal(await upgradeStatus(t.baseUrl, 'a.b.c'), 401);
    const userIdentity = await t.cloudly.auth.issueIdentity({ id: 'u', username: 'viewer', role: 'user' });
    assert.equal(await upgradeStatus(t.baseUrl, userIdentity.jwt), 401);
    assert.equal(await upgradeStatus(t.baseUrl, relayToken), 101);
  });

  test('a refused upgrade answers the refusal shape: identity-missing without a bearer, identity-invalid with a wrong one', async () => {
    const dataOf = (answerArg: { status: number; body: string }) => {
      assert.equal(answerArg.status, 401);
      return (JSON.parse(answerArg.body) as { error: { data: { code: string; reasons: string[]; causes: Array<{ path?: string }> } } }).error.data;
    };
    const missing = dataOf(await upgradeAnswer(t.baseUrl, null));
    assert.deepEqual([missing.code, missing.reasons, missing.causes.map((causeArg) => causeArg.path)],
      ['unauthenticated', ['identity-missing'], ['headers.authorization']]);
    const wrong = dataOf(await upgradeAnswer(t.baseUrl, 'szrelay_wrongwrongwrongwrongwrongwrongwrongwrong'));
    assert.deepEqual([wrong.code, wrong.reasons], ['unauthenticated', ['identity-invalid']]);
  });

  test('a relay calls Cloudly and the socket names its cluster', async () => {
    const relay = await t.connectRelay(relayToken);
    const answer = await relay.fire<IReq_TestEcho>('testEcho', { value: 7 });
    assert.deepEqual(answer, { value: 7, clusterId });
    relay.close();
  });

  test('a relay-only method over HTTP is forbidden', async () => {
    const data = await refusalOf(() => t.admin.fire<TUntypedContract>('testEcho', { value: 1 }));
    assert.equal(data.code, 'forbidden');
  });

  test('Cloudly calls the relay and gets its answer (round trip)', async () => {
    const relay = await t.connectRelay(relayToken);
    relay.addHandler<ITypedContract<'double', { n: number }, { n: number }>>('double', async (request) => ({ n: request.n * 2 }));
    await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).length === 1, 'session registered');
    const answer = await t.cloudly.relays.call<{ n: number }>(clusterId, 'double', { n: 21 });
    assert.deepEqual(answer, { n: 42 });
    relay.close();
    await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).length === 0, 'session gone');
  });

  test('no relay connected → unavailable relay-not-connected at once', async () => {
    const data = await refusalOf(() => t.cloudly.relays.call(clusterId, 'double', { n: 1 }));
    assert.deepEqual(data, { code: 'unavailable', retryable: true, reasons: ['relay-not-connected'] });
  });

  test('a relay dropped mid-call ends the call with relay-disconnected, well within the timeout', async () => {
    const relay = await t.connectRelay(relayToken);
    let called!: () => void;
    const handlerReached = new Promise<void>((resolve) => { called = resolve; });
    relay.addHandler<ITypedContract<'hang', object, object>>('hang', async () => {
      called();
      return new Promise(() => undefined);
    });
    await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).length === 1, 'session registered');
    const started = Date.now();
    const pending = refusalOf(() => t.cloudly.relays.call(clusterId, 'hang', {}, { timeoutMs: 30_000 }));
    await handlerReached;
    relay.terminate();
    const data = await pending;
    assert.deepEqual(data, { code: 'unavailable', retryable: true, reasons: ['relay-disconnected'] });
    // The 30 s timeout did not decide it: the disconnect did.
    assert.ok(Date.now() - started < 30_000);
  });

  test('a relay that never answers ends in relay-timeout', async () => {
    const relay = await t.connectRelay(relayToken);
    relay.addHandler<ITypedContract<'silent', object, object>>('silent', async () => new Promise(() => undefined));
    await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).length === 1, 'session registered');
    const data = await refusalOf(() => t.cloudly.relays.call(clusterId, 'silent', {}, { timeoutMs: 200 }));
    assert.deepEqual(data, { code: 'unavailable', retryable: true, reasons: ['relay-timeout'] });
    relay.close();
    await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).length === 0, 'session gone');
  });

  test('a relay refusal reaches Cloudly as unavailable relay-refused, the relay\'s own error data in relayError', async () => {
    const relay = await t.connectRelay(relayToken);
    relay.addHandler<ITypedContract<'boom', object, object>>('boom', async () => { throw new Error('relay bug'); });
    await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).length === 1, 'session registered');
    const data = await refusalOf(() => t.cloudly.relays.call(clusterId, 'boom', {}));
    assert.deepEqual(data, { code: 'unavailable', retryable: true, reasons: ['relay-refused'], relayError: { code: 'internal', retryable: true, reasons: [] } });
    relay.close();
    await waitFor(() => t.cloudly.relays.sessionsOf(clusterId).length === 0, 'session gone');
  });

  test('malformed frames get a named refusal and the socket keeps serving', async () => {
    const relay = await t.connectRelay(relayToken);
    const frames: string[] = [];
    // Only refusals: Cloudly may also call the relay on its own (a hint, a push) meanwhile.
    relay.peer.socket.on('message', (data, isBinary) => {
      // A call of Cloudly's own carries `error: null`; a refusal carries the error.
      if (!isBinary && (JSON.parse(data.toString()) as { error?: unknown }).error) {
        frames.push(data.toString());
      }
    });
    relay.peer.socket.send('{not json');
    relay.peer.socket.send(JSON.stringify({ method: 'testEcho' }));
    await waitFor(() => frames.length >= 2, 'two refusals');
    const reasons = frames.map((frame) => (JSON.parse(frame) as { error: { data: { code: string; reasons: string[]; causes: unknown[] } } }).error.data);
    assert.deepEqual(reasons.map((reason) => reason.code), ['invalid-request', 'invalid-request']);
    assert.deepEqual(reasons[0].reasons, ['not-json']);
    assert.deepEqual(reasons[0].causes, [{ path: 'frame', reason: 'not-json', message: 'is not valid JSON' }]);
    // The envelope without a correlation: a token, the member named in its cause.
    assert.deepEqual(reasons[1].reasons, ['envelope-invalid']);
    assert.deepEqual(reasons[1].causes, [{ path: 'correlation', reason: 'envelope-invalid', message: 'must be { id, phase: request | response }' }]);
    assert.deepEqual(await relay.fire<IReq_TestEcho>('testEcho', { value: 3 }), { value: 3, clusterId });
    relay.close();
  });

  test('an admin socket carries admin calls', async () => {
    await t.admin.connectSocket();
    assert.equal(t.admin.socketOpen, true);
    const answer = await t.admin.call('getClusters', {});
    assert.ok(answer.clusters.some((cluster) => cluster.id === clusterId));
    t.admin.close();
  });

  test('rotating the relay token closes the old socket and refuses the old token; concurrent rotations have one winner', async () => {
    const relay = await t.connectRelay(relayToken);
    const closed = new Promise<void>((resolve) => relay.onClose(resolve));
    const cluster = (await t.admin.call('getClusters', {})).clusters.find((c) => c.id === clusterId)!;
    const attempts = await Promise.allSettled(Array.from({ length: 20 }, () =>
      t.admin.call('rotateClusterRelayToken', { clusterId, expectedGeneration: cluster.generation })));
    const winners = attempts.filter((attempt) => attempt.status === 'fulfilled');
    assert.equal(winners.length, 1);
    for (const attempt of attempts) {
      if (attempt.status === 'rejected') {
        assert.equal((attempt.reason as { errorData: { code: string } }).errorData.code, 'conflict');
      }
    }
    await closed;
    assert.equal(await upgradeStatus(t.baseUrl, relayToken), 401);
    const fresh = (winners[0] as PromiseFulfilledResult<{ relayToken: string }>).value.relayToken;
    const relay2 = await CloudlyRelayClient.connect(t.baseUrl, fresh, { reconnect: false });
    assert.deepEqual(await relay2.fire<IReq_TestEcho>('testEcho', { value: 9 }), { value: 9, clusterId });
    relay2.close();
    relayToken = fresh;
  });

  test('the relay token never reaches the log', async () => {
    assert.equal(t.logs.join('').includes(relayToken), false);
  });
});
