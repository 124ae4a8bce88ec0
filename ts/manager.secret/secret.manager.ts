import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Cloudly, IRelayHandlerContext } from '../classes.cloudly.js';
import type { IClusterReads } from '../manager.cluster/ports.js';
import { refuse, refuseNamed } from '../core/errors.js';
import { fromBase64Url, importRecipientPublicKey, sealSecret, secretRecipientId, toBase64Url, x25519PublicKeyPattern } from '../core/sealing.js';
import { adminMutation, adminQuery, registerOperations, relayMutation, relayOrchestration } from '../core/operations.js';
import { decideSigningKeyRotation, signingKeysId, signingKeysKind } from '../core/auth.js';
import { invalidField, isIdString, isNodeIdField, isNonNegativeInteger, isOneOf, isString, refuseFields, type TFieldCheck } from '../core/validation.js';
import { clusterNodeDocumentId } from '../manager.cluster/clusternodes.js';
import type {
  ICorestoreControlCredentialReference,
  IEnrolledSecretRecipient,
  ISealedSecret,
  ISealedSecretBinding,
} from '../interfaces/data/secret.js';
import { readExactDataRecord } from '../interfaces/private/dataproperties.js';
import type {
  IReq_Relay_Cloudly_CompleteSecretRecipientEnrollment,
  IReq_Relay_Cloudly_GetCorestoreControlCredentialMaterial,
} from '../interfaces/requests/secret.js';
import {
  chooseRecipient,
  decideCredentialChange,
  decideEnrollmentBegin,
  decideEnrollmentCompletion,
  decideRecipientEnrollment,
  judgeEnrollmentCompletion,
  secretRefusalReasons,
} from './decide.js';
import { secretGroupOperations } from './secretgroups.operations.js';
import {
  corestoreCredentialKind,
  secretEnrollmentKind,
  secretRecipientsKind,
  type ICorestoreCredentialDocument,
  type ISecretEnrollmentDocument,
  type IStoredCredentialVersion,
} from './documents.js';

/**
 * Secrets that reach relays: a cluster's relay enrolls an X25519 recipient key by proving it can
 * open a challenge sealed to it; Cloudly then hands out each node's Corestore control credential
 * (generated here, 256 bits, stored encrypted) sealed to that recipient and bound to cluster, node,
 * purpose and version. Details: docs/secrets.md.
 */

/** Bytes of an enrollment challenge and of a generated Corestore control credential (256 bits). */
export const enrollmentChallengeBytes = 32;
export const corestoreCredentialBytes = 32;

const isRecipient: TFieldCheck = (valueArg, pathArg) => {
  const recipient = readExactDataRecord(valueArg, ['algorithm', 'publicKey']);
  if (!recipient) {
    return [invalidField(pathArg, `must be exactly { algorithm, publicKey }`)];
  }
  return [
    ...isOneOf(['x25519'], "must be 'x25519'")(recipient.algorithm, `${pathArg}.algorithm`),
    ...(typeof recipient.publicKey === 'string' && x25519PublicKeyPattern.test(recipient.publicKey)
      ? []
      : [invalidField(`${pathArg}.publicKey`, `must be the 32-byte X25519 public key in unpadded base64url (43 characters)`)]),
  ];
};

const isProof: TFieldCheck = isString(43, 43, /^[A-Za-z0-9_-]+$/);
const isRecipientId: TFieldCheck = isString(1, 64, /^x25519:[0-9a-f]{32}$/);

const sha256 = (bytesArg: Uint8Array): Buffer => createHash('sha256').update(bytesArg).digest();

/** How long an ended or expired enrollment is kept (so a replay is answered `enrollment-already-used`), and how often they are swept. */
export const enrollmentRetentionMs = 3_600_000;
const enrollmentSweepIntervalMs = 600_000;
const enrollmentSweepBatch = 1000;

