/**
 * The Secrets page's decisions as pure functions (no DOM, no Lit), tested in the unit lane
 * (test/dashboard.secrets.decision.test.ts): the new group's form as a request, a typed value as
 * the bytes to seal, which copies want a re-seal, and which changes the page reads again for.
 */
import { secretGroupContract, type ISecretGroup, type ISecretGroupWritable, type ISecretVersionClusterState, type ISecretVersionMetadata } from '../../ts/interfaces/data/secret.js';
import type { IChangeEvent } from '../../ts/interfaces/requests/watch.js';

/** What the new-group form holds as typed. */
export interface ISecretGroupFormFields {
  key: string;
  environment: string;
  /** Comma-separated. */
  tags: string;
  clusterIds: string[];
  /** Empty: Cloudly's default. */
  retainedVersions: string;
}

/**
 * The form as `createSecretGroup`'s `group`, or the reasons it cannot be sent. Only what the form
 * itself can tell (a missing member, a count that is not a number in range); the rest (the key's
 * spelling, a taken key, a cluster that is gone) is Cloudly's to answer in the dry run.
 */
export const secretGroupRequestOfForm = (fieldsArg: ISecretGroupFormFields): { request?: ISecretGroupWritable; reasons: string[] } => {
  const reasons: string[] = [];
  const key = fieldsArg.key.trim();
  const environment = fieldsArg.environment.trim();
  const tags = fieldsArg.tags.split(',').map((tag) => tag.trim()).filter((tag) => tag !== '');
  if (key === '') {
    reasons.push('key: a key is required');
  }
  if (environment === '') {
    reasons.push('environment: an environment name is required');
  }
  if (fieldsArg.clusterIds.length === 0) {
    reasons.push('clusterIds: choose at least one cluster to seal the versions for');
  }
  let retainedVersions: number | undefined;
  const retainedText = fieldsArg.retainedVersions.trim();
  if (retainedText !== '') {
    const parsed = /^\d+$/.test(retainedText) ? Number(retainedText) : NaN;
    if (!Number.isInteger(parsed) || parsed < 1 || parsed > secretGroupContract.maximumRetainedVersions) {
      reasons.push(`retainedVersions: "${retainedText}" is not a whole number from 1 to ${secretGroupContract.maximumRetainedVersions}`);
    } else {
      retainedVersions = parsed;
    }
  }
  if (reasons.length > 0) {
    return { reasons };
  }
  return {
    request: { key, tags, environment, clusterIds: [...fieldsArg.clusterIds], ...(retainedVersions === undefined ? {} : { retainedVersions }) },
    reasons,
  };
};

/**
 * A value as typed, as the bytes that are sealed: UTF-8, exactly as typed (no trimming: a
 * password may end in a space). Null with a reason when there is nothing to seal or too much.
 */
export const secretValueBytesOf = (textArg: string): { bytes: Uint8Array; reason: null } | { bytes: null; reason: string } => {
  if (textArg === '') {
    return { bytes: null, reason: 'Type the value to seal.' };
  }
  const bytes = new TextEncoder().encode(textArg);
  if (bytes.length > secretGroupContract.maximumValueBytes) {
    const length = bytes.length;
    bytes.fill(0);
    return { bytes: null, reason: `A secret value holds at most ${secretGroupContract.maximumValueBytes} bytes (this one has ${length}).` };
  }
  return { bytes, reason: null };
};

/** The clusters whose copy of a version must be sealed again by a person holding the value. */
export const clustersNeedingReseal = (versionArg: ISecretVersionMetadata): string[] =>
  versionArg.clusters.filter((cluster) => cluster.state === 'reseal-required').map((cluster) => cluster.clusterId);

/** How a copy stands, in words. */
export const describeSealState = (stateArg: ISecretVersionClusterState['state']): string => {
  switch (stateArg) {
    case 'sealed':
      return 'sealed to the cluster\'s current recipient';
    case 'reseal-required':
      return 'the cluster enrolled a new recipient: its relay opens this copy with the previous key until its next enrollment; seal the value again';
    case 'recipient-gone':
      return 'sealed to a recipient the cluster no longer holds: its relay cannot open it; seal the value again as a new version';
  }
};

/** How many versions of the group have a copy waiting for a re-seal. */
export const versionsNeedingReseal = (groupArg: ISecretGroup): number =>
  groupArg.versions.filter((version) => clustersNeedingReseal(version).length > 0).length;

/**
 * Whether a change is one the page shows: a group changed, or a cluster enrolled a recipient
 * (its copies may now read `reseal-required`). Both make the page list again.
 */
export const isSecretsChange = (changeArg: IChangeEvent): boolean =>
  changeArg.kind === 'CloudlySecretGroup' || changeArg.kind === 'CloudlySecretRecipients';

/** The groups with one replaced (or added in front), as an answer returns it. */
export const withSecretGroup = (groupsArg: readonly ISecretGroup[], groupArg: ISecretGroup): ISecretGroup[] => {
  const index = groupsArg.findIndex((group) => group.id === groupArg.id);
  return index === -1 ? [...groupsArg, groupArg] : groupsArg.map((group, at) => (at === index ? groupArg : group));
};
