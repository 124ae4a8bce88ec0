import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/**
 * The runtime import graph of ts/**: every relative import that survives compilation (an
 * `import type`, an `export type … from` and an import whose every name is `type`-qualified are
 * erased, so they are not edges; a dynamic `import()` loads lazily and is counted apart). Reports
 * the import cycles (strongly connected components of more than one file, or a file importing
 * itself) and every file of ts/core that imports a file outside ts/core and ts/interfaces.
 * An import whose names are not `type`-qualified but used only as types is also erased by the
 * compiler; it is still counted here (the graph errs towards more edges, never fewer).
 *
 *   node --import tsx scripts/import-graph.ts [--json] [--with-types] [--root <dir>]
 *
 * `--with-types` counts erased imports as edges too (the graph the type checker sees); `--root`
 * analyses another checkout's ts/ (e.g. `git archive <commit> ts | tar -x -C /tmp/old`).
 *
 * Exits 1 when a cycle runs through ts/core or a core file imports, at runtime, a file outside
 * ts/core and ts/interfaces that is not a leaf (a manager, the composition root).
 */

export interface IImportGraphReport {
  files: number;
  /** Static runtime edges (from → to), paths relative to the repository root. */
  edges: number;
  /** Lazy edges from `import()`; not part of any cycle. */
  dynamicEdges: Array<{ from: string; to: string }>;
  /** Each cycle's files, sorted; the cycles sorted by their first file. */
  cycles: string[][];
  /** Cycles with at least one file in ts/core. */
  coreCycles: string[][];
  /**
   * Static runtime imports from ts/core to a file outside ts/core and ts/interfaces; `leaf` when
   * that file imports no other file of ts/ at runtime (e.g. ts/config.ts), so it cannot lead back.
   */
  coreEscapes: Array<{ from: string; to: string; leaf: boolean }>;
  /** Runtime imports from ts/core to a file that is neither in core/interfaces nor a leaf: core reaching above itself. */
  coreAbove: Array<{ from: string; to: string }>;
  /** Erased (`import type`) imports from ts/core to outside ts/core and ts/interfaces: no runtime edge, listed for information. */
  coreTypeEscapes: Array<{ from: string; to: string }>;
}

const listTypeScript = (dirArg: string): string[] =>
  readdirSync(dirArg).flatMap((nameArg) => {
    const path = join(dirArg, nameArg);
    if (statSync(path).isDirectory()) {
      return listTypeScript(path);
    }
    return nameArg.endsWith('.ts') && !nameArg.endsWith('.d.ts') ? [path] : [];
  });

/** Whether a static import or re-export declaration stays in the emitted JavaScript. */
const isRuntimeDeclaration = (nodeArg: ts.ImportDeclaration | ts.ExportDeclaration): boolean => {
  if (ts.isImportDeclaration(nodeArg)) {
    const clause = nodeArg.importClause;
    if (!clause) {
      return true; // `import './x.js'`: a side-effect import
    }
    if (clause.isTypeOnly) {
      return false;
    }
    if (clause.name) {
      return true; // a default import
    }
    const bindings = clause.namedBindings;
    if (!bindings || ts.isNamespaceImport(bindings)) {
      return true;
    }
    // `import { type A, type B } from` is erased whole; `import {} from` is kept.
    return bindings.elements.length === 0 || bindings.elements.some((elementArg) => !elementArg.isTypeOnly);
  }
  if (nodeArg.isTypeOnly) {
    return false;
  }
  const clause = nodeArg.exportClause;
  return !clause || !ts.isNamedExports(clause) || clause.elements.length === 0 || clause.elements.some((elementArg) => !elementArg.isTypeOnly);
};

/** The file a relative specifier names (`./x.js` is written for `./x.ts`), or null when outside the set. */
const resolveSpecifier = (fromArg: string, specifierArg: string, filesArg: Set<string>): string | null => {
  if (!specifierArg.startsWith('.')) {
    return null;
  }
  const target = resolve(dirname(fromArg), specifierArg);
  for (const candidate of [target.replace(/\.js$/, '.ts'), `${target}.ts`, join(target, 'index.ts'), target]) {
    if (filesArg.has(candidate)) {
      return candidate;
    }
  }
  return null;
};

/** Tarjan's strongly connected components over the static edges. */
const stronglyConnected = (nodesArg: string[], edgesArg: Map<string, Set<string>>): string[][] => {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (nodeArg: string): void => {
    index.set(nodeArg, counter);
    low.set(nodeArg, counter);
    counter++;
    stack.push(nodeArg);
    onStack.add(nodeArg);
    for (const next of edgesArg.get(nodeArg) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(nodeArg, Math.min(low.get(nodeArg)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(nodeArg, Math.min(low.get(nodeArg)!, index.get(next)!));
      }
    }
    if (low.get(nodeArg) === index.get(nodeArg)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== nodeArg);
      components.push(component);
    }
  };
  for (const node of nodesArg) {
    if (!index.has(node)) {
      visit(node);
    }
  }
  return components;
};

export interface IImportGraphOptions {
  /** Count erased imports (`import type`) as edges too: the graph the type checker walks. */
  includeTypeImports?: boolean;
}

