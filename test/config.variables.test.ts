import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  ConfigError,
  editDistance,
  formatDuration,
  otherProgramVariables,
  parseDurationMs,
  readConfig,
  serverVariables,
  unknownCloudlyVariables,
} from '../ts/config.js';

/**
 * ts/config.ts: every bad variable named at once, durations with units, and the names it knows
 * (an unknown CLOUDLY_* variable is named with the closest known one).
 */

const projectRoot = path.resolve(import.meta.dirname, '..');

const configErrorOf = (envArg: Record<string, string>): ConfigError => {
  try {
    readConfig(envArg);
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error;
  }
  throw new Error('expected a ConfigError');
};

test('every bad variable is named at once, in the order read, each with what it takes', () => {
  const error = configErrorOf({ CLOUDLY_PORT: 'abc', CLOUDLY_LOG_LEVEL: 'verbose', CLOUDLY_SHUTDOWN_GRACE_MS: 'forever', CLOUDLY_RECONCILE_CONCURRENCY: '0' });
  assert.deepEqual(error.problems.map((problemArg) => problemArg.variable), [
    'CLOUDLY_PORT', 'CLOUDLY_LOG_LEVEL', 'CLOUDLY_SHUTDOWN_GRACE_MS', 'CLOUDLY_RECONCILE_CONCURRENCY',
  ]);
  assert.equal(error.variable, 'CLOUDLY_PORT');
  assert.equal(error.problems[0].message, 'must be an integer from 0 to 65535, got "abc"');
  assert.match(error.problems[1].message, /^must be one of fatal, error, warn, info, debug, trace, silent, got "verbose"$/);
  assert.match(error.message, /^CLOUDLY_PORT: .*; CLOUDLY_LOG_LEVEL: .*; CLOUDLY_SHUTDOWN_GRACE_MS: .*; CLOUDLY_RECONCILE_CONCURRENCY: /);
  // The multi-instance settings too, each of them.
  assert.deepEqual(configErrorOf({ CLOUDLY_INTERNAL_URL: 'ftp://x', CLOUDLY_SHARED_POLL_MS: '1', CLOUDLY_RECONCILE_CONCURRENCY: '999' }).problems.map((problemArg) => problemArg.variable), [
    'CLOUDLY_INTERNAL_URL', 'CLOUDLY_SHARED_POLL_MS', 'CLOUDLY_RECONCILE_CONCURRENCY',
  ]);
  // One bad variable is still one problem.
  assert.deepEqual(configErrorOf({ CLOUDLY_HOST: 'a host' }).problems, [{ variable: 'CLOUDLY_HOST', message: 'must be a host name or IP address, got "a host"' }]);
  assert.doesNotThrow(() => readConfig({}));
});

test('durations take milliseconds or a number with a unit; what the readme writes (12 h, 60 s) is accepted', () => {
  assert.equal(readConfig({}).identityTtlMs, 12 * 3_600_000);
  assert.equal(readConfig({ CLOUDLY_IDENTITY_TTL_MS: '12h' }).identityTtlMs, 12 * 3_600_000);
  assert.equal(readConfig({ CLOUDLY_IDENTITY_TTL_MS: '43200000' }).identityTtlMs, 43_200_000);
  assert.equal(readConfig({ CLOUDLY_RECONCILE_RESYNC_MS: '60s' }).reconcileResyncMs, 60_000);
  assert.equal(readConfig({ CLOUDLY_COMPACT_INTERVAL_MS: '1d' }).compactIntervalMs, 86_400_000);
  assert.equal(readConfig({ CLOUDLY_SHUTDOWN_GRACE_MS: '1.5s' }).shutdownGraceMs, 1500);
  assert.equal(readConfig({ CLOUDLY_HEADERS_TIMEOUT_MS: '500ms' }).headersTimeoutMs, 500);
  assert.equal(readConfig({ CLOUDLY_RELAY_LEASE_TTL_MS: '20s', CLOUDLY_RELAY_LEASE_HEARTBEAT_MS: '5s' }).relayLeaseHeartbeatMs, 5000);
  for (const refused of ['12 h', '12x', '1.5', '-1s', 'h', '', '0.0001s']) {
    if (refused === '') {
      // Empty is unset: the default.
      assert.equal(readConfig({ CLOUDLY_SHUTDOWN_GRACE_MS: refused }).shutdownGraceMs, 10_000);
      continue;
    }
    const error = configErrorOf({ CLOUDLY_SHUTDOWN_GRACE_MS: refused });
    assert.equal(error.variable, 'CLOUDLY_SHUTDOWN_GRACE_MS', refused);
    assert.equal(error.problems[0].message, `must be a duration from 0ms to 10m: milliseconds, or a number with a unit (500ms, 30s, 5m, 12h, 1d), got "${refused}"`);
  }
  // Out of bounds, however it is written.
  assert.equal(configErrorOf({ CLOUDLY_SHUTDOWN_GRACE_MS: '11m' }).variable, 'CLOUDLY_SHUTDOWN_GRACE_MS');
  assert.equal(configErrorOf({ CLOUDLY_SHUTDOWN_GRACE_MS: '660000' }).variable, 'CLOUDLY_SHUTDOWN_GRACE_MS');
  assert.equal(configErrorOf({ CLOUDLY_IDENTITY_TTL_MS: '31d' }).variable, 'CLOUDLY_IDENTITY_TTL_MS');
  // Counts and sizes stay plain integers.
  assert.equal(configErrorOf({ CLOUDLY_SOCKET_MISSED_PONGS: '2s' }).variable, 'CLOUDLY_SOCKET_MISSED_PONGS');
});

