/**
 * Builds the web dashboard bundle ahead of time: web/ → dist/dashboard/ (index.html, app.js,
 * app.css, favicon.svg). Cloudly also builds it on the first /dashboard request when it is missing
 * or older than web/ (ts/core/dashboard.ts), so this is only needed where web/ is not shipped.
 *
 *   node --import tsx scripts/build-dashboard.ts
 */
import { gzipSync } from 'node:zlib';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { buildDashboardBundle } from '../ts/core/dashboard.js';

const result = await buildDashboardBundle();
const lines = [];
for (const name of Object.keys(result.bytes)) {
  const gzipped = gzipSync(await fsp.readFile(path.join(result.outDir, name)), { level: 9 }).byteLength;
  lines.push(`${name.padEnd(12)} ${String(result.bytes[name]).padStart(8)} bytes, ${String(gzipped).padStart(7)} gzipped`);
}
console.log(`dashboard bundle in ${path.relative(process.cwd(), result.outDir) || '.'} (${Math.round(result.durationMs)} ms)\n${lines.join('\n')}`);