export const analyseImportGraph = (rootArg: string, optionsArg: IImportGraphOptions = {}): IImportGraphReport => {
  const sourceDir = join(rootArg, 'ts');
  const absoluteFiles = listTypeScript(sourceDir).sort();
  const fileSet = new Set(absoluteFiles);
  const name = (pathArg: string) => relative(rootArg, pathArg).split(sep).join('/');
  const edges = new Map<string, Set<string>>();
  const typeEdges = new Map<string, Set<string>>();
  const dynamicEdges: Array<{ from: string; to: string }> = [];
  let edgeCount = 0;
  for (const file of absoluteFiles) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    const targets = new Set<string>();
    const erased = new Set<string>();
    const visitNode = (nodeArg: ts.Node): void => {
      if ((ts.isImportDeclaration(nodeArg) || ts.isExportDeclaration(nodeArg)) && nodeArg.moduleSpecifier && ts.isStringLiteral(nodeArg.moduleSpecifier)) {
        const target = resolveSpecifier(file, nodeArg.moduleSpecifier.text, fileSet);
        if (target) {
          (optionsArg.includeTypeImports || isRuntimeDeclaration(nodeArg) ? targets : erased).add(target);
        }
        return;
      }
      if (ts.isCallExpression(nodeArg) && nodeArg.expression.kind === ts.SyntaxKind.ImportKeyword) {
        const [specifier] = nodeArg.arguments;
        const target = specifier && ts.isStringLiteral(specifier) ? resolveSpecifier(file, specifier.text, fileSet) : null;
        if (target) {
          dynamicEdges.push({ from: name(file), to: name(target) });
        }
      }
      ts.forEachChild(nodeArg, visitNode);
    };
    visitNode(source);
    edges.set(file, targets);
    typeEdges.set(file, erased);
    edgeCount += targets.size;
  }
  const cycles = stronglyConnected(absoluteFiles, edges)
    .filter((componentArg) => componentArg.length > 1 || edges.get(componentArg[0])!.has(componentArg[0]))
    .map((componentArg) => componentArg.map(name).sort())
    .sort((a, b) => a[0].localeCompare(b[0]));
  const inCore = (pathArg: string) => pathArg.startsWith('ts/core/');
  const outsideCore = (pathArg: string) => !inCore(pathArg) && !pathArg.startsWith('ts/interfaces/');
  const coreFiles = absoluteFiles.filter((fileArg) => inCore(name(fileArg)));
  const coreEscapes = coreFiles.flatMap((fileArg) => [...edges.get(fileArg)!]
    .filter((targetArg) => outsideCore(name(targetArg)))
    .map((targetArg) => ({ from: name(fileArg), to: name(targetArg), leaf: edges.get(targetArg)!.size === 0 })));
  const coreTypeEscapes = coreFiles.flatMap((fileArg) => [...typeEdges.get(fileArg)!]
    .filter((targetArg) => outsideCore(name(targetArg)) && !edges.get(fileArg)!.has(targetArg))
    .map((targetArg) => ({ from: name(fileArg), to: name(targetArg) })));
  return {
    files: absoluteFiles.length,
    edges: edgeCount,
    dynamicEdges,
    cycles,
    coreCycles: cycles.filter((cycleArg) => cycleArg.some(inCore)),
    coreEscapes,
    coreAbove: coreEscapes.filter((escapeArg) => !escapeArg.leaf).map(({ from, to }) => ({ from, to })),
    coreTypeEscapes,
  };
};

const isMain = process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  const rootFlag = process.argv.indexOf('--root');
  const root = rootFlag > 0 && process.argv[rootFlag + 1]
    ? resolve(process.argv[rootFlag + 1])
    : resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const includeTypeImports = process.argv.includes('--with-types');
  const report = analyseImportGraph(root, { includeTypeImports });
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify(report, null, 2));
  } else {
    console.log(`files: ${report.files}, ${includeTypeImports ? 'imports (runtime and type-only)' : 'runtime imports'}: ${report.edges}, dynamic imports: ${report.dynamicEdges.length}`);
    console.log(`cycles: ${report.cycles.length} (through ts/core: ${report.coreCycles.length})`);
    for (const cycle of report.cycles) {
      console.log(`  cycle of ${cycle.length}: ${cycle.join(', ')}`);
    }
    console.log(`ts/core importing outside ts/core and ts/interfaces${includeTypeImports ? '' : ' at runtime'}: ${report.coreEscapes.length} (above core, not a leaf: ${report.coreAbove.length})`);
    for (const escape of report.coreEscapes) {
      console.log(`  ${escape.from} -> ${escape.to}${escape.leaf ? ' (leaf: imports nothing of ts/)' : ''}`);
    }
    console.log(`ts/core type-only imports outside ts/core and ts/interfaces (erased): ${report.coreTypeEscapes.length}`);
    for (const escape of report.coreTypeEscapes) {
      console.log(`  ${escape.from} -> ${escape.to}`);
    }
    for (const dynamic of report.dynamicEdges) {
      console.log(`  dynamic: ${dynamic.from} -> ${dynamic.to}`);
    }
  }
  process.exitCode = report.coreCycles.length > 0 || report.coreAbove.length > 0 ? 1 : 0;
}
