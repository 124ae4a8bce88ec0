import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger } from '../ts/core/logger.js';

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
