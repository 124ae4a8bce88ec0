import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { IIdentity } from '../interfaces/data/user.js';
import { cliIo } from './io.js';

/**
 * The identities `cloudly login` keeps, as named contexts (kubectl's): each a server and an
 * identity on it, several servers and several identities per server side by side, one of them
 * current. They live in the user's config directory: `$CLOUDLY_CONFIG_DIR`, else
 * `$XDG_CONFIG_HOME/cloudly`, else `~/.config/cloudly`. The directory is 0700 and the file
 * (`credentials.json`) 0600; it is replaced atomically. A file from before contexts (one identity
 * per server URL) is read as one context per server.
 */

export interface IKeptContext {
  /** The server's URL, normalized (`normalizeServerUrl`). */
  server: string;
  username: string;
  identity: IIdentity;
  loggedInAt: number;
}

export interface ICredentialsFile {
  /** The context commands use unless told otherwise. */
  currentContext: string | null;
  contexts: Record<string, IKeptContext>;
}

/** A context's name a login gives unless `--context` names one: `<user>@<host[:port]>`. */
export const defaultContextName = (usernameArg: string, serverArg: string): string => `${usernameArg}@${new URL(serverArg).host}`;

/** Context names are typed on command lines: printable, no spaces. */
export const isContextName = (nameArg: string): boolean => /^[^\s\u0000-\u001f]{1,128}$/.test(nameArg);

/**
 * The context a command uses: the one `--context` names; else, with a server named (`--url`,
 * `$CLOUDLY_URL`), the current context when it is of that server, otherwise that server's most
 * recent login; else the current context. Undefined when none fits.
 */
export const selectContext = (fileArg: ICredentialsFile, wantedArg: { context?: string; server?: string }): { name: string; context: IKeptContext } | undefined => {
  const named = (nameArg: string | null | undefined) => (nameArg && fileArg.contexts[nameArg] ? { name: nameArg, context: fileArg.contexts[nameArg] } : undefined);
  if (wantedArg.context !== undefined) {
    return named(wantedArg.context);
  }
  const current = named(fileArg.currentContext);
  if (wantedArg.server === undefined || current?.context.server === wantedArg.server) {
    return current;
  }
  return Object.entries(fileArg.contexts)
    .filter(([, contextArg]) => contextArg.server === wantedArg.server)
    .sort(([, left], [, right]) => right.loggedInAt - left.loggedInAt)
    .map(([name, context]) => ({ name, context }))[0];
};

export const configDirectory = (): string => {
  const { env } = cliIo();
  if (env.CLOUDLY_CONFIG_DIR) {
    return path.resolve(env.CLOUDLY_CONFIG_DIR);
  }
  const base = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME)
    ? env.XDG_CONFIG_HOME
    : path.join(os.homedir(), '.config');
  return path.join(base, 'cloudly');
};

export const credentialsPath = (): string => path.join(configDirectory(), 'credentials.json');

/** A server URL that is not one: a mistake in the invocation (the commands answer it as usage, exit 2). */
export class ServerUrlError extends Error {
  constructor(messageArg: string) {
    super(messageArg);
    this.name = 'ServerUrlError';
  }
}

/** `http://Host:3000/` → `http://host:3000`: one key per server however it was typed. */
export const normalizeServerUrl = (urlArg: string): string => {
  let url: URL;
  try {
    url = new URL(urlArg);
  } catch {
    throw new ServerUrlError(`--url ${JSON.stringify(urlArg)} is not a URL (e.g. http://127.0.0.1:3000)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ServerUrlError(`--url must be an http or https URL, not ${url.protocol}`);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
};

/** The file as it was before contexts: one identity per server URL. */
interface ILegacyCredentialsFile {
  current?: string | null;
  servers?: Record<string, { username: string; identity: IIdentity; loggedInAt: number }>;
}

const fromLegacy = (legacyArg: ILegacyCredentialsFile): ICredentialsFile => {
  const file: ICredentialsFile = { currentContext: null, contexts: {} };
  for (const [server, kept] of Object.entries(legacyArg.servers ?? {})) {
    const name = defaultContextName(kept.username, server);
    file.contexts[name] = { server, ...kept };
    if (legacyArg.current === server) {
      file.currentContext = name;
    }
  }
  return file;
};

export const readCredentials = async (): Promise<ICredentialsFile> => {
  try {
    const parsed = JSON.parse(await fsp.readFile(credentialsPath(), 'utf8')) as Partial<ICredentialsFile> & ILegacyCredentialsFile;
    if (parsed && typeof parsed === 'object' && parsed.contexts && typeof parsed.contexts === 'object') {
      return { currentContext: parsed.currentContext ?? null, contexts: parsed.contexts };
    }
    if (parsed && typeof parsed === 'object' && parsed.servers && typeof parsed.servers === 'object') {
      return fromLegacy(parsed);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new Error(`cannot read ${credentialsPath()}: ${(error as Error).message}`);
    }
  }
  return { currentContext: null, contexts: {} };
};

export const writeCredentials = async (fileArg: ICredentialsFile): Promise<void> => {
  const directory = configDirectory();
  await fsp.mkdir(directory, { recursive: true, mode: 0o700 });
  await fsp.chmod(directory, 0o700);
  const target = credentialsPath();
  const temporary = `${target}.${process.pid}.tmp`;
  const handle = await fsp.open(temporary, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC, 0o600);
  try {
    await handle.chmod(0o600);
    await handle.writeFile(`${JSON.stringify(fileArg, null, 2)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fsp.rename(temporary, target);
};
