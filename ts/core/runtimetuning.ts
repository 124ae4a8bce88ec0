import * as v8 from 'node:v8';

/**
 * V8 tuning for the server process, applied by the CLI (`npm start`, `npm run start:prod`,
 * the container) before Cloudly starts.
 *
 * Heap growing: streaming a closure through the server allocates about two bytes of
 * short-lived ArrayBuffer memory per byte received (node's socket reads and the buffers ws
 * assembles frames in). V8 counts external memory allocated since the last full collection
 * against the old generation's limit, and for a small, quiet heap (Cloudly's is ~30 MB) it sets
 * that limit only a little above the live size, so a stream starts a full collection every few
 * dozen frames and the server spends about twice the CPU per streamed byte. V8 chooses that
 * factor itself (from how fast it collects objects, which says nothing about external memory);
 * `--heap-growing-percent=100` fixes it at 2.0 after every full collection. A young process gets
 * 2.0 where V8 would have given up to 4.0, so it collects somewhat earlier than before. The blob
 * store also frees each received frame's buffer once it has copied the bytes out
 * (memoryrelease.ts); the socket reads remain, so the factor still matters. Figures:
 * bench/results/closure.md.
 */
export const serverHeapGrowingPercent = 100;

/**
 * V8 settings that only take effect on node's command line (they size the heap when it is
 * created): `npm start`, `npm run start:prod` and the Dockerfile pass them, the tests and the
 * closure benchmark start their servers with them. A test keeps the three in step.
 *
 * `--max-semi-space-size=4` (MB; node's default is 16): the young generation holds the
 * collector's newest objects in two semi-spaces, and a backup keeps them full of frame wrappers.
 * Smaller semi-spaces hold less resident memory at idle and lower the peak during closures at a
 * small cost in throughput (figures: bench/results/closure.md).
 */
export const serverNodeFlags: readonly string[] = ['--max-semi-space-size=4'];

/** Applies the server's V8 settings to this process. Call once, early. */
export const tuneServerRuntime = (): void => {
  v8.setFlagsFromString(`--heap-growing-percent=${serverHeapGrowingPercent}`);
};
