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

const secretFields = new Set(secretFieldNames);
/** The deepest level a secret is looked for at: a top-level member is depth 1. */
const redactDepth = 5;
const censor = '[redacted]';

/**
 * `valueArg` with every member named in `secretFieldNames`, down to `redactDepth`, replaced by
 * `[redacted]`. Copies only the objects on the way to a secret, so what the caller logged is never
 * changed, and a line with no secret (nearly every line) costs one walk and no copy. pino's own
 * `redact` option did the same through 60 path patterns that its redaction parsed again for every
 * line: a tenth of a logged write's CPU (bench/results/write-profile.md).
 */
const withoutSecrets = (valueArg: object, depthArg: number): object => {
  let replacements: Map<string, unknown> | null = null;
  const record = valueArg as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const value = record[key];
    let replaced = value;
    if (secretFields.has(key)) {
      replaced = censor;
    } else if (depthArg < redactDepth && value !== null && typeof value === 'object' && !ArrayBuffer.isView(value)) {
      // (A Buffer's or typed array's members are its bytes: no field names to look at.)
      replaced = withoutSecrets(value, depthArg + 1);
    }
    if (replaced !== value) {
      (replacements ??= new Map()).set(key, replaced);
    }
  }
  if (!replacements) {
    return valueArg;
  }
  if (Array.isArray(valueArg)) {
    return valueArg.map((item, index) => (replacements.has(String(index)) ? replacements.get(String(index)) : item));
  }
  // The same kind of object with the same members (an Error keeps its message and stack), even
  // when what was logged is frozen.
  const descriptors = Object.getOwnPropertyDescriptors(valueArg);
  for (const [key, value] of replacements) {
    descriptors[key] = { value, enumerable: true, writable: true, configurable: true };
  }
  return Object.create(Object.getPrototypeOf(valueArg), descriptors) as object;
};

/** A line's members without secrets; the error under `err` is serialized first, as pino would. */
const redactLine = (objectArg: Record<string, unknown>): Record<string, unknown> => {
  const line = objectArg.err instanceof Error ? { ...objectArg, err: pino.stdSerializers.err(objectArg.err) } : objectArg;
  return withoutSecrets(line, 1) as Record<string, unknown>;
};

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
  const logger = pino(
    {
      level: levelArg,
      base: { service: 'cloudly' },
      formatters: { log: redactLine, bindings: redactLine },
    },
    judgeLogFormat(formatArg, isTerminal) === 'pretty' ? prettyDestination(out) : out,
  );
  // pino gives a child's bindings to no formatter; every child (and its children, which inherit
  // this) has its bindings redacted here instead.
  const originalChild = logger.child;
  logger.child = function redactedChild(this: TCloudlyLogger, bindingsArg, optionsArg) {
    return originalChild.call(this, redactLine(bindingsArg as Record<string, unknown>), optionsArg);
  } as TCloudlyLogger['child'];
  return logger;
};
