import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { refusalOf, startTestCloudly, waitFor, type ITestCloudly } from './helpers/cloudly.js';
import type { CloudlyRelayClient } from '../ts/client/relay.js';
import { generateSecretRecipientKeyPair, openSealedSecret, toBase64Url, type ISecretRecipientKeyPair } from '../ts/core/sealing.js';
import type { ISealedSecret } from '../ts/interfaces/data/secret.js';
import { enrollmentRetentionMs } from '../ts/manager.secret/secret.manager.js';
import type { TUntypedContract } from '../ts/client/admin.js';
import { assertFieldProblems } from './helpers/refusals.js';

/**
 * A relay enrolls an X25519 recipient with a real HPKE exchange (the same library on both sides)
 * and receives each node's Corestore control credential sealed to it; the refusals the issue
 * names, the bindings that make sealed material useless elsewhere, and rotation with a grace period.
 */

interface IWorld {
  clusterId: string;
  relay: CloudlyRelayClient;
  second: CloudlyRelayClient;
}

const connectElected = async (tArg: ITestCloudly, nameArg: string, nodeIdsArg: string[]): Promise<IWorld> => {
  const { cluster, relayToken } = await tArg.createCluster(nameArg);
  for (const nodeId of nodeIdsArg) {
    await tArg.caller.call('addClusterNode', { clusterId: cluster.id, name: nodeId, nodeId });
  }
  const relay = await tArg.connectRelay(relayToken);
  await waitFor(() => tArg.cloudly.relays.sessionsOf(cluster.id).some((session) => tArg.cloudly.clusterManager.isElected(session)), 'relay elected');
  const second = await tArg.connectRelay(relayToken);
  return { clusterId: cluster.id, relay, second };
};

const enroll = async (relayArg: CloudlyRelayClient, keysArg: ISecretRecipientKeyPair) => {
  const begun = await relayArg.fire('beginSecretRecipientEnrollment', {
    recipient: { algorithm: 'x25519', publicKey: keysArg.publicKey },
  });
  const opened = await openSealedSecret(keysArg.keyPair, begun.challenge);
  return { begun, proof: toBase64Url(opened) };
};

const material = (relayArg: CloudlyRelayClient, nodeIdArg: string, recipientIdArg?: string) =>
  relayArg.fire('getCorestoreControlCredentialMaterial', {
    nodeId: nodeIdArg, ...(recipientIdArg ? { recipientId: recipientIdArg } : {}),
  });

const openText = async (keysArg: ISecretRecipientKeyPair, sealedArg: ISealedSecret) =>
  Buffer.from(await openSealedSecret(keysArg.keyPair, sealedArg)).toString('utf8');

