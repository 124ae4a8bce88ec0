import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCloudly, testAdminPassword, testAdminUsername, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { boundaryLimits } from '../ts/core/boundary.js';
import { loginFailureLimits } from '../ts/manager.admin/admin.manager.js';
import { deepArray, postText, rawEnvelope, RawSocket, type IWireAnswer } from './helpers/rawwire.js';

/**
 * Hostile input, sent the way an attacker would: raw text over HTTP and raw frames over both
 * kinds of socket, no client library in between. Every case must end in a well-formed refusal
 * envelope, leave the process serving and change nothing.
 */

const assertRefusedWith = (answerArg: IWireAnswer, codeArg: string, reasonPatternArg: RegExp): void => {
  assert.equal(answerArg.correlation?.phase, 'response');
  assert.equal(answerArg.error?.data.code, codeArg, JSON.stringify(answerArg).slice(0, 500));
  assert.ok(answerArg.error?.data.reasons?.some((reason) => reasonPatternArg.test(reason)), JSON.stringify(answerArg.error?.data).slice(0, 500));
};

/** A refusal with the token `reasonArg`, and a cause at a path matching `pathArg` that says `messageArg`. */
const assertRefusedFor = (answerArg: IWireAnswer, reasonArg: string, pathArg: RegExp, messageArg: RegExp): void => {
  assertRefusedWith(answerArg, 'invalid-request', new RegExp(`^${reasonArg}$`));
  const causes = answerArg.error?.data.causes ?? [];
  assert.ok(causes.some((causeArg) => pathArg.test(causeArg.path ?? '') && messageArg.test(causeArg.message)), JSON.stringify(causes).slice(0, 500));
};

