/**
 * Reads where the reference docs state a method's request and answer, for
 * test/contracts.docs.test.ts. A statement is either inline, `` `method { a, b? }` `` followed by
 * an optional `` → `{ c }` `` (or both in one code span, which may wrap across lines), or a table
 * row whose first cell is `` `method` `` or `` `method { … }` `` and whose later cells hold
 * `` `{ … }` `` (the request, then the answer; or one cell `` `{ … }` → `{ … }` ``).
 */
export interface IMethodStatement {
  file: string;
  line: number;
  method: string;
  request: string;
  /** Null where the statement gives no answer. */
  answer: string | null;
}

const inlineStatement = /`(\w+) (\{[^`]*?\})(?:\s*→\s*(\{[^`]*\}))?`(?:\s*→\s*`(\{[^`]*\})`)?/g;
const tableRowMethod = /^\| `(\w+)(?: \{[^`]*\})?`/;

const cellsOf = (lineArg: string): string[] =>
  lineArg.split(' | ').map((cellArg) => cellArg.replace(/^\| /, '').replace(/ \|$/, '').trim());

export const findMethodStatements = (fileArg: string, textArg: string, methodsArg: ReadonlySet<string>): IMethodStatement[] => {
  const statements: IMethodStatement[] = [];
  const lineAt = (indexArg: number): number => textArg.slice(0, indexArg).split('\n').length;
  for (const match of textArg.matchAll(inlineStatement)) {
    if (!methodsArg.has(match[1])) {
      continue;
    }
    const line = lineAt(match.index ?? 0);
    const lineText = textArg.split('\n')[line - 1];
    // In a table row that opens with the statement, the answer is the next cell's shape.
    const rowAnswer = lineText.startsWith(`| ${match[0]}`) ? cellsOf(lineText).slice(1).find((cellArg) => cellArg.startsWith('`{')) ?? null : null;
    statements.push({ file: fileArg, line, method: match[1], request: match[2], answer: match[3] ?? match[4] ?? rowAnswer });
  }
  textArg.split('\n').forEach((lineArg, indexArg) => {
    const row = tableRowMethod.exec(lineArg);
    if (!row || !methodsArg.has(row[1]) || row[0].includes('{')) {
      return;
    }
    const shapes = cellsOf(lineArg).slice(1).filter((cellArg) => cellArg.startsWith('`{'));
    const arrowed = shapes.find((cellArg) => cellArg.includes('→'));
    if (arrowed) {
      const [request, answer] = arrowed.split('→');
      statements.push({ file: fileArg, line: indexArg + 1, method: row[1], request, answer });
    } else if (shapes.length > 0) {
      statements.push({ file: fileArg, line: indexArg + 1, method: row[1], request: shapes[0], answer: shapes[1] ?? null });
    }
  });
  return statements;
};
