import { defineDocumentKind, type IStoredDocument, ownedByClusterOfNodeId } from '../core/store.js';
import type {
  IRuntimeNetworkProjection,
  IRuntimeNetworkProjectionApplication,
  IRuntimeNetworkWorkloadLease,
} from '../interfaces/data/runtimenetwork.js';
import type { IRuntimeNetworkAddressPlan } from '../interfaces/data/runtimenetworkaddressplan.js';

/**
 * The runtime network's documents: the authority's address plan (one per Cloudly), and per node
 * its current projection and its latest lease statement.
 */

/** The one address plan document. */
export interface IRuntimeNetworkAddressPlanDocument extends IStoredDocument {
  plan: IRuntimeNetworkAddressPlan;
  writtenAt: number;
  writtenBy: string;
}

/** One node's current projection and the node's latest application of it. Id `cluster/node`. */
export interface IRuntimeNetworkProjectionDocument extends IStoredDocument {
  clusterId: string;
  nodeId: string;
  projection: IRuntimeNetworkProjection;
  application?: IRuntimeNetworkProjectionApplication;
  computedAt: number;
}

/**
 * One node's latest lease statement: the leases of Cloudly's allocation the node confirms it
 * applied. Id `cluster/node`. Only a confirmed lease becomes a projection endpoint.
 */
export interface IRuntimeNetworkLeasesDocument extends IStoredDocument {
  clusterId: string;
  nodeId: string;
  leases: IRuntimeNetworkWorkloadLease[];
  reportedAt: number;
}

export const runtimeNetworkAddressPlanKind = defineDocumentKind<IRuntimeNetworkAddressPlanDocument>('CloudlyRuntimeNetworkAddressPlan');
export const runtimeNetworkProjectionKind = defineDocumentKind<IRuntimeNetworkProjectionDocument>('CloudlyRuntimeNetworkProjection', { owners: ownedByClusterOfNodeId });
export const runtimeNetworkLeasesKind = defineDocumentKind<IRuntimeNetworkLeasesDocument>('CloudlyRuntimeNetworkLeases', { owners: ownedByClusterOfNodeId });

/** The authority's plan is a singleton: one Cloudly, one runtime network authority. */
export const addressPlanDocumentId = 'runtime-network-address-plan';

/** A detached plain copy of stored data, so callers never share objects with the driver's documents. */
export const detach = <T>(valueArg: T): T => JSON.parse(JSON.stringify(valueArg)) as T;
