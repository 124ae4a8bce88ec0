// Runs an executable's TypeScript entry from a checkout (bin/cloudly.js, bin/cloudly-sim.js): from
// an esbuild bundle built on first use into a cache directory inside the checkout (its packages
// load from the checkout's node_modules), built again whenever one of its sources changed, since
// loading the sources through tsx cost about a second and two CPU-seconds per run. With no bundle
// to be had (esbuild missing, a read-only checkout), or when asked to, the sources run through tsx.
import * as fs from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const checkoutRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
const manifestName = 'manifest.json';

/** The bundle's entry when every source it was built from is unchanged (by size and mtime), else null. */
const freshBundle = (cacheDirArg) => {
  try {
    const manifest = JSON.parse(fs.readFileSync(join(cacheDirArg, manifestName), 'utf8'));
    for (const [file, stamp] of Object.entries(manifest.inputs)) {
      const stat = fs.statSync(join(checkoutRoot, file));
      if (stat.mtimeMs !== stamp.mtimeMs || stat.size !== stamp.size) {
        return null;
      }
    }
    return join(cacheDirArg, manifest.entry);
  } catch {
    return null;
  }
};

/**
 * Bundles the entry (packages stay in node_modules; lazy imports stay lazy as chunks) into a
 * directory of its own, then moves it into place: a run at the same time uses the old bundle or
 * the new one, never half of one.
 */
const buildBundle = async (entryArg, cacheDirArg) => {
  const esbuild = await import('esbuild');
  const building = `${cacheDirArg}.${process.pid}.${Date.now()}`;
  const result = await esbuild.build({
    absWorkingDir: checkoutRoot,
    entryPoints: { main: entryArg },
    outdir: building,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    splitting: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    tsconfig: join(checkoutRoot, 'tsconfig.json'),
    metafile: true,
    logLevel: 'silent',
  });
  const inputs = {};
  for (const file of [...Object.keys(result.metafile.inputs), 'tsconfig.json']) {
    const stat = fs.statSync(join(checkoutRoot, file));
    inputs[file] = { mtimeMs: stat.mtimeMs, size: stat.size };
  }
  fs.writeFileSync(join(building, manifestName), JSON.stringify({ entry: 'main.mjs', inputs }));
  const retired = `${cacheDirArg}.old.${process.pid}.${Date.now()}`;
  try {
    fs.renameSync(cacheDirArg, retired);
  } catch {
    // None there yet.
  }
  try {
    fs.renameSync(building, cacheDirArg);
  } catch {
    // Another run put its bundle in place first: that one is as new.
    fs.rmSync(building, { recursive: true, force: true });
  }
  fs.rmSync(retired, { recursive: true, force: true });
  return join(cacheDirArg, 'main.mjs');
};

/**
 * Runs `entryArg` (a path relative to the checkout) from its bundle in `cacheDirArg`, or from
 * source when `fromSourceArg` is set or no bundle can be had.
 */
export const runFromCheckout = async ({ entry: entryArg, cacheDir: cacheDirArg, fromSource: fromSourceArg }) => {
  let bundled = null;
  if (!fromSourceArg) {
    bundled = freshBundle(cacheDirArg);
    if (!bundled) {
      try {
        bundled = await buildBundle(entryArg, cacheDirArg);
      } catch {
        bundled = null;
      }
    }
  }
  if (bundled) {
    await import(pathToFileURL(bundled).href);
  } else {
    const { register } = await import('tsx/esm/api');
    register();
    await import(pathToFileURL(join(checkoutRoot, entryArg)).href);
  }
};
