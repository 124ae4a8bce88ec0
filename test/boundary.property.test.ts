import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import fc from 'fast-check';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import { clusterDesiredStateKind } from '../ts/manager.desiredstate/desiredstate.manager.js';
import { postText, rawEnvelope, RawSocket, type IWireAnswer } from './helpers/rawwire.js';
import { stateDigest } from './helpers/state.js';
import { errorCodes } from '../ts/core/errors.js';

/**
 * Arbitrary JSON, written as text so that keys like `__proto__` really reach the wire, sent to
 * every method Cloudly serves over the transport that method is served on. Whatever arrives must
 * be answered with a well-formed envelope, refusals must change nothing, and the process must
 * keep its memory.
 */

const suspiciousKeys = [
  '__proto__', 'constructor', 'prototype', '$gt', '$where', '$ne', '_isVirtualStream', '_OBMITTED_VIRTUAL_STREAM',
  'clusterId', 'nodeId', 'serviceId', 'backupId', 'name', 'identity', 'expectedGeneration', 'mutationId', 'nodeIds',
  'clusterIds', 'report', 'designation', 'plan', 'leases', 'application', 'cursor', 'limit', 'streamId',
];

const scalarText = fc.oneof(
  fc.constant('null'),
  fc.boolean().map(String),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((value) => JSON.stringify(value)),
  fc.string({ maxLength: 20 }).map((value) => JSON.stringify(value)),
  fc.constantFrom('"cluster-1"', '"node-1"', '""'),
);

const keyText = fc.oneof(fc.constantFrom(...suspiciousKeys), fc.string({ maxLength: 10 })).map((key) => JSON.stringify(key));

const { value: valueText } = fc.letrec<{ value: string; array: string; object: string }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, scalarText, tie('array'), tie('object'),
    fc.integer({ min: 60, max: 3000 }).map((depth) => `${'['.repeat(depth)}${']'.repeat(depth)}`),
    fc.integer({ min: 1, max: 400 }).map((count) => `[${Array(count).fill('{"_isVirtualStream":true}').join(',')}]`)),
  array: fc.array(tie('value'), { maxLength: 4 }).map((items) => `[${items.join(',')}]`),
  object: fc.array(fc.tuple(keyText, tie('value')), { maxLength: 5 })
    .map((entries) => `{${entries.map(([key, value]) => `${key}:${value}`).join(',')}}`),
}));

/** Members of a request object, as text, to follow an identity or stand alone. */
const membersText = fc.array(fc.tuple(keyText, valueText), { maxLength: 6 })
  .map((entries) => entries.map(([key, value]) => `${key}:${value}`).join(','));

v8.setFlagsFromString('--expose-gc');
const collectGarbage = vm.runInNewContext('gc') as () => void;

/** Reads that store what they compute ("reads materialise their verdict"): a success may write. */
const materializingReads = new Set([
  'getServiceRuntimeStatus', 'getRuntimeNetworkProjection', 'getClusterNodeRuntimeNetworkProjection',
  'getClusterPlatformDesiredState', 'getClusterRouteTable',
]);

