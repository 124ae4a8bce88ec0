import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { IIdentity } from '../interfaces/data/user.js';
import { cliIo } from './io.js';

/**
 * The identities `cloudly login` keeps, one per server URL, in the user's config directory:
 * `$CLOUDLY_CONFIG_DIR`, else `$XDG_CONFIG_HOME/cloudly`, else `~/.config/cloudly`.
 * The directory is 0700 and the file (`credentials.json`) 0600; it is replaced atomically.
 */

export interface ICredentialsFile {
  /** The server of the last login: the default `--url`. */
  current: string | null;
  servers: Record<string, { username: string; identity: IIdentity; loggedInAt: number }>;
}

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

export const readCredentials = async (): Promise<ICredentialsFile> => {
  try {
    const parsed = JSON.parse(await fsp.readFile(credentialsPath(), 'utf8')) as ICredentialsFile;
    if (parsed && typeof parsed === 'object' && parsed.servers && typeof parsed.servers === 'object') {
      return { current: parsed.current ?? null, servers: parsed.servers };
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new Error(`cannot read ${credentialsPath()}: ${(error as Error).message}`);
    }
  }
  return { current: null, servers: {} };
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
