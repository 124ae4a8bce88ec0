import { isCanonicalId, readExactDataRecord } from '../private/dataproperties.js';
import { readOwnDataValue } from '../private/ownproperties.js';
import type { TSha256Digest } from './immutableimage.js';
import type { ISecretVersionReference } from './secret.js';

/**
 * Names one accepted generation of a runtime authority record (a designation, a claim, a
 * grant): its id, its generation and the digest it was accepted with. A compare-and-swap request
 * sends the reference it read; a successor record names its predecessor by it.
 * Project's own definition.
 */
export interface IRuntimeAuthorityReference {
  id: string;
  generation: number;
  digest: TSha256Digest;
}

/**
 * The states a node reports for one runtime assignment. Only `ready` means the workload runs and
 * answers. Project's own definition.
 */
export const runtimeAssignmentStates = Object.freeze(['pending', 'ready', 'stopped', 'failed'] as const);

export type TRuntimeAssignmentState = typeof runtimeAssignmentStates[number];

/**
 * What a node states about one workload it runs: which service, under which node session it was
 * started, its state, and the secret versions it was started with (references only, never values).
 * Project's own definition: the smallest set of facts a registration judge needs.
 */
export interface IRuntimeAssignmentStatus {
  assignmentId: string;
  serviceId: string;
  /** The node session the assignment was started under. */
  sessionId: string;
  state: TRuntimeAssignmentState;
  secretVersions: ISecretVersionReference[];
}

export const runtimeAssignmentStatusContract = Object.freeze({
  /** At most this many secret versions are stated for one assignment. */
  maximumSecretVersions: 64,
} as const);

/** Names every reason a value is not one assignment status. Never throws. */
export const validateRuntimeAssignmentStatus = (
  valueArg: unknown,
  pathArg = 'runtime assignment status',
): string[] => {
  try {
    const status = readExactDataRecord(valueArg, ['assignmentId', 'serviceId', 'sessionId', 'state', 'secretVersions']);
    if (status === null) {
      return [`${pathArg} must be a record of exactly assignmentId, serviceId, sessionId, state and secretVersions`];
    }
    const reasons: string[] = [];
    for (const key of ['assignmentId', 'serviceId', 'sessionId']) {
      if (!isCanonicalId(readOwnDataValue(status, key))) {
        reasons.push(`${pathArg}.${key} must be an id`);
      }
    }
    if (!(runtimeAssignmentStates as readonly unknown[]).includes(readOwnDataValue(status, 'state'))) {
      reasons.push(`${pathArg}.state must be one of ${runtimeAssignmentStates.join(', ')}`);
    }
    const secretVersions = readOwnDataValue(status, 'secretVersions');
    if (!Array.isArray(secretVersions) || Object.getPrototypeOf(secretVersions) !== Array.prototype) {
      reasons.push(`${pathArg}.secretVersions must be an array`);
    } else if (secretVersions.length > runtimeAssignmentStatusContract.maximumSecretVersions) {
      reasons.push(`${pathArg}.secretVersions must hold at most `
        + `${runtimeAssignmentStatusContract.maximumSecretVersions} entries`);
    } else {
      for (let index = 0; index < secretVersions.length; index += 1) {
        const reference = readExactDataRecord(readOwnDataValue(secretVersions, index), ['secretId', 'secretVersionId']);
        if (
          reference === null
          || !isCanonicalId(readOwnDataValue(reference, 'secretId'))
          || !isCanonicalId(readOwnDataValue(reference, 'secretVersionId'))
        ) {
          reasons.push(`${pathArg}.secretVersions[${index}] must be a secret version reference`);
        }
      }
    }
    return reasons;
  } catch {
    return [`${pathArg} could not be read as plain data`];
  }
};
