import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { randomBytes, randomUUID, scrypt as scryptCallback, timingSafeEqual, createHash, type webcrypto } from 'node:crypto';
import { promisify } from 'node:util';
import * as jose from 'jose';
import type { IIdentity, TIdentityRole } from '../interfaces/data/user.js';
import { refuse } from './errors.js';
import { sha256Hex } from '../interfaces/private/canonicaljson.js';
import { defineDocumentKind, type DocumentStore, type IStoredDocument } from './store.js';
import type { TCloudlyLogger } from './logger.js';

/**
 * Identities and keys. Cloudly signs every identity (and every restore grant) with one RS256 key
 * pair kept in the data directory and published in the JWKS; verification always pins the
 * algorithm, issuer and audience, so `alg: none`, HS256-with-the-public-key and foreign tokens fail.
 */

const scrypt = promisify(scryptCallback) as (password: string, salt: Buffer, keylen: number, options: { N: number; r: number; p: number; maxmem: number }) => Promise<Buffer>;

export const identityIssuer = 'serve.zone/cloudly';
export const adminAudience = 'serve.zone/cloudly/admin';
const signingAlgorithm = 'RS256';
const signingKeyFileName = 'identity-signing-key.jwk.json';
const scryptParameters = { N: 16384, r: 8, p: 1, keyLength: 64 } as const;

export interface IAdminUser extends IStoredDocument {
  username: string;
  passwordHash: string;
  role: TIdentityRole;
  createdAt: number;
}

export const adminUserKind = defineDocumentKind<IAdminUser>('CloudlyAdminUser');

/** What a verified identity proves. */
export interface IVerifiedIdentity {
  userId: string;
  name: string;
  role: TIdentityRole;
  type: IIdentity['type'];
  expiresAt: number;
}

