import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, readConfig } from '../ts/config.js';

/** The settings of several instances over one database (docs/multi-instance.md): defaults, values, refusals naming the variable. */

const refusedVariable = (envArg: Record<string, string>): string => {
  try {
    readConfig(envArg);
  } catch (error) {
    assert.ok(error instanceof ConfigError);
    return error.variable;
  }
  throw new Error('expected a refusal');
};

test('defaults: the internal URL is the listening URL, leases live 15 s renewed every 5 s, watchers read the shared log every 250 ms', () => {
  const config = readConfig({});
  assert.equal(config.internalUrl, null);
  assert.equal(config.relayLeaseTtlMs, 15_000);
  assert.equal(config.relayLeaseHeartbeatMs, 5_000);
  assert.equal(config.sharedPollMs, 250);
});

test('values are read, a trailing slash of the internal URL dropped', () => {
  const config = readConfig({
    CLOUDLY_INTERNAL_URL: 'http://10.0.0.7:3000/',
    CLOUDLY_RELAY_LEASE_TTL_MS: '3000',
    CLOUDLY_RELAY_LEASE_HEARTBEAT_MS: '1000',
    CLOUDLY_SHARED_POLL_MS: '100',
  });
  assert.equal(config.internalUrl, 'http://10.0.0.7:3000');
  assert.equal(config.relayLeaseTtlMs, 3000);
  assert.equal(config.relayLeaseHeartbeatMs, 1000);
  assert.equal(config.sharedPollMs, 100);
});

test('bad values are refused naming the variable: an internal URL with a path or another scheme, a heartbeat longer than half the lease', () => {
  assert.equal(refusedVariable({ CLOUDLY_INTERNAL_URL: 'http://10.0.0.7:3000/cloudly' }), 'CLOUDLY_INTERNAL_URL');
  assert.equal(refusedVariable({ CLOUDLY_INTERNAL_URL: 'ftp://10.0.0.7' }), 'CLOUDLY_INTERNAL_URL');
  assert.equal(refusedVariable({ CLOUDLY_RELAY_LEASE_TTL_MS: '3000', CLOUDLY_RELAY_LEASE_HEARTBEAT_MS: '2000' }), 'CLOUDLY_RELAY_LEASE_HEARTBEAT_MS');
  assert.equal(refusedVariable({ CLOUDLY_RELAY_LEASE_TTL_MS: '100' }), 'CLOUDLY_RELAY_LEASE_TTL_MS');
  assert.equal(refusedVariable({ CLOUDLY_SHARED_POLL_MS: '5' }), 'CLOUDLY_SHARED_POLL_MS');
});
