import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { startTestCloudly, type ITestCloudly } from './helpers/cloudly.js';

/**
 * The example alert rules (docs/alerts.example.yml) are a valid Prometheus rules file (promtool,
 * Debian's `prometheus` package, which `.ci/run` installs like Chromium) and name only metrics a
 * running Cloudly serves.
 */

const rulesFile = path.resolve(import.meta.dirname, '..', 'docs', 'alerts.example.yml');
const promtool = ['/usr/bin/promtool', '/usr/local/bin/promtool'].find((candidate) => fs.existsSync(candidate)) ?? null;

describe('the example alert rules', () => {
  let t: ITestCloudly;
  before(async () => { t = await startTestCloudly(); });
  after(async () => { await t.stop(); });

  test('every metric an expression names is one Cloudly serves at /metrics', async () => {
    const rules = await fsp.readFile(rulesFile, 'utf8');
    const expressions = [...rules.matchAll(/^\s+expr: (.+)$/gm)].map((match) => match[1]);
    assert.ok(expressions.length >= 6, `the file holds the rules (${expressions.length} expressions)`);
    const served = new Set([...(await (await fetch(`${t.baseUrl}/metrics`)).text()).matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1]));
    for (const expression of expressions) {
      const names = [...expression.matchAll(/\bcloudly_[a-z_]+\b/g)].map((match) => match[0]);
      assert.ok(names.length > 0, `${expression} names a Cloudly metric`);
      for (const name of names) {
        assert.ok(served.has(name), `${name} (in ${expression}) is served`);
      }
    }
  });

  test('promtool accepts the file', { skip: promtool === null ? 'promtool is not installed here (Debian package prometheus)' : false }, async () => {
    const { stdout } = await promisify(execFile)(promtool!, ['check', 'rules', rulesFile]);
    assert.match(stdout, /SUCCESS: 8 rules found/);
  });
});
