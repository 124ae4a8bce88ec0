import * as fsp from 'node:fs/promises';
import type { CloudlyAdminClient } from '../client/admin.js';
import type { ICloudlyMethods, TAdminCallRequest, TCloudlyMethod } from '../interfaces/requests/methodmap.js';
import { normalizeServerUrl, readCredentials, selectContext, ServerUrlError, type IKeptContext } from './credentials.js';
import { note, outputFormats, writeErr, type TOutputFormat } from './output.js';
import { cliIo } from './io.js';

/** Exit codes of every command (docs/cli.md). */
export const exitCodes = Object.freeze({ ok: 0, refused: 1, usage: 2, unavailable: 3 } as const);

/** A mistake in the invocation itself: nothing was sent. Exit code 2. */
export class UsageError extends Error {}

/** A method's answer, as the contract declares it. */
export type TCommandAnswer<M extends TCloudlyMethod> = ICloudlyMethods[M]['response'];

export interface IGlobalOptions {
  url?: string;
  output?: string;
  /** A kept context by name (`cloudly config get-contexts`). */
  context?: string;
}

export interface ICommandContext {
  url: string;
  /** The name of the kept context whose identity the calls carry. */
  contextName: string;
  format: TOutputFormat;
  client: CloudlyAdminClient;
  /**
   * Calls Cloudly with the logged-in identity. The request and the answer are the contract's,
   * inferred from the method name alone (the method map); there is no untyped form.
   */
  call<M extends TCloudlyMethod>(methodArg: M, requestArg: TAdminCallRequest<M>): Promise<TCommandAnswer<M>>;
}

export const parseFormat = (valueArg: string | undefined): TOutputFormat => {
  const format = (valueArg ?? 'table') as TOutputFormat;
  if (!outputFormats.includes(format)) {
    throw new UsageError(`--output must be one of ${outputFormats.join(', ')}`);
  }
  return format;
};

/** The server `--url` or `$CLOUDLY_URL` names, normalized; undefined when neither does. */
export const namedServer = (optionsArg: IGlobalOptions): string | undefined => {
  const given = optionsArg.url ?? cliIo().env.CLOUDLY_URL;
  if (!given) {
    return undefined;
  }
  try {
    return normalizeServerUrl(given);
  } catch (error) {
    throw error instanceof ServerUrlError ? new UsageError(error.message) : error;
  }
};

/**
 * The kept context a command uses (credentials.ts, `selectContext`): `--context`, else the one
 * for `--url`/`$CLOUDLY_URL`, else the current one. A usage error when there is none.
 */
export const resolveContext = async (optionsArg: IGlobalOptions): Promise<{ name: string; context: IKeptContext }> => {
  const server = namedServer(optionsArg);
  const credentials = await readCredentials();
  const selected = selectContext(credentials, { context: optionsArg.context, server });
  if (selected) {
    return selected;
  }
  if (optionsArg.context !== undefined) {
    throw new UsageError(`no context ${JSON.stringify(optionsArg.context)}: see \`cloudly config get-contexts\``);
  }
  if (server) {
    throw new UsageError(`not logged in to ${server}: run \`cloudly login --url ${server}\``);
  }
  throw new UsageError('no server: pass --url or run `cloudly login --url <server>` first');
};

/** The server to talk to: `--context`'s, else `--url`, else `$CLOUDLY_URL`, else the current context's. */
export const resolveUrl = async (optionsArg: IGlobalOptions): Promise<string> => {
  if (optionsArg.context === undefined) {
    const server = namedServer(optionsArg);
    if (server) {
      return server;
    }
  }
  return (await resolveContext(optionsArg)).context.server;
};

/** A logged-in client for the resolved server (its stored identity). */
/**
 * The admin client, loaded only when a command talks to a server: it brings typedrequest, which
 * costs about a second, so help, usage errors and completion stay quick.
 */
export const loadAdminClient = async (urlArg: string): Promise<CloudlyAdminClient> => {
  const { createClient } = cliIo();
  if (createClient) {
    return createClient(urlArg);
  }
  const { CloudlyAdminClient: ClientClass } = await import('../client/admin.js');
  return new ClientClass(urlArg);
};

export const openContext = async (optionsArg: IGlobalOptions): Promise<ICommandContext> => {
  const format = parseFormat(optionsArg.output);
  const { name: contextName, context: stored } = await resolveContext(optionsArg);
  const url = stored.server;
  if (stored.identity.expiresAt && stored.identity.expiresAt <= Date.now()) {
    throw new UsageError(`the identity of context ${contextName} (${stored.username} at ${url}) expired: run \`cloudly login --url ${url} --username ${stored.username}\` again`);
  }
  const client = await loadAdminClient(url);
  client.identity = stored.identity;
  return {
    url,
    contextName,
    format,
    client,
    call: (methodArg, requestArg) => client.call(methodArg, requestArg),
  };
};

