import { randomUUID } from 'node:crypto';
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose';
import type { CryptoKey, JWTVerifyGetKey, KeyObject } from 'jose';
import type { IBackupArchiveObject } from '../interfaces/data/backup.js';
import {
  isolatedRestoreGrantOperations,
  type TIsolatedRestoreGrantOperation,
} from '../interfaces/data/isolatedrestore.js';
import { isSha256Hex } from '../interfaces/private/dataproperties.js';

/**
 * Restore grants: compact RS256 JWTs Cloudly signs for exactly one isolated-restore
 * operation. The relay carries them untouched; Corestore verifies them with Cloudly's
 * published key. A grant binds cluster, node, restore, the canonical resource mappings
 * digest and the archive manifest digest, so a carrier can neither widen nor mint one.
 * Grants are bearer secrets: nothing here logs them, and neither may a caller.
 */

/** The audience every restore grant names; Corestore insists on it. */
export const restoreGrantAudience = 'serve.zone/corestore-isolated-restore';
/** How long a grant lives. */
export const restoreGrantLifetimeSeconds = 300;
/** The longest lifetime a verifier accepts, whatever the token claims. */
export const maximumRestoreGrantLifetimeSeconds = 600;

export interface IRestoreGrantBinding {
  operation: TIsolatedRestoreGrantOperation;
  clusterId: string;
  targetNodeName: string;
  restoreId: string;
  /** `computeIsolatedRestoreResourceMappingsSha256` of the restore's mappings. */
  mappingsSha256: string;
  /** `computeIsolatedRestoreArchiveManifestSha256` of the restore's manifest. */
  manifestSha256: string;
  /** For `write-object` only: the one manifest object the grant lets the relay write. */
  object?: IBackupArchiveObject;
}

export interface IRestoreGrantSigningKey {
  privateKey: CryptoKey | KeyObject;
  /** The key id under which the public key is published in the JWKS. */
  kid: string;
  issuer: string;
}

/** The claims of a verified grant. */
export interface IRestoreGrantClaims extends IRestoreGrantBinding {
  grantId: string;
  issuedAt: number;
  expiresAt: number;
}

/** Why a grant was refused; the reason never contains the grant itself. */
export class RestoreGrantRefusedError extends Error {
  constructor(public readonly reason: string) {
    super(`restore grant refused: ${reason}`);
    this.name = 'RestoreGrantRefusedError';
  }
}

/**
 * The claims a grant binds, in one place for every signer. A `write-object` grant, and only it,
 * names one archive object.
 */
export const restoreGrantClaimsOf = (bindingArg: IRestoreGrantBinding): Record<string, unknown> => {
  if ((bindingArg.operation === 'write-object') !== (bindingArg.object !== undefined)) {
    throw new Error('a write-object grant, and only it, names one archive object');
  }
  return {
    op: bindingArg.operation,
    cluster: bindingArg.clusterId,
    node: bindingArg.targetNodeName,
    restore: bindingArg.restoreId,
    mappings_sha256: bindingArg.mappingsSha256,
    manifest_sha256: bindingArg.manifestSha256,
    ...(bindingArg.object
      ? { object: { path: bindingArg.object.path, size: bindingArg.object.size, sha256: bindingArg.object.sha256 } }
      : {}),
  };
};

/** The subject a grant names: the exact cluster/node/restore routing key. */
export const restoreGrantSubjectOf = (bindingArg: IRestoreGrantBinding): string =>
  `${bindingArg.clusterId}/${bindingArg.targetNodeName}/${bindingArg.restoreId}`;

