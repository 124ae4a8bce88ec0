#!/usr/bin/env node
// The `cloudly` executable from a checkout (and `npx cloudly`). The command line runs from a bundle
// of ts/cli built on first use with esbuild into .nogit/cli/ (CLOUDLY_CLI_CACHE_DIR, which must lie
// inside the checkout: the bundle loads its packages from the checkout's node_modules), and built
// again whenever one of its sources changed: loading TypeScript through tsx on every command cost
// about a second. With no bundle to be had (esbuild missing, a read-only checkout), or with
// CLOUDLY_CLI_SOURCE=1, the sources run through tsx as before. docs/cli.md says more.
// `cloudly server` starts exactly what `npm start` starts: bin/cloudly-server --source.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const cacheDir = process.env.CLOUDLY_CLI_CACHE_DIR || join(root, '.nogit', 'cli');
const manifestName = 'manifest.json';

/** The bundle's entry when every source it was built from is unchanged (by size and mtime), else null. */
const freshBundle = () => {
  try {
    const manifest = JSON.parse(fs.readFileSync(join(cacheDir, manifestName), 'utf8'));
    for (const [file, stamp] of Object.entries(manifest.inputs)) {
      const stat = fs.statSync(join(root, file));
      if (stat.mtimeMs !== stamp.mtimeMs || stat.size !== stamp.size) {
        return null;
      }
    }
    return join(cacheDir, manifest.entry);
  } catch {
    return null;
  }
};

/**
 * Bundles ts/cli/main.ts (packages stay in node_modules; the commands' own lazy imports stay lazy
 * as chunks) into a directory of its own, then moves it into place: a run at the same time uses
 * the old bundle or the new one, never half of one.
 */
const buildBundle = async () => {
  const esbuild = await import('esbuild');
  const building = `${cacheDir}.${process.pid}.${Date.now()}`;
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: ['ts/cli/main.ts'],
    outdir: building,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    splitting: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    tsconfig: join(root, 'tsconfig.json'),
    metafile: true,
    logLevel: 'silent',
  });
  const inputs = {};
  for (const file of [...Object.keys(result.metafile.inputs), 'tsconfig.json']) {
    const stat = fs.statSync(join(root, file));
    inputs[file] = { mtimeMs: stat.mtimeMs, size: stat.size };
  }
  fs.writeFileSync(join(building, manifestName), JSON.stringify({ entry: 'main.mjs', inputs }));
  const retired = `${cacheDir}.old.${process.pid}.${Date.now()}`;
  try {
    fs.renameSync(cacheDir, retired);
  } catch {
    // None there yet.
  }
  try {
    fs.renameSync(building, cacheDir);
  } catch {
    // Another run put its bundle in place first: that one is as new.
    fs.rmSync(building, { recursive: true, force: true });
  }
  fs.rmSync(retired, { recursive: true, force: true });
  return join(cacheDir, 'main.mjs');
};

const runFromSource = async () => {
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(join(root, 'ts', 'cli', 'main.ts')).href);
};

if (args[0] === 'server') {
  const child = spawn(join(root, 'bin', 'cloudly-server'), ['--source', ...args.slice(1)], {
    cwd: process.cwd(),
    stdio: 'inherit',
  });
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => child.kill(signal));
  }
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
} else if (process.env.CLOUDLY_CLI_SOURCE === '1') {
  await runFromSource();
} else {
  let entry = freshBundle();
  if (!entry) {
    try {
      entry = await buildBundle();
    } catch {
      entry = null;
    }
  }
  if (entry) {
    await import(pathToFileURL(entry).href);
  } else {
    await runFromSource();
  }
}
