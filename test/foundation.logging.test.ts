import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger, formatLogLine, judgeLogFormat } from '../ts/core/logger.js';

test('the logger removes every secret field at any depth it logs', () => {
  const lines: string[] = [];
  const destination = new Writable({ write(chunkArg, _encodingArg, callbackArg) { lines.push(chunkArg.toString()); callbackArg(); } });
  const logger = createLogger('info', destination);
  logger.info({
    password: 'p-1',
    request: { identity: { jwt: 'jwt-2' }, restoreGrant: 'grant-3', relayToken: 'token-4' },
    ingress: { credential: { bearer: 'bearer-5' } },
    headers: { authorization: 'Bearer header-6' },
    kept: 'visible-7',
  }, 'a request');
  const line = lines.join('');
  for (const secret of ['p-1', 'jwt-2', 'grant-3', 'token-4', 'bearer-5', 'header-6']) {
    assert.equal(line.includes(secret), false, `${secret} must not be logged`);
  }
  assert.ok(line.includes('visible-7'));
  assert.equal((line.match(/\[redacted\]/g) ?? []).length, 6);
});

test('redaction copies what it changes: the logged objects stay as they were, a frozen one and an error too', () => {
  const lines: string[] = [];
  const destination = new Writable({ write(chunkArg, _encodingArg, callbackArg) { lines.push(chunkArg.toString()); callbackArg(); } });
  const logger = createLogger('info', destination);
  const request = Object.freeze({ identity: Object.freeze({ jwt: 'jwt-1', user: 'u-1' }) });
  const error = Object.assign(new Error('refused'), { code: 'E_REFUSED', token: 'token-2' });
  const list = [{ secret: 'secret-3' }, { name: 'n-4' }];
  logger.info({ request, list, err: error }, 'a call');
  const line = JSON.parse(lines.join('')) as Record<string, any>;
  assert.deepEqual(line.request, { identity: { jwt: '[redacted]', user: 'u-1' } });
  assert.deepEqual(line.list, [{ secret: '[redacted]' }, { name: 'n-4' }]);
  assert.equal(line.err.message, 'refused');
  assert.equal(line.err.code, 'E_REFUSED');
  assert.equal(line.err.token, '[redacted]');
  assert.match(line.err.stack, /refused/);
  assert.equal(request.identity.jwt, 'jwt-1');
  assert.equal(error.token, 'token-2');
  assert.equal(list[0].secret, 'secret-3');
  const child = logger.child({ relayToken: 'token-5', clusterId: 'c-1' });
  child.info('bound');
  assert.equal(lines.join('').includes('token-5'), false);
  assert.ok(lines.join('').includes('"clusterId":"c-1"'));
});

test('log format: readable lines on a terminal by default, JSON otherwise, either when asked', () => {
  assert.equal(judgeLogFormat('auto', true), 'pretty');
  assert.equal(judgeLogFormat('auto', false), 'json');
  assert.equal(judgeLogFormat('json', true), 'json');
  assert.equal(judgeLogFormat('pretty', false), 'pretty');
});

test('a readable line: time, level and message, then the other members; secrets are already gone', () => {
  const lines: string[] = [];
  const destination = new Writable({ write(chunkArg, _encodingArg, callbackArg) { lines.push(chunkArg.toString()); callbackArg(); } });
  createLogger('info', destination).warn({ clusterId: 'c-1', password: 'p-1', reason: 'two words' }, 'relay refused');
  const formatted = formatLogLine(lines.join('').trim());
  assert.match(formatted, /^\d{2}:\d{2}:\d{2}\.\d{3} WARN  relay refused clusterId=c-1 password=\[redacted\] reason="two words"\n$/);
  assert.equal(formatLogLine('not json'), 'not json\n', 'anything else passes through');
  const withError = formatLogLine(JSON.stringify({ level: 50, time: 0, msg: 'failed', err: { type: 'Error', message: 'boom', stack: 'Error: boom\n at x' } }));
  assert.equal(withError, '00:00:00.000 ERROR failed err="Error: boom"\n');
});
