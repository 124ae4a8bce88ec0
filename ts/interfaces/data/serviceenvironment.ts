import { readServiceDataField, readServiceDataRecord, reasonsForUnknownKeys } from '../private/servicecontract.js';
import { isCanonicalId } from '../private/dataproperties.js';
import type { ISecretVersionReference } from './secret.js';

/**
 * A service's environment: plain values Cloudly stores and delivers as they are, and secrets the
 * service names by reference to one version of a secret group. A secret's value never passes
 * through Cloudly in clear: the relay receives it sealed to its cluster's recipient and the node
 * opens it (docs/secrets.md). Project's own definition; the spec names `environment-too-large`
 * but not the limit, so the limit below is the project's own.
 */

/** Plain environment entries, name → value. */
export type TServiceEnvironment = Record<string, string>;

/** Secret environment entries, name → the secret version whose value the workload gets under that name. */
export type TServiceSecretEnvironment = Record<string, ISecretVersionReference>;

export const serviceEnvironmentContract = Object.freeze({
  /**
   * The most bytes the whole environment a workload starts with may take: for every entry, plain
   * or secret, the UTF-8 bytes of `NAME=value` and its terminating NUL, as the process receives
   * it. Above it the verdict is `environment-too-large`. 32 KiB is the project's own choice: well
   * inside Linux's 128 KiB for one argument or environment string and the 2 MiB total, so a
   * runtime never fails the start for the environment's size.
   */
  maximumTotalBytes: 32_768,
  /** The most entries, plain and secret together. */
  maximumEntries: 256,
  /** The longest name, in characters. */
  maximumNameLength: 255,
} as const);

/** POSIX portable environment names: letters, digits and `_`, not starting with a digit. */
export const serviceEnvironmentNamePattern = /^[A-Za-z_][A-Za-z0-9_]*$/;

const utf8 = new TextEncoder();

/** The bytes one entry takes in a process's environment: `NAME=value` and its NUL. */
export const environmentEntryBytes = (nameArg: string, valueBytesArg: number): number =>
  utf8.encode(nameArg).length + 1 + valueBytesArg + 1;

/** The bytes the plain entries take (secrets are counted where their sizes are known: the verdict). */
export const plainEnvironmentBytes = (environmentArg: TServiceEnvironment): number =>
  Object.entries(environmentArg).reduce((sum, [name, value]) => sum + environmentEntryBytes(name, utf8.encode(value).length), 0);

/**
 * Whether a secret entry looks like a value sent in clear instead of a reference: a string, or an
 * object carrying a `value`. Such a request is refused `secret-value-in-clear` and its value is
 * neither stored nor repeated in the refusal.
 */
export const isSecretValueInClear = (valueArg: unknown): boolean => {
  if (typeof valueArg === 'string') {
    return true;
  }
  const record = readServiceDataRecord(valueArg);
  return record !== null && (Object.hasOwn(record, 'value') || Object.hasOwn(record, 'plaintext'));
};

/** The sentence a secret value in clear earns (its wording is what `secret-value-in-clear` is read from). */
export const secretValueInClearSentence = (pathArg: string): string =>
  `${pathArg} is a secret value in clear: name a secret version ({ secretId, secretVersionId }) and seal the value in the client (docs/secrets.md)`;

const validateName = (nameArg: string, pathArg: string): string[] => {
  if (nameArg.length > serviceEnvironmentContract.maximumNameLength || !serviceEnvironmentNamePattern.test(nameArg)) {
    return [`${pathArg} must be a POSIX environment name (letters, digits and '_', not starting with a digit, at most ${serviceEnvironmentContract.maximumNameLength} characters)`];
  }
  return [];
};

/**
 * Every reason the `environment` and `secrets` members of a writable service are not valid, each
 * by path: names, values, references, a name used twice, and the plain entries' total size.
 */
export const validateServiceEnvironment = (recordArg: Record<string, unknown>, pathArg: string): string[] => {
  const reasons: string[] = [];
  const names = new Set<string>();
  let entries = 0;
  if (Object.hasOwn(recordArg, 'environment')) {
    const environment = readServiceDataRecord(readServiceDataField(recordArg, 'environment'));
    if (environment === null) {
      reasons.push(`${pathArg}.environment must be a plain object of name → string`);
    } else {
      let total = 0;
      for (const [name, value] of Object.entries(environment)) {
        const path = `${pathArg}.environment.${name}`;
        entries++;
        reasons.push(...validateName(name, path));
        names.add(name);
        if (typeof value !== 'string' || value.includes('\u0000')) {
          reasons.push(`${path} must be a string without NUL characters`);
        } else {
          total += environmentEntryBytes(name, utf8.encode(value).length);
        }
      }
      if (total > serviceEnvironmentContract.maximumTotalBytes) {
        reasons.push(`${pathArg}.environment must hold at most ${serviceEnvironmentContract.maximumTotalBytes} bytes in total (NAME=value and a NUL per entry); it holds ${total}`);
      }
    }
  }
  if (Object.hasOwn(recordArg, 'secrets')) {
    const secrets = readServiceDataRecord(readServiceDataField(recordArg, 'secrets'));
    if (secrets === null) {
      reasons.push(`${pathArg}.secrets must be a plain object of name → { secretId, secretVersionId }`);
    } else {
      for (const [name, value] of Object.entries(secrets)) {
        const path = `${pathArg}.secrets.${name}`;
        entries++;
        reasons.push(...validateName(name, path));
        if (names.has(name)) {
          reasons.push(`${path} repeats a name of the plain environment`);
        }
        names.add(name);
        if (isSecretValueInClear(value)) {
          reasons.push(secretValueInClearSentence(path));
          continue;
        }
        const reference = readServiceDataRecord(value);
        if (reference === null) {
          reasons.push(`${path} must be { secretId, secretVersionId }`);
          continue;
        }
        reasons.push(...reasonsForUnknownKeys(reference, ['secretId', 'secretVersionId'], path));
        for (const key of ['secretId', 'secretVersionId'] as const) {
          if (!isCanonicalId(readServiceDataField(reference, key))) {
            reasons.push(`${path}.${key} must be an id of 1-128 letters, digits, '.', '_' or '-' starting with a letter or digit`);
          }
        }
      }
    }
  }
  if (entries > serviceEnvironmentContract.maximumEntries) {
    reasons.push(`${pathArg}.environment must hold at most ${serviceEnvironmentContract.maximumEntries} entries with secrets`);
  }
  return reasons;
};

/** Detached copy of a valid plain environment, names in code-point order. */
export const snapshotServiceEnvironment = (environmentArg: TServiceEnvironment | undefined): TServiceEnvironment =>
  Object.fromEntries(Object.keys(environmentArg ?? {}).sort().map((name) => [name, environmentArg![name]]));

/** Detached copy of valid secret references, names in code-point order. */
export const snapshotServiceSecrets = (secretsArg: TServiceSecretEnvironment | undefined): TServiceSecretEnvironment =>
  Object.fromEntries(Object.keys(secretsArg ?? {}).sort().map((name) => [
    name,
    { secretId: secretsArg![name].secretId, secretVersionId: secretsArg![name].secretVersionId },
  ]));
