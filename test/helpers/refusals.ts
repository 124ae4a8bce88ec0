import assert from 'node:assert/strict';

/**
 * One expected problem of an input-check refusal: the member's path and its reason token, and,
 * where the test is about the wording, the sentence (exact, or a pattern).
 */
export type TExpectedProblem = readonly [path: string, reason: string] | readonly [path: string, reason: string, message: string | RegExp];

/** The problems a refusal's error data carries, as `[path, reason, message]`, in order. */
export const problemsOf = (refusalArg: Record<string, unknown>): Array<[string | undefined, string | undefined, string]> =>
  ((refusalArg.causes ?? []) as Array<{ path?: string; reason?: string; message: string }>)
    .map((causeArg) => [causeArg.path, causeArg.reason, causeArg.message]);

/**
 * Asserts an input-check refusal (`invalid-request`, not retryable): exactly the expected problems in order, each
 * with its path and reason token (and its message when given), and `reasons` the distinct tokens
 * in order of first appearance.
 */
export const assertFieldProblems = (refusalArg: Record<string, unknown>, expectedArg: readonly TExpectedProblem[]): void => {
  const context = JSON.stringify(refusalArg);
  assert.equal(refusalArg.code, 'invalid-request', context);
  assert.equal(refusalArg.retryable, false, context);
  const problems = problemsOf(refusalArg);
  assert.deepEqual(problems.map(([path, reason]) => [path, reason]), expectedArg.map(([path, reason]) => [path, reason]), context);
  expectedArg.forEach((expected, index) => {
    const message = expected[2];
    if (typeof message === 'string') {
      assert.equal(problems[index][2], message, context);
    } else if (message instanceof RegExp) {
      assert.match(problems[index][2], message, context);
    }
  });
  assert.deepEqual(refusalArg.reasons, [...new Set(expectedArg.map(([, reason]) => reason))], context);
};

/** Asserts that the refusal names the problem (among others): path and token, and the message when given. */
export const assertHasFieldProblem = (refusalArg: Record<string, unknown>, expectedArg: TExpectedProblem): void => {
  const context = JSON.stringify(refusalArg);
  const [path, reason, message] = expectedArg;
  const found = problemsOf(refusalArg).find(([foundPath, foundReason, foundMessage]) => foundPath === path && foundReason === reason
    && (message === undefined || (typeof message === 'string' ? foundMessage === message : message.test(foundMessage))));
  assert.ok(found, `no problem ${path} ${reason}${message ? ` ${message}` : ''} in ${context}`);
  assert.ok((refusalArg.reasons as string[] | undefined)?.includes(reason), context);
};

/** Each cause of a refusal as one sentence, its path first when it has one (`answer.found must be a boolean`). */
export const causeSentencesOf = (refusalArg: Record<string, unknown>): string[] =>
  ((refusalArg.causes ?? []) as Array<{ path?: string; message: string }>).map((causeArg) => (causeArg.path ? `${causeArg.path} ${causeArg.message}` : causeArg.message));
