import type { IOperationHost, IDeclaredOperation } from '../core/operations.js';
import { adminMutation, adminQuery } from '../core/operations.js';
import { findPage, nextCursorMember, oldestFirst, orderedPageShape } from '../core/pagination.js';
import { isIdString, isPositiveInteger } from '../core/validation.js';
import type { IClusterReads } from '../manager.cluster/ports.js';
import { serviceKind } from '../manager.service/documents.js';
import type { ISecretGroupDocument } from './secretgroups.js';
import {
  checkSecretGroupWritable,
  checkSecretVersionWritable,
  decideSecretGroupCreation,
  decideSecretGroupDeletion,
  decideSecretVersion,
  newSecretGroupDocument,
  readRecipientsOf,
  secretGroupKind,
  toPublicSecretGroup,
} from './secretgroups.js';

/**
 * The four methods of secret groups (docs/secrets.md, "Secret groups"). Each is one document's
 * compare-and-swap, so a rotation cut short by a crash leaves the old set of versions or the new
 * one; dry run and the audit log come from the pipeline like every admin method's.
 */
export const secretGroupOperations = (hostArg: IOperationHost, clustersArg: IClusterReads): IDeclaredOperation[] => {
  const store = hostArg.store;
  const publicGroup = async (docArg: ISecretGroupDocument) => toPublicSecretGroup(docArg, await readRecipientsOf(store, docArg.clusterIds));
  return [
    adminMutation({
      method: 'createSecretGroup',
      access: 'write',
      input: { required: { group: checkSecretGroupWritable } },
      facts: async (request) => {
        for (const clusterId of request.group.clusterIds) {
          await clustersArg.requireCluster(clusterId);
        }
        return undefined;
      },
      target: (request) => ({ kind: secretGroupKind, id: request.group.key }),
      decide: (current, { request, now }) => decideSecretGroupCreation(current, newSecretGroupDocument(request.group, now)),
      answer: async ({ doc }) => ({ group: await publicGroup(doc!) }),
    }),
    adminMutation({
      method: 'addSecretVersion',
      access: 'write',
      input: { required: { secretGroupId: isIdString, expectedGeneration: isPositiveInteger, version: checkSecretVersionWritable } },
      facts: async (request, context) => {
        // The recipients are read before the decision: an enrollment racing it makes the copies
        // `reseal-required` afterwards, which getSecretGroups then shows.
        const group = await store.get(secretGroupKind, request.secretGroupId);
        const recipients = await readRecipientsOf(store, group?.clusterIds ?? []);
        const currentRecipients = new Map((group?.clusterIds ?? []).map((clusterId) => [clusterId, recipients.get(clusterId)?.current.recipientId ?? null]));
        return { currentRecipients, actor: context.identity.name };
      },
      target: (request) => ({ kind: secretGroupKind, id: request.secretGroupId }),
      decide: (current, { request, facts, now }) => decideSecretVersion(current, request, { ...facts, now }),
      answer: async ({ doc }) => ({ group: await publicGroup(doc!) }),
    }),
    adminQuery({
      method: 'getSecretGroups',
      access: 'read',
      input: { required: {}, optional: orderedPageShape('getSecretGroups', oldestFirst('createdAt')) },
      run: async (request) => {
        const page = await findPage(store, secretGroupKind, {}, 'getSecretGroups', request, oldestFirst('createdAt'));
        const recipients = await readRecipientsOf(store, page.items.flatMap((group) => group.clusterIds));
        return { groups: page.items.map((group) => toPublicSecretGroup(group, recipients)), ...nextCursorMember(page) };
      },
    }),
    adminMutation({
      method: 'deleteSecretGroup',
      access: 'write',
      input: { required: { secretGroupId: isIdString, expectedGeneration: isPositiveInteger } },
      facts: async (request) => {
        const services = await store.find(serviceKind, {});
        return {
          users: services
            .filter((service) => Object.values(service.secrets ?? {}).some((reference) => reference.secretId === request.secretGroupId))
            .map((service) => service.id),
        };
      },
      target: (request) => ({ kind: secretGroupKind, id: request.secretGroupId }),
      decide: (current, { request, facts }) => decideSecretGroupDeletion(current, request, facts.users),
      answer: (_outcome, { request }) => ({ secretGroupId: request.secretGroupId, deleted: true as const }),
    }),
  ];
};