export class SecretManager {
  private sweepTimer: NodeJS.Timeout | null = null;
  /** Waits (bounded) for the Corestore credentials controller's run owed to a cluster; wired by the composition root. */
  private settledCredentials: (clusterIdArg: string) => Promise<void> = async () => undefined;

  /** The controllers' side, wired by the composition root once the reconciler exists. */
  public connect(portsArg: { settledCredentials: (clusterIdArg: string) => Promise<void> }): void {
    this.settledCredentials = portsArg.settledCredentials;
  }

  constructor(private readonly cloudly: Cloudly, private readonly clusters: IClusterReads) {
    registerOperations(cloudly, [
      // One enrollment document; the recipient's key, the challenge and the ids are this call's facts.
      relayMutation({
        method: 'beginSecretRecipientEnrollment',
        access: 'relay',
        input: { required: { recipient: isRecipient } },
        facts: async (request, context) => {
          await clusters.requireElected(context.session);
          return this.enrollmentFacts(request.recipient.publicKey, context.clusterId);
        },
        target: (_request, facts) => ({ kind: secretEnrollmentKind, id: facts.enrollment.id }),
        decide: (current, { facts }) => decideEnrollmentBegin(current, facts.enrollment),
        answer: async (_outcome, { facts }, context) => {
          const { enrollment, publicKey, challengeBytes } = facts;
          const binding: ISealedSecretBinding = {
            clusterId: context.clusterId, nodeId: null, purpose: 'recipient-enrollment-challenge', secretVersion: null, version: 0, enrollmentId: enrollment.id,
          };
          try {
            const challenge = await sealSecret({ recipientId: enrollment.recipientId, publicKey }, binding, challengeBytes);
            return { enrollmentId: enrollment.id, challenge, expiresAt: enrollment.expiresAt };
          } finally {
            challengeBytes.fill(0);
          }
        },
      }),
      relayOrchestration({
        method: 'completeSecretRecipientEnrollment',
        why: 'two documents: the enrollment used up, then the cluster\'s recipients written',
        access: 'relay',
        input: { required: { enrollmentId: isIdString, proof: isProof } },
        run: async (request, context) => {
          await clusters.requireElected(context.session);
          return this.completeEnrollment(request.enrollmentId, request.proof, context.clusterId);
        },
      }),
      relayOrchestration({
        method: 'getCorestoreControlCredentialMaterial',
        why: 'ensures the node\'s credential document, reads the cluster\'s recipients and seals each credential version to one',
        access: 'relay',
        input: { required: { nodeId: isNodeIdField }, optional: { recipientId: isRecipientId } },
        run: async (request, context) => {
          await clusters.requireElected(context.session);
          return this.corestoreCredentialMaterial(context.clusterId, request.nodeId, request.recipientId);
        },
      }),
      adminQuery({
        method: 'getSecretRecipients',
        access: 'read',
        input: { required: { clusterId: isIdString } },
        run: async (request) => {
          await clusters.requireCluster(request.clusterId);
          const recipients = await cloudly.store.get(secretRecipientsKind, request.clusterId);
          return { current: recipients?.current ?? null, previous: recipients?.previous ?? null };
        },
      }),
      // A pure read: the reconciler makes every node's credential (version 1) once the node exists.
      adminQuery({
        method: 'getCorestoreControlCredential',
        access: 'read',
        input: { required: { clusterId: isIdString, nodeId: isNodeIdField } },
        run: async (request) => {
          await this.requireNode(request.clusterId, request.nodeId, 'request.nodeId');
          return { credential: toReference(await this.madeCredential(request.clusterId, request.nodeId)) };
        },
      }),
      adminMutation({
        method: 'rotateCorestoreControlCredential',
        access: 'write',
        input: { required: { clusterId: isIdString, nodeId: isNodeIdField, expectedVersion: isNonNegativeInteger } },
        facts: async (request) => {
          await this.requireNode(request.clusterId, request.nodeId, 'request.nodeId');
          const identity = credentialIdentity(request.clusterId, request.nodeId);
          // The fresh value is made only for the version the decision settles on.
          return { identity, fresh: (versionArg: number) => this.freshCredentialVersion(identity.id, versionArg) };
        },
        target: (_request, facts) => ({ kind: corestoreCredentialKind, id: facts.identity.id }),
        decide: (current, { request, facts, now }) => decideCredentialChange(
          current,
          { kind: 'rotate', identity: facts.identity, expectedVersion: request.expectedVersion, now, graceMs: cloudly.config.corestoreCredentialGraceMs },
          facts.fresh,
        ),
        answer: ({ doc }) => ({ credential: toReference(doc!) }),
      }),
      // One document (core's signing keys); this instance reloads them once the rotation committed.
      adminMutation({
        method: 'rotateIdentitySigningKey',
        access: 'write',
        input: { required: { expectedKeyId: isString(1, 128) } },
        facts: async () => ({ fresh: await cloudly.auth.mintSigningKey() }),
        target: () => ({ kind: signingKeysKind, id: signingKeysId }),
        decide: (current, { request, facts }) => decideSigningKeyRotation(current, request.expectedKeyId, facts.fresh),
        answer: ({ doc }) => ({ currentKeyId: doc!.current.kid, previousKeyId: doc!.previous!.kid }),
        after: () => cloudly.auth.reloadSigningKeys(),
      }),
    ]);
    registerOperations(cloudly, secretGroupOperations(cloudly, clusters));
  }

