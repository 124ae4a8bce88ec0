/**
 * The server that crash and start-up tests run as a child process, bundled once per test run.
 *
 * Those tests start Cloudly dozens of times (kill -9, restart, look at what survived). Through
 * tsx every start transpiles-or-looks-up each source file and resolves thousands of package
 * files one by one, seconds of CPU each time; one esbuild bundle of `ts/cli.ts` with its packages
 * starts in well under half that time (docs/testing.md has the figures). The bundle is the
 * same sources compiled: the launcher test and the build test still start `npm start`'s own
 * path and the built `dist/`.
 *
 * Compiling the 6.7 MB bundle was then the largest single cost of a start (about a third of its
 * CPU), so the bundle is CommonJS and is started by a small loader (`start.cjs`) that compiles it
 * with `vm.Script` and V8's code cache: the first start of a run writes the cache (once the
 * server has run for a while, so the functions a start compiles are in it), later starts
 * deserialize instead of compiling. Node 20 has no code cache for ES modules (its
 * `module.enableCompileCache` came in Node 22), hence CommonJS. V8 checks a cache only against
 * the source's length, so the cache file is named after the bundle's sha256: a rebuilt bundle
 * never meets a cache made for another.
 *
 * It lives in `.cache/test-server/` inside the project so the few packages left outside the
 * bundle (native or optional ones) still resolve from node_modules, and so the dashboard's
 * files are found relative to it as from `ts/core/`.
 */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const projectDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** The environment variable that points test helpers at the server to start (test/helpers/process.ts). */
export const testServerEnvName = 'CLOUDLY_TEST_SERVER';

const testServerDir = path.join(projectDir, '.cache', 'test-server');
const bundlePath = path.join(testServerDir, 'cli.cjs');
/** scripts/dev-database.ts bundled beside the server (test/helpers/multiinstance.ts starts it). */
export const devDatabaseBundlePath = path.join(testServerDir, 'dev-database.cjs');
/** What `bin/cloudly-server --node` runs: the loader, which runs the bundle. */
export const testServerPath = path.join(testServerDir, 'start.cjs');

/** Packages left to node_modules: native add-ons, optional drivers, and the S3 client (loaded on use). */
const external = [
  'bufferutil', 'utf-8-validate', '@aws-sdk/*', 'mongodb-memory-server*', 'kerberos', 'snappy',
  '@mongodb-js/*', 'mongodb-client-encryption', 'gcp-metadata', 'socks', 'aws4', 'esbuild',
];

/**
 * The loader. It runs the bundle as Node's CommonJS loader would (the module wrapper, `require`
 * from the bundle's place), but through `vm.Script` with the cached data when there is a cache
 * for this bundle, and writes one (to a temporary name, then renamed, so a reader never sees
 * half a file) when there was none or V8 rejected it.
 */
const loaderSource = (bundleArg: string, cacheArg: string): string => `'use strict';
const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');
const Module = require('node:module');
const bundle = ${JSON.stringify(bundleArg)};
const cache = ${JSON.stringify(cacheArg)};
let cachedData;
try {
  cachedData = fs.readFileSync(cache);
} catch {
  cachedData = undefined;
}
// The bundle is ASCII (escapeToAscii below), which latin1 reads as UTF-8 would, without decoding.
const script = new vm.Script(Module.wrap(fs.readFileSync(bundle, 'latin1')), {
  filename: bundle,
  cachedData,
});
if (cachedData === undefined || script.cachedDataRejected) {
  // After the start has compiled what a start compiles; never keeps the process alive.
  setTimeout(() => {
    try {
      const temporary = cache + '.' + process.pid;
      fs.writeFileSync(temporary, script.createCachedData());
      fs.renameSync(temporary, cache);
    } catch {
      // A cache that cannot be written only costs the next start its compile.
    }
  }, 2000).unref();
}
const bundleModule = new Module(bundle, null);
bundleModule.filename = bundle;
bundleModule.paths = Module._nodeModulePaths(path.dirname(bundle));
script.runInThisContext()(bundleModule.exports, Module.createRequire(bundle), bundleModule, bundle, path.dirname(bundle));
`;

/** Rewrites a bundle with its non-ASCII characters escaped; answers the text written. */
const escapeToAscii = async (fileArg: string): Promise<string> => {
  const text = await fsp.readFile(fileArg, 'utf8');
  const asciiText = text.replace(/[^\x00-\x7f]/g, (charArg) => `\\u${charArg.charCodeAt(0).toString(16).padStart(4, '0')}`);
  if (asciiText !== text) {
    await fsp.writeFile(fileArg, asciiText);
  }
  return asciiText;
};

/** Bundles `ts/cli.ts` into `.cache/test-server/cli.cjs` and writes its loader; answers the loader's path. */
export const buildTestServer = async (): Promise<string> => {
  const esbuild = await import('esbuild');
  await fsp.mkdir(testServerDir, { recursive: true });
  const options = {
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    sourcemap: false,
    external,
    // The sources read their own place from import.meta.url (the dashboard's files, the package root).
    define: { 'import.meta.url': 'cloudlyBundleUrl' },
    // `import()` of a package left outside becomes `require` (a script compiled by vm.Script has
    // no module loader of its own for `import()` on Node 20).
    supported: { 'dynamic-import': false },
    banner: { js: "const cloudlyBundleUrl = require('node:url').pathToFileURL(__filename).href;" },
    tsconfig: path.join(projectDir, 'tsconfig.json'),
    logLevel: 'warning',
  } as const;
  await Promise.all([
    esbuild.build({ ...options, entryPoints: [path.join(projectDir, 'ts', 'cli.ts')], outfile: bundlePath }),
    // The shared database process of the multi-instance tests, started a few times a run: through
    // tsx each start cost 2.7-3.6 CPU-s, most of it transpiling and resolving. Plain CommonJS,
    // without the loader's code cache (it compiles a fraction of the server's code).
    esbuild.build({ ...options, entryPoints: [path.join(projectDir, 'scripts', 'dev-database.ts')], outfile: devDatabaseBundlePath }),
  ]);
  // esbuild escapes non-ASCII in strings and identifiers but keeps the comments it carries over
  // as they are, and 16 of them hold a non-ASCII character (a ≠, a box-drawing rule, a name).
  // One is enough to make the whole 6.7 MB source a two-byte string that Node decodes on its
  // slow path, on every start (the cost is in docs/testing.md). Escaped, the source is ASCII
  // and is read on the fast path; in a comment, the escape is only text.
  const [asciiText] = await Promise.all([bundlePath, devDatabaseBundlePath].map(escapeToAscii));
  const digest = createHash('sha256').update(asciiText).digest('hex').slice(0, 16);
  const cacheName = `cli.${digest}.v8cache`;
  // Caches of earlier bundles (and the ES module bundle of earlier runs) are of no use any more.
  for (const name of await fsp.readdir(testServerDir)) {
    if ((name.endsWith('.v8cache') && name !== cacheName) || name === 'cli.mjs') {
      await fsp.rm(path.join(testServerDir, name), { force: true });
    }
  }
  await fsp.writeFile(testServerPath, loaderSource(bundlePath, path.join(testServerDir, cacheName)));
  return testServerPath;
};
