import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findReasons, findReasonsInSource, type IFoundReason } from '../scripts/refusal-reasons.js';
import { accessDeniedReason, isRefusalReasonToken, methodNotServedReason, mutationIdReusedReason } from '../ts/core/errors.js';
import { accountReasons } from '../ts/manager.admin/decide.js';
import { blobStoreErrorCodes, blobStoreReason, blobStoreReasonPrefixes } from '../ts/core/blobstore.js';
import { identityReasons } from '../ts/interfaces/data/refusal.js';

/** The whole source is parsed once for the tests below. */
let foundOnce: ReturnType<typeof findReasons> | null = null;
const foundReasons = (): ReturnType<typeof findReasons> => (foundOnce ??= findReasons());

const described = (reasonsArg: IFoundReason[]): string[] =>
  reasonsArg.map((reasonArg) => `${reasonArg.file}:${reasonArg.line} ${reasonArg.where} ${JSON.stringify(reasonArg.text)}`);

/**
 * Sentences still written straight into `refuse(code, [ … ])`, per file: the shape and lookup
 * refusals that name a member or an id in their reason. The count may only go down: a new inline
 * sentence fails here (give it a token in the domain's dictionary and put the sentence in
 * `causes`), and a file that lost some must lower its count so it cannot grow back unseen.
 */
const inlineSentencesPerFile: Record<string, number> = {
  // The two request-shape checks of the pipeline itself (an object request, a boolean dryRun).
  'ts/classes.cloudly.ts': 2,
};

test('every reason in every refusal dictionary of the server and the dashboard is a machine token', (t) => {
  const { dictionaries } = foundReasons();
  t.diagnostic(`${dictionaries.length} dictionary reasons checked`);
  // The dictionaries of every domain are found, not only a few: the count is far above any one of them.
  assert.ok(dictionaries.length >= 80, `found only ${dictionaries.length} dictionary reasons`);
  assert.deepEqual(described(dictionaries.filter((reasonArg) => !reasonArg.token)), []);
});

test('the check names prose in a dictionary, a single reason constant and an inline refusal', () => {
  const { dictionaries, inline } = findReasonsInSource('example.ts', [
    "export const exampleReasons = Object.freeze({ gone: 'example-gone', busy: 'the example is busy' } as const);",
    "export const exampleListReasons = ['first-reason', 'Second reason'] as const;",
    "export const exampleReason = 'example reason';",
    'const notExported = { reasons: \'not looked at\' };',
    "throw refuse('conflict', ['example-busy', 'example is busy', `example ${id} is busy`]);",
    "throw refuseNamed('not-found', 'example-gone', `example ${id} is gone`, 'request.id');",
    "throw refuseNamed('not-found', 'Example gone', 'gone');",
    "throw refuseNamed('not-found', exampleReasons.gone, 'gone');",
    "throw refuseNamed('not-found', reasonOf(example), 'gone');",
  ].join('\n'));
  assert.deepEqual(dictionaries.filter((reasonArg) => !reasonArg.token).map((reasonArg) => reasonArg.where),
    ['exampleReasons.busy', 'exampleListReasons[1]', 'exampleReason']);
  assert.equal(dictionaries.filter((reasonArg) => reasonArg.token).length, 2);
  assert.deepEqual(inline.map((reasonArg) => reasonArg.token), [true, false, false, true, false, true, false]);
});

test('the reasons the dashboard and the CLI branch on are tokens', () => {
  for (const reason of [methodNotServedReason, mutationIdReusedReason, accessDeniedReason, ...Object.values(accountReasons), ...Object.values(identityReasons)]) {
    assert.ok(isRefusalReasonToken(reason), reason);
  }
});

test('sentences written inline into refuse() do not grow: each file holds at most, and exactly, its recorded count', (t) => {
  const { inline } = foundReasons();
  const counts: Record<string, number> = {};
  for (const reason of inline.filter((reasonArg) => !reasonArg.token)) {
    counts[reason.file] = (counts[reason.file] ?? 0) + 1;
  }
  t.diagnostic(`${inline.length} inline reasons, ${Object.values(counts).reduce((sumArg, countArg) => sumArg + countArg, 0)} of them sentences`);
  const grown = Object.entries(counts).filter(([file, count]) => count > (inlineSentencesPerFile[file] ?? 0));
  assert.deepEqual(grown.map(([file]) => described(inline.filter((reasonArg) => !reasonArg.token && reasonArg.file === file))).flat(), [],
    'a new sentence as a refusal reason: give it a token and put the sentence in causes');
  const shrunk = Object.entries(inlineSentencesPerFile).filter(([file, count]) => (counts[file] ?? 0) < count);
  assert.deepEqual(shrunk.map(([file]) => `${file}: ${counts[file] ?? 0}`), [], 'lower inlineSentencesPerFile to these counts');
});

test('a blob store failure\'s reason is a token for every kind of blob and every store code', () => {
  const reasons = blobStoreReasonPrefixes.flatMap((prefixArg) => blobStoreErrorCodes.map((codeArg) => blobStoreReason(prefixArg, codeArg)));
  assert.equal(reasons.length, blobStoreReasonPrefixes.length * blobStoreErrorCodes.length);
  assert.deepEqual(reasons.filter((reasonArg) => !isRefusalReasonToken(reasonArg)), []);
  assert.equal(blobStoreReason('closure', 'blob-store-unavailable'), 'closure-blob-store-unavailable');
});
