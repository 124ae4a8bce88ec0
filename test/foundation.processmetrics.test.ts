import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { startTestCloudly } from './helpers/cloudly.js';

/**
 * The process's metrics (CPU, memory, event loop delay, garbage collection) are collected once per
 * process, not once per Cloudly: prom-client's collector starts an event-loop-delay timer and a
 * garbage-collection observer on every call and never stops them, so each instance a process had
 * started and stopped kept both running. Every instance's /metrics still carries them.
 */

test('three Cloudlys started and stopped in one process start at most one event-loop-delay monitor; each /metrics has the process metrics', async () => {
  // The very module object prom-client reads the monitor from when it collects.
  const perfHooks = createRequire(import.meta.url)('node:perf_hooks') as typeof import('node:perf_hooks');
  const original = perfHooks.monitorEventLoopDelay;
  let monitors = 0;
  perfHooks.monitorEventLoopDelay = ((...argsArg: Parameters<typeof original>) => {
    monitors++;
    return original(...argsArg);
  }) as typeof original;
  try {
    for (let index = 0; index < 3; index++) {
      const t = await startTestCloudly({ logLevel: 'silent' });
      try {
        const text = await (await fetch(`${t.baseUrl}/metrics`)).text();
        for (const name of ['cloudly_process_cpu_user_seconds_total', 'cloudly_nodejs_eventloop_lag_p99_seconds', 'cloudly_nodejs_heap_size_used_bytes', 'cloudly_calls_total']) {
          assert.match(text, new RegExp(`^${name}`, 'm'), `instance ${index}'s /metrics has ${name}`);
        }
      } finally {
        await t.stop();
      }
    }
    assert.ok(monitors <= 1, `event-loop-delay monitors started for three instances: ${monitors}`);
  } finally {
    perfHooks.monitorEventLoopDelay = original;
  }
});
