import type { ICluster } from '../interfaces/data/cluster.js';
import { defineDocumentKind, type IStoredDocument, ownedByClusterOfId } from '../core/store.js';

/**
 * The cluster document. A relay token is 256 random bits, shown once when it is made and stored
 * only as its sha256 (a guess of a 256-bit secret is hopeless, so a slow hash buys nothing).
 */
export interface IClusterDocument extends IStoredDocument {
  name: string;
  createdAt: number;
  relayTokenHash: string;
  relayTokenGeneration: number;
}

export const clusterKind = defineDocumentKind<IClusterDocument>('CloudlyCluster', { owners: ownedByClusterOfId });

/** What callers see of a cluster: never the token hash. */
export const toPublicCluster = (docArg: IClusterDocument): ICluster => ({
  id: docArg.id,
  name: docArg.name,
  generation: docArg.generation,
  createdAt: docArg.createdAt,
  relayTokenGeneration: docArg.relayTokenGeneration,
});
