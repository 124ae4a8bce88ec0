import { pino, type Logger } from 'pino';

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

export const createLogger = (
  levelArg: string,
  destinationArg?: NodeJS.WritableStream,
): TCloudlyLogger => pino(
  {
    level: levelArg,
    base: { service: 'cloudly' },
    redact: { paths: redactPaths, censor: '[redacted]' },
  },
  destinationArg ?? process.stdout,
);
