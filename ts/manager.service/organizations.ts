import type { Cloudly } from '../classes.cloudly.js';
import { refuse, refuseNamed } from '../core/errors.js';
import { adminMutation, adminQuery, type IDeclaredOperation } from '../core/operations.js';
import { findPage, nextCursorMember, pageShape } from '../core/pagination.js';
import { defineDocumentKind, type DocumentStore, type IStoredDocument, type TDecision } from '../core/store.js';
import { isIdString, isPositiveInteger, sentenceCheck, type TFieldCheck } from '../core/validation.js';
import { validateOrganizationWritable, type IOrganization } from '../interfaces/data/organization.js';

/**
 * The organization registry: the fact `organization-missing` is judged against. A service names
 * its organization by id; the verdict refuses a service whose organization the registry does not
 * hold. Creating a service in an organization not registered yet registers it (named by its id), so
 * naming an organization is enough to start using one. Removing it from the registry is an
 * administrator's explicit act, refused while services name it; once removed, nothing registers it
 * again but an administrator (createOrganization, or a createService naming it).
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

/** Why an organization that services still name cannot be deleted; the causes name them. */
export const organizationHasServicesReason = 'organization-has-services';

/** The services named in the refusal's causes; past this many, one more cause counts the rest. */
const namedServicesLimit = 20;

/** A service naming an organization, as the deletion's refusal lists it. */
export interface INamingService {
  id: string;
  name: string;
}

/**
 * Removal, compare-and-swap on the generation the caller read, while no service names the
 * organization (a service naming it would be refused `organization-missing`, so it is deleted or
 * moved first).
 */
export const decideOrganizationDeletion = (
  currentArg: IOrganizationDocument | null,
  requestArg: { organizationId: string; expectedGeneration: number },
  namingServicesArg: readonly INamingService[],
): TDecision<IOrganizationDocument> => {
  if (!currentArg) {
    return { kind: 'refuse', refusal: refuseNamed('not-found', 'organization-not-found', `organization ${requestArg.organizationId} does not exist`) };
  }
  if (currentArg.generation !== requestArg.expectedGeneration) {
    return { kind: 'refuse', refusal: refuseNamed('conflict', 'generation-mismatch', "is not the organization's current generation", 'request.expectedGeneration') };
  }
  if (namingServicesArg.length > 0) {
    const causes = namingServicesArg.slice(0, namedServicesLimit).map((serviceArg) => ({
      path: 'request.organizationId', message: `named by service ${serviceArg.id} (${serviceArg.name})`,
    }));
    if (namingServicesArg.length > namedServicesLimit) {
      causes.push({ path: 'request.organizationId', message: `named by ${namingServicesArg.length - namedServicesLimit} more service(s)` });
    }
    return { kind: 'refuse', refusal: refuse('conflict', [organizationHasServicesReason], { causes }) };
  }
  return { kind: 'remove' };
};

/** One-time upgrade steps this database has had, one document each (id: the step). */
interface IUpgradeStepDocument extends IStoredDocument {
  doneAt: number;
}

export const upgradeStepKind = defineDocumentKind<IUpgradeStepDocument>('CloudlyUpgradeStep', { audited: false });

/** The step that registered the organizations that services stored before the registry named. */
export const organizationRegistryStep = 'organization-registry';

/**
 * Registers, once per database, the organizations that services stored before the registry existed
 * name. Later starts register nothing, so an organization deleted since is never brought back.
 * A database whose registry already holds an organization was written with the registry: nothing
 * is registered there either. Returns how many were registered.
 */
export const registerOrganizationsOfOlderServices = async (storeArg: DocumentStore, namedArg: () => Promise<Iterable<string>>): Promise<number> => {
  if (await storeArg.get(upgradeStepKind, organizationRegistryStep)) {
    return 0;
  }
  const registryInUse = (await storeArg.find(organizationKind, {}, { limit: 1 })).length > 0;
  const registered = registryInUse ? 0 : await registerNamedOrganizations(storeArg, await namedArg());
  // Create-only: instances starting at once record the step once (their registrations are the same fact).
  await storeArg.insert(upgradeStepKind, { id: organizationRegistryStep, doneAt: Date.now() });
  return registered;
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

/**
 * The organization methods. `namingServicesArg` lists the services that name an organization
 * (the service domain's fact; the deletion is refused while there is one).
 */
export const organizationOperations = (cloudlyArg: Cloudly, namingServicesArg: (organizationIdArg: string) => Promise<INamingService[]>): IDeclaredOperation[] => {
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
      // Read before the removal: a service created in between names an organization then missing,
      // and is refused organization-missing (never a reason to register it again).
      facts: async (request) => ({ namingServices: await namingServicesArg(request.organizationId) }),
      target: (request) => ({ kind: organizationKind, id: request.organizationId }),
      decide: (current, { request, facts }) => decideOrganizationDeletion(current, request, facts.namingServices),
      answer: (_result, { request }) => ({ organizationId: request.organizationId, deleted: true as const }),
    }),
  ];
};