test('parseDurationMs and formatDuration', () => {
  assert.equal(parseDurationMs('0'), 0);
  assert.equal(parseDurationMs('250'), 250);
  assert.equal(parseDurationMs('5m'), 300_000);
  assert.equal(parseDurationMs('1.1s'), 1100);
  assert.equal(parseDurationMs('0.5ms'), null);
  assert.equal(parseDurationMs('1e3'), null);
  assert.equal(parseDurationMs(' 1s'), null);
  assert.equal(formatDuration(3_600_000), '1h');
  assert.equal(formatDuration(90_000), '90s');
  assert.equal(formatDuration(1500), '1500ms');
  assert.equal(formatDuration(7 * 86_400_000), '7d');
  assert.equal(formatDuration(0), '0ms');
});

test('an unknown CLOUDLY_* variable is named with the closest known one; the other programs\' variables are not unknown', () => {
  assert.equal(editDistance('CLOUDLY_LOGLEVEL', 'CLOUDLY_LOG_LEVEL'), 1);
  assert.equal(editDistance('', 'abc'), 3);
  assert.equal(editDistance('kitten', 'sitting'), 3);
  assert.deepEqual(unknownCloudlyVariables({
    CLOUDLY_LOGLEVEL: 'debug',
    CLOUDLY_PROT: '3000',
    CLOUDLY_SHUTDOWN_GRACE: '30s',
    CLOUDLY_LOG_LEVEL: 'info',
    CLOUDLY_URL: 'http://127.0.0.1:3000',
    CLOUDLY_TEST_ANYTHING: '1',
    CLOUDLY_BENCH_SMOKE: '1',
    PATH: '/usr/bin',
  }), [
    { variable: 'CLOUDLY_LOGLEVEL', closest: 'CLOUDLY_LOG_LEVEL' },
    { variable: 'CLOUDLY_PROT', closest: 'CLOUDLY_PORT' },
    { variable: 'CLOUDLY_SHUTDOWN_GRACE', closest: 'CLOUDLY_SHUTDOWN_GRACE_MS' },
  ]);
  // A misspelt setting is not a configuration error: the start goes on, with a warning.
  assert.doesNotThrow(() => readConfig({ CLOUDLY_LOGLEVEL: 'debug' }));
});

/** Every CLOUDLY_* name in the files under `dirArg` (recursively) whose name passes `includeArg`. */
const namesUnder = (dirArg: string, includeArg: (fileArg: string) => boolean): Map<string, string> => {
  const found = new Map<string, string>();
  const walk = (folderArg: string): void => {
    for (const entry of fs.readdirSync(folderArg, { withFileTypes: true })) {
      const full = path.join(folderArg, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules' && !entry.name.startsWith('.')) {
          walk(full);
        }
      } else if (includeArg(full)) {
        for (const match of fs.readFileSync(full, 'utf8').matchAll(/CLOUDLY_[A-Z0-9_]+/g)) {
          if (!match[0].endsWith('_')) {
            found.set(match[0], path.relative(projectRoot, full));
          }
        }
      }
    }
  };
  walk(dirArg);
  return found;
};

test('the server\'s list is exactly the names ts/config.ts reads, and every CLOUDLY_* name the code uses is known', () => {
  const configSource = fs.readFileSync(path.join(projectRoot, 'ts', 'config.ts'), 'utf8');
  const readInConfig = new Set([...configSource.matchAll(/'(CLOUDLY_[A-Z0-9_]+)'/g)].map((matchArg) => matchArg[1])
    .filter((nameArg) => !otherProgramVariables.includes(nameArg) && !nameArg.endsWith('_')));
  assert.deepEqual([...readInConfig].sort(), [...serverVariables].sort());
  const self = path.join('test', 'config.variables.test.ts');
  const isCode = (fileArg: string): boolean => /\.(ts|js|mjs|cjs)$/.test(fileArg) && path.relative(projectRoot, fileArg) !== self;
  const used = new Map<string, string>();
  for (const folder of ['ts', 'bin', 'scripts', 'test', 'bench', 'web']) {
    for (const [name, file] of namesUnder(path.join(projectRoot, folder), isCode)) {
      used.set(name, file);
    }
  }
  const unknown = unknownCloudlyVariables(Object.fromEntries([...used.keys()].map((nameArg) => [nameArg, '1'])));
  assert.deepEqual(unknown.map(({ variable }) => `${variable} (${used.get(variable)})`), [], 'add each to serverVariables (read in ts/config.ts) or otherProgramVariables');
});
