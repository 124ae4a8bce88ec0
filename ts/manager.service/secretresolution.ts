import type { ISealedSecret, ISecretVersionReference } from '../interfaces/data/secret.js';
import type { TServiceSecretEnvironment } from '../interfaces/data/serviceenvironment.js';
import type { ISecretGroupDocument } from '../manager.secret/secretgroups.js';
import type { ISecretRecipientsDocument } from '../manager.secret/documents.js';

/**
 * How each secret a service names stands for delivery to its cluster: one rule shared by the
 * verdict (`secret-version-missing`, the environment's size), the status answer (what is missing)
 * and the desired state (the sealed copy the relay receives). Pure.
 */

/** Why a named secret cannot reach the service's cluster. */
export type TServiceSecretMissingCause =
  /** No group of that id, or the group keeps no version of that id (never added, dropped by retention, or the group deleted). */
  | 'version-missing'
  /** The version holds no copy sealed for the service's cluster (the group does not name it). */
  | 'not-sealed-for-cluster'
  /** The copy is sealed to a recipient the cluster holds neither as current nor as previous: its relay cannot open it. */
  | 'recipient-gone';

export type TServiceSecretResolution =
  | { name: string; reference: ISecretVersionReference; state: 'deliverable'; version: number; valueBytes: number; sealed: ISealedSecret; resealRequired: boolean }
  | { name: string; reference: ISecretVersionReference; state: 'missing'; cause: TServiceSecretMissingCause };

export const resolveServiceSecrets = (
  serviceArg: { clusterId: string; secrets?: TServiceSecretEnvironment },
  groupsArg: ReadonlyMap<string, Pick<ISecretGroupDocument, 'versions'>>,
  recipientsArg: Pick<ISecretRecipientsDocument, 'current' | 'previous'> | null,
): TServiceSecretResolution[] =>
  Object.keys(serviceArg.secrets ?? {}).sort().map((name) => {
    const reference = serviceArg.secrets![name];
    const version = groupsArg.get(reference.secretId)?.versions.find((candidate) => candidate.secretVersionId === reference.secretVersionId);
    if (!version) {
      return { name, reference, state: 'missing', cause: 'version-missing' };
    }
    const sealed = version.sealed.find((copy) => copy.binding.clusterId === serviceArg.clusterId);
    if (!sealed) {
      return { name, reference, state: 'missing', cause: 'not-sealed-for-cluster' };
    }
    const current = recipientsArg?.current.recipientId === sealed.recipientId;
    if (!current && recipientsArg?.previous?.recipientId !== sealed.recipientId) {
      return { name, reference, state: 'missing', cause: 'recipient-gone' };
    }
    return { name, reference, state: 'deliverable', version: version.version, valueBytes: version.valueBytes, sealed, resealRequired: !current };
  });
