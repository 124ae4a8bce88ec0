import { canonicalizeJson } from '../private/canonicaljson.js';

/**
 * Names one immutable version of a secret without carrying its value. A workload environment
 * entry that points at a secret carries this reference; only the node that runs the workload
 * resolves it into the value. Project's own definition.
 */
export interface ISecretVersionReference {
  /** The secret whose versions this one belongs to. */
  secretId: string;
  /** This exact version; a rotated secret gets a new version id and keeps its secret id. */
  secretVersionId: string;
}

/**
 * The key a cluster's relay enrolls so Cloudly can seal secrets to it: an X25519 public key, the
 * 32 raw bytes in unpadded base64url (43 characters). Project's own definition.
 */
export interface ISecretRecipient {
  algorithm: 'x25519';
  publicKey: string;
}

/** An enrolled recipient as Cloudly keeps it for a cluster. Project's own definition. */
export interface IEnrolledSecretRecipient extends ISecretRecipient {
  /** `x25519:` and the first 32 hex digits of sha256 over the raw public key. */
  recipientId: string;
  enrolledAt: number;
}

/**
 * The one HPKE suite (RFC 9180, base mode) every sealed secret uses: DHKEM(X25519, HKDF-SHA256),
 * HKDF-SHA256, AES-256-GCM. The HPKE `info` is `sealedSecretInfo`. Project's own definition.
 */
export const sealedSecretSuite = 'hpke-base-x25519-hkdfsha256-aes256gcm' as const;
export const sealedSecretInfo = 'serve.zone/cloudly/sealed-secret/v1';

/** What a sealed secret is for; part of its additional data, so one purpose's material opens for no other. */
export const sealedSecretPurposes = ['recipient-enrollment-challenge', 'corestore-control-credential', 'cluster-ingress-bearer', 'route-certificate-key', 'service-secret'] as const;
export type TSealedSecretPurpose = typeof sealedSecretPurposes[number];

/**
 * What a sealed secret is bound to. Its canonical JSON (`computeSealedSecretAdditionalData`) is the
 * HPKE additional data: material sealed for one cluster, node, purpose or version does not open
 * as another's, even with the right private key. `nodeId` is null for cluster-wide secrets;
 * `secretVersion` is null for an enrollment challenge, which names its `enrollmentId` instead.
 * Project's own definition.
 */
export interface ISealedSecretBinding {
  clusterId: string;
  nodeId: string | null;
  purpose: TSealedSecretPurpose;
  secretVersion: ISecretVersionReference | null;
  /** The secret's version counter (1 on creation, +1 per rotation); 0 for an enrollment challenge. */
  version: number;
  /** Set only for an enrollment challenge. */
  enrollmentId: string | null;
}

/** One secret value sealed to an enrolled recipient. Project's own definition. */
export interface ISealedSecret {
  suite: typeof sealedSecretSuite;
  /** The recipient it is sealed to (`IEnrolledSecretRecipient.recipientId`). */
  recipientId: string;
  binding: ISealedSecretBinding;
  /** HPKE encapsulated key, unpadded base64url. */
  enc: string;
  /** HPKE ciphertext (value + AES-GCM tag), unpadded base64url. */
  ciphertext: string;
}

/** The HPKE additional data of a binding: UTF-8 of `serve.zone/cloudly/sealed-secret/v1\n` + canonical JSON. */
export const computeSealedSecretAdditionalData = (bindingArg: ISealedSecretBinding): Uint8Array =>
  new TextEncoder().encode(`${sealedSecretInfo}\n${canonicalizeJson({
    clusterId: bindingArg.clusterId,
    nodeId: bindingArg.nodeId,
    purpose: bindingArg.purpose,
    secretVersion: bindingArg.secretVersion
      ? { secretId: bindingArg.secretVersion.secretId, secretVersionId: bindingArg.secretVersion.secretVersionId }
      : null,
    version: bindingArg.version,
    enrollmentId: bindingArg.enrollmentId,
  })}`);

/**
 * What a node's Corestore control credential is, without its value: the secret version a relay
 * resolves through `getCorestoreControlCredentialMaterial`. Project's own definition.
 */