  public async start(): Promise<void> {
    await this.sweepEnrollments();
    this.sweepTimer = setInterval(() => {
      this.sweepEnrollments().catch((error: unknown) => this.cloudly.logger.error({ err: error }, 'secret enrollment sweep failed'));
    }, enrollmentSweepIntervalMs);
    this.sweepTimer.unref();
  }

  public async stop(): Promise<void> {
    if (this.sweepTimer) {
      clearInterval(this.sweepTimer);
      this.sweepTimer = null;
    }
  }

  /**
   * Removes enrollments that expired more than `enrollmentRetentionMs` ago (completed or not): they
   * can never complete, and a replay of one is then refused as `enrollment-not-found`. Each removal
   * is an ordinary audited write on the generation read, so it never removes one that changed.
   */
  public async sweepEnrollments(nowArg = Date.now()): Promise<number> {
    const stale = await this.cloudly.store.find(secretEnrollmentKind, { expiresAt: { $lt: nowArg - enrollmentRetentionMs } }, { limit: enrollmentSweepBatch });
    let removed = 0;
    for (const enrollment of stale) {
      if (await this.cloudly.store.remove(secretEnrollmentKind, enrollment.id, enrollment.generation)) {
        removed++;
      }
    }
    return removed;
  }

  private async requireNode(clusterIdArg: string, nodeIdArg: string, pathArg: string): Promise<void> {
    await this.clusters.requireCluster(clusterIdArg);
    if (!(await this.clusters.getNode(clusterIdArg, nodeIdArg))) {
      throw refuseNamed('not-found', 'node-not-found', `names no node of cluster ${clusterIdArg}`, pathArg);
    }
  }

  // --- enrollment ------------------------------------------------------------------------------

  /** What a new enrollment is made of: the recipient's key (refused when it is not X25519), fresh ids and a challenge. */
  private async enrollmentFacts(publicKeyArg: string, clusterIdArg: string) {
    let publicKey;
    try {
      publicKey = await importRecipientPublicKey(publicKeyArg);
    } catch {
      throw refuseFields([invalidField('request.recipient.publicKey', 'is not an X25519 public key')]);
    }
    const challengeBytes = randomBytes(enrollmentChallengeBytes);
    const now = Date.now();
    const enrollment: Omit<ISecretEnrollmentDocument, 'generation'> = {
      id: `enr-${randomUUID()}`,
      clusterId: clusterIdArg,
      recipient: { algorithm: 'x25519', publicKey: publicKeyArg },
      recipientId: secretRecipientId(publicKeyArg),
      challengeSha256: sha256(challengeBytes).toString('hex'),
      createdAt: now,
      expiresAt: now + this.cloudly.config.secretEnrollmentTtlMs,
      state: 'open',
    };
    return { enrollment, publicKey, challengeBytes };
  }

