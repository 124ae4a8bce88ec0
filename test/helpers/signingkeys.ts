import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import * as jose from 'jose';
import { legacySigningKeyFileName } from '../../ts/core/auth.js';

/**
 * Identity signing keys made once for a whole test run.
 *
 * A Cloudly on a fresh database makes its RS256 signing key (a 2048-bit RSA pair), about 0.16
 * CPU-s, and the suite boots a fresh Cloudly a few hundred times. The runner (scripts/test.ts)
 * makes a small pool of keys at the start of a run and names its file in
 * `CLOUDLY_TEST_SIGNING_KEYS`; `startTestCloudly` hands a fresh data directory one of them the
 * way an earlier version kept its key (`keys/identity-signing-key.jwk.json`), which the server
 * moves into the database at start and deletes (ts/core/auth.ts). The same goes for servers on a
 * shared database (the multi-instance tests): the first to start stores its file's key, and the
 * others find the keys document and never read theirs, as an upgraded instance would. Consecutive
 * servers of one test process get different keys, so an identity of one is still refused by the
 * next. A file run on its own (no pool named) boots servers that make their own keys, and the
 * tests of key making and rotation ask for that explicitly (`generateSigningKey`).
 */
export const signingKeysEnvName = 'CLOUDLY_TEST_SIGNING_KEYS';

/** Makes `countArg` keys into a new file (0600); returns its path and how to remove it. */
export const makeSigningKeyPool = async (countArg: number): Promise<{ file: string; remove(): Promise<void> }> => {
  const keys = await Promise.all(Array.from({ length: countArg }, async () => {
    const pair = await jose.generateKeyPair('RS256', { extractable: true, modulusLength: 2048 });
    return jose.exportJWK(pair.privateKey);
  }));
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-test-keys-'));
  const file = path.join(dir, 'signing-keys.json');
  await fsp.writeFile(file, JSON.stringify(keys), { mode: 0o600 });
  return { file, remove: () => fsp.rm(dir, { recursive: true, force: true }) };
};

let pool: jose.JWK[] | null = null;
let nextKey = -1;

const poolKeys = (): jose.JWK[] => {
  if (pool === null) {
    const file = process.env[signingKeysEnvName];
    try {
      pool = file ? JSON.parse(fs.readFileSync(file, 'utf8')) as jose.JWK[] : [];
    } catch {
      pool = [];
    }
    // Test processes start at different places in the pool, so two of them rarely hand out the same key at once.
    nextKey = Math.floor(Math.random() * Math.max(1, pool.length));
  }
  return pool;
};

/**
 * Gives a new data directory (missing or empty: a new installation's) the pool's next key as an
 * earlier version's key file; false when the directory holds anything already or there is no
 * pool (the server then makes its own key).
 */
export const seedSigningKey = async (dataDirArg: string): Promise<boolean> => {
  const keys = poolKeys();
  if (keys.length === 0 || (await fsp.readdir(dataDirArg).catch(() => [])).length > 0) {
    return false;
  }
  const key = keys[nextKey++ % keys.length];
  await fsp.mkdir(path.join(dataDirArg, 'keys'), { recursive: true, mode: 0o700 });
  await fsp.writeFile(path.join(dataDirArg, 'keys', legacySigningKeyFileName), JSON.stringify(key), { mode: 0o600 });
  return true;
};
