import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { WebSocket } from 'ws';
import { startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { IWireAnswer } from './helpers/rawwire.js';
import {
  unsolicitedResponseLimit,
  unsolicitedResponseReason,
  unsolicitedResponsesCloseCode,
  unsolicitedResponsesCloseReason,
} from '../ts/core/envelopepeer.js';

/**
 * Every frame on the admin socket is answered or its socket closed: envelopes whose correlation
 * is mangled (null, an id too long to read, an answer to a call never made) and a socket that
 * keeps sending answers nobody asked for. A raw ws socket, as an attacker would hold it.
 */

/** A raw admin socket that keeps every text frame it gets, in order, and its close. */
class FrameLog {
  public readonly frames: IWireAnswer[] = [];
  public close: { code: number; reason: string } | null = null;

  private constructor(public readonly socket: WebSocket) {
    socket.on('message', (dataArg, isBinaryArg) => {
      if (!isBinaryArg) {
        this.frames.push(JSON.parse(dataArg.toString()) as IWireAnswer);
      }
    });
    socket.on('close', (codeArg, reasonArg) => {
      this.close = { code: codeArg, reason: reasonArg.toString() };
    });
  }

  public static open(baseUrlArg: string, jwtArg: string): Promise<FrameLog> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(`${baseUrlArg.replace(/^http/, 'ws')}/typedsocket`, { headers: { authorization: `Bearer ${jwtArg}` } });
      socket.once('open', () => resolve(new FrameLog(socket)));
      socket.once('error', reject);
    });
  }

  public answersWithId(idArg: string): IWireAnswer[] {
    return this.frames.filter((frameArg) => frameArg.correlation?.id === idArg);
  }
}

const metricValue = async (baseUrlArg: string, patternArg: RegExp): Promise<number> => {
  const text = await (await fetch(`${baseUrlArg}/metrics`)).text();
  const match = patternArg.exec(text);
  assert.ok(match, `/metrics has ${patternArg}`);
  return Number(match[1]);
};

const longId = 'x'.repeat(200);

describe('every request frame on the admin socket is answered or its socket closed', () => {
  let t: ITestCloudly;
  before(async () => {
    t = await startTestCloudly({ logLevel: 'warn' });
  });
  after(async () => {
    await t.stop();
  });

  test('each mangled correlation alone is answered: null and an unreadable id with id "", an answer to a call never made with unsolicited-response', async () => {
    const log = await FrameLog.open(t.baseUrl, t.identity.jwt);
    try {
      const request = JSON.stringify({ identity: t.identity });
      const shapes: Array<{ name: string; text: string; answerId: string; reasons: string[] | null }> = [
        { name: 'correlation null', text: `{"method":"getClusters","request":${request},"correlation":null}`, answerId: '', reasons: null },
        { name: 'id of 200 characters', text: `{"method":"getClusters","request":${request},"correlation":{"id":"${longId}","phase":"request"}}`, answerId: '', reasons: null },
        { name: 'response to a call never made', text: '{"method":"changeEvent","response":{},"correlation":{"id":"never-made","phase":"response"}}', answerId: 'never-made', reasons: [unsolicitedResponseReason] },
        { name: 'response with an id of 200 characters', text: `{"method":"changeEvent","response":{},"correlation":{"id":"${longId}","phase":"response"}}`, answerId: '', reasons: [unsolicitedResponseReason] },
      ];
      for (const shape of shapes) {
        const before = log.frames.length;
        log.socket.send(shape.text);
        await waitFor(() => log.frames.length > before || log.close !== null, `an answer to ${shape.name}`, 30_000);
        assert.equal(log.close, null, `${shape.name}: answered, the socket stays`);
        const answer = log.frames[before];
        assert.equal(answer.correlation?.id, shape.answerId, shape.name);
        assert.equal(answer.correlation?.phase, 'response', shape.name);
        assert.equal(answer.error?.data.code, 'invalid-request', shape.name);
        if (shape.reasons) {
          assert.deepEqual(answer.error?.data.reasons, shape.reasons, shape.name);
        }
      }
      // The socket still serves calls after them.
      log.socket.send(`{"method":"getClusters","request":${request},"correlation":{"id":"after","phase":"request"}}`);
      await waitFor(() => log.answersWithId('after').length === 1, 'a call after the mangled frames is answered', 30_000);
      assert.equal(log.answersWithId('after')[0].error, undefined);
    } finally {
      log.socket.close();
    }
  });

  test('under load: 400 mangled frames among 400 calls on one socket, each one answered', async () => {
    const log = await FrameLog.open(t.baseUrl, t.identity.jwt);
    try {
      const request = JSON.stringify({ identity: t.identity });
      for (let index = 0; index < 400; index++) {
        log.socket.send(`{"method":"getClusters","request":${request},"correlation":{"id":"call-${index}","phase":"request"}}`);
        log.socket.send(index % 2 === 0
          ? `{"method":"getClusters","request":${request},"correlation":null}`
          : `{"method":"getClusters","request":${request},"correlation":{"id":"${longId}","phase":"request"}}`);
      }
      await waitFor(() => log.frames.length >= 800 || log.close !== null, 'every frame answered', 60_000);
      assert.equal(log.close, null);
      assert.equal(log.frames.length, 800);
      assert.equal(log.answersWithId('').length, 400, 'every mangled frame answered with id ""');
      for (const answer of log.answersWithId('')) {
        assert.equal(answer.error?.data.code, 'invalid-request');
      }
      for (let index = 0; index < 400; index++) {
        assert.equal(log.answersWithId(`call-${index}`).length, 1, `call-${index} answered once`);
      }
    } finally {
      log.socket.close();
    }
  });

  test('3,000 unsolicited responses: the first ones answered, then the socket closed with its code; counted in /metrics; other sockets go on', async () => {
    const countedBefore = await metricValue(t.baseUrl, /^cloudly_socket_unsolicited_responses_total (\d+)/m);
    const log = await FrameLog.open(t.baseUrl, t.identity.jwt);
    const bystander = await FrameLog.open(t.baseUrl, t.identity.jwt);
    try {
      for (let index = 0; index < 3000; index++) {
        log.socket.send(`{"method":"changeEvent","response":{},"correlation":{"id":"u-${index}","phase":"response"}}`);
      }
      await waitFor(() => log.close !== null, 'the socket sending unsolicited responses is closed', 60_000);
      assert.equal(log.close!.code, unsolicitedResponsesCloseCode);
      assert.equal(log.close!.reason, unsolicitedResponsesCloseReason);
      // Up to the limit each one was answered, in order; the next closed the socket.
      assert.equal(log.frames.length, unsolicitedResponseLimit.responses);
      log.frames.forEach((frameArg, indexArg) => {
        assert.equal(frameArg.correlation?.id, `u-${indexArg}`);
        assert.deepEqual(frameArg.error?.data.reasons, [unsolicitedResponseReason]);
      });
      const counted = await metricValue(t.baseUrl, /^cloudly_socket_unsolicited_responses_total (\d+)/m);
      assert.equal(counted - countedBefore, unsolicitedResponseLimit.responses + 1);
      assert.equal(await metricValue(t.baseUrl, /^cloudly_sockets_closed_total\{reason="unsolicited-responses"\} (\d+)/m), 1);
      bystander.socket.send(`{"method":"getClusters","request":${JSON.stringify({ identity: t.identity })},"correlation":{"id":"b-1","phase":"request"}}`);
      await waitFor(() => bystander.answersWithId('b-1').length === 1, 'another socket is still served', 30_000);
      assert.equal(bystander.close, null);
    } finally {
      log.socket.close();
      bystander.socket.close();
    }
  });
});
