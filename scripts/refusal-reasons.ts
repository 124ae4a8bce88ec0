/**
 * Reads the source for refusal reasons and says which are not machine tokens.
 *
 * All syntactic (the TypeScript parser, no type checking, no import of the server):
 * - dictionaries: every exported `const …Reason` / `…Reasons` whose value is a string, an object
 *   or an array literal (through `as const` and `Object.freeze`); each string in it is a reason;
 * - inline reasons: every reason handed to one of Cloudly's own refusal builders (`refuse`,
 *   `refusalFor`, `refusalData`, `refusalEnvelope`, `transportRefusal`, `relayUnavailable`: a list;
 *   `refuseNamed`, `accountRefusal`: one). A literal must be a token. A reason built at run time is
 *   judged by what is written: a template literal or a concatenation is a token only when every
 *   piece written out is a token's piece (`${prefix}-not-found`), so a sentence built from parts is
 *   prose; a conditional is judged by both branches; a list made by `.map` by what its callback
 *   returns. A dictionary member (`identityReasons.expired`), a single reason constant
 *   (`accessDeniedReason`) or a call of a `…Reason` function stands for a token (the dictionary
 *   reading and their own tests hold those);
 * - opaque reasons: a reason or a list of them that none of that can read (a variable, a call, a
 *   spread). test/contracts.reasons.test.ts lists each one with where its tokens come from, so a new
 *   one cannot hide a sentence unseen. A builder's own parameter inside another builder (a wrapper)
 *   is checked at the wrapper's calls instead; `refuseFields` (ts/core/validation.ts, the one place
 *   that gathers the `field-…` tokens of typed problems) is not counted.
 *
 * A contract's own error data (`contractRefusal`, e.g. the volume initialization's) is the
 * contract's shape and is not read here.
 *
 * `node --import tsx scripts/refusal-reasons.ts` prints all three; test/contracts.reasons.test.ts
 * holds the dictionaries and the inline reasons to tokens and the opaque ones to its list.
 */
import ts from 'typescript';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { refusalReasonTokenPattern } from '../ts/interfaces/data/refusal.js';

export const repositoryRoot = fileURLToPath(new URL('..', import.meta.url));

export interface IFoundReason {
  file: string;
  line: number;
  /** The dictionary's name and member (`accountReasons.userNotFound`), or `refuse` for an inline one. */
  where: string;
  text: string;
  token: boolean;
}

const dictionaryName = /Reasons?$/;

const sourceFilesUnder = (dirArg: string): string[] => readdirSync(dirArg, { withFileTypes: true }).flatMap((entryArg) => {
  const path = join(dirArg, entryArg.name);
  if (entryArg.isDirectory()) {
    return sourceFilesUnder(path);
  }
  return path.endsWith('.ts') && !path.endsWith('.generated.ts') ? [path] : [];
});

/** `x as const`, `Object.freeze(x)`, `(x)`, `x satisfies T` → x. */
const unwrap = (nodeArg: ts.Expression): ts.Expression => {
  if (ts.isAsExpression(nodeArg) || ts.isSatisfiesExpression(nodeArg) || ts.isParenthesizedExpression(nodeArg)) {
    return unwrap(nodeArg.expression);
  }
  if (ts.isCallExpression(nodeArg) && nodeArg.expression.getText() === 'Object.freeze' && nodeArg.arguments.length === 1) {
    return unwrap(nodeArg.arguments[0]);
  }
  return nodeArg;
};

const literalText = (nodeArg: ts.Node): string | null =>
  (ts.isStringLiteral(nodeArg) || ts.isNoSubstitutionTemplateLiteral(nodeArg) ? nodeArg.text : null);

/** Cloudly's own refusal builders and where each takes its reasons: a list at `list`, or one reason at `single`. */
const reasonBuilders: ReadonlyMap<string, { list?: number; single?: number }> = new Map([
  ['refuse', { list: 1 }],
  ['refusalFor', { list: 1 }],
  ['refusalData', { list: 1 }],
  ['refusalEnvelope', { list: 2 }],
  ['transportRefusal', { list: 2 }],
  ['relayUnavailable', { list: 0 }],
  ['refuseNamed', { single: 1 }],
  ['accountRefusal', { single: 1 }],
]);

