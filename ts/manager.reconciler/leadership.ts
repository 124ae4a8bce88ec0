import { defineDocumentKind, type DocumentStore, type IStoredDocument, type TDecision } from '../core/store.js';

/**
 * Which instance reconciles: one at a time, like kube-controller-manager's leader election on a
 * Lease object. The lease is one document; taking it over and renewing it are compare-and-swaps on
 * its generation, so the database decides between instances. The holder renews it every
 * heartbeat; when the holder dies, another instance takes it once it has run out (the relay lease
 * timing: 15 s by default). A holder that cannot renew stops counting itself the leader when its
 * own lease runs out, before anyone else may take it.
 */

export interface IReconcilerLeaseDocument extends IStoredDocument {
  /** The instance holding the lease (its relay election instance id). */
  holder: string;
  /** Epoch milliseconds; after this anyone may take the lease. */
  expiresAt: number;
}

// Renewals are not changes anyone asked for: no audit event.
export const reconcilerLeaseKind = defineDocumentKind<IReconcilerLeaseDocument>('CloudlyReconcilerLease', { audited: false });
const leaseId = 'reconciler';

/** The decision on the lease for `instanceArg` at `nowArg`: take or renew it when it is ours or free. */
export const decideReconcilerLease = (
  currentArg: IReconcilerLeaseDocument | null,
  instanceArg: string,
  nowArg: number,
  ttlMsArg: number,
): TDecision<IReconcilerLeaseDocument> => {
  if (!currentArg) {
    return { kind: 'create', doc: { id: leaseId, holder: instanceArg, expiresAt: nowArg + ttlMsArg } };
  }
  if (currentArg.holder === instanceArg || currentArg.expiresAt <= nowArg) {
    return { kind: 'write', change: { set: { holder: instanceArg, expiresAt: nowArg + ttlMsArg } } };
  }
  return { kind: 'keep' };
};

export class ReconcilerLeadership {
  /** Until when this instance's lease is known to hold (0: not the leader). */
  private heldUntil = 0;

  /**
   * `soleInstanceArg`: the embedded database lives inside this process and its data directory is
   * locked to it, so no other instance can exist: this one reconciles, and no lease is written
   * (an idle installation writes nothing).
   */
  constructor(
    private readonly store: DocumentStore,
    private readonly instanceId: string,
    private readonly ttlMs: number,
    private readonly soleInstanceArg = false,
  ) {}

  /** True while this instance holds an unexpired lease, as last confirmed by the database. */
  public get isLeader(): boolean {
    return this.soleInstanceArg || this.heldUntil > Date.now();
  }

  /**
   * Takes or renews the lease; answers whether this instance holds it now. A database failure
   * leaves the last confirmed state, which runs out by itself.
   */
  public async renew(): Promise<boolean> {
    if (this.soleInstanceArg) {
      return true;
    }
    const now = Date.now();
    // The holder decides on the lease as it last wrote it: while it holds the lease nobody else
    // writes it, so a renewal is one compare-and-swap (a lost one reads and decides again).
    const { doc } = await this.store.mutate(reconcilerLeaseKind, leaseId, (currentArg) =>
      decideReconcilerLease(currentArg, this.instanceId, now, this.ttlMs), this.written && this.isLeader ? { read: this.written } : {});
    this.heldUntil = doc && doc.holder === this.instanceId ? doc.expiresAt : 0;
    this.written = this.heldUntil > 0 ? doc : null;
    return this.isLeader;
  }

  /** The lease as this instance's last renewal wrote it, while it holds it. */
  private written: IReconcilerLeaseDocument | null = null;

  /** Gives the lease up (on stop), so another instance takes over at once instead of after the TTL. */
  public async release(): Promise<void> {
    if (this.soleInstanceArg || this.heldUntil === 0) {
      return;
    }
    this.heldUntil = 0;
    this.written = null;
    await this.store.mutate(reconcilerLeaseKind, leaseId, (currentArg) =>
      (currentArg && currentArg.holder === this.instanceId ? { kind: 'write', change: { set: { expiresAt: 0 } } } : { kind: 'keep' }));
  }
}
