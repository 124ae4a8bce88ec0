import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { randomBytes, randomUUID, scrypt as scryptCallback, timingSafeEqual, createHash, type webcrypto } from 'node:crypto';
import { promisify } from 'node:util';
import * as jose from 'jose';
import type { TypedResponseError } from '@api.global/typedrequest';
import type { IIdentity, TIdentityRole } from '../interfaces/data/user.js';
import { accessDeniedRefusal, identityReasons, refuse, refuseNamed } from './errors.js';
import { sha256Hex } from '../interfaces/private/canonicaljson.js';
import { defineDocumentKind, type DocumentStore, type IStoredDocument, type TDecision } from './store.js';
import type { TCloudlyLogger } from './logger.js';
import type { IEncryptedSecretValue, SecretBox } from './secretbox.js';
import { defaultScryptN, isScryptN } from '../config.js';

/**
 * Identities and keys. Cloudly signs every identity (and every restore grant) with an RS256 key
 * pair kept in the database (the private key encrypted at rest) and published in the JWKS with
 * the key the last rotation replaced; verification always pins the
 * algorithm, issuer and audience, so `alg: none`, HS256-with-the-public-key and foreign tokens fail.
 */

const scrypt = promisify(scryptCallback) as (password: string, salt: Buffer, keylen: number, options: { N: number; r: number; p: number; maxmem: number }) => Promise<Buffer>;

export const identityIssuer = 'serve.zone/cloudly';
export const adminAudience = 'serve.zone/cloudly/admin';
const signingAlgorithm = 'RS256';
/** A verified JWT is trusted again without a signature check for at most this long (and never past its expiry or its key). */
const verifiedJwtCacheMs = 60_000;
const verifiedJwtCacheEntries = 10_000;
/** Where versions before the keys moved into the database kept the signing key; migrated and deleted at start. */
export const legacySigningKeyFileName = 'identity-signing-key.jwk.json';
/**
 * Password hashing: scrypt with r=8, p=1, a 16-byte salt and a 64-byte key. Its cost N is
 * CLOUDLY_PASSWORD_SCRYPT_N (`isScryptN` in ts/config.ts: a power of two from 1024 to 65536, 16384
 * by default), as etcd's `--bcrypt-cost` sets bcrypt's; a stored hash names the N it was made with, so
 * a changed setting applies to passwords set after it and every earlier one still verifies.
 */
const scryptParameters = { r: 8, p: 1, keyLength: 64 } as const;
/** scrypt needs 128 * N * r bytes; the limit leaves room above it. */
const scryptMaxmem = (nArg: number, rArg: number): number => 128 * nArg * rArg + 1024 * 1024;

/** What a verified identity proves. */
export interface IVerifiedIdentity {
  userId: string;
  name: string;
  role: TIdentityRole;
  type: IIdentity['type'];
  expiresAt: number;
  /** The identity's own id (its JWT's `jti`): `logout` revokes it. */
  sessionId: string;
  /** The account's session key it was issued under (claim `sk`; '' when it carries none). */
  sessionKey: string;
}

/** A scrypt hash of the password at cost `nArg` (CLOUDLY_PASSWORD_SCRYPT_N). */
export const hashPassword = async (passwordArg: string, nArg: number = defaultScryptN): Promise<string> => {
  const salt = randomBytes(16);
  const { r, p, keyLength } = scryptParameters;
  const hash = await scrypt(passwordArg, salt, keyLength, { N: nArg, r, p, maxmem: scryptMaxmem(nArg, r) });
  return `scrypt$${nArg}$${r}$${p}$${salt.toString('base64url')}$${hash.toString('base64url')}`;
};

