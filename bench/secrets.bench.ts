/**
 * Secrets benchmark: sealing and opening per second on one core (the HPKE suite Cloudly uses, and
 * for comparison the same suite with @hpke/core's WebCrypto X25519), and what encryption at rest
 * adds to a write of a designation-shaped document.
 *
 *   node --import tsx bench/secrets.bench.ts
 *
 * - seal: `sealSecret` of a 43-character credential to an imported recipient key (what
 *   `getCorestoreControlCredentialMaterial` does per version); open: `openSealedSecret` (a relay);
 *   and the bare suite with each of the two X25519 KEMs, both ways;
 * - at rest: `store.mutate` of a document shaped like the ingress slot (a designation and a bearer),
 *   the bearer drawn and encrypted in the decision, against the same write with the bearer in
 *   clear, interleaved in rounds on one embedded database; and `SecretBox.encrypt` / `decrypt` alone.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Aes256Gcm, CipherSuite, DhkemX25519HkdfSha256 as WebCryptoX25519, HkdfSha256 } from '@hpke/core';
import { DhkemX25519HkdfSha256 } from '@hpke/dhkem-x25519';
import { Cloudly } from '../ts/classes.cloudly.js';
import { defineDocumentKind, type IStoredDocument } from '../ts/core/store.js';
import { generateSecretRecipientKeyPair, importRecipientPublicKey, openSealedSecret, sealSecret } from '../ts/core/sealing.js';
import type { ISealedSecretBinding } from '../ts/interfaces/data/secret.js';
import { benchSocketLimits, sized } from './helpers/smoke.js';

/** Project's own definition: a document shaped like the ingress slot. */
interface IBenchSlot extends IStoredDocument {
  designation: Record<string, unknown>;
  bearer: Record<string, unknown>;
}

const clearKind = defineDocumentKind<IBenchSlot>('CloudlyBenchSlotClear');
const encryptedKind = defineDocumentKind<IBenchSlot>('CloudlyBenchSlotEncrypted');
const phaseMs = sized(2_000, 100);

/**
 * Runs one operation after another for `phaseMs`. Answers operations per wall second and per CPU
 * second of this process (every thread, so WebCrypto's thread-pool work counts too): on a shared
 * machine the wall rate moves with the neighbours' load, the CPU rate is what one core does.
 */
const measure = async (opArg: () => Promise<unknown> | unknown): Promise<{ wall: number; cpu: number }> => {
  let done = 0;
  const started = performance.now();
  const cpuStarted = process.cpuUsage();
  while (performance.now() - started < phaseMs) {
    await opArg();
    done++;
  }
  const cpu = process.cpuUsage(cpuStarted);
  return { wall: done / ((performance.now() - started) / 1000), cpu: done / ((cpu.user + cpu.system) / 1e6) };
};
const rate = async (opArg: () => Promise<unknown> | unknown): Promise<number> => (await measure(opArg)).wall;
const both = (labelArg: string, resultArg: { wall: number; cpu: number }): string =>
  `${labelArg}: ${fmt(resultArg.wall)}/s wall, ${fmt(resultArg.cpu)}/s per CPU second`;

const fmt = (valueArg: number): string => Math.round(valueArg).toLocaleString('en-US');

const binding: ISealedSecretBinding = {
  clusterId: 'cluster-bench', nodeId: 'node-1', purpose: 'corestore-control-credential',
  secretVersion: { secretId: 'corestore-control-bench', secretVersionId: 'v1-bench' }, version: 1, enrollmentId: null,
};

