import { pino, type Logger } from 'pino';
import { logFormats, type TLogFormat } from '../config.js';

export { logFormats, type TLogFormat };

/**
 * Every field name that can carry a secret, at any of the depths Cloudly logs them. pino removes
 * them before a line is written, so a handler that logs a whole request cannot leak one.
 */
const secretFieldNames = [
  'password', 'jwt', 'relayToken', 'token', 'bearer', 'restoreGrant', 'authorization',
  'Authorization', 'secret', 'secretValue', 'passwordHash', 'relayTokenHash',
];

const redactPaths = secretFieldNames.flatMap((name) => [
  name, `*.${name}`, `*.*.${name}`, `*.*.*.${name}`, `*.*.*.*.${name}`,
]);

export type TCloudlyLogger = Logger;

const levelNames: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Members every line carries that a reader on a terminal does not need to see. */
const quietMembers = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service']);

const prettyValue = (valueArg: unknown): string => {
  if (typeof valueArg === 'string') {
    return /^[^\s"=]+$/.test(valueArg) ? valueArg : JSON.stringify(valueArg);
  }
  if (valueArg && typeof valueArg === 'object' && typeof (valueArg as { message?: unknown }).message === 'string') {
    const error = valueArg as { type?: string; message: string; stack?: string };
    return JSON.stringify(`${error.type ?? 'Error'}: ${error.message}`);
  }
  return JSON.stringify(valueArg);
};

/**
 * One JSON log line as a person reads it: `17:02:03.123 INFO  message key=value …`. A line that
 * is not a JSON object is passed through as it is.
 */
export const formatLogLine = (lineArg: string): string => {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(lineArg) as Record<string, unknown>;
  } catch {
    return lineArg.endsWith('\n') ? lineArg : `${lineArg}\n`;
  }
  if (!record || typeof record !== 'object' || Array.isArray(record)) {
    return lineArg.endsWith('\n') ? lineArg : `${lineArg}\n`;
  }
  const time = typeof record.time === 'number' ? new Date(record.time).toISOString().slice(11, 23) : '--:--:--.---';
  const level = (levelNames[record.level as number] ?? String(record.level)).padEnd(5);
  const members = Object.entries(record)
    .filter(([key]) => !quietMembers.has(key))
    .map(([key, value]) => `${key}=${prettyValue(value)}`);
  return `${time} ${level} ${typeof record.msg === 'string' ? record.msg : ''}${members.length ? ` ${members.join(' ')}` : ''}\n`;
};

/** A destination that writes each line pino gives it as `formatLogLine` formats it. */
const prettyDestination = (outArg: NodeJS.WritableStream): { write(chunkArg: string): boolean } => ({
  write: (chunkArg: string) => outArg.write(chunkArg.split('\n').filter(Boolean).map(formatLogLine).join('')),
});

/** Whether lines are formatted for a person: asked for, or `auto` on a terminal (never for a given destination). */
export const judgeLogFormat = (formatArg: TLogFormat, destinationIsTerminalArg: boolean): 'json' | 'pretty' =>
  (formatArg === 'pretty' || (formatArg === 'auto' && destinationIsTerminalArg) ? 'pretty' : 'json');

export const createLogger = (
  levelArg: string,
  destinationArg?: NodeJS.WritableStream,
  formatArg: TLogFormat = 'auto',
): TCloudlyLogger => {
  const out = destinationArg ?? process.stdout;
  const isTerminal = !destinationArg && Boolean(process.stdout.isTTY);
  return pino(
    {
      level: levelArg,
      base: { service: 'cloudly' },
      redact: { paths: redactPaths, censor: '[redacted]' },
    },
    judgeLogFormat(formatArg, isTerminal) === 'pretty' ? prettyDestination(out) : out,
  );
};
