/**
 * The server that crash and start-up tests run as a child process, bundled once per test run.
 *
 * Those tests start Cloudly dozens of times (kill -9, restart, look at what survived). Through
 * tsx every start transpiles-or-looks-up each source file and resolves thousands of package
 * files one by one, seconds of CPU each time; one esbuild bundle of `ts/cli.ts` with its packages
 * starts in well under half that time (docs/testing.md has the figures). The bundle is the
 * same sources compiled: the launcher test and the build test still start `npm start`'s tsx
 * path and the built `dist/`.
 *
 * It lives in `.cache/test-server/` inside the project so the few packages left outside the
 * bundle (native or optional ones) still resolve from node_modules, and so the dashboard's
 * files are found relative to it as from `ts/core/`.
 */
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const projectDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** The environment variable that points test helpers at the bundle (test/helpers/process.ts). */
export const testServerEnvName = 'CLOUDLY_TEST_SERVER';

export const testServerPath = path.join(projectDir, '.cache', 'test-server', 'cli.mjs');

/** Packages left to node_modules: native add-ons, optional drivers, and the S3 client (loaded on use). */
const external = [
  'bufferutil', 'utf-8-validate', '@aws-sdk/*', 'mongodb-memory-server*', 'kerberos', 'snappy',
  '@mongodb-js/*', 'mongodb-client-encryption', 'gcp-metadata', 'socks', 'aws4', 'esbuild',
];

/**
 * CommonJS packages inside an ES module bundle still call `require` and read `__dirname`: give
 * them both, as Node gives a CommonJS file.
 */
const banner = [
  "import { createRequire as cloudlyCreateRequire } from 'node:module';",
  "import { fileURLToPath as cloudlyFileURLToPath } from 'node:url';",
  "import { dirname as cloudlyDirname } from 'node:path';",
  'const require = cloudlyCreateRequire(import.meta.url);',
  'const __filename = cloudlyFileURLToPath(import.meta.url);',
  'const __dirname = cloudlyDirname(__filename);',
].join('\n');

/** Bundles `ts/cli.ts` into `testServerPath`; answers the path. */
export const buildTestServer = async (): Promise<string> => {
  const esbuild = await import('esbuild');
  await fsp.mkdir(path.dirname(testServerPath), { recursive: true });
  await esbuild.build({
    entryPoints: [path.join(projectDir, 'ts', 'cli.ts')],
    outfile: testServerPath,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: false,
    external,
    banner: { js: banner },
    tsconfig: path.join(projectDir, 'tsconfig.json'),
    logLevel: 'warning',
  });
  return testServerPath;
};