  private async completeEnrollment(
    enrollmentIdArg: string,
    proofArg: string,
    clusterIdArg: string,
  ): Promise<IReq_Relay_Cloudly_CompleteSecretRecipientEnrollment['response']> {
    const proof = fromBase64Url(proofArg);
    let verdict = secretRefusalReasons.enrollmentNotFound as ReturnType<typeof judgeEnrollmentCompletion>;
    const { doc: enrollment } = await this.cloudly.store.mutate(secretEnrollmentKind, enrollmentIdArg, (current) => {
      const expected = current ? Buffer.from(current.challengeSha256, 'hex') : Buffer.alloc(32);
      const facts = {
        clusterId: clusterIdArg,
        proofMatches: proof !== null && proof.length === enrollmentChallengeBytes && timingSafeEqual(sha256(proof), expected),
        now: Date.now(),
      };
      verdict = judgeEnrollmentCompletion(current, facts);
      return decideEnrollmentCompletion(current, facts);
    });
    if (verdict === secretRefusalReasons.enrollmentProofRefused) {
      throw refuse('forbidden', [verdict]);
    }
    if (verdict !== 'complete' || !enrollment) {
      throw refuse('conflict', [verdict]);
    }
    const recipient: IEnrolledSecretRecipient = { ...enrollment.recipient, recipientId: enrollment.recipientId, enrolledAt: Date.now() };
    const { doc } = await this.cloudly.store.mutate(secretRecipientsKind, clusterIdArg, (current) =>
      decideRecipientEnrollment(current, clusterIdArg, recipient));
    return { recipient: doc?.current ?? recipient, previous: doc?.previous ?? null };
  }

  /**
   * Seals a value to the cluster's enrolled recipient (or the previous one `recipientIdArg`
   * names) under `bindingArg`; refused `not-found` while the cluster has enrolled none.
   */
  public async sealToClusterRecipient(
    clusterIdArg: string,
    recipientIdArg: string | undefined,
    bindingArg: ISealedSecretBinding,
    valueArg: Uint8Array,
  ): Promise<ISealedSecret> {
    const recipient = chooseRecipient(await this.cloudly.store.get(secretRecipientsKind, clusterIdArg), recipientIdArg);
    return sealSecret({ recipientId: recipient.recipientId, publicKey: recipient.publicKey }, bindingArg, valueArg);
  }

  // --- Corestore control credentials -----------------------------------------------------------

  private freshCredentialVersion(documentIdArg: string, versionArg: number): IStoredCredentialVersion {
    const secretVersionId = `v${versionArg}-${randomBytes(8).toString('hex')}`;
    const value = randomBytes(corestoreCredentialBytes);
    const stored = {
      secretVersionId,
      version: versionArg,
      createdAt: Date.now(),
      value: this.cloudly.secrets.encrypt(toBase64Url(value), credentialContext(documentIdArg, secretVersionId)),
    };
    value.fill(0);
    return stored;
  }

  /**
   * The references of the cluster's credentials in one read (never a value), by node: what a
   * cluster's desired state carries. Nothing is made here: the Corestore credentials controller
   * makes every node's credential.
   */
  public async corestoreCredentialReferences(clusterIdArg: string): Promise<Map<string, ICorestoreControlCredentialReference>> {
    return new Map((await this.cloudly.store.find(corestoreCredentialKind, { clusterId: clusterIdArg }))
      .map((doc) => [doc.nodeId, toReference(doc)] as const));
  }

  /** Makes the node's credential at version 1 unless it has one: the Corestore credentials controller's write. */
  public async ensureCredential(clusterIdArg: string, nodeIdArg: string): Promise<ICorestoreCredentialDocument> {
    const identity = credentialIdentity(clusterIdArg, nodeIdArg);
    const { doc } = await this.cloudly.store.mutate(corestoreCredentialKind, identity.id, (current) =>
      decideCredentialChange(current, { kind: 'ensure', identity }, (versionArg) => this.freshCredentialVersion(identity.id, versionArg)));
    return doc!;
  }