type TVerdict = 'token' | 'prose' | 'opaque';

const worst = (verdictsArg: TVerdict[]): TVerdict =>
  (verdictsArg.includes('prose') ? 'prose' : verdictsArg.includes('opaque') ? 'opaque' : 'token');

/** A piece of a token (`not-found`, `-taken`, ``): what a template or a concatenation may write out around its parts. */
const tokenPiece = /^[a-z0-9-]*$/;

/** String methods whose result is judged by the text they are called on. */
const stringMethods = new Set(['slice', 'substring', 'trim', 'toLowerCase']);

/** `(x)`, `x as T`, `x satisfies T`, `x!` → x. */
const unwrapExpression = (nodeArg: ts.Expression): ts.Expression =>
  (ts.isParenthesizedExpression(nodeArg) || ts.isAsExpression(nodeArg) || ts.isSatisfiesExpression(nodeArg) || ts.isNonNullExpression(nodeArg)
    ? unwrapExpression(nodeArg.expression)
    : nodeArg);

/** The name a call is made by: `f(…)` → f, `a.b.f(…)` → f. */
const calleeName = (callArg: ts.CallExpression): string | null =>
  (ts.isIdentifier(callArg.expression) ? callArg.expression.text : ts.isPropertyAccessExpression(callArg.expression) ? callArg.expression.name.text : null);

/** The pieces of `a + b + …` (a concatenation), each operand once. */
const concatenated = (nodeArg: ts.Expression): ts.Expression[] => {
  const node = unwrapExpression(nodeArg);
  return ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken
    ? [...concatenated(node.left), ...concatenated(node.right)]
    : [node];
};

/** What one reason expression is, judged by what is written. */
const judgeReason = (nodeArg: ts.Expression): TVerdict => {
  const node = unwrapExpression(nodeArg);
  const literal = literalText(node);
  if (literal !== null) {
    return refusalReasonTokenPattern.test(literal) ? 'token' : 'prose';
  }
  if (ts.isTemplateExpression(node)) {
    const pieces = [node.head.text, ...node.templateSpans.map((spanArg) => spanArg.literal.text)];
    return pieces.every((pieceArg) => tokenPiece.test(pieceArg)) ? 'token' : 'prose';
  }
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
    const parts = concatenated(node);
    // A written piece decides: any prose in it makes the whole a sentence.
    return parts.some((partArg) => {
      const text = literalText(partArg);
      return (text !== null && !tokenPiece.test(text)) || (ts.isTemplateExpression(partArg) && judgeReason(partArg) === 'prose');
    }) ? 'prose' : 'token';
  }
  if (ts.isConditionalExpression(node)) {
    return worst([judgeReason(node.whenTrue), judgeReason(node.whenFalse)]);
  }
  if (ts.isIdentifier(node) && /Reason$/.test(node.text)) {
    return 'token';
  }
  if (ts.isPropertyAccessExpression(node) && /Reasons$/.test(node.expression.getText())) {
    return 'token';
  }
  if (ts.isCallExpression(node) && /Reason$/.test(calleeName(node) ?? '')) {
    return 'token';
  }
  // `text.slice(…)` and the like are the text they cut.
  if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && stringMethods.has(node.expression.name.text)) {
    return judgeReason(node.expression.expression);
  }
  return 'opaque';
};

/** What a `.map` callback returns, each return judged. */
const judgeMapped = (callbackArg: ts.Expression): TVerdict => {
  const callback = unwrapExpression(callbackArg);
  if (!ts.isArrowFunction(callback) && !ts.isFunctionExpression(callback)) {
    return 'opaque';
  }
  if (!ts.isBlock(callback.body)) {
    return judgeReason(callback.body);
  }
  const returned: ts.Expression[] = [];
  const visitReturns = (nodeArg: ts.Node): void => {
    if (ts.isReturnStatement(nodeArg) && nodeArg.expression) {
      returned.push(nodeArg.expression);
    }
    if (!ts.isFunctionLike(nodeArg)) {
      ts.forEachChild(nodeArg, visitReturns);
    }
  };
  ts.forEachChild(callback.body, visitReturns);
  return returned.length > 0 ? worst(returned.map(judgeReason)) : 'opaque';
};

