/**
 * Preloaded into a bench's Cloudly process (NODE_OPTIONS="--expose-gc --import …"): on SIGWINCH
 * (which node otherwise ignores) it runs full garbage collections and writes the process's
 * memory (`process.memoryUsage()`) as JSON to CLOUDLY_BENCH_MEMORY_FILE, so a bench can read the
 * live heap apart from what V8 keeps for its next collection.
 */
import fs from 'node:fs';

const file = process.env.CLOUDLY_BENCH_MEMORY_FILE;
if (file && typeof globalThis.gc === 'function') {
  process.on('SIGWINCH', () => {
    // Twice: what the first collection's finalizers free is collected by the second.
    globalThis.gc();
    globalThis.gc();
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(process.memoryUsage()));
    fs.renameSync(`${file}.tmp`, file);
  });
}
