import type { ICluster } from '../interfaces/data/cluster.js';
import type { ILabelSelector } from '../interfaces/data/clusterlabels.js';
import { type DocumentStore, defineDocumentKind, type IStoredDocument, ownedByClusterOfId } from '../core/store.js';

/**
 * The cluster document. A relay token is 256 random bits, shown once when it is made and stored
 * only as its sha256 (a guess of a 256-bit secret is hopeless, so a slow hash buys nothing).
 */
export interface IClusterDocument extends IStoredDocument {
  name: string;
  createdAt: number;
  relayTokenHash: string;
  relayTokenGeneration: number;
  /** The generation of the last write that changed what controllers read (store.ts, `bookkeepingFields`). */
  inputsGeneration?: number;
  /**
   * The cluster's labels as `key=value` texts, and their keys beside them: a selector becomes a
   * database filter on these (a label key may hold dots, which a field name of a record could not).
   */
  labelPairs?: string[];
  labelKeys?: string[];
}

// Audit events show a rename, which relay token generation is current (never the token's hash)
// and the labels. No controller reads the relay token: a rotation wakes none of them.
export const clusterKind = defineDocumentKind<IClusterDocument>('CloudlyCluster', {
  owners: ownedByClusterOfId,
  auditedFields: ['name', 'relayTokenGeneration', 'labelPairs'],
  bookkeepingFields: ['relayTokenHash', 'relayTokenGeneration'],
});

/** What callers see of a cluster: never the token hash. */
export const toPublicCluster = (docArg: IClusterDocument): ICluster => ({
  id: docArg.id,
  name: docArg.name,
  generation: docArg.generation,
  createdAt: docArg.createdAt,
  relayTokenGeneration: docArg.relayTokenGeneration,
  ...(docArg.labelPairs && docArg.labelPairs.length > 0 ? { labels: labelsOfPairs(docArg.labelPairs) } : {}),
});

/** The stored `key=value` texts of a label set, ordered by key (a value never holds `=`). */
export const labelPairsOf = (labelsArg: Readonly<Record<string, string>>): string[] =>
  Object.keys(labelsArg).sort().map((keyArg) => `${keyArg}=${labelsArg[keyArg]}`);

/** The label set of stored `key=value` texts. */
export const labelsOfPairs = (pairsArg: readonly string[]): Record<string, string> =>
  Object.fromEntries(pairsArg.map((pairArg) => {
    const equals = pairArg.indexOf('=');
    return [pairArg.slice(0, equals), pairArg.slice(equals + 1)];
  }));

/**
 * A parsed selector as a filter on the stored label texts: each requirement one clause, all of
 * them together (Kubernetes' semantics: `!=` and `notin` also select clusters without the key).
 */
export const clusterSelectorFilter = (selectorArg: ILabelSelector): Record<string, unknown> => {
  const clauses = selectorArg.requirements.map((requirement): Record<string, unknown> => {
    const pairs = requirement.values.map((valueArg) => `${requirement.key}=${valueArg}`);
    switch (requirement.operator) {
      case 'equals':
        return { labelPairs: pairs[0] };
      case 'not-equals':
        return { labelPairs: { $ne: pairs[0] } };
      case 'in':
        return { labelPairs: { $in: pairs } };
      case 'notin':
        return { labelPairs: { $nin: pairs } };
      case 'exists':
        return { labelKeys: requirement.key };
      case 'not-exists':
        return { labelKeys: { $ne: requirement.key } };
    }
  });
  return clauses.length === 0 ? {} : { $and: clauses };
};

/** Every cluster's id, in one read (the full passes of the controllers keyed by cluster). */
export const allClusterIds = async (storeArg: DocumentStore): Promise<string[]> =>
  (await storeArg.findFields(clusterKind, {}, ['id'])).map((docArg) => String(docArg.id));