/** What a list of reasons is: a written list judged member by member, a `.map` by its callback. */
const judgeReasonList = (nodeArg: ts.Expression): Array<{ node: ts.Node; verdict: TVerdict }> => {
  const node = unwrapExpression(nodeArg);
  if (ts.isArrayLiteralExpression(node)) {
    return node.elements.flatMap((elementArg) => (ts.isSpreadElement(elementArg)
      ? judgeReasonList(elementArg.expression)
      : [{ node: elementArg, verdict: judgeReason(elementArg) }]));
  }
  if (ts.isCallExpression(node) && calleeName(node) === 'map' && node.arguments[0]) {
    return [{ node, verdict: judgeMapped(node.arguments[0]) }];
  }
  // Only tokens pass this filter (ts/interfaces/data/refusal.ts).
  if (ts.isCallExpression(node) && calleeName(node) === 'filter' && node.arguments[0]?.getText() === 'isRefusalReasonToken') {
    return [{ node, verdict: 'token' }];
  }
  // A builder that takes one reason where a list is expected (a wrapper's convenience).
  return [{ node, verdict: judgeReason(node) }];
};

/** The name of the builder a node is written in, with that builder's parameter names, or null. */
const enclosingBuilder = (nodeArg: ts.Node): { parameters: Set<string> } | null => {
  for (let node: ts.Node | undefined = nodeArg.parent; node; node = node.parent) {
    if (ts.isFunctionLike(node)) {
      const name = ts.isFunctionDeclaration(node) && node.name ? node.name.text
        : node.parent && ts.isVariableDeclaration(node.parent) && ts.isIdentifier(node.parent.name) ? node.parent.name.text : null;
      if (name === null || !reasonBuilders.has(name)) {
        return null;
      }
      return { parameters: new Set(node.parameters.map((parameterArg) => parameterArg.name.getText())) };
    }
  }
  return null;
};

/** A builder's own parameter passed on inside another builder: its reasons are checked where the builder is called. */
const isWrappersParameter = (nodeArg: ts.Node): boolean => {
  const builder = enclosingBuilder(nodeArg);
  if (!builder) {
    return false;
  }
  const node = ts.isExpression(nodeArg) ? unwrapExpression(nodeArg) : nodeArg;
  if (ts.isIdentifier(node)) {
    return builder.parameters.has(node.text);
  }
  return false;
};

