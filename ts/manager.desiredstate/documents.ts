import { defineDocumentKind, type IStoredDocument, ownedByClusterOfId, ownedByServiceOfId } from '../core/store.js';
import type { IServiceObservedPlacement } from '../interfaces/data/desiredstate.js';

/** Per cluster: the revision and digest of the last desired state Cloudly published. */
export interface IClusterDesiredStateDocument extends IStoredDocument {
  revision: number;
  digest: string;
  /** The highest `desiredRevision` a relay report was accepted at; older reports are stale. */
  observedRevision: number;
}

/** Per service: what the relay last reported of it, per node. */
export interface IServiceObservedStateDocument extends IStoredDocument {
  clusterId: string;
  placements: IServiceObservedPlacement[];
}

export const clusterDesiredStateKind = defineDocumentKind<IClusterDesiredStateDocument>('CloudlyClusterDesiredState', { owners: ownedByClusterOfId });
export const serviceObservedStateKind = defineDocumentKind<IServiceObservedStateDocument>('CloudlyServiceObservedState', { owners: ownedByServiceOfId });
