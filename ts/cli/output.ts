/**
 * The command line's only way to the terminal: answers to stdout, everything else (refusals,
 * notes, progress) to stderr. Tables, JSON (exactly the API answer) and a small YAML emitter.
 */

import { cliIo } from './io.js';

/** `wide` is the table with every column (those marked wide too) and nothing clipped. */
export type TOutputFormat = 'table' | 'wide' | 'json' | 'yaml';
export const outputFormats: TOutputFormat[] = ['table', 'wide', 'json', 'yaml'];

/** Set while `printAnswer` draws a `-o wide` table: the table views read it (tables.ts). */
let drawingWide = false;
export const isDrawingWide = (): boolean => drawingWide;

export const writeOut = (textArg: string): void => {
  cliIo().stdout.write(textArg.endsWith('\n') ? textArg : `${textArg}\n`);
};

export const writeErr = (textArg: string): void => {
  cliIo().stderr.write(textArg.endsWith('\n') ? textArg : `${textArg}\n`);
};

/** A note about what the command did (read first, dry run …): stderr, so stdout stays the answer. */
export const note = (textArg: string): void => writeErr(textArg);

/**
 * The width tables must fit. A terminal's own width (or `COLUMNS` when it says none); piped
 * output is read by programs and people with their own pagers, so it is clipped only when
 * `COLUMNS` asks for a width, and otherwise never. A `-o wide` table is never clipped.
 */
export const tableWidth = (): number => {
  const { stdout, env } = cliIo();
  if (drawingWide) {
    return Number.POSITIVE_INFINITY;
  }
  const fromEnv = /^[1-9][0-9]{0,4}$/.test(env.COLUMNS ?? '') ? Number(env.COLUMNS) : null;
  if (stdout.isTTY) {
    return stdout.columns || fromEnv || 80;
  }
  return fromEnv ?? Number.POSITIVE_INFINITY;
};

/**
 * Columns that hold identifiers are never clipped: a cut id (`createService…`) cannot be copied
 * and may name another thing. The first column is always one.
 */
const wholeColumnHeaders = new Set(['ID', 'OPERATION', 'BACKUP', 'SERVICE', 'CLUSTER', 'NODE', 'METHOD', 'USERNAME']);
const isWholeColumn = (headerArg: string, indexArg: number): boolean =>
  indexArg === 0 || wholeColumnHeaders.has(headerArg) || headerArg.endsWith(' ID');

const cellText = (valueArg: unknown): string => {
  if (valueArg === undefined || valueArg === null) {
    return '-';
  }
  if (typeof valueArg === 'string') {
    return valueArg.replace(/[\r\n\t]+/g, ' ');
  }
  if (typeof valueArg === 'number' || typeof valueArg === 'boolean') {
    return String(valueArg);
  }
  return JSON.stringify(valueArg);
};

const clip = (textArg: string, widthArg: number): string =>
  textArg.length <= widthArg ? textArg : widthArg <= 1 ? textArg.slice(0, widthArg) : `${textArg.slice(0, widthArg - 1)}…`;

/**
 * Columns separated by two spaces; the widest columns that hold no identifier are clipped (with
 * `…`) until the table fits. When only identifiers are left, the line is left longer than the width.
 */
export const renderTable = (headersArg: string[], rowsArg: unknown[][], widthArg = tableWidth()): string => {
  const cells = rowsArg.map((rowArg) => rowArg.map(cellText));
  const widths = headersArg.map((headerArg, indexArg) =>
    Math.max(headerArg.length, ...cells.map((rowArg) => rowArg[indexArg]?.length ?? 0)));
  const gap = 2;
  const total = (): number => widths.reduce((sumArg, widthEntry) => sumArg + widthEntry, 0) + gap * (widths.length - 1);
  const minimum = (indexArg: number): number => Math.max(4, headersArg[indexArg].length);
  while (total() > widthArg) {
    const candidates = widths.map((widthEntry, indexArg) => ({ widthEntry, indexArg }))
      .filter(({ widthEntry, indexArg }) => !isWholeColumn(headersArg[indexArg], indexArg) && widthEntry > minimum(indexArg));
    if (candidates.length === 0) {
      break;
    }
    const pick = candidates.reduce((bestArg, entryArg) => (entryArg.widthEntry > bestArg.widthEntry ? entryArg : bestArg)).indexArg;
    widths[pick] -= 1;
  }
  const line = (valuesArg: string[]): string => valuesArg
    .map((valueArg, indexArg) => (indexArg === valuesArg.length - 1
      ? clip(valueArg, widths[indexArg])
      : clip(valueArg, widths[indexArg]).padEnd(widths[indexArg])))
    .join(' '.repeat(gap))
    .trimEnd();
  return [line(headersArg), ...cells.map(line)].join('\n');
};

