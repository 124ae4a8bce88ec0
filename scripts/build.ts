/**
 * Ahead-of-time transpile of the server sources, shared by `npm run build` and the closure bench.
 *
 *   npm run build                                   ts/ → dist/ (cleared first)
 *   node --import tsx scripts/build.ts --outdir X   ts/ → X (X must sit where node_modules resolves)
 *
 * Every file is transpiled on its own, as tsx does at load time: no bundling, so `.js` import
 * specifiers keep pointing at the neighbouring transpiled files and packages load from
 * node_modules unchanged. esbuild (the transpiler tsx itself uses) reads tsconfig.json, so legacy
 * decorators (experimentalDecorators, for smartdata) and useDefineForClassFields stay as under tsx.
 */
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const projectDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/**
 * The allocator settings production runs Cloudly with: the Dockerfile sets the same values
 * (keep them in step), the bench's compiled server and the build test use these. glibc reads them
 * at process start, so they must be in the environment of the `node` process itself; for
 * `npm run start:prod` outside the container, export them. Measured with bench/closure.bench.ts
 * (readme.md). A fixed 128 KiB mmap threshold is glibc's starting value, which glibc otherwise
 * raises (up to 32 MiB) once large blocks are freed: stream chunks and frame buffers then land in
 * the heap, where freed memory stays resident. Two arenas bound the per-thread heaps.
 */
export const productionAllocatorEnv: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '131072',
};

export interface ITranspileOptions {
  /** Where the output goes; emptied first. */
  outdir: string;
  /** Output paths are relative to this folder (default: ts/, so ts/cli.ts → <outdir>/cli.js). */
  outbase?: string;
  /** Further files to transpile beside ts/ (the bench adds itself). */
  extraEntryPoints?: string[];
}

/** Every .ts source under ts/ (no declaration files). */
export const serverSources = async (): Promise<string[]> =>
  (await fsp.readdir(path.join(projectDir, 'ts'), { recursive: true }))
    .filter((nameArg) => nameArg.endsWith('.ts') && !nameArg.endsWith('.d.ts'))
    .sort()
    .map((nameArg) => path.join(projectDir, 'ts', nameArg));

/** Transpiles ts/ (and any extra entry points) file by file into `outdir`; returns how many files. */
export const transpileSources = async (optionsArg: ITranspileOptions): Promise<number> => {
  const esbuild = await import('esbuild');
  const entryPoints = [...(optionsArg.extraEntryPoints ?? []), ...(await serverSources())];
  await fsp.rm(optionsArg.outdir, { recursive: true, force: true });
  await esbuild.build({
    entryPoints,
    outdir: optionsArg.outdir,
    outbase: optionsArg.outbase ?? path.join(projectDir, 'ts'),
    bundle: false,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: false,
    tsconfig: path.join(projectDir, 'tsconfig.json'),
    logLevel: 'warning',
  });
  return entryPoints.length;
};

const runCli = async (): Promise<void> => {
  const outdirIndex = process.argv.indexOf('--outdir');
  const outdir = path.resolve(outdirIndex >= 0 ? process.argv[outdirIndex + 1] ?? '' : path.join(projectDir, 'dist'));
  const count = await transpileSources({ outdir });
  process.stdout.write(`transpiled ${count} files into ${path.relative(process.cwd(), outdir) || '.'}\n`);
};

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await runCli();
}
