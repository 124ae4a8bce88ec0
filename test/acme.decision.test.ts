import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { acmeRetryDelayMs, decideAcmeLease, decideAcmeOrder, maximumRetryMs, renewalDueAt } from '../ts/manager.acme/acme.manager.js';

/** When Cloudly orders its own certificate by ACME, and who may (docs/tls.md, "ACME"). */

describe('ACME order decisions', () => {
  const issued = { domains: ['cloudly.example.com'], notBeforeMs: 0, notAfterMs: 90_000 };

  test('renewal is due at two thirds of the lifetime', () => {
    assert.equal(renewalDueAt(0, 90_000), 60_000);
    assert.deepEqual(decideAcmeOrder(issued, null, ['cloudly.example.com'], 59_999), { order: false, why: 'current' });
    assert.deepEqual(decideAcmeOrder(issued, null, ['cloudly.example.com'], 60_000), { order: true, why: 'renewal-due' });
  });

  test('no certificate, or other names, is ordered at once; a backoff holds every order until it ends', () => {
    assert.deepEqual(decideAcmeOrder(null, null, ['cloudly.example.com'], 0), { order: true, why: 'no-certificate' });
    assert.deepEqual(decideAcmeOrder(issued, null, ['cloudly.example.com', 'api.example.com'], 10), { order: true, why: 'domains-changed' });
    // The same names in another order are the same certificate.
    assert.deepEqual(decideAcmeOrder({ ...issued, domains: ['b.example', 'a.example'] }, null, ['a.example', 'b.example'], 10), { order: false, why: 'current' });
    assert.deepEqual(decideAcmeOrder(null, { nextAttemptAt: 500 }, ['cloudly.example.com'], 499), { order: false, why: 'backoff' });
    assert.deepEqual(decideAcmeOrder(null, { nextAttemptAt: 500 }, ['cloudly.example.com'], 500), { order: true, why: 'no-certificate' });
  });

  test('the pause after failures doubles from the base and stops at six hours', () => {
    assert.deepEqual([1, 2, 3, 4].map((failures) => acmeRetryDelayMs(failures, 60_000)), [60_000, 120_000, 240_000, 480_000]);
    assert.equal(acmeRetryDelayMs(40, 60_000), maximumRetryMs);
  });

  test('the order lease: taken when free or expired, renewed by its holder, left alone while another holds it', () => {
    assert.deepEqual(decideAcmeLease(null, 'a', 100, 1000), { kind: 'create', doc: { id: 'cloudly', holder: 'a', expiresAt: 1100 } });
    const held = { id: 'cloudly', generation: 3, holder: 'b', expiresAt: 1000 };
    assert.deepEqual(decideAcmeLease(held, 'a', 999, 1000), { kind: 'keep' });
    assert.deepEqual(decideAcmeLease(held, 'a', 1000, 1000), { kind: 'write', change: { set: { holder: 'a', expiresAt: 2000 } } });
    assert.deepEqual(decideAcmeLease(held, 'b', 500, 1000), { kind: 'write', change: { set: { holder: 'b', expiresAt: 1500 } } });
  });
});
