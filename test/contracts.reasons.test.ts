import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findReasons, findReasonsInSource, type IFoundReason } from '../scripts/refusal-reasons.js';
import { accessDeniedReason, isRefusalReasonToken, methodNotServedReason, mutationIdReusedReason } from '../ts/core/errors.js';
import { accountReasons } from '../ts/manager.admin/decide.js';
import { fieldProblem, fieldProblemReasons, invalidField, isArrayOf, isBoolean, isString, problemsOfSentences, refuseFields, sentenceOfProblem } from '../ts/core/validation.js';
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
const inlineSentencesPerFile: Record<string, number> = {};

/**
 * Reasons handed to a refusal builder that the check cannot read (a variable, a property, a
 * parameter), by file and expression, each with where its tokens come from. A new one fails the
 * check until it is written out, or listed here with its source of tokens; one that went away
 * must leave the list.
 */
const opaqueReasonsExplained: Record<string, string> = {
  'ts/core/envelopepeer.ts frame.reasons': 'readFrame: the distinct boundaryReasons tokens of its problems (ts/core/boundary.ts)',
  'ts/core/envelopepeer.ts reasonsArg': 'settleUnreadableFrame: the frame.reasons of readFrame, as above',
  'ts/core/envelopepeer.ts reason': 'admitRequest: socket-rate-exceeded or socket-busy, written out beside it',
  'ts/core/transport.ts frame.reasons': 'readFrame, as above',
  'ts/manager.admin/admin.manager.ts revoked': 'revocationOf: a TAccountReason, a member of accountReasons',
  'ts/manager.backup/transfers.ts error.reason': 'attachReceiver\'s StreamAbortedError: its channel\'s close reason or streamAbortReasons.tooManyStreams',
  'ts/manager.image/transfers.ts error.reason': 'attachReceiver\'s StreamAbortedError, as above',
  'ts/manager.desiredstate/operations.ts verdict.reasons': 'judgeObservedReport\'s conflict: [\'desired-revision-stale\'] (its invalid-request sentences go through refuseFields)',
  'ts/manager.secret/decide.ts verdict': 'judgeEnrollmentCompletion: a member of secretRefusalReasons',
  'ts/manager.secret/secret.manager.ts verdict': 'judgeEnrollmentCompletion, as above',
  'ts/manager.rollout/operations.ts reasons': 'createRollout: members of rolloutReasons (every reason of the request at once), written out beside it',
  'ts/manager.secret/secretgroups.ts reasons': 'judgeSealedCopies: members of secretGroupReasons (bindingMismatch, recipientNotEnrolled, recipientUnknown), written out beside it',
};

test('every reason in every refusal dictionary of the server and the dashboard is a machine token', (t) => {
  const { dictionaries } = foundReasons();
  t.diagnostic(`${dictionaries.length} dictionary reasons checked`);
  // The dictionaries of every domain are found, not only a few: the count is far above any one of them.
  assert.ok(dictionaries.length >= 80, `found only ${dictionaries.length} dictionary reasons`);
  assert.deepEqual(described(dictionaries.filter((reasonArg) => !reasonArg.token)), []);
});

