/**
 * Which reconcile keys a committed change affects: pure, so the table below is the one place that
 * says what triggers what (docs/reconciler.md repeats it for operators).
 *
 * A key names the unit the reconciler works on:
 * - `service:<id>`: the service's runtime verdict (which also runs its cluster's lease allocation);
 * - `cluster:<id>`: every service of the cluster, for inputs they all share (nodes, runtime phase,
 *   leases);
 * - `projections:<id>`: the signed runtime network projection of every node of the cluster;
 * - `all`: every cluster, for the address plan and for the start-up pass and resyncs.
 */

import { leftDerivedInputs, type ICommittedOwners } from '../core/store.js';

export const allServicesKey = 'all';
export const serviceKey = (serviceIdArg: string): string => `service:${serviceIdArg}`;
export const clusterKey = (clusterIdArg: string): string => `cluster:${clusterIdArg}`;
export const projectionsKey = (clusterIdArg: string): string => `projections:${clusterIdArg}`;

export type TParsedReconcileKey =
  | { scope: 'service'; id: string }
  | { scope: 'cluster'; id: string }
  | { scope: 'projections'; id: string }
  | { scope: 'all' };

export const parseReconcileKey = (keyArg: string): TParsedReconcileKey | null => {
  if (keyArg === allServicesKey) {
    return { scope: 'all' };
  }
  const separator = keyArg.indexOf(':');
  const scope = keyArg.slice(0, separator);
  const id = keyArg.slice(separator + 1);
  if (separator < 0 || id === '' || (scope !== 'service' && scope !== 'cluster' && scope !== 'projections')) {
    return null;
  }
  return { scope, id };
};

/** The cluster id in a `<clusterId>/<nodeId>` document id (nodes, lease statements). */
const clusterOfNodeDocument = (idArg: string): string | null => {
  const separator = idArg.indexOf('/');
  return separator > 0 ? idArg.slice(0, separator) : null;
};

type TTrigger = (idArg: string, ownersArg: ICommittedOwners) => string[];

const ofService: TTrigger = (idArg) => [serviceKey(idArg)];
const ofOwningService: TTrigger = (_idArg, ownersArg) => (ownersArg.serviceId ? [serviceKey(ownersArg.serviceId)] : []);
const ofCluster: TTrigger = (idArg) => [clusterKey(idArg)];
const ofClusterProjections: TTrigger = (idArg) => [projectionsKey(idArg)];
const ofOwningClusterProjections: TTrigger = (_idArg, ownersArg) => (ownersArg.clusterId ? [projectionsKey(ownersArg.clusterId)] : []);
const ofNodeCluster: TTrigger = (idArg, ownersArg) => {
  const clusterId = ownersArg.clusterId ?? clusterOfNodeDocument(idArg);
  return clusterId ? [clusterKey(clusterId)] : [];
};

/**
 * The inputs of a runtime verdict, by document kind. Kinds not listed change no verdict; the
 * verdict's own kind (`CloudlyServiceRuntimeStatus`) is deliberately absent, so a reconcile never
 * triggers itself.
 */
const triggersByKind: Readonly<Record<string, TTrigger>> = {
  // The spec, its volumes, their initialization and the claim decisions; its routes and replicas reach the projections.
  CloudlyService: (idArg, ownersArg) => [...ofService(idArg, ownersArg), ...ofOwningClusterProjections(idArg, ownersArg)],
  // What the relay last reported running (converging → converged).
  CloudlyServiceObservedState: ofService,
  // A claim's node answer (storage import pending).
  CloudlyRuntimeLocalStorageClaim: ofOwningService,
  // An image version stored for the service (image plan missing → held).
  CloudlyImageVersion: ofOwningService,
  // Platform bindings and their status (bindings / legacy adoption pending).
  CloudlyPlatformBinding: ofOwningService,
  // The cluster itself, and its runtime phase (kept in the ingress slot).
  CloudlyCluster: ofCluster,
  CloudlyClusterIngressSlot: ofCluster,
  // Nodes joining and leaving (no eligible node; lease placement).
  CloudlyClusterNode: ofNodeCluster,
  // The relay's lease statements.
  CloudlyRuntimeNetworkLeases: ofNodeCluster,
  // The relay's registration: its host reaches the projections, its stated capabilities every
  // verdict of the cluster (the *-unsupported refusals).
  CloudlyClusterRelayRegistration: (idArg, ownersArg) => [...ofCluster(idArg, ownersArg), ...ofClusterProjections(idArg, ownersArg)],
  // What only the node projections carry: a node's applied projection. (The route table is derived
  // from the services and written by the desired-state computation; it is no input.)
  CloudlyRuntimeNetworkProjection: ofOwningClusterProjections,
  // The organization registry: every service naming it, in whichever cluster (organization-missing).
  CloudlyOrganization: () => [allServicesKey],
  // The address plan: every cluster's leases.
  CloudlyRuntimeNetworkAddressPlan: () => [allServicesKey],
};

/** The reconcile keys a committed change of `kindArg`/`idArg` affects (none for kinds no verdict reads). */
export const reconcileKeysOf = (kindArg: string, idArg: string, ownersArg: ICommittedOwners = {}): string[] =>
  // A write that left the document's derived inputs as they were (a relay registering again with
  // the same announcement on a new socket) affects no verdict.
  (leftDerivedInputs(ownersArg) ? [] : triggersByKind[kindArg]?.(idArg, ownersArg) ?? []);

/** Whether a change of this kind can affect a verdict at all (the shared-log reader reads owners only for these). */
export const isReconcileInput = (kindArg: string): boolean => kindArg in triggersByKind;