export interface ICorestoreControlCredentialReference {
  clusterId: string;
  nodeId: string;
  secretVersion: ISecretVersionReference;
  /** 1 on creation, +1 per rotation; a rotation names the version it replaces. */
  version: number;
  createdAt: number;
  /** The version it replaced, accepted until `validUntil` so Corestore and the relay can switch. */
  previous: { secretVersion: ISecretVersionReference; version: number; validUntil: number } | null;
}

// ---------------------------------------------------------------------------------------------
// Secret groups: secrets Cloudly delivers but cannot read. Project's own definitions
// (docs/secrets.md, "Secret groups").
// ---------------------------------------------------------------------------------------------

/**
 * Limits of a secret group. `maximumValueBytes` bounds one value (the sealed ciphertext is the
 * value and a 16-byte AES-GCM tag); `maximumRetainedVersions` bounds `retainedVersions`.
 */
export const secretGroupContract = Object.freeze({
  maximumKeyLength: 128,
  maximumTags: 32,
  maximumTagLength: 64,
  maximumClusters: 64,
  maximumValueBytes: 32_768,
  defaultRetainedVersions: 10,
  maximumRetainedVersions: 100,
  /** The AES-256-GCM tag every HPKE ciphertext carries after the value. */
  sealedTagBytes: 16,
} as const);

/** What a person states about a group when creating it. */
export interface ISecretGroupWritable {
  /** A name people know the group by, e.g. `database-password`; unique. */
  key: string;
  tags: string[];
  /** The environment the group belongs to, e.g. `production`. */
  environment: string;
  /** The clusters every version is sealed to (each to its current recipient). */
  clusterIds: string[];
  /** How many versions are kept (newest first); older ones are dropped on the next version. Absent: 10. */
  retainedVersions?: number;
}

/** How one version stands for one cluster of its group. */
export interface ISecretVersionClusterState {
  clusterId: string;
  /** The recipient the value is sealed to. */
  recipientId: string;
  /**
   * `sealed`: sealed to the cluster's current recipient. `reseal-required`: the cluster enrolled
   * another recipient since (a relay still holding the previous key opens it until the next
   * enrollment); a person holding the value must seal it again (`addSecretVersion` with the same
   * version). `recipient-gone`: the recipient is neither current nor previous; the relay cannot open it.
   */
  state: 'sealed' | 'reseal-required' | 'recipient-gone';
}

/** One version of a group, without its value. */
export interface ISecretVersionMetadata {
  secretVersionId: string;
  /** 1 for the first version, +1 per rotation. */
  version: number;
  /** The value's length in bytes (the ciphertext's, less the tag): needed to judge the environment's size. */
  valueBytes: number;
  createdAt: number;
  /** The user who added (or last re-sealed) it. */
  createdBy: string;
  resealedAt: number | null;
  clusters: ISecretVersionClusterState[];
}

/** A secret group as answered: metadata only, never a ciphertext. */
export interface ISecretGroup extends Omit<ISecretGroupWritable, 'retainedVersions'> {
  id: string;
  retainedVersions: number;
  generation: number;
  /** Newest first. */
  versions: ISecretVersionMetadata[];
  createdAt: number;
  updatedAt: number;
}

/**
 * One version as `addSecretVersion` carries it: the value sealed in the client to each cluster's
 * current recipient, with binding `{ clusterId, nodeId: null, purpose: 'service-secret',
 * secretVersion: { secretId: <group id>, secretVersionId }, version, enrollmentId: null }`.
 */
export interface ISecretVersionWritable {
  secretVersionId: string;
  version: number;
  sealed: ISealedSecret[];
}

/** The binding of one version of a group, sealed for one cluster. */
export const serviceSecretBinding = (
  clusterIdArg: string,
  secretIdArg: string,
  secretVersionIdArg: string,
  versionArg: number,
): ISealedSecretBinding => ({
  clusterId: clusterIdArg,
  nodeId: null,
  purpose: 'service-secret',
  secretVersion: { secretId: secretIdArg, secretVersionId: secretVersionIdArg },
  version: versionArg,
  enrollmentId: null,
});
