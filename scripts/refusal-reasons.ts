/**
 * Reads the source for refusal reasons and says which are not machine tokens.
 *
 * Two readings, both syntactic (the TypeScript parser, no type checking, no import of the server):
 * - dictionaries: every exported `const …Reason` / `…Reasons` whose value is a string, an object
 *   or an array literal (through `as const` and `Object.freeze`); each string in it is a reason;
 * - inline reasons: string and template literals written straight into `refuse(code, [ … ])` (or `refusalFor`, its `CloudlyRefusal` twin), and
 *   the reason of `refuseNamed(code, reason, message)` (a literal token, or a reason dictionary's
 *   member such as `identityReasons.expired`);
 * - opaque input refusals: `refuse('invalid-request', list)` whose reasons are not a literal list (a
 *   variable, a call, a spread): how an input check's sentences reached `reasons` before every
 *   input check answered field problems (`refuseFields`, ts/core/validation.ts, the one place that
 *   gathers the `field-…` tokens of typed problems, is not counted).
 *
 * `node --import tsx scripts/refusal-reasons.ts` prints both; test/contracts.reasons.test.ts holds
 * the dictionaries to tokens and the inline prose to its recorded count.
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

/**
 * A reason given by name rather than written out: a member of a reason dictionary
 * (`identityReasons.expired`) or a single reason constant (`accessDeniedReason`). The dictionary
 * reading holds its text to a token, so the reference is one.
 */
const namesDictionaryMember = (nodeArg: ts.Expression): boolean =>
  (ts.isPropertyAccessExpression(nodeArg) && ts.isIdentifier(nodeArg.expression) && /Reasons$/.test(nodeArg.expression.text))
  || (ts.isIdentifier(nodeArg) && /Reason$/.test(nodeArg.text));

/** Every reason of one source text (its path is only for the report). */
export const findReasonsInSource = (fileArg: string, sourceArg: string): { dictionaries: IFoundReason[]; inline: IFoundReason[]; opaque: IFoundReason[] } => {
  const source = ts.createSourceFile(fileArg, sourceArg, ts.ScriptTarget.Latest, true);
  const dictionaries: IFoundReason[] = [];
  const inline: IFoundReason[] = [];
  const opaque: IFoundReason[] = [];
  const found = (nodeArg: ts.Node, whereArg: string, textArg: string): IFoundReason => ({
    file: fileArg,
    line: source.getLineAndCharacterOfPosition(nodeArg.getStart(source)).line + 1,
    where: whereArg,
    text: textArg,
    token: refusalReasonTokenPattern.test(textArg),
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
  const visit = (nodeArg: ts.Node): void => {
    if (ts.isVariableStatement(nodeArg) && nodeArg.modifiers?.some((modifierArg) => modifierArg.kind === ts.SyntaxKind.ExportKeyword)) {
      for (const declaration of nodeArg.declarationList.declarations) {
        if (ts.isIdentifier(declaration.name) && dictionaryName.test(declaration.name.text) && declaration.initializer) {
          readDictionary(declaration.name.text, declaration.initializer);
        }
      }
    }
    if (ts.isCallExpression(nodeArg) && ts.isIdentifier(nodeArg.expression) && (nodeArg.expression.text === 'refuse' || nodeArg.expression.text === 'refusalFor')
      && nodeArg.arguments[1] && ts.isArrayLiteralExpression(nodeArg.arguments[1])) {
      for (const element of nodeArg.arguments[1].elements) {
        const text = literalText(element) ?? (ts.isTemplateExpression(element) ? element.getText(source) : null);
        if (text !== null) {
          inline.push({ ...found(element, 'refuse', text), token: literalText(element) !== null && refusalReasonTokenPattern.test(text) });
        }
      }
    }
    // `refuse('invalid-request', reasons)` with reasons that are not written out: an input check's sentences could hide there.
    if (ts.isCallExpression(nodeArg) && ts.isIdentifier(nodeArg.expression) && nodeArg.expression.text === 'refuse'
      && nodeArg.arguments[0] && literalText(nodeArg.arguments[0]) === 'invalid-request' && nodeArg.arguments[1]
      && fileArg.split(sep).join('/') !== 'ts/core/validation.ts') {
      const list = nodeArg.arguments[1];
      if (!ts.isArrayLiteralExpression(list) || list.elements.some((elementArg) => ts.isSpreadElement(elementArg))) {
        opaque.push({ ...found(list, 'refuse', list.getText(source)), token: false });
      }
    }
    // `refuseNamed(code, reason, message, path?)`: the reason is one token, the message its sentence.
    if (ts.isCallExpression(nodeArg) && ts.isIdentifier(nodeArg.expression) && nodeArg.expression.text === 'refuseNamed' && nodeArg.arguments[1]) {
      const reason = nodeArg.arguments[1];
      const literal = literalText(reason);
      const text = literal ?? reason.getText(source);
      inline.push({ ...found(reason, 'refuseNamed', text), token: literal !== null ? refusalReasonTokenPattern.test(text) : namesDictionaryMember(reason) });
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
  console.log(`inline in refuse(…): ${inline.length} literals, ${prose(inline).length} not tokens`);
  for (const reason of prose(inline)) {
    console.log(`  ${reason.file}:${reason.line} ${reason.text.slice(0, 100)}`);
  }
  console.log(`invalid-request refusals with reasons not written out: ${opaque.length}`);
  for (const reason of opaque) {
    console.log(`  ${reason.file}:${reason.line} ${reason.text.slice(0, 100)}`);
  }
}
