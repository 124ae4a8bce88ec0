import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { cloudlyProcessEnv, exitOf, killHard, startCloudlyProcess, startNpmStartProcess } from './helpers/process.js';
import { seedSigningKey } from './helpers/signingkeys.js';

/**
 * The first minutes of an operator: a Cloudly started as a process and stopped again writes only
 * its own log, one JSON object a line (its output is piped here, not a terminal), and no line of
 * a dependency's own console output (smartdata's `__# debug: called svDb() …`).
 */

test('a start and a stop write only JSON log lines, and none of smartdata\'s console lines', async () => {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-quiet-'));
  let started: Awaited<ReturnType<typeof startCloudlyProcess>> | null = null;
  try {
    // A misspelt setting is warned about, naming the one most likely meant. (Its name is put
    // together here, so test/config.variables.test.ts does not take it for one the code reads.)
    const misspelt = ['CLOUDLY', 'LOGLEVEL'].join('_');
    started = await startCloudlyProcess(cloudlyProcessEnv(dataDir, { CLOUDLY_LOG_LEVEL: 'info', [misspelt]: 'debug' }));
    const health = await fetch(`${started.baseUrl}/readyz`);
    assert.equal(health.status, 200);
    started.child.kill('SIGTERM');
    assert.equal(await exitOf(started.child), 0);
    const lines = started.output().split('\n').filter((lineArg) => lineArg.trim().length > 0);
    assert.ok(lines.length > 0);
    assert.deepEqual(lines.filter((lineArg) => lineArg.includes('__#')), [], 'no smartdata console lines');
    for (const line of lines) {
      let record: unknown;
      assert.doesNotThrow(() => { record = JSON.parse(line); }, `a JSON line: ${line}`);
      assert.equal(typeof record, 'object', line);
    }
    assert.ok(lines.some((lineArg) => /cloudly is listening/.test(lineArg)));
    const warning = `"variable":"${misspelt}","closest":"CLOUDLY_LOG_LEVEL","msg":"${misspelt} is not a Cloudly setting and is ignored; did you mean CLOUDLY_LOG_LEVEL?"`;
    assert.ok(lines.some((lineArg) => lineArg.includes('"level":40') && lineArg.includes(warning)), started.output());
  } finally {
    if (started) {
      await killHard(started.child);
    }
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});

test('`npm start` (the checkout\'s own bundle of the server) writes none of smartdata\'s console lines either', async () => {
  // The bundle hoists the imports of packages above its own code; the rerouting of smartdata's
  // lines must still come first (ts/cli.ts loads it before the rest).
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-quiet-npm-'));
  let started: Awaited<ReturnType<typeof startNpmStartProcess>> | null = null;
  try {
    await seedSigningKey(dataDir);
    started = await startNpmStartProcess(cloudlyProcessEnv(dataDir, { CLOUDLY_LOG_LEVEL: 'info', CLOUDLY_LOG_FORMAT: 'json' }));
    started.child.kill('SIGTERM');
    assert.equal(await exitOf(started.child), 0);
    assert.match(started.output(), /cloudly stopped/);
    assert.deepEqual(started.output().split('\n').filter((lineArg) => lineArg.includes('__#')), [], 'no smartdata console lines');
  } finally {
    if (started) {
      await killHard(started.child);
    }
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
});
