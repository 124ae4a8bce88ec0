/**
 * The sources the shared test processes load, transpiled once per test run.
 *
 * A test process that loads TypeScript through tsx pays for tsx's loader hooks on their own
 * thread, a message to it for every module resolved and loaded (packages included), and a
 * transform or a cache lookup for each source: about 3.4 CPU-s to import the server's module
 * graph and the test helpers, against 2.0–2.3 CPU-s for the same files transpiled to JavaScript
 * beforehand (docs/testing.md). On a fresh clone, with tsx's cache empty, every process paid
 * another second. A run starts about ten such processes.
 *
 * So before the first test process starts, the runner (scripts/test.ts) transpiles every
 * TypeScript file of `ts/`, `test/`, `scripts/` and `web/src/` with esbuild (the transform tsx
 * itself uses, with the same tsconfig), file by file, into `.cache/test-js/<run>/` with the same
 * layout, and the test processes run from there on plain Node:
 *
 * - relative imports keep working (`./x.js` names the transpiled file beside it), and packages
 *   resolve from the project's node_modules further up;
 * - `import.meta.url`, `import.meta.dirname` and `import.meta.filename` are replaced by each
 *   file's own place in the checkout, so code that finds files next to itself (the dashboard's
 *   sources, the project root, fixtures) finds the checkout's;
 * - inline source maps name the checkout's files, and the processes run with
 *   `--enable-source-maps`, so a stack trace points at the TypeScript line as it did under tsx.
 *
 * Whatever a test starts itself (`--import tsx`, the CLI, the bundled server) is unchanged. The
 * directory is removed at the end of the run; one left by a run that was killed is removed by the
 * next. `CLOUDLY_TEST_TRANSPILE=0` runs the test processes through tsx as before.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const projectDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const transpiledParent = path.join(projectDir, '.cache', 'test-js');

/** The source directories and the tsconfig each is compiled with. */
const sourceDirs: Array<{ dir: string; tsconfig: string }> = [
  { dir: 'ts', tsconfig: 'tsconfig.json' },
  { dir: 'test', tsconfig: 'tsconfig.json' },
  { dir: 'scripts', tsconfig: 'tsconfig.json' },
  { dir: path.join('web', 'src'), tsconfig: path.join('web', 'tsconfig.json') },
];

export const transpileEnvName = 'CLOUDLY_TEST_TRANSPILE';
/** Set in a shared test process that runs transpiled files: the directory they are in. */
export const transpiledRootEnvName = 'CLOUDLY_TEST_JS_ROOT';

const sourcesOf = async (dirArg: string): Promise<string[]> => {
  const found: string[] = [];
  for (const entry of await fsp.readdir(path.join(projectDir, dirArg), { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && /\.m?ts$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
      const parent = entry.parentPath ?? (entry as unknown as { path: string }).path;
      found.push(path.relative(projectDir, path.join(parent, entry.name)));
    }
  }
  return found;
};

/** The transpiled counterpart of a file of the checkout (`.ts` → `.js`, `.mts` → `.mjs`); other files as they are. */
export const transpiledPath = (rootArg: string, fileArg: string): string => {
  const absolute = path.resolve(projectDir, fileArg);
  const relative = path.relative(projectDir, absolute);
  if (relative.startsWith('..') || path.isAbsolute(relative) || !/\.m?ts$/.test(relative)) {
    return absolute;
  }
  return path.join(rootArg, relative.replace(/\.ts$/, '.js').replace(/\.mts$/, '.mjs'));
};

/** Removes the directories of earlier runs whose process is gone. */
const removeAbandoned = async (): Promise<void> => {
  let names: string[];
  try {
    names = await fsp.readdir(transpiledParent);
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(name.split('-')[0]);
    let alive = false;
    try {
      process.kill(pid, 0);
      alive = pid !== process.pid;
    } catch {
      alive = false;
    }
    if (!alive) {
      await fsp.rm(path.join(transpiledParent, name), { recursive: true, force: true });
    }
  }
};

/** Transpiles the checkout's TypeScript for this run; `remove` deletes it again. */
export const transpileForTests = async (): Promise<{ root: string; files: number; remove(): Promise<void> }> => {
  const esbuild = await import('esbuild');
  await removeAbandoned();
  const root = path.join(transpiledParent, `${process.pid}-${Date.now()}`);
  let files = 0;
  try {
    for (const { dir, tsconfig } of sourceDirs) {
      const tsconfigRaw = fs.readFileSync(path.join(projectDir, tsconfig), 'utf8');
      const sources = await sourcesOf(dir);
      await Promise.all(sources.map(async (relativeArg) => {
        const file = path.join(projectDir, relativeArg);
        const result = await esbuild.transform(await fsp.readFile(file, 'utf8'), {
          loader: 'ts',
          format: 'esm',
          target: 'node20',
          tsconfigRaw,
          sourcefile: file,
          sourcemap: 'inline',
          sourcesContent: false,
          define: {
            'import.meta.url': JSON.stringify(pathToFileURL(file).href),
            'import.meta.dirname': JSON.stringify(path.dirname(file)),
            'import.meta.filename': JSON.stringify(file),
          },
        });
        const target = transpiledPath(root, relativeArg);
        await fsp.mkdir(path.dirname(target), { recursive: true });
        await fsp.writeFile(target, result.code);
      }));
      files += sources.length;
    }
  } catch (error) {
    await fsp.rm(root, { recursive: true, force: true });
    throw error;
  }
  return { root, files, remove: () => fsp.rm(root, { recursive: true, force: true }) };
};
