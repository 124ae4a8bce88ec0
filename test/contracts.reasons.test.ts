import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findReasons, findReasonsInSource, type IFoundReason } from '../scripts/refusal-reasons.js';
import { accessDeniedReason, isRefusalReasonToken, methodNotServedReason, mutationIdReusedReason } from '../ts/core/errors.js';
import { accountReasons } from '../ts/manager.admin/decide.js';
import { fieldProblemReasons } from '../ts/core/validation.js';

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
  'ts/core/auth.ts': 6,
  'ts/core/envelopepeer.ts': 1,
  'ts/core/instancelinks.ts': 1,
  'ts/core/instances.ts': 3,
  'ts/manager.admin/admin.manager.ts': 1,
  'ts/manager.backup/operations.ts': 1,
  'ts/manager.backup/transfers.ts': 1,
  'ts/manager.cluster/decide.ts': 3,
  'ts/manager.cluster/operations.ts': 1,
  'ts/manager.cluster/relayelection.ts': 2,
  'ts/manager.corestore/corestore.manager.ts': 7,
  'ts/manager.desiredstate/decide.ts': 1,
  'ts/manager.image/transfers.ts': 1,
  'ts/manager.ingress/decide.ts': 4,
  'ts/manager.ingress/operations.ts': 2,
  'ts/manager.operation/decide.ts': 1,
  'ts/manager.runtimenetwork/decide.ts': 1,
  'ts/manager.secret/decide.ts': 3,
  'ts/manager.secret/secret.manager.ts': 2,
  'ts/manager.service/organizations.ts': 1,
  'ts/manager.service/service.manager.ts': 2,
  'ts/manager.watch/watch.manager.ts': 1,
  'ts/sim/cluster.ts': 1,
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
  ].join('\n'));
  assert.deepEqual(dictionaries.filter((reasonArg) => !reasonArg.token).map((reasonArg) => reasonArg.where),
    ['exampleReasons.busy', 'exampleListReasons[1]', 'exampleReason']);
  assert.equal(dictionaries.filter((reasonArg) => reasonArg.token).length, 2);
  assert.deepEqual(inline.map((reasonArg) => reasonArg.token), [true, false, false, true, false]);
});

test('the reasons the dashboard and the CLI branch on are tokens', () => {
  for (const reason of [methodNotServedReason, mutationIdReusedReason, accessDeniedReason, ...Object.values(accountReasons), ...Object.values(fieldProblemReasons)]) {
    assert.ok(isRefusalReasonToken(reason), reason);
  }
});

test('no input refusal hands its reasons over unwritten: invalid-request reasons are literal lists or the field tokens of refuseFields', () => {
  const { opaque } = foundReasons();
  assert.deepEqual(described(opaque), [], 'refuse the problems with refuseFields (ts/core/validation.ts): tokens in reasons, sentences in causes');
});

test('the check names an invalid-request refusal whose reasons are a variable, a call or a spread', () => {
  const { opaque } = findReasonsInSource('example.ts', [
    "throw refuse('invalid-request', reasons);",
    "throw refuse('invalid-request', validate(request));",
    "throw refuse('invalid-request', ['field-invalid', ...more]);",
    "throw refuse('invalid-request', ['field-invalid']);",
    "throw refuse('conflict', reasons);",
  ].join('\n'));
  assert.deepEqual(opaque.map((reasonArg) => reasonArg.text), ['reasons', 'validate(request)', "['field-invalid', ...more]"]);
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