describe('every served method survives arbitrary JSON', () => {
  let t: ITestCloudly;
  let relayToken: string;
  let clusterId: string;
  const methods: Record<'admin' | 'relay' | 'public', string[]> = { admin: [], relay: [], public: [] };
  before(async () => {
    t = await startTestCloudly({ socketRequestsPerSecond: 100_000 });
    const created = await t.createCluster('property');
    relayToken = created.relayToken;
    clusterId = created.cluster.id;
    // Sort each served method by who may call it, from the server's own refusal of an empty call.
    for (const handler of t.cloudly.router.handlerMap.getArray()) {
      const answer = await postText(t.baseUrl, rawEnvelope(handler.method, '{}'));
      const reasons = answer.body.error?.data.reasons ?? [];
      if (reasons.includes('relay-socket-only')) {
        methods.relay.push(handler.method);
      } else if (answer.body.error?.data.code === 'unauthenticated' && reasons.some((reason) => reason.startsWith('identity'))) {
        methods.admin.push(handler.method);
      } else {
        methods.public.push(handler.method);
      }
    }
  });
  after(async () => { await t.stop(); });

  const assertWellFormed = (answerArg: IWireAnswer, idArg: string, contextArg: string): void => {
    assert.equal(answerArg.correlation?.id, idArg, contextArg);
    assert.equal(answerArg.correlation?.phase, 'response', contextArg);
    if (answerArg.error) {
      // Either the catalogue's error data or the contract's own (ingress registration refusals,
      // volume initialization errors ...): an object either way, never null.
      assert.equal(typeof answerArg.error.text, 'string', contextArg);
      assert.ok(answerArg.error.data !== null && typeof answerArg.error.data === 'object', contextArg);
      if ((errorCodes as readonly string[]).includes(answerArg.error.data.code)) {
        assert.equal(typeof answerArg.error.data.retryable, 'boolean', contextArg);
      }
    } else {
      assert.ok(answerArg.response !== null && typeof answerArg.response === 'object', `${contextArg}: answered null`);
    }
  };

  test('1,000 arbitrary requests: well-formed answers, refusals change nothing, no stream registered, heap bounded', async () => {
    assert.ok(methods.admin.length >= 20, `admin methods found: ${methods.admin.length}`);
    assert.ok(methods.relay.length >= 5, `relay methods found: ${methods.relay.length}`);
    const adminSocket = await RawSocket.open(t.baseUrl, t.identity.jwt);
    const relaySocket = await RawSocket.open(t.baseUrl, relayToken);
    // A relay socket that opens has the cluster's desired state published for it in the
    // background; let that settle so the batches below measure only what the requests do.
    await waitFor(async () => (await t.cloudly.store.get(clusterDesiredStateKind, clusterId)) !== null, 'desired state published');
    await t.cloudly.desiredStateManager.settled(clusterId);
    const identity = JSON.stringify(t.identity);
    collectGarbage();
    const heapBefore = process.memoryUsage().heapUsed;
    let sent = 0;
    let counter = 0;
    try {
      const sample = fc.record({
        kind: fc.constantFrom<'admin' | 'relay' | 'public'>('admin', 'admin', 'relay', 'public'),
        pick: fc.nat(),
        shape: fc.constantFrom('with-identity', 'members-only', 'any-value'),
        members: membersText,
        value: valueText,
        transport: fc.constantFrom('http', 'socket'),
      });
      const batches = fc.sample(fc.array(sample, { minLength: 50, maxLength: 50 }), { numRuns: 20, seed: 1303 });
      for (const batch of batches) {
        const before = await stateDigest(t);
        let wrote = false;
        for (const entry of batch) {
          const list = methods[entry.kind];
          const method = list[entry.pick % list.length];
          const requestText = entry.shape === 'with-identity'
            ? `{"identity":${identity}${entry.members ? `,${entry.members}` : ''}}`
            : entry.shape === 'members-only' ? `{${entry.members}}` : entry.value;
          const id = `p-${counter++}`;
          const text = rawEnvelope(method, requestText, id);
          const context = `${method} ${text.length > 600 ? `${text.slice(0, 300)}…${text.slice(-300)}` : text}`;
          let answer: IWireAnswer;
          if (entry.kind === 'relay') {
            answer = await relaySocket.send(text, id);
          } else if (entry.transport === 'socket' && entry.kind === 'admin') {
            answer = await adminSocket.send(text, id);
          } else {
            const posted = await postText(t.baseUrl, text);
            assert.ok(posted.status < 500, `${context}: HTTP ${posted.status}`);
            answer = posted.body;
          }
          sent++;
          assertWellFormed(answer, id, context);
          if (!answer.error && (!method.startsWith('get') || materializingReads.has(method))) {
            wrote = true;
          }
        }
        if (!wrote) {
          assert.equal(await stateDigest(t), before, 'a batch of refusals and reads changed stored state');
        }
      }
      assert.equal(sent, 1000);
      assert.equal(t.cloudly.router.registeredVirtualStreams.getArray().length, 0);
      assert.equal(adminSocket.closeCode, null);
      assert.equal(relaySocket.closeCode, null);
      collectGarbage();
      const growthMb = (process.memoryUsage().heapUsed - heapBefore) / 1024 / 1024;
      assert.ok(growthMb < 32, `heap grew by ${growthMb.toFixed(1)} MB over 1,000 hostile requests`);
      assert.equal((await fetch(`${t.baseUrl}/livez`)).status, 200);
    } finally {
      adminSocket.close();
      relaySocket.close();
    }
  });
});