/** Whether the password is the one the stored hash was made of, at the cost the hash names. */
export const verifyPassword = async (passwordArg: string, storedArg: string): Promise<boolean> => {
  const parts = storedArg.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') {
    return false;
  }
  const [N, r, p] = parts.slice(1, 4).map(Number);
  // Only what this version could have written: anything else would be a cost nobody chose.
  if (!isScryptN(N) || r !== scryptParameters.r || p !== scryptParameters.p) {
    return false;
  }
  const salt = Buffer.from(parts[4], 'base64url');
  const expected = Buffer.from(parts[5], 'base64url');
  const actual = await scrypt(passwordArg, salt, expected.length, { N, r, p, maxmem: scryptMaxmem(N, r) });
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

/** One identity signing key as stored: the public JWK in clear, the private JWK encrypted at rest. */
export interface IStoredSigningKey {
  kid: string;
  publicJwk: jose.JWK;
  privateJwk: IEncryptedSecretValue;
  createdAt: number;
}

/**
 * The identity signing keys of every instance sharing the database: the current key signs, the
 * previous one (replaced by the last rotation) still verifies and stays in the JWKS.
 */
export interface ISigningKeysDocument extends IStoredDocument {
  current: IStoredSigningKey;
  previous: IStoredSigningKey | null;
}

export const signingKeysKind = defineDocumentKind<ISigningKeysDocument>('CloudlySigningKeys');
export const signingKeysId = 'identity-signing-keys';
/** How often an instance re-reads the keys, so a rotation made by another instance reaches its JWKS. */
export const signingKeysRefreshMs = 30_000;

interface ILoadedSigningKey {
  kid: string;
  publicJwk: jose.JWK;
  publicKey: webcrypto.CryptoKey;
  privateKey: webcrypto.CryptoKey | null;
}

/** A rotation, compare-and-swap on the current key id: the fresh key signs, the replaced one still verifies. */
export const decideSigningKeyRotation = (
  currentArg: ISigningKeysDocument | null,
  expectedKeyIdArg: string,
  freshArg: IStoredSigningKey,
): TDecision<ISigningKeysDocument> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', identityReasons.signingKeyMissing, 'there is no identity signing key') };
  }
  if (currentArg.current.kid !== expectedKeyIdArg) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', identityReasons.signingKeyChanged, `is not the current signing key (${currentArg.current.kid})`, 'request.expectedKeyId') };
  }
  return { kind: 'write', change: { set: { current: freshArg, previous: currentArg.current } } };
};

/** The refusal of an identity JWT that did not verify: expired, or not valid at all. */
const jwtRefusal = (errorArg: unknown): TypedResponseError => (errorArg instanceof jose.errors.JWTExpired
  ? refuseNamed('unauthenticated', identityReasons.expired, 'has expired; log in again', 'identity.jwt')
  : refuseNamed('unauthenticated', identityReasons.invalid, 'failed verification (signature, issuer or audience)', 'identity.jwt'));

export const signingKeyContext = (kidArg: string): string => `CloudlySigningKeys/${signingKeysId}/${kidArg}`;