test('the check names prose in a dictionary, a single reason constant and an inline refusal, also when built at run time', () => {
  const { dictionaries, inline } = findReasonsInSource('example.ts', [
    "export const exampleReasons = Object.freeze({ gone: 'example-gone', busy: 'the example is busy' } as const);",
    "export const exampleListReasons = ['first-reason', 'Second reason'] as const;",
    "export const exampleReason = 'example reason';",
    'const notExported = { reasons: \'not looked at\' };',
    "throw refuse('conflict', ['example-busy', 'example is busy', `example ${id} is busy`]);",
    "throw refuseNamed('not-found', 'example-gone', `example ${id} is gone`, 'request.id');",
    "throw refuseNamed('not-found', 'Example gone', 'gone');",
    "throw refuseNamed('not-found', exampleReasons.gone, 'gone');",
    "throw refuseNamed('not-found', blobStoreReason(prefix, code), 'gone');",
    // Built at run time: a template or a concatenation is a token only when what it writes out is a token's pieces.
    "throw refuse('not-found', [`${kind}-not-found`, `node ${id} is gone`, 'node ' + id + ' is gone', prefix + '-gone']);",
    "throw refuse('not-found', ids.map((id) => `node ${id} is not here`));",
    "throw refuse('not-found', ids.map((id) => { return exampleReasons.gone; }));",
    "throw refuse('conflict', [taken ? exampleReasons.busy : `a cluster named ${name} exists`]);",
    "throw refuseNamed('conflict', taken ? exampleReasons.busy : exampleReasons.gone, 'taken');",
    "throw refuse('unavailable', [`upload-failed: ${error}`.slice(0, 500)]);",
    'return refusalEnvelope(id, method, [`${text} is not valid JSON`]);',
    "return transportRefusal(null, null, 'the HTTP request is malformed', []);",
    "throw relayUnavailable([`relay ${id} is gone`]);",
    "throw accountRefusal('not-found', 'User not found');",
  ].join('\n'));
  assert.deepEqual(dictionaries.filter((reasonArg) => !reasonArg.token).map((reasonArg) => reasonArg.where),
    ['exampleReasons.busy', 'exampleListReasons[1]', 'exampleReason']);
  assert.equal(dictionaries.filter((reasonArg) => reasonArg.token).length, 2);
  assert.deepEqual(inline.map((reasonArg) => [reasonArg.where, reasonArg.token]), [
    ['refuse', true], ['refuse', false], ['refuse', false],
    ['refuseNamed', true], ['refuseNamed', false], ['refuseNamed', true], ['refuseNamed', true],
    ['refuse', true], ['refuse', false], ['refuse', false], ['refuse', true],
    ['refuse', false],
    ['refuse', true],
    ['refuse', false],
    ['refuseNamed', true],
    ['refuse', false],
    ['refusalEnvelope', false],
    ['transportRefusal', false],
    ['relayUnavailable', false],
    ['accountRefusal', false],
  ]);
});

test('the reasons the dashboard and the CLI branch on are tokens', () => {
  for (const reason of [methodNotServedReason, mutationIdReusedReason, accessDeniedReason, ...Object.values(accountReasons), ...Object.values(fieldProblemReasons), ...Object.values(identityReasons)]) {
    assert.ok(isRefusalReasonToken(reason), reason);
  }
});

test('no refusal hands over reasons the check cannot read, but those listed with where their tokens come from', () => {
  const { opaque } = foundReasons();
  const unexplained = opaque.filter((reasonArg) => !(`${reasonArg.file} ${reasonArg.text}` in opaqueReasonsExplained));
  assert.deepEqual(described(unexplained), [],
    'write the reasons out (a dictionary member, a …Reason constant), or refuse input problems with refuseFields (ts/core/validation.ts); tokens in reasons, sentences in causes');
  const seen = new Set(opaque.map((reasonArg) => `${reasonArg.file} ${reasonArg.text}`));
  assert.deepEqual(Object.keys(opaqueReasonsExplained).filter((keyArg) => !seen.has(keyArg)), [], 'these are gone: take them off opaqueReasonsExplained');
});

