import { createCipheriv, createHash } from 'node:crypto';

/**
 * Everything the simulator makes up follows from the seed: the same seed, service and backup give
 * the same closure bytes (so a restore can be checked byte for byte without keeping the bytes),
 * and the same failures and faults are chosen in every run.
 */

/** A deterministic fraction in [0, 1) from the seed and the parts. */
export const seededFraction = (seedArg: number, ...partsArg: Array<string | number>): number => {
  const digest = createHash('sha256').update(`${seedArg}\u0000${partsArg.join('\u0000')}`).digest();
  return digest.readUIntBE(0, 6) / 2 ** 48;
};

/** A deterministic integer in [0, maxArg). */
export const seededInteger = (maxArg: number, seedArg: number, ...partsArg: Array<string | number>): number =>
  Math.floor(seededFraction(seedArg, ...partsArg) * maxArg);

export const closureChunkBytes = 64 * 1024;

/**
 * The generated closure of one backup: an AES-256-CTR key stream keyed by seed, service and
 * backup (native speed, so large closures cost little CPU), cut into 64 KiB chunks.
 */
export async function* generatedClosureBytes(
  seedArg: number,
  serviceIdArg: string,
  backupIdArg: string,
  byteLengthArg: number,
  optionsArg: { pauseMs?: number; stopAfterBytes?: number } = {},
): AsyncIterable<Buffer> {
  const key = createHash('sha256').update(`closure\u0000${seedArg}\u0000${serviceIdArg}\u0000${backupIdArg}`).digest();
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  const zeros = Buffer.alloc(closureChunkBytes);
  let sent = 0;
  while (sent < byteLengthArg) {
    if (optionsArg.stopAfterBytes !== undefined && sent >= optionsArg.stopAfterBytes) {
      throw new Error('simulated-upload-abort');
    }
    const size = Math.min(closureChunkBytes, byteLengthArg - sent);
    sent += size;
    yield cipher.update(size === closureChunkBytes ? zeros : zeros.subarray(0, size));
    if (optionsArg.pauseMs) {
      await new Promise((resolve) => setTimeout(resolve, optionsArg.pauseMs));
    }
  }
}

/** The sha256 (hex) of a generated closure: what its descriptor names and a restore must match. */
export const generatedClosureSha256 = async (seedArg: number, serviceIdArg: string, backupIdArg: string, byteLengthArg: number): Promise<string> => {
  const hash = createHash('sha256');
  for await (const chunk of generatedClosureBytes(seedArg, serviceIdArg, backupIdArg, byteLengthArg)) {
    hash.update(chunk);
  }
  return hash.digest('hex');
};
