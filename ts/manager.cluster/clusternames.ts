import { createHash } from 'node:crypto';
import { defineDocumentKind, type DocumentStore, type IDocumentKind, type IStoredDocument } from '../core/store.js';
import type { IClusterDocument } from './documents.js';

/**
 * Unique cluster names, decided by the database. The embedded database enforces no unique index,
 * so a name is claimed by inserting a reservation whose id is derived from the name: of any number
 * of concurrent `store.insert`s of one id exactly one wins. The reservation holds everything the
 * cluster document needs, so the cluster can always be derived from it:
 *
 * 1. insert the reservation (`pending`, with the whole cluster document): the name is decided here;
 * 2. insert the cluster under the id the reservation names;
 * 3. swap the reservation to `bound`.
 *
 * A crash (or a slow creator) between these steps is settled by whoever meets the reservation next
 * (`settleClusterNameReservation`, at start-up for all of them and on a creation that finds the name
 * taken): `pending` with no cluster → the cluster is inserted from the reservation (roll forward,
 * idempotent by its id; a relay token nobody received can be rotated); `pending` with the cluster →
 * `bound`; `bound` with no cluster → the cluster was deleted, the reservation is removed. A deletion
 * settles the reservation to `bound` before it removes the cluster, so a deleted cluster is never
 * rolled forward again. Reservations are an index, not a change anyone asked for: not audited.
 */

export interface IClusterNameReservationDocument extends IStoredDocument {
  name: string;
  clusterId: string;
  state: 'pending' | 'bound';
  /** The cluster as its creator inserts it; what a roll-forward inserts. */
  cluster: Omit<IClusterDocument, 'generation'>;
}

export const clusterNameReservationKind = defineDocumentKind<IClusterNameReservationDocument>('CloudlyClusterNameReservation', { audited: false });

/** The reservation id of a name: one id per exact name, so two creators of one name race on one insert. */
export const clusterNameReservationId = (nameArg: string): string =>
  `cluster-name-${createHash('sha256').update(nameArg, 'utf8').digest('hex').slice(0, 48)}`;

export type TReservationSettlement = 'bound' | 'rolled-forward' | 'released' | 'gone';

/**
 * Brings one reservation to a state without half of a creation or deletion in it (see above).
 * Idempotent and safe to run concurrently with a creator or a deleter of the same name.
 */
export const settleClusterNameReservation = async (
  storeArg: DocumentStore,
  clusterKindArg: IDocumentKind<IClusterDocument>,
  reservationIdArg: string,
): Promise<TReservationSettlement> => {
  const reservation = await storeArg.get(clusterNameReservationKind, reservationIdArg);
  if (!reservation) {
    return 'gone';
  }
  let cluster = await storeArg.get(clusterKindArg, reservation.clusterId);
  if (!cluster && reservation.state === 'bound') {
    await storeArg.remove(clusterNameReservationKind, reservation.id, reservation.generation);
    return 'released';
  }
  let rolledForward = false;
  if (!cluster) {
    cluster = await storeArg.insert(clusterKindArg, reservation.cluster);
    rolledForward = cluster !== null;
  }
  if (reservation.state === 'pending') {
    await storeArg.swap(clusterNameReservationKind, reservation.id, reservation.generation, { set: { state: 'bound' } });
  }
  return rolledForward ? 'rolled-forward' : 'bound';
};

/**
 * Start-up: gives every cluster made before names were reserved its reservation (bound), the
 * oldest first, so its name is taken from now on (of clusters that already shared a name, the
 * oldest holds it); then settles every reservation a process that died inside a creation or
 * deletion left. Both collections are read once: a reservation bound to a cluster that exists is
 * already settled (settling it would read both and write nothing), and a name that has its
 * reservation is not inserted again, so after the first start a start writes nothing and reads
 * two collections, not two documents per cluster.
 */
export const settleClusterNamesAtStart = async (storeArg: DocumentStore, clusterKindArg: IDocumentKind<IClusterDocument>): Promise<void> => {
  // Only the fields the decisions need: a reservation holds a copy of its cluster, and both are
  // read whole only where something is to be written.
  const clusters = await storeArg.findFields(clusterKindArg, {}, ['id', 'name'], { sort: { createdAt: 1 } });
  const reservations = await storeArg.findFields(clusterNameReservationKind, {}, ['id', 'state', 'clusterId']);
  const reserved = new Set(reservations.map((reservationArg) => reservationArg.id));
  for (const { id, name } of clusters) {
    const reservationId = clusterNameReservationId(name);
    if (reserved.has(reservationId)) {
      continue;
    }
    const cluster = await storeArg.get(clusterKindArg, id);
    if (!cluster) {
      continue;
    }
    reserved.add(reservationId);
    const { generation: _generation, ...clusterFields } = cluster;
    // Bound to a cluster that exists: settled as it is inserted.
    await storeArg.insert(clusterNameReservationKind, {
      id: reservationId,
      name: cluster.name,
      clusterId: cluster.id,
      state: 'bound',
      cluster: clusterFields,
    });
  }
  const clusterIds = new Set(clusters.map((clusterArg) => clusterArg.id));
  for (const reservation of reservations) {
    if (reservation.state === 'bound' && clusterIds.has(reservation.clusterId)) {
      continue;
    }
    await settleClusterNameReservation(storeArg, clusterKindArg, reservation.id);
  }
};