const main = async (): Promise<void> => {
  const value = Buffer.from(randomBytes(32).toString('base64url'));
  const recipient = await generateSecretRecipientKeyPair();
  const publicKey = await importRecipientPublicKey(recipient.publicKey);
  const target = { recipientId: recipient.recipientId, publicKey };
  await sealSecret(target, binding, value);
  const sealed = await sealSecret(target, binding, value);
  console.log(both('sealSecret (Cloudly; @hpke/core, WebCrypto X25519)', await measure(() => sealSecret(target, binding, value))));
  console.log(both('openSealedSecret (relay side; @hpke/dhkem-x25519)', await measure(() => openSealedSecret(recipient.keyPair, sealed))));

  // The bare suites, each KEM both ways (no binding, no base64): what the choice of KEM costs.
  const info = new TextEncoder().encode('bench');
  for (const [label, kem] of [['@hpke/core WebCrypto X25519', new WebCryptoX25519()], ['@hpke/dhkem-x25519', new DhkemX25519HkdfSha256()]] as const) {
    const bare = new CipherSuite({ kem, kdf: new HkdfSha256(), aead: new Aes256Gcm() });
    const pair = await bare.kem.generateKeyPair();
    const bareSealed = await bare.seal({ recipientPublicKey: pair.publicKey, info }, value);
    console.log(both(`bare seal, ${label}`, await measure(() => bare.seal({ recipientPublicKey: pair.publicKey, info }, value))));
    console.log(both(`bare open, ${label}`, await measure(() => bare.open({ recipientKey: pair, enc: bareSealed.enc, info }, bareSealed.ct))));
  }

  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-bench-secrets-'));
  const cloudly = new Cloudly({ config: { port: 0, mongoDbUrl: null, dataDir, adminPassword: 'bench-admin-password-0123', logLevel: 'silent', ...benchSocketLimits } });
  await cloudly.start();
  try {
    const { store, secrets } = cloudly;
    const encryptRate = await rate(() => secrets.encrypt(value.toString(), 'bench/context'));
    const stored = secrets.encrypt(value.toString(), 'bench/context');
    const decryptRate = await rate(() => secrets.decrypt(stored, 'bench/context'));
    console.log(`at rest: encrypt ${fmt(encryptRate)}/s (${(1e6 / encryptRate).toFixed(1)} µs), decrypt ${fmt(decryptRate)}/s (${(1e6 / decryptRate).toFixed(1)} µs)`);

    const designation = {
      id: 'cluster-bench', generation: 1, clusterId: 'cluster-bench', ingressServiceId: 'service-bench', preparedSpecRevision: 3,
      runtime: { id: 'cluster-bench', phase: 'pallet', generation: 1 }, actorId: 'admin-bench', acceptedAt: Date.now(),
      credential: { credentialId: 'ingress-credential-bench', generation: 1, secretVersion: { secretId: 'ingress-bearer-bench', secretVersionId: 'ingress-bearer-bench-1' } },
      digest: 'a'.repeat(64), previous: null,
    };
    for (const kind of [clearKind, encryptedKind]) {
      await store.insert(kind, { id: 'slot', designation, bearer: {} });
    }
    const write = (encryptArg: boolean) => async () => {
      await store.mutate(encryptArg ? encryptedKind : clearKind, 'slot', () => {
        const bearerValue = randomBytes(32).toString('base64url');
        const bearer = encryptArg
          ? { secretId: 'ingress-bearer-bench', secretVersionId: 'ingress-bearer-bench-1', encryptedValue: secrets.encrypt(bearerValue, 'bench/slot') }
          : { secretId: 'ingress-bearer-bench', secretVersionId: 'ingress-bearer-bench-1', value: bearerValue };
        return { kind: 'write', change: { set: { designation, bearer } } };
      });
    };
    const rounds = sized(4, 1);
    const clear: Array<{ wall: number; cpu: number }> = [];
    const encrypted: Array<{ wall: number; cpu: number }> = [];
    for (let round = 0; round < rounds; round++) {
      clear.push(await measure(write(false)));
      encrypted.push(await measure(write(true)));
    }
    // Per-operation costs, summed over the rounds (a mean of times, not of rates).
    const msPer = (resultsArg: Array<{ wall: number; cpu: number }>, keyArg: 'wall' | 'cpu') =>
      resultsArg.reduce((sum, result) => sum + 1000 / result[keyArg], 0) / resultsArg.length;
    for (const key of ['wall', 'cpu'] as const) {
      const clearMs = msPer(clear, key);
      const encryptedMs = msPer(encrypted, key);
      console.log(`designation-shaped write (${key} ms per write): clear ${clearMs.toFixed(3)}, encrypted ${encryptedMs.toFixed(3)}`
        + ` (${(((encryptedMs - clearMs) / clearMs) * 100).toFixed(1)}%); rounds clear ${clear.map((r) => (1000 / r[key]).toFixed(2)).join(', ')}`
        + ` / encrypted ${encrypted.map((r) => (1000 / r[key]).toFixed(2)).join(', ')}`);
    }
    const clearCpuMs = msPer(clear, 'cpu');
    console.log(`the encrypt itself is ${((1000 / encryptRate / clearCpuMs) * 100).toFixed(2)}% of a write's CPU time`);
  } finally {
    await cloudly.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
};

await main();