export class CloudlyAuth {
  private current!: ILoadedSigningKey;
  private previous: ILoadedSigningKey | null = null;
  /** JWTs verified recently, by audience and the exact token text: their claims, key id and how long to trust them. */
  private readonly verifiedJwts = new Map<string, { payload: jose.JWTPayload; kid: string; until: number }>();
  private loadedAt = 0;
  private refreshing: Promise<void> | null = null;
  private refreshTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly options: { dataDir: string; identityTtlMs: number; logger: TCloudlyLogger; secrets: SecretBox },
    private readonly store: DocumentStore,
  ) {}

  /** The id of the key that signs now. */
  public get keyId(): string {
    return this.current.kid;
  }

  public get publicJwk(): jose.JWK {
    return this.current.publicJwk;
  }

  public async start(): Promise<void> {
    await this.ensureSigningKeys();
    await this.reload();
    this.refreshTimer = setInterval(() => {
      this.refresh().catch((error: unknown) => this.options.logger.warn({ err: error }, 'reading the identity signing keys failed'));
    }, signingKeysRefreshMs);
    this.refreshTimer.unref();
  }

  public stop(): void {
    if (this.refreshTimer) {
      clearInterval(this.refreshTimer);
      this.refreshTimer = null;
    }
  }

  /**
   * Creates the keys document on first start. A key file an earlier version kept in the data
   * directory becomes the current key (encrypted into the database) and the file is deleted, so
   * identities issued before the upgrade still verify and no private key stays on disk in clear.
   */
  private async ensureSigningKeys(): Promise<void> {
    if (await this.store.get(signingKeysKind, signingKeysId)) {
      return;
    }
    const legacyPath = path.join(this.options.dataDir, 'keys', legacySigningKeyFileName);
    let privateJwk: jose.JWK | null = null;
    try {
      privateJwk = JSON.parse(await fsp.readFile(legacyPath, 'utf8')) as jose.JWK;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new Error(`signing key ${legacyPath} is unreadable: ${(error as Error).message}`);
      }
    }
    const stored = privateJwk ? await this.toStoredKey(privateJwk) : await this.newStoredKey();
    const { outcome } = await this.store.mutate(signingKeysKind, signingKeysId, (current) =>
      current ? { kind: 'keep' } : { kind: 'create', doc: { id: signingKeysId, current: stored, previous: null } });
    if (outcome === 'created') {
      this.options.logger.info({ kid: stored.kid, migratedFromFile: privateJwk !== null }, 'stored the identity signing key in the database');
    }
    if (privateJwk) {
      await fsp.rm(legacyPath, { force: true });
    }
  }

  private async newStoredKey(): Promise<IStoredSigningKey> {
    const pair = await jose.generateKeyPair(signingAlgorithm, { extractable: true, modulusLength: 2048 });
    return this.toStoredKey(await jose.exportJWK(pair.privateKey));
  }

  private async toStoredKey(privateJwkArg: jose.JWK): Promise<IStoredSigningKey> {
    const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, kid: _kid, alg: _alg, use: _use, ...publicPart } = privateJwkArg;
    const kid = await jose.calculateJwkThumbprint(publicPart as jose.JWK);
    const publicJwk: jose.JWK = { ...publicPart, use: 'sig', alg: signingAlgorithm, kid };
    const privateJwk = { ...privateJwkArg, kid, alg: signingAlgorithm };
    return { kid, publicJwk, privateJwk: this.options.secrets.encrypt(JSON.stringify(privateJwk), signingKeyContext(kid)), createdAt: Date.now() };
  }

  private async loadKey(storedArg: IStoredSigningKey, withPrivateArg: boolean): Promise<ILoadedSigningKey> {
    const privateKey = withPrivateArg
      ? (await jose.importJWK(JSON.parse(this.options.secrets.decryptText(storedArg.privateJwk, signingKeyContext(storedArg.kid))) as jose.JWK, signingAlgorithm)) as webcrypto.CryptoKey
      : null;
    return {
      kid: storedArg.kid,
      publicJwk: storedArg.publicJwk,
      publicKey: (await jose.importJWK(storedArg.publicJwk, signingAlgorithm)) as webcrypto.CryptoKey,
      privateKey,
    };
  }

  /** Reads the keys from the database into memory (only the current private key is decrypted). */
  private async reload(): Promise<void> {
    const doc = await this.store.get(signingKeysKind, signingKeysId);
    if (!doc) {
      throw new Error('the identity signing keys are missing from the database');
    }
    if (this.current?.kid !== doc.current.kid) {
      this.current = await this.loadKey(doc.current, true);
    }
    this.previous = doc.previous ? (this.previous?.kid === doc.previous.kid ? this.previous : await this.loadKey(doc.previous, false)) : null;
    this.loadedAt = Date.now();
  }

  /** One reload at a time; callers that find a reload running wait for it. */
  private refresh(): Promise<void> {
    if (!this.refreshing) {
      this.refreshing = this.reload().finally(() => { this.refreshing = null; });
    }
    return this.refreshing;
  }

  /**
   * Replaces the signing key (compare-and-swap on the current key id): a new key signs from now on,
   * the replaced one verifies until the next rotation. Identities and grants signed by the key
   * before that are refused after a second rotation, so rotate at most once per identity lifetime.
   */
  public async rotateSigningKey(expectedKeyIdArg: string): Promise<{ currentKeyId: string; previousKeyId: string }> {
    const fresh = await this.mintSigningKey();
    const { doc } = await this.store.mutate(signingKeysKind, signingKeysId, (current) => decideSigningKeyRotation(current, expectedKeyIdArg, fresh));
    // A dry run wrote nothing: reading again keeps the keys as they are.
    await this.refresh();
    return { currentKeyId: doc!.current.kid, previousKeyId: doc!.previous!.kid };
  }

  /** A new signing key pair, its private half encrypted where it is stored (a fact of a rotation). */
  public mintSigningKey(): Promise<IStoredSigningKey> {
    return this.newStoredKey();
  }

  /** Reads the keys again after a committed rotation, so this instance signs with the new key at once. */
  public reloadSigningKeys(): Promise<void> {
    return this.refresh();
  }

  /** The JWKS document served at `/.well-known/jwks.json`: the current key and the previous one. */
  public get jwks(): { keys: jose.JWK[] } {
    return { keys: [this.current.publicJwk, ...(this.previous ? [this.previous.publicJwk] : [])] };
  }

  /**
   * Signs `payloadArg` with Cloudly's current key as a compact RS256 JWS with a detached payload
   * (`<header>..<signature>`, RFC 7515 appendix F): the verifier holds the bytes already.
   */
  public async signDetached(payloadArg: Uint8Array, typArg: string): Promise<string> {
    if (Date.now() - this.loadedAt > signingKeysRefreshMs) {
      await this.refresh();
    }
    const [header, , signature] = (await new jose.CompactSign(payloadArg)
      .setProtectedHeader({ alg: signingAlgorithm, kid: this.current.kid, typ: typArg })
      .sign(this.current.privateKey!)).split('.');
    return `${header}..${signature}`;
  }

  /** Signs a compact RS256 JWT with Cloudly's current key; used for identities and restore grants. */
  public async signJwt(claimsArg: jose.JWTPayload, optionsArg: { audience: string; subject: string; expiresAtMs: number }): Promise<string> {
    if (Date.now() - this.loadedAt > signingKeysRefreshMs) {
      await this.refresh();
    }
    return new jose.SignJWT(claimsArg)
      .setProtectedHeader({ alg: signingAlgorithm, kid: this.current.kid, typ: 'JWT' })
      .setIssuer(identityIssuer)
      .setAudience(optionsArg.audience)
      .setSubject(optionsArg.subject)
      .setIssuedAt()
      .setJti(randomUUID())
      .setExpirationTime(Math.floor(optionsArg.expiresAtMs / 1000))
      .sign(this.current.privateKey!);
  }

  /**
   * Verifies a JWT with the key its `kid` names (current or previous), pinned algorithm, issuer and
   * audience. A kid this instance does not know makes it read the keys again once (another
   * instance may have rotated), at most once per second.
   */
  public async verifyJwt(jwtArg: string, audienceArg: string): Promise<jose.JWTPayload> {
    let kid: string | undefined;
    try {
      kid = jose.decodeProtectedHeader(jwtArg).kid;
    } catch {
      kid = undefined;
    }
    const known = (): ILoadedSigningKey | undefined => [this.current, this.previous].find((key) => key !== null && key.kid === kid) ?? undefined;
    if (kid !== undefined && !known() && Date.now() - this.loadedAt > 1000) {
      await this.refresh();
    }
    const key = known() ?? this.current;
    // A JWT verified before, whose key is still one of ours and which has not expired, is not
    // verified again (the signature check is most of an admin call's work on a cached read).
    const cacheKey = `${audienceArg} ${jwtArg}`;
    const cached = this.verifiedJwts.get(cacheKey);
    if (cached && cached.kid === kid && known() !== undefined && Date.now() < cached.until) {
      return cached.payload;
    }
    const { payload } = await jose.jwtVerify(jwtArg, key.publicKey, {
      algorithms: [signingAlgorithm],
      issuer: identityIssuer,
      audience: audienceArg,
    });
    if (typeof payload.exp === 'number' && kid !== undefined && known() !== undefined) {
      if (this.verifiedJwts.size >= verifiedJwtCacheEntries) {
        this.verifiedJwts.delete(this.verifiedJwts.keys().next().value!);
      }
      this.verifiedJwts.set(cacheKey, { payload, kid, until: Math.min(payload.exp * 1000, Date.now() + verifiedJwtCacheMs) });
    }
    return payload;
  }

  public async issueIdentity(userArg: { id: string; username: string; role: TIdentityRole; sessionKey?: string }): Promise<IIdentity> {
    const expiresAt = Date.now() + this.options.identityTtlMs;
    const jwt = await this.signJwt(
      { name: userArg.username, role: userArg.role, type: 'user', ...(userArg.sessionKey ? { sk: userArg.sessionKey } : {}) },
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
      throw accessDeniedRefusal();
    }
    return verified;
  }

  /** Verifies a bare admin identity JWT (the socket upgrade carries only the JWT). */
  public async verifyAdminJwt(jwtArg: string): Promise<IVerifiedIdentity> {
    return this.verifyAdminIdentity(await this.verifyIdentityJwt(jwtArg));
  }

  /** Verifies a bare identity JWT of any role (the socket upgrade carries only the JWT). */
  public async verifyIdentityJwt(jwtArg: string): Promise<IVerifiedIdentity> {
    let payload: jose.JWTPayload;
    try {
      payload = await this.verifyJwt(jwtArg, adminAudience);
    } catch (error) {
      throw jwtRefusal(error);
    }
    return this.verifyIdentity({
      jwt: jwtArg, userId: payload.sub, role: payload.role, name: payload.name, type: payload.type,
      expiresAt: typeof payload.exp === 'number' ? payload.exp * 1000 : undefined,
    });
  }

  public async verifyIdentity(identityArg: unknown): Promise<IVerifiedIdentity> {
    if (!identityArg || typeof identityArg !== 'object' || Array.isArray(identityArg)) {
      throw refuseNamed('unauthenticated', identityReasons.missing, 'must be an object', 'identity');
    }
    const identity = identityArg as Record<string, unknown>;
    if (typeof identity.jwt !== 'string' || identity.jwt.length === 0 || identity.jwt.length > 8192) {
      throw refuseNamed('unauthenticated', identityReasons.malformed, 'must be a compact JWT', 'identity.jwt');
    }
    let payload: jose.JWTPayload;
    try {
      payload = await this.verifyJwt(identity.jwt, adminAudience);
    } catch (error) {
      throw jwtRefusal(error);
    }
    const role = payload.role;
    if ((role !== 'admin' && role !== 'user') || typeof payload.sub !== 'string' || typeof payload.name !== 'string') {
      throw refuseNamed('unauthenticated', identityReasons.invalid, 'carries no valid claims', 'identity.jwt');
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
      throw refuse('unauthenticated', [identityReasons.invalid], {
        causes: disagreeing.map((field) => ({ path: `identity.${field}`, message: 'disagrees with its signed claims' })),
      });
    }
    return {
      userId: payload.sub,
      name: payload.name,
      role,
      type: 'user',
      expiresAt: (payload.exp ?? 0) * 1000,
      sessionId: typeof payload.jti === 'string' ? payload.jti : '',
      sessionKey: typeof payload.sk === 'string' ? payload.sk : '',
    };
  }
}

/**
 * Verified against when a username is unknown, so timing does not reveal which names exist: at the
 * cost new passwords are hashed with, which is what most accounts' hashes cost.
 */
export const dummyPasswordHash = (nArg: number = defaultScryptN): string =>
  `scrypt$${nArg}$${scryptParameters.r}$${scryptParameters.p}$AAAAAAAAAAAAAAAAAAAAAA$${Buffer.alloc(scryptParameters.keyLength).toString('base64url')}`;