// ---------------------------------------------------------------------------------------------
// Helpers the commands share
// ---------------------------------------------------------------------------------------------

export const parseInteger = (valueArg: string, nameArg: string, minimumArg = 0): number => {
  if (!/^-?\d+$/.test(valueArg) || Number(valueArg) < minimumArg || !Number.isSafeInteger(Number(valueArg))) {
    throw new UsageError(`${nameArg} must be an integer of at least ${minimumArg}, not ${JSON.stringify(valueArg)}`);
  }
  return Number(valueArg);
};

/** Collects a repeatable option's values. */
export const collect = (valueArg: string, previousArg: string[] = []): string[] => [...previousArg, valueArg];

export const requireOption = <T>(valueArg: T | undefined, flagArg: string): T => {
  if (valueArg === undefined || valueArg === null || valueArg === '') {
    throw new UsageError(`${flagArg} is required`);
  }
  return valueArg;
};

/**
 * A value read from a file or an option as the contract's type: `isArg` is the contract's own
 * judgement (a type guard built on its validator), `reasonsArg` says every reason it is not one.
 * Anything else is a usage error listing those reasons; nothing is sent.
 */
export const contractValue = <T>(
  valueArg: unknown,
  isArg: (valueArg: unknown) => valueArg is T,
  reasonsArg: (valueArg: unknown) => string[],
  whatArg: string,
): T => {
  if (isArg(valueArg)) {
    return valueArg;
  }
  const reasons = reasonsArg(valueArg);
  throw new UsageError(`${whatArg} is not what the contract takes:\n${(reasons.length ? reasons : ['it does not use the exact schema']).map((reasonArg) => `  ${reasonArg}`).join('\n')}`);
};

/** The option's value as one of the contract's literals, or a usage error naming every allowed value. */
export const choiceOption = <TChoice extends string>(valueArg: string, choicesArg: readonly TChoice[], flagArg: string): TChoice => {
  const choice = choicesArg.find((choiceArg) => choiceArg === valueArg);
  if (choice === undefined) {
    throw new UsageError(`${flagArg} must be one of ${choicesArg.join(', ')}, not ${JSON.stringify(valueArg)}`);
  }
  return choice;
};