test('the check names reasons that are a variable, a call or a spread, except a refusal builder passing its own parameter on', () => {
  const { opaque } = findReasonsInSource('example.ts', [
    "throw refuse('invalid-request', reasons);",
    "throw refuse('invalid-request', validate(request));",
    "throw refuse('invalid-request', ['field-invalid', ...more]);",
    "throw refuse('invalid-request', ['field-invalid']);",
    "throw refuse('conflict', reasons);",
    "throw refuseNamed('not-found', reasonOf(example), 'gone');",
    "throw refuse('conflict', ids.map(describe));",
    'const transportRefusal = (idArg, methodArg, reasonsArg) => refusalEnvelope(idArg, methodArg, reasonsArg);',
    'const relayUnavailable = (reasonsArg) => refuse(\'unavailable\', [...reasonsArg]);',
    "throw relayUnavailable([relayCallFailureReasons.answerInvalid, ...flaws.filter(isRefusalReasonToken)]);",
  ].join('\n'));
  assert.deepEqual(opaque.map((reasonArg) => reasonArg.text),
    ['reasons', 'validate(request)', 'more', 'reasons', 'reasonOf(example)', 'ids.map(describe)']);
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

test('a contract validator\'s sentences become field problems: the path is the first word under the root, the token read from the wording', () => {
  const sentences = [
    'request.spec.name is required',
    'request.spec.colour is not a known member',
    'request.spec.kind must be one of a, b',
    'request.spec.tags must have at most 3 tags',
    'request.spec.ports[1] repeats the port of an earlier entry',
    'request.spec.nodeId names no node of this cluster',
    'request.spec.id is no lease Cloudly allocated',
    'request.spec.initialization must be omitted',
    'request.spec.size must be a non-negative integer',
    'cluster node corestore must use its exact schema',
  ];
  const problems = problemsOfSentences(sentences, 'request.spec');
  assert.deepEqual(problems.map((problemArg) => [problemArg.path, problemArg.reason]), [
    ['request.spec.name', 'field-required'],
    ['request.spec.colour', 'field-unknown'],
    ['request.spec.kind', 'field-not-supported'],
    ['request.spec.tags', 'field-too-many'],
    ['request.spec.ports[1]', 'field-duplicate'],
    ['request.spec.nodeId', 'field-not-found'],
    ['request.spec.id', 'field-not-found'],
    ['request.spec.initialization', 'field-forbidden'],
    ['request.spec.size', 'field-invalid'],
    // Not under the root: the root is the path and the sentence the whole message.
    ['request.spec', 'field-invalid'],
  ]);
  assert.equal(problems[0].message, 'is required');
  assert.equal(problems[9].message, 'cluster node corestore must use its exact schema');
  // Contract error data words each problem back exactly as the validator did.
  assert.deepEqual(problems.slice(0, 9).map(sentenceOfProblem), sentences.slice(0, 9));
});

test('refuseFields: the distinct tokens in order of first appearance, every problem a cause in order', () => {
  const refusal = refuseFields([
    invalidField('request.a', 'must be a boolean'),
    fieldProblem('request.b', fieldProblemReasons.unknown, 'is not a field of this request'),
    invalidField('request.c', 'must be an array'),
  ]);
  assert.deepEqual(refusal.errorData, {
    code: 'invalid-request',
    retryable: false,
    reasons: ['field-invalid', 'field-unknown'],
    causes: [
      { path: 'request.a', reason: 'field-invalid', message: 'must be a boolean' },
      { path: 'request.b', reason: 'field-unknown', message: 'is not a field of this request' },
      { path: 'request.c', reason: 'field-invalid', message: 'must be an array' },
    ],
  });
  // A string of the wrong type is invalid, one past its limit too long; a list past its limit too many.
  assert.deepEqual(isString(1, 3)(7, 'request.s').map((problemArg) => problemArg.reason), ['field-invalid']);
  assert.deepEqual(isString(1, 3)('long', 'request.s').map((problemArg) => problemArg.reason), ['field-too-long']);
  assert.deepEqual(isArrayOf(isBoolean, 1)([true, false], 'request.l').map((problemArg) => problemArg.reason), ['field-too-many']);
  assert.deepEqual(isArrayOf(isBoolean, 2)([true, 1], 'request.l'), [invalidField('request.l[1]', 'must be a boolean')]);
});

test('a blob store failure\'s reason is a token for every kind of blob and every store code', () => {
  const reasons = blobStoreReasonPrefixes.flatMap((prefixArg) => blobStoreErrorCodes.map((codeArg) => blobStoreReason(prefixArg, codeArg)));
  assert.equal(reasons.length, blobStoreReasonPrefixes.length * blobStoreErrorCodes.length);
  assert.deepEqual(reasons.filter((reasonArg) => !isRefusalReasonToken(reasonArg)), []);
  assert.equal(blobStoreReason('closure', 'blob-store-unavailable'), 'closure-blob-store-unavailable');
});
