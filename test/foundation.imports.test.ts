import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { analyseImportGraph } from '../scripts/import-graph.js';

/**
 * Core is below the managers: no runtime import cycle runs through ts/core, and no core file
 * imports a manager or the composition root (scripts/import-graph.ts walks the imports).
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

describe('the import graph', () => {
  test('no runtime import cycle runs through ts/core, and core imports nothing above it', () => {
    const report = analyseImportGraph(root);
    assert.ok(report.files > 100 && report.edges > 300, `the walk found ${report.files} files and ${report.edges} imports`);
    assert.deepEqual(report.coreCycles, []);
    assert.deepEqual(report.coreAbove, []);
  });

  test('not even a type-only import leads from ts/core to a manager or the composition root', () => {
    const report = analyseImportGraph(root, { includeTypeImports: true });
    assert.deepEqual(report.coreCycles, []);
    assert.deepEqual(report.coreAbove, []);
  });

  test('the walk finds a planted cycle through core, and does not count an `import type`', () => {
    const fixture = mkdtempSync(join(tmpdir(), 'cloudly-imports-'));
    try {
      const write = (pathArg: string, textArg: string) => {
        mkdirSync(dirname(join(fixture, pathArg)), { recursive: true });
        writeFileSync(join(fixture, pathArg), textArg);
      };
      write('ts/core/a.ts', "import { b } from '../manager.x/b.js';\nexport const a = () => b;\n");
      write('ts/manager.x/b.ts', "import { a } from '../core/a.js';\nexport const b = () => a;\n");
      write('ts/core/c.ts', "import type { d } from '../manager.x/d.js';\nimport { type e } from '../manager.x/d.js';\nexport const c = 1;\n");
      write('ts/manager.x/d.ts', "import { c } from '../core/c.js';\nexport const d = c; export type e = number;\n");
      write('ts/config.ts', 'export const leaf = 1;\n');
      write('ts/core/f.ts', "import { leaf } from '../config.js';\nexport const f = leaf;\n");
      const report = analyseImportGraph(fixture);
      assert.deepEqual(report.cycles, [['ts/core/a.ts', 'ts/manager.x/b.ts']]);
      assert.deepEqual(report.coreCycles, [['ts/core/a.ts', 'ts/manager.x/b.ts']]);
      assert.deepEqual(report.coreAbove, [{ from: 'ts/core/a.ts', to: 'ts/manager.x/b.ts' }]);
      assert.deepEqual(report.coreEscapes, [
        { from: 'ts/core/a.ts', to: 'ts/manager.x/b.ts', leaf: false },
        { from: 'ts/core/f.ts', to: 'ts/config.ts', leaf: true },
      ]);
      assert.deepEqual(report.coreTypeEscapes, [{ from: 'ts/core/c.ts', to: 'ts/manager.x/d.ts' }]);
      const withTypes = analyseImportGraph(fixture, { includeTypeImports: true });
      assert.deepEqual(withTypes.cycles, [['ts/core/a.ts', 'ts/manager.x/b.ts'], ['ts/core/c.ts', 'ts/manager.x/d.ts']]);
    } finally {
      rmSync(fixture, { recursive: true, force: true });
    }
  });
});