export const hashPassword = async (passwordArg: string): Promise<string> => {
  const salt = randomBytes(16);
  const { N, r, p, keyLength } = scryptParameters;
  const hash = await scrypt(passwordArg, salt, keyLength, { N, r, p, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64url')}$${hash.toString('base64url')}`;
};

export const verifyPassword = async (passwordArg: string, storedArg: string): Promise<boolean> => {
  const parts = storedArg.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') {
    return false;
  }
  const [N, r, p] = parts.slice(1, 4).map(Number);
  const salt = Buffer.from(parts[4], 'base64url');
  const expected = Buffer.from(parts[5], 'base64url');
  const actual = await scrypt(passwordArg, salt, expected.length, { N, r, p, maxmem: 64 * 1024 * 1024 });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
};

/** sha256 of a high-entropy secret (relay tokens, bearers): enough, since nobody can guess them. */
export const hashHighEntropySecret = (secretArg: string): string => sha256Hex(secretArg);

/** Compares two strings in time that does not depend on where they differ. */
export const constantTimeEquals = (aArg: string, bArg: string): boolean => {
  const a = createHash('sha256').update(aArg, 'utf8').digest();
  const b = createHash('sha256').update(bArg, 'utf8').digest();
  return timingSafeEqual(a, b) && aArg.length === bArg.length;
};

export class CloudlyAuth {
  private privateKey!: webcrypto.CryptoKey;
  private publicKey!: webcrypto.CryptoKey;
  public publicJwk!: jose.JWK;
  public keyId!: string;

  constructor(
    private readonly options: { dataDir: string; identityTtlMs: number; logger: TCloudlyLogger },
    private readonly store: DocumentStore,
  ) {}

  public async start(): Promise<void> {
    await this.loadOrCreateSigningKey();
  }

  private async loadOrCreateSigningKey(): Promise<void> {
    const keyDir = path.join(this.options.dataDir, 'keys');
    const keyPath = path.join(keyDir, signingKeyFileName);
    let privateJwk: jose.JWK;
    try {
      privateJwk = JSON.parse(await fsp.readFile(keyPath, 'utf8')) as jose.JWK;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new Error(`signing key ${keyPath} is unreadable: ${(error as Error).message}`);
      }
      const pair = await jose.generateKeyPair(signingAlgorithm, { extractable: true, modulusLength: 2048 });
      privateJwk = await jose.exportJWK(pair.privateKey);
      privateJwk.kid = await jose.calculateJwkThumbprint(privateJwk);
      privateJwk.alg = signingAlgorithm;
      await fsp.mkdir(keyDir, { recursive: true, mode: 0o700 });
      const temporary = `${keyPath}.tmp`;
      await fsp.writeFile(temporary, JSON.stringify(privateJwk), { mode: 0o600 });
      await fsp.rename(temporary, keyPath);
      this.options.logger.info({ kid: privateJwk.kid }, 'created a new identity signing key');
    }
    this.keyId = privateJwk.kid as string;
    this.privateKey = (await jose.importJWK(privateJwk, signingAlgorithm)) as webcrypto.CryptoKey;
    const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...publicJwk } = privateJwk;
    this.publicJwk = { ...publicJwk, use: 'sig', alg: signingAlgorithm, kid: this.keyId };
    this.publicKey = (await jose.importJWK(this.publicJwk, signingAlgorithm)) as webcrypto.CryptoKey;
  }

  /** The JWKS document served at `/.well-known/jwks.json`. */
  public get jwks(): { keys: jose.JWK[] } {
    return { keys: [this.publicJwk] };
  }

  /** Signs a compact RS256 JWT with Cloudly's key; used for identities and restore grants. */
  public async signJwt(claimsArg: jose.JWTPayload, optionsArg: { audience: string; subject: string; expiresAtMs: number }): Promise<string> {
    return new jose.SignJWT(claimsArg)
      .setProtectedHeader({ alg: signingAlgorithm, kid: this.keyId, typ: 'JWT' })
      .setIssuer(identityIssuer)
      .setAudience(optionsArg.audience)
      .setSubject(optionsArg.subject)
      .setIssuedAt()
      .setJti(randomUUID())
      .setExpirationTime(Math.floor(optionsArg.expiresAtMs / 1000))
      .sign(this.privateKey);
  }

  /** Verifies a JWT with Cloudly's public key, pinned algorithm, issuer and audience. */
  public async verifyJwt(jwtArg: string, audienceArg: string): Promise<jose.JWTPayload> {
    const { payload } = await jose.jwtVerify(jwtArg, this.publicKey, {
      algorithms: [signingAlgorithm],
      issuer: identityIssuer,
      audience: audienceArg,
    });
    return payload;
  }

  public async issueIdentity(userArg: { id: string; username: string; role: TIdentityRole }): Promise<IIdentity> {
    const expiresAt = Date.now() + this.options.identityTtlMs;
    const jwt = await this.signJwt(
      { name: userArg.username, role: userArg.role, type: 'user' },
      { audience: adminAudience, subject: userArg.id, expiresAtMs: expiresAt },
    );
    return { name: userArg.username, userId: userArg.id, type: 'user', role: userArg.role, expiresAt, jwt };
  }

  /**
   * Verifies the identity an admin request carries: signature, issuer, audience, expiry, that
   * the visible fields agree with the signed ones, and the admin role.
   */
  public async verifyAdminIdentity(identityArg: unknown): Promise<IVerifiedIdentity> {
    const verified = await this.verifyIdentity(identityArg);
    if (verified.role !== 'admin') {
      throw refuse('forbidden', ['identity role must be admin']);
    }
    return verified;
  }

  /** Verifies a bare admin identity JWT (the socket upgrade carries only the JWT). */
  public async verifyAdminJwt(jwtArg: string): Promise<IVerifiedIdentity> {
    let payload: jose.JWTPayload;
    try {
      payload = await this.verifyJwt(jwtArg, adminAudience);
    } catch {
      throw refuse('unauthenticated', ['identity.jwt failed verification']);
    }
    return this.verifyAdminIdentity({
      jwt: jwtArg, userId: payload.sub, role: payload.role, name: payload.name, type: payload.type,
      expiresAt: typeof payload.exp === 'number' ? payload.exp * 1000 : undefined,
    });
  }

  public async verifyIdentity(identityArg: unknown): Promise<IVerifiedIdentity> {
    if (!identityArg || typeof identityArg !== 'object' || Array.isArray(identityArg)) {
      throw refuse('unauthenticated', ['identity must be an object']);
    }
    const identity = identityArg as Record<string, unknown>;
    if (typeof identity.jwt !== 'string' || identity.jwt.length === 0 || identity.jwt.length > 8192) {
      throw refuse('unauthenticated', ['identity.jwt must be a compact JWT']);
    }
    let payload: jose.JWTPayload;
    try {
      payload = await this.verifyJwt(identity.jwt, adminAudience);
    } catch (error) {
      const reason = error instanceof jose.errors.JWTExpired
        ? 'identity.jwt has expired'
        : 'identity.jwt failed verification';
      throw refuse('unauthenticated', [reason]);
    }
    const role = payload.role;
    if ((role !== 'admin' && role !== 'user') || typeof payload.sub !== 'string' || typeof payload.name !== 'string') {
      throw refuse('unauthenticated', ['identity.jwt carries no valid claims']);
    }
    // Every visible field must say what the signature says: a dashboard shows them, and a
    // handler may log or record them. expiresAt is milliseconds; the claim has whole seconds.
    const disagreeing = [
      identity.userId !== payload.sub ? 'userId' : null,
      identity.role !== role ? 'role' : null,
      identity.name !== payload.name ? 'name' : null,
      identity.type !== 'user' || payload.type !== 'user' ? 'type' : null,
      typeof identity.expiresAt !== 'number' || Math.floor(identity.expiresAt / 1000) !== payload.exp ? 'expiresAt' : null,
    ].filter((field): field is string => field !== null);
    if (disagreeing.length > 0) {
      throw refuse('unauthenticated', disagreeing.map((field) => `identity.${field} disagrees with its signed claims`));
    }
    return {
      userId: payload.sub,
      name: payload.name,
      role,
      type: 'user',
      expiresAt: (payload.exp ?? 0) * 1000,
    };
  }

  /** Creates the first admin when none with that name exists. Returns the generated password, if any. */
  public async ensureFirstAdmin(usernameArg: string, passwordArg: string | null): Promise<string | null> {
    const existing = await this.store.findOne(adminUserKind, { username: usernameArg });
    if (existing) {
      return null;
    }
    const generated = passwordArg === null ? randomBytes(18).toString('base64url') : null;
    await this.store.insert(adminUserKind, {
      // One admin per name: the id is derived from it, so two instances starting at once create one.
      id: `admin-${sha256Hex(usernameArg).slice(0, 24)}`,
      username: usernameArg,
      passwordHash: await hashPassword(passwordArg ?? generated!),
      role: 'admin',
      createdAt: Date.now(),
    });
    return generated;
  }

  public async login(usernameArg: string, passwordArg: string): Promise<IIdentity> {
    const user = await this.store.findOne(adminUserKind, { username: usernameArg });
    // Verify against a dummy hash when the user is unknown, so timing does not reveal names.
    const ok = await verifyPassword(passwordArg, user?.passwordHash ?? dummyPasswordHash);
    if (!user || !ok) {
      throw refuse('unauthenticated', ['username or password is wrong']);
    }
    return this.issueIdentity({ id: user.id, username: user.username, role: user.role });
  }
}

const dummyPasswordHash = 'scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA$' + Buffer.alloc(64).toString('base64url');
