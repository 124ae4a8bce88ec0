import { readServiceDataField, readServiceDataRecord, reasonsForUnknownKeys, validateServiceCanonicalId } from '../private/servicecontract.js';
import { collectValidatorReasons } from '../private/dataproperties.js';

/**
 * The organizations services belong to. Project's own definition: the spec refuses a service whose
 * organization is missing (`organization-missing`) but does not say where organizations live, so
 * Cloudly keeps a registry of them. A service names its organization by id.
 */
export interface IOrganization {
  id: string;
  name: string;
  /** Server-managed compare-and-swap token. */
  generation: number;
  createdAt: number;
}

/** What `createOrganization` takes. */
export interface IOrganizationWritable {
  id: string;
  name: string;
}

export const organizationLimits = Object.freeze({ maximumNameLength: 128 } as const);

/** Every reason a value is not a writable organization, by path. */
export const validateOrganizationWritable = (valueArg: unknown, pathArg = 'organization'): string[] =>
  collectValidatorReasons(pathArg, () => {
    const record = readServiceDataRecord(valueArg);
    if (record === null) {
      return [`${pathArg} must be a plain object`];
    }
    const reasons = reasonsForUnknownKeys(record, ['id', 'name'], pathArg);
    reasons.push(...validateServiceCanonicalId(readServiceDataField(record, 'id'), `${pathArg}.id`));
    const name = readServiceDataField(record, 'name');
    if (typeof name !== 'string' || name.trim().length === 0 || name.length > organizationLimits.maximumNameLength) {
      reasons.push(`${pathArg}.name must be a non-blank string of at most ${organizationLimits.maximumNameLength} characters`);
    }
    return reasons;
  });
