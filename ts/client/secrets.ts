import { randomBytes } from 'node:crypto';
import { sealSecret } from '../core/sealing.js';
import { secretGroupContract, serviceSecretBinding, type ISecretGroup, type ISecretVersionWritable } from '../interfaces/data/secret.js';
import type { ICloudlyMethods } from '../interfaces/requests/methodmap.js';

/**
 * Sealing a secret version in the client, so Cloudly never sees the value: the value is sealed
 * here to the current recipient of every cluster the group names, and only the sealed copies are
 * sent (`addSecretVersion`). The CLI uses it; so can any program holding an administrator's client.
 * The format is docs/secrets.md's, "Secret groups".
 */

type TMethod = 'getSecretGroups' | 'getSecretRecipients' | 'addSecretVersion';

/** What the function needs of a client: calls of three methods (an admin client fits). */
export interface ISecretSealingCaller {
  call<M extends TMethod>(methodArg: M, requestArg: Omit<ICloudlyMethods[M]['request'], 'identity'>): Promise<ICloudlyMethods[M]['response']>;
}

/** The group of that id, or null; reads page by page. */
export const findSecretGroup = async (callerArg: ISecretSealingCaller, secretGroupIdArg: string): Promise<ISecretGroup | null> => {
  let cursor: string | undefined;
  do {
    const page = await callerArg.call('getSecretGroups', { limit: 100, ...(cursor === undefined ? {} : { cursor }) });
    const found = page.groups.find((group) => group.id === secretGroupIdArg);
    if (found) {
      return found;
    }
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return null;
};

/** Why a version could not be sealed here, before anything was sent. */
export class SecretSealingError extends Error {}

/**
 * Seals `valueArg` for every cluster of the group and adds it as the next version, or, with
 * `resealArg`, seals it again as that existing version (after a cluster enrolled a new recipient:
 * it must be the same value). Answers the group as Cloudly stored it. The value buffer is the
 * caller's: wipe it when done.
 */
export const sealSecretVersion = async (
  callerArg: ISecretSealingCaller,
  secretGroupIdArg: string,
  valueArg: Uint8Array,
  optionsArg: { reseal?: string; dryRun?: boolean } = {},
): Promise<{ group: ISecretGroup; secretVersionId: string; version: number }> => {
  if (valueArg.length > secretGroupContract.maximumValueBytes) {
    throw new SecretSealingError(`a secret value holds at most ${secretGroupContract.maximumValueBytes} bytes`);
  }
  const group = await findSecretGroup(callerArg, secretGroupIdArg);
  if (!group) {
    throw new SecretSealingError(`no secret group ${secretGroupIdArg}`);
  }
  let secretVersionId: string;
  let version: number;
  if (optionsArg.reseal !== undefined) {
    const existing = group.versions.find((candidate) => candidate.secretVersionId === optionsArg.reseal);
    if (!existing) {
      throw new SecretSealingError(`group ${group.id} keeps no version ${optionsArg.reseal}`);
    }
    ({ secretVersionId, version } = existing);
  } else {
    version = (group.versions[0]?.version ?? 0) + 1;
    secretVersionId = `v${version}-${randomBytes(6).toString('hex')}`;
  }
  const sealed = [];
  for (const clusterId of group.clusterIds) {
    const { current } = await callerArg.call('getSecretRecipients', { clusterId });
    if (!current) {
      throw new SecretSealingError(`cluster ${clusterId} has enrolled no secret recipient yet: its relay must enroll one first`);
    }
    sealed.push(await sealSecret(current, serviceSecretBinding(clusterId, group.id, secretVersionId, version), valueArg));
  }
  const writable: ISecretVersionWritable = { secretVersionId, version, sealed };
  const answer = await callerArg.call('addSecretVersion', {
    secretGroupId: group.id,
    expectedGeneration: group.generation,
    version: writable,
    ...(optionsArg.dryRun ? { dryRun: true } : {}),
  } as Omit<ICloudlyMethods['addSecretVersion']['request'], 'identity'>);
  return { group: answer.group, secretVersionId, version };
};