describe('secret recipient enrollment and sealed Corestore credentials', () => {
  let t: ITestCloudly;
  let a: IWorld;
  let b: IWorld;
  let keysA: ISecretRecipientKeyPair;
  let keysB: ISecretRecipientKeyPair;
  before(async () => {
    t = await startTestCloudly();
    a = await connectElected(t, 'cluster-a', ['node-1', 'node-2']);
    b = await connectElected(t, 'cluster-b', ['node-b1']);
    keysA = await generateSecretRecipientKeyPair();
    keysB = await generateSecretRecipientKeyPair();
  });
  after(async () => { await t.stop(); });

  test('a relay proves possession of its key and becomes the cluster\'s recipient; the challenge opens with that key only', async () => {
    const { begun, proof } = await enroll(a.relay, keysA);
    assert.equal(begun.challenge.recipientId, keysA.recipientId);
    assert.deepEqual(begun.challenge.binding, {
      clusterId: a.clusterId, nodeId: null, purpose: 'recipient-enrollment-challenge', secretVersion: null, version: 0, enrollmentId: begun.enrollmentId,
    });
    const stranger = await generateSecretRecipientKeyPair();
    await assert.rejects(() => openSealedSecret(stranger.keyPair, begun.challenge));
    const done = await a.relay.fire('completeSecretRecipientEnrollment', {
      enrollmentId: begun.enrollmentId, proof,
    });
    assert.equal(done.recipient.recipientId, keysA.recipientId);
    assert.equal(done.recipient.publicKey, keysA.publicKey);
    assert.equal(done.previous, null);
    const recipients = await t.caller.call('getSecretRecipients', { clusterId: a.clusterId });
    assert.equal(recipients.current?.recipientId, keysA.recipientId);
    // Replayed: the same completion again is refused.
    const replayed = await refusalOf(() => a.relay.fire('completeSecretRecipientEnrollment', { enrollmentId: begun.enrollmentId, proof }));
    assert.equal(replayed.code, 'conflict');
    assert.deepEqual(replayed.reasons, ['enrollment-already-used']);
  });

  test('a wrong proof is refused and uses the enrollment up; another cluster\'s reads as missing', async () => {
    const keys = await generateSecretRecipientKeyPair();
    const { begun, proof } = await enroll(b.relay, keys);
    const wrong = await refusalOf(() => b.relay.fire('completeSecretRecipientEnrollment', {
      enrollmentId: begun.enrollmentId, proof: toBase64Url(Buffer.alloc(32, 7)),
    }));
    assert.equal(wrong.code, 'forbidden');
    assert.deepEqual(wrong.reasons, ['enrollment-proof-refused']);
    const afterWrong = await refusalOf(() => b.relay.fire('completeSecretRecipientEnrollment', { enrollmentId: begun.enrollmentId, proof }));
    assert.deepEqual(afterWrong.reasons, ['enrollment-already-used']);

    const foreign = await enroll(a.relay, keys);
    const crossed = await refusalOf(() => b.relay.fire('completeSecretRecipientEnrollment', { enrollmentId: foreign.begun.enrollmentId, proof: foreign.proof }));
    assert.equal(crossed.code, 'not-found');
    assert.deepEqual(crossed.reasons, ['enrollment-not-found']);
    // None of these made the key a recipient of cluster b.
    const recipients = await t.caller.call('getSecretRecipients', { clusterId: b.clusterId });
    assert.equal(recipients.current, null);
  });

  test('an enrollment completed after it expired is refused and used up', async () => {
    // Its own Cloudly with a short time to live; the completion is sent once expiresAt has passed.
    const short = await startTestCloudly({ secretEnrollmentTtlMs: 50 });
    try {
      const world = await connectElected(short, 'short-lived', []);
      const keys = await generateSecretRecipientKeyPair();
      const late = await enroll(world.relay, keys);
      await waitFor(() => Date.now() > late.begun.expiresAt + 5, 'the enrollment expired');
      const expired = await refusalOf(() => world.relay.fire('completeSecretRecipientEnrollment', { enrollmentId: late.begun.enrollmentId, proof: late.proof }));
      assert.equal(expired.code, 'conflict');
      assert.deepEqual(expired.reasons, ['enrollment-expired']);
      const again = await refusalOf(() => world.relay.fire('completeSecretRecipientEnrollment', { enrollmentId: late.begun.enrollmentId, proof: late.proof }));
      assert.deepEqual(again.reasons, ['enrollment-already-used']);
      const recipients = await short.admin.call('getSecretRecipients', { clusterId: world.clusterId });
      assert.equal(recipients.current, null);
    } finally {
      await short.stop();
    }
  });

  test('only the elected relay enrolls and asks for material; bad shapes are refused by path', async () => {
    const notElected = await refusalOf(() => a.second.fire('beginSecretRecipientEnrollment', { recipient: { algorithm: 'x25519', publicKey: keysA.publicKey } }));
    assert.deepEqual(notElected.reasons, ['relay-not-elected']);
    assert.deepEqual((await refusalOf(() => material(a.second, 'node-1'))).reasons, ['relay-not-elected']);
    const bad = await refusalOf(() => a.relay.fire<TUntypedContract>('beginSecretRecipientEnrollment', { recipient: { algorithm: 'p256', publicKey: 'x' } }));
    assert.equal(bad.code, 'invalid-request');
    assertFieldProblems(bad, [
      ['request.recipient.algorithm', 'field-not-supported', "must be 'x25519'"],
      ['request.recipient.publicKey', 'field-invalid', 'must be the 32-byte X25519 public key in unpadded base64url (43 characters)'],
    ]);
    const viaAdmin = await refusalOf(() => t.caller.call('getCorestoreControlCredentialMaterial', { nodeId: 'node-1' }));
    assert.equal(viaAdmin.code, 'forbidden');
  });

  test('the Corestore credential arrives sealed, bound to cluster, node, purpose and version; it opens nowhere else', async () => {
    const answer = await material(a.relay, 'node-1');
    assert.equal(answer.material.recipientId, keysA.recipientId);
    assert.deepEqual(answer.material.binding, {
      clusterId: a.clusterId, nodeId: 'node-1', purpose: 'corestore-control-credential',
      secretVersion: answer.credential.secretVersion, version: 1, enrollmentId: null,
    });
    assert.equal(answer.previousMaterial, null);
    const credential = await openText(keysA, answer.material);
    assert.ok(Buffer.from(credential, 'base64url').length >= 32, 'at least 256 bits');
    // Asked again: the same credential (it is generated once per node).
    assert.equal(await openText(keysA, (await material(a.relay, 'node-1')).material), credential);
    // Another node's credential is another value.
    const other = await material(a.relay, 'node-2');
    assert.notEqual(await openText(keysA, other.material), credential);
    // Another key does not open it; the additional data of another node does not open it.
    await assert.rejects(() => openSealedSecret(keysB.keyPair, answer.material));
    await assert.rejects(() => openSealedSecret(keysA.keyPair, answer.material, { ...answer.material.binding, nodeId: 'node-2' }));
    await assert.rejects(() => openSealedSecret(keysA.keyPair, { ...answer.material, binding: { ...answer.material.binding, purpose: 'cluster-ingress-bearer' } }));
    await assert.rejects(() => openSealedSecret(keysA.keyPair, { ...answer.material, binding: { ...answer.material.binding, clusterId: b.clusterId } }));
    // The admin sees the reference and version, never the value.
    const reference = await t.caller.call('getCorestoreControlCredential', { clusterId: a.clusterId, nodeId: 'node-1' });
    assert.deepEqual(reference.credential, answer.credential);
    assert.ok(!JSON.stringify(reference).includes(credential));
  });

  test('material for another cluster\'s node, or before any enrollment, is refused', async () => {
    const foreign = await refusalOf(() => material(a.relay, 'node-b1'));
    assert.equal(foreign.code, 'not-found');
    const unknown = await refusalOf(() => material(a.relay, 'node-9'));
    assert.equal(unknown.code, 'not-found');
    const notEnrolled = await refusalOf(() => material(b.relay, 'node-b1'));
    assert.equal(notEnrolled.code, 'not-found');
    assert.deepEqual(notEnrolled.reasons, ['secret-recipient-not-enrolled']);
  });

  test('rotation: compare-and-swap on the version, the old credential stays deliverable for the grace period', async () => {
    const before = await material(a.relay, 'node-1');
    const oldValue = await openText(keysA, before.material);
    const stale = await refusalOf(() => t.caller.call('rotateCorestoreControlCredential', {
      clusterId: a.clusterId, nodeId: 'node-1', expectedVersion: 7,
    }));
    assert.equal(stale.code, 'conflict');
    const dry = await t.caller.call('rotateCorestoreControlCredential', {
      clusterId: a.clusterId, nodeId: 'node-1', expectedVersion: 1, dryRun: true,
    } as never);
    assert.equal(dry.credential.version, 2);
    assert.equal((await material(a.relay, 'node-1')).credential.version, 1, 'a dry run rotates nothing');
    const rotated = await t.caller.call('rotateCorestoreControlCredential', {
      clusterId: a.clusterId, nodeId: 'node-1', expectedVersion: 1,
    });
    assert.equal(rotated.credential.version, 2);
    assert.deepEqual(rotated.credential.previous?.secretVersion, before.credential.secretVersion);
    const after = await material(a.relay, 'node-1');
    assert.equal(after.credential.version, 2);
    assert.notEqual(await openText(keysA, after.material), oldValue);
    assert.ok(after.previousMaterial);
    assert.equal(after.previousMaterial.binding.version, 1);
    assert.equal(await openText(keysA, after.previousMaterial), oldValue);
  });

  test('enrolling again rotates the recipient: the previous key stays addressable until the next enrollment', async () => {
    const next = await generateSecretRecipientKeyPair();
    const { begun, proof } = await enroll(a.relay, next);
    const done = await a.relay.fire('completeSecretRecipientEnrollment', { enrollmentId: begun.enrollmentId, proof });
    assert.equal(done.recipient.recipientId, next.recipientId);
    assert.equal(done.previous?.recipientId, keysA.recipientId);
    const current = await material(a.relay, 'node-1');
    assert.equal(current.material.recipientId, next.recipientId);
    await assert.rejects(() => openSealedSecret(keysA.keyPair, current.material));
    const toPrevious = await material(a.relay, 'node-1', keysA.recipientId);
    assert.equal(await openText(keysA, toPrevious.material), await openText(next, current.material));
    const unknown = await refusalOf(() => material(a.relay, 'node-1', keysB.recipientId));
    assert.deepEqual(unknown.reasons, ['secret-recipient-unknown']);
  });

  test('ended enrollments are swept an hour after they expire; a replay of a swept one is still refused', async () => {
    const keys = await generateSecretRecipientKeyPair();
    const { begun, proof } = await enroll(a.relay, keys);
    await a.relay.fire('completeSecretRecipientEnrollment', { enrollmentId: begun.enrollmentId, proof });
    assert.equal(await t.cloudly.secretManager.sweepEnrollments(Date.now()), 0, 'nothing is swept before its time');
    const swept = await t.cloudly.secretManager.sweepEnrollments(begun.expiresAt + enrollmentRetentionMs + 1);
    assert.ok(swept >= 1);
    const replayed = await refusalOf(() => a.relay.fire('completeSecretRecipientEnrollment', { enrollmentId: begun.enrollmentId, proof }));
    assert.deepEqual(replayed.reasons, ['enrollment-not-found']);
  });
});