describe('hostile input at the boundary', () => {
  let t: ITestCloudly;
  let relayToken: string;
  let clusterId: string;
  before(async () => {
    t = await startTestCloudly();
    const created = await t.createCluster('hostile');
    relayToken = created.relayToken;
    clusterId = created.cluster.id;
  });
  after(async () => { await t.stop(); });

  const clusterCount = async () => (await t.admin.call('getClusters', {})).clusters.length;
  const identityText = () => JSON.stringify(t.identity);

  test('a request nested 100,000 deep over HTTP is a 400 refusal envelope naming the depth, and the server keeps serving', async () => {
    const answer = await postText(t.baseUrl, rawEnvelope('getClusters', `{"identity":${identityText()},"x":${deepArray(100_000)}}`));
    assert.equal(answer.status, 400);
    assert.equal(answer.body.method, 'getClusters');
    assert.equal(answer.body.correlation?.id, 'c-1');
    assertRefusedFor(answer.body, 'nested-too-deep', /^request\.x(\[0\])+$/, new RegExp(`^is nested deeper than ${boundaryLimits.maxDepth} levels$`));
    assert.equal(await clusterCount(), 1);
  });

  test('the same frame on the admin socket and on the relay socket is answered, and both sockets stay open', async () => {
    const adminSocket = await RawSocket.open(t.baseUrl, t.identity.jwt);
    const relaySocket = await RawSocket.open(t.baseUrl, relayToken);
    try {
      const adminAnswer = await adminSocket.send(rawEnvelope('getClusters', `{"identity":${identityText()},"x":${deepArray(100_000)}}`, 'deep-admin'), 'deep-admin');
      assertRefusedFor(adminAnswer, 'nested-too-deep', /^request\.x(\[0\])+$/, /^is nested deeper than 64 levels$/);
      const relayAnswer = await relaySocket.send(rawEnvelope('getClusterNodeCorestores', `{"nodeIds":${deepArray(100_000)}}`, 'deep-relay'), 'deep-relay');
      assertRefusedFor(relayAnswer, 'nested-too-deep', /^request\.nodeIds(\[0\])+$/, /^is nested deeper than 64 levels$/);
      // Both sockets still serve a well-formed call.
      const next = await adminSocket.send(rawEnvelope('getClusters', `{"identity":${identityText()}}`, 'after-admin'), 'after-admin');
      assert.equal((next.response as { clusters: unknown[] }).clusters.length, 1);
      const nextRelay = await relaySocket.send(rawEnvelope('getClusterNodeCorestores', '{}', 'after-relay'), 'after-relay');
      assert.equal(nextRelay.error ?? null, null);
      assert.equal(adminSocket.closeCode, null);
      assert.equal(relaySocket.closeCode, null);
    } finally {
      adminSocket.close();
      relaySocket.close();
    }
  });

  test('__proto__ anywhere in a request is refused by path and nothing is stored or queried', async () => {
    const nodesBefore = await t.cloudly.database.mongoDb.collection('CloudlyClusterNode').countDocuments();
    const addNode = await postText(t.baseUrl, rawEnvelope('addClusterNode', `{"identity":${identityText()},"clusterId":"${clusterId}","name":"n1","__proto__":{"nodeId":{"$gt":""}}}`));
    assert.equal(addNode.status, 400);
    assertRefusedFor(addNode.body, 'key-not-allowed', /^request\.__proto__$/, /^is not allowed/);
    assert.equal(await t.cloudly.database.mongoDb.collection('CloudlyClusterNode').countDocuments(), nodesBefore);

    const backups = await postText(t.baseUrl, rawEnvelope('getServiceBackups', `{"identity":${identityText()},"__proto__":{"serviceId":{"$where":"true"}}}`));
    assertRefusedFor(backups.body, 'key-not-allowed', /^request\.__proto__$/, /^is not allowed/);

    const registrations = await postText(t.baseUrl, rawEnvelope('getClusterRelayRegistrations', `{"identity":${identityText()},"__proto__":{"clusterIds":[]}}`));
    assertRefusedFor(registrations.body, 'key-not-allowed', /^request\.__proto__$/, /^is not allowed/);

    const nested = await postText(t.baseUrl, rawEnvelope('createCluster', `{"identity":${identityText()},"name":"deep-proto","x":{"y":[{"constructor":{"prototype":{"polluted":true}}}]}}`));
    assertRefusedFor(nested.body, 'key-not-allowed', /^request\.x\.y\[0\]\.constructor$/, /^is not allowed: constructor\.prototype would reach a prototype$/);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(await clusterCount(), 1);
  });

  test('typedrequest stream markers are refused before any router sees them: no stream is registered, login or not', async () => {
    const markers = JSON.stringify(Array.from({ length: 40_000 }, () => ({ _isVirtualStream: true })));
    const login = await postText(t.baseUrl, rawEnvelope('adminLoginWithUsernameAndPassword', `{"username":"admin","password":"nope","extra":${markers}}`));
    assertRefusedFor(login.body, 'key-not-allowed', /^request\.extra\[\d+\]\._isVirtualStream$/, /^is not allowed: the key is a typedrequest stream marker$/);
    assert.equal(login.body.error!.data.causes!.length <= boundaryLimits.maxReasons, true);
    assert.equal(t.cloudly.router.registeredVirtualStreams.getArray().length, 0);
  });

  test('a caller\'s own error and response members on a request are dropped: the answer is the handler\'s alone', async () => {
    const text = `{"method":"getClusters","request":{"identity":${identityText()}},"response":{"clusters":["forged"]},"error":{"text":"forged","data":{"code":"internal"}},"correlation":{"id":"c-err","phase":"request"}}`;
    const answer = await postText(t.baseUrl, text);
    assert.equal(answer.status, 200);
    assert.equal(answer.body.error ?? null, null);
    assert.equal((answer.body.response as { clusters: Array<{ id: string }> }).clusters[0].id, clusterId);
  });

  test('answers echo no request: the login answer holds no password, an admin answer no JWT, and HTTP answers are no-store', async () => {
    const login = await postText(t.baseUrl, rawEnvelope('adminLoginWithUsernameAndPassword', JSON.stringify({ username: testAdminUsername, password: testAdminPassword })));
    assert.equal(login.status, 200);
    assert.equal(login.text.includes(testAdminPassword), false);
    assert.equal(login.body.request, undefined);
    assert.equal(login.cacheControl, 'no-store');
    const clusters = await postText(t.baseUrl, rawEnvelope('getClusters', `{"identity":${identityText()}}`));
    assert.equal(clusters.text.includes(t.identity.jwt), false);
    assert.equal(clusters.cacheControl, 'no-store');
    const refused = await postText(t.baseUrl, '{"method":');
    assert.equal(refused.cacheControl, 'no-store');
    const adminSocket = await RawSocket.open(t.baseUrl, t.identity.jwt);
    try {
      const overSocket = await adminSocket.send(rawEnvelope('getClusters', `{"identity":${identityText()}}`, 'echo'), 'echo');
      assert.equal(overSocket.request, undefined);
      assert.equal(JSON.stringify(overSocket).includes(t.identity.jwt), false);
    } finally {
      adminSocket.close();
    }
  });

  test('a frame over the body limit is answered on its socket and the socket survives', async () => {
    const small = await startTestCloudly({ bodyLimitBytes: 16 * 1024 });
    try {
      const socket = await RawSocket.open(small.baseUrl, small.identity.jwt);
      try {
        const big = rawEnvelope('createCluster', JSON.stringify({ identity: small.identity, name: 'x'.repeat(20_000) }), 'big');
        const answer = await socket.send(big, 'big');
        assertRefusedWith(answer, 'invalid-request', /^frame-too-large$/);
        assert.deepEqual(answer.error?.data.causes, [{ path: 'frame', message: 'exceeds 16384 bytes' }]);
        const huge = rawEnvelope('createCluster', JSON.stringify({ identity: small.identity, name: 'x'.repeat(600_000) }), 'huge');
        const hugeAnswer = await socket.send(huge, 'huge');
        assertRefusedWith(hugeAnswer, 'invalid-request', /^frame-too-large$/);
        assert.match(hugeAnswer.error?.data.causes?.[0]?.message ?? '', /^exceeds \d+ bytes$/);
        const next = await socket.send(rawEnvelope('getClusters', JSON.stringify({ identity: small.identity }), 'next'), 'next');
        assert.deepEqual((next.response as { clusters: unknown[] }).clusters, []);
        assert.equal(socket.closeCode, null);
      } finally {
        socket.close();
      }
    } finally {
      await small.stop();
    }
  });

  test('the bearer scheme is case-insensitive on the socket upgrade', async () => {
    const socket = await RawSocket.open(t.baseUrl, relayToken, 'bearer');
    try {
      const answer = await socket.send(rawEnvelope('getClusterNodeCorestores', '{}', 'lower'), 'lower');
      assert.equal(answer.error ?? null, null);
    } finally {
      socket.close();
    }
  });
});

