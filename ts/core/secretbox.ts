import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { createCipheriv, createDecipheriv, createHash, randomBytes, randomUUID } from 'node:crypto';
import { ConfigError } from '../config.js';
import { defineDocumentKind, type DocumentStore, type IStoredDocument } from './store.js';
import type { TCloudlyLogger } from './logger.js';
import { syncDirectory, writeFully } from './durablefiles.js';

/**
 * Encryption at rest. Every secret value Cloudly keeps (Corestore control credentials, ingress
 * bearers, identity signing keys) is stored as AES-256-GCM ciphertext under a data key; the data
 * key is stored in the database wrapped (AES-256-GCM again) by the key-encryption key (KEK), which
 * never enters the database: it comes from the file `CLOUDLY_SECRETS_KEY_FILE` names, or, unset, a
 * file generated with mode 0600 in the data directory on first start. Each ciphertext is bound to
 * where it is stored (its `context`), so a value copied into another document does not decrypt.
 */

export const secretsKeyVariable = 'CLOUDLY_SECRETS_KEY_FILE';
export const secretsPreviousKeyVariable = 'CLOUDLY_SECRETS_PREVIOUS_KEY_FILE';
export const generatedKeyFileName = 'secrets-key-encryption-key';
const keyBytes = 32;
const ivBytes = 12;
const encryptedValueScheme = 'aes-256-gcm/v1' as const;

/** A secret value as stored: ciphertext under a data key, bound to its context. */
export interface IEncryptedSecretValue {
  scheme: typeof encryptedValueScheme;
  dataKeyId: string;
  iv: string;
  ciphertext: string;
  tag: string;
}

interface IWrappedDataKey {
  dataKeyId: string;
  /** Which KEK wraps it: the first 16 hex digits of sha256 over `serve.zone/cloudly/kek-id\n` + the KEK. */
  keyEncryptionKeyId: string;
  iv: string;
  ciphertext: string;
  tag: string;
  createdAt: number;
}

/** The one keyring document: every data key, wrapped, and which one encrypts new values. */
export interface ISecretKeyringDocument extends IStoredDocument {
  currentDataKeyId: string;
  dataKeys: IWrappedDataKey[];
}

export const secretKeyringKind = defineDocumentKind<ISecretKeyringDocument>('CloudlySecretKeyring');
const keyringId = 'keyring';

/** A stored secret that does not authenticate (tampered, or copied from elsewhere). Never carries the value. */
export class SecretAtRestUnreadableError extends Error {
  constructor(public readonly context: string) {
    super(`the secret stored at ${context} failed authentication`);
    this.name = 'SecretAtRestUnreadableError';
  }
}

const keyEncryptionKeyId = (keyArg: Buffer): string =>
  createHash('sha256').update('serve.zone/cloudly/kek-id\n').update(keyArg).digest('hex').slice(0, 16);