  /** The node's stored credential once the controller's owed run is done; `unavailable` while it is not made yet. */
  private async madeCredential(clusterIdArg: string, nodeIdArg: string): Promise<ICorestoreCredentialDocument> {
    const id = credentialIdentity(clusterIdArg, nodeIdArg).id;
    let credential = await this.cloudly.store.get(corestoreCredentialKind, id);
    if (!credential) {
      await this.settledCredentials(clusterIdArg);
      credential = await this.cloudly.store.get(corestoreCredentialKind, id);
    }
    if (!credential) {
      throw refuse('unavailable', ['corestore-credential-not-made-yet'], { retryAfterMs: 1_000 });
    }
    return credential;
  }

  private async corestoreCredentialMaterial(
    clusterIdArg: string,
    nodeIdArg: string,
    recipientIdArg: string | undefined,
  ): Promise<IReq_Relay_Cloudly_GetCorestoreControlCredentialMaterial['response']> {
    // Another cluster's node is not a node of this relay's cluster: it reads as missing.
    if (!(await this.clusters.getNode(clusterIdArg, nodeIdArg))) {
      throw refuseNamed('not-found', 'node-not-found', 'names no node of this relay\'s cluster', 'request.nodeId');
    }
    const recipient = chooseRecipient(await this.cloudly.store.get(secretRecipientsKind, clusterIdArg), recipientIdArg);
    const credential = await this.madeCredential(clusterIdArg, nodeIdArg);
    const publicKey = await importRecipientPublicKey(recipient.publicKey);
    const seal = async (versionArg: IStoredCredentialVersion): Promise<ISealedSecret> => {
      const value = this.cloudly.secrets.decrypt(versionArg.value, credentialContext(credential.id, versionArg.secretVersionId));
      try {
        return await sealSecret({ recipientId: recipient.recipientId, publicKey }, {
          clusterId: clusterIdArg,
          nodeId: nodeIdArg,
          purpose: 'corestore-control-credential',
          secretVersion: { secretId: credential.secretId, secretVersionId: versionArg.secretVersionId },
          version: versionArg.version,
          enrollmentId: null,
        }, value);
      } finally {
        value.fill(0);
      }
    };
    const previousValid = credential.previous && credential.previous.validUntil > Date.now() ? credential.previous : null;
    return {
      credential: toReference(credential),
      material: await seal(credential.current),
      previousMaterial: previousValid ? await seal(previousValid) : null,
    };
  }
}

const credentialIdentity = (clusterIdArg: string, nodeIdArg: string) => ({
  id: clusterNodeDocumentId(clusterIdArg, nodeIdArg),
  clusterId: clusterIdArg,
  nodeId: nodeIdArg,
  secretId: `corestore-control-${createHash('sha256').update(`${clusterIdArg}\u0000${nodeIdArg}`).digest('hex').slice(0, 32)}`,
});

/** Where a credential version's ciphertext is stored: it decrypts there and nowhere else. */
const credentialContext = (documentIdArg: string, secretVersionIdArg: string): string =>
  `CloudlyCorestoreCredential/${documentIdArg}/${secretVersionIdArg}`;

const toReference = (docArg: ICorestoreCredentialDocument): ICorestoreControlCredentialReference => ({
  clusterId: docArg.clusterId,
  nodeId: docArg.nodeId,
  secretVersion: { secretId: docArg.secretId, secretVersionId: docArg.current.secretVersionId },
  version: docArg.current.version,
  createdAt: docArg.current.createdAt,
  previous: docArg.previous
    ? { secretVersion: { secretId: docArg.secretId, secretVersionId: docArg.previous.secretVersionId }, version: docArg.previous.version, validUntil: docArg.previous.validUntil }
    : null,
});