describe('limits: floods are refused with retryAfterMs, other callers go on', () => {
  test('a relay socket that floods is refused unavailable with retryAfterMs, then closed; another relay\'s calls all succeed meanwhile', async () => {
    // The socket closes after more refusals in a row than its burst (twice the rate); each token
    // the bucket regains meanwhile resets the row. A low rate leaves a loaded machine (files run
    // in parallel) 30 refusals per 67 ms instead of 100 per 20 ms; the victim's 20 calls fit its burst.
    const t = await startTestCloudly({ socketRequestsPerSecond: 15 });
    try {
      const flooder = await t.createCluster('flooder');
      const victim = await t.createCluster('victim');
      const flood = await RawSocket.open(t.baseUrl, flooder.relayToken);
      const calm = await t.connectRelay(victim.relayToken);
      for (let index = 0; index < 400; index++) {
        flood.socket.send(rawEnvelope('getClusterNodeCorestores', '{}', `f-${index}`));
      }
      const victimAnswers = await Promise.all(Array.from({ length: 20 }, () => calm.fire('getClusterNodeCorestores', {})));
      assert.equal(victimAnswers.length, 20);
      await waitFor(() => flood.closeCode !== null, 'the flooding socket is closed', 30_000);
      assert.equal(flood.closeCode, 1008);
      const refusals = [...flood.answers.values()].filter((answer) => answer.error);
      assert.ok(refusals.length > 0);
      for (const refusal of refusals) {
        assert.equal(refusal.error!.data.code, 'unavailable');
        assert.deepEqual(refusal.error!.data.reasons, ['socket-rate-exceeded']);
        assert.ok(refusal.error!.data.retryAfterMs! >= 1);
        assert.equal(refusal.error!.data.retryable, true);
      }
      // The server kept serving, and the calm relay is still connected.
      assert.equal(calm.isOpen, true);
      assert.equal((await calm.fire('getClusterNodeCorestores', {}) as object) !== null, true);
    } finally {
      await t.stop();
    }
  });

  test('requests beyond the in-flight limit of one socket are refused socket-busy', async () => {
    const t = await startTestCloudly({ socketPendingRequests: 2 });
    try {
      const socket = await RawSocket.open(t.baseUrl, t.identity.jwt);
      try {
        for (let index = 0; index < 30; index++) {
          socket.socket.send(rawEnvelope('getClusters', JSON.stringify({ identity: t.identity }), `p-${index}`));
        }
        await waitFor(() => socket.answers.size === 30, 'every request answered');
        const busy = [...socket.answers.values()].filter((answer) => answer.error);
        assert.ok(busy.length > 0, 'some requests were refused');
        assert.ok(busy.length < 30, 'some requests were served');
        for (const answer of busy) {
          assert.deepEqual(answer.error!.data.reasons, ['socket-busy']);
          assert.equal(answer.error!.data.code, 'unavailable');
          assert.ok(answer.error!.data.retryAfterMs! >= 1);
        }
      } finally {
        socket.close();
      }
    } finally {
      await t.stop();
    }
  });

  test('failed logins of one account from one address are throttled, then refused unavailable with retryAfterMs even with the right password', async () => {
    const t = await startTestCloudly();
    try {
      const attempt = (passwordArg: string, usernameArg = testAdminUsername) =>
        postText(t.baseUrl, rawEnvelope('adminLoginWithUsernameAndPassword', JSON.stringify({ username: usernameArg, password: passwordArg })));
      // The free failures, then the one that starts the first wait.
      for (let index = 0; index <= loginFailureLimits.perAddressAndAccount.freeFailures; index++) {
        assertRefusedWith((await attempt(`wrong-${index}`)).body, 'unauthenticated', /^credentials-wrong$/);
      }
      const limited = await attempt(testAdminPassword);
      assertRefusedWith(limited.body, 'unavailable', /^login-rate-limited$/);
      assert.ok(limited.body.error!.data.retryAfterMs! > 0);
      assert.equal(limited.body.error!.data.retryable, true);
      // Another account from the same address is still judged on its password.
      assertRefusedWith((await attempt('whatever', 'someone-else')).body, 'unauthenticated', /^credentials-wrong$/);
    } finally {
      await t.stop();
    }
  });

  test('an address that keeps failing socket upgrades is refused 429 before its bearer is looked at', async () => {
    const t = await startTestCloudly();
    try {
      const { relayToken } = await t.createCluster('upgrade-limit');
      const statuses: number[] = [];
      const bodies: string[] = [];
      for (let index = 0; index < 31; index++) {
        await RawSocket.open(t.baseUrl, `szrelay_not-a-token-${index}`).then((socket) => socket.close(), (error: Error & { body?: string }) => {
          statuses.push(Number(/(\d{3})$/.exec(error.message)?.[1]));
          bodies.push(error.body ?? '');
        });
      }
      assert.deepEqual(statuses.slice(0, 30), Array(30).fill(401));
      assert.equal(statuses[30], 429);
      const limited = (JSON.parse(bodies[30]) as IWireAnswer).error?.data;
      assert.deepEqual([limited?.code, limited?.reasons], ['unavailable', ['upgrade-rate-limited']]);
      assert.ok((limited?.retryAfterMs ?? 0) > 0);
      assert.deepEqual((JSON.parse(bodies[0]) as IWireAnswer).error?.data.reasons, ['identity-invalid']);
      await assert.rejects(RawSocket.open(t.baseUrl, relayToken), /upgrade refused: 429/);
      // HTTP calls from the same address are not affected.
      assert.equal((await t.admin.call('getClusters', {})).clusters.length, 1);
    } finally {
      await t.stop();
    }
  });
});
