import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { decideEstablishedLimits, decideRefusalRetryAfterSeconds, fileDescriptorReserve, refusalResponse } from '../ts/core/connectionlimits.js';
import { decideRelayAdmission } from '../ts/core/transport.js';
import { judgeKernelLimits } from '../ts/core/kernellimits.js';
import { defaultRelayReconnectPolicy, delayAfterFailureMs, policyAfterFailure, reconnectDelayMs } from '../ts/client/relay.js';
import { ConfigError, readConfig } from '../ts/config.js';

/** The fleet's pure decisions (docs/multi-instance.md, "Fleet scale"): no server, no socket. */

describe('fleet decisions', () => {
  test('a refusal at accept is told to come back within as many seconds as the limit needs for the refused, 1 to 30', () => {
    // Few refused: one second, whatever the draw.
    assert.equal(decideRefusalRetryAfterSeconds(10, 256, () => 0), 1);
    assert.equal(decideRefusalRetryAfterSeconds(10, 256, () => 0.999), 1);
    // 2,000 refused in a second at 256 a second: spread over 8 seconds.
    assert.equal(decideRefusalRetryAfterSeconds(2000, 256, () => 0), 1);
    assert.equal(decideRefusalRetryAfterSeconds(2000, 256, () => 0.999), 8);
    // Never beyond 30 s.
    assert.equal(decideRefusalRetryAfterSeconds(1_000_000, 1, () => 0.999), 30);
    assert.match(refusalResponse(3), /^HTTP\/1\.1 503 Service Unavailable\r\nRetry-After: 3\r\n.*\r\n\r\n$/s);
  });

  test('open connections are bounded below the open-files limit, with a reserve; an address may hold half', () => {
    const unset = { connectionsTotal: null, connectionsPerAddress: null };
    assert.deepEqual(decideEstablishedLimits(1024, unset), { total: 1024 - fileDescriptorReserve, perAddress: 384, reserve: fileDescriptorReserve, budgetExceeded: false });
    // A small limit keeps half for everything else.
    assert.deepEqual(decideEstablishedLimits(300, unset), { total: 150, perAddress: 75, reserve: 150, budgetExceeded: false });
    // Configured values win; a total that eats into the reserve is said so.
    assert.deepEqual(decideEstablishedLimits(1024, { connectionsTotal: 1000, connectionsPerAddress: 10 }), { total: 1000, perAddress: 10, reserve: fileDescriptorReserve, budgetExceeded: true });
    // Never more per address than in total.
    assert.equal(decideEstablishedLimits(1024, { connectionsTotal: 100, connectionsPerAddress: 500 }).perAddress, 100);
    // Unreadable (or unlimited): a fixed bound.
    assert.equal(decideEstablishedLimits(null, unset).total, 65_536);
    assert.equal(readConfig({}).connectionsTotal, null);
    assert.equal(readConfig({ CLOUDLY_CONNECTIONS_PER_ADDRESS: '64' }).connectionsPerAddress, 64);
    assert.throws(() => readConfig({ CLOUDLY_CONNECTIONS_TOTAL: '0' }), ConfigError);
    assert.throws(() => readConfig({ CLOUDLY_WATCH_BUFFER_BYTES: '100' }), ConfigError);
  });

  test('a relay is admitted below the instance capacity, refused with the advice at it, always without a limit', () => {
    assert.deepEqual(decideRelayAdmission(4, 5, 5000), { admit: true });
    assert.deepEqual(decideRelayAdmission(5, 5, 5000), { admit: false, retryAfterMs: 5000 });
    assert.deepEqual(decideRelayAdmission(1_000_000, 0, 5000), { admit: true });
  });

  test('kernel limits below the configuration are named with advice; enough is silent', () => {
    const config = { listenBacklog: 4096, maxRelaysPerInstance: 5000, pendingConnectionsTotal: 4096 };
    const warnings = judgeKernelLimits(config, { somaxconn: 128, openFiles: 1024 });
    assert.deepEqual(warnings.map((warning) => [warning.limit, warning.configured, warning.kernel]), [
      ['net.core.somaxconn', 4096, 128],
      ['open files (ulimit -n, LimitNOFILE)', 5000 + 4096 + 256, 1024],
    ]);
    assert.deepEqual(judgeKernelLimits(config, { somaxconn: 4096, openFiles: 1_048_576 }), []);
    // Unknown limits (not Linux) and no relay capacity: nothing to judge.
    assert.deepEqual(judgeKernelLimits({ ...config, maxRelaysPerInstance: 0 }, { somaxconn: null, openFiles: 10 }), []);
  });

  test('after a refused connection the relay window stops growing at refusedCapMs; other failures grow to capMs', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const top = () => 0.999999;
    assert.equal(reconnectDelayMs(10, policyAfterFailure(defaultRelayReconnectPolicy, refused), top), 3999);
    assert.equal(reconnectDelayMs(10, policyAfterFailure(defaultRelayReconnectPolicy, reset), top), 29_999);
    assert.equal(reconnectDelayMs(10, policyAfterFailure(defaultRelayReconnectPolicy, null), top), 29_999);
    // A cap below refusedCapMs stays the cap.
    assert.equal(reconnectDelayMs(10, policyAfterFailure({ ...defaultRelayReconnectPolicy, capMs: 1000 }, refused), top), 999);
  });

  test('the wait after a failed connect (the relay client\'s reconnects, the simulator\'s first connect): at most refusedCapMs while refused, the advice when advised', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const top = () => 0.999999;
    // The simulator's defaults (--reconnect-base-ms 500, --reconnect-cap-ms 30000).
    const policy = { ...defaultRelayReconnectPolicy, baseMs: 500, capMs: 30_000 };
    assert.equal(delayAfterFailureMs(10, policy, refused, null, top), 3999, 'refused: the window stops at 4 s, not the 30 s cap');
    assert.equal(delayAfterFailureMs(10, policy, reset, null, top), 29_999, 'other failures grow to the cap');
    assert.equal(delayAfterFailureMs(10, policy, reset, 2000, top), 2499, 'an advised wait plus at most one base window');
  });

  test('the fleet settings are read from the environment with their defaults, and nonsense is refused', () => {
    const defaults = readConfig({});
    assert.equal(defaults.listenBacklog, 4096);
    assert.equal(defaults.socketUpgradesPerAddress, 16);
    assert.equal(defaults.maxRelaysPerInstance, 0);
    assert.equal(defaults.relayCapacityRetryMs, 5000);
    assert.deepEqual(defaults.webSocketCompression, []);
    assert.equal(defaults.relayWorkConcurrency, 8);
    const set = readConfig({
      CLOUDLY_LISTEN_BACKLOG: '8192',
      CLOUDLY_SOCKET_UPGRADES_PER_ADDRESS: '64',
      CLOUDLY_MAX_RELAYS_PER_INSTANCE: '4000',
      CLOUDLY_RELAY_CAPACITY_RETRY_MS: '2000',
      CLOUDLY_WEBSOCKET_COMPRESSION: 'admin, relay,admin',
    });
    assert.deepEqual(
      [set.listenBacklog, set.socketUpgradesPerAddress, set.maxRelaysPerInstance, set.relayCapacityRetryMs, set.webSocketCompression],
      [8192, 64, 4000, 2000, ['admin', 'relay']],
    );
    assert.throws(() => readConfig({ CLOUDLY_WEBSOCKET_COMPRESSION: 'relay,dashboard' }), (error: unknown) =>
      error instanceof ConfigError && error.variable === 'CLOUDLY_WEBSOCKET_COMPRESSION' && /unknown: dashboard/.test(error.message));
    assert.throws(() => readConfig({ CLOUDLY_LISTEN_BACKLOG: '0' }), ConfigError);
    assert.equal(readConfig({ CLOUDLY_RELAY_WORK_CONCURRENCY: '0' }).relayWorkConcurrency, 0);
    assert.throws(() => readConfig({ CLOUDLY_RELAY_WORK_CONCURRENCY: '-1' }), ConfigError);
  });
});