/** Signs one grant for one operation. */
export const signRestoreGrant = async (
  keyArg: IRestoreGrantSigningKey,
  bindingArg: IRestoreGrantBinding,
  nowSecondsArg = Math.floor(Date.now() / 1000),
  lifetimeSecondsArg = restoreGrantLifetimeSeconds,
): Promise<string> => {
  if (lifetimeSecondsArg < 1 || lifetimeSecondsArg > maximumRestoreGrantLifetimeSeconds) {
    throw new Error('restore grant lifetime is out of range');
  }
  return new SignJWT(restoreGrantClaimsOf(bindingArg))
    .setProtectedHeader({ alg: 'RS256', kid: keyArg.kid, typ: 'JWT' })
    .setIssuer(keyArg.issuer)
    .setAudience(restoreGrantAudience)
    .setSubject(restoreGrantSubjectOf(bindingArg))
    .setJti(randomUUID())
    .setIssuedAt(nowSecondsArg)
    .setExpirationTime(nowSecondsArg + lifetimeSecondsArg)
    .sign(keyArg.privateKey);
};

const sameObject = (leftArg: unknown, rightArg: IBackupArchiveObject | undefined): boolean => {
  if (rightArg === undefined) {
    return leftArg === undefined;
  }
  if (leftArg === null || typeof leftArg !== 'object') {
    return false;
  }
  const left = leftArg as Record<string, unknown>;
  return Object.keys(left).length === 3
    && left.path === rightArg.path
    && left.size === rightArg.size
    && left.sha256 === rightArg.sha256;
};

/**
 * Verifies a grant with Cloudly's public key (or JWKS) and checks that it binds exactly
 * the expected operation, cluster, node, restore, mappings and manifest.
 */
export const verifyRestoreGrant = async (
  grantArg: string,
  keyArg: CryptoKey | KeyObject | JWTVerifyGetKey,
  issuerArg: string,
  expectedArg: IRestoreGrantBinding,
): Promise<IRestoreGrantClaims> => {
  let payload: Record<string, unknown>;
  try {
    const options = { algorithms: ['RS256'], issuer: issuerArg, audience: restoreGrantAudience };
    const result = typeof keyArg === 'function'
      ? await jwtVerify(grantArg, keyArg, options)
      : await jwtVerify(grantArg, keyArg, options);
    payload = result.payload as Record<string, unknown>;
  } catch (error) {
    if (error instanceof joseErrors.JWTExpired) {
      throw new RestoreGrantRefusedError('grant-expired');
    }
    if (error instanceof joseErrors.JWTClaimValidationFailed) {
      throw new RestoreGrantRefusedError(`grant-claim-invalid:${error.claim}`);
    }
    throw new RestoreGrantRefusedError('grant-signature-invalid');
  }
  const { iat, exp, jti } = payload;
  if (typeof iat !== 'number' || typeof exp !== 'number' || exp - iat > maximumRestoreGrantLifetimeSeconds) {
    throw new RestoreGrantRefusedError('grant-lifetime-invalid');
  }
  if (typeof payload.op !== 'string'
    || !(isolatedRestoreGrantOperations as readonly string[]).includes(payload.op)
    || payload.op !== expectedArg.operation) {
    throw new RestoreGrantRefusedError('grant-operation-mismatch');
  }
  const checks: Array<[string, boolean]> = [
    ['grant-cluster-mismatch', payload.cluster === expectedArg.clusterId],
    ['grant-node-mismatch', payload.node === expectedArg.targetNodeName],
    ['grant-restore-mismatch', payload.restore === expectedArg.restoreId],
    ['grant-mappings-mismatch', isSha256Hex(payload.mappings_sha256) && payload.mappings_sha256 === expectedArg.mappingsSha256],
    ['grant-manifest-mismatch', isSha256Hex(payload.manifest_sha256) && payload.manifest_sha256 === expectedArg.manifestSha256],
    ['grant-object-mismatch', sameObject(payload.object, expectedArg.object)],
  ];
  for (const [reason, ok] of checks) {
    if (!ok) {
      throw new RestoreGrantRefusedError(reason);
    }
  }
  return {
    ...expectedArg,
    grantId: typeof jti === 'string' ? jti : '',
    issuedAt: iat,
    expiresAt: exp,
  };
};
