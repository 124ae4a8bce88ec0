import type { Cloudly } from '../classes.cloudly.js';
import { refuseNamed } from '../core/errors.js';
import { adminMutation, adminQuery, type IDeclaredOperation } from '../core/operations.js';
import { findPage, nextCursorMember, pageShape } from '../core/pagination.js';
import { defineDocumentKind, type DocumentStore, type IStoredDocument, type TDecision } from '../core/store.js';
import { isIdString, isPositiveInteger, sentenceCheck, type TFieldCheck } from '../core/validation.js';
import { validateOrganizationWritable, type IOrganization } from '../interfaces/data/organization.js';

/**
 * The organization registry: the fact `organization-missing` is judged against. A service names
 * its organization by id; the verdict refuses a service whose organization the registry does not
 * hold. Creating a service in an organization not registered yet registers it (named by its id), so
 * naming an organization is enough to start using one; removing it from the registry is an
 * administrator's explicit act, and its services are refused until it is registered again.
 */

export interface IOrganizationDocument extends IStoredDocument {
  name: string;
  createdAt: number;
}

export const organizationKind = defineDocumentKind<IOrganizationDocument>('CloudlyOrganization');

export const toPublicOrganization = (docArg: IOrganizationDocument): IOrganization => ({
  id: docArg.id, name: docArg.name, generation: docArg.generation, createdAt: docArg.createdAt,
});

/** A new organization under the id asked for; an id already registered is `conflict`. */
export const decideOrganizationCreation = (
  currentArg: IOrganizationDocument | null,
  organizationArg: { id: string; name: string },
  nowArg: number,
): TDecision<IOrganizationDocument> =>
  (currentArg
    ? { kind: 'refuse', refusal: refuseNamed('conflict', 'organization-exists', `organization ${organizationArg.id} exists already`) }
    : { kind: 'create', doc: { id: organizationArg.id, name: organizationArg.name, createdAt: nowArg } });

/** Removal, compare-and-swap on the generation the caller read. */
export const decideOrganizationDeletion = (
  currentArg: IOrganizationDocument | null,
  requestArg: { organizationId: string; expectedGeneration: number },
): TDecision<IOrganizationDocument> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'organization-not-found', `organization ${requestArg.organizationId} does not exist`) };
  }
  if (currentArg.generation !== requestArg.expectedGeneration) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'generation-mismatch', "is not the organization's current generation", 'request.expectedGeneration') };
  }
  return { kind: 'remove' };
};

/**
 * Registers the organizations named that the registry does not hold yet, each by a create-only
 * insert (a concurrent registration of the same id is the same fact). Named by their id.
 */
export const registerNamedOrganizations = async (storeArg: DocumentStore, organizationIdsArg: Iterable<string>): Promise<number> => {
  let registered = 0;
  for (const organizationId of new Set(organizationIdsArg)) {
    if (await storeArg.get(organizationKind, organizationId)) {
      continue;
    }
    if (await storeArg.insert(organizationKind, { id: organizationId, name: organizationId, createdAt: Date.now() })) {
      registered++;
    }
  }
  return registered;
};

export const organizationOperations = (cloudlyArg: Cloudly): IDeclaredOperation[] => {
  const isWritable: TFieldCheck = sentenceCheck(validateOrganizationWritable);
  return [
    adminMutation({
      method: 'createOrganization',
      access: 'write',
      input: { required: { organization: isWritable } },
      target: (request) => ({ kind: organizationKind, id: request.organization.id }),
      decide: (current, { request, now }) => decideOrganizationCreation(current, request.organization, now),
      answer: ({ doc }) => ({ organization: toPublicOrganization(doc!) }),
    }),
    adminQuery({
      method: 'getOrganizations',
      access: 'read',
      input: { required: {}, optional: pageShape('getOrganizations') },
      run: async (request) => {
        const page = await findPage(cloudlyArg.store, organizationKind, {}, 'getOrganizations', request);
        return { organizations: page.items.map(toPublicOrganization), ...nextCursorMember(page) };
      },
    }),
    adminMutation({
      method: 'deleteOrganization',
      access: 'write',
      input: { required: { organizationId: isIdString, expectedGeneration: isPositiveInteger } },
      target: (request) => ({ kind: organizationKind, id: request.organizationId }),
      decide: (current, { request }) => decideOrganizationDeletion(current, request),
      answer: (_result, { request }) => ({ organizationId: request.organizationId, deleted: true as const }),
    }),
  ];
};