/** Reads a JSON body from a file, or from stdin when the path is `-`. */
export const readJsonFile = async (pathArg: string): Promise<unknown> => {
  let text: string;
  try {
    if (pathArg === '-') {
      const chunks: Buffer[] = [];
      for await (const chunk of cliIo().stdin) {
        chunks.push(Buffer.from(chunk));
      }
      text = Buffer.concat(chunks).toString('utf8');
    } else {
      text = await fsp.readFile(pathArg, 'utf8');
    }
  } catch (error) {
    throw new UsageError(`cannot read ${pathArg}: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UsageError(`${pathArg === '-' ? 'stdin' : pathArg} is not JSON: ${(error as Error).message}`);
  }
};

export interface IMutationOptions {
  dryRun?: boolean;
  expect?: string;
  expectCurrent?: boolean;
}

/**
 * The compare-and-swap generation of a mutation: `--expect <generation>`, or with
 * `--expect-current` read first (and said so on stderr).
 */
export const expectedGeneration = async (
  optionsArg: IMutationOptions,
  readCurrentArg: () => Promise<number>,
  whatArg: string,
): Promise<number> => {
  if (optionsArg.expect !== undefined && optionsArg.expectCurrent) {
    throw new UsageError('give either --expect or --expect-current, not both');
  }
  if (optionsArg.expect !== undefined) {
    return parseInteger(optionsArg.expect, '--expect', 1);
  }
  if (optionsArg.expectCurrent) {
    const generation = await readCurrentArg();
    note(`--expect-current: read ${whatArg} at generation ${generation}; the change applies only if it is still at ${generation}`);
    return generation;
  }
  throw new UsageError(`give --expect <generation> (of ${whatArg}) or --expect-current`);
};

/** Adds `dryRun: true` when asked and says on stderr that nothing changed. */
export const withDryRun = <TRequest extends object>(optionsArg: IMutationOptions, requestArg: TRequest): TRequest & { dryRun?: true } =>
  (optionsArg.dryRun ? { ...requestArg, dryRun: true as const } : requestArg);

export const noteDryRun = (optionsArg: IMutationOptions, answerArg: unknown): void => {
  if (!optionsArg.dryRun) {
    return;
  }
  const halted = (answerArg as { haltedBefore?: string } | null)?.haltedBefore;
  note(halted
    ? `dry run: every check passed; stopped before ${halted}; nothing was changed`
    : 'dry run: every check passed; nothing was changed');
};

/** What a table shows for a member the real call makes (an id, a secret), which a dry run cannot know. */
export const madeByTheRealCall = '(made by the real call)';

/** The paths a dry answer lists under `generatedOnCommit`: members only the real call makes. */
export const generatedOnCommitOf = (answerArg: unknown): string[] => {
  const paths = (answerArg as { generatedOnCommit?: unknown } | null)?.generatedOnCommit;
  return Array.isArray(paths) ? paths.filter((pathArg): pathArg is string => typeof pathArg === 'string') : [];
};

/**
 * `recordArg` (the answer's member `memberArg`) for a table: each of its members the real call
 * makes is shown first, as `madeByTheRealCall`, where a dry answer has none.
 */
export const withMadeByTheRealCall = <T extends object>(recordArg: T, answerArg: unknown, memberArg: string): T => {
  const made = generatedOnCommitOf(answerArg)
    .filter((pathArg) => pathArg.startsWith(`${memberArg}.`))
    .map((pathArg) => pathArg.slice(memberArg.length + 1));
  return made.length === 0 ? recordArg : { ...Object.fromEntries(made.map((keyArg) => [keyArg, madeByTheRealCall])), ...recordArg };
};

// ---------------------------------------------------------------------------------------------
// Failures → stderr and exit codes
// ---------------------------------------------------------------------------------------------

/** A refusal (`CloudlyRefusal`, or anything of its shape: not an Error subclass): `{ errorText, errorData }`. */
export const isRefusal = (errorArg: unknown): errorArg is { errorText: string; errorData?: unknown } =>
  typeof errorArg === 'object' && errorArg !== null && 'errorText' in errorArg && 'errorData' in errorArg;

/** The client's CloudlyTransportError: an answer that was not an envelope. */
const isTransportError = (errorArg: unknown): errorArg is Error & { status: number } =>
  errorArg instanceof Error && errorArg.name === 'CloudlyTransportError' && typeof (errorArg as { status?: unknown }).status === 'number';

const isConnectionFailure = (errorArg: unknown): boolean => {
  const error = errorArg as { name?: string; message?: string; cause?: { code?: string }; code?: string };
  const code = error?.cause?.code ?? error?.code;
  return (error?.name === 'TypeError' && error.message === 'fetch failed')
    || ['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EHOSTUNREACH', 'ETIMEDOUT', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT'].includes(code ?? '');
};

/**
 * The causes of a refusal, one line each (`  path: message`): the sentences for people that travel
 * apart from the reason tokens, each after the member it is about. Shown, never branched on.
 */
export const causeLines = (causesArg: unknown): string[] => (Array.isArray(causesArg) ? causesArg : []).map((causeArg) => {
  const cause = (causeArg ?? {}) as { path?: unknown; message?: unknown };
  const message = typeof cause.message === 'string' ? cause.message : JSON.stringify(causeArg);
  return `  ${typeof cause.path === 'string' ? `${cause.path}: ` : ''}${message}`;
});

/** Prints a failure and answers the exit code: refusals 1 (unavailable 3), usage 2, unreachable 3. */
export const reportFailure = (errorArg: unknown, urlArg?: string): number => {
  if (errorArg instanceof UsageError) {
    writeErr(`cloudly: ${errorArg.message}`);
    return exitCodes.usage;
  }
  if (isRefusal(errorArg)) {
    const data = (errorArg.errorData ?? {}) as Record<string, unknown>;
    const code = typeof data.code === 'string' ? data.code : 'refused';
    const lines = [`refused: ${code}${data.retryable ? ' (retryable)' : ''}`];
    const reasons = Array.isArray(data.reasons) ? data.reasons : [];
    for (const reason of reasons) {
      lines.push(`  ${typeof reason === 'string' ? reason : JSON.stringify(reason)}`);
    }
    lines.push(...causeLines(data.causes));
    if (typeof data.retryAfterMs === 'number') {
      lines.push(`  retry after ${data.retryAfterMs} ms`);
    }
    for (const [key, value] of Object.entries(data)) {
      if (!['code', 'retryable', 'reasons', 'causes', 'retryAfterMs'].includes(key)) {
        lines.push(`  ${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}`);
      }
    }
    if (code === 'unauthenticated') {
      lines.push('  (log in again: cloudly login)');
    }
    writeErr(lines.join('\n'));
    return code === 'unavailable' ? exitCodes.unavailable : exitCodes.refused;
  }
  if (isTransportError(errorArg)) {
    writeErr(`cloudly: ${errorArg.message}`);
    return errorArg.status >= 500 || errorArg.status === 0 ? exitCodes.unavailable : exitCodes.refused;
  }
  if (isConnectionFailure(errorArg)) {
    // fetch's failure carries node's error as its cause; node's own HTTP client rejects with it.
    const error = errorArg as { code?: string; message?: string; cause?: { code?: string; message?: string } };
    writeErr(`cloudly: unavailable: cannot reach ${urlArg ?? 'the server'} (${error.cause?.code ?? error.cause?.message ?? error.code ?? error.message})`);
    return exitCodes.unavailable;
  }
  writeErr(`cloudly: ${(errorArg as Error)?.message ?? String(errorArg)}`);
  return exitCodes.refused;
};
