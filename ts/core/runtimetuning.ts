import * as v8 from 'node:v8';

/**
 * V8 tuning for the server process, applied by the CLI (`npm start`, `npm run start:prod`,
 * the container) before Cloudly starts.
 *
 * Heap growing: streaming a closure through the server allocates about two bytes of
 * short-lived ArrayBuffer memory per byte received (node's socket reads and the buffers ws
 * assembles frames in). V8 counts external memory allocated since the last full collection
 * against the old generation's limit, and for a small, quiet heap (Cloudly's is ~30 MB) it sets
 * that limit only about 24 MB above the live size. A stream then starts a full collection every
 * few dozen frames: 48–55 mark-compacts per GiB were measured, and the server spent 2.5–3.3 CPU
 * seconds per GiB of backup instead of 1.3–1.4. V8 chooses that factor itself (1.1–4.0, from how
 * fast it collects against how fast the program allocates objects, which says nothing about
 * external memory); `--heap-growing-percent=100` fixes it at 2.0 after every full collection,
 * which brought repeated backups back to 1.34–1.44 s/GiB with the peak resident set in the
 * same range (closure benchmark, readme). A young process gets 2.0 where V8 would have given up
 * to 4.0, so it collects somewhat earlier than before. Since then the blob store frees each
 * received frame's buffer as soon as it has copied the bytes out (memoryrelease.ts), which
 * halves that churn; the socket reads remain, so the factor still matters.
 */
export const serverHeapGrowingPercent = 100;

/**
 * V8 settings that only take effect on node's command line (they size the heap when it is
 * created): `npm start`, `npm run start:prod` and the Dockerfile pass them, the tests and the
 * closure benchmark start their servers with them. A test keeps the three in step.
 *
 * `--max-semi-space-size=4` (MB; node's default is 16): the young generation holds the
 * collector's newest objects in two semi-spaces, and a backup keeps them full of frame wrappers.
 * Smaller semi-spaces cost about 16 MB less resident memory at idle (110–112 against 124–127 MB)
 * and put the peak during 1 GiB closures at 175–192 MB against 183–214 MB, with backups at
 * 628–757 MiB/s against 716–823 (closure benchmark, three runs each; the request benchmarks
 * moved within their noise).
 */
export const serverNodeFlags: readonly string[] = ['--max-semi-space-size=4'];

/** Applies the server's V8 settings to this process. Call once, early. */
export const tuneServerRuntime = (): void => {
  v8.setFlagsFromString(`--heap-growing-percent=${serverHeapGrowingPercent}`);
};