/**
 * One object as FIELD / VALUE rows. Values are never clipped (a record is read, not scanned): a
 * nested value is compact JSON on its row when that fits the width, and otherwise a YAML block
 * under the table, whole.
 */
export const renderRecord = (recordArg: Record<string, unknown>, widthArg = tableWidth()): string => {
  const fieldWidth = Math.max(5, ...Object.keys(recordArg).map((keyArg) => keyArg.length));
  const rows: unknown[][] = [];
  const blocks: string[] = [];
  for (const [key, value] of Object.entries(recordArg)) {
    if (value === undefined) {
      continue;
    }
    const nested = typeof value === 'object' && value !== null;
    if (nested && fieldWidth + 2 + JSON.stringify(value).length > widthArg) {
      rows.push([key, '(below)']);
      blocks.push(`${key}:\n${renderYaml(value, 2)}`);
    } else {
      rows.push([key, value]);
    }
  }
  const table = renderTable(['FIELD', 'VALUE'], rows, Number.POSITIVE_INFINITY);
  return blocks.length ? `${table}\n\n${blocks.join('\n\n')}` : table;
};

const plainYamlString = /^[A-Za-z0-9_./@:+-][A-Za-z0-9 _./@:+-]*$/;
const yamlReserved = /^(true|false|yes|no|on|off|null|~|y|n)$/i;

const yamlScalar = (valueArg: unknown): string => {
  if (valueArg === null || valueArg === undefined) {
    return 'null';
  }
  if (typeof valueArg === 'number' || typeof valueArg === 'boolean') {
    return String(valueArg);
  }
  const text = String(valueArg);
  if (plainYamlString.test(text) && !yamlReserved.test(text) && !/^[-+]?[0-9.]/.test(text) && !text.includes(': ') && !text.endsWith(':') && !text.endsWith(' ')) {
    return text;
  }
  return JSON.stringify(text);
};

const isContainer = (valueArg: unknown): valueArg is object => typeof valueArg === 'object' && valueArg !== null;

/** A small YAML emitter for JSON values: block style, strings quoted (JSON style) where needed. */
export const renderYaml = (valueArg: unknown, indentArg = 0): string => {
  const pad = ' '.repeat(indentArg);
  if (Array.isArray(valueArg)) {
    if (valueArg.length === 0) {
      return `${pad}[]`;
    }
    return valueArg.map((itemArg) => {
      if (isContainer(itemArg) && (Array.isArray(itemArg) ? itemArg.length > 0 : Object.keys(itemArg).length > 0)) {
        const inner = renderYaml(itemArg, indentArg + 2);
        return `${pad}- ${inner.slice(indentArg + 2)}`;
      }
      return `${pad}- ${isContainer(itemArg) ? (Array.isArray(itemArg) ? '[]' : '{}') : yamlScalar(itemArg)}`;
    }).join('\n');
  }
  if (isContainer(valueArg)) {
    const entries = Object.entries(valueArg).filter(([, value]) => value !== undefined);
    if (entries.length === 0) {
      return `${pad}{}`;
    }
    return entries.map(([key, value]) => {
      const name = yamlScalar(key);
      if (isContainer(value) && (Array.isArray(value) ? value.length > 0 : Object.keys(value).length > 0)) {
        return `${pad}${name}:\n${renderYaml(value, indentArg + 2)}`;
      }
      return `${pad}${name}: ${isContainer(value) ? (Array.isArray(value) ? '[]' : '{}') : yamlScalar(value)}`;
    }).join('\n');
  }
  return `${pad}${yamlScalar(valueArg)}`;
};

/** Prints an answer: JSON exactly as the API answered, YAML of the same, or the command's table. */
export const printAnswer = (answerArg: unknown, formatArg: TOutputFormat, tableArg: () => string): void => {
  if (formatArg === 'json') {
    writeOut(JSON.stringify(answerArg, null, 2));
  } else if (formatArg === 'yaml') {
    writeOut(renderYaml(answerArg));
  } else {
    drawingWide = formatArg === 'wide';
    try {
      writeOut(tableArg());
    } finally {
      drawingWide = false;
    }
  }
};

/** A plain "waiting" line for work that has no progress to report (the relay answers when done). */
export const waitingLine = (textArg: string): (() => void) => {
  const started = Date.now();
  const { stderr } = cliIo();
  if (!stderr.isTTY) {
    writeErr(`${textArg}`);
    return () => writeErr(`done after ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
  const frames = ['|', '/', '-', '\\'];
  let frame = 0;
  const draw = (): void => {
    stderr.write(`\r${frames[frame++ % frames.length]} ${textArg} ${((Date.now() - started) / 1000).toFixed(0)} s`);
  };
  draw();
  const timer = setInterval(draw, 250);
  return () => {
    clearInterval(timer);
    stderr.write(`\r${textArg} done after ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  };
};
