import { Aes256Gcm, CipherSuite, DhkemX25519HkdfSha256, HkdfSha256 } from '@hpke/core';
import {
  computeSealedSecretAdditionalData,
  sealedSecretInfo,
  sealedSecretSuite,
  type ISealedSecret,
  type ISealedSecretBinding,
} from '../interfaces/data/secret.js';

/**
 * The sealing side of docs/secrets.md, section 3, on WebCrypto alone: no Node module and no
 * `Buffer`, so the same code seals in Cloudly, in the CLI and in the dashboard's browser bundle
 * (web/src/pages/secrets.ts). `@hpke/core`'s X25519 KEM runs on the platform's WebCrypto X25519 (Node,
 * Chromium 133+, Firefox 130+, Safari 17+); a browser reaches WebCrypto only in a secure context
 * (https, or http on localhost).
 */

const suite = new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Aes256Gcm() });
const info = new TextEncoder().encode(sealedSecretInfo);

/** A recipient's public key as WebCrypto holds it once imported. */
export type TRecipientPublicKey = Awaited<ReturnType<typeof suite.kem.deserializePublicKey>>;

/** Unpadded base64url of bytes. */
export const bytesToBase64Url = (bytesArg: ArrayBuffer | Uint8Array): string => {
  const bytes = bytesArg instanceof Uint8Array ? bytesArg : new Uint8Array(bytesArg);
  let binary = '';
  for (const byte of bytes) {
    binary += String.fromCharCode(byte);
  }
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
};

/** Strict unpadded base64url to bytes; null for anything else. */
export const base64UrlToBytes = (textArg: string): Uint8Array | null => {
  if (!/^[A-Za-z0-9_-]*$/.test(textArg) || textArg.length % 4 === 1) {
    return null;
  }
  const binary = atob(textArg.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(binary, (charArg) => charArg.charCodeAt(0));
};

/** Imports a raw X25519 public key (unpadded base64url); throws when it is not a valid point encoding. */
export const importRecipientPublicKey = async (publicKeyArg: string): Promise<TRecipientPublicKey> => {
  const raw = base64UrlToBytes(publicKeyArg);
  if (!raw || raw.length !== 32) {
    throw new Error('an X25519 public key is 32 bytes');
  }
  return suite.kem.deserializePublicKey(raw);
};

/** Seals `valueArg` to the recipient's public key, bound to `bindingArg`. */
export const sealSecret = async (
  recipientArg: { recipientId: string; publicKey: string | TRecipientPublicKey },
  bindingArg: ISealedSecretBinding,
  valueArg: Uint8Array,
): Promise<ISealedSecret> => {
  const recipientPublicKey = typeof recipientArg.publicKey === 'string'
    ? await importRecipientPublicKey(recipientArg.publicKey)
    : recipientArg.publicKey;
  const sealed = await suite.seal({ recipientPublicKey, info }, valueArg, computeSealedSecretAdditionalData(bindingArg));
  return {
    suite: sealedSecretSuite,
    recipientId: recipientArg.recipientId,
    binding: bindingArg,
    enc: bytesToBase64Url(sealed.enc),
    ciphertext: bytesToBase64Url(sealed.ct),
  };
};
