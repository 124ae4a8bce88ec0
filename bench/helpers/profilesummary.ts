/**
 * Where a profiled process's CPU went: sums V8 CPU profiles (.cpuprofile, as
 * bench/helpers/cpuprofile.mjs writes them) by file or package and by function.
 *
 *   node --import tsx bench/helpers/profilesummary.ts <dir> [phase] [process prefix] [--top N]
 *
 * `phase` keeps the segments named so (`cold`, `restart`, `kill`; bench/fleet.bench.ts names them),
 * `process prefix` the processes whose name starts so (`instance`, `database`). Self time is the
 * time a function was on top of the stack; inclusive time counts a sample once for every distinct
 * function on its stack. Functions of the esbuild bundle the bench's instances run are attributed
 * to the source file esbuild marks above them (`// ../main/node_modules/ws/lib/websocket.js`), in
 * the copy of the bundle the bench keeps beside the profiles (`<dir>/cli.cjs`) when there is one.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

interface IProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface IProfile {
  nodes: IProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The module marks of a bundle: the lines where each bundled file begins, ascending. */
const bundleMarks = new Map<string, { line: number; file: string }[]>();
/** The bundle the profiled run used, when the bench kept a copy beside the profiles (a later run rebuilds it). */
let keptBundle: string | null = null;
const marksOf = (urlArg: string): { line: number; file: string }[] => {
  let marks = bundleMarks.get(urlArg);
  if (!marks) {
    marks = [];
    const filePath = keptBundle && urlArg.endsWith('/cli.cjs') ? keptBundle : urlArg.startsWith('file://') ? new URL(urlArg).pathname : urlArg;
    if (urlArg.endsWith('.cjs') && fs.existsSync(filePath)) {
      const lines = fs.readFileSync(filePath, 'utf8').split('\n');
      lines.forEach((lineArg, index) => {
        const mark = /^\/\/ (\S+\.[cm]?[jt]s)$/.exec(lineArg);
        if (mark) {
          marks!.push({ line: index, file: mark[1] });
        }
      });
    }
    bundleMarks.set(urlArg, marks);
  }
  return marks;
};

/** The source file a frame is in: the bundled file for a bundle's line, the url otherwise. */
const fileOf = (urlArg: string, lineArg: number): string => {
  const marks = marksOf(urlArg);
  if (marks.length === 0) {
    return urlArg;
  }
  let low = 0;
  let high = marks.length - 1;
  let found = '(bundle prelude)';
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (marks[middle].line <= lineArg) {
      found = marks[middle].file;
      low = middle + 1;
    } else {
      high = middle - 1;
    }
  }
  return found;
};

/** A file's group: a package's name for node_modules, `ts/<dir>/<file>` for Cloudly's own, node's internals by module. */
const groupOf = (fileArg: string, functionArg: string): string => {
  if (fileArg === '') {
    return functionArg.startsWith('(') ? functionArg : '(native)';
  }
  const packageMatch = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(fileArg);
  if (packageMatch) {
    return packageMatch[1];
  }
  const own = /(?:^|\/)((?:ts|scripts|bench|test)\/.*)$/.exec(fileArg);
  if (own) {
    return own[1];
  }
  if (fileArg.startsWith('node:')) {
    return fileArg.split('/').slice(0, 2).join('/');
  }
  return fileArg;
};

const summarize = (filesArg: string[], topArg: number): string[] => {
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const groups = new Map<string, number>();
  let total = 0;
  for (const file of filesArg) {
    const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as IProfile;
    const byId = new Map(profile.nodes.map((node) => [node.id, node]));
    const parent = new Map<number, number>();
    for (const node of profile.nodes) {
      for (const child of node.children ?? []) {
        parent.set(child, node.id);
      }
    }
    const keyOf = new Map<number, { fn: string; group: string }>();
    for (const node of profile.nodes) {
      const { functionName, url, lineNumber } = node.callFrame;
      const sourceFile = fileOf(url, lineNumber);
      const group = groupOf(sourceFile, functionName);
      const fn = `${functionName || '(anonymous)'} ${group}${url ? `:${lineNumber + 1}` : ''}`;
      keyOf.set(node.id, { fn, group });
    }
    // Each sample lasts until the next one.
    for (let index = 0; index < profile.samples.length; index++) {
      const micros = index + 1 < profile.timeDeltas.length ? profile.timeDeltas[index + 1] : 0;
      if (micros <= 0) {
        continue;
      }
      total += micros;
      const top = profile.samples[index];
      const key = keyOf.get(top)!;
      self.set(key.fn, (self.get(key.fn) ?? 0) + micros);
      groups.set(key.group, (groups.get(key.group) ?? 0) + micros);
      const seen = new Set<string>();
      for (let id: number | undefined = top; id !== undefined; id = parent.get(id)) {
        const fn = keyOf.get(id)!.fn;
        if (!seen.has(fn) && byId.get(id)!.callFrame.functionName !== '(root)') {
          seen.add(fn);
          inclusive.set(fn, (inclusive.get(fn) ?? 0) + micros);
        }
      }
    }
  }
  const idle = [...self].filter(([key]) => key.startsWith('(idle)')).reduce((sum, [, micros]) => sum + micros, 0);
  const busy = total - idle;
  const share = (microsArg: number): string => `${(microsArg / 1000).toFixed(0)} ms, ${((microsArg / busy) * 100).toFixed(1)}%`;
  const top = (mapArg: Map<string, number>): string[] => [...mapArg].filter(([key]) => !key.startsWith('(idle)'))
    .sort((a, b) => b[1] - a[1]).slice(0, topArg).map(([key, micros]) => `  ${share(micros).padStart(18)}  ${key}`);
  return [
    `${filesArg.length} profile(s): ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(2)} s busy (shares below are of the busy time)`,
    'self time by package or file:', ...top(groups),
    'self time by function:', ...top(self),
    'inclusive time by function:', ...top(inclusive),
  ];
};

const main = (): void => {
  const args = process.argv.slice(2);
  const topIndex = args.indexOf('--top');
  const topCount = topIndex >= 0 ? Number(args.splice(topIndex, 2)[1]) : 25;
  const [dir, phase, prefix] = args;
  if (!dir) {
    console.error('usage: node --import tsx bench/helpers/profilesummary.ts <dir> [phase] [process prefix] [--top N]');
    process.exit(2);
  }
  keptBundle = fs.existsSync(path.join(dir, 'cli.cjs')) ? path.join(dir, 'cli.cjs') : null;
  const files = fs.readdirSync(dir).filter((name) => name.endsWith('.cpuprofile'))
    .filter((name) => !phase || new RegExp(`-\\d+-${phase}\\.cpuprofile$`).test(name))
    .filter((name) => !prefix || name.startsWith(prefix))
    .map((name) => path.join(dir, name));
  console.log(`${dir}${phase ? ` phase ${phase}` : ''}${prefix ? ` processes ${prefix}*` : ''}: ${files.map((file) => path.basename(file)).join(', ')}`);
  console.log(summarize(files, topCount).join('\n'));
};

main();
