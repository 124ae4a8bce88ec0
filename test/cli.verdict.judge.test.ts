import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serviceVerdictText } from '../ts/cli/tables.js';

/** The STATUS column of `services list`: what it says for each verdict the overview can hold. */

test('a verdict that is not current reads `unknown <reason>`, whatever the last stored one was', () => {
  assert.equal(serviceVerdictText({ state: 'converged', reason: null }, { reason: 'relay-disconnected' }), 'unknown relay-disconnected');
  assert.equal(serviceVerdictText(null, { reason: 'observed-state-stale' }), 'unknown observed-state-stale');
});

test('a current verdict reads its state and reason; none judged yet reads -', () => {
  assert.equal(serviceVerdictText({ state: 'converged', reason: null }, null), 'converged');
  assert.equal(serviceVerdictText({ state: 'refused', reason: 'volume-initialization-unknown' }, null), 'refused volume-initialization-unknown');
  assert.equal(serviceVerdictText(null, null), '-');
});