/** A KEK file holds 32 bytes: raw, or as 64 hex digits, or as base64/base64url text. */
export const parseKeyEncryptionKey = (contentArg: Buffer): Buffer | null => {
  if (contentArg.length === keyBytes) {
    return Buffer.from(contentArg);
  }
  const text = contentArg.toString('utf8').trim();
  if (/^[0-9a-fA-F]{64}$/.test(text)) {
    return Buffer.from(text, 'hex');
  }
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
    const decoded = Buffer.from(text.replace(/\+/g, '-').replace(/\//g, '_').replace(/=$/, ''), 'base64url');
    return decoded.length === keyBytes ? decoded : null;
  }
  return null;
};

const readKeyFile = async (fileArg: string, variableArg: string): Promise<Buffer> => {
  let content: Buffer;
  try {
    content = await fsp.readFile(fileArg);
  } catch (error) {
    throw new ConfigError(variableArg, `the key-encryption key file ${fileArg} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const key = parseKeyEncryptionKey(content);
  if (!key) {
    throw new ConfigError(variableArg, `the key-encryption key file ${fileArg} must hold 32 bytes (raw, 64 hex digits or base64)`);
  }
  return key;
};

const gcmSeal = (keyArg: Buffer, plainArg: Buffer, aadArg: string) => {
  const iv = randomBytes(ivBytes);
  const cipher = createCipheriv('aes-256-gcm', keyArg, iv);
  cipher.setAAD(Buffer.from(aadArg, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plainArg), cipher.final()]);
  return { iv: iv.toString('base64'), ciphertext: ciphertext.toString('base64'), tag: cipher.getAuthTag().toString('base64') };
};

const gcmOpen = (keyArg: Buffer, sealedArg: { iv: string; ciphertext: string; tag: string }, aadArg: string): Buffer => {
  const decipher = createDecipheriv('aes-256-gcm', keyArg, Buffer.from(sealedArg.iv, 'base64'));
  decipher.setAAD(Buffer.from(aadArg, 'utf8'));
  decipher.setAuthTag(Buffer.from(sealedArg.tag, 'base64'));
  return Buffer.concat([decipher.update(Buffer.from(sealedArg.ciphertext, 'base64')), decipher.final()]);
};

const dataKeyContext = (dataKeyIdArg: string): string => `serve.zone/cloudly/data-key\n${dataKeyIdArg}`;
const valueContext = (contextArg: string): string => `serve.zone/cloudly/secret-at-rest\n${contextArg}`;

export interface ISecretBoxOptions {
  dataDir: string;
  keyFile: string | null;
  previousKeyFile: string | null;
  logger: TCloudlyLogger;
}

export class SecretBox {
  private readonly dataKeys = new Map<string, Buffer>();
  private currentDataKeyId: string | null = null;

  constructor(private readonly options: ISecretBoxOptions, private readonly store: DocumentStore) {}

  /** The KEK file in use: the configured one, or the generated one in the data directory. */
  public get keyFile(): string {
    return this.options.keyFile ?? path.join(this.options.dataDir, 'keys', generatedKeyFileName);
  }

  /**
   * Loads the KEK (a configured file that is missing or unreadable refuses start, naming the
   * variable), creates the keyring on first start, re-wraps data keys still wrapped by the previous
   * KEK, and unwraps every data key into memory.
   */
  public async start(): Promise<void> {
    const key = this.options.keyFile
      ? await readKeyFile(this.options.keyFile, secretsKeyVariable)
      : await this.loadOrGenerateKeyFile();
    const previous = this.options.previousKeyFile ? await readKeyFile(this.options.previousKeyFile, secretsPreviousKeyVariable) : null;
    const kekId = keyEncryptionKeyId(key);
    const kekById = new Map<string, Buffer>([[kekId, key]]);
    if (previous) {
      kekById.set(keyEncryptionKeyId(previous), previous);
    }
    const { doc } = await this.store.mutate(secretKeyringKind, keyringId, (current) => {
      if (!current) {
        const dataKeyId = randomUUID();
        return { kind: 'create', doc: { id: keyringId, currentDataKeyId: dataKeyId, dataKeys: [wrapDataKey(key, kekId, dataKeyId, randomBytes(keyBytes))] } };
      }
      const stale = current.dataKeys.filter((dataKey) => dataKey.keyEncryptionKeyId !== kekId);
      if (stale.length === 0) {
        return { kind: 'keep' };
      }
      // Re-wrap what the previous KEK wraps; a data key wrapped by neither refuses start below.
      const rewrapped = current.dataKeys.map((dataKey) => {
        const wrapping = kekById.get(dataKey.keyEncryptionKeyId);
        if (dataKey.keyEncryptionKeyId === kekId || !wrapping) {
          return dataKey;
        }
        return wrapDataKey(key, kekId, dataKey.dataKeyId, unwrapDataKey(wrapping, dataKey), dataKey.createdAt);
      });
      return rewrapped.some((dataKey, index) => dataKey !== current.dataKeys[index])
        ? { kind: 'write', change: { set: { dataKeys: rewrapped } } }
        : { kind: 'keep' };
    });
    if (!doc) {
      throw new Error('the secret keyring could not be read');
    }
    for (const dataKey of doc.dataKeys) {
      const wrapping = kekById.get(dataKey.keyEncryptionKeyId);
      if (!wrapping) {
        throw new ConfigError(secretsKeyVariable, `does not hold the key-encryption key that wraps the stored data key ${dataKey.dataKeyId}`
          + ` (key id ${dataKey.keyEncryptionKeyId}; this file's is ${kekId}); when rotating, name the old file in ${secretsPreviousKeyVariable}`);
      }
      try {
        this.dataKeys.set(dataKey.dataKeyId, unwrapDataKey(wrapping, dataKey));
      } catch {
        throw new ConfigError(secretsKeyVariable, `the stored data key ${dataKey.dataKeyId} failed authentication under the key-encryption key`);
      }
    }
    this.currentDataKeyId = doc.currentDataKeyId;
    if (doc.dataKeys.some((dataKey) => dataKey.keyEncryptionKeyId !== kekId)) {
      this.options.logger.warn('some data keys are still wrapped by the previous key-encryption key');
    }
  }

  private async loadOrGenerateKeyFile(): Promise<Buffer> {
    const file = this.keyFile;
    try {
      return await readKeyFile(file, secretsKeyVariable);
    } catch (error) {
      if ((await fsp.stat(file).catch(() => null)) !== null) {
        throw error;
      }
    }
    const key = randomBytes(keyBytes);
    await fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    const temporary = `${file}.${process.pid}.tmp`;
    const handle = await fsp.open(temporary, 'wx', 0o600);
    try {
      await writeFully(handle, Buffer.from(`${key.toString('hex')}\n`), 0);
      await handle.sync();
    } finally {
      await handle.close();
    }
    // Read back before it is linked into place: a key file cut short by a full disk would make
    // every later start refuse, and every secret sealed under it unreadable.
    const writtenBack = parseKeyEncryptionKey(await fsp.readFile(temporary));
    if (!writtenBack || !writtenBack.equals(key)) {
      await fsp.rm(temporary, { force: true });
      throw new Error(`the key-encryption key written to ${temporary} did not read back intact; nothing was linked into place`);
    }
    // A link, not a rename: two instances generating at once keep the first file and both use it.
    try {
      await fsp.link(temporary, file);
      await syncDirectory(path.dirname(file));
      this.options.logger.info({ file }, `generated a key-encryption key for secrets at rest (set ${secretsKeyVariable} to keep it elsewhere)`);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw error;
      }
    } finally {
      await fsp.rm(temporary, { force: true });
    }
    return readKeyFile(file, secretsKeyVariable);
  }

  private requireStarted(): void {
    if (!this.currentDataKeyId) {
      throw new Error('secrets at rest are not available before start');
    }
  }

  /** Encrypts a value for storage at `contextArg` (the document and field it is stored in). */
  public encrypt(valueArg: string | Uint8Array, contextArg: string): IEncryptedSecretValue {
    this.requireStarted();
    const dataKeyId = this.currentDataKeyId!;
    const plain = typeof valueArg === 'string' ? Buffer.from(valueArg, 'utf8') : Buffer.from(valueArg);
    return { scheme: encryptedValueScheme, dataKeyId, ...gcmSeal(this.dataKeys.get(dataKeyId)!, plain, valueContext(contextArg)) };
  }

  /**
   * Decrypts a stored value. A value that fails authentication (tampered, or stored at another
   * context) is logged by context only, never by value, and refused with SecretAtRestUnreadableError.
   */
  public decrypt(valueArg: IEncryptedSecretValue, contextArg: string): Buffer {
    this.requireStarted();
    const dataKey = valueArg && typeof valueArg === 'object' ? this.dataKeys.get(valueArg.dataKeyId) : undefined;
    try {
      if (!dataKey || valueArg.scheme !== encryptedValueScheme) {
        throw new Error('unknown data key or scheme');
      }
      return gcmOpen(dataKey, valueArg, valueContext(contextArg));
    } catch {
      this.options.logger.error({ secretContext: contextArg }, 'a secret stored at rest failed authentication and was refused');
      throw new SecretAtRestUnreadableError(contextArg);
    }
  }

  public decryptText(valueArg: IEncryptedSecretValue, contextArg: string): string {
    return this.decrypt(valueArg, contextArg).toString('utf8');
  }
}

const wrapDataKey = (kekArg: Buffer, kekIdArg: string, dataKeyIdArg: string, dataKeyArg: Buffer, createdAtArg = Date.now()): IWrappedDataKey => ({
  dataKeyId: dataKeyIdArg,
  keyEncryptionKeyId: kekIdArg,
  createdAt: createdAtArg,
  ...gcmSeal(kekArg, dataKeyArg, dataKeyContext(dataKeyIdArg)),
});

const unwrapDataKey = (kekArg: Buffer, wrappedArg: IWrappedDataKey): Buffer =>
  gcmOpen(kekArg, wrappedArg, dataKeyContext(wrappedArg.dataKeyId));
