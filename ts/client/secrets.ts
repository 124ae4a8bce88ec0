import { sealSecret } from '../core/hpkeseal.js';
import { secretGroupContract, serviceSecretBinding, type ISecretGroup, type ISecretVersionWritable } from '../interfaces/data/secret.js';
import type { ICloudlyMethods } from '../interfaces/requests/methodmap.js';

/**
 * Sealing a secret version in the client, so Cloudly never sees the value: the value is sealed
 * here to the current recipient of every cluster the group names, and only the sealed copies are
 * sent (`addSecretVersion`). The CLI uses it, and so does the dashboard in the browser (nothing here
 * needs Node: WebCrypto only); so can any program holding an administrator's client. The format is
 * docs/secrets.md's, "Secret groups".
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

/** A version id as the client library draws it: `v<version>-<12 hex digits>`. */
const newSecretVersionId = (versionArg: number): string => {
  const random = globalThis.crypto.getRandomValues(new Uint8Array(6));
  return `v${versionArg}-${Array.from(random, (byteArg) => byteArg.toString(16).padStart(2, '0')).join('')}`;
};

/**
 * Seals `valueArg` for every cluster of `groupArg` as its next version, or, with `resealArg`, as
 * that existing version again; answers the version as `addSecretVersion` carries it, sending
 * nothing but the recipients' reads. A caller that dry-runs first sends the same copies twice.
 */
export const sealSecretVersionCopies = async (
  callerArg: ISecretSealingCaller,
  groupArg: ISecretGroup,
  valueArg: Uint8Array,
  optionsArg: { reseal?: string } = {},
): Promise<ISecretVersionWritable> => {
  if (valueArg.length > secretGroupContract.maximumValueBytes) {
    throw new SecretSealingError(`a secret value holds at most ${secretGroupContract.maximumValueBytes} bytes`);
  }
  let secretVersionId: string;
  let version: number;
  if (optionsArg.reseal !== undefined) {
    const existing = groupArg.versions.find((candidate) => candidate.secretVersionId === optionsArg.reseal);
    if (!existing) {
      throw new SecretSealingError(`group ${groupArg.id} keeps no version ${optionsArg.reseal}`);
    }
    ({ secretVersionId, version } = existing);
  } else {
    version = (groupArg.versions[0]?.version ?? 0) + 1;
    secretVersionId = newSecretVersionId(version);
  }
  const sealed = [];
  for (const clusterId of groupArg.clusterIds) {
    const { current } = await callerArg.call('getSecretRecipients', { clusterId });
    if (!current) {
      throw new SecretSealingError(`cluster ${clusterId} has enrolled no secret recipient yet: its relay must enroll one first`);
    }
    sealed.push(await sealSecret(current, serviceSecretBinding(clusterId, groupArg.id, secretVersionId, version), valueArg));
  }
  return { secretVersionId, version, sealed };
};

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
  const writable = await sealSecretVersionCopies(callerArg, group, valueArg, optionsArg.reseal === undefined ? {} : { reseal: optionsArg.reseal });
  const answer = await callerArg.call('addSecretVersion', {
    secretGroupId: group.id,
    expectedGeneration: group.generation,
    version: writable,
    ...(optionsArg.dryRun ? { dryRun: true } : {}),
  } as Omit<ICloudlyMethods['addSecretVersion']['request'], 'identity'>);
  return { group: answer.group, secretVersionId: writable.secretVersionId, version: writable.version };
};
