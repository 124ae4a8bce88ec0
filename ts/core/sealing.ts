import { Aes256Gcm, CipherSuite, HkdfSha256 } from '@hpke/core';
import { DhkemX25519HkdfSha256 } from '@hpke/dhkem-x25519';
import { createHash, type webcrypto } from 'node:crypto';
import {
  computeSealedSecretAdditionalData,
  sealedSecretInfo,
  sealedSecretSuite,
  type ISealedSecret,
  type ISealedSecretBinding,
} from '../interfaces/data/secret.js';

/**
 * Sealing a secret to a relay's enrolled X25519 recipient with HPKE (RFC 9180, base mode):
 * DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM, through the `@hpke` packages. The
 * additional data is the canonical binding (cluster, node, purpose, secret version), so material
 * opens only where it was meant to.
 *
 * Cloudly seals with `@hpke/core`'s X25519 KEM (hpkeseal.ts), which runs on Node's WebCrypto X25519 (1.2 to 4.9
 * times the seals per CPU second of the pure-JavaScript one in three runs on a loaded machine,
 * bench/results/secrets.md). The relay
 * side here (`generateSecretRecipientKeyPair`, `openSealedSecret`, used by the project's relay
 * client and the tests) uses `@hpke/dhkem-x25519`, an independent X25519 implementation of the
 * same suite: every test that opens material also proves the two interoperate on RFC 9180's wire
 * format, as a relay written with another HPKE library must.
 */

// Sealing itself lives in hpkeseal.ts (WebCrypto only, no Buffer), which the CLI and the
// dashboard's browser bundle share with Cloudly.
export { importRecipientPublicKey, sealSecret } from './hpkeseal.js';

/** The relay's side: key generation and opening. */
const recipientSuite = new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Aes256Gcm() });
const info = new TextEncoder().encode(sealedSecretInfo);

/** Raw X25519 public keys are 32 bytes: 43 characters of unpadded base64url. */
export const x25519PublicKeyPattern = /^[A-Za-z0-9_-]{43}$/;

export const toBase64Url = (bytesArg: ArrayBuffer | Uint8Array): string =>
  Buffer.from(bytesArg instanceof Uint8Array ? bytesArg : new Uint8Array(bytesArg)).toString('base64url');

/** Decodes strict unpadded base64url; null for anything else. */
export const fromBase64Url = (textArg: string): Buffer | null =>
  /^[A-Za-z0-9_-]*$/.test(textArg) && textArg.length % 4 !== 1 ? Buffer.from(textArg, 'base64url') : null;

/** `x25519:` + the first 32 hex digits of sha256 over the raw public key. */
export const secretRecipientId = (publicKeyArg: string): string =>
  `x25519:${createHash('sha256').update(fromBase64Url(publicKeyArg) ?? Buffer.alloc(0)).digest('hex').slice(0, 32)}`;

/** A recipient's X25519 key pair; the private key never leaves the relay. */
export interface ISecretRecipientKeyPair {
  keyPair: webcrypto.CryptoKeyPair;
  /** The raw public key, unpadded base64url: what `beginSecretRecipientEnrollment` carries. */
  publicKey: string;
  recipientId: string;
}

export const generateSecretRecipientKeyPair = async (): Promise<ISecretRecipientKeyPair> => {
  const keyPair = await recipientSuite.kem.generateKeyPair();
  const publicKey = toBase64Url(await recipientSuite.kem.serializePublicKey(keyPair.publicKey));
  return { keyPair, publicKey, recipientId: secretRecipientId(publicKey) };
};

/**
 * Opens sealed material with the recipient's key pair. The additional data is recomputed from
 * `expectedBindingArg` when given (what the relay asked for), else from the material's own
 * binding; either way a binding that was changed in transit fails to open. Throws on any failure.
 */
export const openSealedSecret = async (
  keyPairArg: webcrypto.CryptoKeyPair,
  sealedArg: ISealedSecret,
  expectedBindingArg?: ISealedSecretBinding,
): Promise<Uint8Array> => {
  const enc = fromBase64Url(sealedArg.enc);
  const ciphertext = fromBase64Url(sealedArg.ciphertext);
  if (sealedArg.suite !== sealedSecretSuite || !enc || !ciphertext) {
    throw new Error('sealed secret is malformed');
  }
  const plain = await recipientSuite.open(
    { recipientKey: keyPairArg, enc, info },
    ciphertext,
    computeSealedSecretAdditionalData(expectedBindingArg ?? sealedArg.binding),
  );
  return new Uint8Array(plain);
};
