import type { CloudlyRelayClient } from '../../ts/client/relay.js';
import { generateSecretRecipientKeyPair, openSealedSecret, toBase64Url, type ISecretRecipientKeyPair } from '../../ts/core/sealing.js';
import type { ISealedSecret } from '../../ts/interfaces/data/secret.js';

/** A relay's side of secret delivery, as a relay does it: a fresh X25519 key, enrolled by opening the challenge. */
export const enrollSecretRecipient = async (relayArg: CloudlyRelayClient): Promise<ISecretRecipientKeyPair> => {
  const keys = await generateSecretRecipientKeyPair();
  const begun = await relayArg.fire('beginSecretRecipientEnrollment', {
    recipient: { algorithm: 'x25519', publicKey: keys.publicKey },
  });
  const proof = toBase64Url(await openSealedSecret(keys.keyPair, begun.challenge));
  await relayArg.fire('completeSecretRecipientEnrollment', { enrollmentId: begun.enrollmentId, proof });
  return keys;
};

export const openSealedText = async (keysArg: ISecretRecipientKeyPair, sealedArg: ISealedSecret): Promise<string> =>
  Buffer.from(await openSealedSecret(keysArg.keyPair, sealedArg)).toString('utf8');
