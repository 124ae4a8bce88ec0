import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { SharedWorker } from '../scripts/test.js';

/**
 * The runner's shared test process (scripts/test.ts, test/helpers/worker.ts) switches Node's
 * test-context hook off while a file's tests run (test/helpers/harnesshook.ts). These files are
 * planted in a temporary directory and run in one real shared process, as `npm test` runs them.
 */

const plant = async (dirArg: string, nameArg: string, sourceArg: string): Promise<string> => {
  const file = path.join(dirArg, nameArg);
  await fsp.writeFile(file, sourceArg);
  return file;
};

test('in a shared process, tests nest under their file, and an error thrown outside every test fails the file that was running', async () => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-runner-'));
  const worker = new SharedWorker('shared', []);
  try {
    const stray = await plant(dir, 'stray.test.ts', [
      "import { describe, it, before } from 'node:test';",
      "let ready = false;",
      "before(() => { ready = true; });",
      "describe('a suite', () => {",
      "  it('passes, but leaves a timer that throws', async () => {",
      "    if (!ready) throw new Error('the file\\'s before hook did not run first');",
      "    setTimeout(() => { throw new Error('planted stray error'); }, 5);",
      "    await new Promise((resolve) => setTimeout(resolve, 200));",
      "  });",
      "});",
    ].join('\n'));
    const clean = await plant(dir, 'clean.test.ts', [
      "import { describe, it } from 'node:test';",
      "describe('another suite', () => {",
      "  it('one', async () => { await new Promise((resolve) => setImmediate(resolve)); });",
      "  it('two', () => {});",
      "});",
    ].join('\n'));

    const first = await worker.run(stray);
    assert.equal(first.code, 1, first.output);
    assert.match(first.output, /uncaught exception: Error: planted stray error/);
    // The test itself passed and was counted under its file, inside its suite.
    assert.deepEqual({ tests: first.counts.tests, pass: first.counts.pass }, { tests: 1, pass: 1 });
    assert.match(first.output, /▶ a suite[\s\S]*✔ passes, but leaves a timer that throws/);

    const second = await worker.run(clean);
    assert.equal(second.code, 0, second.output);
    assert.deepEqual({ tests: second.counts.tests, pass: second.counts.pass, fail: second.counts.fail }, { tests: 2, pass: 2, fail: 0 });
    assert.doesNotMatch(second.output, /planted stray error/);
  } finally {
    await worker.finish();
    await fsp.rm(dir, { recursive: true, force: true });
  }
});
