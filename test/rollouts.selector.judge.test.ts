import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  formatLabelSelector,
  labelsMatch,
  parseLabelSelector,
  validateClusterLabels,
  type ILabelSelector,
} from '../ts/interfaces/data/clusterlabels.js';

const parsed = (textArg: string): ILabelSelector => {
  const result = parseLabelSelector(textArg);
  assert.ok('selector' in result, `${textArg} parses: ${JSON.stringify(result)}`);
  return result.selector;
};

describe('label selectors (Kubernetes syntax)', () => {
  test('each operator parses and matches as Kubernetes defines it', () => {
    const labels = { env: 'prod', tier: 'web', 'example.com/region': 'eu-1' };
    const table: Array<[string, boolean]> = [
      ['env=prod', true],
      ['env==prod', true],
      ['env=dev', false],
      ['env!=dev', true],
      ['missing!=x', true],
      ['tier in (web,api)', true],
      ['tier in (api)', false],
      ['tier notin (api)', true],
      ['missing notin (api)', true],
      ['tier notin (web)', false],
      ['example.com/region', true],
      ['!example.com/region', false],
      ['!gpu', true],
      ['gpu', false],
      ['env=prod,tier in (web, api),!gpu', true],
      ['env=prod,gpu', false],
      ['', true],
    ];
    for (const [text, expected] of table) {
      assert.equal(labelsMatch(parsed(text), labels), expected, text);
    }
  });

  test('the text written back parses to the same requirements', () => {
    const selector = parsed('env = prod, tier in (a,b), !gpu, zone, x!=y, k notin (c)');
    assert.equal(formatLabelSelector(selector), 'env=prod,tier in (a,b),!gpu,zone,x!=y,k notin (c)');
    assert.deepEqual(parsed(formatLabelSelector(selector)), selector);
  });

  test('a bad selector is refused with every reason, each at its requirement', () => {
    const result = parseLabelSelector('env=prod,,-bad=x,tier in (),a b c,k=' + 'v'.repeat(64) + ',Upper.Case/x');
    assert.ok('reasons' in result);
    assert.deepEqual(result.reasons.map((reasonArg) => reasonArg.split(' ')[0]), [
      'selector[1]', 'selector[2]', 'selector[3]', 'selector[4]', 'selector[5]', 'selector[6]',
    ]);
    assert.ok('reasons' in parseLabelSelector(42));
  });

  test('label sets: keys with a DNS prefix and 63-character names and values', () => {
    assert.deepEqual(validateClusterLabels({ env: 'prod', 'example.com/tier': 'web', empty: '', ['n'.repeat(63)]: 'v'.repeat(63) }), []);
    const reasons = validateClusterLabels({ ['n'.repeat(64)]: 'x', 'Bad_Prefix/x': 'y', ok: 'v'.repeat(64), 'x/': 'z', good: 'a b' });
    assert.equal(reasons.length, 5, reasons.join('\n'));
    assert.deepEqual(validateClusterLabels([]), ['labels must be a plain object of label keys to values']);
  });
});
