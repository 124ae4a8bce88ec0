import type { IController, IReconcileResult } from '../core/controller.js';

/** The ledger is one document: one key. */
const ledgerKey = 'ledger';

/**
 * The binding ledger controller: a platform-binding creation committed to the ledger (several
 * bindings at once, from a legacy adoption) is applied whole and the ledger cleared, by this
 * controller and by the writes that commit the next creation, never by a read (readers leave a
 * pending creation's bindings out until it is applied). Also at start-up: a creation committed
 * before a crash is applied by the start-up pass.
 */
export class BindingLedgerController implements IController {
  public readonly name = 'binding-ledger';
  public readonly writes = ['CloudlyPlatformBindingCreationLedger'] as const;
  public readonly inputs = {
    CloudlyPlatformBindingCreationLedger: () => [ledgerKey],
  };
  public readonly resync = false;

  constructor(private readonly ports: { applyPendingCreation: () => Promise<boolean> }) {}

  public async all(): Promise<readonly string[]> {
    return [ledgerKey];
  }

  public async reconcile(): Promise<IReconcileResult> {
    return { outcome: (await this.ports.applyPendingCreation()) ? 'written' : 'kept' };
  }
}
