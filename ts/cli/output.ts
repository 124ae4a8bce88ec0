/**
 * The command line's only way to the terminal: answers to stdout, everything else (refusals,
 * notes, progress) to stderr. Tables, JSON (exactly the API answer) and a small YAML emitter.
 */

import { cliIo } from './io.js';

export type TOutputFormat = 'table' | 'json' | 'yaml';
export const outputFormats: TOutputFormat[] = ['table', 'json', 'yaml'];

export const writeOut = (textArg: string): void => {
  cliIo().stdout.write(textArg.endsWith('\n') ? textArg : `${textArg}\n`);
};

export const writeErr = (textArg: string): void => {
  cliIo().stderr.write(textArg.endsWith('\n') ? textArg : `${textArg}\n`);
};

/** A note about what the command did (read first, dry run …): stderr, so stdout stays the answer. */
export const note = (textArg: string): void => writeErr(textArg);

/** The terminal width tables must fit: the terminal's own, or 80 when stdout is not a terminal. */
export const tableWidth = (): number => {
  const { stdout } = cliIo();
  return stdout.isTTY && stdout.columns ? stdout.columns : 80;
};

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

/** Columns separated by two spaces; the widest columns are clipped (with `…`) until the table fits. */
export const renderTable = (headersArg: string[], rowsArg: unknown[][], widthArg = tableWidth()): string => {
  const cells = rowsArg.map((rowArg) => rowArg.map(cellText));
  const widths = headersArg.map((headerArg, indexArg) =>
    Math.max(headerArg.length, ...cells.map((rowArg) => rowArg[indexArg]?.length ?? 0)));
  const gap = 2;
  const total = (): number => widths.reduce((sumArg, widthEntry) => sumArg + widthEntry, 0) + gap * (widths.length - 1);
  const minimum = (indexArg: number): number => Math.max(4, headersArg[indexArg].length);
  // The first column (an id, to copy) is clipped last: the widest other column shrinks first.
  while (total() > widthArg) {
    const candidates = widths.map((widthEntry, indexArg) => ({ widthEntry, indexArg }))
      .filter(({ widthEntry, indexArg }) => indexArg > 0 && widthEntry > minimum(indexArg));
    const pick = candidates.length
      ? candidates.reduce((bestArg, entryArg) => (entryArg.widthEntry > bestArg.widthEntry ? entryArg : bestArg)).indexArg
      : (widths[0] > minimum(0) ? 0 : -1);
    if (pick < 0) {
      break;
    }
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

/** One object as FIELD / VALUE rows (nested values as compact JSON). */
export const renderRecord = (recordArg: Record<string, unknown>, widthArg = tableWidth()): string =>
  renderTable(['FIELD', 'VALUE'], Object.entries(recordArg).map(([key, value]) => [key, value]), widthArg);

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
    writeOut(tableArg());
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
