/**
 * Boundary benchmark: what reading a request costs now that every text passes the boundary
 * parser, next to the path it replaced, in the same run.
 *
 *   node --import tsx bench/boundary.bench.ts
 *
 * Per request size it times, on this thread:
 * - before: `JSON.parse` + typedrequest's `VirtualStream.decodePayloadFromNetwork` over the request
 *   envelope + `encodePayloadForNetwork` over a same-sized answer (what `routeAndAddResponse` did);
 * - after: `readFrame` (parse, iterative inspection, fresh envelope). The answer is no longer
 *   walked: the handler is called directly.
 * Then, end to end, admin `getClusters` calls per second over a real admin socket (sequential and
 * 100 in flight), the figure the aim is stated in.
 */
import { performance } from 'node:perf_hooks';
import { TypedRouter } from '@api.global/typedrequest';
import { VirtualStream } from '@api.global/typedrequest/dist_ts/classes.virtualstream.js';
import { readFrame } from '../ts/core/envelopepeer.js';
import { ratePerSecond, startBenchCloudly } from './helpers/benchcloudly.js';
import type { IReq_Any_Cloudly_GetClusters } from '../ts/interfaces/requests/admin.js';
import { sized } from './helpers/smoke.js';

const identity = { name: 'admin', userId: 'admin-0123456789abcdef01234567', type: 'user', role: 'admin', expiresAt: 1_800_000_000_000, jwt: 'x'.repeat(700) };

const requestOf = (itemsArg: number) => ({
  identity,
  clusterId: 'cluster-0123456789',
  items: Array.from({ length: itemsArg }, (_, index) => ({ id: `item-${index}`, port: 1000 + index, protocol: 'tcp', tags: ['a', 'b'] })),
});

const envelopeText = (requestArg: unknown) => JSON.stringify({ method: 'benchMethod', request: requestArg, response: null, correlation: { id: 'c-1', phase: 'request' } });

const timePerCall = (fnArg: () => void, budgetMsArg: number): number => {
  for (let index = 0; index < sized(50, 2); index++) {
    fnArg();
  }
  let calls = 0;
  const started = performance.now();
  while (performance.now() - started < sized(budgetMsArg, 20)) {
    fnArg();
    calls++;
  }
  return (performance.now() - started) / calls;
};

const micro = (): void => {
  const router = new TypedRouter();
  process.stdout.write('request reading, per request (same run):\n');
  process.stdout.write('| request | bytes | before (parse + decode + encode) | after (readFrame) | after/before |\n| --- | --- | --- | --- | --- |\n');
  for (const items of [0, 10, 1_000, 5_000]) {
    const request = requestOf(items);
    const text = envelopeText(request);
    const answer = { method: 'benchMethod', request, response: { items: request.items }, correlation: { id: 'c-1', phase: 'response' } };
    const before = timePerCall(() => {
      const decoded = VirtualStream.decodePayloadFromNetwork(JSON.parse(text), { typedrouter: router });
      VirtualStream.encodePayloadForNetwork({ ...answer, request: decoded.request }, { typedrouter: router });
    }, 600);
    const after = timePerCall(() => {
      const frame = readFrame(text);
      if (frame.kind !== 'request') {
        throw new Error('bench request refused');
      }
    }, 600);
    process.stdout.write(`| ${items} items | ${text.length} | ${(before * 1000).toFixed(1)} µs | ${(after * 1000).toFixed(1)} µs | ${(after / before).toFixed(2)}× |\n`);
  }
};

const endToEnd = async (): Promise<void> => {
  const bench = await startBenchCloudly('boundary');
  try {
    const getClusters = () => bench.admin.call<IReq_Any_Cloudly_GetClusters>('getClusters', {});
    await ratePerSecond(1, getClusters);
    process.stdout.write(`\nadmin getClusters over the admin socket: ${(await ratePerSecond(1, getClusters)).toFixed(0)}/s sequential, ${(await ratePerSecond(100, getClusters)).toFixed(0)}/s with 100 in flight\n`);
  } finally {
    await bench.stop();
  }
};

micro();
await endToEnd();