/** Every reason of one source text (its path is only for the report). */
export const findReasonsInSource = (fileArg: string, sourceArg: string): { dictionaries: IFoundReason[]; inline: IFoundReason[]; opaque: IFoundReason[] } => {
  const source = ts.createSourceFile(fileArg, sourceArg, ts.ScriptTarget.Latest, true);
  const dictionaries: IFoundReason[] = [];
  const inline: IFoundReason[] = [];
  const opaque: IFoundReason[] = [];
  const isValidationFile = fileArg.split(sep).join('/') === 'ts/core/validation.ts';
  const found = (nodeArg: ts.Node, whereArg: string, textArg: string, tokenArg = refusalReasonTokenPattern.test(textArg)): IFoundReason => ({
    file: fileArg,
    line: source.getLineAndCharacterOfPosition(nodeArg.getStart(source)).line + 1,
    where: whereArg,
    text: textArg,
    token: tokenArg,
  });
  const readDictionary = (nameArg: string, valueArg: ts.Expression): void => {
    const value = unwrap(valueArg);
    const text = literalText(value);
    if (text !== null) {
      dictionaries.push(found(value, nameArg, text));
    } else if (ts.isObjectLiteralExpression(value)) {
      for (const member of value.properties) {
        if (ts.isPropertyAssignment(member)) {
          readDictionary(`${nameArg}.${member.name.getText(source)}`, member.initializer);
        }
      }
    } else if (ts.isArrayLiteralExpression(value)) {
      value.elements.forEach((elementArg, indexArg) => readDictionary(`${nameArg}[${indexArg}]`, elementArg));
    }
  };
  const record = (builderArg: string, judgedArg: Array<{ node: ts.Node; verdict: TVerdict }>): void => {
    for (const { node, verdict } of judgedArg) {
      const text = literalText(node) ?? node.getText(source);
      if (verdict !== 'opaque') {
        inline.push(found(node, builderArg, text, verdict === 'token'));
      } else if (!isWrappersParameter(node) && !isValidationFile) {
        opaque.push(found(node, builderArg, text, false));
      }
    }
  };
  const visit = (nodeArg: ts.Node): void => {
    if (ts.isVariableStatement(nodeArg) && nodeArg.modifiers?.some((modifierArg) => modifierArg.kind === ts.SyntaxKind.ExportKeyword)) {
      for (const declaration of nodeArg.declarationList.declarations) {
        if (ts.isIdentifier(declaration.name) && dictionaryName.test(declaration.name.text) && declaration.initializer) {
          readDictionary(declaration.name.text, declaration.initializer);
        }
      }
    }
    const builder = ts.isCallExpression(nodeArg) && ts.isIdentifier(nodeArg.expression) ? reasonBuilders.get(nodeArg.expression.text) : undefined;
    if (builder && ts.isCallExpression(nodeArg)) {
      const name = (nodeArg.expression as ts.Identifier).text;
      const listArgument = builder.list !== undefined ? nodeArg.arguments[builder.list] : undefined;
      const singleArgument = builder.single !== undefined ? nodeArg.arguments[builder.single] : undefined;
      if (listArgument) {
        record(name, judgeReasonList(listArgument));
      }
      if (singleArgument) {
        record(name, [{ node: singleArgument, verdict: judgeReason(singleArgument) }]);
      }
    }
    ts.forEachChild(nodeArg, visit);
  };
  visit(source);
  return { dictionaries, inline, opaque };
};

/** Every reason in the server's and the dashboard's source (ts/, web/src/). */
export const findReasons = (rootArg: string = repositoryRoot): { dictionaries: IFoundReason[]; inline: IFoundReason[]; opaque: IFoundReason[] } => {
  const dictionaries: IFoundReason[] = [];
  const inline: IFoundReason[] = [];
  const opaque: IFoundReason[] = [];
  for (const file of [...sourceFilesUnder(join(rootArg, 'ts')), ...sourceFilesUnder(join(rootArg, 'web', 'src'))]) {
    const found = findReasonsInSource(relative(rootArg, file), readFileSync(file, 'utf8'));
    dictionaries.push(...found.dictionaries);
    inline.push(...found.inline);
    opaque.push(...found.opaque);
  }
  return { dictionaries, inline, opaque };
};

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { dictionaries, inline, opaque } = findReasons();
  const prose = (listArg: IFoundReason[]): IFoundReason[] => listArg.filter((reasonArg) => !reasonArg.token);
  console.log(`dictionaries: ${dictionaries.length} reasons, ${prose(dictionaries).length} not tokens`);
  for (const reason of prose(dictionaries)) {
    console.log(`  ${reason.file}:${reason.line} ${reason.where} ${JSON.stringify(reason.text)}`);
  }
  console.log(`inline in the refusal builders: ${inline.length} reasons, ${prose(inline).length} not tokens`);
  for (const reason of prose(inline)) {
    console.log(`  ${reason.file}:${reason.line} ${reason.text.slice(0, 100)}`);
  }
  console.log(`reasons not written out (opaque): ${opaque.length}`);
  for (const reason of opaque) {
    console.log(`  ${reason.file}:${reason.line} ${reason.text.slice(0, 100)}`);
  }
}
