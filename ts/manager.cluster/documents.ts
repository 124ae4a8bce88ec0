import type { ICluster } from '../interfaces/data/cluster.js';
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
}

// Audit events show a rename and which relay token generation is current, never the token's hash.
// No controller reads the relay token: a rotation wakes none of them.
export const clusterKind = defineDocumentKind<IClusterDocument>('CloudlyCluster', {
  owners: ownedByClusterOfId,
  auditedFields: ['name', 'relayTokenGeneration'],
  bookkeepingFields: ['relayTokenHash', 'relayTokenGeneration'],
});

/** What callers see of a cluster: never the token hash. */
export const toPublicCluster = (docArg: IClusterDocument): ICluster => ({
  id: docArg.id,
  name: docArg.name,
  generation: docArg.generation,
  createdAt: docArg.createdAt,
  relayTokenGeneration: docArg.relayTokenGeneration,
});

/** Every cluster's id, in one read (the full passes of the controllers keyed by cluster). */
export const allClusterIds = async (storeArg: DocumentStore): Promise<string[]> =>
  (await storeArg.collection(clusterKind).find({}, { projection: { _id: 0, id: 1 } }).toArray()).map((docArg) => String(docArg.id));
